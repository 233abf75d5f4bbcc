#pragma once
// A charged particle on the unit sphere g(q) = (|q|^2 - 1)/2 = 0 in R^3, in a
// uniform magnetic field along z and gravity along -z, with a configuration-
// dependent mass: the general quadratic Lagrangian of PCSZ09 eq. (4.1),
//   L = 1/2 m(q) |v|^2 + a(q).v - V(q),
//   m(q) = mass (1 + kappa q_z^2),  a(q) = (field/2) e_z x q,  V = mass gravity q_z.
// m, a.v, V and g are invariant under rotations about z, so the Noether
// momentum J = p.(e_z x q) = q_x p_y - q_y p_x (p = dL/dv = m v + a) is a
// first integral of the exact flow and of any variational integrator whose
// standard layer is equivariant (PCSZ09 §2, discrete Noether theorem).
//
// The "lagrangian" family interface (used by methods/variational.hpp):
// scalar-generic kernels on plain arrays, so that the same formulas run on
// Real and on forward-mode dual numbers (core/dual.hpp) inside the standard
// layer, plus Eigen wrappers on Real for everything else:
//   mass_matrix(q, m[n][n]),  mass_matrix_derivative(q, dm[n][n][n]) (dm[k][i][j] = d m_ij / d q_k),
//   magnetic_potential(q, a[n]),  magnetic_potential_jacobian(q, da[n][n]) (da[i][j] = d a_i / d q_j),
//   potential(q),  potential_gradient(q, dV[n]),
//   constraints(q, g[k]),  constraint_jacobian(q, G[k][n]),  constraint_hessian(q, c, H[n][n]) (H = D^2 g_c).
// T*N is represented as {(q, p) : g(q) = 0, G(q) v = 0, v = m(q)^-1 (p - a(q))}.
#include "tether/core/parameters.hpp"
#include <math.h>

#include "tether/core/random.hpp"
#include "tether/core/status.hpp"
#include "tether/core/types.hpp"

namespace tether {

struct MagneticSphere {
  static constexpr bool lagrangian = true;
  static constexpr const char* name = "magnetic_sphere";
  static constexpr const char* description = "charge on S^2 with mass m(q) = m (1 + kappa z^2) in the field b e_z: a constrained Lagrangian";
  static constexpr const char* citation = "PCSZ09 §§2-4";
  static constexpr int dof = 3;
  static constexpr int constraint_count = 1;
  // The field's force q' x b changes sign with the velocity: p -> -p alone
  // does not reverse the flow (b -> -b must go with it).
  static constexpr bool reversed_by_momentum_flip = false;

  struct Parameters {
    Real mass = 1.0;     // m(q) = mass (1 + kappa q_z^2)
    Real kappa = 0.5;    // > -1 keeps m(q) positive on the sphere
    Real field = 1.0;    // charge x field strength b: a(q) = (b/2)(-q_y, q_x, 0)
    Real gravity = 9.81;

    template <class V>
    void describe(V& v) {
      v.real("mass", mass, Range::positive(), "m in m(q) = m (1 + kappa z^2)");
      v.real("kappa", kappa, Range::above(-1, "the mass (1 + kappa z^2) must stay positive"),
             "configuration dependence of the mass");
      v.real("field", field, Range::any(), "charge x field strength b: a(q) = (b/2)(-y, x, 0)");
      v.real("gravity", gravity, Range::any(), "gravitational acceleration along -z");
    }
  };
  Parameters prm;

  // ---- scalar-generic kernels (T = Real or ad::Dual<...>) ----
  template <class T>
  TETHER_HD void mass_matrix(const T (&q)[3], T (&m)[3][3]) const {
    const T s = prm.mass * (Real(1) + prm.kappa * q[2] * q[2]);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) m[i][j] = i == j ? s : T(0);
  }
  template <class T>
  TETHER_HD void mass_matrix_derivative(const T (&q)[3], T (&dm)[3][3][3]) const {
    const T ds = 2 * prm.mass * prm.kappa * q[2];
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) dm[k][i][j] = (k == 2 && i == j) ? ds : T(0);
  }
  template <class T>
  TETHER_HD void magnetic_potential(const T (&q)[3], T (&a)[3]) const {
    const Real hb = Real(0.5) * prm.field;
    a[0] = -hb * q[1];
    a[1] = hb * q[0];
    a[2] = T(0);
  }
  template <class T>
  TETHER_HD void magnetic_potential_jacobian(const T (&)[3], T (&da)[3][3]) const {
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) da[i][j] = T(0);
    da[0][1] = T(-Real(0.5) * prm.field);
    da[1][0] = T(Real(0.5) * prm.field);
  }
  template <class T>
  TETHER_HD T potential(const T (&q)[3]) const {
    return prm.mass * prm.gravity * q[2];
  }
  template <class T>
  TETHER_HD void potential_gradient(const T (&)[3], T (&dv)[3]) const {
    dv[0] = T(0);
    dv[1] = T(0);
    dv[2] = T(prm.mass * prm.gravity);
  }
  template <class T>
  TETHER_HD void constraints(const T (&q)[3], T (&g)[1]) const {
    g[0] = Real(0.5) * (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] - Real(1));
  }
  template <class T>
  TETHER_HD void constraint_jacobian(const T (&q)[3], T (&G)[1][3]) const {
    for (int i = 0; i < 3; ++i) G[0][i] = q[i];
  }
  template <class T>
  TETHER_HD void constraint_hessian(const T (&)[3], int, T (&H)[3][3]) const {
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) H[i][j] = T(i == j ? 1 : 0);
  }

  // ---- Eigen wrappers on Real ----
  TETHER_HD static void to_array(const Vec<3>& v, Real (&a)[3]) {
    for (int i = 0; i < 3; ++i) a[i] = v[i];
  }
  TETHER_HD Mat<3, 3> mass_matrix(const Vec<3>& q) const {
    Real x[3], m[3][3];
    to_array(q, x);
    mass_matrix(x, m);
    Mat<3, 3> r;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) r(i, j) = m[i][j];
    return r;
  }
  // d m / d q_k.
  TETHER_HD Mat<3, 3> mass_matrix_derivative(const Vec<3>& q, int k) const {
    Real x[3], dm[3][3][3];
    to_array(q, x);
    mass_matrix_derivative(x, dm);
    Mat<3, 3> r;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) r(i, j) = dm[k][i][j];
    return r;
  }
  TETHER_HD Vec<3> magnetic_potential(const Vec<3>& q) const {
    Real x[3], a[3];
    to_array(q, x);
    magnetic_potential(x, a);
    return Vec<3>(a[0], a[1], a[2]);
  }
  TETHER_HD Mat<3, 3> magnetic_potential_jacobian(const Vec<3>& q) const {
    Real x[3], da[3][3];
    to_array(q, x);
    magnetic_potential_jacobian(x, da);
    Mat<3, 3> r;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) r(i, j) = da[i][j];
    return r;
  }
  TETHER_HD Real potential(const Vec<3>& q) const {
    Real x[3];
    to_array(q, x);
    return potential(x);
  }
  TETHER_HD Vec<3> potential_gradient(const Vec<3>& q) const {
    Real x[3], d[3];
    to_array(q, x);
    potential_gradient(x, d);
    return Vec<3>(d[0], d[1], d[2]);
  }
  TETHER_HD Vec<1> constraints(const Vec<3>& q) const {
    Real x[3], g[1];
    to_array(q, x);
    constraints(x, g);
    return Vec<1>(g[0]);
  }
  TETHER_HD Mat<1, 3> constraint_jacobian(const Vec<3>& q) const {
    Real x[3], G[1][3];
    to_array(q, x);
    constraint_jacobian(x, G);
    Mat<1, 3> r;
    for (int i = 0; i < 3; ++i) r(0, i) = G[0][i];
    return r;
  }
  // D^2 g_c.
  TETHER_HD Mat<3, 3> constraint_hessian(const Vec<3>& q, int c) const {
    Real x[3], H[3][3];
    to_array(q, x);
    constraint_hessian(x, c, H);
    Mat<3, 3> r;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) r(i, j) = H[i][j];
    return r;
  }

  TETHER_HD Real length_scale() const { return 1; }
  // mass |gravity| R + b^2 R^2 / mass (the cyclotron energy scale): nonzero
  // unless the particle is free.
  TETHER_HD Real energy_scale() const { return prm.mass * fabs(prm.gravity) + prm.field * prm.field / prm.mass; }

  // ---- phase space, observers ----
  TETHER_HD Real mass_factor(const Vec<3>& q) const { return prm.mass * (1 + prm.kappa * q[2] * q[2]); }
  // v from p = m(q) v + a(q).
  TETHER_HD Vec<3> velocity(const Vec<3>& q, const Vec<3>& p) const {
    return (p - magnetic_potential(q)) / mass_factor(q);
  }
  TETHER_HD Vec<3> momentum(const Vec<3>& q, const Vec<3>& v) const {
    return mass_factor(q) * v + magnetic_potential(q);
  }
  TETHER_HD Real lagrangian_value(const Vec<3>& q, const Vec<3>& v) const {
    return Real(0.5) * mass_factor(q) * v.squaredNorm() + magnetic_potential(q).dot(v) - potential(q);
  }
  // E = 1/2 v.m(q) v + V(q): the magnetic term does no work.
  TETHER_HD Real energy(const Vec<3>& q, const Vec<3>& p) const {
    const Vec<3> v = velocity(q, p);
    return Real(0.5) * mass_factor(q) * v.squaredNorm() + potential(q);
  }
  // G(q) v.
  TETHER_HD Vec<1> velocity_constraints(const Vec<3>& q, const Vec<3>& p) const {
    return Vec<1>(q.dot(velocity(q, p)));
  }
  // J = p.(e_z x q).
  TETHER_HD static Real vertical_momentum(const Vec<3>& q, const Vec<3>& p) { return q[0] * p[1] - q[1] * p[0]; }

  // Moves (q, p) onto T*N: q radially onto the sphere (the projection P of
  // PCSZ09 eq. (3.2) for this g), then p along G(q)^T so that G v = 0.
  TETHER_HD Status project_to_phase_space(Vec<3>& q, Vec<3>& p) const {
    const Real r = q.norm();
    if (!(r > 0) || !is_finite(r)) return Status::singular_matrix;
    q /= r;
    const Vec<3> a = magnetic_potential(q);
    p -= q * q.dot(p - a);  // m(q) is a multiple of the identity: M^-1-orthogonal = Euclidean
    return all_finite(p) ? Status::ok : Status::non_finite;
  }

  // Uniform direction on the sphere.
  template <class Rng>
  TETHER_HD Vec<3> random_configuration(Rng& rng) const {
    return uniform_direction(rng);
  }
  // A momentum on T*_q N with thermal velocity: v ~ N(0, kT m(q)^-1) in the
  // tangent plane, p = m(q) v + a(q).
  template <class Rng>
  TETHER_HD Vec<3> random_momentum(Rng& rng, const Vec<3>& q, Real kT) const {
    Vec<3> v(rng.normal(), rng.normal(), rng.normal());
    v *= sqrt(kT / mass_factor(q));
    v -= q * (q.dot(v) / q.squaredNorm());
    return momentum(q, v);
  }
};

}  // namespace tether

#pragma once
// A chain of N beads in R^3 with N-1 rigid bonds of one length, a bending
// potential on each bond angle and an optional Ryckaert-Bellemans torsion
// potential (RB78) on each dihedral: the united-atom alkane of RCB77 with its
// bond lengths constrained.
// q = (r_0, ..., r_{N-1}) stacked; d_i = r_{i+1} - r_i are the bonds.
#include "tether/core/parameters.hpp"
#include <Eigen/Geometry>  // Vec3::cross
#include <cmath>

#include "tether/core/small_solve.hpp"
#include "tether/core/tile.hpp"

namespace tether {

// An angle and its cosine, set together; reads as the angle in radians. The
// forces read the cosine: evaluated per force on a GPU thread, a double
// cosine costs the step its time and the kernel a stack frame (its
// large-argument path).
struct AngleWithCosine {
  Real radians = 0, cosine = 1;
  AngleWithCosine& operator=(Real r) {
    radians = r;
    cosine = cos(r);
    return *this;
  }
  TETHER_HD operator Real() const { return radians; }
};

struct ChainParameters {
  Real mass = 1.0;
  Real bond_length = 1.0;
  Real bend_stiffness = 10.0;  // k in V = k/2 (cos theta - cos theta0)^2
  // theta0 (109.47 degrees) and cos(theta0), as cos() rounds it.
  AngleWithCosine bend_angle = {1.9106332362, -0.3333333332871182};
  // Ryckaert-Bellemans V(psi) = sum_n c_n cos^n psi, psi = phi - pi (trans = 0).
  Real torsion[6] = {0, 0, 0, 0, 0, 0};
  bool has_torsion = false;

  template <class V>
  void describe(V& v) {
    v.real("mass", mass, Range::positive(), "mass of a bead");
    v.real("bond_length", bond_length, Range::positive(), "length of every bond");
    v.real("bend_stiffness", bend_stiffness, Range::non_negative(), "k in V = k/2 (cos theta - cos theta0)^2");
    v.degrees("bend_angle_degrees", bend_angle.radians, Range::left_open(0, 180), "theta0, the rest bond angle");
    bend_angle = bend_angle.radians;  // and its cosine
    v.reals("torsion", torsion, "Ryckaert-Bellemans coefficients c0..c5 of the dihedral potential");
    has_torsion = false;  // derived: the dihedral forces are skipped when every coefficient is 0
    for (Real c : torsion) has_torsion = has_torsion || c != 0;
  }
};

template <int N>
struct Chain {
  static_assert(N >= 3, "a chain needs at least three beads");
  static constexpr const char* name = "chain";
  static constexpr const char* description = "N beads in R^3 with N-1 rigid bonds, bending and optional Ryckaert-Bellemans torsion";
  static constexpr const char* citation = "RCB77 with bonds constrained; torsion RB78";
  static constexpr Variant variant{"beads", N};
  static constexpr int beads = N;
  static constexpr int dof = 3 * N;
  static constexpr int constraint_count = N - 1;
  static constexpr bool runs_in_lanes = true;  // its step functions take any scalar (core/lanes.hpp)
  // Bond i only shares beads with bonds i-1 and i+1.
  using Gram = TridiagonalMatrix<N - 1>;

  using Parameters = ChainParameters;
  Parameters prm;

  using Q = Vec<dof>;
  // The step functions take any scalar (Real, or Lanes<W> on the cpu
  // backend) and any Eigen expression of one.
  template <class X>
  using QOf = Vec<dof, typename X::Scalar>;

  template <class X>
  TETHER_HD static Vec<3, typename X::Scalar> bead(const Eigen::MatrixBase<X>& q, int i) {
    return Vec<3, typename X::Scalar>(q[3 * i], q[3 * i + 1], q[3 * i + 2]);
  }
  template <class X>
  TETHER_HD static Vec<3, typename X::Scalar> bond(const Eigen::MatrixBase<X>& q, int i) {
    return bead(q, i + 1) - bead(q, i);
  }
  template <class T>
  TETHER_HD static void add_bead(Vec<dof, T>& q, int i, const Id<Vec<3, T>>& v) {
    q[3 * i] += v[0];
    q[3 * i + 1] += v[1];
    q[3 * i + 2] += v[2];
  }

  // Bond angle at bead i+1 between bonds i and i+1: cos theta = -d_i.d_{i+1} / (|d_i||d_{i+1}|).
  TETHER_HD static Real bend_cosine(const Vec3& a, const Vec3& b) { return -a.dot(b) / (a.norm() * b.norm()); }

  TETHER_HD Real torsion_energy(Real cos_phi) const {
    const Real c = -cos_phi;  // cos psi
    Real v = 0, pw = 1;
    for (int n = 0; n < 6; ++n) { v += prm.torsion[n] * pw; pw *= c; }
    return v;
  }
  template <class T>
  TETHER_HD T torsion_derivative(const T& cos_phi) const {  // dV / d(cos phi)
    const T c = -cos_phi;
    T dv = Real(0), pw = Real(1);
    for (int n = 1; n < 6; ++n) { dv += n * prm.torsion[n] * pw; pw *= c; }
    return -dv;
  }

  TETHER_HD Real potential(const Q& q) const {
    const Real c0 = prm.bend_angle.cosine;
    Real v = 0;
    for (int i = 0; i + 1 < N - 1; ++i) {
      const Real e = bend_cosine(bond(q, i), bond(q, i + 1)) - c0;
      v += Real(0.5) * prm.bend_stiffness * e * e;
    }
    if (prm.has_torsion) {
      for (int i = 0; i + 2 < N - 1; ++i) {
        const Vec3 n1 = bond(q, i).cross(bond(q, i + 1)), n2 = bond(q, i + 1).cross(bond(q, i + 2));
        v += torsion_energy(n1.dot(n2) / (n1.norm() * n2.norm()));
      }
    }
    return v;
  }

  template <class X>
  TETHER_HD QOf<X> potential_gradient(const Eigen::MatrixBase<X>& q_in) const {
    using T = typename X::Scalar;
    using V3 = Vec<3, T>;
    const auto& q = q_in.eval();
    QOf<X> grad = QOf<X>::Constant(T(Real(0)));
    const Real c0 = prm.bend_angle.cosine;
    // d(cos)/da = -b/(|a||b|) - cos a/|a|^2 for cos = -a.b/(|a||b|); likewise for b.
    for (int i = 0; i + 1 < N - 1; ++i) {
      const V3 a = bond(q, i), b = bond(q, i + 1);
      const T ia = Real(1) / a.norm(), ib = Real(1) / b.norm(), iab = ia * ib, c = -a.dot(b) * iab;
      const T f = prm.bend_stiffness * (c - c0);
      const V3 ga = f * (-b * iab - a * (c * ia * ia));
      const V3 gb = f * (-a * iab - b * (c * ib * ib));
      add_bead(grad, i, -ga);
      add_bead(grad, i + 1, ga - gb);
      add_bead(grad, i + 2, gb);
    }
    if (prm.has_torsion) {
      for (int i = 0; i + 2 < N - 1; ++i) {
        const V3 d0 = bond(q, i), d1 = bond(q, i + 1), d2 = bond(q, i + 2);
        const V3 n1 = d0.cross(d1), n2 = d1.cross(d2);
        const T i1 = Real(1) / n1.norm(), i2 = Real(1) / n2.norm(), i12 = i1 * i2, c = n1.dot(n2) * i12;
        const T f = torsion_derivative(c);
        const V3 g1 = f * (n2 * i12 - n1 * (c * i1 * i1));  // dV/dn1
        const V3 g2 = f * (n1 * i12 - n2 * (c * i2 * i2));  // dV/dn2
        // n1 = d0 x d1, n2 = d1 x d2; (x cross y) . g = x . (y cross g).
        const V3 gd0 = d1.cross(g1);
        const V3 gd1 = g1.cross(d0) + d2.cross(g2);
        const V3 gd2 = g2.cross(d1);
        add_bead(grad, i, -gd0);
        add_bead(grad, i + 1, gd0 - gd1);
        add_bead(grad, i + 2, gd1 - gd2);
        add_bead(grad, i + 3, gd2);
      }
    }
    return grad;
  }

  TETHER_HD Real length_scale() const { return prm.bond_length; }

  // Characteristic energy: the potentials' stiffness summed over the chain.
  TETHER_HD Real energy_scale() const {
    Real t = 0;
    for (int n = 0; n < 6; ++n) t += fabs(prm.torsion[n]);
    return (N - 2) * prm.bend_stiffness + (prm.has_torsion ? (N - 3) * t : Real(0));
  }

  template <class X>
  TETHER_HD QOf<X> mass_times(const Eigen::MatrixBase<X>& v) const {
    return prm.mass * v;
  }
  // Reciprocals of parameters, not divisions by them, here and below: the
  // compiler hoists them out of the step loop, and an FP64 division costs a
  // GPU thread about ten dependent FMAs (bench/README.md, "On an H200").
  template <class X>
  TETHER_HD QOf<X> inverse_mass_times(const Eigen::MatrixBase<X>& p) const {
    return p * (Real(1) / prm.mass);
  }
  TETHER_HD Q sqrt_mass_times(const Q& v) const { return sqrt(prm.mass) * v; }

  // g_i = (|d_i|^2 - b^2) / (2b), in length units.
  template <class X>
  TETHER_HD Vec<N - 1, typename X::Scalar> constraints(const Eigen::MatrixBase<X>& q) const {
    Vec<N - 1, typename X::Scalar> g;
    const Real b = prm.bond_length;
    const Real half_over_b = Real(0.5) / b;
    for (int i = 0; i < N - 1; ++i) g[i] = (bond(q, i).squaredNorm() - b * b) * half_over_b;
    return g;
  }
  // Row i of G has -d_i/b on bead i and +d_i/b on bead i+1.
  template <class X, class Y>
  TETHER_HD Vec<N - 1, typename X::Scalar> constraint_jacobian_times(const Eigen::MatrixBase<X>& q,
                                                                      const Eigen::MatrixBase<Y>& v) const {
    Vec<N - 1, typename X::Scalar> r;
    const Real over_b = Real(1) / prm.bond_length;
    for (int i = 0; i < N - 1; ++i) r[i] = bond(q, i).dot(bond(v, i)) * over_b;
    return r;
  }
  template <class X, class Y>
  TETHER_HD QOf<X> constraint_transpose_times(const Eigen::MatrixBase<X>& q, const Eigen::MatrixBase<Y>& lambda) const {
    using T = typename X::Scalar;
    QOf<X> r = QOf<X>::Constant(T(Real(0)));
    const Real over_b = Real(1) / prm.bond_length;
    for (int i = 0; i < N - 1; ++i) {
      const Vec<3, T> f = bond(q, i) * (lambda[i] * over_b);
      add_bead(r, i, -f);
      add_bead(r, i + 1, f);
    }
    return r;
  }
  // G(qa) M^-1 G(qb)^T is tridiagonal.
  template <class X, class Y>
  TETHER_HD TridiagonalMatrix<N - 1, typename X::Scalar> gram(const Eigen::MatrixBase<X>& qa,
                                                              const Eigen::MatrixBase<Y>& qb) const {
    using T = typename X::Scalar;
    TridiagonalMatrix<N - 1, T> m;
    const Real s = 1 / (prm.mass * prm.bond_length * prm.bond_length);
    for (int i = 0; i < N - 1; ++i) {
      const Vec<3, T> a = bond(qa, i);
      m.diag[i] = 2 * s * a.dot(bond(qb, i));
      m.lower[i] = i > 0 ? T(-s * a.dot(bond(qb, i - 1))) : T(Real(0));
      m.upper[i] = i + 1 < N - 1 ? T(-s * a.dot(bond(qb, i + 1))) : T(Real(0));
    }
    return m;
  }

  // --- The step functions above with bead i on lane i of a tile (core/tile.hpp):
  // a GPU thread holds one bead. Each does its one-thread form's arithmetic in
  // the same order, so the two forms agree to the bit where Eigen does not
  // vectorise the one-thread form (lanes, a GPU; tests/core/test_tile.cpp),
  // but for the sign of a sum that is exactly 0 (the one-thread loops start
  // from 0 + x, which makes -0 +0).
  static constexpr int tile_lanes = N;
  template <class X>
  using Beads = tile::Triple<X>;  // a bead's 3-vector per lane

  // d_i = r_{i+1} - r_i on lanes 0 .. N-2, 0 on the last.
  template <class X>
  TETHER_HD static Beads<X> tile_bonds(const Beads<X>& r) {
    return tile::below(N - 1, tile::from_next<1>(r) - r);
  }

  // potential_gradient: bead j sums its terms in the order the bond loop adds them.
  template <class X>
  TETHER_HD Beads<X> tile_gradient(const Beads<X>& r) const {
    using namespace tile;
    const Beads<X> d = tile_bonds(r);
    const Real c0 = prm.bend_angle.cosine;
    Beads<X> grad;
    {  // the angle at bead i+1 between bonds i and i+1, on lane i
      const auto g = each_lane<X>(
          [&](const auto& a, const auto& b) {
            const auto ia = Real(1) / norm(a), ib = Real(1) / norm(b), iab = ia * ib, c = -dot(a, b) * iab;
            const auto f = prm.bend_stiffness * (c - c0);
            return std::array{f * (-b * iab - a * (c * ia * ia)), f * (-a * iab - b * (c * ib * ib))};
          },
          d, from_next<1>(d));
      const Beads<X> ga = below(N - 2, g[0]), gb = below(N - 2, g[1]);
      grad = from_previous<2>(gb) + from_previous<1>(ga - gb) + (-ga);
    }
    if (prm.has_torsion) {  // the dihedral of bonds i, i+1, i+2, on lane i
      const auto g = each_lane<X>(
          [&](const auto& d0, const auto& d1, const auto& d2) {
            const auto n1 = cross(d0, d1), n2 = cross(d1, d2);
            const auto i1 = Real(1) / norm(n1), i2 = Real(1) / norm(n2), i12 = i1 * i2, c = dot(n1, n2) * i12;
            const auto f = torsion_derivative(c);
            const auto g1 = f * (n2 * i12 - n1 * (c * i1 * i1));
            const auto g2 = f * (n1 * i12 - n2 * (c * i2 * i2));
            return std::array{cross(d1, g1), cross(g1, d0) + cross(d2, g2), cross(g2, d1)};
          },
          d, from_next<1>(d), from_next<2>(d));
      const Beads<X> gd0 = below(N - 3, g[0]), gd1 = below(N - 3, g[1]), gd2 = below(N - 3, g[2]);
      grad = grad + from_previous<3>(gd2) + from_previous<2>(gd1 - gd2) + from_previous<1>(gd0 - gd1) + (-gd0);
    }
    return grad;
  }

  // potential, its terms summed on their lanes (bend angle i and dihedral i
  // on lane i) and then over the tile (tile::sum): another order than the
  // one-thread loop's, the same on a GPU and the cpu.
  template <class X>
  TETHER_HD typename X::Scalar tile_potential(const Beads<X>& r) const {
    using namespace tile;
    const Beads<X> d = tile_bonds(r);
    const Real c0 = prm.bend_angle.cosine;
    X v = below(N - 2, each_lane<X>(
                           [&](const auto& a, const auto& b) {
                             const auto e = -dot(a, b) / (norm(a) * norm(b)) - c0;
                             return Real(0.5) * prm.bend_stiffness * e * e;
                           },
                           d, from_next<1>(d)));
    if (prm.has_torsion)
      v = v + below(N - 3, each_lane<X>(
                               [&](const auto& d0, const auto& d1, const auto& d2) {
                                 const auto n1 = cross(d0, d1), n2 = cross(d1, d2);
                                 return torsion_energy(dot(n1, n2) / (norm(n1) * norm(n2)));
                               },
                               d, from_next<1>(d), from_next<2>(d)));
    return sum(v);
  }

  // constraints, from the bonds: g on lanes 0 .. N-2.
  template <class X>
  TETHER_HD X tile_constraints(const Beads<X>& d) const {
    const Real b = prm.bond_length;
    return tile::below(N - 1, (dot(d, d) - b * b) * (Real(0.5) / b));
  }
  // constraint_jacobian_times: G(q) v with d the bonds of q.
  template <class X>
  TETHER_HD X tile_jacobian_times(const Beads<X>& d, const Beads<X>& v) const {
    return tile::below(N - 1, dot(d, tile::from_next<1>(v) - v) * (Real(1) / prm.bond_length));
  }
  // constraint_transpose_times: G(q)^T lambda with d the bonds of q (0 beyond them).
  template <class X>
  TETHER_HD Beads<X> tile_transpose_times(const Beads<X>& d, const X& lambda) const {
    const Beads<X> f = d * (lambda * (Real(1) / prm.bond_length));
    return tile::from_previous<1>(f) + (-f);
  }
  // gram(qa, qb) from their bonds: row i on lane i.
  template <class X>
  TETHER_HD void tile_gram(const Beads<X>& da, const Beads<X>& db, X& lower, X& diag, X& upper) const {
    const Real s = 1 / (prm.mass * prm.bond_length * prm.bond_length);
    diag = 2 * s * dot(da, db);
    lower = -s * dot(da, tile::from_previous<1>(db));
    upper = tile::below(N - 2, -s * dot(da, tile::from_next<1>(db)));
  }

  // A freely jointed chain: bead 0 at the origin, each bond direction uniform.
  template <class Rng>
  TETHER_HD Q random_configuration(Rng& rng) const {
    Q q = Q::Zero();
    for (int i = 0; i < N - 1; ++i) {
      const Real z = 2 * rng.uniform() - 1;
      const Real phi = Real(6.283185307179586476925286766559) * rng.uniform();
      const Real r = sqrt(1 - z * z);
      const Vec3 d = prm.bond_length * Vec3(r * cos(phi), r * sin(phi), z);
      for (int c = 0; c < 3; ++c) q[3 * (i + 1) + c] = q[3 * i + c] + d[c];
    }
    return q;
  }

  // A chain grown bond by bond with each bond angle's cosine drawn from the
  // bending Boltzmann factor exp(-k (c - cos theta0)^2 / (2 kT)) (on the
  // sphere the area element is uniform in c) and uniform dihedrals; torsion
  // is not weighted. Centred at the origin. Keeps thermal chains away from
  // collinear joints, where the torsion force is singular.
  template <class Rng>
  TETHER_HD Q thermal_configuration(Rng& rng, Real kT) const {
    const Real two_pi = Real(6.283185307179586476925286766559);
    const Real c0 = prm.bend_angle.cosine;
    const Real sigma = prm.bend_stiffness > 0 ? sqrt(fmax(kT, Real(0)) / prm.bend_stiffness) : Real(1e300);
    Q q = Q::Zero();
    Vec3 u;
    {
      const Real z = 2 * rng.uniform() - 1, phi = two_pi * rng.uniform(), r = sqrt(1 - z * z);
      u = Vec3(r * cos(phi), r * sin(phi), z);
    }
    for (int c = 0; c < 3; ++c) q[3 + c] = prm.bond_length * u[c];
    for (int i = 1; i < N - 1; ++i) {
      Real cth = 2 * rng.uniform() - 1;  // the fallback when the Gaussian is too wide
      for (int tries = 0; tries < 1000 && sigma < Real(1e3); ++tries) {
        const Real x = c0 + sigma * rng.normal();
        if (x >= -1 && x <= 1) { cth = x; break; }
      }
      // Orthonormal e1, e2 perpendicular to u.
      const Vec3 a = fabs(u[0]) < Real(0.9) ? Vec3(1, 0, 0) : Vec3(0, 1, 0);
      const Vec3 e1 = a.cross(u).normalized(), e2 = u.cross(e1);
      const Real phi = two_pi * rng.uniform(), sth = sqrt(fmax(Real(0), 1 - cth * cth));
      // cos theta = -d_{i-1}.d_i / b^2, so the new direction is -c u + ...
      const Vec3 w = -cth * u + sth * (cos(phi) * e1 + sin(phi) * e2);
      for (int c = 0; c < 3; ++c) q[3 * (i + 1) + c] = q[3 * i + c] + prm.bond_length * w[c];
      u = w;
    }
    Vec3 centre = Vec3::Zero();
    for (int i = 0; i < N; ++i) centre += bead(q, i) / Real(N);
    for (int i = 0; i < N; ++i) add_bead(q, i, -centre);
    return q;
  }

  // Total linear and angular momentum: conserved (no external field).
  TETHER_HD static Vec3 linear_momentum(const Q& p) {
    Vec3 s = Vec3::Zero();
    for (int i = 0; i < N; ++i) s += bead(p, i);
    return s;
  }
  TETHER_HD static Vec3 angular_momentum(const Q& q, const Q& p) {
    Vec3 s = Vec3::Zero();
    for (int i = 0; i < N; ++i) s += bead(q, i).cross(bead(p, i));
    return s;
  }
};

}  // namespace tether

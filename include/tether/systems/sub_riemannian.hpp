#pragma once
// Canonical sub-Riemannian Hamiltonians H(q, p) = 1/2 sum_i u_i^2 with
// u_i = <p, X_i(q)> for an orthonormal frame X_1..X_m (seed 004 §6.2, eq. 42;
// seed 001 §6). A system gives u(z), its gradient and the weighted sum of
// its Hessians, z = (q, p); everything else (H, its gradient and Hessian,
// the Hamiltonian vector field and its Jacobian) follows here.
// Not yet in the engine's registry: no config, backend or CLI reaches these.
#include "tether/core/types.hpp"

namespace tether {

template <class S>
using PhaseVec = Vec<2 * S::dof>;

template <class S>
TETHER_HD Real frame_hamiltonian(const S& sys, const PhaseVec<S>& z) {
  Vec<S::frame_size> u;
  Mat<S::frame_size, 2 * S::dof> du;
  sys.frame(z, u, du);
  return Real(0.5) * u.squaredNorm();
}

// grad H = du^T u, in the order (dH/dq, dH/dp).
template <class S>
TETHER_HD PhaseVec<S> hamiltonian_gradient(const S& sys, const PhaseVec<S>& z) {
  Vec<S::frame_size> u;
  Mat<S::frame_size, 2 * S::dof> du;
  sys.frame(z, u, du);
  return du.transpose() * u;
}

// Hess H = du^T du + sum_i u_i Hess u_i.
template <class S>
TETHER_HD Mat<2 * S::dof, 2 * S::dof> hamiltonian_hessian(const S& sys, const PhaseVec<S>& z) {
  Vec<S::frame_size> u;
  Mat<S::frame_size, 2 * S::dof> du;
  sys.frame(z, u, du);
  return du.transpose() * du + sys.frame_hessian(z, u);
}

// X_H(z) = J grad H = (dH/dp, -dH/dq).
template <class S>
TETHER_HD PhaseVec<S> hamiltonian_vector_field(const S& sys, const PhaseVec<S>& z) {
  constexpr int n = S::dof;
  const PhaseVec<S> g = hamiltonian_gradient(sys, z);
  PhaseVec<S> f;
  f.template head<n>() = g.template tail<n>();
  f.template tail<n>() = -g.template head<n>();
  return f;
}

// D X_H = J Hess H.
template <class S>
TETHER_HD Mat<2 * S::dof, 2 * S::dof> hamiltonian_vector_field_jacobian(const S& sys, const PhaseVec<S>& z) {
  constexpr int n = S::dof;
  const Mat<2 * n, 2 * n> hess = hamiltonian_hessian(sys, z);
  Mat<2 * n, 2 * n> jac;
  jac.template topRows<n>() = hess.template bottomRows<n>();
  jac.template bottomRows<n>() = -hess.template topRows<n>();
  return jac;
}

// Heisenberg group, left-invariant structure: X = d/dx - (y/2) d/dz,
// Y = d/dy + (x/2) d/dz. u = p_x - y p_z / 2, v = p_y + x p_z / 2.
struct Heisenberg {
  static constexpr const char* name = "heisenberg";
  static constexpr int dof = 3;
  static constexpr int frame_size = 2;

  TETHER_HD void frame(const Vec<6>& z, Vec<2>& u, Mat<2, 6>& du) const {
    const Real x = z[0], y = z[1], px = z[3], py = z[4], pz = z[5];
    u = Vec<2>(px - y * pz / 2, py + x * pz / 2);
    du << 0, -pz / 2, 0, 1, 0, -y / 2,  //
        pz / 2, 0, 0, 0, 1, x / 2;
  }
  // sum_i w_i Hess u_i: u has d2/dy dpz = -1/2, v has d2/dx dpz = 1/2.
  TETHER_HD Mat<6, 6> frame_hessian(const Vec<6>&, const Vec<2>& w) const {
    Mat<6, 6> h = Mat<6, 6>::Zero();
    h(1, 5) = h(5, 1) = -w[0] / 2;
    h(0, 5) = h(5, 0) = w[1] / 2;
    return h;
  }
};

// Martinet structure, seed 004 eq. (42):
// H = 1/2 ((p_x + p_z y^2/2)^2 + p_y^2 / (1 + beta x)^2).
struct Martinet {
  static constexpr const char* name = "martinet";
  static constexpr int dof = 3;
  static constexpr int frame_size = 2;
  Real beta = 0;

  TETHER_HD void frame(const Vec<6>& z, Vec<2>& u, Mat<2, 6>& du) const {
    const Real x = z[0], y = z[1], py = z[4], pz = z[5];
    const Real s = 1 / (1 + beta * x);
    u = Vec<2>(z[3] + pz * y * y / 2, py * s);
    du << 0, pz * y, 0, 1, 0, y * y / 2,  //
        -beta * py * s * s, 0, 0, 0, s, 0;
  }
  TETHER_HD Mat<6, 6> frame_hessian(const Vec<6>& z, const Vec<2>& w) const {
    const Real x = z[0], y = z[1], py = z[4], pz = z[5];
    const Real s = 1 / (1 + beta * x);
    Mat<6, 6> h = Mat<6, 6>::Zero();
    h(1, 1) = w[0] * pz;                       // d2 u1 / dy2
    h(1, 5) = h(5, 1) = w[0] * y;              // d2 u1 / dy dpz
    h(0, 0) = w[1] * 2 * beta * beta * py * s * s * s;  // d2 u2 / dx2
    h(0, 4) = h(4, 0) = -w[1] * beta * s * s;  // d2 u2 / dx dpy
    return h;
  }
};

}  // namespace tether

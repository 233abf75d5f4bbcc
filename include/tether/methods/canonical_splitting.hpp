#pragma once
// Symplectic Euler and generalized Stormer-Verlet for a canonical, possibly
// non-separable H(q, p) (seed 004 eqs. (35) and (51)-(53)). Their implicit
// stages are n x n: each is solved by polished_newton with the exact
// Jacobian from Hess H.
#include "tether/core/polished_newton.hpp"
#include "tether/systems/sub_riemannian.hpp"

namespace tether {

namespace detail {

template <class S>
TETHER_HD PhaseVec<S> join(const Vec<S::dof>& q, const Vec<S::dof>& p) {
  PhaseVec<S> z;
  z.template head<S::dof>() = q;
  z.template tail<S::dof>() = p;
  return z;
}

// Solves p = p0 - c H_q(q, p) for p (q fixed).
template <class S>
TETHER_HD Status solve_momentum(const S& sys, const Vec<S::dof>& q, const Vec<S::dof>& p0, Real c,
                                const NewtonOptions& opt, Vec<S::dof>& p, int& iterations) {
  constexpr int n = S::dof;
  p = p0;
  return polished_newton<n>(p, opt, iterations, [&](const Vec<n>& x, Vec<n>& r, Mat<n, n>& jac) {
    const PhaseVec<S> z = join<S>(q, x);
    r = x - p0 + c * hamiltonian_gradient(sys, z).template head<n>();
    jac = Mat<n, n>::Identity() + c * hamiltonian_hessian(sys, z).template block<n, n>(0, n);
  });
}

}  // namespace detail

// Seed 004 eq. (35): p1 = p0 - h H_q(q0, p1), q1 = q0 + h H_p(q0, p1). Order 1.
struct CanonicalSymplecticEuler {
  static constexpr int order = 1;

  template <class S>
  TETHER_HD static Status step(const S& sys, PhaseVec<S>& z, Real h, const NewtonOptions& opt, int& iterations) {
    constexpr int n = S::dof;
    const Vec<n> q0 = z.template head<n>();
    Vec<n> p1;
    const Status st = detail::solve_momentum(sys, q0, Vec<n>(z.template tail<n>()), h, opt, p1, iterations);
    if (st != Status::ok) return st;
    z = detail::join<S>(q0 + h * hamiltonian_gradient(sys, detail::join<S>(q0, p1)).template tail<n>(), p1);
    return Status::ok;
  }
};

// Seed 004 eq. (51) (equivalently (52)-(53)):
//   p_{1/2} = p0 - h/2 H_q(q0, p_{1/2}),
//   q1 = q0 + h/2 (H_p(q0, p_{1/2}) + H_p(q1, p_{1/2})),
//   p1 = p_{1/2} - h/2 H_q(q1, p_{1/2}). Order 2, symmetric.
struct CanonicalStormerVerlet {
  static constexpr int order = 2;

  template <class S>
  TETHER_HD static Status step(const S& sys, PhaseVec<S>& z, Real h, const NewtonOptions& opt, int& iterations) {
    constexpr int n = S::dof;
    const Vec<n> q0 = z.template head<n>();
    Vec<n> ph;
    Status st = detail::solve_momentum(sys, q0, Vec<n>(z.template tail<n>()), h / 2, opt, ph, iterations);
    if (st != Status::ok) return st;
    // q1 = a + h/2 H_p(q1, p_{1/2}), a fixed: Newton with I - h/2 d(H_p)/dq.
    const Vec<n> a = q0 + h / 2 * hamiltonian_gradient(sys, detail::join<S>(q0, ph)).template tail<n>();
    Vec<n> q1 = a + h / 2 * hamiltonian_gradient(sys, detail::join<S>(a, ph)).template tail<n>();
    st = polished_newton<n>(q1, opt, iterations, [&](const Vec<n>& x, Vec<n>& r, Mat<n, n>& jac) {
      const PhaseVec<S> w = detail::join<S>(x, ph);
      r = x - a - h / 2 * hamiltonian_gradient(sys, w).template tail<n>();
      jac = Mat<n, n>::Identity() - h / 2 * hamiltonian_hessian(sys, w).template block<n, n>(n, 0);
    });
    if (st != Status::ok) return st;
    z = detail::join<S>(q1, ph - h / 2 * hamiltonian_gradient(sys, detail::join<S>(q1, ph)).template head<n>());
    return Status::ok;
  }
};

}  // namespace tether

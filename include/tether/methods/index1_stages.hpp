#pragma once
// Pieces shared by the symplectic methods on index-1 generalized Hamiltonian
// systems (seed 001 Props 3-4): split grad H into its parts, and the two
// implicit stage solves of the partitioned methods, each with its stage
// multipliers Lambda solved together with it from H_lambda = 0.
#include <Eigen/Dense>

#include "tether/methods/projection.hpp"
#include "tether/systems/generalized_hamiltonian.hpp"

namespace tether {

template <class S>
struct Parts {
  static constexpr int n = S::dof, k = S::multiplier_count, m = 2 * n + k;
  template <class V>
  TETHER_HD static Vec<n> q(const V& z) { return z.template segment<n>(0); }
  template <class V>
  TETHER_HD static Vec<n> p(const V& z) { return z.template segment<n>(n); }
  template <class V>
  TETHER_HD static Vec<k> lambda(const V& z) { return z.template segment<k>(2 * n); }
};

// lambda~(q0, p0) for a reference guess (a failed solve shows up in the residual).
template <class S>
Vec<S::multiplier_count> multipliers_of(const S& sys, const PhaseState<S>& s) {
  Vec<S::multiplier_count> lambda;
  int it = 0;
  solve_multipliers(sys, s.q, s.p, NewtonOptions{}, lambda, it);
  return lambda;
}

// Solves p = p0 - c H_q(q, p, Lambda), 0 = H_lambda(q, p, Lambda) for (p, Lambda), q fixed.
template <class S>
TETHER_HD Status solve_momentum_stage(const S& sys, const Vec<S::dof>& q, const Vec<S::dof>& p0, Real c,
                                      const NewtonOptions& opt, Vec<S::dof>& p, Vec<S::multiplier_count>& lambda,
                                      int& iterations) {
  constexpr int n = S::dof, k = S::multiplier_count;
  Vec<n + k> y;
  y.template head<n>() = p;
  if constexpr (k > 0) y.template tail<k>() = lambda;
  const Status st = polished_newton<n + k>(y, opt, iterations, [&](const Vec<n + k>& x, Vec<n + k>& r, Mat<n + k, n + k>* jac) {
    ZVec<S> g;
    ZMat<S> hs;
    hamiltonian_derivatives(sys, pack<S>(q, x.template head<n>(), x.template tail<k>()), g, hs, jac != nullptr);
    r.template head<n>() = x.template head<n>() - p0 + c * g.template head<n>();
    if constexpr (k > 0) r.template tail<k>() = g.template tail<k>();
    if (!jac) return;
    jac->template topRows<n>() = c * hs.template block<n, n + k>(0, n);
    jac->template topLeftCorner<n, n>() += Mat<n, n>::Identity();
    if constexpr (k > 0) jac->template bottomRows<k>() = hs.template block<k, n + k>(2 * n, n);
  });
  p = y.template head<n>();
  if constexpr (k > 0) lambda = y.template tail<k>();
  return st;
}

// Solves q = a + c H_p(q, p, Lambda), 0 = H_lambda(q, p, Lambda) for (q, Lambda), p fixed.
template <class S>
TETHER_HD Status solve_position_stage(const S& sys, const Vec<S::dof>& a, const Vec<S::dof>& p, Real c,
                                      const NewtonOptions& opt, Vec<S::dof>& q, Vec<S::multiplier_count>& lambda,
                                      int& iterations) {
  constexpr int n = S::dof, k = S::multiplier_count;
  Vec<n + k> y;
  y.template head<n>() = q;
  if constexpr (k > 0) y.template tail<k>() = lambda;
  const Status st = polished_newton<n + k>(y, opt, iterations, [&](const Vec<n + k>& x, Vec<n + k>& r, Mat<n + k, n + k>* jac) {
    const ZVec<S> z = pack<S>(x.template head<n>(), p, x.template tail<k>());
    ZVec<S> g;
    ZMat<S> hs;
    hamiltonian_derivatives(sys, z, g, hs, jac != nullptr);
    r.template head<n>() = x.template head<n>() - a - c * g.template segment<n>(n);
    if constexpr (k > 0) r.template tail<k>() = g.template tail<k>();
    if (!jac) return;
    // Unknowns (q, Lambda) are the columns 0..n-1 and 2n..2n+k-1 of Hess H.
    jac->template topLeftCorner<n, n>() = Mat<n, n>::Identity() - c * hs.template block<n, n>(n, 0);
    if constexpr (k > 0) {
      jac->template topRightCorner<n, k>() = -c * hs.template block<n, k>(n, 2 * n);
      jac->template bottomLeftCorner<k, n>() = hs.template block<k, n>(2 * n, 0);
      jac->template bottomRightCorner<k, k>() = hs.template block<k, k>(2 * n, 2 * n);
    }
  });
  q = y.template head<n>();
  if constexpr (k > 0) lambda = y.template tail<k>();
  return st;
}

// grad H at (q, p, lambda) as a dynamic vector, for the reference residuals.
template <class S>
Eigen::VectorXd gradient_at(const S& sys, const Vec<S::dof>& q, const Vec<S::dof>& p,
                            const Vec<S::multiplier_count>& lambda) {
  return hamiltonian_gradient(sys, pack<S>(q, p, lambda));
}

}  // namespace tether

#pragma once
// Pieces shared by the symplectic methods on index-1 generalized Hamiltonian
// systems (MMVW13 Props 3-4): split grad H into its parts, and the two
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

// Jacobian in the unknowns (p, Lambda) of the momentum stage
// p - p0 + c H_q(q, p, Lambda) = 0, H_lambda = 0; hs = Hess H there.
template <class S>
TETHER_HD Mat<S::dof + S::multiplier_count, S::dof + S::multiplier_count> momentum_stage_jacobian(const ZMat<S>& hs,
                                                                                                  Real c) {
  constexpr int n = S::dof, k = S::multiplier_count;
  Mat<n + k, n + k> a;
  a.template topRows<n>() = c * hs.template block<n, n + k>(0, n);
  a.template topLeftCorner<n, n>() += Mat<n, n>::Identity();
  if constexpr (k > 0) a.template bottomRows<k>() = hs.template block<k, n + k>(2 * n, n);
  return a;
}

// Jacobian in the unknowns (q, Lambda) of the position stage
// q - a - c H_p(q, p, Lambda) = 0, H_lambda = 0: the columns 0..n-1 and
// 2n..2n+k-1 of Hess H.
template <class S>
TETHER_HD Mat<S::dof + S::multiplier_count, S::dof + S::multiplier_count> position_stage_jacobian(const ZMat<S>& hs,
                                                                                                  Real c) {
  constexpr int n = S::dof, k = S::multiplier_count;
  Mat<n + k, n + k> a;
  a.template topLeftCorner<n, n>() = Mat<n, n>::Identity() - c * hs.template block<n, n>(n, 0);
  if constexpr (k > 0) {
    a.template topRightCorner<n, k>() = -c * hs.template block<n, k>(n, 2 * n);
    a.template bottomLeftCorner<k, n>() = hs.template block<k, n>(2 * n, 0);
    a.template bottomRightCorner<k, k>() = hs.template block<k, k>(2 * n, 2 * n);
  }
  return a;
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
    if (jac) *jac = momentum_stage_jacobian<S>(hs, c);
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
    if (jac) *jac = position_stage_jacobian<S>(hs, c);
  });
  q = y.template head<n>();
  if constexpr (k > 0) lambda = y.template tail<k>();
  return st;
}

// ---------------------------------------------------------------------------
// Tangent maps: the exact derivative of a step with respect to (q0, p0), for
// shooting. A step's stage equations F(Y; q0, p0) = 0 are solved by
// Newton; by the implicit function theorem dY = -F_Y^-1 F_(q0,p0) d(q0, p0),
// with F_Y the (fresh) Newton Jacobian at the converged stage. The tangent
// columns are C directions; rows (dq, dp) for a state, dlambda for multipliers.
template <class S, int C>
using Tangent = Mat<2 * S::dof, C>;

// Methods whose steps leave nothing for the next one (see GaussLegendre::Carry).
struct NoCarry {};

// Factors the matrix built in lu.lu and solves it for each column of x, in
// place (lu keeps the factors); false when it is singular. Built where it is
// factored, a GPU thread holds one K x K matrix and one K x C block, not two.
template <int K, int C>
TETHER_HD bool solve_columns(DenseLU<K>& lu, Mat<K, C>& x) {
  if (!lu.factor_in_place()) return false;
  for (int c = 0; c < C; ++c) {
    Vec<K> col = x.col(c);
    if (!lu.solve(col, col)) return false;
    x.col(c) = col;
  }
  return true;
}

// Hess H times the stacked variation (dq, dp, dlambda): the variation of grad H.
template <class S, int C>
TETHER_HD Mat<Sizes<S>::m, C> gradient_variation(const ZMat<S>& hs, const Mat<S::dof, C>& dq, const Mat<S::dof, C>& dp,
                                                 const Mat<S::multiplier_count, C>& dl) {
  constexpr int n = S::dof, k = S::multiplier_count;
  Mat<Sizes<S>::m, C> v = hs.template middleCols<n>(0) * dq + hs.template middleCols<n>(n) * dp;
  if constexpr (k > 0) v += hs.template rightCols<k>() * dl;
  return v;
}

// Variation of the momentum stage p = p0 - c H_q(q, p, Lambda), H_lambda = 0
// (solve_momentum_stage) for inputs (dq, dp0); hs = Hess H at its solution.
template <class S, int C>
TETHER_HD Status momentum_stage_tangent(const ZMat<S>& hs, Real c, const Mat<S::dof, C>& dq, const Mat<S::dof, C>& dp0,
                                        Mat<S::dof, C>& dp, Mat<S::multiplier_count, C>& dl) {
  constexpr int n = S::dof, k = S::multiplier_count;
  Mat<n + k, C> x;  // the right-hand side, then the solution
  x.template topRows<n>() = dp0 - c * hs.template block<n, n>(0, 0) * dq;
  if constexpr (k > 0) x.template bottomRows<k>() = -hs.template block<k, n>(2 * n, 0) * dq;
  DenseLU<n + k> lu;
  lu.lu = momentum_stage_jacobian<S>(hs, c);
  if (!solve_columns<n + k, C>(lu, x)) return Status::singular_matrix;
  dp = x.template topRows<n>();
  if constexpr (k > 0) dl = x.template bottomRows<k>();
  return Status::ok;
}

// Variation of the position stage q = a + c H_p(q, p, Lambda), H_lambda = 0
// (solve_position_stage) for inputs (da, dp); hs = Hess H at its solution.
template <class S, int C>
TETHER_HD Status position_stage_tangent(const ZMat<S>& hs, Real c, const Mat<S::dof, C>& da, const Mat<S::dof, C>& dp,
                                        Mat<S::dof, C>& dq, Mat<S::multiplier_count, C>& dl) {
  constexpr int n = S::dof, k = S::multiplier_count;
  Mat<n + k, C> x;  // the right-hand side, then the solution
  x.template topRows<n>() = da + c * hs.template block<n, n>(n, n) * dp;
  if constexpr (k > 0) x.template bottomRows<k>() = -hs.template block<k, n>(2 * n, n) * dp;
  DenseLU<n + k> lu;
  lu.lu = position_stage_jacobian<S>(hs, c);
  if (!solve_columns<n + k, C>(lu, x)) return Status::singular_matrix;
  dq = x.template topRows<n>();
  if constexpr (k > 0) dl = x.template bottomRows<k>();
  return Status::ok;
}

// grad H at (q, p, lambda) as a dynamic vector, for the reference residuals.
template <class S>
Eigen::VectorXd gradient_at(const S& sys, const Vec<S::dof>& q, const Vec<S::dof>& p,
                            const Vec<S::multiplier_count>& lambda) {
  return hamiltonian_gradient(sys, pack<S>(q, p, lambda));
}

}  // namespace tether

#pragma once
// RATTLE on the holonomic constraints h(q) = 0 with the midpoint rule on the
// generalized Hamiltonian H(q, p, lambda, 0) as its inner step (MMVW13
// Prop 7, in the composition form of its ref. [10]):
//   p^0 = p0 + Dh(q0)^T mu                                  (jump in the fibre)
//   q1 = q0 + h H_p(Zm),  p^1 = p^0 - h H_q(Zm),  0 = H_lambda(Zm),
//     Zm = ((q0 + q1)/2, (p^0 + p^1)/2, Lambda)             (midpoint rule)
//   0 = h(q1)                                               (fixes mu)
//   p1 = p^1 + Dh(q1)^T nu,  0 = Dh(q1) H_p(q1, p1, lambda1),
//   0 = H_lambda(q1, p1, lambda1)                           (onto T*N)
// Second order, symplectic on T*N, and the nonholonomic constraints hold at
// the end of every step through lambda1 (Corollary 5).
#include "tether/core/families.hpp"
#include "tether/methods/index1_stages.hpp"

namespace tether {

// Projects p onto T*N at q: p <- p + Dh(q)^T nu with Dh(q) H_p(q, p, lambda) = 0
// and H_lambda(q, p, lambda) = 0, Newton in (nu, lambda).
template <class S>
TETHER_HD Status project_cotangent(const S& sys, const Vec<S::dof>& q, Vec<S::dof>& p,
                                   Vec<S::multiplier_count>& lambda, const NewtonOptions& opt, int& iterations) {
  constexpr int n = S::dof, k = S::multiplier_count, l = holonomic_count<S>;
  const Mat<l, n> dh = holonomic_jacobian(sys, q);
  const Vec<n> p_in = p;
  Vec<l + k> y;
  y.template head<l>().setZero();
  y.template tail<k>() = lambda;
  const Status st = polished_newton<l + k>(y, opt, iterations, [&](const Vec<l + k>& x, Vec<l + k>& r, Mat<l + k, l + k>* jac) {
    ZVec<S> g;
    ZMat<S> hs;
    hamiltonian_derivatives(sys, pack<S>(q, Vec<n>(p_in + dh.transpose() * x.template head<l>()), x.template tail<k>()), g,
                            hs, jac != nullptr);
    r.template head<l>() = dh * g.template segment<n>(n);
    r.template tail<k>() = g.template tail<k>();
    if (!jac) return;
    jac->template topLeftCorner<l, l>() = dh * hs.template block<n, n>(n, n) * dh.transpose();
    jac->template topRightCorner<l, k>() = dh * hs.template block<n, k>(n, 2 * n);
    jac->template bottomLeftCorner<k, l>() = hs.template block<k, n>(2 * n, n) * dh.transpose();
    jac->template bottomRightCorner<k, k>() = hs.template block<k, k>(2 * n, 2 * n);
  });
  p = p_in + dh.transpose() * y.template head<l>();
  lambda = y.template tail<k>();
  return st;
}

struct RattleMidpoint {
  static constexpr const char* name = "rattle_midpoint";
  static constexpr int stages = 0;
  static constexpr int order = 2;
  static constexpr bool two_step = false;
  static constexpr const char* citation = "MMVW13 Props 6-7 (RATTLE with a midpoint inner step)";
  static constexpr const char* description = "RATTLE for the holonomic constraints with a midpoint inner step for the nonholonomic ones";
  static constexpr bool symmetric = true;
  static constexpr bool symplectic = true;
  template <class S>
  static constexpr bool applies_to = MixedSystem<S>;
  using Parameters = NoParameters;
  Parameters prm;

  template <class S>
  TETHER_HD static void start(const S&, PhaseState<S>&, Real) {}

  template <class S>
  TETHER_HD static Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations) {
    constexpr int n = S::dof, k = S::multiplier_count, l = holonomic_count<S>, K = l + 2 * n + k;
    Vec<k> lambda;
    Status st = solve_multipliers(sys, s.q, s.p, opt, lambda, iterations);
    if (st != Status::ok) return st;
    const Mat<l, n> dh0 = holonomic_jacobian(sys, s.q);
    const ZVec<S> g0 = hamiltonian_gradient(sys, pack<S>(s.q, s.p, lambda));
    // Unknowns x = (mu, q1, p^1, Lambda).
    Vec<K> x;
    x << Vec<l>::Zero(), s.q + h * g0.template segment<n>(n), s.p - h * g0.template head<n>(), lambda;
    st = polished_newton<K>(x, opt, iterations, [&](const Vec<K>& y, Vec<K>& r, Mat<K, K>* out) {
      const Vec<l> mu = y.template head<l>();
      const Vec<n> q1 = y.template segment<n>(l), p1 = y.template segment<n>(l + n);
      const Vec<k> big_lambda = y.template tail<k>();
      const Vec<n> p_jump = s.p + dh0.transpose() * mu;
      ZVec<S> g;
      ZMat<S> hs;
      hamiltonian_derivatives(sys, pack<S>(Vec<n>((s.q + q1) / 2), Vec<n>((p_jump + p1) / 2), big_lambda), g, hs, out != nullptr);
      const auto hqq = hs.template block<n, n>(0, 0), hqp = hs.template block<n, n>(0, n);
      const auto hpq = hs.template block<n, n>(n, 0), hpp = hs.template block<n, n>(n, n);
      r.template head<l>() = holonomic_values(sys, q1);
      r.template segment<n>(l) = q1 - s.q - h * g.template segment<n>(n);
      r.template segment<n>(l + n) = p1 - p_jump + h * g.template head<n>();
      if constexpr (k > 0) r.template tail<k>() = g.template tail<k>();
      if (!out) return;
      Mat<K, K>& jac = *out;
      jac.setZero();
      jac.template block<l, n>(0, l) = holonomic_jacobian(sys, q1);
      // d/d mu enters through p^0 = p0 + Dh0^T mu (in p^1 - p^0 and in the midpoint).
      jac.template block<n, l>(l, 0) = -h / 2 * hpp * dh0.transpose();
      jac.template block<n, n>(l, l) = Mat<n, n>::Identity() - h / 2 * hpq;
      jac.template block<n, n>(l, l + n) = -h / 2 * hpp;
      jac.template block<n, l>(l + n, 0) = -dh0.transpose() + h / 2 * hqp * dh0.transpose();
      jac.template block<n, n>(l + n, l) = h / 2 * hqq;
      jac.template block<n, n>(l + n, l + n) = Mat<n, n>::Identity() + h / 2 * hqp;
      if constexpr (k > 0) {
        jac.template block<n, k>(l, l + 2 * n) = -h * hs.template block<n, k>(n, 2 * n);
        jac.template block<n, k>(l + n, l + 2 * n) = h * hs.template block<n, k>(0, 2 * n);
        const auto hlq = hs.template block<k, n>(2 * n, 0), hlp = hs.template block<k, n>(2 * n, n);
        jac.template block<k, l>(l + 2 * n, 0) = hlp * dh0.transpose() / 2;
        jac.template block<k, n>(l + 2 * n, l) = hlq / 2;
        jac.template block<k, n>(l + 2 * n, l + n) = hlp / 2;
        jac.template block<k, k>(l + 2 * n, l + 2 * n) = hs.template block<k, k>(2 * n, 2 * n);
      }
    });
    if (st != Status::ok) return st;
    const Vec<n> q1 = x.template segment<n>(l);
    Vec<n> p1 = x.template segment<n>(l + n);
    Vec<k> lambda1 = x.template tail<k>();
    st = project_cotangent(sys, q1, p1, lambda1, opt, iterations);
    if (st != Status::ok) return st;
    s.q = q1;
    s.p = p1;
    return Status::ok;
  }

  // Reference form: all unknowns at once, x = (mu, q1, p^1, Lambda, nu, lambda1).
  template <class S>
  static Eigen::VectorXd reference_guess(const S& sys, const PhaseState<S>& s0, Real) {
    constexpr int k = S::multiplier_count, l = holonomic_count<S>;
    const Vec<S::multiplier_count> lambda = multipliers_of(sys, s0);
    Eigen::VectorXd x(2 * l + 2 * S::dof + 2 * k);
    x << Vec<l>::Zero(), s0.q, s0.p, lambda, Vec<l>::Zero(), lambda;
    return x;
  }

  template <class S>
  static Eigen::VectorXd residual(const S& sys, const PhaseState<S>& s0, Real h, const Eigen::VectorXd& x) {
    constexpr int n = S::dof, k = S::multiplier_count, l = holonomic_count<S>;
    const Vec<l> mu = x.head(l), nu = x.segment(l + 2 * n + k, l);
    const Vec<n> q1 = x.segment(l, n), p_hat1 = x.segment(l + n, n);
    const Vec<k> big_lambda = x.segment(l + 2 * n, k), lambda1 = x.tail(k);
    const Vec<n> p_hat0 = s0.p + holonomic_jacobian(sys, s0.q).transpose() * mu;
    const Eigen::VectorXd gm = gradient_at(sys, Vec<n>((s0.q + q1) / 2), Vec<n>((p_hat0 + p_hat1) / 2), big_lambda);
    const Mat<l, n> dh1 = holonomic_jacobian(sys, q1);
    const Vec<n> p1 = p_hat1 + dh1.transpose() * nu;
    const Eigen::VectorXd g1 = gradient_at(sys, q1, p1, lambda1);
    Eigen::VectorXd r(x.size());
    // h(q1) goes in entry by entry: GCC 12 misreads Eigen's copy of a
    // one-entry Vec<1> into a dynamic vector as an out-of-bounds SSE load
    // (-Warray-bounds, a false positive).
    const Vec<l> h1 = holonomic_values(sys, q1);
    for (int i = 0; i < l; ++i) r[i] = h1[i];
    r.tail(x.size() - l) << q1 - s0.q - h * gm.segment(n, n), p_hat1 - p_hat0 + h * gm.head(n), gm.template tail<k>(),
        dh1 * Vec<n>(g1.segment(n, n)), g1.template tail<k>();
    return r;
  }

  template <class S>
  static void reference_finish(const S& sys, const PhaseState<S>& s0, Real, const Eigen::VectorXd& x,
                               PhaseState<S>& s1) {
    constexpr int n = S::dof, k = S::multiplier_count, l = holonomic_count<S>;
    s1 = s0;
    s1.q = x.segment(l, n);
    s1.p = Vec<n>(x.segment(l + n, n)) + holonomic_jacobian(sys, s1.q).transpose() * Vec<l>(x.segment(l + 2 * n + k, l));
  }
};

}  // namespace tether

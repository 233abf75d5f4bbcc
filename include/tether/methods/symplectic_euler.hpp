#pragma once
// Symplectic Euler for a (possibly non-separable) H, LJM12 eq. (35):
//   p1 = p0 - h H_q(q0, p1),  q1 = q0 + h H_p(q0, p1),
// on the index-1 system with the stage multipliers Lambda from
// H_lambda(q0, p1, Lambda) = 0 solved together with p1 (MMVW13 Prop 4: this
// is the method applied to H(q, p, lambda~(q, p))). Order 1, symplectic.
#include "tether/core/families.hpp"
#include "tether/methods/index1_stages.hpp"

namespace tether {

struct SymplecticEuler {
  static constexpr const char* name = "symplectic_euler";
  static constexpr int stages = 0;
  static constexpr int order = 1;
  static constexpr bool two_step = false;
  static constexpr const char* citation = "LJM12 eq. (35)";
  static constexpr const char* description = "symplectic Euler on the index-1 system J z' = grad H(z)";
  static constexpr bool symmetric = false;
  static constexpr bool symplectic = true;
  template <class S>
  static constexpr bool applies_to = Index1System<S>;
  using Parameters = NoParameters;
  Parameters prm;

  template <class S>
  TETHER_HD static void start(const S&, PhaseState<S>&, Real) {}

  template <class S>
  using Carry = NoCarry;

  // With a tangent (columns d(q, p) in some directions), it is carried along:
  // the derivative of this very map (index1_stages.hpp, tangent maps).
  template <class S, int C = 0>
  TETHER_HD static Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations,
                               Tangent<S, C>* tangent = nullptr, NoCarry* = nullptr) {
    constexpr int n = S::dof, k = S::multiplier_count;
    Vec<k> lambda;
    Status st = solve_multipliers(sys, s.q, s.p, opt, lambda, iterations);
    if (st != Status::ok) return st;
    Vec<n> p1 = s.p;
    st = solve_momentum_stage(sys, s.q, s.p, h, opt, p1, lambda, iterations);
    if (st != Status::ok) return st;
    ZVec<S> g;
    ZMat<S> hs;
    hamiltonian_derivatives(sys, pack<S>(s.q, p1, lambda), g, hs, C > 0 && tangent);
    const Vec<n> q1 = s.q + h * Parts<S>::p(g);
    if (!all_finite(q1)) return Status::non_finite;
    if constexpr (C > 0) {
      if (tangent) {
        const Mat<n, C> dq0 = tangent->template topRows<n>();
        Mat<n, C> dp1;
        Mat<k, C> dl;
        st = momentum_stage_tangent<S, C>(hs, h, dq0, Mat<n, C>(tangent->template bottomRows<n>()), dp1, dl);
        if (st != Status::ok) return st;
        tangent->template topRows<n>() = dq0 + h * gradient_variation<S, C>(hs, dq0, dp1, dl).template middleRows<n>(n);
        tangent->template bottomRows<n>() = dp1;
      }
    }
    s.q = q1;
    s.p = p1;
    return Status::ok;
  }

  // Reference form: unknowns x = (p1, Lambda).
  template <class S>
  static Eigen::VectorXd reference_guess(const S& sys, const PhaseState<S>& s0, Real) {
    const Vec<S::multiplier_count> lambda = multipliers_of(sys, s0);
    Eigen::VectorXd x(S::dof + S::multiplier_count);
    x << s0.p, lambda;
    return x;
  }

  template <class S>
  static Eigen::VectorXd residual(const S& sys, const PhaseState<S>& s0, Real h, const Eigen::VectorXd& x) {
    constexpr int n = S::dof, k = S::multiplier_count;
    const Eigen::VectorXd g = gradient_at(sys, s0.q, Vec<n>(x.head(n)), Vec<k>(x.tail(k)));
    Eigen::VectorXd r(n + k);
    r << x.head(n) - s0.p + h * g.head(n), g.tail(k);
    return r;
  }

  template <class S>
  static void reference_finish(const S& sys, const PhaseState<S>& s0, Real h, const Eigen::VectorXd& x,
                               PhaseState<S>& s1) {
    constexpr int n = S::dof, k = S::multiplier_count;
    s1 = s0;
    s1.p = x.head(n);
    s1.q = s0.q + h * gradient_at(sys, s0.q, s1.p, Vec<k>(x.tail(k))).segment(n, n);
  }
};

}  // namespace tether

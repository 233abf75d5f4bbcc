#pragma once
// Generalized Stormer-Verlet for a (possibly non-separable) H, LJM12
// eqs. (51)-(53):
//   p_{1/2} = p0 - h/2 H_q(q0, p_{1/2}),
//   q1 = q0 + h/2 (H_p(q0, p_{1/2}) + H_p(q1, p_{1/2})),
//   p1 = p_{1/2} - h/2 H_q(q1, p_{1/2}),
// on the index-1 system with stage multipliers Lambda_1 at (q0, p_{1/2}) and
// Lambda_2 at (q1, p_{1/2}) from H_lambda = 0, each solved together with its
// implicit stage. Order 2, symmetric, symplectic.
#include "tether/core/families.hpp"
#include "tether/methods/index1_stages.hpp"

namespace tether {

struct StormerVerlet {
  static constexpr const char* name = "stormer_verlet";
  static constexpr int stages = 0;
  static constexpr int order = 2;
  static constexpr bool two_step = false;
  static constexpr const char* citation = "LJM12 eqs. (51)-(53)";
  static constexpr const char* description = "generalized Stormer-Verlet on the index-1 system";
  static constexpr bool symmetric = true;
  static constexpr bool symplectic = true;
  template <class S>
  static constexpr bool applies_to = Index1System<S>;
  using Parameters = NoParameters;
  Parameters prm;

  template <class S>
  TETHER_HD static void start(const S&, PhaseState<S>&, Real) {}

  template <class S>
  using Carry = NoCarry;

  // With a tangent, it is carried along (see SymplecticEuler::step).
  template <class S, int C = 0>
  TETHER_HD static Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations,
                               Tangent<S, C>* tangent = nullptr, NoCarry* = nullptr) {
    using P = Parts<S>;
    constexpr int n = S::dof, k = S::multiplier_count;
    const bool tangents = C > 0 && tangent;
    Vec<k> lambda;
    Status st = solve_multipliers(sys, s.q, s.p, opt, lambda, iterations);
    if (st != Status::ok) return st;
    Vec<n> half = s.p;
    st = solve_momentum_stage(sys, s.q, s.p, h / 2, opt, half, lambda, iterations);
    if (st != Status::ok) return st;
    ZVec<S> g;
    ZMat<S> hs;
    hamiltonian_derivatives(sys, pack<S>(s.q, half, lambda), g, hs, tangents);
    const Vec<n> a = s.q + h / 2 * P::p(g);
    [[maybe_unused]] Mat<n, C> dq0, dhalf, da;
    [[maybe_unused]] Mat<k, C> dl;
    if constexpr (C > 0) {
      if (tangents) {
        dq0 = tangent->template topRows<n>();
        st = momentum_stage_tangent<S, C>(hs, h / 2, dq0, Mat<n, C>(tangent->template bottomRows<n>()), dhalf, dl);
        if (st != Status::ok) return st;
        da = dq0 + h / 2 * gradient_variation<S, C>(hs, dq0, dhalf, dl).template middleRows<n>(n);
      }
    }
    Vec<n> q1 = a + (a - s.q);  // explicit predictor
    st = solve_position_stage(sys, a, half, h / 2, opt, q1, lambda, iterations);
    if (st != Status::ok) return st;
    hamiltonian_derivatives(sys, pack<S>(q1, half, lambda), g, hs, tangents);
    const Vec<n> p1 = half - h / 2 * P::q(g);
    if (!all_finite(p1)) return Status::non_finite;
    if constexpr (C > 0) {
      if (tangents) {
        Mat<n, C> dq1;
        st = position_stage_tangent<S, C>(hs, h / 2, da, dhalf, dq1, dl);
        if (st != Status::ok) return st;
        tangent->template topRows<n>() = dq1;
        tangent->template bottomRows<n>() = dhalf - h / 2 * gradient_variation<S, C>(hs, dq1, dhalf, dl).template topRows<n>();
      }
    }
    s.q = q1;
    s.p = p1;
    return Status::ok;
  }

  // Reference form: unknowns x = (p_{1/2}, Lambda_1, q1, Lambda_2).
  template <class S>
  static Eigen::VectorXd reference_guess(const S& sys, const PhaseState<S>& s0, Real) {
    const Vec<S::multiplier_count> lambda = multipliers_of(sys, s0);
    Eigen::VectorXd x(2 * (S::dof + S::multiplier_count));
    x << s0.p, lambda, s0.q, lambda;
    return x;
  }

  template <class S>
  static Eigen::VectorXd residual(const S& sys, const PhaseState<S>& s0, Real h, const Eigen::VectorXd& x) {
    constexpr int n = S::dof, k = S::multiplier_count;
    const Vec<n> half = x.head(n), q1 = x.segment(n + k, n);
    const Eigen::VectorXd g1 = gradient_at(sys, s0.q, half, Vec<k>(x.segment(n, k)));
    const Eigen::VectorXd g2 = gradient_at(sys, q1, half, Vec<k>(x.tail(k)));
    Eigen::VectorXd r(2 * (n + k));
    r << half - s0.p + h / 2 * g1.head(n), g1.tail(k), q1 - s0.q - h / 2 * (g1.segment(n, n) + g2.segment(n, n)),
        g2.tail(k);
    return r;
  }

  template <class S>
  static void reference_finish(const S& sys, const PhaseState<S>& s0, Real h, const Eigen::VectorXd& x,
                               PhaseState<S>& s1) {
    constexpr int n = S::dof, k = S::multiplier_count;
    const Vec<n> half = x.head(n);
    s1 = s0;
    s1.q = x.segment(n + k, n);
    s1.p = half - h / 2 * gradient_at(sys, s1.q, half, Vec<k>(x.tail(k))).head(n);
  }
};

}  // namespace tether

#pragma once
// The Newmark family as the discretization (4.1) of the SODE q'' = -M^-1 grad V
// with the extended retraction map R_d^TTQ of BM21 §4.1, for unconstrained
// systems (constraint_count = 0); state (q, p) with p = M qdot.
#include "tether/core/families.hpp"
#include "tether/methods/retraction.hpp"

namespace tether {

// Newmark, BM21 eqs. (4.3)-(4.5), in the form (4.4): with a = -M^-1 grad V(q),
//   q1 = q0 + h v0 + h^2/2 ((1 - 2 beta) a0 + 2 beta a1),
//   v1 = v0 + h ((1 - gamma) a0 + gamma a1).
// Order 2 iff gamma = 1/2, else 1 (gamma > 1/2 damps the energy). Implicit in
// q1 when beta != 0: q1 + beta h^2 M^-1 grad V(q1) = q0 + h v0 - h^2/2 (1 - 2 beta) M^-1 grad V(q0),
// solved by Newton (Jacobian I + beta h^2 M^-1 Hess V).
// Structure: (1/2, 0) is Stormer-Verlet, canonically symplectic. For
// gamma = 1/2 and beta != 0 the map is Verlet in x = q + beta h^2 M^-1 grad V(q),
// whose force is a gradient in x (M Dx a = (M - M (M + beta h^2 Hess V)^-1 M) / (beta h^2)
// is symmetric), so it preserves dx ^ dp, not dq ^ dp: (1/2, 1/4) is the
// trapezoidal rule of Remark 5.5, which the paper notes is not symplectic.
struct Newmark {
  static constexpr const char* name = "newmark";
  static constexpr int order = 2;  // at the default gamma = 1/2; see effective_order()
  static constexpr bool two_step = false;
  static constexpr const char* citation = "BM21 §4.1, eqs. (4.3)-(4.5)";
  static constexpr const char* description = "Newmark family as an extended retraction map; (1/2, 1/4) is the trapezoidal rule";
  static constexpr bool symmetric = true;
  static constexpr bool symplectic = false;  // at (1/2, 1/4): dx ^ dp, not dq ^ dp (above)
  template <class S>
  static constexpr bool applies_to = UnconstrainedSystem<S>;

  struct Parameters {
    Real gamma = 0.5, beta = 0.25;

    template <class V>
    void describe(V& v) {
      v.real("gamma", gamma, Range::non_negative(), "velocity weight: order 2 iff 1/2, damped above");
      v.real("beta", beta, Range::non_negative(), "position weight: 0 is explicit (Stormer-Verlet at gamma 1/2)");
    }
  };
  Parameters prm;

  TETHER_HD int effective_order() const { return prm.gamma == Real(0.5) ? 2 : 1; }

  template <class S>
  TETHER_HD void start(const S&, PhaseState<S>&, Real) const {}

  template <class S>
  TETHER_HD Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations) const {
    static_assert(S::constraint_count == 0, "newmark needs an unconstrained system");
    constexpr int n = S::dof;
    const Vec<n> g0 = sys.potential_gradient(s.q);
    const Vec<n> v0 = sys.inverse_mass_times(s.p), f0 = sys.inverse_mass_times(g0);
    const Vec<n> b = s.q + h * v0 - Real(0.5) * (1 - 2 * prm.beta) * h * h * f0;
    Vec<n> q1 = s.q + h * v0 - Real(0.5) * h * h * f0;  // Verlet predictor
    const Status st = solve_gradient_shift(sys, b, prm.beta * h * h, opt, q1, iterations);
    if (st != Status::ok) return st;
    const Vec<n> p1 = s.p - h * ((1 - prm.gamma) * g0 + prm.gamma * sys.potential_gradient(q1));
    return accept_step(s, q1, p1);
  }

  // Unknowns (q1, p1) (ResidualLayout with k = 0): eq. (4.4) times M, the
  // first row divided by h (momentum units).
  template <class S>
  Eigen::VectorXd residual(const S& sys, const PhaseState<S>& s0, Real h, const Eigen::VectorXd& x) const {
    using L = ResidualLayout<S>;
    constexpr int n = S::dof;
    const Vec<n> q1 = L::q1(x), p1 = L::p1(x);
    const Vec<n> g0 = sys.potential_gradient(s0.q), g1 = sys.potential_gradient(q1);
    Eigen::VectorXd r(L::size);
    r << sys.mass_times(Vec<n>(q1 - s0.q)) / h - s0.p + h / 2 * ((1 - 2 * prm.beta) * g0 + 2 * prm.beta * g1),
        p1 - s0.p + h * ((1 - prm.gamma) * g0 + prm.gamma * g1);
    return r;
  }
};

}  // namespace tether

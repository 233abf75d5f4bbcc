#pragma once
#include "tether/core/families.hpp"
#include "tether/methods/projection.hpp"
#include "tether/methods/residual.hpp"

namespace tether {

// Constrained midpoint rule, BMS24 §5.1.3 (second form), multipliers at
// both ends:
//   p0 = M (q1 - q0)/h + h/2 grad V((q0 + q1)/2) - h G(q0)^T lambda,
//   p1 = M (q1 - q0)/h - h/2 grad V((q0 + q1)/2) + h G(q1)^T lambda~,
//   g(q1) = 0,  G(q1) M^-1 p1 = 0.
// Order 2. q1 enters the force implicitly, so the position stage iterates the
// midpoint force to a fixed point while Newton drives g(q1) to zero.
struct ConstrainedMidpoint {
  static constexpr const char* name = "constrained_midpoint";
  static constexpr int order = 2;
  static constexpr bool two_step = false;
  static constexpr const char* citation = "BMS24 §5.1.3";
  static constexpr const char* description = "constrained implicit midpoint rule";
  static constexpr bool symmetric = true;
  static constexpr bool symplectic = true;
  template <class S>
  static constexpr bool applies_to = HolonomicSystem<S>;
  using Parameters = NoParameters;
  Parameters prm;

  template <class S>
  TETHER_HD static void start(const S&, PhaseState<S>&, Real) {}

  template <class S>
  TETHER_HD static Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations) {
    constexpr int n = S::dof, k = S::constraint_count;
    Vec<k> lambda = Vec<k>::Zero();
    Vec<n> q1 = s.q + h * sys.inverse_mass_times(s.p - Real(0.5) * h * sys.potential_gradient(s.q));
    Vec<n> p_half;
    for (int it = 0;; ++it) {
      // One fixed-point update of the midpoint force and one Newton update
      // of the multipliers per iteration; at the joint fixed point all of
      // the position equations hold.
      p_half = s.p - Real(0.5) * h * sys.potential_gradient(Real(0.5) * (s.q + q1));
      const Vec<n> q_pred = s.q + h * sys.inverse_mass_times(p_half);
      const Vec<n> q_new = q_pred + sys.inverse_mass_times(sys.constraint_transpose_times(s.q, lambda));
      const Vec<k> g = sys.constraints(q_new);
      if (!all_finite(g) || !all_finite(q_new)) return Status::non_finite;
      const Real moved = max_abs(Vec<n>(q_new - q1));
      q1 = q_new;
      const Real tol = constraint_tolerance(sys, opt, q1);
      if (max_abs(g) <= tol && moved <= tol) break;
      if (it >= opt.max_iterations) return Status::newton_not_converged;
      Vec<k> dl;
      if (!sys.gram(q1, s.q).solve(-g, dl)) return Status::singular_matrix;
      lambda += dl;
      ++iterations;
    }
    // M (q1 - q0)/h formed without the difference of positions, which loses
    // eps |q| / (h |M^-1 p|) of the momentum (project_and_recover).
    return finish_step(sys, s, q1,
                       Vec<n>(p_half + sys.constraint_transpose_times(s.q, lambda) / h -
                              Real(0.5) * h * sys.potential_gradient(Real(0.5) * (s.q + q1))));
  }

  template <class S>
  static Eigen::VectorXd residual(const S& sys, const PhaseState<S>& s0, Real h, const Eigen::VectorXd& x) {
    using L = ResidualLayout<S>;
    const auto q1 = L::q1(x), p1 = L::p1(x);
    const Vec<S::dof> v = sys.mass_times(q1 - s0.q) / h;
    const Vec<S::dof> f = sys.potential_gradient(Vec<S::dof>(Real(0.5) * (s0.q + q1)));
    Eigen::VectorXd r(L::size);
    r << v + h / 2 * f - h * sys.constraint_transpose_times(s0.q, L::lambda(x)) - s0.p,
        v - h / 2 * f + h * sys.constraint_transpose_times(q1, L::lambda_end(x)) - p1, sys.constraints(q1),
        sys.constraint_jacobian_times(q1, sys.inverse_mass_times(p1));
    return r;
  }
};

}  // namespace tether

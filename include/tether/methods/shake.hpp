#pragma once
#include "tether/core/families.hpp"
#include "tether/methods/projection.hpp"
#include "tether/methods/projection_tile.hpp"
#include "tether/methods/residual.hpp"

namespace tether {

// SHAKE in its two-step position form, BMS24 §5.1.2 (the equation after
// (5.2)):
//   M (q_{n+1} - 2 q_n + q_{n-1}) / h^2 = -grad V(q_n) + G(q_n)^T mu,  g(q_{n+1}) = 0,
// with the momentum recovered at q_{n+1} by the second half of RATTLE,
// eqs. (5.17)-(5.18): p_{n+1} = M (q_{n+1} - q_n)/h - h/2 grad V(q_{n+1}) + G^T nu,
// G(q_{n+1}) M^-1 p_{n+1} = 0. The state carries q_{n-1}.
// In exact arithmetic the positions are RATTLE's; order 2.
struct Shake {
  static constexpr const char* name = "shake";
  static constexpr int order = 2;
  static constexpr bool two_step = true;  // carries q_{n-1}
  static constexpr const char* citation = "BMS24 §5.1.2 (two-step form) with (5.17)-(5.18)";
  static constexpr const char* description = "SHAKE: RATTLE's positions as a two-step scheme in (q_{n-1}, q_n)";
  static constexpr bool symmetric = true;
  static constexpr bool symplectic = true;
  template <class S>
  static constexpr bool applies_to = HolonomicSystem<S>;
  using Parameters = NoParameters;
  Parameters prm;

  // The virtual q_{-1} for which the two-step formula reproduces RATTLE's
  // first position step from (q0, p0): q_{-1} = q0 - h M^-1 p0 - h^2/2 M^-1 grad V(q0).
  template <class S, class T>
  TETHER_HD static void start(const S& sys, PhaseState<S, T>& s, Real h) {
    s.q_prev = s.q - h * sys.inverse_mass_times(Vec<S::dof, T>(s.p + Real(0.5) * h * sys.potential_gradient(s.q)));
  }

  static constexpr bool carries_force = true;  // grad V(q_{n+1}) of the recovery is the next step's force
  static constexpr bool runs_in_lanes = true;  // written for any scalar T (core/lanes.hpp)

  template <class S, class T>
  TETHER_HD static LaneStatus<T> step(const S& sys, PhaseState<S, T>& s, Real h, const NewtonOptions& opt,
                                      LaneInt<T>& iterations, ForceCarry<S, T>* carry = nullptr) {
    using V = Vec<S::dof, T>;
    // The predicted momentum of the two-step form, M (q_n - q_{n-1})/h - h grad V(q_n): SHAKE's velocities are
    // differences of positions, precise to eps |q| / (h |M^-1 p|).
    // 1/h: hoisted out of a GPU thread's step loop, not dof divisions a step.
    const V p_pred = sys.mass_times(V(s.q - s.q_prev)) * (Real(1) / h) - h * start_force(sys, s.q, carry);
    return project_and_recover(sys, s, p_pred, h, Real(0.5), opt, iterations, carry);
  }

  // The same step in tile form (a lane per bead, methods/projection_tile.hpp),
  // always with a carry, on a state that keeps q_{n-1}.
  static constexpr bool runs_in_tile = true;
  template <class S, class X>
  TETHER_HD static LaneStatus<typename X::Scalar> tile_step(const S& sys, TileState<S, X, true>& s, Real h,
                                                            const NewtonOptions& opt,
                                                            LaneInt<typename X::Scalar>& iterations,
                                                            TileForceCarry<S, X>& carry) {
    const auto p_pred = sys.prm.mass * (s.q - s.q_prev) * (Real(1) / h) - h * tile_start_force(sys, s.q, carry);
    return tile_project_and_recover(sys, s, p_pred, h, Real(0.5), opt, iterations, carry);
  }

  // Unknowns (q_{n+1}, p_{n+1}, mu, nu); s0.q_prev is q_{n-1}.
  template <class S>
  static Eigen::VectorXd residual(const S& sys, const PhaseState<S>& s0, Real h, const Eigen::VectorXd& x) {
    using L = ResidualLayout<S>;
    const auto q1 = L::q1(x), p1 = L::p1(x);
    Eigen::VectorXd r(L::size);
    r << sys.mass_times(q1 - 2 * s0.q + s0.q_prev) / (h * h) + sys.potential_gradient(s0.q) -
             sys.constraint_transpose_times(s0.q, L::lambda(x)),
        sys.mass_times(q1 - s0.q) / h - h / 2 * sys.potential_gradient(q1) +
            sys.constraint_transpose_times(q1, L::lambda_end(x)) - p1,
        sys.constraints(q1), sys.constraint_jacobian_times(q1, sys.inverse_mass_times(p1));
    return r;
  }
};

}  // namespace tether

#pragma once
#include "tether/core/families.hpp"
#include "tether/methods/projection.hpp"
#include "tether/methods/projection_tile.hpp"
#include "tether/methods/residual.hpp"

namespace tether {

// Constrained symplectic Euler A, BMS24 §5.1.1 (second form):
//   p0 = M (q1 - q0)/h + h grad V(q0) - h G(q0)^T lambda,
//   p1 = M (q1 - q0)/h + h G(q1)^T lambda~,
//   g(q1) = 0,  G(q1) M^-1 p1 = 0.
// Kick with the force at q0, drift onto N, project the momentum. Order 1.
struct SymplecticEulerA {
  static constexpr const char* name = "symplectic_euler_a";
  static constexpr int order = 1;
  static constexpr bool two_step = false;
  static constexpr const char* citation = "BMS24 §5.1.1";
  static constexpr const char* description = "constrained symplectic Euler A: kick at the start, then project onto T*N";
  static constexpr bool symmetric = false;
  static constexpr bool symplectic = true;
  template <class S>
  static constexpr bool applies_to = HolonomicSystem<S>;
  using Parameters = NoParameters;
  Parameters prm;

  template <class S>
  TETHER_HD static void start(const S&, PhaseState<S>&, Real) {}

  static constexpr bool runs_in_lanes = true;  // written for any scalar T (core/lanes.hpp)
  template <class S, class T>
  TETHER_HD static LaneStatus<T> step(const S& sys, PhaseState<S, T>& s, Real h, const NewtonOptions& opt,
                                      LaneInt<T>& iterations) {
    return project_and_recover(sys, s, Vec<S::dof, T>(s.p - h * sys.potential_gradient(s.q)), h, Real(0), opt, iterations);
  }

  // The same step in tile form (methods/projection_tile.hpp). Its start
  // force is the carried one where there is one (B's end force, in the pair
  // of a composition): the same value, computed once.
  static constexpr bool runs_in_tile = true;
  template <class S, class X>
  TETHER_HD static LaneStatus<typename X::Scalar> tile_step(const S& sys, TileState<S, X>& s, Real h,
                                                            const NewtonOptions& opt,
                                                            LaneInt<typename X::Scalar>& iterations,
                                                            TileForceCarry<S, X>& carry) {
    return tile_project_and_recover(sys, s, s.p - h * tile_start_force(sys, s.q, carry), h, Real(0), opt, iterations, carry);
  }

  template <class S>
  static Eigen::VectorXd residual(const S& sys, const PhaseState<S>& s0, Real h, const Eigen::VectorXd& x) {
    using L = ResidualLayout<S>;
    const auto q1 = L::q1(x), p1 = L::p1(x);
    const Vec<S::dof> v = sys.mass_times(q1 - s0.q) / h;
    Eigen::VectorXd r(L::size);
    r << v + h * sys.potential_gradient(s0.q) - h * sys.constraint_transpose_times(s0.q, L::lambda(x)) - s0.p,
        v + h * sys.constraint_transpose_times(q1, L::lambda_end(x)) - p1, sys.constraints(q1),
        sys.constraint_jacobian_times(q1, sys.inverse_mass_times(p1));
    return r;
  }
};

}  // namespace tether

#pragma once
#include "tether/core/families.hpp"
#include "tether/methods/projection.hpp"
#include "tether/methods/projection_tile.hpp"
#include "tether/methods/residual.hpp"

namespace tether {

// RATTLE, BMS24 eqs. (5.16)-(5.18) (the composition of symplectic Euler A
// and B with half steps, Example 5.1):
//   p0 = M (q1 - q0)/h + h/2 grad V(q0) - h/2 G(q0)^T lambda,
//   p1 = M (q1 - q0)/h - h/2 grad V(q1) + h/2 G(q1)^T lambda~,
//   g(q1) = 0,  G(q1) M^-1 p1 = 0.
// Order 2, symmetric, symplectic on T*N.
struct Rattle {
  static constexpr const char* name = "rattle";
  static constexpr int order = 2;
  static constexpr bool two_step = false;
  static constexpr const char* citation = "BMS24 eqs. (5.16)-(5.18)";
  static constexpr const char* description = "RATTLE: symplectic Euler A and B half steps composed; symmetric, symplectic on T*N";
  static constexpr bool symmetric = true;
  static constexpr bool symplectic = true;
  template <class S>
  static constexpr bool applies_to = HolonomicSystem<S>;
  using Parameters = NoParameters;
  Parameters prm;

  template <class S>
  TETHER_HD static void start(const S&, PhaseState<S>&, Real) {}

  static constexpr bool carries_force = true;  // grad V(q1) of the end kick is the next first kick
  static constexpr bool runs_in_lanes = true;  // written for any scalar T (core/lanes.hpp)

  template <class S, class T>
  TETHER_HD static LaneStatus<T> step(const S& sys, PhaseState<S, T>& s, Real h, const NewtonOptions& opt,
                                      LaneInt<T>& iterations, ForceCarry<S, T>* carry = nullptr) {
    using V = Vec<S::dof, T>;
    const V p_half = s.p - Real(0.5) * h * start_force(sys, s.q, carry);
    return project_and_recover(sys, s, p_half, h, Real(0.5), opt, iterations, carry);
  }

  // The same step in tile form (a lane per bead, methods/projection_tile.hpp),
  // always with a carry: a tile's carried force costs each lane 3 registers.
  static constexpr bool runs_in_tile = true;
  template <class S, class X>
  TETHER_HD static LaneStatus<typename X::Scalar> tile_step(const S& sys, TileState<S, X>& s, Real h,
                                                            const NewtonOptions& opt,
                                                            LaneInt<typename X::Scalar>& iterations,
                                                            TileForceCarry<S, X>& carry) {
    const auto p_half = s.p - Real(0.5) * h * tile_start_force(sys, s.q, carry);
    return tile_project_and_recover(sys, s, p_half, h, Real(0.5), opt, iterations, carry);
  }

  template <class S>
  static Eigen::VectorXd residual(const S& sys, const PhaseState<S>& s0, Real h, const Eigen::VectorXd& x) {
    using L = ResidualLayout<S>;
    const auto q1 = L::q1(x), p1 = L::p1(x);
    const Vec<S::dof> v = sys.mass_times(q1 - s0.q) / h;
    Eigen::VectorXd r(L::size);
    r << v + h / 2 * sys.potential_gradient(s0.q) - h / 2 * sys.constraint_transpose_times(s0.q, L::lambda(x)) - s0.p,
        v - h / 2 * sys.potential_gradient(q1) + h / 2 * sys.constraint_transpose_times(q1, L::lambda_end(x)) - p1,
        sys.constraints(q1), sys.constraint_jacobian_times(q1, sys.inverse_mass_times(p1));
    return r;
  }
};

}  // namespace tether

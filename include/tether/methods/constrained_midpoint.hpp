#pragma once
#include "tether/core/families.hpp"
#include "tether/methods/projection.hpp"
#include "tether/methods/projection_tile.hpp"
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

  // Written for any scalar T (core/lanes.hpp): with lanes, a lane that has
  // converged or failed keeps its values, and a converged lane is finished
  // while others fail.
  static constexpr bool runs_in_lanes = true;
  template <class S, class T>
  TETHER_HD static LaneStatus<T> step(const S& sys, PhaseState<S, T>& s, Real h, const NewtonOptions& opt,
                                      LaneInt<T>& iterations) {
    constexpr int n = S::dof, k = S::constraint_count;
    using V = Vec<n, T>;
    using K = Vec<k, T>;
    LaneStatus<T> status = uniform<LaneStatus<T>>(Status::ok);
    Mask<T> active(true);
    K lambda = K::Constant(T(Real(0)));
    V q1 = s.q + h * sys.inverse_mass_times(V(s.p - Real(0.5) * h * sys.potential_gradient(s.q)));
    V p_half = s.p;
    for (int it = 0;; ++it) {
      // One fixed-point update of the midpoint force and one Newton update
      // of the multipliers per iteration; at the joint fixed point all of
      // the position equations hold.
      const V p_next = s.p - Real(0.5) * h * sys.potential_gradient(V(Real(0.5) * (s.q + q1)));
      const V q_pred = s.q + h * sys.inverse_mass_times(p_next);
      const V q_new = q_pred + sys.inverse_mass_times(sys.constraint_transpose_times(s.q, lambda));
      const K g = sys.constraints(q_new);
      const Mask<T> finite = all_finite(g) & all_finite(q_new);
      // One trajectory: plain control flow (with the masks and selects a GPU
      // thread stepping a rigid body spilled 100-250 B more).
      if constexpr (lane_count<T> == 1) {
        if (!finite) return Status::non_finite;
        const T moved = max_abs(V(q_new - q1));
        p_half = p_next;
        q1 = q_new;
        const T tol = constraint_tolerance(sys, opt, q1);
        if (max_abs(g) <= tol && moved <= tol) break;
        if (it >= opt.max_iterations) return Status::newton_not_converged;
        K dl;
        if (!sys.gram(q1, s.q).solve(-g, dl)) return Status::singular_matrix;
        lambda += dl;
        ++iterations;
      } else {
        set_where(active & !finite, status, Status::non_finite);
        active = active & finite;
        const T moved = max_abs(V(q_new - q1));
        assign_where(active, p_half, p_next);
        assign_where(active, q1, q_new);
        const T tol = constraint_tolerance(sys, opt, q1);
        active = active & !((max_abs(g) <= tol) & (moved <= tol));
        if (none(active)) break;
        if (it >= opt.max_iterations) {
          set_where(active, status, Status::newton_not_converged);
          break;
        }
        K dl;
        const Mask<T> solved = sys.gram(q1, s.q).solve(-g, dl);
        set_where(active & !solved, status, Status::singular_matrix);
        active = active & solved;
        if (none(active)) break;
        assign_where(active, lambda, lambda + dl);
        add_where(active, iterations, 1);
      }
    }
    if (none(is_ok(status))) return status;
    // M (q1 - q0)/h formed without the difference of positions, which loses
    // eps |q| / (h |M^-1 p|) of the momentum (project_and_recover).
    const V p1 = p_half + sys.constraint_transpose_times(s.q, lambda) / h -
                 Real(0.5) * h * sys.potential_gradient(V(Real(0.5) * (s.q + q1)));
    if constexpr (lane_count<T> == 1)
      return finish_step(sys, s, q1, p1);
    else
      return finish_step(sys, s, q1, p1, status);
  }

  // The same step in tile form (a lane per bead, methods/projection_tile.hpp),
  // line for line. The midpoint's force is not the next step's: the carry is
  // dropped.
  static constexpr bool runs_in_tile = true;
  template <class S, class X>
  TETHER_HD static LaneStatus<typename X::Scalar> tile_step(const S& sys, TileState<S, X>& s, Real h,
                                                            const NewtonOptions& opt,
                                                            LaneInt<typename X::Scalar>& iterations,
                                                            TileForceCarry<S, X>& carry) {
    using T = typename X::Scalar;
    using B = typename S::template Beads<X>;
    carry.valid = false;
    LaneStatus<T> status = uniform<LaneStatus<T>>(Status::ok);
    Mask<T> active(true);
    X lambda(Real(0));
    const B d0 = S::tile_bonds(s.q);
    B q1 = s.q + h * ((s.p - Real(0.5) * h * sys.tile_gradient(s.q)) / sys.prm.mass);
    B p_half = s.p;
    for (int it = 0;; ++it) {
      const B p_next = s.p - Real(0.5) * h * sys.tile_gradient(Real(0.5) * (s.q + q1));
      const B q_pred = s.q + h * (p_next / sys.prm.mass);
      const B q_new = q_pred + sys.tile_transpose_times(d0, lambda) / sys.prm.mass;
      const B d = S::tile_bonds(q_new);  // for g and the Gram matrix both
      const X g = sys.tile_constraints(d);
      const Mask<T> finite = tile::all_finite(g) & tile::all_finite(q_new);
      if constexpr (lane_count<T> == 1) {
        if (!finite) return Status::non_finite;
        const T moved = tile::max_abs(q_new - q1);
        p_half = p_next;
        q1 = q_new;
        const T tol = constraint_tolerance_at(sys, opt, tile::max_abs(q1));
        if (tile::max_abs(g) <= tol && moved <= tol) break;
        if (it >= opt.max_iterations) return Status::newton_not_converged;
        X dl;
        if (!tile_gram_solve(sys, d, d0, X(-g), dl)) return Status::singular_matrix;
        lambda = lambda + dl;
        ++iterations;
      } else {
        set_where(active & !finite, status, Status::non_finite);
        active = active & finite;
        const T moved = tile::max_abs(q_new - q1);
        p_half = tile::select(active, p_next, p_half);
        q1 = tile::select(active, q_new, q1);
        const T tol = constraint_tolerance_at(sys, opt, tile::max_abs(q1));
        active = active & !((tile::max_abs(g) <= tol) & (moved <= tol));
        if (none(active)) break;
        if (it >= opt.max_iterations) {
          set_where(active, status, Status::newton_not_converged);
          break;
        }
        X dl;
        const Mask<T> solved = tile_gram_solve(sys, d, d0, X(-g), dl);
        set_where(active & !solved, status, Status::singular_matrix);
        active = active & solved;
        if (none(active)) break;
        lambda = tile::select(active, X(lambda + dl), lambda);
        add_where(active, iterations, 1);
      }
    }
    if (none(is_ok(status))) return status;
    return tile_finish_step(sys, s, q1,
                            p_half + sys.tile_transpose_times(d0, lambda) / h -
                                Real(0.5) * h * sys.tile_gradient(Real(0.5) * (s.q + q1)),
                            status);
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

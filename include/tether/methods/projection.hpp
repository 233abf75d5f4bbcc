#pragma once
// The two constraint solves every holonomic method here is built from.
//
// Written once for a scalar T: Real on a GPU thread (and wherever one
// trajectory is stepped), Lanes<W> for W trajectories in lockstep on the cpu
// backend (core/lanes.hpp). With lanes every outcome is per lane, and a lane
// that has converged, failed or been refused keeps its values (select), so
// each lane computes what it would alone.
#include "tether/core/lanes.hpp"
#include "tether/core/newton.hpp"
#include "tether/core/status.hpp"
#include "tether/core/types.hpp"

namespace tether {

// The state a method carries between steps: a point (q, p) of T*N, and for
// two-step methods (SHAKE) the previous configuration.
template <class System, class T = Real>
struct PhaseState {
  Vec<System::dof, T> q, p, q_prev;
};

// The bound on |g(q)| a solve must reach: the relative tolerance times the
// system's length scale, or, far from the origin, the roundoff floor of
// constraints computed from differences of positions (bond vectors), which
// grows like eps |q|, whichever is larger.
// largest_q = max_abs(q), however q is held (a tile's spread, core/tile.hpp).
template <class System, class T>
TETHER_HD T constraint_tolerance_at(const System& sys, const NewtonOptions& opt, const T& largest_q) {
  const Real wanted = opt.tolerance * sys.length_scale();
  const T floor = Real(16) * Real(2.220446049250313e-16) * largest_q;
  return select(floor < T(wanted), T(wanted), floor);
}
template <class System, class T>
TETHER_HD T constraint_tolerance(const System& sys, const NewtonOptions& opt, const Vec<System::dof, T>& q) {
  return constraint_tolerance_at(sys, opt, max_abs(q));
}

// Position stage: find multipliers lambda so that
//   q = q_pred + M^-1 G(q_dir)^T lambda   satisfies   g(q) = 0.
// Newton on lambda alone (the SHAKE iteration): its Jacobian is
// G(q) M^-1 G(q_dir)^T, the system's constraint Gram matrix, k x k and
// structured (dense for small k, tridiagonal for chains).
// `iterations` is increased by the number of Newton updates taken; `lambda`,
// when given, receives the multipliers.
template <class System, class T>
TETHER_HD LaneStatus<T> solve_position_multipliers(const System& sys, const Id<Vec<System::dof, T>>& q_pred,
                                                   const Id<Vec<System::dof, T>>& q_dir, const NewtonOptions& opt,
                                                   Vec<System::dof, T>& q, LaneInt<T>& iterations,
                                                   Vec<System::constraint_count, T>* lambda_out = nullptr) {
  constexpr int k = System::constraint_count;
  LaneStatus<T> status = uniform<LaneStatus<T>>(Status::ok);
  Mask<T> active(true);
  Vec<k, T> own_lambda;
  Vec<k, T>& lambda = lambda_out != nullptr ? *lambda_out : own_lambda;
  lambda = Vec<k, T>::Constant(T(Real(0)));
  q = q_pred;
  for (int it = 0;; ++it) {
    const Vec<k, T> g = sys.constraints(q);
    const Mask<T> finite = all_finite(g);
    set_where(active & !finite, status, Status::non_finite);
    active = active & finite;
    active = active & !(max_abs(g) <= constraint_tolerance(sys, opt, q));
    if (none(active)) return status;
    if (it >= opt.max_iterations) {
      set_where(active, status, Status::newton_not_converged);
      return status;
    }
    Vec<k, T> step;
    const Mask<T> solved = sys.gram(q, q_dir).solve(-g, step);
    set_where(active & !solved, status, Status::singular_matrix);
    active = active & solved;
    if (none(active)) return status;
    if constexpr (lane_count<T> == 1) {  // active: the plain update
      lambda += step;
      q = q_pred + sys.inverse_mass_times(sys.constraint_transpose_times(q_dir, lambda));
      ++iterations;
    } else {
      assign_where(active, lambda, lambda + step);
      assign_where(active, q, q_pred + sys.inverse_mass_times(sys.constraint_transpose_times(q_dir, lambda)));
      add_where(active, iterations, 1);
    }
  }
}

// Momentum stage: the tangency condition G(q) M^-1 p = 0 is linear in the
// multiplier, p <- p + G(q)^T nu with (G M^-1 G^T) nu = -G M^-1 p: the
// M^-1-orthogonal projection onto the cotangent space of N at q.
template <class System, class T>
TETHER_HD LaneStatus<T> project_momentum(const System& sys, const Id<Vec<System::dof, T>>& q, Vec<System::dof, T>& p) {
  constexpr int k = System::constraint_count;
  const Vec<k, T> rhs = -sys.constraint_jacobian_times(q, sys.inverse_mass_times(p));
  Vec<k, T> nu;
  LaneStatus<T> status = uniform<LaneStatus<T>>(Status::ok);
  const Mask<T> solved = sys.gram(q, q).solve(rhs, nu);
  set_where(!solved, status, Status::singular_matrix);
  if (none(solved)) return status;
  assign_where(solved, p, p + sys.constraint_transpose_times(q, nu));
  set_where(solved & !all_finite(p), status, Status::non_finite);
  return status;
}

// Every method's last act: moves the state to (q1, p1), keeping q0 for
// two-step methods; a non-finite result is refused and the state left as it
// was. Lanes outside `take` are left as they were too.
template <class System, class T>
TETHER_HD LaneStatus<T> accept_step(PhaseState<System, T>& s, const Id<Vec<System::dof, T>>& q1,
                                    const Id<Vec<System::dof, T>>& p1, Id<Mask<T>> take = Mask<T>(true)) {
  LaneStatus<T> status = uniform<LaneStatus<T>>(Status::ok);
  const Mask<T> finite = all_finite(q1) & all_finite(p1);
  set_where(take & !finite, status, Status::non_finite);
  take = take & finite;
  if constexpr (lane_count<T> == 1) {
    if (!take) return status;
    s.q_prev = s.q;
    s.q = q1;
    s.p = p1;
  } else {
    assign_where(take, s.q_prev, s.q);
    assign_where(take, s.q, q1);
    assign_where(take, s.p, p1);
  }
  return status;
}

// Ends a step: imposes the tangency condition G(q1) M^-1 p1 = 0 on p1 and
// accepts (q1, p1), in the lanes whose step is still ok (`status`).
template <class System, class T>
TETHER_HD LaneStatus<T> finish_step(const System& sys, PhaseState<System, T>& s, const Id<Vec<System::dof, T>>& q1,
                                    Id<Vec<System::dof, T>> p1,
                                    LaneStatus<T> status = uniform<LaneStatus<T>>(Status::ok)) {
  status = first_failure(status, project_momentum(sys, q1, p1));
  return first_failure(status, accept_step(s, q1, p1, is_ok(status)));
}

// First same as last: the force grad V(q) at the end of a RATTLE or SHAKE
// step is the next step's first force. A loop that keeps it between steps
// (ForceCarry) evaluates grad V once per step instead of twice: for a chain
// with torsion that is most of a step. The carry is the loop's, not the
// state's, so a state set from outside (a load, a rejected HMC proposal)
// never meets a stale force; a loop that moves q itself drops its carry.
template <class System, class T = Real>
struct ForceCarry {
  Vec<System::dof, T> force;  // grad V at the state's q, when valid
  bool valid = false;
};

// Methods whose step can keep its end force for the next step (ForceCarry).
template <class M>
constexpr bool carries_force = requires { requires M::carries_force; };

// grad V(q): the carried value when there is one; a carry without one is
// given it.
template <class System, class T>
TETHER_HD Vec<System::dof, T> start_force(const System& sys, const Vec<System::dof, T>& q,
                                          ForceCarry<System, T>* carry) {
  if (carry == nullptr) return sys.potential_gradient(q);
  if (!carry->valid) {
    carry->force = sys.potential_gradient(q);
    carry->valid = true;
  }
  return carry->force;
}

// The step shared by the SHAKE/RATTLE family, from a predicted momentum
// p_pred (the position it predicts is q_pred = q0 + h M^-1 p_pred):
//   q1 = q_pred + M^-1 G(q0)^T lambda,  g(q1) = 0,
//   p1 = M (q1 - q0)/h - end_kick h grad V(q1) + G(q1)^T nu,  G(q1) M^-1 p1 = 0.
// M (q1 - q0)/h is formed as p_pred + G(q0)^T lambda / h, equal in exact
// arithmetic: the difference of positions loses eps |q| / (h |M^-1 p|) of
// the momentum, all of it once h |M^-1 p| falls below the spacing of
// doubles at q (the whole kinetic energy lost at dt = 1e-300).
// With a carry (end_kick != 0), grad V(q1) is left in it for the next step.
// On failure the state and the carry are left as they were.
template <class System, class T>
TETHER_HD LaneStatus<T> project_and_recover(const System& sys, PhaseState<System, T>& s,
                                            const Id<Vec<System::dof, T>>& p_pred, Real h, Real end_kick,
                                            const NewtonOptions& opt, LaneInt<T>& iterations,
                                            ForceCarry<System, T>* carry = nullptr) {
  using V = Vec<System::dof, T>;
  V q1;
  Vec<System::constraint_count, T> lambda;
  const V q_pred = s.q + h * sys.inverse_mass_times(p_pred);
  const LaneStatus<T> st = solve_position_multipliers(sys, q_pred, s.q, opt, q1, iterations, &lambda);
  if (none(is_ok(st))) return st;
  V p1 = p_pred + sys.constraint_transpose_times(s.q, lambda) * (Real(1) / h);  // 1/h: hoisted, not 3 divisions
  if (end_kick == 0) {  // no end force to carry: a carry given would go stale
    if (carry != nullptr) carry->valid = false;
    return finish_step(sys, s, q1, p1, st);
  }
  const V force1 = sys.potential_gradient(q1);
  p1 -= end_kick * h * force1;
  const LaneStatus<T> done = finish_step(sys, s, q1, p1, st);
  if (carry != nullptr) {
    if constexpr (lane_count<T> == 1) {
      if (done == Status::ok) {
        carry->force = force1;
        carry->valid = true;
      }
    } else {
      assign_where(is_ok(done), carry->force, force1);  // every lane's force is at its q
    }
  }
  return done;
}

}  // namespace tether

#pragma once
// The two constraint solves every holonomic method here is built from.
#include "tether/core/newton.hpp"
#include "tether/core/status.hpp"
#include "tether/core/types.hpp"

namespace tether {

// The state a method carries between steps: a point (q, p) of T*N, and for
// two-step methods (SHAKE) the previous configuration.
template <class System>
struct PhaseState {
  Vec<System::dof> q, p, q_prev;
};

// The bound on |g(q)| a solve must reach: the relative tolerance times the
// system's length scale, or, far from the origin, the roundoff floor of
// constraints computed from differences of positions (bond vectors), which
// grows like eps |q|, whichever is larger.
template <class System>
TETHER_HD Real constraint_tolerance(const System& sys, const NewtonOptions& opt, const Vec<System::dof>& q) {
  const Real wanted = opt.tolerance * sys.length_scale();
  const Real floor = Real(16) * Real(2.220446049250313e-16) * max_abs(q);
  return wanted > floor ? wanted : floor;
}

// Position stage: find multipliers lambda so that
//   q = q_pred + M^-1 G(q_dir)^T lambda   satisfies   g(q) = 0.
// Newton on lambda alone (the SHAKE iteration): its Jacobian is
// G(q) M^-1 G(q_dir)^T, the system's constraint Gram matrix, k x k and
// structured (dense for small k, tridiagonal for chains).
// `iterations` is increased by the number of Newton updates taken.
template <class System>
TETHER_HD Status solve_position_multipliers(const System& sys, const Vec<System::dof>& q_pred,
                                            const Vec<System::dof>& q_dir, const NewtonOptions& opt,
                                            Vec<System::dof>& q, int& iterations) {
  constexpr int k = System::constraint_count;
  Vec<k> lambda = Vec<k>::Zero();
  q = q_pred;
  for (int it = 0;; ++it) {
    const Vec<k> g = sys.constraints(q);
    if (!all_finite(g)) return Status::non_finite;
    if (max_abs(g) <= constraint_tolerance(sys, opt, q)) return Status::ok;
    if (it >= opt.max_iterations) return Status::newton_not_converged;
    Vec<k> step;
    if (!sys.gram(q, q_dir).solve(-g, step)) return Status::singular_matrix;
    lambda += step;
    q = q_pred + sys.inverse_mass_times(sys.constraint_transpose_times(q_dir, lambda));
    ++iterations;
  }
}

// Momentum stage: the tangency condition G(q) M^-1 p = 0 is linear in the
// multiplier, p <- p + G(q)^T nu with (G M^-1 G^T) nu = -G M^-1 p: the
// M^-1-orthogonal projection onto the cotangent space of N at q.
template <class System>
TETHER_HD Status project_momentum(const System& sys, const Vec<System::dof>& q, Vec<System::dof>& p) {
  constexpr int k = System::constraint_count;
  const Vec<k> rhs = -sys.constraint_jacobian_times(q, sys.inverse_mass_times(p));
  Vec<k> nu;
  if (!sys.gram(q, q).solve(rhs, nu)) return Status::singular_matrix;
  p += sys.constraint_transpose_times(q, nu);
  return all_finite(p) ? Status::ok : Status::non_finite;
}

// Every method's last act: moves the state to (q1, p1), keeping q0 for
// two-step methods; a non-finite result is refused and the state left as it was.
template <class System>
TETHER_HD Status accept_step(PhaseState<System>& s, const Vec<System::dof>& q1, const Vec<System::dof>& p1) {
  if (!all_finite(q1) || !all_finite(p1)) return Status::non_finite;
  s.q_prev = s.q;
  s.q = q1;
  s.p = p1;
  return Status::ok;
}

// Ends a step: imposes the tangency condition G(q1) M^-1 p1 = 0 on p1 and
// accepts (q1, p1).
template <class System>
TETHER_HD Status finish_step(const System& sys, PhaseState<System>& s, const Vec<System::dof>& q1,
                             Vec<System::dof> p1) {
  const Status st = project_momentum(sys, q1, p1);
  if (st != Status::ok) return st;
  return accept_step(s, q1, p1);
}

// First same as last: the force grad V(q) at the end of a RATTLE or SHAKE
// step is the next step's first force. A loop that keeps it between steps
// (ForceCarry) evaluates grad V once per step instead of twice: for a chain
// with torsion that is most of a step. The carry is the loop's, not the
// state's, so a state set from outside (a load, a rejected HMC proposal)
// never meets a stale force; a loop that moves q itself drops its carry.
template <class System>
struct ForceCarry {
  Vec<System::dof> force;  // grad V at the state's q, when valid
  bool valid = false;
};

// grad V(q): the carried value when there is one.
template <class System>
TETHER_HD Vec<System::dof> start_force(const System& sys, const Vec<System::dof>& q, const ForceCarry<System>* carry) {
  return carry != nullptr && carry->valid ? carry->force : sys.potential_gradient(q);
}

// The step shared by the SHAKE/RATTLE family, from a predicted position:
//   q1 = q_pred + M^-1 G(q0)^T lambda,  g(q1) = 0,
//   p1 = M (q1 - q0)/h - end_kick h grad V(q1) + G(q1)^T nu,  G(q1) M^-1 p1 = 0.
// With a carry (end_kick != 0), grad V(q1) is left in it for the next step.
// On failure the state and the carry are left as they were.
template <class System>
TETHER_HD Status project_and_recover(const System& sys, PhaseState<System>& s, const Vec<System::dof>& q_pred, Real h,
                                     Real end_kick, const NewtonOptions& opt, int& iterations,
                                     ForceCarry<System>* carry = nullptr) {
  Vec<System::dof> q1;
  Status st = solve_position_multipliers(sys, q_pred, s.q, opt, q1, iterations);
  if (st != Status::ok) return st;
  Vec<System::dof> p1 = sys.mass_times(q1 - s.q) / h;
  if (end_kick == 0) return finish_step(sys, s, q1, p1);
  const Vec<System::dof> force1 = sys.potential_gradient(q1);
  p1 -= end_kick * h * force1;
  st = finish_step(sys, s, q1, p1);
  if (st == Status::ok && carry != nullptr) {
    carry->force = force1;
    carry->valid = true;
  }
  return st;
}

}  // namespace tether

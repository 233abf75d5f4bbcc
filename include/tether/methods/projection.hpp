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
    if (max_abs(g) <= attainable_tolerance(opt, max_abs(q))) return Status::ok;
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

}  // namespace tether

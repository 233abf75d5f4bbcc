#pragma once
// Newton on a small fixed-size system F(x) = 0 with a dense Jacobian. Stops
// one (polishing) iteration after the update falls below
// tolerance x (1 + |x|), which reaches the roundoff floor without needing an
// absolute residual bound. Some unknowns (multipliers fixed by a position
// constraint, like RATTLE's) are only determined to ~eps/h: when the update,
// already below 1e-8 (1 + |x|), stops shrinking, that floor is reached too.
#include "tether/core/newton.hpp"
#include "tether/core/small_solve.hpp"
#include "tether/core/status.hpp"

namespace tether {

// fill(x, residual, jacobian) evaluates F(x) and its Jacobian.
template <int N, class Fill>
TETHER_HD Status polished_newton(Vec<N>& x, const NewtonOptions& opt, int& iterations, Fill&& fill) {
  bool polishing = false;
  Real last = 0;
  for (int it = 0;; ++it) {
    if (it >= opt.max_iterations) return Status::newton_not_converged;
    Vec<N> residual;
    DenseMatrix<N> jac;
    fill(x, residual, jac.a);
    Vec<N> dx;
    if (!jac.solve(-residual, dx)) return Status::singular_matrix;
    x += dx;
    ++iterations;
    if (!all_finite(x)) return Status::non_finite;
    if (polishing) return Status::ok;
    const Real size = max_abs(dx), scale = 1 + max_abs(x);
    if (it > 0 && size <= Real(1e-8) * scale && size >= Real(0.5) * last) return Status::ok;  // stagnated at roundoff
    polishing = size <= opt.tolerance * scale;
    last = size;
  }
}

}  // namespace tether

#pragma once
// Newton on a small fixed-size system F(x) = 0 with a dense Jacobian, in its
// chord form: the Jacobian is evaluated and factored at the first iterate and
// again only when an update fails to contract by 4x, so most iterations cost
// one residual (for the methods here: a gradient instead of a Hessian).
// Stops one (polishing) iteration after the update falls below
// tolerance x (1 + |x|), which reaches the roundoff floor without needing an
// absolute residual bound. Some unknowns (multipliers fixed by a position
// constraint, like RATTLE's) are only determined to ~eps/h: when a full
// Newton update, already below 1e-8 (1 + |x|), stops shrinking, that floor is
// reached too.
#include "tether/core/newton.hpp"
#include "tether/core/small_solve.hpp"
#include "tether/core/status.hpp"

namespace tether {

// A factored Jacobian kept from one solve to the next nearby one (a step's to
// the next step's): the chord starts from it instead of from a fresh Jacobian.
// Factors: the dense LU, or any factorization with the same members
// (Jacobian, what fill builds in jacobian_storage(); factor_in_place, which
// factors it there; solve), such as the Gauss-Legendre stages' transformed
// one (gauss_legendre.hpp).
template <int N, class Factors = DenseLU<N>>
struct Chord {
  Factors lu;
  bool valid = false;
};

// fill(x, residual, jacobian) evaluates F(x), and its Jacobian (a
// Factors::Jacobian: the matrix itself, or what stands for it) when the
// pointer is not null. The chord is where the factored Jacobian lives: a
// valid one starts the iteration, and a refresh leaves its own there for the
// next solve. A caller that keeps none gets a fresh one (the overload below);
// one that does gives its own, so that a GPU thread holds one factorization,
// not one per call site.
template <int N, class Factors = DenseLU<N>, class Fill>
TETHER_HD Status polished_newton(Vec<N>& x, const NewtonOptions& opt, int& iterations, Fill&& fill,
                                 Chord<N, Factors>& c) {
  using Jacobian = typename Factors::Jacobian;
  const Factors& lu = c.lu;
  bool polishing = false, refresh = !c.valid;
  Real last = 0;
  for (int it = 0;; ++it) {
    if (it >= opt.max_iterations) return Status::newton_not_converged;
    Vec<N> residual;
    const bool exact = refresh;  // this update is a full Newton step
    if (refresh) {
      fill(x, residual, &c.lu.jacobian_storage());  // built where it is factored: one copy, not two
      c.valid = c.lu.factor_in_place();
      if (!c.valid) return Status::singular_matrix;
      refresh = false;
    } else {
      fill(x, residual, static_cast<Jacobian*>(nullptr));
    }
    Vec<N> dx;
    if (!lu.solve(-residual, dx)) return Status::singular_matrix;
    x += dx;
    ++iterations;
    if (!all_finite(x)) return Status::non_finite;
    if (polishing) return Status::ok;
    const Real size = max_abs(dx), scale = 1 + max_abs(x);
    if (it > 0 && size > Real(0.25) * last) {
      if (exact && size <= Real(1e-8) * scale && size >= Real(0.5) * last) return Status::ok;  // roundoff floor
      refresh = true;
    }
    polishing = size <= opt.tolerance * scale;
    last = size;
  }
}

template <int N, class Factors = DenseLU<N>, class Fill>
TETHER_HD Status polished_newton(Vec<N>& x, const NewtonOptions& opt, int& iterations, Fill&& fill) {
  Chord<N, Factors> fresh;
  return polished_newton<N, Factors>(x, opt, iterations, fill, fresh);
}

}  // namespace tether

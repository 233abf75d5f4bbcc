#pragma once
// The SHAKE/RATTLE constraint solves of methods/projection.hpp for a system
// whose step functions also come in tile form (a chain: one bead per lane,
// core/tile.hpp). Line for line the algorithm of projection.hpp, on bonds
// and multipliers spread across the tile, with the same arithmetic in the
// same order: a tile's step and a lone thread's agree to the bit where Eigen
// does not vectorise the lone thread's (lanes, a GPU; tests/core/test_tile.cpp). X is the tile value (tile::Thread<L> on a GPU,
// tile::Emulated<T, L> on the cpu), T = X::Scalar its per-trajectory scalar.
#include "tether/core/newton.hpp"
#include "tether/core/tile.hpp"
#include "tether/methods/projection.hpp"

namespace tether {

// Systems with a tile form: a lane per bead, as many beads as a power of two
// of at most a warp's 32 lanes (other bead counts step in one thread), all
// of one mass (prm.mass below: M^-1 is a multiplication by its reciprocal).
template <class S>
constexpr bool has_tile_form = requires {
  requires S::tile_lanes <= 32 && (S::tile_lanes & (S::tile_lanes - 1)) == 0;
};

// Pairs stepped in tile form: a GPU runs a tile of S::tile_lanes threads
// per trajectory or chain, one bead each (ensemble/advance.hpp's
// advance_tile, sampling/hmc_tile.hpp); the cpu backend runs the same tile
// step. Every tile step leaves a failed step's state as it was (a
// composition's keeps its start: a few numbers per lane).
template <class S, class M>
constexpr bool runs_in_tile = has_tile_form<S> && requires { requires M::runs_in_tile; };

// (q, p) of T*N in tile form; a two-step method's (SHAKE's) also q_{n-1}.
template <class S, class X, bool two_step = false>
struct TileState {
  typename S::template Beads<X> q, p;
};
template <class S, class X>
struct TileState<S, X, true> {
  typename S::template Beads<X> q, p, q_prev;
};

// The tile state method M steps.
template <class S, class M, class X>
using TileStateFor = TileState<S, X, M::two_step>;

// ForceCarry in tile form.
template <class S, class X>
struct TileForceCarry {
  typename S::template Beads<X> force;
  bool valid = false;
};

// G(qa) M^-1 G(qb)^T x = rhs, from the bonds of qa and qb.
template <class S, class X>
TETHER_HD Mask<typename X::Scalar> tile_gram_solve(const S& sys, const typename S::template Beads<X>& da,
                                                   const typename S::template Beads<X>& db, const X& rhs, X& x) {
  X lower, diag, upper;
  sys.tile_gram(da, db, lower, diag, upper);
  return tile::solve_tridiagonal<S::constraint_count>(lower, diag, upper, rhs, x);
}

// solve_position_multipliers, with d_dir the bonds of q_dir.
template <class S, class X>
TETHER_HD LaneStatus<typename X::Scalar> tile_solve_position_multipliers(
    const S& sys, const typename S::template Beads<X>& q_pred, const typename S::template Beads<X>& d_dir,
    const NewtonOptions& opt, typename S::template Beads<X>& q, LaneInt<typename X::Scalar>& iterations, X& lambda) {
  using T = typename X::Scalar;
  LaneStatus<T> status = uniform<LaneStatus<T>>(Status::ok);
  Mask<T> active(true);
  lambda = X(Real(0));
  q = q_pred;
  for (int it = 0;; ++it) {
    const auto d = S::tile_bonds(q);  // for g and the Gram matrix both
    const X g = sys.tile_constraints(d);
    const Mask<T> finite = tile::all_finite(g);
    set_where(active & !finite, status, Status::non_finite);
    active = active & finite;
    active = active & !(tile::max_abs(g) <= constraint_tolerance_at(sys, opt, tile::max_abs(q)));
    if (none(active)) return status;
    if (it >= opt.max_iterations) {
      set_where(active, status, Status::newton_not_converged);
      return status;
    }
    X step;
    const Mask<T> solved = tile_gram_solve(sys, d, d_dir, X(-g), step);
    set_where(active & !solved, status, Status::singular_matrix);
    active = active & solved;
    if (none(active)) return status;
    if constexpr (lane_count<T> == 1) {
      lambda += step;
      q = q_pred + sys.tile_transpose_times(d_dir, lambda) * (Real(1) / sys.prm.mass);
      ++iterations;
    } else {
      lambda = tile::select(active, X(lambda + step), lambda);
      q = tile::select(active, q_pred + sys.tile_transpose_times(d_dir, lambda) * (Real(1) / sys.prm.mass), q);
      add_where(active, iterations, 1);
    }
  }
}

// project_momentum.
template <class S, class X>
TETHER_HD LaneStatus<typename X::Scalar> tile_project_momentum(const S& sys, const typename S::template Beads<X>& q,
                                                               typename S::template Beads<X>& p) {
  using T = typename X::Scalar;
  const auto d = S::tile_bonds(q);
  const X rhs = -sys.tile_jacobian_times(d, p * (Real(1) / sys.prm.mass));
  X nu;
  LaneStatus<T> status = uniform<LaneStatus<T>>(Status::ok);
  const Mask<T> solved = tile_gram_solve(sys, d, d, rhs, nu);
  set_where(!solved, status, Status::singular_matrix);
  if (none(solved)) return status;
  p = tile::select(solved, p + sys.tile_transpose_times(d, nu), p);
  set_where(solved & !tile::all_finite(p), status, Status::non_finite);
  return status;
}

// accept_step.
template <class S, class X, bool two_step>
TETHER_HD LaneStatus<typename X::Scalar> tile_accept_step(TileState<S, X, two_step>& s,
                                                          const typename S::template Beads<X>& q1,
                                                          const typename S::template Beads<X>& p1,
                                                          Mask<typename X::Scalar> take) {
  using T = typename X::Scalar;
  LaneStatus<T> status = uniform<LaneStatus<T>>(Status::ok);
  const Mask<T> finite = tile::all_finite(q1) & tile::all_finite(p1);
  set_where(take & !finite, status, Status::non_finite);
  take = take & finite;
  if constexpr (lane_count<T> == 1) {
    if (!take) return status;
    if constexpr (two_step) s.q_prev = s.q;
    s.q = q1;
    s.p = p1;
  } else {
    if constexpr (two_step) s.q_prev = tile::select(take, s.q, s.q_prev);
    s.q = tile::select(take, q1, s.q);
    s.p = tile::select(take, p1, s.p);
  }
  return status;
}

// finish_step: the momentum projected at q1, then (q1, p1) accepted, in the
// lanes whose step is still ok (`status`).
template <class S, class X, bool two_step>
TETHER_HD LaneStatus<typename X::Scalar> tile_finish_step(const S& sys, TileState<S, X, two_step>& s,
                                                          const typename S::template Beads<X>& q1,
                                                          typename S::template Beads<X> p1,
                                                          LaneStatus<typename X::Scalar> status) {
  status = first_failure(status, tile_project_momentum<S, X>(sys, q1, p1));
  return first_failure(status, tile_accept_step(s, q1, p1, is_ok(status)));
}

// start_force.
template <class S, class X>
TETHER_HD typename S::template Beads<X> tile_start_force(const S& sys, const typename S::template Beads<X>& q,
                                                         TileForceCarry<S, X>& carry) {
  if (!carry.valid) {
    carry.force = sys.tile_gradient(q);
    carry.valid = true;
  }
  return carry.force;
}

// project_and_recover with its end kick (RATTLE's 1/2, symplectic Euler B's 1;
// A's 0 drops the carry) and a carry.
template <class S, class X, bool two_step>
TETHER_HD LaneStatus<typename X::Scalar> tile_project_and_recover(const S& sys, TileState<S, X, two_step>& s,
                                                                  const typename S::template Beads<X>& p_pred, Real h,
                                                                  Real end_kick, const NewtonOptions& opt,
                                                                  LaneInt<typename X::Scalar>& iterations,
                                                                  TileForceCarry<S, X>& carry) {
  using T = typename X::Scalar;
  using B = typename S::template Beads<X>;
  B q1;
  X lambda;
  const B q_pred = s.q + h * (p_pred * (Real(1) / sys.prm.mass));
  const B d0 = S::tile_bonds(s.q);
  LaneStatus<T> st = tile_solve_position_multipliers(sys, q_pred, d0, opt, q1, iterations, lambda);
  if (none(is_ok(st))) return st;
  B p1 = p_pred + sys.tile_transpose_times(d0, lambda) * (Real(1) / h);
  if (end_kick == 0) {  // no end force: the carried one, of q0, would go stale
    carry.valid = false;
    return tile_finish_step(sys, s, q1, p1, st);
  }
  const B force1 = sys.tile_gradient(q1);
  p1 = p1 - end_kick * h * force1;
  const LaneStatus<T> done = tile_finish_step(sys, s, q1, p1, st);
  if constexpr (lane_count<T> == 1) {
    if (done == Status::ok) {
      carry.force = force1;
      carry.valid = true;
    }
  } else {  // every live lane's force is at its q (a failed lane's is dropped with it)
    carry.force = tile::select(is_ok(done), force1, carry.force);
    carry.valid = true;
  }
  return done;
}

}  // namespace tether

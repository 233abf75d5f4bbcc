#pragma once
// The per-trajectory loop, written once for every backend: the cuda kernel
// calls it from one thread per trajectory, the cpu backend from an OpenMP
// loop (or advance_lanes below: the same loop for W trajectories in
// lockstep). Pairs with a tile form (a chain's RATTLE) run advance_tile on a
// GPU, a tile of threads per trajectory, and their tile step in
// advance_lanes on the cpu. State stays in registers for all nsteps steps.
#include <type_traits>

#include "tether/core/lanes.hpp"
#include "tether/ensemble/view.hpp"
#include "tether/methods/projection_tile.hpp"
#include "tether/systems/generalized_hamiltonian.hpp"

namespace tether {

struct StepControl {
  Real dt = 0;
  NewtonOptions newton;
};

// Whether a failed step of M leaves the state as it was. Every method's does
// but a composition's, whose substeps move the state in place: for those
// advance_trajectory's replay restores the last good state.
template <class M>
constexpr bool keeps_state_on_failure = !requires { requires !M::keeps_state_on_failure; };

// Whether a backend's launch of M on S is followed by advance_trajectory's
// replay: where M's one-thread step moves a failed step's state part-way.
template <class S, class M>
constexpr bool needs_replay = !runs_in_tile<S, M> && !keeps_state_on_failure<M>;

// stepper.step does one step of method M (the method object itself, with its
// parameters, or the reference backend's generic solve of M's equations).
// A method that can carries its end force from step to step (the cpu's and a
// GPU's threads alike; the reference backend's generic solve cannot): a
// force evaluation fewer per step, for S::dof more registers. The states are
// bitwise the same either way. numba.cuda's chain8 RATTLE, carrying it, ran
// 1.9x its own plain kernel on an H200 (2026-11-30, bench/README.md).
//
// A failed trajectory keeps its last good state. Where M's failed step leaves
// the state part-way (keeps_state_on_failure), the trajectory is left at the
// launch's start instead, and a second call with `replay` (every backend
// makes it after such a method's launch) takes it through the launch's good
// steps again: the same loop and the same call of the step, so the same bits
// (the carry starts empty, as it did). A failure costs its trajectory at most
// one launch's steps, once. The replay is a call of its own because inside
// the loop it made the compiler hold the state's addresses through every step
// (chain4's composition kernel spilled). One copy on the host, so that a
// replay runs the machine code the launch ran.
template <class S, class M, class Stepper = M>
TETHER_HD TETHER_ONE_COPY void advance_trajectory(const S& sys, const Stepper& stepper, const StepControl& ctl,
                                                  const EnsembleView& v, std::int64_t i, int nsteps,
                                                  std::int64_t steps_before, bool replay = false) {
  replay = replay && !keeps_state_on_failure<M>;  // no replay code where none is needed
  int limit = nsteps;
  if (replay) {
    if (v.status[i] == static_cast<std::uint8_t>(Status::ok) || v.failed_step[i] <= steps_before) return;
    limit = static_cast<int>(v.failed_step[i] - steps_before) - 1;
  } else if (v.status[i] != static_cast<std::uint8_t>(Status::ok)) {
    return;
  }
  PhaseState<S> s;
  load_state<S, M>(v, i, s);
  std::uint64_t sum = 0;
  int most = v.iterations_max[i];
  constexpr bool carry = carries_force<M> && std::is_same_v<Stepper, M>;
  [[maybe_unused]] ForceCarry<S> force;
  for (int n = 0; n < limit; ++n) {
    int it = 0;
    Status st;
    if constexpr (carry)
      st = stepper.step(sys, s, ctl.dt, ctl.newton, it, &force);
    else
      st = stepper.step(sys, s, ctl.dt, ctl.newton, it);
    if (replay) continue;  // good steps again, counted the first time
    sum += static_cast<std::uint64_t>(it);
    if (it > most) most = it;
    if (st != Status::ok) {
      v.status[i] = static_cast<std::uint8_t>(st);
      v.failed_step[i] = steps_before + n + 1;
      break;  // s holds the last good state, or keeps_state_on_failure<M> is false
    }
  }
  // A failed step of M that leaves s part-way leaves the launch's start in v, for the replay.
  if (keeps_state_on_failure<M> || replay || v.status[i] == static_cast<std::uint8_t>(Status::ok))
    store_state<S, M>(v, i, s);
  if (replay) return;
  v.iterations_sum[i] += sum;
  v.iterations_max[i] = most;
}

#if defined(__CUDACC__)
// advance_trajectory for a tile: the lanes of trajectory i step their beads
// together; lane 0 keeps the trajectory's counts and outcome. M's tile step
// leaves a failed step's state as it was (runs_in_tile).
template <class S, class M>
__device__ void advance_tile(const S& sys, const M& method, const StepControl& ctl, const EnsembleView& v,
                             std::int64_t i, int nsteps, std::int64_t steps_before) {
  using X = tile::Thread<S::tile_lanes>;
  if (v.status[i] != static_cast<std::uint8_t>(Status::ok)) return;  // the same for the whole tile
  const int bead = X::lane();
  TileStateFor<S, M, X> s;
  for (int k = 0; k < 3; ++k) {
    s.q.c[k] = X(v.q[(3 * bead + k) * v.count + i]);
    s.p.c[k] = X(v.p[(3 * bead + k) * v.count + i]);
    if constexpr (M::two_step) s.q_prev.c[k] = X(v.q_prev[(3 * bead + k) * v.count + i]);
  }
  TileForceCarry<S, X> force;
  std::uint64_t sum = 0;
  int most = v.iterations_max[i];
  for (int n = 0; n < nsteps; ++n) {
    int it = 0;
    const Status st = method.tile_step(sys, s, ctl.dt, ctl.newton, it, force);
    sum += static_cast<std::uint64_t>(it);
    if (it > most) most = it;
    if (st != Status::ok) {  // s holds the last good state
      if (bead == 0) {
        v.status[i] = static_cast<std::uint8_t>(st);
        v.failed_step[i] = steps_before + n + 1;
      }
      break;
    }
  }
  for (int k = 0; k < 3; ++k) {
    v.q[(3 * bead + k) * v.count + i] = s.q.c[k].v;
    v.p[(3 * bead + k) * v.count + i] = s.p.c[k].v;
    if constexpr (M::two_step) v.q_prev[(3 * bead + k) * v.count + i] = s.q_prev.c[k].v;
  }
  if (bead == 0) {
    v.iterations_sum[i] += sum;
    v.iterations_max[i] = most;
  }
}
#endif

// Pairs the cpu backend steps W trajectories at a time (core/lanes.hpp):
// those with a tile form, and those whose method and system both declare
// that their step code takes any scalar.
template <class S, class M>
constexpr bool runs_in_lanes = runs_in_tile<S, M> || requires {
  requires M::runs_in_lanes;
  requires S::runs_in_lanes;
};

// The state and carry advance_lanes keeps between steps: a one-thread
// PhaseState, or the tile form's beads for pairs that step in tiles.
template <class S, class M, class T>
struct LaneState {
  using State = PhaseState<S, T>;
  using Carry = ForceCarry<S, T>;
};
template <class S, class M, class T>
  requires runs_in_tile<S, M>
struct LaneState<S, M, T> {
  static_assert(S::dof == 3 * S::tile_lanes, "a lane per bead in R^3");
  using State = TileStateFor<S, M, tile::Emulated<T, S::tile_lanes>>;
  using Carry = TileForceCarry<S, tile::Emulated<T, S::tile_lanes>>;
};

// Coordinate c of a configuration or momentum, q = (r_0, ..., r_{N-1}) in
// either form.
template <int N, class T>
T& coordinate(Vec<N, T>& x, int c) {
  return x[c];
}
template <class T, int L>
T& coordinate(tile::Triple<tile::Emulated<T, L>>& x, int c) {
  return x.c[c % 3].v[c / 3];
}

template <int dof, class V>
void copy_lane(V& x, int to, int from) {
  for (int c = 0; c < dof; ++c) coordinate(x, c).v[to] = coordinate(x, c).v[from];
}

// Trajectories first .. first + W - 1 stepped in lockstep through the same
// step code as advance_trajectory, with the same outcome per trajectory:
// each lane computes what it would alone (a converged lane is frozen), and a
// lane whose trajectory is past the end of the batch, had failed before, or
// fails now follows a copy of a live lane (a ghost whose results are
// dropped), so the group runs while any of its trajectories does. A step in
// lanes leaves a failed lane's state as it was, whatever the method's
// one-thread step does (a composition's lanes step keeps the step's start),
// so lanes are never replayed.
template <int W, class S, class M>
void advance_lanes(const S& sys, const M& method, const StepControl& ctl, const EnsembleView& v, std::int64_t first,
                   int nsteps, std::int64_t steps_before) {
  constexpr bool two_step = M::two_step;  // SHAKE's q_{n-1}, in either form
  using T = Lanes<W>;
  typename LaneState<S, M, T>::State s;
  bool live[W];
  int source = -1;  // a live lane, for ghosts to copy
  // A ghost follows a copy of a live lane's state.
  const auto copy_state = [&](int to) {
    copy_lane<S::dof>(s.q, to, source);
    copy_lane<S::dof>(s.p, to, source);
    if constexpr (two_step) copy_lane<S::dof>(s.q_prev, to, source);
  };
  for (int l = 0; l < W; ++l) {
    const std::int64_t i = first + l;
    live[l] = i < v.count && v.status[i] == static_cast<std::uint8_t>(Status::ok);
    if (!live[l]) continue;
    source = l;
    for (int c = 0; c < S::dof; ++c) {
      coordinate(s.q, c).v[l] = v.q[c * v.count + i];
      coordinate(s.p, c).v[l] = v.p[c * v.count + i];
      if constexpr (two_step) coordinate(s.q_prev, c).v[l] = v.q_prev[c * v.count + i];
    }
  }
  if (source < 0) return;
  for (int l = 0; l < W; ++l)
    if (!live[l]) copy_state(l);
  if constexpr (!runs_in_tile<S, M> && !two_step) s.q_prev = s.q;  // unread: one-step methods
  typename LaneState<S, M, T>::Carry carry;
  std::uint64_t sum[W] = {};
  int most[W];
  for (int l = 0; l < W; ++l) most[l] = live[l] ? v.iterations_max[first + l] : 0;
  const auto store = [&](int l) {
    const std::int64_t i = first + l;
    for (int c = 0; c < S::dof; ++c) {
      v.q[c * v.count + i] = coordinate(s.q, c).v[l];
      v.p[c * v.count + i] = coordinate(s.p, c).v[l];
      if constexpr (two_step) v.q_prev[c * v.count + i] = coordinate(s.q_prev, c).v[l];
    }
    v.iterations_sum[i] += sum[l];
    v.iterations_max[i] = most[l];
  };
  for (int n = 0; n < nsteps; ++n) {
    LaneInt<T> it = uniform<LaneInt<T>>(0);
    LaneStatus<T> st;
    if constexpr (runs_in_tile<S, M>)
      st = method.tile_step(sys, s, ctl.dt, ctl.newton, it, carry);  // the source a GPU's tile runs
    else if constexpr (carries_force<M>)
      st = method.step(sys, s, ctl.dt, ctl.newton, it, &carry);
    else
      st = method.step(sys, s, ctl.dt, ctl.newton, it);
    bool lost = false;
    source = -1;
    for (int l = 0; l < W; ++l) {
      if (!live[l]) continue;
      sum[l] += static_cast<std::uint64_t>(it.v[l]);
      if (it.v[l] > most[l]) most[l] = it.v[l];
      if (st.v[l] == Status::ok) {
        source = l;
        continue;
      }
      // s still holds lane l's last good state
      v.status[first + l] = static_cast<std::uint8_t>(st.v[l]);
      v.failed_step[first + l] = steps_before + n + 1;
      store(l);
      live[l] = false;
      lost = true;
    }
    if (source < 0) return;
    if (lost)
      for (int l = 0; l < W; ++l)
        if (!live[l]) {
          copy_state(l);
          copy_lane<S::dof>(carry.force, l, source);
        }
  }
  for (int l = 0; l < W; ++l)
    if (live[l]) store(l);
}

// The energy of a state and the scale its relative error is taken against.
// Holonomic: H = K + V, scale K + |V| + E_sys (the system's characteristic
// energy). Nonholonomic: H(q, p, lambda~(q, p)), scale |H - V| + |V|.
// Not ok when the energy cannot be formed (e.g. a singular metric, where
// 1 + beta x = 0 for Martinet): such a state cannot start.
template <class S>
TETHER_HD Status energy_and_scale(const S& sys, const Vec<S::dof>& q, const Vec<S::dof>& p, Real& energy,
                                  Real& scale) {
  Status st = Status::ok;
  if constexpr (is_lagrangian<S>) {
    energy = sys.energy(q, p);
    const Real potential = sys.potential(q);
    scale = fabs(energy - potential) + fabs(potential) + sys.energy_scale();
  } else if constexpr (is_nonholonomic<S>) {
    Real potential;
    Vec<S::multiplier_count> lambda;
    st = energy_parts(sys, q, p, energy, potential, lambda);
    scale = fabs(energy - potential) + fabs(potential);
  } else {
    const Real kinetic = Real(0.5) * p.dot(sys.inverse_mass_times(p)), potential = sys.potential(q);
    energy = kinetic + potential;
    scale = kinetic + fabs(potential) + sys.energy_scale();
  }
  if (st == Status::ok && !is_finite(energy)) st = Status::non_finite;
  return st;
}

// Relative energy error and constraint residuals of trajectory i. For the
// nonholonomic family the position residual is |h(q)| (zero without holonomic
// constraints), and the velocity residual max_i |g_i(q) . qdot| (zero for
// canonical systems; with |Dh(q) qdot| for mixed ones). They read q and p
// only, so one instantiation per system serves all its methods.
struct Residuals {
  Real energy_error = 0, constraint_violation = 0, velocity_violation = 0;
  Status status = Status::ok;  // non_finite, or the multiplier solve's failure: the state cannot be observed
};

template <class S>
TETHER_HD Residuals trajectory_residuals(const S& sys, const EnsembleView& v, std::int64_t i) {
  PhaseState<S> s;
  load_phase<S>(v, i, s);
  Residuals r;
  Real energy;
  if constexpr (is_lagrangian<S>) {
    energy = sys.energy(s.q, s.p);
    r.constraint_violation = max_abs(sys.constraints(s.q));
    r.velocity_violation = max_abs(sys.velocity_constraints(s.q, s.p));
  } else if constexpr (is_nonholonomic<S>) {
    Real potential;
    Vec<S::multiplier_count> lambda;
    r.status = energy_parts(sys, s.q, s.p, energy, potential, lambda);
    if constexpr (holonomic_count<S> > 0) r.constraint_violation = max_abs(holonomic_values(sys, s.q));
    r.velocity_violation = r.status == Status::ok ? velocity_constraint_residual(sys, s.q, s.p, lambda)
                                                  : Real(INFINITY);  // visible, never silently small
  } else {
    energy = total_energy(sys, s.q, s.p);
    r.constraint_violation = max_abs(sys.constraints(s.q));
    r.velocity_violation = max_abs(sys.constraint_jacobian_times(s.q, sys.inverse_mass_times(s.p)));
  }
  const Real e = energy - v.energy0[i];
  r.energy_error = (e < 0 ? -e : e) / v.energy_scale[i];
  if (r.status == Status::ok &&
      !(is_finite(r.energy_error) && is_finite(r.constraint_violation) && is_finite(r.velocity_violation)))
    r.status = Status::non_finite;
  return r;
}

// Records trajectory i's residuals at `step`. A live trajectory whose energy
// or residuals are not finite there (a finite state whose energy overflows,
// or a singular multiplier solve) fails there: a NaN never enters a
// reduction as a number it could be dropped by.
template <class S>
TETHER_HD void observe_trajectory(const S& sys, const EnsembleView& v, std::int64_t i, std::int64_t step) {
  const Residuals r = trajectory_residuals(sys, v, i);
  v.energy_error[i] = r.energy_error;
  v.constraint_violation[i] = r.constraint_violation;
  v.velocity_violation[i] = r.velocity_violation;
  if (r.status != Status::ok && v.status[i] == static_cast<std::uint8_t>(Status::ok)) {
    v.status[i] = static_cast<std::uint8_t>(r.status);
    v.failed_step[i] = step;
  }
}

// max that keeps a NaN from either side (a > b ? a : b drops one on the right).
TETHER_HD inline Real max_keeping_nan(Real a, Real b) { return (a != a || a > b) ? a : b; }

// Trajectories per partial sum of energy errors. The ensemble mean is the
// in-order sum of these chunk sums, so it does not depend on thread count or
// batch size (batches are whole chunks).
constexpr std::int64_t observation_chunk = 64;

// Ensemble maxima of one observation (trajectories that failed excluded).
struct Observation {
  std::int64_t ok = 0;
  Real energy_error_max = 0;
  Real constraint_max = 0;
  Real velocity_max = 0;

  TETHER_HD void merge(const Observation& o) {
    ok += o.ok;
    energy_error_max = max_keeping_nan(energy_error_max, o.energy_error_max);
    constraint_max = max_keeping_nan(constraint_max, o.constraint_max);
    velocity_max = max_keeping_nan(velocity_max, o.velocity_max);
  }
};

// Trajectory i's share of an observation: empty when it has failed.
TETHER_HD inline Observation observation_of(const EnsembleView& v, std::int64_t i) {
  Observation o;
  if (v.status[i] != static_cast<std::uint8_t>(Status::ok)) return o;
  o.ok = 1;
  o.energy_error_max = v.energy_error[i];
  o.constraint_max = v.constraint_violation[i];
  o.velocity_max = v.velocity_violation[i];
  return o;
}

}  // namespace tether

#pragma once
// The host loop of a run: batches of trajectories, each prepared on the host,
// advanced by a backend from one output time to the next, observed, and
// streamed out. Memory is bounded by the batch size, not the ensemble size.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>

#include "backends/backend.hpp"
#include "tether/engine/run.hpp"
#include "engine/checkpoint_blob.hpp"
#include "engine/tally.hpp"
#include "engine/initial_state_extern.hpp"

namespace tether {

template <class S, class M>
void prepare_batch(const S& sys, const M& method, const RunConfig& c, std::int64_t first_id, HostEnsemble& h, RunTally& result) {
  const EnsembleView v = h.view();
  std::int64_t projected = 0;
  Real farthest = 0;
  // A canonical start runs a whole chain per trajectory: worth threads at any count.
  const bool parallel = h.count >= parallel_threshold || c.initial.kind == InitialSpec::Kind::canonical;
#pragma omp parallel for schedule(dynamic, 8) reduction(+ : projected) reduction(max : farthest) if (parallel)
  for (std::int64_t j = 0; j < h.count; ++j) {
    PhaseState<S> s;
    Real moved = 0;
    Status st = initial_state<S>(sys, c, first_id + j, s, moved);
    if (moved > 0) ++projected;
    farthest = std::max(farthest, moved);
    method.start(sys, s, c.dt);
    Real energy, scale;
    const Status energy_status = energy_and_scale(sys, s.q, s.p, energy, scale);
    if (st == Status::ok) st = energy_status;
    if (st != Status::ok) {  // reported as failed at step 0, kept out of every statistic
      v.status[j] = static_cast<std::uint8_t>(st);
      v.failed_step[j] = 0;
    }
    v.energy0[j] = energy;
    v.energy_scale[j] = scale > 0 && std::isfinite(scale) ? scale : Real(1);
    store_state<S, M>(v, j, s);
  }
  result.projected_states += projected;
  result.max_projection_distance = std::max(result.max_projection_distance, farthest);
}

// What a run is between two steps of a batch, for a checkpoint: where it is
// (the batch's first id, the steps done, the next timeseries row), the
// batch's states and counters, and the tally of everything so far.
struct RunProgress {
  std::int64_t first = 0, done = 0, next_row = 1;
  double work_done = 0;
  RunTally tally;

  void save(BlobWriter& w, const HostEnsemble& h) const;
  // Restores what save wrote (the caller checks that it fits the run).
  void load(BlobReader& b, HostEnsemble& h);
  // Ids [lo, hi) in batches of `batch` from lo.
  bool fits(const HostEnsemble& h, std::int64_t batch, std::int64_t lo, std::int64_t hi, std::int64_t steps,
            std::int64_t intervals, std::int64_t held_rows) const;
};

// What the host loop needs of a (system, method) pair: the state's size and
// form, how a batch is prepared, and a stored state's residuals. The loop
// itself (run_ensemble below, in runner.cpp) is compiled once, not once per
// pair: it was a fifth of each pair's host code.
struct RunPair {
  int dof = 0;
  bool two_step = false;
  std::function<void(std::int64_t first_id, HostEnsemble& h, RunTally& tally)> prepare;
  std::function<Residuals(const EnsembleView& v, std::int64_t i)> residuals;
};

RunResult run_ensemble(const RunPair& pair, const RunConfig& c, Backend& backend, const RunOptions& opt);

template <class S, class M>
RunResult run_ensemble(const S& sys, const M& method, const RunConfig& c, Backend& backend, const RunOptions& opt) {
  RunPair pair;
  pair.dof = S::dof;
  pair.two_step = M::two_step;
  pair.prepare = [&](std::int64_t first_id, HostEnsemble& h, RunTally& tally) {
    prepare_batch<S, M>(sys, method, c, first_id, h, tally);
  };
  pair.residuals = [&](const EnsembleView& v, std::int64_t i) { return trajectory_residuals(sys, v, i); };
  return run_ensemble(pair, c, backend, opt);
}

}  // namespace tether

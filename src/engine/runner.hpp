#pragma once
// The host loop of a run: batches of trajectories, each prepared on the host,
// advanced by a backend from one output time to the next, observed, and
// streamed out. Memory is bounded by the batch size, not the ensemble size.
#include <algorithm>
#include <chrono>
#include <cmath>

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

template <class S, class M>
RunResult run_ensemble(const S& sys, const M& method, const RunConfig& c, Backend& backend,
                       const RunOptions& opt) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  RunResult r;
  r.trajectories = c.size;
  r.steps = c.steps;
  r.dt = c.dt;

  const std::int64_t intervals = timeseries_rows(c) - 1;
  static_assert(sizeof(Observation) + 4 * sizeof(Real) + sizeof(TimeseriesRow) <= timeseries_row_bytes,
                "config.cpp's memory estimate of a timeseries row is too small");
  const auto [lo, hi] = shard_ids(c);  // the whole ensemble, or this shard's slice
  const std::int64_t batch = run_batch(c, hi - lo);
  // One batch of a whole ensemble: each row is complete once observed, and
  // goes to the sink at once (RunOptions::timeseries).
  const bool stream = opt.timeseries != nullptr && c.shard_count <= 1 && batch >= hi - lo;
  const std::int64_t held_rows = stream ? 1 : intervals + 1;
  RunProgress at;
  at.tally = RunTally(held_rows, c.shard_count > 1);
  RunTally& tally = at.tally;
  std::vector<Real> chunk_sums;
  auto observe = [&](std::int64_t row, std::int64_t step) {
    tally.observation(row).merge(backend.observe(step, chunk_sums));
    for (std::size_t k = 0; k < chunk_sums.size(); ++k)  // in trajectory order
      tally.add_chunk(row, at.first / observation_chunk + std::int64_t(k), chunk_sums[k]);
    if (stream) tally.stream_row(row, c, *opt.timeseries);
  };
  const double total_work = double(hi - lo) * double(c.steps);
  // Launches of about a second of work each: the first a probe of
  // backend.first_launch_work() trajectory-steps, each next one sized by the
  // rate the last one measured. Progress, checkpoints and a stop signal come
  // between launches; the states do not depend on where launches end.
  constexpr double launch_seconds = 1.0;
  double rate = 0;            // trajectory-steps per second, as measured
  std::int64_t rate_of = -1;  // ... for batches of this many trajectories (a smaller last batch is probed again)
  // Trajectory j of batch h as a record at `step` (its last good state when it has failed).
  TrajectoryRecord rec;
  rec.q.resize(S::dof), rec.p.resize(S::dof);
  const auto record = [&](const HostEnsemble& h, std::int64_t first, std::int64_t j, std::int64_t step) -> TrajectoryRecord& {
    rec.id = first + j;
    rec.step = step;
    for (int k = 0; k < S::dof; ++k) {
      rec.q[std::size_t(k)] = h.q[std::size_t(k) * std::size_t(h.count) + std::size_t(j)];
      rec.p[std::size_t(k)] = h.p[std::size_t(k) * std::size_t(h.count) + std::size_t(j)];
    }
    rec.status = static_cast<Status>(h.status[std::size_t(j)]);
    rec.failed_step = h.failed_step[std::size_t(j)];
    return rec;
  };
  // The step of the snapshot after `done`: the next multiple of track_every, or the last step.
  const auto next_snapshot = [&](std::int64_t done) {
    return done >= c.steps ? INT64_MAX : std::min(c.steps, (done / c.track_every + 1) * c.track_every);
  };

  // A checkpoint holds the batch's states at a step between two advances:
  // resumed there, every trajectory takes the same steps from the same bits,
  // so the outputs are byte-identical to a run never stopped.
  std::unique_ptr<HostEnsemble> resumed;
  if (opt.resume != nullptr) {
    resumed = std::make_unique<HostEnsemble>(0, S::dof, M::two_step);
    BlobReader b(*opt.resume);
    at.load(b, *resumed);
    if (!at.fits(*resumed, batch, lo, hi, c.steps, intervals, held_rows))
      throw std::runtime_error("the checkpoint does not fit this run (its batches, steps or system differ)");
  }
  const auto checkpoint = [&](HostEnsemble& h) {
    backend.store(h);
    BlobWriter w;
    at.save(w, h);
    opt.checkpoint(w.bytes());
  };

  for (at.first = resumed ? at.first : lo; at.first < hi; at.first += batch) {
    const std::int64_t first = at.first;
    HostEnsemble fresh(resumed ? 0 : std::min(batch, hi - first), S::dof, M::two_step);
    HostEnsemble& h = resumed ? *resumed : fresh;
    if (!resumed) {
      prepare_batch<S, M>(sys, method, c, first, h, tally);
      backend.load(h);
      observe(0, 0);
      at.done = 0;
      at.next_row = 1;
    } else {
      backend.load(h);
    }
    // The tracked trajectories of this batch: their snapshots are taken between advances.
    const auto track_lo = std::lower_bound(c.track_ids.begin(), c.track_ids.end(), first);
    const auto track_hi = std::lower_bound(track_lo, c.track_ids.end(), first + h.count);
    const bool tracking = opt.final_states != nullptr && track_lo != track_hi;
    const auto take_snapshot = [&](std::int64_t step) {
      backend.store(h);
      const EnsembleView v = h.view();
      for (auto id = track_lo; id != track_hi; ++id) {
        TrajectoryRecord& r1 = record(h, first, *id - first, step);
        // Read off the stored state: a snapshot never changes how the run goes on.
        const Residuals e = trajectory_residuals(sys, v, *id - first);
        r1.energy_error = e.energy_error, r1.constraint_violation = e.constraint_violation;
        r1.velocity_violation = e.velocity_violation;
        opt.final_states->snapshot(r1);
      }
    };
    if (tracking && !resumed) take_snapshot(0);
    std::int64_t last_checkpoint = at.done;
    if (h.count != rate_of) rate = 0, rate_of = h.count;
    for (; at.next_row <= intervals; ++at.next_row) {
      const std::int64_t target = std::min(c.steps, at.next_row * c.output_every);
      while (at.done < target) {
        const std::int64_t until = tracking ? std::min(target, next_snapshot(at.done)) : target;
        const double work = rate > 0 ? rate * launch_seconds : backend.first_launch_work();
        const std::int64_t chunk = std::clamp<std::int64_t>(std::int64_t(work / double(h.count)), 1,
                                                            std::min<std::int64_t>(until - at.done, std::int64_t(1) << 30));
        const auto t = clock::now();
        backend.advance(static_cast<int>(chunk), at.done);
        const double seconds = std::chrono::duration<double>(clock::now() - t).count();
        tally.integration += seconds;
        // Too short to time (under a millisecond): ten times the work next.
        rate = seconds > 1e-3 ? double(chunk) * double(h.count) / seconds
                              : std::max(rate, 10 * double(chunk) * double(h.count) / launch_seconds);
        at.done += chunk;
        at.work_done += double(chunk) * double(h.count);
        if (opt.progress) opt.progress(at.work_done, total_work);
        if (tracking && at.done == next_snapshot(at.done - chunk)) take_snapshot(at.done);
        if (opt.stop != nullptr && *opt.stop != 0) {  // a signal: leave a checkpoint and return
          if (opt.checkpoint) checkpoint(h);
          r.stopped = true;
          return r;
        }
        if (opt.checkpoint && opt.checkpoint_every > 0 && at.done - last_checkpoint >= opt.checkpoint_every &&
            at.done < c.steps) {
          checkpoint(h);
          last_checkpoint = at.done;
        }
      }
      observe(at.next_row, at.done);
    }
    backend.store(h);

    for (std::int64_t j = 0; j < h.count; ++j) {
      const auto st = static_cast<Status>(h.status[j]);
      tally.iterations += h.iterations_sum[j];
      tally.newton_max = std::max(tally.newton_max, int(h.iterations_max[j]));
      tally.steps_taken += std::uint64_t(st == Status::ok ? c.steps : std::max<std::int64_t>(0, h.failed_step[j] - 1));
      // The failing step's iterations are in the sum (and the max): its attempt counts in the mean.
      tally.steps_attempted += std::uint64_t(st == Status::ok ? c.steps : h.failed_step[j]);
      if (st != Status::ok) {
        ++tally.failed;
        if (tally.failures.size() < opt.failure_report_cap) tally.failures.push_back({first + j, h.failed_step[j], st});
      }
      if (opt.final_states) {
        TrajectoryRecord& r1 = record(h, first, j, c.steps);
        r1.energy_error = h.energy_error[std::size_t(j)];
        r1.constraint_violation = h.constraint_violation[std::size_t(j)];
        r1.velocity_violation = h.velocity_violation[std::size_t(j)];
        opt.final_states->write(r1);
      }
    }
    resumed.reset();  // the next batch starts fresh
  }

  if (c.shard_count > 1) {  // what tether merge adds up with the other shards'
    tally.close_blocks();
    BlobWriter w;
    tally.save(w);
    r.tally = w.bytes();
  }
  tally.fill(c, r, opt.timeseries);
  r.wall_seconds = std::chrono::duration<double>(clock::now() - start).count();
  return r;
}

}  // namespace tether

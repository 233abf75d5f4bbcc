#include "engine/runner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace tether {

void RunProgress::save(BlobWriter& w, const HostEnsemble& h) const {
  w.put(first), w.put(done), w.put(next_row), w.put(work_done);
  tally.save(w);
  w.put(h.count), w.put(h.q), w.put(h.p), w.put(h.q_prev), w.put(h.energy0), w.put(h.energy_scale), w.put(h.status);
  w.put(h.failed_step), w.put(h.iterations_sum), w.put(h.iterations_max);
}

void RunProgress::load(BlobReader& b, HostEnsemble& h) {
  b.get(first), b.get(done), b.get(next_row), b.get(work_done);
  tally.load(b);
  b.get(h.count), b.get(h.q), b.get(h.p), b.get(h.q_prev), b.get(h.energy0), b.get(h.energy_scale), b.get(h.status);
  b.get(h.failed_step), b.get(h.iterations_sum), b.get(h.iterations_max);
  b.expect_end();
  const std::size_t n = h.count >= 0 ? std::size_t(h.count) : 0;
  h.energy_error.assign(n, 0), h.constraint_violation.assign(n, 0), h.velocity_violation.assign(n, 0);
}

bool RunProgress::fits(const HostEnsemble& h, std::int64_t batch, std::int64_t lo, std::int64_t hi, std::int64_t steps,
                       std::int64_t intervals, std::int64_t held_rows) const {
  const std::size_t n = std::size_t(h.count) * std::size_t(h.dof), count = std::size_t(h.count);
  return first >= lo && first < hi && (first - lo) % batch == 0 && h.count == std::min(batch, hi - first) &&
         done >= 0 && done <= steps && next_row >= 1 && next_row <= intervals + 1 && tally.fits(intervals + 1, held_rows) &&
         h.q.size() == n && h.p.size() == n && h.q_prev.size() == (h.two_step ? n : 0) && h.energy0.size() == count &&
         h.energy_scale.size() == count && h.status.size() == count && h.failed_step.size() == count &&
         h.iterations_sum.size() == count && h.iterations_max.size() == count;
}

RunResult run_ensemble(const RunPair& pair, const RunConfig& c, Backend& backend, const RunOptions& opt) {
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
  rec.q.resize(pair.dof), rec.p.resize(pair.dof);
  const auto record = [&](const HostEnsemble& h, std::int64_t first, std::int64_t j, std::int64_t step) -> TrajectoryRecord& {
    rec.id = first + j;
    rec.step = step;
    for (int k = 0; k < pair.dof; ++k) {
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
    resumed = std::make_unique<HostEnsemble>(0, pair.dof, pair.two_step);
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
    HostEnsemble fresh(resumed ? 0 : std::min(batch, hi - first), pair.dof, pair.two_step);
    HostEnsemble& h = resumed ? *resumed : fresh;
    if (!resumed) {
      pair.prepare(first, h, tally);
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
        const Residuals e = pair.residuals(v, *id - first);
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

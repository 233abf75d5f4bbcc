#pragma once
// The host loop of a run: batches of trajectories, each prepared on the host,
// advanced by a backend from one output time to the next, observed, and
// streamed out. Memory is bounded by the batch size, not the ensemble size.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "backends/backend.hpp"
#include "tether/engine/run.hpp"
#include "engine/initial_state.hpp"

namespace tether {

template <class S, class M>
void prepare_batch(const S& sys, const M& method, const RunConfig& c, std::int64_t first_id, HostEnsemble& h, RunResult& result) {
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

template <class S, class M>
RunResult run_ensemble(const S& sys, const M& method, const RunConfig& c, Backend& backend,
                       const RunOptions& opt) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  RunResult r;
  r.trajectories = c.size;
  r.steps = c.steps;
  r.dt = c.dt;

  const std::int64_t intervals = (c.steps + c.output_every - 1) / c.output_every;
  std::vector<Observation> rows(std::size_t(intervals + 1));
  std::vector<Real> energy_sums(std::size_t(intervals + 1), 0), chunk_sums;
  // Whole chunks per batch, so chunk sums are the same whatever the batch size.
  const std::int64_t batch =
      c.batch_size >= c.size ? c.size : (c.batch_size + observation_chunk - 1) / observation_chunk * observation_chunk;
  auto observe = [&](std::int64_t row) {
    rows[std::size_t(row)].merge(backend.observe(chunk_sums));
    for (Real x : chunk_sums) energy_sums[std::size_t(row)] += x;  // in trajectory order
  };
  std::uint64_t iterations = 0, steps_taken = 0;
  double integration = 0;
  std::vector<Real> q(S::dof), p(S::dof);
  const double total_work = double(c.size) * double(c.steps);
  double work_done = 0;

  for (std::int64_t first = 0; first < c.size; first += batch) {
    HostEnsemble h(std::min(batch, c.size - first), S::dof, M::two_step);
    prepare_batch<S, M>(sys, method, c, first, h, r);
    backend.load(h);
    observe(0);
    std::int64_t done = 0;
    for (std::int64_t row = 1; row <= intervals; ++row) {
      const std::int64_t target = std::min(c.steps, done + c.output_every);
      while (done < target) {
        // Bounded work per call keeps progress reports coming on long
        // intervals; at most 1e6 steps keeps a small ensemble's launch short.
        const std::int64_t chunk = std::clamp<std::int64_t>(
            std::int64_t(backend.work_per_call() / double(h.count)), 1, std::min<std::int64_t>(target - done, 1000000));
        const auto t = clock::now();
        backend.advance(static_cast<int>(chunk), done);
        integration += std::chrono::duration<double>(clock::now() - t).count();
        done += chunk;
        work_done += double(chunk) * double(h.count);
        if (opt.progress) opt.progress(work_done, total_work);
      }
      observe(row);
    }
    backend.store(h);

    for (std::int64_t j = 0; j < h.count; ++j) {
      const auto st = static_cast<Status>(h.status[j]);
      iterations += h.iterations_sum[j];
      r.newton_max = std::max(r.newton_max, int(h.iterations_max[j]));
      steps_taken += std::uint64_t(st == Status::ok ? c.steps : std::max<std::int64_t>(0, h.failed_step[j] - 1));
      if (st != Status::ok) {
        ++r.failed;
        if (r.failures.size() < opt.failure_report_cap) r.failures.push_back({first + j, h.failed_step[j], st});
      }
      if (opt.final_states) {
        for (int k = 0; k < S::dof; ++k) {
          q[k] = h.q[std::size_t(k) * h.count + j];
          p[k] = h.p[std::size_t(k) * h.count + j];
        }
        opt.final_states->write(first + j, q, p, st);
      }
    }
  }

  for (std::int64_t row = 0; row <= intervals; ++row) {
    const Observation& o = rows[std::size_t(row)];
    TimeseriesRow t;
    t.step = std::min(c.steps, row * c.output_every);
    t.time = Real(t.step) * c.dt;
    t.live = o.ok;
    t.mean_energy_error = o.ok > 0 ? energy_sums[std::size_t(row)] / Real(o.ok) : 0;
    t.max_energy_error = o.energy_error_max;
    t.max_constraint_violation = o.constraint_max;
    t.max_velocity_constraint_violation = o.velocity_max;
    r.max_relative_energy_error = std::max(r.max_relative_energy_error, t.max_energy_error);
    r.max_constraint_violation = std::max(r.max_constraint_violation, t.max_constraint_violation);
    r.max_velocity_constraint_violation =
        std::max(r.max_velocity_constraint_violation, t.max_velocity_constraint_violation);
    r.timeseries.push_back(t);
  }
  r.newton_mean = steps_taken > 0 ? double(iterations) / double(steps_taken) : 0;
  r.trajectory_steps = steps_taken;
  r.integration_seconds = integration;
  r.wall_seconds = std::chrono::duration<double>(clock::now() - start).count();
  return r;
}

}  // namespace tether

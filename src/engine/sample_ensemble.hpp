#pragma once
// The host loop of `tether sample`: batches of chains, each started on T*N
// (engine/initial_state.hpp), run by a ChainRunner in windows of iterations,
// their draws handed to the DrawSink window by window. Memory is bounded by
// the batch and the window, not by chains x draws.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>

#include "backends/chain_runner.hpp"
#include "backends/reference/reference_backend.hpp"
#include "engine/initial_state.hpp"
#include "tether/engine/sample.hpp"
#ifdef TETHER_HAVE_CUDA
#include "backends/cuda/cuda_backend.hpp"
#endif

namespace tether {

// Draw storage per window: at most this many bytes.
constexpr double max_window_bytes = 256.0 * 1024 * 1024;

template <class S, class M>
std::unique_ptr<ChainRunner> make_chain_runner(const std::string& backend, const S& sys, const M& method,
                                               const HmcControl& ctl) {
  if (backend == "cpu") return std::make_unique<HostChainRunner<S, M>>(sys, method, ctl, true, 5e6);
  if (backend == "reference")
    return std::make_unique<HostChainRunner<S, ReferenceStepper<M>>>(sys, ReferenceStepper<M>{method}, ctl, false,
                                                                     2e3);
#ifdef TETHER_HAVE_CUDA
  if (backend == "cuda") return make_cuda_chain_runner<S>(sys, method, ctl);
#endif
  throw ConfigError("backend", "backend \"" + backend + "\" is not available in this build");
}

// Stored draws among iterations [0, k): those at warmup + j thin, j >= 0.
inline std::int64_t draws_before(const SampleSpec& s, std::int64_t k) {
  return k <= s.warmup ? 0 : (k - s.warmup + s.thin - 1) / s.thin;
}

template <class S, class M>
SampleResult sample_ensemble(const S& sys, const M& method, const SampleConfig& c, const std::string& backend,
                             const SampleOptions& opt) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const SampleSpec& spec = c.sample;
  HmcControl ctl;
  ctl.steps = static_cast<int>(c.run.steps);
  ctl.step_jitter = spec.step_jitter;
  ctl.steps_jitter = spec.steps_jitter;
  ctl.temperature = spec.temperature;
  ctl.refresh_cos = std::cos(spec.refresh_angle);
  if (spec.refresh_angle == Real(1.5707963267948966)) ctl.refresh_cos = 0;  // cos(pi/2) rounds to 6e-17
  ctl.reversibility_tolerance = spec.reversibility_tolerance;
  ctl.newton = c.run.newton;
  ctl.seed = c.run.seed;
  auto runner = make_chain_runner<S, M>(backend, sys, method, ctl);

  SampleResult r;
  r.chains = spec.chains;
  r.draws = spec.draws;
  r.warmup = spec.warmup;
  r.thin = spec.thin;
  r.step_size_min = INFINITY;
  r.step_size_max = 0;
  Real acceptance_sum = 0;
  const std::int64_t total = spec.iterations();
  const double total_work = double(spec.chains) * double(total);
  double done_work = 0, sampling = 0;
  const int dof = S::dof;
  const double bytes_per_draw = double(dof + 4) * sizeof(Real) + sizeof(std::int32_t) + 1;
  const std::int64_t batch = std::min(c.run.batch_size, spec.chains);

  for (std::int64_t first = 0; first < spec.chains; first += batch) {
    const std::int64_t count = std::min(batch, spec.chains - first);
    // Iterations per window: about a second's work, and draw storage within max_window_bytes.
    const double steps_per_iteration = 2.0 * double(ctl.steps) * (1 + ctl.steps_jitter);
    std::int64_t window = std::max<std::int64_t>(
        1, std::int64_t(runner->work_per_call() / (double(count) * steps_per_iteration)));
    const std::int64_t draws_cap =
        std::max<std::int64_t>(1, std::int64_t(max_window_bytes / (bytes_per_draw * double(count))));
    window = std::min(window, draws_cap * spec.thin);
    HostChains h(count, first, dof, std::min(spec.draws, draws_cap));

    // Start: each chain's state on T*N, as the run's initial spec gives it.
    for (std::int64_t i = 0; i < count; ++i) {
      PhaseState<S> s;
      Real moved = 0;
      if (initial_state<S>(sys, c.run, first + i, s, moved) != Status::ok)
        throw ConfigError("sample.initial", "chain " + std::to_string(first + i) +
                                                " cannot start: its initial state could not be put on the "
                                                "constraint manifold");
      for (int k = 0; k < dof; ++k) {
        h.q[std::size_t(k * count + i)] = s.q[k];
        h.p[std::size_t(k * count + i)] = s.p[k];
      }
      h.step_size[std::size_t(i)] = c.run.dt;
      h.log_h_bar[std::size_t(i)] = 0;
      h.h_bar[std::size_t(i)] = 0;
    }

    SamplePlan plan;
    plan.warmup = spec.warmup;
    plan.thin = spec.thin;
    plan.mu = std::log(10 * c.run.dt);
    plan.target_acceptance = spec.target_acceptance;
    // The first window is the backend's guess at a second's work, each next
    // one sized by the rate the last one measured: progress, and a caller's
    // interruption, come about once a second. Windows change no draw.
    for (std::int64_t k = 0; k < total;) {
      plan.first = k;
      plan.iterations = std::min(window, total - k);
      plan.first_draw = draws_before(spec, k);
      h.draws = draws_before(spec, k + plan.iterations) - plan.first_draw;
      const auto t = clock::now();
      runner->run(h, plan);
      const double seconds = std::chrono::duration<double>(clock::now() - t).count();
      sampling += seconds;
      window = std::clamp<std::int64_t>(
          seconds > 1e-3 ? std::int64_t(double(plan.iterations) / seconds) : 10 * plan.iterations, 1,
          draws_cap * spec.thin);
      k += plan.iterations;
      done_work += double(count) * double(plan.iterations);
      if (opt.progress) opt.progress(done_work, total_work);
      if (h.draws == 0) continue;
      for (std::int64_t j = 0; j < h.draws * count; ++j) {
        ++r.outcomes[std::size_t(h.draw_outcome[std::size_t(j)])];
        acceptance_sum += h.draw_acceptance[std::size_t(j)];
      }
      if (opt.draws) {
        DrawBlock b;
        b.first_chain = first;
        b.chains = count;
        b.first_draw = plan.first_draw;
        b.draws = h.draws;
        b.dof = dof;
        b.q = h.draw_q.data();
        b.potential = h.draw_potential.data();
        b.acceptance = h.draw_acceptance.data();
        b.energy = h.draw_energy.data();
        b.step_size = h.draw_step_size.data();
        b.steps = h.draw_steps.data();
        b.outcome = h.draw_outcome.data();
        opt.draws->write(b);
      }
    }
    for (Real x : h.step_size) {
      r.step_size_min = std::min(r.step_size_min, x);
      r.step_size_max = std::max(r.step_size_max, x);
    }
  }
  const double stored = double(spec.chains) * double(spec.draws);
  r.mean_acceptance = stored > 0 ? acceptance_sum / stored : 0;
  r.chain_iterations = total_work;
  r.sampling_seconds = sampling;
  r.wall_seconds = std::chrono::duration<double>(clock::now() - start).count();
  return r;
}

}  // namespace tether

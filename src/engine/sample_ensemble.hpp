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

#include "backends/host_chain.hpp"
#include "engine/sample_tally.hpp"
#include "engine/initial_state_extern.hpp"
#include "tether/engine/sample.hpp"
#ifdef TETHER_HAVE_CUDA
#include "backends/cuda/cuda_backend.hpp"
#endif

namespace tether {

// Draw storage per window: at most this many bytes.
constexpr double max_window_bytes = 256.0 * 1024 * 1024;
// A batch's scratch (dynamic trajectories' DynamicTree vectors, metrics): at most this many bytes.
constexpr double max_scratch_bytes = 1024.0 * 1024 * 1024;

template <class S, class M>
std::unique_ptr<ChainRunner> make_chain_runner(const std::string& backend, const S& sys, const M& method,
                                               const HmcControl& ctl) {
  if (backend == "cpu") return std::make_unique<HostChainRunner<S, M>>(sys, method, ctl, false);
  if (backend == "reference") return std::make_unique<HostChainRunner<S, M>>(sys, method, ctl, true);
#ifdef TETHER_HAVE_CUDA
  if (backend == "cuda") return make_cuda_chain_runner<S, M>(sys, method, ctl);
#endif
  throw ConfigError("backend", "backend \"" + backend + "\" is not available in this build");
}

// Stored draws among iterations [0, k): those at warmup + j thin, j >= 0.
inline std::int64_t draws_before(const SampleSpec& s, std::int64_t k) {
  return k <= s.warmup ? 0 : (k - s.warmup + s.thin - 1) / s.thin;
}

// What a sample is between two windows, for a checkpoint: the batch's
// first chain and the iterations it has done, its chains' states and step
// sizes (their random streams are counters: nothing else to keep), and the
// counts and sums of everything so far (chain_iterations: the finished batches').
struct SampleProgress {
  std::int64_t first = 0, done = 0;
  SampleResult tally;

  void save(BlobWriter& w, const HostChains& h) const {
    w.put(first), w.put(done);
    save_sample_tally(w, tally);
    w.put(h.count), w.put(h.q), w.put(h.p), w.put(h.step_size), w.put(h.log_h_bar), w.put(h.h_bar), w.put(h.metric);
  }
  // Restores what save wrote; false when it does not fit a sample of chains
  // [lo, hi) in batches of `batch` from lo, `iterations` each, `dof` coordinates.
  bool load(BlobReader& b, std::unique_ptr<HostChains>& h, std::int64_t lo, std::int64_t hi, std::int64_t batch,
            std::int64_t iterations, int dof, std::int64_t draws, int tree_vectors, bool tree_on_host,
            int metric_size) {
    std::int64_t count = 0;
    b.get(first), b.get(done);
    load_sample_tally(b, tally);
    b.get(count);
    if (!(first >= lo && first < hi && (first - lo) % batch == 0 && count == std::min(batch, hi - first) &&
          done >= 0 && done <= iterations))
      return false;
    h = std::make_unique<HostChains>(count, first, dof, draws, tree_vectors, tree_on_host, metric_size);
    const std::size_t n = std::size_t(count) * std::size_t(dof);
    b.get(h->q), b.get(h->p), b.get(h->step_size), b.get(h->log_h_bar), b.get(h->h_bar), b.get(h->metric);
    b.expect_end();
    return h->q.size() == n && h->p.size() == n && h->step_size.size() == std::size_t(count) &&
           h->log_h_bar.size() == std::size_t(count) && h->h_bar.size() == std::size_t(count) &&
           h->metric.size() == std::size_t(count) * std::size_t(metric_size);
  }
};

template <class S, class M>
SampleResult sample_ensemble(const S& sys, const M& method, const SampleConfig& c, const std::string& backend,
                             const SampleOptions& opt) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const SampleSpec& spec = c.sample;
  HmcControl ctl;
  ctl.dynamic = spec.dynamic;
  ctl.max_depth = spec.max_depth;
  ctl.max_energy_error = spec.max_energy_error;
  ctl.steps = static_cast<int>(c.run.steps);
  ctl.step_jitter = spec.step_jitter;
  ctl.steps_jitter = spec.steps_jitter;
  ctl.temperature = spec.temperature;
  ctl.metric = spec.metric;
  ctl.refresh_cos = std::cos(spec.refresh_angle);
  if (spec.refresh_angle == Real(1.5707963267948966)) ctl.refresh_cos = 0;  // cos(pi/2) rounds to 6e-17
  ctl.reversibility_tolerance = spec.reversibility_tolerance;
  ctl.newton = c.run.newton;
  ctl.seed = c.run.seed;
  auto runner = make_chain_runner<S, M>(backend, sys, method, ctl);

  // The chains of the whole sample, or of this shard: any slice, since a
  // chain's draws depend on its id alone and the tallies add up exactly.
  const auto [lo, hi] = shard_ids(c.run, 1);
  SampleProgress at;
  SampleResult& tally = at.tally;
  const std::int64_t total = spec.iterations();
  const double total_work = double(hi - lo) * double(total);
  const int dof = S::dof;
  const int tree_vectors = spec.dynamic ? DynamicTree::vectors(spec.max_depth) : 0;
  const bool tree_on_host = backend != "cuda";  // a GPU keeps its chains' trajectories itself
  const MetricLayout metric_layout = MetricLayout::of(spec.metric, dof);
  const double bytes_per_draw = double(dof + 4) * sizeof(Real) + sizeof(std::int32_t) + 2;
  // A batch's dynamic trajectories and metrics keep at most max_scratch_bytes (a batch changes no draw).
  const double scratch_bytes =
      (double(tree_vectors) * dof + metric_layout.size + inverse_metric_values(spec.metric, dof)) * sizeof(Real);
  const std::int64_t scratch_cap =
      scratch_bytes > 0 ? std::max<std::int64_t>(1, std::int64_t(max_scratch_bytes / scratch_bytes)) : c.run.batch_size;
  const std::int64_t batch = std::max<std::int64_t>(1, std::min({c.run.batch_size, hi - lo, scratch_cap}));
  // Draw storage: at most max_window_bytes for a full batch.
  const std::int64_t draws_cap =
      std::max<std::int64_t>(1, std::int64_t(max_window_bytes / (bytes_per_draw * double(batch))));
  const std::int64_t stored_per_window = std::min(spec.draws, draws_cap);

  std::unique_ptr<HostChains> resumed;
  if (opt.resume != nullptr) {
    BlobReader b(*opt.resume);
    if (!at.load(b, resumed, lo, hi, batch, total, dof, stored_per_window, tree_vectors, tree_on_host,
                 metric_layout.size))
      throw std::runtime_error("the checkpoint does not fit this sample (its chains, batches or iterations differ)");
  }
  const auto checkpoint = [&](const HostChains& h) {
    BlobWriter w;
    at.save(w, h);
    opt.checkpoint(w.bytes());
  };

  for (at.first = resumed ? at.first : lo; at.first < hi; at.first += batch) {
    const std::int64_t first = at.first, count = std::min(batch, hi - first);
    std::unique_ptr<HostChains> fresh = std::move(resumed);
    if (!fresh) {
      fresh = std::make_unique<HostChains>(count, first, dof, stored_per_window, tree_vectors, tree_on_host,
                                           metric_layout.size);
      HostChains& h = *fresh;
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
        if (metric_layout.size > 0) metric_start(spec.metric, dof, h.metric.data() + i, count, std::log(10 * c.run.dt));
      }
      at.done = 0;
    }
    HostChains& h = *fresh;
    std::vector<Real> inverse_metric(std::size_t(inverse_metric_values(spec.metric, dof) * count));
    // Iterations per window: about a second's work, and draw storage within max_window_bytes.
    // (A dynamic trajectory's length is a guess until the first window is timed.)
    const double steps_per_iteration =
        spec.dynamic ? 2.0 * double(1 << std::min(spec.max_depth, 5)) : 2.0 * double(ctl.steps) * (1 + ctl.steps_jitter);
    std::int64_t window = std::max<std::int64_t>(
        1, std::int64_t(runner->work_per_call() / (double(count) * steps_per_iteration)));
    window = std::min(window, stored_per_window * spec.thin);

    SamplePlan plan;
    plan.warmup = spec.warmup;
    plan.thin = spec.thin;
    plan.mu = std::log(10 * c.run.dt);
    plan.target_acceptance = spec.target_acceptance;
    plan.windows = MetricWindows::stan(spec.warmup);
    // The first window is the backend's guess at a second's work, each next
    // one sized by the rate the last one measured: progress, checkpoints and
    // a caller's interruption come about once a second. Windows change no draw.
    std::int64_t last_checkpoint = at.done;
    while (at.done < total) {
      const std::int64_t k = at.done;
      plan.first = k;
      plan.iterations = std::min(window, total - k);
      plan.first_draw = draws_before(spec, k);
      h.draws = draws_before(spec, k + plan.iterations) - plan.first_draw;
      const auto t = clock::now();
      runner->run(h, plan);
      const double seconds = std::chrono::duration<double>(clock::now() - t).count();
      tally.sampling_seconds += seconds;
      window = std::clamp<std::int64_t>(
          seconds > 1e-3 ? std::int64_t(double(plan.iterations) / seconds) : 10 * plan.iterations, 1,
          stored_per_window * spec.thin);
      at.done += plan.iterations;
      if (opt.progress) opt.progress(tally.chain_iterations + double(count) * double(at.done), total_work);
      if (h.draws > 0) {
        for (std::int64_t j = 0; j < h.draws * count; ++j) {
          ++tally.outcomes[std::size_t(h.draw_outcome[std::size_t(j)])];
          tally.acceptance.add(h.draw_acceptance[std::size_t(j)]);
          tally.steps += h.draw_steps[std::size_t(j)];
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
          b.tree_depth = h.draw_tree_depth.data();
          if (plan.first_draw == 0 && !inverse_metric.empty()) {  // once a batch, with its first draws
            for (std::int64_t i = 0; i < count; ++i)
              ChainMetric{spec.metric, h.metric.data() + metric_layout.values * count + i, count}.inverse_metric(
                  dof, inverse_metric.data() + i, count);
            b.inverse_metric = inverse_metric.data();
          }
          opt.draws->write(b);
        }
      }
      if (opt.stop != nullptr && *opt.stop != 0) {  // a signal: leave a checkpoint and return
        if (opt.checkpoint) checkpoint(h);
        tally.stopped = true;
        return tally;
      }
      if (opt.checkpoint && opt.checkpoint_every > 0 && at.done - last_checkpoint >= opt.checkpoint_every &&
          (at.done < total || first + batch < hi)) {  // (not once the last batch is done: the sample is)
        checkpoint(h);
        last_checkpoint = at.done;
      }
    }
    if (spec.metric == MetricKind::diag || spec.metric == MetricKind::dense) {
      SampleResult batch_metrics;
      for (std::int64_t i = 0; i < count; ++i) {
        tally.metric_fallbacks += std::int64_t(h.metric[std::size_t(metric_layout.fallbacks * count + i)]);
        const ChainMetric m{spec.metric, h.metric.data() + metric_layout.values * count + i, count};
        SampleResult chain;
        for (int c = 0; c < dof; ++c) chain.metric_scale_min.push_back(std::sqrt(m.variance(c)));
        chain.metric_scale_max = chain.metric_scale_min;
        batch_metrics.merge(chain);
      }
      tally.merge(batch_metrics);
    }
    for (Real x : h.step_size) {
      tally.step_size_min = std::min(tally.step_size_min, x);
      tally.step_size_max = std::max(tally.step_size_max, x);
    }
    tally.chain_iterations += double(count) * double(total);
  }
  SampleResult r = tally;
  r.chains = hi - lo;
  r.draws = spec.draws;
  r.warmup = spec.warmup;
  r.thin = spec.thin;
  r.set_mean_acceptance(r.chains);
  r.wall_seconds = std::chrono::duration<double>(clock::now() - start).count();
  return r;
}

}  // namespace tether

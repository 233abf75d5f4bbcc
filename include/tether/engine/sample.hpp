#pragma once
// `tether sample`: constrained Hamiltonian Monte Carlo, many chains at once
// (include/tether/sampling/hmc.hpp), draws streamed to a DrawSink.
#include <algorithm>
#include <array>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tether/engine/config.hpp"
#include "tether/sampling/metric.hpp"
#include "tether/sampling/outcome.hpp"

namespace tether {

struct SampleSpec {
  // "algorithm": static (L steps per proposal) or dynamic (the trajectory
  // doubles until it turns back, at most 2^max_depth - 1 steps).
  bool dynamic = false;
  int max_depth = 10;
  Real max_energy_error = 1000;  // dynamic: (H - H0)/kT beyond it, the trajectory diverged
  // "metric": the mass matrix the chains sample with: the system's own
  // (mass), the identity, or one adapted in warm-up windows (diag, dense).
  MetricKind metric = MetricKind::mass;
  std::int64_t chains = 0;
  std::int64_t draws = 0;   // stored per chain, after warm-up and thinning
  std::int64_t warmup = 0;  // iterations that adapt the step size, not stored
  std::int64_t thin = 1;    // store every thin-th iteration
  Real temperature = 1;     // kT: the chains sample exp(-V/kT) on N
  Real step_jitter = 0;     // h uniform in h (1 +- step_jitter) per proposal
  Real steps_jitter = 0;    // L uniform in L (1 +- steps_jitter) per proposal
  Real refresh_angle = Real(1.5707963267948966);  // a: p <- cos(a) p + sin(a) xi; pi/2 a full refresh
  Real target_acceptance = Real(0.8);             // warm-up's dual averaging aims at it
  Real reversibility_tolerance = 1e-8;            // |q_back - q|_inf in units of the system's length scale
  std::int64_t iterations() const { return warmup + draws * thin; }
};

struct SampleConfig {
  // system, method (dt: the step size, adapted from there when warmup > 0;
  // steps: L, static only), method.newton, the chains' start (ensemble-style initial
  // spec, seed, batch size), backend.
  RunConfig run;
  SampleSpec sample;
};

SampleConfig parse_sample_config(const std::string& json_text, const std::string& source);
// The text of a sampling config with sample.algorithm set to `algorithm`
// ("static" or "dynamic", else a ConfigError at `algorithm`), less the keys
// only the other algorithm takes (for dynamic: method.steps,
// sample.jitter.steps, sample.refresh_angle; for static: sample.max_depth,
// sample.max_energy_error): what tether.sample(..., algorithm=) runs.
std::string with_sample_algorithm(const std::string& json_text, const std::string& source,
                                  const std::string& algorithm);
SampleConfig load_sample_config_file(const std::string& path);
// Whether a config file is a sampling config (it has a top-level "sample").
bool is_sample_config_file(const std::string& path);

// A block of draws: chains [first_chain, first_chain + chains) x draws
// [first_draw, first_draw + draws); component c of draw d of chain i at
// [(d * dof + c) * chains + i], a scalar of draw d of chain i at [d * chains + i].
struct DrawBlock {
  std::int64_t first_chain = 0, chains = 0, first_draw = 0, draws = 0;
  int dof = 0;
  const Real *q = nullptr, *potential = nullptr, *acceptance = nullptr, *energy = nullptr, *step_size = nullptr;
  const std::int32_t* steps = nullptr;
  const std::uint8_t* outcome = nullptr;     // HmcOutcome
  const std::uint8_t* tree_depth = nullptr;  // doublings of a dynamic trajectory (0: static)
  // The block's chains' Sigma, fixed since warm-up, with a batch's first
  // draws (else null): inverse_metric_values of sample.metric per chain
  // (none for mass and identity), value e of chain i at [e * chains + i].
  const Real* inverse_metric = nullptr;
};

class DrawSink {
 public:
  virtual ~DrawSink() = default;
  virtual void write(const DrawBlock& block) = 0;
};

struct SampleOptions {
  DrawSink* draws = nullptr;                                // may be null (summary only)
  bool check_only = false;                                  // validate against the system's equations, run nothing
  std::function<void(double done, double total)> progress;  // chain-iterations
  // Checkpoints, as for a run (RunOptions): the sample's whole state between
  // two windows of iterations, handed to `checkpoint` once a batch has gone
  // `checkpoint_every` iterations past the last one (0: never) and when *stop
  // turns non-zero, after which sample() returns with SampleResult::stopped.
  // `resume`: bytes a checkpoint of the same config gave; the draws from
  // there on are those of a sample never stopped (the sink has the earlier ones).
  std::function<void(const std::string& bytes)> checkpoint;
  std::int64_t checkpoint_every = 0;
  const std::string* resume = nullptr;
  const volatile std::sig_atomic_t* stop = nullptr;
};

// The sum of acceptance probabilities (in [0, 1]) in fixed point, units of
// 2^-62 in 128 bits: exact, so it is the same whatever order the draws are
// added in (batches, windows, shards). A NaN is counted, never dropped.
struct AcceptanceSum {
  std::uint64_t high = 0, low = 0;
  std::int64_t nan = 0;
  void add(Real a) {
    if (!(a >= 0 && a <= 1)) {
      ++nan;
      return;
    }
    add_units(static_cast<std::uint64_t>(std::llround(std::ldexp(a, 62))));
  }
  void merge(const AcceptanceSum& o) {
    add_units(o.low);
    high += o.high;
    nan += o.nan;
  }
  Real mean(double count) const {
    if (nan > 0) return std::numeric_limits<Real>::quiet_NaN();
    return count > 0 ? (std::ldexp(double(high), 2) + std::ldexp(double(low), -62)) / count : 0;
  }

 private:
  void add_units(std::uint64_t x) {
    low += x;
    high += low < x ? 1 : 0;
  }
};

struct SampleResult {
  std::string system, method, backend;
  std::int64_t chains = 0, draws = 0, warmup = 0, thin = 1;
  // Over the stored draws: how many proposals ended each way (HmcOutcome order;
  // for a dynamic sampler, why its trajectories stopped growing), the mean
  // acceptance probability, and the steps the proposals took.
  std::array<std::int64_t, hmc_outcome_count> outcomes{};
  AcceptanceSum acceptance;
  std::int64_t steps = 0;
  // Warm-up windows whose metric estimate was not positive definite (the
  // metric before it kept), over all chains.
  std::int64_t metric_fallbacks = 0;
  // The adapted metrics' scales sqrt(Sigma_cc), coordinate by coordinate:
  // the least and the greatest over the chains (diag and dense; else empty).
  std::vector<Real> metric_scale_min, metric_scale_max;
  Real mean_acceptance = 0;
  Real step_size_min = std::numeric_limits<Real>::infinity(), step_size_max = 0;  // after warm-up
  double wall_seconds = 0, sampling_seconds = 0;
  double chain_iterations = 0;  // warm-up included
  bool stopped = false;  // by SampleOptions::stop: partial, a checkpoint holds the rest
  // Another's counts, extrema and sums (a shard's); mean_acceptance is then
  // set_mean_acceptance's to recompute.
  void merge(const SampleResult& o) {
    for (std::size_t k = 0; k < outcomes.size(); ++k) outcomes[k] += o.outcomes[k];
    acceptance.merge(o.acceptance);
    steps += o.steps;
    metric_fallbacks += o.metric_fallbacks;
    const auto extreme = [](std::vector<Real>& a, const std::vector<Real>& b, bool least) {
      if (a.empty()) a = b;
      for (std::size_t c = 0; c < a.size() && c < b.size(); ++c) a[c] = least ? std::min(a[c], b[c]) : std::max(a[c], b[c]);
    };
    extreme(metric_scale_min, o.metric_scale_min, true);
    extreme(metric_scale_max, o.metric_scale_max, false);
    step_size_min = std::min(step_size_min, o.step_size_min);
    step_size_max = std::max(step_size_max, o.step_size_max);
    sampling_seconds += o.sampling_seconds;
    chain_iterations += o.chain_iterations;
  }
  // Over the stored draws of `chain_count` chains.
  void set_mean_acceptance(std::int64_t chain_count) {
    mean_acceptance = acceptance.mean(double(chain_count) * double(draws));
  }
};

SampleResult sample(const SampleConfig& config, const SampleOptions& options);
// What sample() would refuse before running (explicit start states off the
// manifold, a method not symmetric with its parameters), as ConfigErrors.
inline void check_sample_config(const SampleConfig& config) {
  SampleOptions check;
  check.check_only = true;
  sample(config, check);
}

}  // namespace tether

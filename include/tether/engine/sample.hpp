#pragma once
// `tether sample`: constrained Hamiltonian Monte Carlo, many chains at once
// (include/tether/sampling/hmc.hpp), draws streamed to a DrawSink.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tether/engine/config.hpp"

namespace tether {

struct SampleSpec {
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
  // steps: L), method.newton, the chains' start (ensemble-style initial
  // spec, seed, batch size), backend.
  RunConfig run;
  SampleSpec sample;
};

SampleConfig parse_sample_config(const std::string& json_text, const std::string& source);
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
  const std::uint8_t* outcome = nullptr;  // HmcOutcome
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
};

struct SampleResult {
  std::string system, method, backend;
  std::int64_t chains = 0, draws = 0, warmup = 0, thin = 1;
  // Over the stored draws: how many proposals ended each way (HmcOutcome order),
  // and the mean acceptance probability.
  std::array<std::int64_t, 4> outcomes{};
  Real mean_acceptance = 0;
  Real step_size_min = 0, step_size_max = 0;  // the chains' step sizes after warm-up
  double wall_seconds = 0, sampling_seconds = 0;
  double chain_iterations = 0;  // warm-up included
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

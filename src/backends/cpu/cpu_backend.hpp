#pragma once
// cpu: the very step code the GPU runs, on all cores: in lanes of cpu_lanes
// trajectories (advance_lanes) where the system and method are written for
// any scalar or step in tiles, else one trajectory at a time
// (advance_trajectory); carrying the end-of-step force where the method can
// (registers are no concern here; a force evaluation saved is).
#include "backends/backend.hpp"

namespace tether {

template <class S, class M>
class CpuBackend final : public Backend {
 public:
  CpuBackend(const S& sys, const M& method, const StepControl& ctl) : sys_(sys), method_(method), ctl_(ctl) {}

  void load(HostEnsemble& batch) override { view_ = batch.view(); }

  void advance(int nsteps, std::int64_t steps_before) override {
    const EnsembleView v = view_;
    if constexpr (runs_in_lanes<S, M>) {
      constexpr int W = cpu_lanes;
      const std::int64_t groups = (v.count + W - 1) / W;
#pragma omp parallel for schedule(dynamic, 64 / W) if (v.count >= parallel_threshold)
      for (std::int64_t g = 0; g < groups; ++g) advance_lanes<W, S, M>(sys_, method_, ctl_, v, g * W, nsteps, steps_before);
    } else {
#pragma omp parallel for schedule(dynamic, 64) if (v.count >= parallel_threshold)
      for (std::int64_t i = 0; i < v.count; ++i) {
        advance_trajectory<S, M>(sys_, method_, ctl_, v, i, nsteps, steps_before);
        if constexpr (needs_replay<S, M>)
          advance_trajectory<S, M>(sys_, method_, ctl_, v, i, nsteps, steps_before, true);
      }
    }
  }

  Observation observe(std::int64_t step, std::vector<Real>& chunk_sums) override {
    const EnsembleView v = view_;
#pragma omp parallel for schedule(static) if (v.count >= parallel_threshold)
    for (std::int64_t i = 0; i < v.count; ++i) observe_trajectory<S>(sys_, v, i, step);
    return reduce_observations(v, chunk_sums);
  }

  void store(HostEnsemble&) override {}  // worked in place
  double first_launch_work() const override { return 1e6; }

 private:
  S sys_;
  M method_;
  StepControl ctl_;
  EnsembleView view_;
};

}  // namespace tether

#pragma once
// What every backend does to a batch of trajectories, and the host storage
// they all load from and store to.
#include <memory>
#include <vector>

#include "tether/ensemble/advance.hpp"

namespace tether {

// Host structure-of-arrays storage of one batch (see EnsembleView).
struct HostEnsemble {
  std::int64_t count = 0;
  int dof = 0;
  bool two_step = false;
  std::vector<Real> q, p, q_prev, energy0, energy_scale, energy_error, constraint_violation, velocity_violation;
  std::vector<std::uint8_t> status;
  std::vector<std::int64_t> failed_step;
  std::vector<std::uint64_t> iterations_sum;
  std::vector<std::int32_t> iterations_max;

  HostEnsemble(std::int64_t n, int dof_, bool two_step_);

  EnsembleView view() {
    EnsembleView v;
    v.count = count;
    v.q = q.data();
    v.p = p.data();
    v.q_prev = two_step ? q_prev.data() : nullptr;
    v.energy0 = energy0.data();
    v.energy_scale = energy_scale.data();
    v.status = status.data();
    v.failed_step = failed_step.data();
    v.iterations_sum = iterations_sum.data();
    v.iterations_max = iterations_max.data();
    v.energy_error = energy_error.data();
    v.constraint_violation = constraint_violation.data();
    v.velocity_violation = velocity_violation.data();
    return v;
  }
};

// One interface for every backend and every (system, method) pair: the
// implementations are templates, the host loop (engine/runner.hpp) is not.
class Backend {
 public:
  virtual ~Backend() = default;
  // Takes over a batch prepared on the host (states on T*N, methods started).
  virtual void load(HostEnsemble& batch) = 0;
  // Advances every live trajectory by nsteps; steps_before is for failure reports.
  virtual void advance(int nsteps, std::int64_t steps_before) = 0;
  // Observes every trajectory at `step` (failing those whose energy or
  // residuals are not finite: observe_trajectory) and reduces over the live
  // ones; chunk_sums receives the energy-error sum of each observation_chunk
  // of trajectories.
  virtual Observation observe(std::int64_t step, std::vector<Real>& chunk_sums) = 0;
  // Copies states, statuses and counters back into the batch.
  virtual void store(HostEnsemble& batch) = 0;
  // Trajectory-steps of the first advance call, a probe from whose time the
  // host loop sizes the next calls to about a second each (runner.hpp).
  virtual double first_launch_work() const = 0;
};

// Below this many trajectories a parallel region costs more than it saves
// (and, on a loaded machine, spinning threads cost far more).
constexpr std::int64_t parallel_threshold = 512;

// Maxima over the live trajectories, and their energy-error sums per chunk.
Observation reduce_observations(const EnsembleView& v, std::vector<Real>& chunk_sums);

}  // namespace tether

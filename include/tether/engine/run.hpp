#pragma once
// The engine's entry points: check a config against the system's equations,
// and run an ensemble on a backend.
#include <csignal>
#include <functional>
#include <string>
#include <vector>

#include "tether/engine/config.hpp"
#include "tether/core/status.hpp"

namespace tether {

struct Failure {
  std::int64_t id = 0;
  std::int64_t step = 0;  // 0: the initial state could not be prepared
  Status reason = Status::ok;
};

struct TimeseriesRow {
  std::int64_t step = 0;
  Real time = 0;
  std::int64_t live = 0;  // trajectories not failed
  Real mean_energy_error = 0, max_energy_error = 0;
  Real max_constraint_violation = 0, max_velocity_constraint_violation = 0;
};

struct RunResult {
  std::string system, method, backend;
  std::string family;  // holonomic | nonholonomic
  int stages = 0;      // gauss_legendre only
  std::int64_t trajectories = 0, steps = 0;
  Real dt = 0;
  Real max_constraint_violation = 0, max_velocity_constraint_violation = 0, max_relative_energy_error = 0;
  Real newton_mean = 0;  // per step attempted; NaN (null in summary.json) when none was
  int newton_max = 0;
  std::int64_t failed = 0;
  std::vector<Failure> failures;  // first `failure_report_cap` by id
  std::vector<TimeseriesRow> timeseries;
  std::int64_t projected_states = 0;  // explicit states moved onto T*N
  Real max_projection_distance = 0;
  std::uint64_t trajectory_steps = 0;  // steps actually taken (failed trajectories stop)
  Real wall_seconds = 0, integration_seconds = 0;
  bool stopped = false;  // by RunOptions::stop: the result is partial, a checkpoint holds the rest
  // A shard's (RunConfig::shard_count > 1) sums in the form merge_shards adds up.
  std::string tally;
};

// One trajectory's state and how it has fared: at the end of a run, or at a
// snapshot (output.trajectories).
struct TrajectoryRecord {
  std::int64_t id = 0;
  std::int64_t step = 0;         // the step this state is at (the last good one for a failed trajectory)
  std::vector<Real> q, p;
  Status status = Status::ok;
  std::int64_t failed_step = 0;  // the step it failed at (0: ok, or its start failed)
  // At its last observation: |H - H0| / scale, and the constraint residuals.
  Real energy_error = 0, constraint_violation = 0, velocity_violation = 0;
};

// Receives every trajectory's final record, in id order, and the snapshots
// RunConfig::track_ids asks for: each tracked trajectory at steps 0,
// track_every, 2 track_every, ... and the last step, in the order of the
// batches, then steps, then ids.
class FinalStateSink {
 public:
  virtual ~FinalStateSink() = default;
  virtual void write(const TrajectoryRecord& r) = 0;
  virtual void snapshot(const TrajectoryRecord&) {}
};

// Receives the timeseries rows, in step order.
class TimeseriesSink {
 public:
  virtual ~TimeseriesSink() = default;
  virtual void row(const TimeseriesRow& t) = 0;
};

struct RunOptions {
  FinalStateSink* final_states = nullptr;
  // Where the timeseries goes instead of RunResult::timeseries. A run whose
  // ids are one batch (and not a shard, whose rows a merge adds up) hands
  // each row over as soon as it is observed and holds none (the timeseries
  // streams, in memory of one row); a run of several batches adds every batch
  // to every row, so it holds them all and hands them over at its end.
  TimeseriesSink* timeseries = nullptr;
  // Called after every output interval with (trajectory-steps done, total).
  std::function<void(double done, double total)> progress;
  std::size_t failure_report_cap = 100;
  // Checkpoints: the run's whole state between two steps, as bytes, handed to
  // `checkpoint` every `checkpoint_every` steps of a batch (0: never) and
  // when *stop turns non-zero (a signal), after which the run returns at once
  // with RunResult::stopped set. `resume`: bytes a checkpoint of the same
  // config gave; the run goes on from there, its outputs byte-identical to a
  // run never stopped (final states already written stay the sink's).
  std::function<void(const std::string& bytes)> checkpoint;
  std::int64_t checkpoint_every = 0;
  const std::string* resume = nullptr;
  const volatile std::sig_atomic_t* stop = nullptr;
};

// Number of CUDA devices usable by this build (0 when not built with CUDA).
int cuda_device_count();
bool cuda_built();
// A build configured with TETHER_CUDA_COMPILE_CHECK=ON (scripts/test.sh on a
// machine without a GPU) compiles its kernels to unoptimised PTX, only to
// check that they compile, and links none of them: it never runs them.
bool cuda_compile_check_only();

// What of this build changes a run's bits (compiler, vector lanes, fused
// multiply-adds): a checkpoint is resumed only by the build that wrote it.
std::string build_fingerprint();

// An MPI rank's GPU: device rank mod devices (nothing without CUDA or a device).
void use_cuda_device_of_rank(int rank);

// "auto" -> cuda when built to run and a device is present, else cpu. Throws
// ConfigError when the requested backend is not available.
std::string resolve_backend(const std::string& requested);
// The same, knowing the ensemble's size: "auto" picks cuda only from
// `cuda_from` up, auto_cuda_min_ensemble trajectories or chains (run,
// sample), auto_cuda_min_shots shots (shoot). Measured on an H100 against
// the cpu backend on its host's 16 cores (bench/results/2026-11-26-h100-gpu-check):
// at 10^3 trajectories cuda was 1.5-10x faster on 41 of 43 (system, method)
// pairs and 0.8-0.9x on the other two (Gauss-Legendre with 3 stages), at
// 10^4 at least 3x on every pair; 1000 chains sampled 1.8x faster. A shot is
// a Newton solve with the tangent flow, heavier per thread: 0.56x at 2000
// shots, 1.7x at 20000 (Heisenberg, Gauss-Legendre 2 stages). With fewer
// host cores cuda wins sooner: these are the conservative side.
constexpr std::int64_t auto_cuda_min_ensemble = 1000;
constexpr std::int64_t auto_cuda_min_shots = 8000;
std::string resolve_backend(const std::string& requested, std::int64_t ensemble,
                            std::int64_t cuda_from = auto_cuda_min_ensemble);

// Everything that needs the system itself: explicit states' dimensions and
// their distance from the constraint manifold. Throws ConfigError.
void check_config(const RunConfig& config);

RunResult run(const RunConfig& config, const RunOptions& options);

// The result of the whole run from its K shards' tallies (RunResult::tally,
// in shard order): the timeseries, maxima, counts and failures one run of
// the config gives, bit for bit (timings aside).
RunResult merge_shards(const RunConfig& config, const std::vector<std::string>& tallies);

}  // namespace tether

#pragma once
// JSON config -> typed run description. Every error names the JSON path.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "tether/engine/config_error.hpp"
#include "tether/core/newton.hpp"

namespace tether {

struct DeclaredSystem;  // a system written as expressions in the config (src/expr/declared_system.hpp)
struct SystemInfo;      // tether/engine/catalog.hpp

struct ExplicitState {
  std::vector<Real> q, p;
};

// How a run's trajectories start (README, "ensemble.initial"; which to use when).
struct InitialSpec {
  enum class Kind { thermal, around, states, canonical, draws } kind = Kind::thermal;
  Real temperature = 0;                                // thermal, canonical; draws: the file's
  ExplicitState center;                                // around
  Real position_spread = 0, momentum_spread = 0;       // around
  std::vector<ExplicitState> states;                   // states
  bool project = false;                                // states: project onto T*N instead of rejecting
  Real tolerance = 1e-10;                              // states: allowed |g| and |G M^-1 p| without projection
  std::string path = "ensemble.initial";               // where the config gives it (error messages)
  bool states_as_arrays = false;                       // states: handed over as two arrays (InMemoryRun)
  // canonical: each trajectory is the one draw of its own RATTLE-HMC chain
  // after `warmup` adapting iterations of `steps` steps from dt (0: the
  // run's dt), i.e. what `tether sample` with draws = 1 gives chain `id`.
  std::int64_t warmup = 200;
  int steps = 10;
  Real dt = 0;
  Real target_acceptance = Real(0.8);
  // draws: positions read from a `tether sample` draws.nc, trajectory i from
  // chain i mod C, draw D - 1 - i / C (the last draws first); its momenta
  // ~ N(0, kT M) projected onto T*_q N.
  std::string draws_file;
  std::vector<Real> draw_q;  // trajectory-major, dof each
};

struct RunConfig {
  // The system and method: their indices in the registry (tether/registry.hpp,
  // src/registry/catalog.hpp) and their config objects as given, which the
  // engine reads into the system and method objects (already validated).
  std::string system_name;
  int system = 0;  // -1: the system declared in the config, `declared`
  std::shared_ptr<const DeclaredSystem> declared;
  nlohmann::json system_parameters = nlohmann::json::object();
  std::string method_name;
  int method = 0;
  nlohmann::json method_config = nlohmann::json::object();
  nlohmann::ordered_json method_parameters;  // the method's parameter values (summary.json)
  int stages = 0;                            // gauss_legendre's stage count; 0 for other methods
  Real dt = 0;
  std::int64_t steps = 0;
  NewtonOptions newton;
  std::int64_t size = 0;
  std::uint64_t seed = 0;
  std::int64_t batch_size = 1 << 20;
  InitialSpec initial;
  std::int64_t output_every = 0;
  bool write_final_states = true;
  // output.checkpoint.every: steps (a sample's iterations) of a batch between checkpoints (0: none)
  std::int64_t checkpoint_every = 0;
  std::string output_format = "csv";  // csv | netcdf
  // tether run --shard k/K: this run integrates the k-th of K slices of the
  // ensemble (shard_ids), for `tether merge` to join into the whole run's output.
  int shard_index = 0, shard_count = 1;
  // output.trajectories: these trajectories' states every track_every steps (ids ascending).
  std::vector<std::int64_t> track_ids;
  std::int64_t track_every = 0;
  std::string backend = "auto";  // auto | cpu | reference | cuda
  std::string precision = "double";
};

// `tether shoot`: boundary-value problems q(0) = q0, q(T) = q1 for
// every target q1, solved for the initial covector p0.
struct ShootSpec {
  std::vector<Real> q0;
  Real time = 0;  // T = method.steps x method.dt
  std::string targets_kind;  // list | grid | random
  std::vector<std::vector<Real>> targets;
  // Guesses tried for every target, in this order: the explicit list, the
  // rule p0 = (q1 - q0) / T when `toward` is set, then random normal ones.
  std::vector<std::vector<Real>> guesses;
  bool toward = false;
  std::int64_t random_guesses = 0;
  Real guess_scale = 1;
  std::uint64_t guess_seed = 0;
  Real tolerance = 1e-10;  // on |q(T) - q1|
  int max_iterations = 50;
  bool line_search = true;
  int max_backtracks = 10;
  int stall_iterations = 0;  // slow Newton iterations in a row that stop a shot (0: never)
  int continuation_rounds = 0;  // 0: off
  int continuation_substeps = 8;
  // A target is flagged near the cut locus when its geodesic meets a conjugate
  // point by (1 + margin) T, or another converged geodesic is at most (1 + margin) times as long.
  Real cut_locus_margin = 0.05;
  // shoot.accuracy: the relative error of q(T) wanted, |q_h(T) - q(T)| / |q1 - q0|
  // (0: off). The step count (method.steps, else start_steps, is the first
  // tried) grows until every converged target's Richardson estimate is within it.
  Real accuracy = 0;
  int nodes = 1;  // multiple shooting: arcs per shot (method.steps a multiple of it)
  static constexpr std::int64_t start_steps = 16;
  static constexpr std::int64_t max_steps = std::int64_t(1) << 24;
  std::int64_t geodesic_every = 0;    // write solved geodesics sampled every this many steps (0: none)
  std::int64_t geodesic_targets = 0;  // for the first this many targets
  std::int64_t guesses_per_target() const { return std::int64_t(guesses.size()) + (toward ? 1 : 0) + random_guesses; }
};

struct ShootConfig {
  RunConfig run;  // system, method (dt = T / steps), backend, batch size; no ensemble
  ShootSpec shoot;
};

// Names the build knows, each once, in registry order (messages, `tether list`).
const std::vector<std::string>& system_names();
const std::vector<std::string>& method_names();
const std::vector<std::string>& backend_names();

// Parses and validates everything that does not need the system's equations
// (explicit states are checked against the constraint manifold later, by the
// engine, still as ConfigErrors).
// "composition (base rattle, scheme kahan_li8)": the method with its parameters, for messages and summaries.
std::string describe_method(const RunConfig& c);

// The configured system's registry entry (or its declaration's), and the dimension of its q.
const SystemInfo& system_info(const RunConfig& c);
int system_dof(const RunConfig& c);

// Rows of a run's timeseries: step 0, then every output.every steps, and the last step.
std::int64_t timeseries_rows(const RunConfig& c);
// The ids [first, end) a run integrates (or a sample's chains): all of
// them, or its shard's slice. A run's slices are cut at multiples of 4096
// trajectories (engine/tally.hpp's blocks), so that shards merge into exactly
// the single run's statistics; a sample's at any chain (granule 1).
constexpr std::int64_t shard_granule = 4096;
std::pair<std::int64_t, std::int64_t> shard_ids(const RunConfig& c, std::int64_t granule = shard_granule);
// Trajectories a run integrates per batch of its `count` ids: all of them
// where ensemble.batch_size covers them, else batch_size rounded up to whole
// observation chunks (ensemble/advance.hpp), so that a timeseries row's
// chunk sums, and so its bits, do not depend on the batch size.
std::int64_t run_batch(const RunConfig& c, std::int64_t count);
// Snapshots of each tracked trajectory: step 0, every track_every steps, and the last step (0 without tracking).
std::int64_t snapshots_per_trajectory(const RunConfig& c);
// The step of snapshot k, and which snapshot a step is (the writers' and the Python package's index).
std::int64_t snapshot_step(const RunConfig& c, std::int64_t k);
std::int64_t snapshot_index(const RunConfig& c, std::int64_t step);
// Host memory one timeseries row takes while a run accumulates it (its
// reduction, energy sum and written row; engine/runner.hpp checks the figure).
constexpr double timeseries_row_bytes = 128;

RunConfig parse_config(const std::string& json_text, const std::string& source);
// A run whose caller keeps its results in memory (the Python package): the
// final states are counted against this machine's memory, and where the
// config's ensemble.initial.states is the string "arrays", the states are
// q and p, count x q_columns and count x p_columns, row-major (check_config
// then checks their dimensions against the system's).
struct InMemoryRun {
  const Real* q = nullptr;
  const Real* p = nullptr;
  std::int64_t count = 0;
  int q_columns = 0, p_columns = 0;
  std::int64_t batch_size = 0;  // > 0: instead of ensemble.batch_size (checked as it would be)
};
// Refuses (ConfigError, naming the key to change) a run whose batches,
// timeseries rows, snapshots, or (results_in_memory) final states would not
// fit in this machine's memory. parse_config checks it; a caller that changes
// the batch size afterwards checks again, naming its own option as batch_key.
void check_run_memory(const RunConfig& c, bool results_in_memory,
                      const std::string& batch_key = "ensemble.batch_size");
RunConfig parse_config_in_memory(const std::string& json_text, const std::string& source, const InMemoryRun& in_memory);
// The same by the config's own rules only: without refusing what cannot fit
// in this machine's memory and without reading the start draws (`tether merge`).
RunConfig parse_config_as_written(const std::string& json_text, const std::string& source);
RunConfig load_config_file(const std::string& path);
// A config file's text: up to 256 MiB, else a ConfigError naming the file.
std::string read_config_file(const std::string& path);
// Which command a config is for, by its top-level keys: "shoot", "sample" or "run".
std::string config_command(const std::string& json_text, const std::string& source);
// The config file's JSON in one canonical text (keys sorted, no spacing): a
// checkpoint records it, and a resume compares it with the config given.
std::string canonical_config_file(const std::string& path);

ShootConfig parse_shoot_config(const std::string& json_text, const std::string& source);
ShootConfig load_shoot_config_file(const std::string& path);
// Whether a config file is a shooting config (it has a top-level "shoot"),
// so that `tether validate` checks each kind by its own rules.
bool is_shoot_config_file(const std::string& path);
// A run config: "ensemble" at the top level, and neither "shoot" nor "sample".
bool is_run_config_file(const std::string& path);

}  // namespace tether

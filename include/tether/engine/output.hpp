#pragma once
// Writers for a run's folder. Files are written under temporary names and
// renamed when complete; summary.json is renamed last, so a folder with a
// summary.json holds a finished run.
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "tether/engine/config.hpp"
#include "tether/engine/diagnostics.hpp"
#include "tether/engine/run.hpp"
#include "tether/engine/sample.hpp"
#include "tether/engine/shooting.hpp"

namespace tether {

// The "format" of checkpoint.tether's and shard.tether's header line. Version 2
// seals each file with the CRC-32 of its bytes and records the CRC-32 of
// every file it goes on from; version 3's draws.bin records carry the chains'
// adapted metric. A file of an earlier version is refused as another version's.
inline const std::string checkpoint_format = "tether checkpoint 3";
inline const std::string shard_format = "tether shard 3";

// A run's output folder, held by one run at a time (an advisory lock on
// DIR/.tether.lock, released when the process ends, however it ends).
// A previous run's results stay untouched until this run has finished
// computing: the first commit removes them all (summary.json first), then
// files are renamed into place one by one, summary.json last by the caller.
// Files of a run that never commits (an exception, a signal) stay under
// their .partial names and are removed by the next run in the folder, except
// what a checkpoint needs (Start says).
// A command refused or failed before it committed anything or wrote a
// checkpoint leaves the folder as it found it (the lock and the folder
// removed again if it made them). A symbolic link at DIR/.tether.lock is
// refused (ConfigError at --out), never written through.
// Throws std::runtime_error (with the OS's reason).
class OutputFolder {
 public:
  // How a command meets a checkpoint (and the .partial files it goes on
  // from) left in the folder: a fresh `tether run` drops them, its own files
  // taking their place; a resumed one keeps them; any other command leaves
  // them until its first commit, so one that is refused destroys nothing.
  enum class Start { fresh_run, resume, other };
  explicit OutputFolder(const std::filesystem::path& dir, Start start = Start::other);
  ~OutputFolder();
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  std::filesystem::path partial(const std::string& name) const { return dir_ / (name + ".partial"); }
  // Renames name.partial to name (the first call removes the previous run's results and any checkpoint).
  void commit(const std::string& name);

  // DIR/checkpoint.tether: a one-line JSON header, then the run's state
  // bytes, sealed by their CRC-32 (io/checksum.hpp); written whole (write, fsync, rename, fsync of the folder), so a
  // crash leaves the previous checkpoint or this one, never a torn one. Once
  // one is written, final.csv.partial outlives this object (a resume appends to it).
  void write_checkpoint(const nlohmann::json& header, const std::string& state);
  struct Checkpoint {
    nlohmann::json header;
    std::string state;
  };
  // Throws std::runtime_error when there is none, it is damaged (its seal
  // does not match) or not a checkpoint of this version.
  Checkpoint read_checkpoint() const;

  const std::filesystem::path& dir() const { return dir_; }

 private:
  void take_lock();
  std::filesystem::path dir_;
  int lock_fd_ = -1;
  std::filesystem::path created_top_;  // the outermost folder this command made, if any
  bool created_lock_ = false;           // by this command: removed again (with the folders) if it leaves nothing
  bool retired_ = false;       // the previous run's results are gone
  bool checkpointed_ = false;  // final.csv.partial belongs to a checkpoint
};

// What `tether run` writes into its folder, for either output.format. As the
// run goes: final states (final.csv rows: id, q, p, status in shortest
// round-trip decimals; for netcdf a binary side file), snapshots (a binary
// side file) and the timeseries (timeseries.csv rows; for netcdf a binary
// side file), none of them held in memory. At the end (finish):
// trajectories.csv (sorted by id, then step) or results.nc (everything, see
// write_results_netcdf), then summary.json, each committed into place,
// summary.json last.
class RunFiles final : public FinalStateSink, public TimeseriesSink {
 public:
  // `resume`: the file records a checkpoint holds (file_records); the files
  // go on from there once their bytes are verified against them.
  RunFiles(OutputFolder& folder, const RunConfig& c, const nlohmann::json* resume = nullptr);
  ~RunFiles() override;
  void write(const TrajectoryRecord& r) override;
  void snapshot(const TrajectoryRecord& r) override;
  void row(const TimeseriesRow& t) override;
  // Everything written so far on disk; each file's byte count and CRC-32
  // ({"final.csv": {"bytes": n, "crc32": c}, ...}), for a checkpoint or a shard.
  nlohmann::json file_records();
  void finish(const RunResult& r);
  // A shard's folder instead: its final.csv (or final.bin), trajectories.bin,
  // and last shard.tether (`header` with the files' records as its first
  // line, then the shard's tally, sealed by their CRC-32).
  void finish_shard(const RunResult& r, nlohmann::json header);

 private:
  void close_all();
  struct Files;
  OutputFolder& folder_;
  const RunConfig& c_;
  std::unique_ptr<Files> files_;
};

// Refuse (ConfigError, naming the key to change) output that cannot fit on
// the disk where `out` will be: estimated from the config before the folder
// is touched.
void check_room_for_run(const RunConfig& c, const std::filesystem::path& out);
void check_room_for_shoot(const ShootConfig& c, const std::filesystem::path& out);
void check_room_for_sample(const SampleConfig& c, const std::filesystem::path& out);
// Refuse (ConfigError at sample.draws) draws a caller would keep in memory
// (the Python package) where this machine has less available.
void check_memory_for_draws(const SampleConfig& c);

nlohmann::ordered_json run_summary(const RunConfig& c, const RunResult& r);
void write_summary(const std::filesystem::path& file, const RunConfig& c, const RunResult& r);
// results.nc (output.format "netcdf"): netCDF-4 that xarray.open_dataset
// shows with names, units and meanings: dimension trajectory (final q, p,
// status as CF flags, failed_step, energy_error, constraint residuals),
// step (the timeseries, with time as a coordinate), and, when trajectories
// are tracked, tracked x snapshot (their q, p, status); the summary as
// global attributes. The timeseries, final records and snapshots are read
// from the binary side files the run wrote.
// results.nc's global attributes, which the Python package's tether.run
// Dataset carries too: CF conventions, a title, summary.json (whole, as text)
// and its main entries.
nlohmann::ordered_json results_attributes(const RunConfig& c, const RunResult& r);
void write_results_netcdf(const std::filesystem::path& file, const RunConfig& c, const RunResult& r,
                          const std::filesystem::path& timeseries, const std::vector<std::filesystem::path>& finals,
                          const std::vector<std::filesystem::path>& snapshots);

// `tether merge`: the K shard folders of one config (each holding the
// shard.tether a `tether run --shard k/K` or `tether sample --shard k/K`
// committed last) into `folder`, as the files one run of the config writes:
// byte for byte but for timings (draws.nc and results.nc: the same numbers).
// Every shard's files are verified (their CRC-32 against shard.tether's
// record, shard.tether against its seal) before `out` is touched; throws
// ConfigError naming the folder that does not belong or the file that is damaged.
void merge_shard_folders(const std::filesystem::path& out, const std::vector<std::filesystem::path>& shards);

// `tether shoot`: shots.csv (one row per target), geodesics.csv, summary.json.
void write_shots(const std::filesystem::path& file, const ShootResult& r);
void write_geodesics(const std::filesystem::path& file, const ShootResult& r);
void write_shoot_summary(const std::filesystem::path& file, const ShootConfig& c, const ShootResult& r);
nlohmann::ordered_json shoot_summary(const ShootConfig& c, const ShootResult& r);

// `tether sample`: draws.nc (netCDF-4 in ArviZ's InferenceData layout:
// posterior/q, posterior/potential, sample_stats/*) and summary.json.
class NetcdfDraws final : public DrawSink {
 public:
  NetcdfDraws(const std::filesystem::path& file, const SampleConfig& c, int dof);  // throws std::runtime_error
  ~NetcdfDraws() override;
  void write(const DrawBlock& block) override;
  void close();

 private:
  struct Ids;
  std::filesystem::path file_;
  std::unique_ptr<Ids> ids_;
  int dof_;
  MetricKind metric_;
  bool open_ = false;
};
// The positions a run starts from (ensemble.initial.draws): `count` draws of
// the draws.nc of a `tether sample`, trajectory i from chain i mod C at draw
// D - 1 - i / C (the last draws first), with the file's system, its
// parameters and temperature. Errors are ConfigErrors at `where`.
struct StartDraws {
  std::string system;
  nlohmann::json system_parameters;
  double temperature = 0;
  std::int64_t chains = 0, draws = 0;
  std::vector<Real> q;  // count x dof, trajectory-major
};
StartDraws read_start_draws(const std::filesystem::path& file, std::int64_t count, int dof, const std::string& where);

// Whether writing a netCDF file failed in this process (a full disk): the
// HDF5 library may then hold the file in a state its clean-up at exit
// crashes on, so the command ends by std::_Exit once its own clean-up is done.
bool netcdf_file_left_broken();

// What draws.nc will take on disk at most (uncompressed, whole chunks, HDF5's metadata).
std::int64_t draws_file_bytes(const SampleSpec& s, int dof);
// What draws.bin will take at most for `chains` chains run in batches of `batch_size`.
std::int64_t draws_side_file_bytes(const SampleSpec& s, std::int64_t chains, std::int64_t batch_size, int dof);
// R-hat and ESS (VGSCB21) of every q component and of the potential in a
// draws file, and each chain's E-BFMI (Bet16) from its sample_stats energy,
// over its first chains_used chains: as many as keep chains_used x draws
// within max_values (memory, and the sorts' time).
struct DrawsDiagnostics {
  std::int64_t chains_used = 0;
  std::vector<ChainDiagnostics> q;
  ChainDiagnostics potential;
  std::vector<double> energy_bfmi;  // per chain used; NaN where undefined
  double min_energy_bfmi() const;   // NaN where no chain has one
  std::int64_t low_energy_bfmi_chains() const;  // below low_energy_bfmi
  // Over q and the potential, skipping NaN (a coordinate the constraints fix
  // has none); NaN (written as null) when none is defined, as with one chain.
  double max_rhat() const;
  double min_ess_bulk() const;
  double min_ess_tail() const;
};
DrawsDiagnostics diagnose_draws_file(const std::filesystem::path& file, std::int64_t max_values = std::int64_t(1) << 22);
void write_sample_summary(const std::filesystem::path& file, const SampleConfig& c, const SampleResult& r,
                          const DrawsDiagnostics& d);
// summary.json's content; without `diagnostics` it has no "diagnostics" entry.
nlohmann::ordered_json sample_summary(const SampleConfig& c, const SampleResult& r, const DrawsDiagnostics* diagnostics);
// summary.json's "warnings": what Stan would warn of, in words (R-hat's and
// E-BFMI's only with `diagnostics`); the command prints them on stderr, the
// Python module issues them as warnings.
std::vector<std::string> sample_warnings(const SampleConfig& c, const SampleResult& r, const DrawsDiagnostics* diagnostics);

// What `tether sample` writes into its folder. As the sample goes, each
// window's draws whole into a binary side file (draws.bin), which a
// checkpoint counts and a resume goes on from; at the end (finish) draws.nc
// made from it, then summary.json, each committed into place. A shard's
// folder keeps draws.bin and shard.tether instead (finish_shard).
class SampleFiles final : public DrawSink {
 public:
  // `resume`: the file records a checkpoint holds (file_records).
  SampleFiles(OutputFolder& folder, const SampleConfig& c, const nlohmann::json* resume = nullptr);
  ~SampleFiles() override;
  void write(const DrawBlock& block) override;
  nlohmann::json file_records();
  DrawsDiagnostics finish(const SampleResult& r);
  // shard.tether: `header` with draws.bin's record as its first line, then
  // the shard's counts and sums, sealed.
  void finish_shard(const SampleResult& r, nlohmann::json header);

 private:
  struct Files;
  OutputFolder& folder_;
  const SampleConfig& c_;
  std::unique_ptr<Files> files_;
};

}  // namespace tether

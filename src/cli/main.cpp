// The `tether` command: run, shoot, sample, validate, list.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli/mpi_run.hpp"
#include "expr/declared_system.hpp"
#include "registry/catalog.hpp"
#include "tether/engine.hpp"


namespace {

constexpr int exit_bad_input = 2;
constexpr int exit_runtime_error = 1;

// Progress on stderr, at most every two seconds, only for runs long enough to need it.
class Progress {
 public:
  explicit Progress(bool quiet, const char* unit = "trajectory-steps")
      : quiet_(quiet), tty_(isatty(2) != 0), unit_(unit), start_(clock::now()), last_(start_) {}
  void operator()(double done, double total) {
    if (quiet_) return;
    const auto now = clock::now();
    // A terminal gets one line redrawn every 2 s; a log file a line every 30 s.
    if (std::chrono::duration<double>(now - last_).count() < (tty_ ? 2.0 : 30.0) && done < total) return;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    if (elapsed < 1.0) return;
    last_ = now;
    const double rate = done / elapsed;
    std::fprintf(stderr, "%s[tether] %5.1f%%  %.3g %s/s  eta %.0f s%s", tty_ ? "\r" : "", 100.0 * done / total, rate,
                 unit_, rate > 0 ? (total - done) / rate : 0.0, tty_ ? "   " : "\n");
    shown_ = tty_;
  }
  ~Progress() {
    if (shown_) std::fprintf(stderr, "\n");
  }

 private:
  using clock = std::chrono::steady_clock;
  bool quiet_, tty_, shown_ = false;
  const char* unit_;
  clock::time_point start_, last_;
};

std::string method_label(const tether::RunConfig& c) { return tether::describe_method(c); }

// A statistic as the console shows it: "none (why)" where it has no value
// (NaN or infinite: summary.json's null), never a number it does not have.
std::string statistic(double x, const char* why_none) {
  if (!std::isfinite(x)) return std::string("none (") + why_none + ")";
  char s[32];
  std::snprintf(s, sizeof s, "%.4g", x);
  return s;
}

// A config written for another command is named as such, not reported as a
// list of keys this command does not know.
void refuse_other_commands_config(const std::string& config_path, const std::string& command) {
  const struct {
    const char *name, *kind, *key;  // the command, its kind of config, the key that marks it
    bool (*is)(const std::string&);
  } others[] = {{"run", "run", "ensemble", tether::is_run_config_file},
                {"shoot", "shooting", "shoot", tether::is_shoot_config_file},
                {"sample", "sampling", "sample", tether::is_sample_config_file}};
  for (const auto& o : others)
    if (command != o.name && o.is(config_path))
      throw tether::ConfigError(o.key, std::string("this is a ") + o.kind + " config: run it with `tether " + o.name +
                                           " " + config_path + " --out DIR`");
}

// A JSON pointer (/a/0/b) as the config path it names (a[0].b).
std::string config_path_of(const std::string& pointer) {
  std::string path;
  std::stringstream tokens(pointer);
  for (std::string token; std::getline(tokens, token, '/');) {
    if (token.empty()) continue;
    const bool index = std::all_of(token.begin(), token.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
    if (index)
      path += "[" + token + "]";
    else
      path += (path.empty() ? "" : ".") + token;
  }
  return path.empty() ? "(top level)" : path;
}

// SIGINT and SIGTERM ask a run to stop at its next step boundary, leave a
// checkpoint and exit; a second one ends the process at once.
volatile std::sig_atomic_t stop_signal = 0;
extern "C" void request_stop(int sig) {
  stop_signal = sig;
  std::signal(sig, SIG_DFL);
}

// --shard k/K: the k-th of K slices (0 <= k < K), each at least one
// granule of trajectories (a run) or chains (a sample, granule 1).
void set_shard(tether::RunConfig& cfg, const std::string& shard, bool from_mpi, std::int64_t granule,
               const char* unit) {
  if (shard.empty()) return;
  long k = -1, count = -1;
  char rest = 0;
  if (std::sscanf(shard.c_str(), "%ld/%ld%c", &k, &count, &rest) != 2 || count < 1 || k < 0 || k >= count)
    throw tether::ConfigError("--shard", "must be k/K with 0 <= k < K, got \"" + shard.substr(0, 40) + "\"");
  const std::int64_t granules = (cfg.size + granule - 1) / granule;
  if (count > granules && !from_mpi)  // (mpirun's extra ranks get empty slices)
    throw tether::ConfigError("--shard", std::to_string(cfg.size) + " " + unit + " make at most " +
                                             std::to_string(granules) + " shards" +
                                             (granule > 1 ? " (slices of " + std::to_string(granule) + ")" : "") +
                                             ", not " + std::to_string(count));
  cfg.shard_index = int(k);
  cfg.shard_count = int(count);
}

// What a checkpoint (and a shard) must match to be resumed (or merged): the
// command, its config, and what the command line changed (the backend and
// batches change the bits), and the build.
nlohmann::json identity_of(const char* command, const std::string& config_path, const tether::RunConfig& cfg) {
  // A start from a sample's draws: the positions read (the file may have been
  // replaced since), as a 64-bit FNV-1a hash of their bytes.
  std::uint64_t draws = 0;
  if (!cfg.initial.draw_q.empty()) {
    draws = 14695981039346656037ull;
    const auto* bytes = reinterpret_cast<const unsigned char*>(cfg.initial.draw_q.data());
    for (std::size_t i = 0; i < cfg.initial.draw_q.size() * sizeof(tether::Real); ++i)
      draws = (draws ^ bytes[i]) * 1099511628211ull;
  }
  return {{"format", tether::checkpoint_format},
          {"command", command},
          {"config", nlohmann::json::parse(tether::canonical_config_file(config_path))},
          {"backend", cfg.backend},
          {"batch_size", cfg.batch_size},
          {"shard", cfg.shard_index},
          {"shards", cfg.shard_count},
          {"start_draws", draws},
          {"build", tether::build_fingerprint()}};
}

// The checkpoint in `folder`, refused unless it matches `identity` (naming
// what differs): its state bytes, and the records of the files it goes on from.
std::pair<std::string, nlohmann::json> matching_checkpoint(const tether::OutputFolder& folder,
                                                           const nlohmann::json& identity) {
  tether::OutputFolder::Checkpoint ck = folder.read_checkpoint();
  const std::string where = folder.dir().string();
  for (const char* key : {"command", "config", "backend", "batch_size", "shard", "shards", "start_draws", "build"}) {
    if (ck.header[key] == identity[key]) continue;
    const std::string k = key;
    if (k == "start_draws")
      throw tether::ConfigError("ensemble.initial.draws", "names a file whose draws differ from those the checkpoint in " +
                                                              where + " started from: restore that file, or run afresh "
                                                              "without --resume");
    if (k == "command")
      throw tether::ConfigError("--resume", "the checkpoint in " + where + " was written by `tether " +
                                                ck.header.value("command", std::string("run")) + "`, not `tether " +
                                                identity[key].get<std::string>() + "`");
    if (k == "build")
      throw std::runtime_error("cannot resume: the checkpoint in " + where + " was written by another build of tether (" +
                               ck.header[key].dump() + "), whose results differ in the last bits");
    // Both values, this command's and the checkpoint's, where the first difference is.
    const auto shown = [](const nlohmann::json* v) {
      const std::string s = v == nullptr ? "absent" : v->dump();
      return s.size() > 60 ? s.substr(0, 57) + "..." : s;
    };
    std::string path, now, then;
    if (k == "config") {
      const nlohmann::json diff = nlohmann::json::diff(ck.header[key], identity[key]);
      const std::string pointer = diff.empty() ? "" : diff[0].value("path", std::string());
      const nlohmann::json::json_pointer at(pointer);
      path = config_path_of(pointer);
      now = shown(identity[key].contains(at) ? &identity[key][at] : nullptr);
      then = shown(ck.header[key].contains(at) ? &ck.header[key][at] : nullptr);
    } else {
      path = k == "backend" ? "--backend" : k == "batch_size" ? "--batch-size" : "--shard";
      const bool shard = k == "shard" || k == "shards";
      const auto slice = [](const nlohmann::json& h) {
        return h.value("shards", 1) > 1 ? std::to_string(h.value("shard", 0)) + "/" + std::to_string(h.value("shards", 1))
                                        : std::string("none");
      };
      now = shard ? slice(identity) : shown(&identity[key]);
      then = shard ? slice(ck.header) : shown(&ck.header[key]);
    }
    throw tether::ConfigError(path, "is " + now + " here but " + then + " in what wrote the checkpoint in " + where +
                                        ": resume with the same config and options, or run afresh without --resume");
  }
  return {std::move(ck.state), ck.header.value("files", nlohmann::json::object())};
}

// `out` as the folder of a command that checkpoints: started afresh, or
// (resume) with the checkpoint it goes on from, which must match `identity`;
// its state bytes and file records into `resumed`.
std::unique_ptr<tether::OutputFolder> open_output(const std::string& out, bool resume, const nlohmann::json& identity,
                                                  std::pair<std::string, nlohmann::json>& resumed) {
  if (resume && !std::filesystem::exists(std::filesystem::path(out) / "checkpoint.tether"))
    throw std::runtime_error("cannot resume: " + out + " holds no checkpoint (checkpoint.tether)");
  auto folder = std::make_unique<tether::OutputFolder>(
      out, resume ? tether::OutputFolder::Start::resume : tether::OutputFolder::Start::fresh_run);
  if (resume) resumed = matching_checkpoint(*folder, identity);
  return folder;
}

// A checkpoint written into `folder`: `identity` with the records (byte
// count, CRC-32) of the files it goes on from (`files`: the command's
// RunFiles or SampleFiles).
template <class Files>
std::function<void(const std::string&)> checkpoint_into(tether::OutputFolder& folder, const nlohmann::json& identity,
                                                        Files& files) {
  return [&folder, &identity, &files](const std::string& state) {
    nlohmann::json header = identity;
    header["files"] = files.file_records();
    folder.write_checkpoint(header, state);
  };
}

// shard.tether's header line: the identity, and the ids [lo, hi) the shard ran.
nlohmann::json shard_header(const nlohmann::json& identity, std::int64_t lo, std::int64_t hi, double wall_seconds) {
  nlohmann::json header = identity;
  header["format"] = tether::shard_format;
  header["ids"] = {lo, hi};
  header["wall_seconds"] = wall_seconds;
  return header;
}

// The command that goes on from a stopped command's checkpoint: the same one
// with --resume, under the same mpirun for a team (whose rank 0 says it; the
// others say nothing: "").
std::string resume_command(const tether::cli::MpiWorld& world, const char* command, const std::string& config_path,
                           const std::string& out) {
  if (world.size > 1 && world.rank != 0) return "";
  const std::string launcher = world.size > 1 ? "mpirun -np " + std::to_string(world.size) + " " : "";
  return launcher + "tether " + command + " " + config_path + " --out " + out + " --resume";
}

// Signals during a run, sample or shoot: SIGINT and SIGTERM ask it to stop at its
// next boundary and leave a checkpoint; a second one ends the process.
struct StopOnSignals {
  StopOnSignals() {
    std::signal(SIGINT, request_stop);
    std::signal(SIGTERM, request_stop);
  }
  ~StopOnSignals() {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
  }
  // The signal that stopped this process (SIGTERM for a team member stopped
  // by another's signal), and its exit status.
  static int signal() { return stop_signal != 0 ? int(stop_signal) : SIGTERM; }
  static int exit_code() { return 128 + signal(); }
  // The exit status after a stop, saying what to type to go on (`again`;
  // nothing where it is empty: another rank of the team says it).
  static int stopped(const std::string& again) {
    const int sig = signal();
    if (!again.empty())
      std::fprintf(stderr, "\nstopped by %s: checkpoint written; go on with `%s` (and the same options)\n",
                   sig == SIGINT ? "SIGINT" : "SIGTERM", again.c_str());
    return exit_code();
  }
};

// Runs `step` on every rank of an MPI world and agrees on its outcome: the
// worst exit code of all ranks (0: every rank went well). A config error
// every rank meets is said once, by rank 0; one that only some ranks meet (a
// checkpoint, this node's memory), and a runtime error, by each rank that
// met it. One process: `step` runs as it is, its errors the caller's.
int on_every_rank(const tether::cli::MpiWorld& world, const std::function<int()>& step) {
  if (world.size <= 1) return step();
  int code = 0;
  std::string error;
  try {
    code = step();
  } catch (const tether::ConfigError& e) {
    code = exit_bad_input;
    error = e.what();
  } catch (const std::exception& e) {
    code = exit_runtime_error;
    error = "rank " + std::to_string(world.rank) + ": " + e.what();
  }
  const int rank0 = tether::cli::mpi_max(world.rank == 0 ? code : 0);
  if (!error.empty() && (code != exit_bad_input || world.rank == 0 || rank0 != exit_bad_input)) {
    const std::string who = code == exit_bad_input && world.rank != 0 ? "rank " + std::to_string(world.rank) + ": " : "";
    std::fprintf(stderr, "error: %s%s\n", who.c_str(), error.c_str());
  }
  return tether::cli::mpi_max(code);
}

// `again`: the command that goes on from this one's checkpoint (resume_command).
int do_run(const std::string& config_path, const std::string& out, const std::string& backend, long threads,
           long batch_size, bool quiet, bool resume, const std::string& shard, const std::string& again,
           bool from_mpi = false) {
  refuse_other_commands_config(config_path, "run");
  tether::RunConfig cfg = tether::load_config_file(config_path);
  if (!backend.empty()) cfg.backend = backend;
  if (batch_size > 0) cfg.batch_size = batch_size;
  set_shard(cfg, shard, from_mpi, tether::shard_granule, "trajectories");
  // Again where the batches or the shard differ from the config's: a shard holds every timeseries row.
  if (batch_size > 0 || cfg.shard_count > 1)
    tether::check_run_memory(cfg, false, batch_size > 0 ? "--batch-size" : "ensemble.batch_size");
#ifdef _OPENMP
  if (threads > 0) omp_set_num_threads(int(threads));
#endif
  cfg.backend = tether::resolve_backend(cfg.backend, cfg.size);
  tether::check_config(cfg);  // with the backend's own library, where the system is declared
  if (!resume) tether::check_room_for_run(cfg, out);

  const nlohmann::json identity = identity_of("run", config_path, cfg);
  std::pair<std::string, nlohmann::json> resumed;  // state bytes, file records
  const auto held = open_output(out, resume, identity, resumed);
  tether::OutputFolder& folder = *held;
  tether::RunFiles files(folder, cfg, resume ? &resumed.second : nullptr);
  tether::RunOptions opt;
  opt.final_states = &files;
  if (cfg.shard_count <= 1) opt.timeseries = &files;
  Progress progress(quiet);
  opt.progress = [&](double d, double t) { progress(d, t); };
  opt.checkpoint = checkpoint_into(folder, identity, files);
  opt.checkpoint_every = cfg.checkpoint_every;
  opt.resume = resume ? &resumed.first : nullptr;
  opt.stop = &stop_signal;
  tether::RunResult r;
  {
    StopOnSignals signals;
    r = tether::run(cfg, opt);
    if (r.stopped) return StopOnSignals::stopped(again);
  }
  if (cfg.shard_count > 1) {
    const auto [lo, hi] = tether::shard_ids(cfg);
    nlohmann::json header = shard_header(identity, lo, hi, r.wall_seconds);
    header["family"] = r.family;
    files.finish_shard(r, header);
    if (!quiet)
      std::printf("%s shard %d of %d: trajectories %lld to %lld in %.3g s\n  wrote %s (join all %d with `tether merge`)\n",
                  r.system.c_str(), cfg.shard_index, cfg.shard_count, (long long)lo, (long long)hi - 1, r.wall_seconds,
                  folder.dir().string().c_str(), cfg.shard_count);
    return 0;
  }
  files.finish(r);

  if (!quiet) {
    const std::string method = method_label(cfg);
    std::printf("%s / %s on %s: %lld trajectories x %lld steps in %.3g s (%.3g trajectory-steps/s)\n", r.system.c_str(),
                method.c_str(), r.backend.c_str(), (long long)r.trajectories, (long long)r.steps, r.wall_seconds,
                r.integration_seconds > 0 ? double(r.trajectory_steps) / r.integration_seconds : 0.0);
    if (r.family == "nonholonomic")
      std::printf("  max |g_i(q) . qdot| %.3g", r.max_velocity_constraint_violation);
    else
      std::printf("  max |g(q)| %.3g, max |G M^-1 p| %.3g", r.max_constraint_violation,
                  r.max_velocity_constraint_violation);
    std::printf(", max relative energy error %.3g, Newton iterations mean %s max %d\n  wrote %s\n",
                r.max_relative_energy_error, statistic(r.newton_mean, "no step").c_str(), r.newton_max,
                folder.dir().string().c_str());
  }
  if (r.failed > 0)
    std::fprintf(stderr, "warning: %lld of %lld trajectories failed (see failures in summary.json)\n",
                 (long long)r.failed, (long long)r.trajectories);
  return 0;
}

// `tether shoot`, by one process or by every rank of `mpirun -np K` (a
// team: each phase's shots shared out by target, the results exchanged
// after each batch, rank 0 writing the folder and the checkpoints: the same
// files as one process).
int do_shoot(const std::string& config_path, const std::string& out, const std::string& backend, long threads,
             bool quiet, bool resume, const tether::cli::MpiWorld& world) {
  const bool team = world.size > 1;
  tether::ShootConfig cfg;
  nlohmann::json identity;
  std::unique_ptr<tether::OutputFolder> folder;  // rank 0's
  std::pair<std::string, nlohmann::json> resumed;
  const int setup = on_every_rank(world, [&] {
    refuse_other_commands_config(config_path, "shoot");
    cfg = tether::load_shoot_config_file(config_path);
    if (!backend.empty()) cfg.run.backend = backend;
#ifdef _OPENMP
    if (threads > 0) omp_set_num_threads(int(threads));
#endif
    if (team) tether::use_cuda_device_of_rank(world.rank);
    cfg.run.backend = tether::resolve_shoot_backend(cfg);
    identity = identity_of("shoot", config_path, cfg.run);
    if (world.rank != 0) return 0;
    if (!resume) tether::check_room_for_shoot(cfg, out);
    folder = open_output(out, resume, identity, resumed);
    return 0;
  });
  if (setup != 0) return setup;

  Progress progress(quiet || world.rank != 0, "shots");
  tether::ShootOptions opt;
  opt.progress = [&](double d, double t) { progress(d, t); };
  // Rank 0 holds the folder: it writes the checkpoints (the other ranks'
  // callbacks are never called) and hands a resumed one to every rank.
  opt.checkpoint = [&](const std::string& state) { folder->write_checkpoint(identity, state); };
  opt.checkpoint_every = cfg.run.checkpoint_every;
  if (team && resume) resumed.first = tether::cli::mpi_all_gather(world.rank == 0 ? resumed.first : "")[0];
  opt.resume = resume ? &resumed.first : nullptr;
  opt.stop = &stop_signal;
  if (team) {
    opt.team_rank = world.rank;
    opt.team_size = world.size;
    opt.all_gather = tether::cli::mpi_all_gather;
  }
  tether::ShootResult r;
  {
    StopOnSignals signals;
    if (team) {
      try {  // a rank that fails here would leave the others waiting in an exchange: end them all
        r = tether::shoot(cfg, opt);
      } catch (const tether::ConfigError& e) {
        // A checkpoint of another team size: every rank meets it alike, before any exchange.
        if (world.rank == 0) std::fprintf(stderr, "error: %s\n", e.what());
        return exit_bad_input;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "error: rank %d: %s\n", world.rank, e.what());
        tether::cli::mpi_abort(exit_runtime_error);
      }
    } else {
      r = tether::shoot(cfg, opt);
    }
  }
  if (r.stopped) {  // every rank of a team stops at the same boundary; rank 0 says so
    if (world.rank != 0) return StopOnSignals::exit_code();
    return StopOnSignals::stopped(resume_command(world, "shoot", config_path, out));
  }
  if (world.rank != 0) return 0;
  tether::write_shots(folder->partial("shots.csv"), r);
  if (cfg.shoot.geodesic_every > 0) tether::write_geodesics(folder->partial("geodesics.csv"), r);
  tether::write_shoot_summary(folder->partial("summary.json"), cfg, r);
  folder->commit("shots.csv");
  if (cfg.shoot.geodesic_every > 0) folder->commit("geodesics.csv");
  folder->commit("summary.json");

  std::int64_t converged = 0;
  for (const auto& t : r.targets) converged += t.status == tether::ShotStatus::converged;
  if (!quiet)
    std::printf("%s / %s on %s: %lld of %lld targets converged, %lld shots in %.3g s (%.3g shots/s)\n  wrote %s\n",
                r.system.c_str(), method_label(cfg.run).c_str(), r.backend.c_str(), (long long)converged,
                (long long)r.targets.size(), (long long)r.shots, r.wall_seconds,
                r.shooting_seconds > 0 ? double(r.shots) / r.shooting_seconds : 0.0, folder->dir().string().c_str());
  if (cfg.shoot.accuracy > 0 && !quiet)
    std::printf("  shoot.accuracy %.3g: %lld steps after %d passes\n", cfg.shoot.accuracy, (long long)r.steps,
                r.passes);
  if (converged < std::int64_t(r.targets.size()))
    std::fprintf(stderr, "warning: %lld of %lld targets did not converge (their rows in shots.csv say why)\n",
                 (long long)(std::int64_t(r.targets.size()) - converged), (long long)r.targets.size());
  if (cfg.shoot.accuracy > 0 && !r.accuracy_reached)
    std::fprintf(stderr,
                 "warning: shoot.accuracy %.3g not reached at %lld steps (error_estimate in shots.csv; "
                 "summary.json accuracy.max_estimate)\n",
                 cfg.shoot.accuracy, (long long)r.steps);
  return 0;
}

int do_sample(const std::string& config_path, const std::string& out, const std::string& backend, long threads,
              bool quiet, bool resume, const std::string& shard, const std::string& again, bool from_mpi = false) {
  refuse_other_commands_config(config_path, "sample");
  tether::SampleConfig cfg = tether::load_sample_config_file(config_path);
  if (!backend.empty()) cfg.run.backend = backend;
  set_shard(cfg.run, shard, from_mpi, 1, "chains");
#ifdef _OPENMP
  if (threads > 0) omp_set_num_threads(int(threads));
#endif
  cfg.run.backend = tether::resolve_backend(cfg.run.backend, cfg.sample.chains);
  tether::check_sample_config(cfg);
  if (!resume) tether::check_room_for_sample(cfg, out);

  const nlohmann::json identity = identity_of("sample", config_path, cfg.run);
  std::pair<std::string, nlohmann::json> resumed;  // state bytes, file records
  const auto held = open_output(out, resume, identity, resumed);
  tether::OutputFolder& folder = *held;
  tether::SampleFiles files(folder, cfg, resume ? &resumed.second : nullptr);
  tether::SampleOptions opt;
  opt.draws = &files;
  Progress progress(quiet, "chain-iterations");
  opt.progress = [&](double d, double t) { progress(d, t); };
  opt.checkpoint = checkpoint_into(folder, identity, files);
  opt.checkpoint_every = cfg.run.checkpoint_every;
  opt.resume = resume ? &resumed.first : nullptr;
  opt.stop = &stop_signal;
  tether::SampleResult r;
  {
    StopOnSignals signals;
    r = tether::sample(cfg, opt);
    if (r.stopped) return StopOnSignals::stopped(again);
  }
  if (cfg.run.shard_count > 1) {
    const auto [lo, hi] = tether::shard_ids(cfg.run, 1);
    files.finish_shard(r, shard_header(identity, lo, hi, r.wall_seconds));
    if (!quiet)
      std::printf("%s shard %d of %d: chains %lld to %lld in %.3g s\n  wrote %s (join all %d with `tether merge`)\n",
                  r.system.c_str(), cfg.run.shard_index, cfg.run.shard_count, (long long)lo, (long long)hi - 1,
                  r.wall_seconds, folder.dir().string().c_str(), cfg.run.shard_count);
    return 0;
  }
  const tether::DrawsDiagnostics diagnostics = files.finish(r);
  if (!quiet) {
    const double proposals = double(r.chains) * double(r.draws);
    using tether::HmcOutcome;
    const auto count = [&](HmcOutcome o) { return (long long)r.outcomes[std::size_t(o)]; };
    char outcomes[256];
    if (cfg.sample.dynamic)
      std::snprintf(outcomes, sizeof outcomes,
                    "mean acceptance %.3f, %.3g steps per draw; stopped: u_turn %lld, max_depth %lld, divergence "
                    "%lld, newton %lld, reversibility %lld",
                    r.mean_acceptance, proposals > 0 ? double(r.steps) / proposals : 0.0, count(HmcOutcome::u_turn),
                    count(HmcOutcome::max_depth), count(HmcOutcome::divergence), count(HmcOutcome::newton),
                    count(HmcOutcome::reversibility));
    else
      std::snprintf(outcomes, sizeof outcomes, "acceptance %.3f; rejected: metropolis %lld, newton %lld, reversibility %lld",
                    proposals > 0 ? double(count(HmcOutcome::accepted)) / proposals : 0.0,
                    count(HmcOutcome::metropolis), count(HmcOutcome::newton), count(HmcOutcome::reversibility));
    std::printf("%s / %s on %s: %lld chains x %lld draws (warm-up %lld, thin %lld) in %.3g s (%.3g chain-iterations/s)\n"
                "  %s\n"
                "  max R-hat %s, min bulk ESS %s over %lld chains (summary.json diagnostics)\n  wrote %s\n",
                r.system.c_str(), r.method.c_str(), r.backend.c_str(), (long long)r.chains, (long long)r.draws,
                (long long)r.warmup, (long long)r.thin, r.wall_seconds,
                r.sampling_seconds > 0 ? r.chain_iterations / r.sampling_seconds : 0.0, outcomes,
                statistic(diagnostics.max_rhat(), "fewer than 2 chains or 4 draws").c_str(),
                statistic(diagnostics.min_ess_bulk(), "fewer than 4 draws").c_str(),
                (long long)diagnostics.chains_used,
                folder.dir().string().c_str());
  }
  for (const std::string& warning : tether::sample_warnings(cfg, r, &diagnostics))
    std::fprintf(stderr, "warning: %s (summary.json)\n", warning.c_str());
  return 0;
}

int do_merge(const std::vector<std::string>& shards, const std::string& out, bool quiet) {
  std::vector<std::filesystem::path> dirs;
  for (const auto& d : shards) {
    std::error_code ec;
    if (std::filesystem::equivalent(d, out, ec))
      throw tether::ConfigError("--out", "is the shard folder " + d + ": merge into another folder");
    dirs.emplace_back(d);
  }
  tether::merge_shard_folders(out, dirs);
  if (!quiet) std::printf("merged %zu shards\n  wrote %s\n", dirs.size(), out.c_str());
  return 0;
}

// `mpirun -np K tether run|sample CONFIG --out DIR`: rank k runs shard k/K
// into DIR/.shards/k (on GPU k mod devices), and once every rank has
// finished, rank 0 merges them into DIR, as `tether merge` does, and removes
// DIR/.shards. A bad config is reported once, by rank 0; a rank's runtime
// error by that rank. Stopped ranks leave their checkpoints: the same mpirun
// with --resume goes on (finished shards are kept as they are). `one_shard`
// runs this rank's shard (do_run or do_sample) into a folder.
int do_mpi(const tether::cli::MpiWorld& world, const std::string& out, bool quiet, bool resume,
           const std::string& shard, const std::function<int(const std::string& dir, const std::string& shard)>& one_shard) {
  namespace fs = std::filesystem;
  const fs::path shards = fs::path(out) / ".shards", mine = shards / std::to_string(world.rank);
  const int worst = on_every_rank(world, [&] {
    if (!shard.empty()) throw tether::ConfigError("--shard", "is given by mpirun's rank: give mpirun -np K or --shard, not both");
    tether::use_cuda_device_of_rank(world.rank);
    const bool finished = fs::exists(mine / "shard.tether") && !fs::exists(mine / "checkpoint.tether");
    return resume && finished ? 0 : one_shard(mine.string(), std::to_string(world.rank) + "/" + std::to_string(world.size));
  });
  if (worst != 0) {  // (a stop's own message says how to go on)
    if (world.rank == 0 && worst != exit_bad_input && worst < 128)
      std::fprintf(stderr, "error: not every rank finished its shard; they are in %s (a stopped run goes on with "
                           "the same mpirun and --resume)\n",
                   shards.string().c_str());
    return worst;
  }
  if (world.rank != 0) return 0;
  std::vector<std::string> dirs;
  for (int k = 0; k < world.size; ++k) dirs.push_back((shards / std::to_string(k)).string());
  tether::merge_shard_folders(out, std::vector<fs::path>(dirs.begin(), dirs.end()));
  std::error_code ec;
  fs::remove_all(shards, ec);
  if (!quiet) std::printf("%d ranks, one shard each, merged\n  wrote %s\n", world.size, out.c_str());
  return 0;
}

// A config may be meant for another machine: say so, but it is not an error.
void note_backend_here(const std::string& backend) {
  try {
    tether::resolve_backend(backend);
  } catch (const tether::ConfigError& e) {
    std::printf("note: on this machine, %s\n", e.what());
  }
}

int do_validate(const std::string& path) {
  if (tether::is_sample_config_file(path)) {
    const tether::SampleConfig cfg = tether::load_sample_config_file(path);
    tether::check_sample_config(cfg);
    const std::string length = cfg.sample.dynamic ? "dynamic, at most 2^" + std::to_string(cfg.sample.max_depth) + " - 1"
                                                  : "L " + std::to_string(cfg.run.steps);
    std::printf("%s: ok (sample: %s, %s, %lld chains x %lld draws, warm-up %lld, thin %lld, %s steps of dt %g, "
                "backend %s)\n",
                path.c_str(), cfg.run.system_name.c_str(), method_label(cfg.run).c_str(), (long long)cfg.sample.chains,
                (long long)cfg.sample.draws, (long long)cfg.sample.warmup, (long long)cfg.sample.thin, length.c_str(),
                cfg.run.dt, cfg.run.backend.c_str());
    note_backend_here(cfg.run.backend);
    return 0;
  }
  if (tether::is_shoot_config_file(path)) {
    const tether::ShootConfig cfg = tether::load_shoot_config_file(path);
    char steps[96];
    if (cfg.shoot.accuracy > 0)
      std::snprintf(steps, sizeof steps, "steps chosen for accuracy %g from %lld", cfg.shoot.accuracy,
                    (long long)cfg.run.steps);
    else
      std::snprintf(steps, sizeof steps, "%lld steps", (long long)cfg.run.steps);
    std::printf("%s: ok (shoot: %s, %s, %zu targets x %lld guesses, T %g in %s%s, backend %s)\n", path.c_str(),
                cfg.run.system_name.c_str(), method_label(cfg.run).c_str(), cfg.shoot.targets.size(),
                (long long)cfg.shoot.guesses_per_target(), cfg.shoot.time, steps,
                cfg.shoot.nodes > 1 ? (", " + std::to_string(cfg.shoot.nodes) + " shooting nodes").c_str() : "",
                cfg.run.backend.c_str());
    note_backend_here(cfg.run.backend);
    return 0;
  }
  const tether::RunConfig cfg = tether::load_config_file(path);
  tether::check_config(cfg);
  const std::string method = method_label(cfg);
  std::printf("%s: ok (%s, %s, %lld trajectories x %lld steps of dt %g, backend %s)\n", path.c_str(),
              cfg.system_name.c_str(), method.c_str(), (long long)cfg.size, (long long)cfg.steps, cfg.dt,
              cfg.backend.c_str());
  note_backend_here(cfg.backend);
  return 0;
}

// `tether list`: the registry (systems, then methods by the family they
// pair with), and the backends of this build.
void do_list(bool as_json) {
  using tether::method_infos;
  using tether::system_infos;
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  const int devices = tether::cuda_device_count();
  if (as_json) {
    nlohmann::ordered_json j = tether::catalog_json();
    j["backends"] = {{{"name", "reference"}, {"built", true}},
                     {{"name", "cpu"}, {"built", true}, {"threads", threads}},
                     {{"name", "cuda"},
                      {"built", tether::cuda_built()},
                      {"compile_check_only", tether::cuda_compile_check_only()},
                      {"devices", devices}}};
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("systems:\n");
  for (std::size_t i = 0; i < system_infos().size(); ++i) {
    const auto& s = system_infos()[i];
    if (i > 0 && system_infos()[i - 1].name == s.name) continue;  // one line per name
    std::string head = tether::family_name(s.family);
    if (!s.variant.key.empty()) {
      std::string values;
      for (const auto& o : system_infos())
        if (o.name == s.name) values += (values.empty() ? "" : ", ") + o.variant.text();
      head += "; " + s.variant.key + " " + values;
      if (const std::string sizes = tether::sizes_compiled_at_first_use(s.name); !sizes.empty())
        head += " (any from " + sizes + ", the others compiled at first use)";
    }
    std::printf("  %-22s %s: %s  [%s]\n", s.name.c_str(), head.c_str(), s.description.c_str(), s.citation.c_str());
  }
  {
    const auto methods_of = [](tether::Family family) {
      std::string list;
      std::vector<std::string> names;
      for (int m : tether::declared_system_info("", family, 0, {}).methods)
        if (std::find(names.begin(), names.end(), method_infos()[std::size_t(m)].name) == names.end()) {
          names.push_back(method_infos()[std::size_t(m)].name);
          list += (list.size() ? ", " : "") + names.back();
        }
      return list;
    };
    std::string functions;
    for (const auto& f : tether::declared_functions()) functions += (functions.empty() ? "" : ", ") + f;
    std::printf("  %-22s yours, compiled when first used (README, \"Your own system\"): expressions of numbers, "
                "parameters, + - * / ^ and %s; holonomic: coordinates, mass, V(q), g(q) (%s); nonholonomic: a frame "
                "X_i(q) and V(q), H = 1/2 sum <p, X_i>^2 + V (%s); repeated structure written once: sizes, "
                "{\"for\": \"i = 1..N\", \"each\": ...} items, indexed names x[i] and sum(i = 1..N, ...)\n",
                "system.declare", functions.c_str(), methods_of(tether::Family::holonomic).c_str(),
                methods_of(tether::Family::nonholonomic).c_str());
  }
  for (const tether::Family family : tether::all_families) {
    std::printf("methods for %s systems:\n", tether::family_name(family));
    std::vector<std::string> names;  // the family's system names
    for (const auto& s : system_infos())
      if (s.family == family && std::find(names.begin(), names.end(), s.name) == names.end()) names.push_back(s.name);
    for (std::size_t m = 0; m < method_infos().size(); ++m) {
      std::vector<std::string> on;  // those it pairs with
      for (const auto& s : system_infos())
        if (s.family == family && std::find(s.methods.begin(), s.methods.end(), int(m)) != s.methods.end() &&
            std::find(on.begin(), on.end(), s.name) == on.end())
          on.push_back(s.name);
      if (on.empty()) continue;
      const auto& info = method_infos()[m];
      std::string head = info.variant.key.empty() ? "" : info.variant.label() + ", ";
      head += "order " + std::to_string(info.order);
      std::string only;
      if (on.size() < names.size()) {
        for (const auto& n : on) only += (only.empty() ? "" : ", ") + n;
        only = " (" + only + " only)";
      }
      if (!tether::method_compiled_in(int(m))) only += " (not in this build: compiled at first use)";
      std::printf("  %-22s %s%s: %s  [%s]\n", info.name.c_str(), head.c_str(), only.c_str(), info.description.c_str(),
                  info.citation.c_str());
    }
  }
  std::printf("backends:\n  %-22s cuda when a device is present and the ensemble has at least %lld trajectories or "
              "chains (%lld shots), else cpu (the default)\n",
              "auto", (long long)tether::auto_cuda_min_ensemble, (long long)tether::auto_cuda_min_shots);
  std::printf("  %-22s serial generic dense Newton on each method's residual\n", "reference");
  std::printf("  %-22s the GPU step code on %d threads\n", "cpu", threads);
  if (!tether::cuda_built())
    std::printf("  %-22s not built (no nvcc at configure time)\n", "cuda");
  else if (tether::cuda_compile_check_only())
    std::printf("  %-22s kernels compiled to check them only (TETHER_CUDA_COMPILE_CHECK=ON), not runnable\n", "cuda");
  else
    std::printf("  %-22s built; %d device(s) present\n", "cuda", devices);
  std::printf("(`tether list --json` gives each one's parameters: type, default, bounds, meaning)\n");
}

}  // namespace

int run_command(int argc, char** argv, const tether::cli::MpiWorld& world) {
  CLI::App app{"tether: ensembles of constrained mechanical trajectories, integrated by structure-preserving methods"};
  app.require_subcommand(1);

  std::string config, out, backend;
  long threads = 0, batch = 0;
  bool quiet = false;
  auto* run = app.add_subcommand("run", "integrate the ensemble a config describes");
  run->add_option("config", config, "config file (JSON)")->required();
  run->add_option("--out", out, "output folder")->required();
  run->add_option("--backend", backend, "auto, cpu, reference or cuda (overrides the config)");
  run->add_option("--threads", threads, "cpu threads (default: all cores)")->check(CLI::Range(1L, 1024L));
  run->add_option("--batch-size", batch, "trajectories per batch (overrides the config)")
      ->check(CLI::Range(1L, 1L << 30));
  run->add_flag("--quiet", quiet, "no progress or report on the terminal");
  bool resume = false;
  run->add_flag("--resume", resume, "go on from the checkpoint in --out (same config and options)");
  std::string shard;
  run->add_option("--shard", shard, "k/K: integrate only the k-th of K slices of the ensemble (join them with merge)");

  std::vector<std::string> merge_shards;
  std::string merge_out;
  bool merge_quiet = false;
  auto* merge = app.add_subcommand("merge", "join the K shard folders of one `tether run --shard k/K` into one run's output");
  merge->add_option("shards", merge_shards, "the shard folders, in any order")->required();
  merge->add_option("--out", merge_out, "output folder")->required();
  merge->add_flag("--quiet", merge_quiet, "no report on the terminal");

  std::string sconfig, sout, sbackend;
  long sthreads = 0;
  bool squiet = false, sresume = false;
  auto* shoot = app.add_subcommand("shoot", "solve q(0) = q0, q(T) = q1 for p0, for every target a config lists");
  shoot->add_option("config", sconfig, "shooting config (JSON)")->required();
  shoot->add_option("--out", sout, "output folder")->required();
  shoot->add_option("--backend", sbackend, "auto, cpu, reference or cuda (overrides the config)");
  shoot->add_option("--threads", sthreads, "cpu threads (default: all cores)")->check(CLI::Range(1L, 1024L));
  shoot->add_flag("--quiet", squiet, "no progress or report on the terminal");
  shoot->add_flag("--resume", sresume, "go on from the checkpoint in --out (same config and options)");

  std::string mconfig, mout, mbackend, mshard;
  long mthreads = 0;
  bool mquiet = false, mresume = false;
  auto* sample = app.add_subcommand("sample", "constrained Hamiltonian Monte Carlo: many chains on N = {g(q) = 0}");
  sample->add_option("config", mconfig, "sampling config (JSON)")->required();
  sample->add_option("--out", mout, "output folder")->required();
  sample->add_option("--backend", mbackend, "auto, cpu, reference or cuda (overrides the config)");
  sample->add_option("--threads", mthreads, "cpu threads (default: all cores)")->check(CLI::Range(1L, 1024L));
  sample->add_flag("--quiet", mquiet, "no progress or report on the terminal");
  sample->add_flag("--resume", mresume, "go on from the checkpoint in --out (same config and options)");
  sample->add_option("--shard", mshard, "k/K: run only the k-th of K slices of the chains (join them with merge)");

  std::string vconfig;
  auto* validate = app.add_subcommand("validate", "check a config and say what is wrong and where");
  validate->add_option("config", vconfig, "config file (JSON)")->required();

  bool list_json = false;
  auto* list = app.add_subcommand("list", "systems, methods and backends in this build, with their parameters");
  list->add_flag("--json", list_json, "one JSON document: every system and method with its parameter schema");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : exit_bad_input;
  }

  try {
    if ((*run && out.empty()) || (*merge && merge_out.empty()) || (*shoot && sout.empty()) || (*sample && mout.empty()))
      throw tether::ConfigError("--out", "is empty: give the folder to write into");
    if (*run && world.size > 1)
      return do_mpi(world, out, quiet, resume, shard, [&](const std::string& dir, const std::string& slice) {
        return do_run(config, dir, backend, threads, batch, true, resume, slice, resume_command(world, "run", config, out),
                      true);
      });
    if (*run)
      return do_run(config, out, backend, threads, batch, quiet, resume, shard, resume_command(world, "run", config, out));
    if (*sample && world.size > 1)
      return do_mpi(world, mout, mquiet, mresume, mshard, [&](const std::string& dir, const std::string& slice) {
        return do_sample(mconfig, dir, mbackend, mthreads, true, mresume, slice,
                         resume_command(world, "sample", mconfig, mout), true);
      });
    if (*sample)
      return do_sample(mconfig, mout, mbackend, mthreads, mquiet, mresume, mshard,
                       resume_command(world, "sample", mconfig, mout));
    if (*shoot) return do_shoot(sconfig, sout, sbackend, sthreads, squiet, sresume, world);
    if (world.size > 1 && world.rank > 0) return 0;  // validate, list and merge run once, on rank 0
    if (*merge) return do_merge(merge_shards, merge_out, merge_quiet);
    if (*validate) return do_validate(vconfig);
    if (*list) do_list(list_json);
    return 0;
  } catch (const tether::ConfigError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return exit_bad_input;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return exit_runtime_error;
  }
}

int main(int argc, char** argv) {
  const tether::cli::MpiWorld world = tether::cli::mpi_start(argc, argv);
  const int code = run_command(argc, argv, world);
  tether::cli::mpi_finish();
  if (tether::netcdf_file_left_broken()) {  // (its partial file is removed already; skip HDF5's clean-up at exit)
    std::fflush(nullptr);
    std::_Exit(code);
  }
  return code;
}

#include "tether/engine/output.hpp"

#include "config/resources.hpp"
#include "io/checksum.hpp"
#include "io/text_out.hpp"
#include "registry/catalog.hpp"
#include "tether/sampling/hmc.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace tether {

namespace fs = std::filesystem;

namespace {

// A statistic as summary.json holds it: null where it has no value (no data:
// NaN or infinite), never a number it does not have.
nlohmann::ordered_json statistic(double x) { return std::isfinite(x) ? nlohmann::ordered_json(x) : nlohmann::ordered_json(); }

void write_json(const fs::path& file, const nlohmann::ordered_json& j) {
  std::ofstream out(file, std::ios::binary);
  check_stream(out, file);
  out << j.dump(2) << '\n';
  out.close();
  check_stream(out, file);
}

}  // namespace

namespace {

// Every file a run, shoot or sample writes: removed together, so no file of
// an earlier run sits beside this run's summary.json.
// (A run shard's folder holds final.csv or final.bin, trajectories.bin and
// shard.tether; a sample shard's draws.bin and shard.tether.)
constexpr const char* result_files[] = {"summary.json",     "final.csv",      "timeseries.csv", "shots.csv",
                                        "geodesics.csv",    "draws.nc",       "results.nc",     "trajectories.csv",
                                        "final.bin",        "draws.bin",      "trajectories.bin", "timeseries.bin",
                                        "shard.tether"};
// The .partial files a checkpoint goes on from: kept when a run stops at one.
bool checkpoint_needs(const std::string& name) {
  return name == "final.csv" || name == "final.bin" || name == "trajectories.bin" || name == "draws.bin" ||
         name == "timeseries.csv" || name == "timeseries.bin";
}
const std::string checkpoint_file = "checkpoint.tether";

}  // namespace

OutputFolder::OutputFolder(const fs::path& dir, Start start) : dir_(dir) {
  if (dir_.empty()) throw ConfigError("--out", "is empty: give the folder to write into");
  std::error_code ec;
  for (fs::path p = fs::absolute(dir_, ec); !ec && !fs::exists(p, ec) && p != p.parent_path(); p = p.parent_path())
    created_top_ = p;  // the outermost folder this command makes
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_))
    throw std::runtime_error("cannot create output folder " + dir_.string() + (ec ? ": " + ec.message() : ""));
  take_lock();
  // Leftovers of a run that was killed before it committed, but for what a
  // checkpoint kept (Start).
  checkpointed_ = start == Start::resume || (start == Start::other && fs::exists(dir_ / checkpoint_file, ec));
  auto clear = [&](const char* name) {
    if (checkpointed_ && checkpoint_needs(name)) return;
    fs::remove(partial(name), ec);
    if (ec) throw std::runtime_error("cannot remove the stale " + partial(name).string() + ": " + ec.message());
  };
  for (const char* name : result_files) clear(name);
  fs::remove(partial(checkpoint_file), ec);  // a torn one
  if (!ec && start == Start::fresh_run) fs::remove(dir_ / checkpoint_file, ec);
  if (ec) throw std::runtime_error("cannot remove the stale checkpoint in " + dir_.string() + ": " + ec.message());
}

// flock on DIR/.tether.lock, opened without following a link (a link there
// is refused: tether writes no file that is not its own) and checked to be
// the file at that name once locked (a run that gives its lock up removes it).
void OutputFolder::take_lock() {
  const fs::path lock = dir_ / ".tether.lock";
  for (int attempt = 0; attempt < 100; ++attempt) {
    lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    created_lock_ = lock_fd_ >= 0;
    if (lock_fd_ < 0 && errno == EEXIST) lock_fd_ = ::open(lock.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (lock_fd_ < 0 && errno == ENOENT) continue;  // removed between the two opens
    if (lock_fd_ < 0 && errno == ELOOP)
      throw ConfigError("--out", lock.string() + " is a symbolic link: tether writes no file through one; remove "
                                                 "it, or give another --out");
    if (lock_fd_ < 0) throw std::runtime_error("cannot open " + lock.string() + ": " + std::strerror(errno));
    struct stat held {}, named {};
    if (::fstat(lock_fd_, &held) != 0 || !S_ISREG(held.st_mode)) {
      ::close(lock_fd_);
      lock_fd_ = -1;
      throw ConfigError("--out", lock.string() + " is not a regular file: remove it, or give another --out");
    }
    if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      const int why = errno;
      char holder[32] = {};
      const ssize_t n = ::pread(lock_fd_, holder, sizeof holder - 1, 0);
      ::close(lock_fd_);
      lock_fd_ = -1;
      if (why == EWOULDBLOCK)
        throw std::runtime_error("output folder " + dir_.string() + " is in use by another tether run" +
                                 (n > 0 ? " (process " + std::string(holder, std::size_t(n)) + ")" : std::string()) +
                                 ": wait for it to finish, or give another --out");
      throw std::runtime_error("cannot lock " + lock.string() + ": " + std::strerror(why));
    }
    if (::lstat(lock.c_str(), &named) == 0 && named.st_dev == held.st_dev && named.st_ino == held.st_ino) {
      const std::string pid = std::to_string(::getpid());
      // The holder's pid, for the message a second run prints (the lock itself is the flock).
      if (::ftruncate(lock_fd_, 0) == 0) (void)!::pwrite(lock_fd_, pid.data(), pid.size(), 0);
      return;
    }
    ::close(lock_fd_);  // the lock we hold was given up and removed by its last holder: take the new one
    lock_fd_ = -1;
  }
  throw std::runtime_error("cannot lock " + lock.string() + ": it keeps being replaced");
}

OutputFolder::~OutputFolder() {
  std::error_code ec;
  // An uncommitted run leaves nothing but what its checkpoint needs.
  for (const char* name : result_files)
    if (!(checkpointed_ && checkpoint_needs(name))) fs::remove(partial(name), ec);
  fs::remove(partial(checkpoint_file), ec);
  // A command that left nothing (refused, or failed before its first commit
  // or checkpoint) leaves the folder as it found it: no lock it made, no
  // folder it made.
  if (lock_fd_ >= 0 && !retired_ && !checkpointed_ && created_lock_) {
    fs::remove(dir_ / ".tether.lock", ec);
    if (!created_top_.empty())  // each only if empty
      for (fs::path p = fs::absolute(dir_, ec); !ec && fs::remove(p, ec) && p != created_top_;) p = p.parent_path();
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the lock
}

namespace {

// Writes all of `bytes` to `fd`, or says why not.
void write_all(int fd, const std::string& bytes, const fs::path& file) {
  for (std::size_t at = 0; at < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + at, bytes.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("cannot write " + file.string() + ": " + std::strerror(errno));
    at += std::size_t(n);
  }
}

}  // namespace

void OutputFolder::write_checkpoint(const nlohmann::json& header, const std::string& state) {
  const fs::path tmp = partial(checkpoint_file), file = dir_ / checkpoint_file;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + tmp.string() + ": " + std::strerror(errno));
  try {
    write_all(fd, sealed(header.dump() + "\n" + state), tmp);
    if (::fsync(fd) != 0) throw std::runtime_error("cannot write " + tmp.string() + ": " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  std::error_code ec;
  fs::rename(tmp, file, ec);
  if (ec) throw std::runtime_error("cannot rename " + tmp.string() + ": " + ec.message());
  const int dir_fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {  // the rename itself on disk
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  checkpointed_ = true;
}

OutputFolder::Checkpoint OutputFolder::read_checkpoint() const {
  const fs::path file = dir_ / checkpoint_file;
  Checkpoint ck;
  switch (read_sealed_file(file, checkpoint_format, ck.header, ck.state)) {
    case SealedRead::ok:
      return ck;
    case SealedRead::missing:
      throw std::runtime_error("cannot resume: " + dir_.string() + " holds no checkpoint (" + checkpoint_file + ")");
    case SealedRead::other_format:
      throw std::runtime_error("cannot resume: " + file.string() + " is not a checkpoint of this version of tether: "
                               "run afresh, without --resume");
    case SealedRead::damaged:
      break;
  }
  throw std::runtime_error("cannot resume: " + file.string() + " is damaged (its bytes do not have the CRC-32 it was "
                           "sealed with): run afresh, without --resume");
}

void OutputFolder::commit(const std::string& name) {
  std::error_code ec;
  if (!retired_) {
    for (const char* old : result_files) {
      fs::remove(dir_ / old, ec);
      if (ec) throw std::runtime_error("cannot remove the old " + (dir_ / old).string() + ": " + ec.message());
    }
    fs::remove(dir_ / checkpoint_file, ec);  // the run it would resume is finished
    retired_ = true;
    checkpointed_ = false;
  }
  fs::rename(partial(name), dir_ / name, ec);
  if (ec) throw std::runtime_error("cannot rename " + partial(name).string() + ": " + ec.message());
}

// Bytes per CSV number as written (shortest round trip: at most 24 with its comma).
constexpr double csv_number_bytes = 24;
// An id or step with its comma, a status name with its comma and newline.
constexpr double csv_integer_bytes = 21, csv_status_bytes = 22;
// netCDF-4's own: its header, HDF5's object headers and chunk indexes.
constexpr double netcdf_metadata_bytes = 1 << 20;

void check_room_for_run(const RunConfig& c, const fs::path& out) {
  // The peak, at the end: a side file and the file made from it lie side by side.
  const double dof = system_dof(c);
  const bool csv = c.output_format == "csv", shard = c.shard_count > 1;
  const double record = 4 * 8 + (3 + 2 * dof) * 8;  // a binary side file's (final.bin, trajectories.bin)
  const double size = double(c.size), chunked = std::ceil(size / 4096) * 4096;  // results.nc's q and p
  double finals = 0;
  if (c.write_final_states)
    finals = csv ? size * (csv_integer_bytes + 2 * dof * csv_number_bytes + csv_status_bytes)
                 : size * record + (shard ? 0 : chunked * 16 * dof + size * (8 + 1 + 8 + 3 * 8));
  const double rows = double(timeseries_rows(c));
  const double series = shard ? 0 : rows * (csv ? 7 * csv_number_bytes : 7 * 8 + 7 * 8);
  const double snapshots = double(c.track_ids.size()) * double(snapshots_per_trajectory(c));
  const double tracked =
      snapshots * (record + (shard ? 0
                                   : csv ? 2 * csv_integer_bytes + (2 * dof + 1) * csv_number_bytes + csv_status_bytes
                                         : 16 * dof + 1));
  const double bytes = finals + series + tracked + (csv ? 0 : netcdf_metadata_bytes);
  if (tracked > finals && tracked > series)
    refuse_beyond_disk(out, "output.trajectories", bytes,
                       std::to_string(std::int64_t(snapshots)) + " snapshots of followed trajectories",
                       "follow fewer trajectories, or raise output.trajectories.every");
  if (series > finals)
    refuse_beyond_disk(out, "output.every", bytes, std::to_string(std::int64_t(rows)) + " timeseries rows",
                       "raise output.every");
  refuse_beyond_disk(out, "ensemble.size", bytes, "final states of " + std::to_string(c.size) + " trajectories",
                     "fewer trajectories, or \"output\": {\"final_states\": false}");
}

void check_room_for_shoot(const ShootConfig& c, const fs::path& out) {
  const int dof = system_dof(c.run);
  const double targets = double(c.shoot.targets.size());
  const double shots = targets * ((3 * dof + 12) * csv_number_bytes);
  const double points = c.shoot.geodesic_every > 0 ? double(c.run.steps / c.shoot.geodesic_every + 1) : 0;
  const double geodesics = targets * points * ((dof + 2) * csv_number_bytes);
  if (geodesics > shots)
    refuse_beyond_disk(out, "output.geodesics.every", shots + geodesics, "geodesics of " + std::to_string(c.shoot.targets.size()) + " targets",
                       "sample them less often");
  refuse_beyond_disk(out, "shoot.targets", shots + geodesics, std::to_string(c.shoot.targets.size()) + " targets",
                     "fewer targets");
}

void check_room_for_sample(const SampleConfig& c, const fs::path& out) {
  // A shard keeps draws.bin (its slice); a whole sample has draws.bin and draws.nc side by side at the end.
  const auto [lo, hi] = shard_ids(c.run, 1);
  const int dof = system_dof(c.run);
  double bytes = double(draws_side_file_bytes(c.sample, hi - lo, c.run.batch_size, dof));
  if (c.run.shard_count <= 1) bytes += double(draws_file_bytes(c.sample, dof));
  const bool chains = c.sample.chains > c.sample.draws;  // the count to lower
  refuse_beyond_disk(out, chains ? "sample.chains" : "sample.draws", bytes, "chains x draws (draws.bin, then draws.nc)",
                     chains ? "fewer chains (or shards of them on other machines)" : "fewer draws, or thin");
}

void check_memory_for_draws(const SampleConfig& c) {
  refuse_beyond_memory(c.sample.chains > c.sample.draws ? "sample.chains" : "sample.draws",
                       double(draws_file_bytes(c.sample, system_dof(c.run))), "chains x draws in memory",
                       "lower sample.chains or sample.draws, or raise sample.thin");
}

void write_summary(const fs::path& file, const RunConfig& c, const RunResult& r) { write_json(file, run_summary(c, r)); }

nlohmann::ordered_json run_summary(const RunConfig& c, const RunResult& r) {
  nlohmann::ordered_json j;
  j["system"] = r.system;
  j["family"] = r.family;
  j["method"] = r.method;
  if (r.stages > 0) j["stages"] = r.stages;
  const MethodInfo& method = method_infos()[std::size_t(c.method)];
  if (!method.variant.key.empty() && r.stages == 0)  // the stage count is reported above
    j["method_parameters"][method.variant.key] = method.variant.value;
  for (const auto& [key, value] : c.method_parameters.items()) j["method_parameters"][key] = value;
  j["backend"] = r.backend;
  j["precision"] = c.precision;
  j["trajectories"] = r.trajectories;
  j["steps"] = r.steps;
  j["dt"] = r.dt;
  j["max_constraint_violation"] = r.max_constraint_violation;
  j["max_velocity_constraint_violation"] = r.max_velocity_constraint_violation;
  j["max_relative_energy_error"] = r.max_relative_energy_error;
  j["newton_iterations"] = {{"mean", statistic(r.newton_mean)}, {"max", r.newton_max}};
  j["failed_trajectories"] = r.failed;
  auto& f = j["failures"] = nlohmann::ordered_json::array();
  for (const auto& x : r.failures) f.push_back({{"id", x.id}, {"step", x.step}, {"reason", status_name(x.reason)}});
  j["failures_listed"] = r.failures.size();
  j["initial_projection"] = {{"projected_states", r.projected_states},
                             {"max_distance", r.max_projection_distance}};
  j["wall_seconds"] = r.wall_seconds;
  j["integration_seconds"] = r.integration_seconds;
  const double work = double(r.trajectory_steps);
  j["trajectory_steps_per_second"] = statistic(r.integration_seconds > 0 ? work / r.integration_seconds : NAN);
  j["energy_error_definition"] =
      r.family == "nonholonomic"
          ? "|H - H0| / (|H0 - V0| + |V0|) per trajectory, H = H(q, p, lambda~(q, p))"
          : "|H - H0| / (K0 + |V0| + E_sys) per trajectory, E_sys the system's characteristic energy";
  j["constraint_definition"] =
      r.family == "nonholonomic"
          ? "position: max |h(q)| (0 without holonomic constraints); velocity: max_i |g_i(q) . qdot| and |Dh(q) qdot| "
            "with qdot = H_p (0 for canonical systems)"
          : "position: max |g(q)|; velocity: max |G(q) M^-1 p|";
  return j;
}

namespace {

// No value (NaN: not converged, no conjugate point; inf: no residual, the
// flow failed) as an empty CSV cell.
void append_cell(std::string& s, Real x) {
  s += ',';
  if (std::isfinite(x)) append_number(s, x);
}

}  // namespace

void write_shots(const fs::path& file, const ShootResult& r) {
  std::ofstream out(file, std::ios::binary);
  check_stream(out, file);
  const std::size_t n = r.targets.empty() ? 0 : r.targets.front().target.size();
  std::string line = "target";
  for (std::size_t c = 0; c < n; ++c) line += ",q1_" + std::to_string(c);
  line += ",converged,status,iterations,residual";
  for (std::size_t c = 0; c < n; ++c) line += ",p0_" + std::to_string(c);
  line += ",energy,length,error_estimate";
  for (std::size_t c = 0; c < n; ++c) line += ",pT_" + std::to_string(c);
  line += ",conjugate_point,conjugate_time,second_length,near_cut_locus,attempts,converged_attempts,round\n";
  out << line;
  for (std::size_t t = 0; t < r.targets.size(); ++t) {
    const TargetResult& k = r.targets[t];
    const bool ok = k.status == ShotStatus::converged;
    line = std::to_string(t);
    for (Real x : k.target) append_cell(line, x);
    line += ok ? ",1," : ",0,";
    line += shot_status_name(k.status);
    line += ',' + std::to_string(k.iterations);
    append_cell(line, k.residual);
    for (Real x : k.p0) append_cell(line, x);
    append_cell(line, k.energy);
    append_cell(line, k.length);
    append_cell(line, k.error_estimate);
    for (Real x : k.pT) append_cell(line, x);
    line += ok ? (k.conjugate_point(r.time()) ? ",1" : ",0") : ",";
    append_cell(line, k.conjugate_time);
    append_cell(line, k.second_length);
    line += ok ? (k.near_cut_locus ? ",1" : ",0") : ",";
    line += ',' + std::to_string(k.attempts) + ',' + std::to_string(k.converged_attempts) + ',' + std::to_string(k.round);
    line += '\n';
    out << line;
  }
  out.close();
  check_stream(out, file);
}

void write_geodesics(const fs::path& file, const ShootResult& r) {
  std::ofstream out(file, std::ios::binary);
  check_stream(out, file);
  const std::size_t n = r.targets.empty() ? 0 : r.targets.front().target.size();
  std::string line = "target,t";
  for (std::size_t c = 0; c < n; ++c) line += ",q" + std::to_string(c);
  out << line << '\n';
  for (const Geodesic& g : r.geodesics)
    for (std::size_t k = 0; k < g.times.size(); ++k) {
      line = std::to_string(g.target);
      append_cell(line, g.times[k]);
      for (Real x : g.q[k]) append_cell(line, x);
      line += '\n';
      out << line;
    }
  out.close();
  check_stream(out, file);
}

void write_shoot_summary(const fs::path& file, const ShootConfig& c, const ShootResult& r) {
  write_json(file, shoot_summary(c, r));
}

nlohmann::ordered_json shoot_summary(const ShootConfig& c, const ShootResult& r) {
  nlohmann::ordered_json j;
  j["command"] = "shoot";
  j["system"] = r.system;
  j["method"] = r.method;
  if (r.stages > 0) j["stages"] = r.stages;
  j["backend"] = r.backend;
  j["q0"] = c.shoot.q0;
  j["time"] = c.shoot.time;
  j["steps"] = r.steps;
  j["dt"] = r.dt;
  j["targets_kind"] = c.shoot.targets_kind;
  j["targets"] = r.targets.size();
  j["guesses_per_target"] = c.shoot.guesses_per_target();
  j["nodes"] = c.shoot.nodes;
  std::int64_t converged = 0, conjugate = 0, near_cut = 0;
  std::vector<Real> res_ok;
  Real worst_left = NAN, best_left = NAN;  // over the finite residuals of targets not converged
  nlohmann::ordered_json by_status;
  for (int s = 0; s < shot_status_count; ++s) by_status[shot_status_name(ShotStatus(s))] = 0;
  std::uint64_t iterations = 0;
  for (const auto& k : r.targets) {
    by_status[shot_status_name(k.status)] = by_status[shot_status_name(k.status)].get<std::int64_t>() + 1;
    if (k.status == ShotStatus::converged) {
      ++converged;
      res_ok.push_back(k.residual);
      iterations += std::uint64_t(k.iterations);
      if (k.conjugate_point(r.time())) ++conjugate;
      if (k.near_cut_locus) ++near_cut;
    } else if (std::isfinite(k.residual)) {
      worst_left = std::fmax(worst_left, k.residual);  // (fmax and fmin skip the NaN they start from)
      best_left = std::fmin(best_left, k.residual);
    }
  }
  std::sort(res_ok.begin(), res_ok.end());
  j["converged"] = converged;
  j["not_converged"] = std::int64_t(r.targets.size()) - converged;
  j["by_status"] = by_status;
  if (res_ok.empty())  // nothing converged: no residual to report, not a residual of 0
    j["converged_residual"] = {{"max", nullptr}, {"median", nullptr}};
  else
    j["converged_residual"] = {{"max", res_ok.back()}, {"median", res_ok[res_ok.size() / 2]}};
  // (null where every target converged, or none left a finite residual)
  j["not_converged_residual"] = {{"min", statistic(best_left)}, {"max", statistic(worst_left)}};
  j["conjugate_point_crossed"] = conjugate;
  j["near_cut_locus"] = near_cut;
  j["cut_locus_margin"] = c.shoot.cut_locus_margin;
  if (c.shoot.accuracy > 0) {
    Real worst = NAN;  // none: no converged target has an estimate
    for (const auto& k : r.targets)
      if (k.status == ShotStatus::converged && !std::isnan(k.error_estimate))
        worst = std::fmax(worst, k.error_estimate);
    j["accuracy"] = {{"requested", c.shoot.accuracy},
                     {"reached", r.accuracy_reached},
                     {"steps", r.steps},
                     {"passes", r.passes},
                     {"max_estimate", statistic(worst)},
                     {"definition", "|q_h(T) - q(T)| / |q1 - q0| from the kept p0, estimated by Richardson "
                                    "extrapolation on the step count: |q_h - q_(h/2)| / (1 - 2^-order)"}};
  }
  j["newton"] = {{"tolerance", c.shoot.tolerance},
                 {"max_iterations", c.shoot.max_iterations},
                 {"line_search", c.shoot.line_search},
                 {"max_backtracks", c.shoot.max_backtracks},
                 {"stall_iterations", c.shoot.stall_iterations},
                 {"mean_iterations_converged", statistic(converged > 0 ? double(iterations) / double(converged) : NAN)}};
  j["continuation"] = {{"rounds", c.shoot.continuation_rounds},
                       {"substeps", c.shoot.continuation_substeps},
                       {"rounds_run", r.continuation_rounds_run}};
  j["shots"] = r.shots;
  j["shooting_iterations"] = r.shooting_iterations;
  j["wall_seconds"] = r.wall_seconds;
  j["shooting_seconds"] = r.shooting_seconds;
  j["shots_per_second"] = statistic(r.shooting_seconds > 0 ? double(r.shots) / r.shooting_seconds : NAN);
  j["residual_definition"] = c.shoot.nodes > 1 ? "the Euclidean norm of every arc's matching residual (q, p) and "
                                                  "q(T) - q1 of the last arc (multiple shooting)"
                                                : "|q(T) - q1| (Euclidean) of the discrete flow from (q0, p0)";
  j["length_definition"] = "trapezoidal sum over the steps of sqrt(2 (H - V)) dt: the sub-Riemannian length when V = 0";
  j["conjugate_definition"] =
      "det dq(t)/dp0 (the exact derivative of the discrete flow) changes sign or vanishes at some 0 < t <= T; "
      "conjugate_time is the first such t, searched up to (1 + cut_locus_margin) T";
  j["pT_definition"] =
      "p(T) of the kept geodesic: the gradient of d^2 / (2T) in the target where the distance d is smooth, "
      "so the length's gradient is p(T) / sqrt(2 H) (V = 0)";
  j["near_cut_locus_definition"] =
      "converged, and a conjugate point by (1 + cut_locus_margin) T or a distinct converged geodesic (another p0) "
      "at most (1 + cut_locus_margin) times as long: the distance may not be smooth there";
  return j;
}

void write_sample_summary(const fs::path& file, const SampleConfig& c, const SampleResult& r,
                          const DrawsDiagnostics& d) {
  write_json(file, sample_summary(c, r, &d));
}

namespace {

// low_energy_bfmi as summary.json's words give it.
std::string low_energy_bfmi_text() {
  char text[16];
  std::snprintf(text, sizeof text, "%g", low_energy_bfmi);
  return text;
}

}  // namespace

std::vector<std::string> sample_warnings(const SampleConfig& c, const SampleResult& r,
                                         const DrawsDiagnostics* diagnostics) {
  const SampleSpec& s = c.sample;
  std::vector<std::string> warnings;
  const auto of_draws = [&](std::int64_t n) {
    return std::to_string(n) + " of " + std::to_string(r.chains * r.draws) + " stored draws";
  };
  // (A failed solve is a rejection that keeps the sampler exact, counted in rejected/stopped, not a warning.)
  if (const std::int64_t diverged = r.outcomes[std::size_t(HmcOutcome::divergence)]; diverged > 0)
    warnings.push_back(of_draws(diverged) + " came from trajectories that diverged (an energy error beyond "
                       "max_energy_error kT, Stan's divergent transitions); a smaller step (a higher "
                       "sample.target_acceptance) or a metric closer to the target's scales avoids them");
  if (s.dynamic && r.outcomes[std::size_t(HmcOutcome::max_depth)] > 0)
    warnings.push_back(of_draws(r.outcomes[std::size_t(HmcOutcome::max_depth)]) + " came from trajectories cut at " +
                       "sample.max_depth " + std::to_string(s.max_depth) + " before they turned back: raise "
                       "max_depth, or adapt a metric (sample.metric diag or dense)");
  if (r.metric_fallbacks > 0)
    warnings.push_back(std::to_string(r.metric_fallbacks) + " warm-up windows estimated a metric that was not positive "
                       "definite; those chains kept the metric they had (metric_fallbacks)");
  if (diagnostics != nullptr && diagnostics->max_rhat() > 1.01) {  // VGSCB21's threshold
    char rhat[32];
    std::snprintf(rhat, sizeof rhat, "%.4g", diagnostics->max_rhat());
    warnings.push_back("max R-hat " + std::string(rhat) + " is above 1.01: the chains disagree; a "
                       "longer warm-up or more draws let them mix, and a target whose density does not integrate "
                       "(an improper one) never does");
  }
  if (diagnostics != nullptr && diagnostics->low_energy_bfmi_chains() > 0) {  // Stan's and ArviZ's threshold
    char least[32];
    std::snprintf(least, sizeof least, "%.3g", diagnostics->min_energy_bfmi());
    warnings.push_back(std::to_string(diagnostics->low_energy_bfmi_chains()) + " of " +
                       std::to_string(diagnostics->chains_used) + " chains diagnosed have an E-BFMI below " +
                       low_energy_bfmi_text() + " (the least " + least + "): resampling the momentum moves their "
                       "energy little against the spread of energies they visit, so they explore slowly; a "
                       "heavy-tailed target, a metric far from its scales or (static) a small sample.refresh_angle "
                       "causes it");
  }
  return warnings;
}

nlohmann::ordered_json sample_summary(const SampleConfig& c, const SampleResult& r, const DrawsDiagnostics* diagnostics) {
  const SampleSpec& s = c.sample;
  nlohmann::ordered_json j;
  j["command"] = "sample";
  j["system"] = r.system;
  j["method"] = r.method;
  j["backend"] = r.backend;
  j["chains"] = r.chains;
  j["draws"] = r.draws;
  j["warmup"] = r.warmup;
  j["thin"] = r.thin;
  j["temperature"] = s.temperature;
  j["algorithm"] = s.dynamic ? "dynamic" : "static";
  j["metric"] = metric_name(s.metric);
  if (s.metric == MetricKind::diag || s.metric == MetricKind::dense) {
    j["metric_fallbacks"] = r.metric_fallbacks;
    j["metric_scales"] = {{"min", r.metric_scale_min}, {"max", r.metric_scale_max}};
    j["metric_definition"] =
        "the mass matrix M = Sigma^-1, Sigma estimated per chain in Stan's warm-up windows (75, 25 doubling, 50 "
        "iterations) and regularised as Stan's; metric_fallbacks counts window ends (over all chains) whose estimate "
        "was not positive definite, where the chain kept the metric it had; metric_scales are sqrt(Sigma_cc) after "
        "warm-up, coordinate by coordinate, least and greatest over the chains (draws.nc's sample_stats/inverse_metric "
        "holds each chain's Sigma). The chains sample V + kT/2 [log det(G "
        "M^-1 G^T) - log det(G M0^-1 G^T)] so that the target stays exp(-V/kT) on the system's own measure";
  }
  if (s.dynamic) {
    j["max_depth"] = s.max_depth;
    j["max_energy_error"] = s.max_energy_error;
  } else {
    j["steps"] = c.run.steps;
  }
  j["dt"] = c.run.dt;
  j["step_size_after_warmup"] = {{"min", r.step_size_min}, {"max", r.step_size_max}};
  j["jitter"] = s.dynamic ? nlohmann::ordered_json{{"dt", s.step_jitter}}
                          : nlohmann::ordered_json{{"dt", s.step_jitter}, {"steps", s.steps_jitter}};
  if (!s.dynamic) j["refresh_angle"] = s.refresh_angle;
  j["target_acceptance"] = s.target_acceptance;
  j["reversibility_tolerance"] = s.reversibility_tolerance;
  j["seed"] = c.run.seed;
  const double proposals = double(r.chains) * double(r.draws);
  j["mean_steps"] = statistic(proposals > 0 ? double(r.steps) / proposals : NAN);
  auto counts = [&](std::initializer_list<HmcOutcome> which) {
    nlohmann::ordered_json out;
    for (HmcOutcome o : which) out[hmc_outcome_name(o)] = r.outcomes[std::size_t(o)];
    return out;
  };
  if (s.dynamic) {
    j["acceptance"] = {{"mean_probability", statistic(r.mean_acceptance)}};
    j["stopped"] = counts({HmcOutcome::u_turn, HmcOutcome::max_depth, HmcOutcome::divergence, HmcOutcome::newton,
                           HmcOutcome::reversibility});
    j["stopped_definition"] = "stored draws by why their trajectory stopped growing: u_turn (the no-U-turn "
                              "criterion), max_depth (2^max_depth - 1 steps), divergence (an energy error beyond "
                              "max_energy_error kT), newton (a step's solve failed), reversibility (a step from "
                              "(q', -p') did not return to q); the last three drop the subtree that met them";
  } else {
    j["acceptance"] = {{"rate", statistic(proposals > 0 ? double(r.outcomes[0]) / proposals : NAN)},
                       {"mean_probability", statistic(r.mean_acceptance)}};
    j["rejected"] = counts({HmcOutcome::metropolis, HmcOutcome::newton, HmcOutcome::reversibility});
    j["rejected_definition"] = "stored draws whose proposal was rejected: metropolis (the Metropolis test), newton "
                               "(a step's solve failed, forwards or backwards), reversibility (the backward "
                               "integration from (q', -p') did not return to q)";
  }
  j["draws_file"] = "draws.nc";
  if (diagnostics != nullptr) {  // of the written file (a caller holding the draws in memory has its own)
    const DrawsDiagnostics& d = *diagnostics;
    // NaN (fewer than 4 draws, or one chain for R-hat) is written as null.
    auto one = [&](const ChainDiagnostics& x) {
      return nlohmann::ordered_json{{"mean", statistic(x.mean)}, {"sd", statistic(x.sd)}, {"rhat", statistic(x.rhat)},
                                    {"ess_bulk", statistic(x.ess_bulk)}, {"ess_tail", statistic(x.ess_tail)}};
    };
    nlohmann::ordered_json q = nlohmann::ordered_json::array();
    for (const auto& x : d.q) q.push_back(one(x));
    const double scale = d.chains_used > 0 ? double(r.chains) / double(d.chains_used) : 0.0;
    j["diagnostics"] = {
        {"chains_used", d.chains_used},
        {"q", q},
        {"potential", one(d.potential)},
        {"max_rhat", statistic(d.max_rhat())},
        {"min_ess_bulk", statistic(d.min_ess_bulk())},
        {"min_ess_tail", statistic(d.min_ess_tail())},
        {"min_ess_bulk_per_second", statistic(r.sampling_seconds > 0 ? d.min_ess_bulk() * scale / r.sampling_seconds : NAN)},
        {"min_energy_bfmi", statistic(d.min_energy_bfmi())},
        {"low_energy_bfmi_chains", d.low_energy_bfmi_chains()},
        {"definition", "rank-normalised split R-hat and bulk/tail ESS (VGSCB21), as ArviZ computes them, over the "
                       "first chains_used chains; ESS per second scales the minimum bulk ESS of q and V to all "
                       "chains (they are independent) and divides by the sampling seconds; E-BFMI (Bet16, ArviZ's "
                       "bfmi) of each of those chains from sample_stats/energy: the least, and how many are below " +
                           low_energy_bfmi_text()}};
  }
  j["warnings"] = sample_warnings(c, r, diagnostics);
  j["wall_seconds"] = r.wall_seconds;
  j["sampling_seconds"] = r.sampling_seconds;
  j["chain_iterations"] = r.chain_iterations;
  j["chain_iterations_per_second"] = statistic(r.sampling_seconds > 0 ? r.chain_iterations / r.sampling_seconds : NAN);
  return j;
}

}  // namespace tether

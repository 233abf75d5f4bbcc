// The files of `tether run`: final.csv, timeseries.csv, trajectories.csv or
// results.nc, and the binary side files they are made from.
#include <fcntl.h>
#include <netcdf.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <string_view>
#include <ctime>
#include <numeric>
#include <sstream>

#include "io/netcdf_check.hpp"
#include "io/side_files.hpp"
#include "io/text_out.hpp"
#include "tether/engine/config_error.hpp"
#include "tether/engine/output.hpp"

namespace tether {

namespace fs = std::filesystem;

// The file's written bytes on disk (fsync on any descriptor of the file
// flushes them all): a checkpoint must not count bytes a crash could lose.
void sync_file(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int why = errno;
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot write " + file.string() + " to disk: " + std::strerror(why));
  }
  ::close(fd);
}

namespace {

// The files a checkpoint or a shard may record: no other name is read, let
// alone truncated (a forged record cannot point outside the folder).
bool recordable(const std::string& name) {
  for (const char* known : {"final.csv", "final.bin", "trajectories.bin", "timeseries.csv", "timeseries.bin", "draws.bin"})
    if (name == known) return true;
  return false;
}

}  // namespace

VerifiedFiles verify_checkpoint_files(const OutputFolder& folder, const nlohmann::json& records) {
  VerifiedFiles verified;
  if (!records.is_object()) return verified;
  for (const auto& [name, record] : records.items()) {
    if (!recordable(name))
      throw std::runtime_error("cannot resume: the checkpoint in " + folder.dir().string() + " records a file \"" +
                               name.substr(0, 40) + "\" that tether does not write: run afresh, without --resume");
    const fs::path file = folder.partial(name);
    std::error_code ec;
    if (!fs::exists(file, ec))
      throw std::runtime_error("cannot resume: " + file.string() + " is missing (run afresh, without --resume)");
    std::uint32_t crc = 0;
    if (!matches_record(file, record, crc))
      throw std::runtime_error("cannot resume: " + file.string() + " is damaged (its bytes up to the checkpoint do "
                               "not have the CRC-32 the checkpoint recorded): run afresh, without --resume");
    verified[name] = {record["bytes"].get<std::uintmax_t>(), crc};
  }
  return verified;
}

AppendFile::AppendFile(const fs::path& file, const VerifiedFiles* resume, const std::string& key)
    : file_(file), resumed_(resume != nullptr) {
  if (!resumed_) {
    out_.open(file_, std::ios::binary | std::ios::trunc);
    check_stream(out_, file_);
    return;
  }
  const auto from = resume->find(key);
  if (from == resume->end())
    throw std::runtime_error("cannot resume: the checkpoint records no " + key + " (run afresh, without --resume)");
  std::error_code ec;
  fs::resize_file(file_, from->second.bytes, ec);
  if (ec) throw std::runtime_error("cannot resume " + file_.string() + ": " + ec.message());
  crc_ = Crc32(from->second.crc);
  out_.open(file_, std::ios::binary | std::ios::app);
  check_stream(out_, file_);
}

void AppendFile::append(const char* data, std::size_t n) {
  out_.write(data, std::streamsize(n));
  check_stream(out_, file_);
  crc_.add(data, n);
}

nlohmann::json AppendFile::record() {
  out_.flush();
  check_stream(out_, file_);
  const auto bytes = std::uintmax_t(out_.tellp());
  sync_file(file_);
  return file_record(bytes, crc_.value());
}

void AppendFile::close() {
  out_.close();
  check_stream(out_, file_);
}

namespace {

// Appends the bytes of `count` values to `buf`.
template <class T>
void append_bytes(std::string& buf, const T* values, std::size_t count) {
  buf.append(reinterpret_cast<const char*>(values), sizeof(T) * count);
}

// Calls f(bytes) for every `size`-byte record of a side file, in file order, reading a block at a time.
template <class F>
void read_fixed_records(const fs::path& file, std::size_t size, F&& f) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file.string() + ": " + std::strerror(errno));
  std::vector<char> block(size * 4096);
  while (in) {
    in.read(block.data(), std::streamsize(block.size()));
    const std::size_t got = std::size_t(in.gcount());
    if (got % size != 0) throw std::runtime_error(file.string() + " ends in the middle of a record");
    for (const char* at = block.data(); at < block.data() + got; at += size) f(at);
  }
}

// A side file of fixed-size binary records, one per TrajectoryRecord:
// id, step, failed_step, status, the three errors, q, p.
class RecordFile : public AppendFile {
 public:
  RecordFile(const fs::path& file, int dof, const VerifiedFiles* resume, const char* key)
      : AppendFile(file, resume, key), dof_(dof) {}
  static std::size_t record_bytes(int dof) { return sizeof(std::int64_t) * 4 + sizeof(Real) * (3 + 2 * std::size_t(dof)); }

  void put(const TrajectoryRecord& r) {
    buf_.clear();
    const std::int64_t head[4] = {r.id, r.step, r.failed_step, std::int64_t(r.status)};
    const Real errors[3] = {r.energy_error, r.constraint_violation, r.velocity_violation};
    append_bytes(buf_, head, 4);
    append_bytes(buf_, errors, 3);
    append_bytes(buf_, r.q.data(), std::size_t(dof_));
    append_bytes(buf_, r.p.data(), std::size_t(dof_));
    append(buf_);
  }

 private:
  int dof_;
  std::string buf_;
};

// Calls f(record) for every record of a side file, in file order.
template <class F>
void read_records(const fs::path& file, int dof, F&& f) {
  const std::size_t n = std::size_t(dof);
  TrajectoryRecord r;
  r.q.resize(n), r.p.resize(n);
  read_fixed_records(file, RecordFile::record_bytes(dof), [&](const char* at) {
    std::int64_t head[4];
    Real errors[3];
    std::memcpy(head, at, sizeof head);
    std::memcpy(errors, at + sizeof head, sizeof errors);
    std::memcpy(r.q.data(), at + sizeof head + sizeof errors, sizeof(Real) * n);
    std::memcpy(r.p.data(), at + sizeof head + sizeof errors + sizeof(Real) * n, sizeof(Real) * n);
    if (head[3] < 0 || head[3] >= status_count)
      throw std::runtime_error(file.string() + " is damaged (a record's status is " + std::to_string(head[3]) + ")");
    r.id = head[0], r.step = head[1], r.failed_step = head[2], r.status = Status(head[3]);
    r.energy_error = errors[0], r.constraint_violation = errors[1], r.velocity_violation = errors[2];
    f(r);
  });
}

// The timeseries as rows arrive: timeseries.csv itself (output.format csv)
// or, for results.nc, a side file of fixed-size binary rows (step, live,
// time, the four errors), which write_results_netcdf reads back.
class TimeseriesFile : public AppendFile {
 public:
  static constexpr std::size_t row_bytes = 2 * sizeof(std::int64_t) + 5 * sizeof(Real);

  TimeseriesFile(const fs::path& file, bool csv, const VerifiedFiles* resume, const char* key)
      : AppendFile(file, resume, key), csv_(csv) {
    if (csv_ && !resumed())
      append("step,time,live_trajectories,mean_relative_energy_error,max_relative_energy_error,"
             "max_constraint_violation,max_velocity_constraint_violation\n");
  }

  void put(const TimeseriesRow& t) {
    buf_.clear();
    if (csv_) {
      buf_ += std::to_string(t.step) + ',';
      append_number(buf_, t.time);
      buf_ += ',' + std::to_string(t.live) + ',';
      append_number(buf_, t.mean_energy_error);
      buf_ += ',';
      append_number(buf_, t.max_energy_error);
      buf_ += ',';
      append_number(buf_, t.max_constraint_violation);
      buf_ += ',';
      append_number(buf_, t.max_velocity_constraint_violation);
      buf_ += '\n';
    } else {
      const std::int64_t head[2] = {t.step, t.live};
      const Real values[5] = {t.time, t.mean_energy_error, t.max_energy_error, t.max_constraint_violation,
                              t.max_velocity_constraint_violation};
      append_bytes(buf_, head, 2);
      append_bytes(buf_, values, 5);
    }
    append(buf_);
  }

 private:
  bool csv_;
  std::string buf_;
};

// Calls f(row) for every row of a binary timeseries side file, in order.
template <class F>
void read_timeseries(const fs::path& file, F&& f) {
  read_fixed_records(file, TimeseriesFile::row_bytes, [&](const char* at) {
    std::int64_t head[2];
    Real values[5];
    std::memcpy(head, at, sizeof head);
    std::memcpy(values, at + sizeof head, sizeof values);
    TimeseriesRow t;
    t.step = head[0], t.live = head[1];
    t.time = values[0], t.mean_energy_error = values[1], t.max_energy_error = values[2];
    t.max_constraint_violation = values[3], t.max_velocity_constraint_violation = values[4];
    f(t);
  });
}

// One CSV row: id, q, p, status for final.csv; a snapshot's row in
// trajectories.csv also has its step and time after the id, and its
// residuals after the status.
void append_row(std::string& line, const TrajectoryRecord& r, bool snapshot, Real dt) {
  line += std::to_string(r.id);
  if (snapshot) {
    line += ',' + std::to_string(r.step) + ',';
    append_number(line, Real(r.step) * dt);
  }
  for (Real x : r.q) line += ',', append_number(line, x);
  for (Real x : r.p) line += ',', append_number(line, x);
  line += ',';
  line += status_name(r.status);
  if (snapshot)
    for (Real x : {r.energy_error, r.constraint_violation, r.velocity_violation}) line += ',', append_number(line, x);
  line += '\n';
}

std::string csv_header(int dof, bool snapshot) {
  std::string header = snapshot ? "id,step,time" : "id";
  for (int k = 0; k < dof; ++k) header += ",q" + std::to_string(k);
  for (int k = 0; k < dof; ++k) header += ",p" + std::to_string(k);
  header += ",status";
  if (snapshot) header += ",energy_error,constraint_violation,velocity_constraint_violation";
  return header + "\n";
}

// trajectories.csv from the snapshot side files, sorted by (id, step): a
// run writes them by batch, then step.
void write_trajectories_csv(const fs::path& file, const std::vector<fs::path>& snapshots, int dof, Real dt) {
  std::vector<TrajectoryRecord> all;
  for (const auto& part : snapshots) read_records(part, dof, [&](const TrajectoryRecord& r) { all.push_back(r); });
  std::stable_sort(all.begin(), all.end(),
                   [](const TrajectoryRecord& a, const TrajectoryRecord& b) { return a.id < b.id || (a.id == b.id && a.step < b.step); });
  std::ofstream out(file, std::ios::binary);
  check_stream(out, file);
  out << csv_header(dof, true);
  std::string line;
  for (const auto& r : all) {
    line.clear();
    append_row(line, r, true, dt);
    out << line;
  }
  out.close();
  check_stream(out, file);
}

}  // namespace

struct RunFiles::Files {
  std::unique_ptr<AppendFile> final_csv;
  std::unique_ptr<RecordFile> final_bin, snapshots;
  std::unique_ptr<TimeseriesFile> timeseries;  // not in a shard's folder: a merge adds up its rows
  std::string line;
};

namespace {

// Where a whole run's timeseries goes as it arrives: timeseries.csv, or the side file results.nc is made from.
const char* timeseries_name(const RunConfig& c) { return c.output_format == "csv" ? "timeseries.csv" : "timeseries.bin"; }

}  // namespace

RunFiles::RunFiles(OutputFolder& folder, const RunConfig& c, const nlohmann::json* records)
    : folder_(folder), c_(c), files_(std::make_unique<Files>()) {
  Files& f = *files_;
  const int dof = system_dof(c);
  const VerifiedFiles verified = records != nullptr ? verify_checkpoint_files(folder, *records) : VerifiedFiles{};
  const VerifiedFiles* resume = records != nullptr ? &verified : nullptr;
  if (c.write_final_states && c.output_format == "csv") {
    f.final_csv = std::make_unique<AppendFile>(folder.partial("final.csv"), resume, "final.csv");
    if (!f.final_csv->resumed()) f.final_csv->append(csv_header(dof, false));
  }
  if (c.write_final_states && c.output_format == "netcdf")
    f.final_bin = std::make_unique<RecordFile>(folder.partial("final.bin"), dof, resume, "final.bin");
  if (!c.track_ids.empty())
    f.snapshots = std::make_unique<RecordFile>(folder.partial("trajectories.bin"), dof, resume, "trajectories.bin");
  if (c.shard_count <= 1)
    f.timeseries = std::make_unique<TimeseriesFile>(folder.partial(timeseries_name(c)), c.output_format == "csv", resume,
                                                    timeseries_name(c));
}

RunFiles::~RunFiles() = default;

void RunFiles::write(const TrajectoryRecord& r) {
  Files& f = *files_;
  if (f.final_csv) {
    f.line.clear();
    append_row(f.line, r, false, c_.dt);
    f.final_csv->append(f.line);
  }
  if (f.final_bin) f.final_bin->put(r);
}

void RunFiles::snapshot(const TrajectoryRecord& r) {
  if (files_->snapshots) files_->snapshots->put(r);
}

void RunFiles::row(const TimeseriesRow& t) {
  if (!files_->timeseries) throw std::logic_error("a shard's folder holds no timeseries");
  files_->timeseries->put(t);
}

nlohmann::json RunFiles::file_records() {
  Files& f = *files_;
  nlohmann::json records = nlohmann::json::object();
  if (f.final_csv) records["final.csv"] = f.final_csv->record();
  if (f.final_bin) records["final.bin"] = f.final_bin->record();
  if (f.snapshots) records["trajectories.bin"] = f.snapshots->record();
  if (f.timeseries) records[timeseries_name(c_)] = f.timeseries->record();
  return records;
}

namespace {

// The files a whole run leaves, from its per-trajectory sources (a run's own
// side files, or its shards' files in id order), committed summary.json
// last. `final_csv`: the final.csv.partial is already complete, as is the
// timeseries (timeseries.csv.partial, or timeseries.bin.partial for results.nc).
void write_run_outputs(OutputFolder& folder, const RunConfig& c, const RunResult& r, bool final_csv,
                       const std::vector<fs::path>& finals_bin, const std::vector<fs::path>& snapshots) {
  std::vector<std::string> done;  // committed in this order, summary.json last
  if (c.output_format == "csv") {
    if (final_csv) done.push_back("final.csv");
    done.push_back("timeseries.csv");
    if (!c.track_ids.empty()) {
      write_trajectories_csv(folder.partial("trajectories.csv"), snapshots, system_dof(c), c.dt);
      done.push_back("trajectories.csv");
    }
  } else {
    write_results_netcdf(folder.partial("results.nc"), c, r, folder.partial("timeseries.bin"), finals_bin, snapshots);
    done.push_back("results.nc");
  }
  write_summary(folder.partial("summary.json"), c, r);
  for (const auto& name : done) folder.commit(name);
  folder.commit("summary.json");
}

}  // namespace

void RunFiles::close_all() {
  Files& f = *files_;
  if (f.final_csv) f.final_csv->close();
  if (f.final_bin) f.final_bin->close();
  if (f.snapshots) f.snapshots->close();
  if (f.timeseries) f.timeseries->close();
}

void RunFiles::finish(const RunResult& r) {
  close_all();
  const std::vector<fs::path> finals{folder_.partial("final.bin")}, snapshots{folder_.partial("trajectories.bin")};
  write_run_outputs(folder_, c_, r, c_.write_final_states, finals, snapshots);
  std::error_code ec;
  for (const char* side : {"final.bin", "trajectories.bin", "timeseries.bin"}) fs::remove(folder_.partial(side), ec);
}

void RunFiles::finish_shard(const RunResult& r, nlohmann::json header) {
  header["files"] = file_records();
  close_all();
  write_shard_file(folder_, header, r.tally);
  const Files& f = *files_;
  if (f.final_csv) folder_.commit("final.csv");
  if (f.final_bin) folder_.commit("final.bin");
  if (f.snapshots) folder_.commit("trajectories.bin");
  folder_.commit("shard.tether");
}

void write_shard_file(OutputFolder& folder, const nlohmann::json& header, const std::string& body) {
  const fs::path file = folder.partial("shard.tether");
  std::ofstream out(file, std::ios::binary);
  check_stream(out, file);
  out << sealed(header.dump() + "\n" + body);
  out.close();
  check_stream(out, file);
  sync_file(file);
}

fs::path ShardFolder::file(const std::string& name) const {
  if (!header.at("files").contains(name))
    throw ConfigError(dir.string(), "holds no " + name + " in its shard.tether's record: not a shard of this output");
  return dir / name;
}

std::int64_t ShardFolder::lo() const { return header.at("ids")[0].get<std::int64_t>(); }
std::int64_t ShardFolder::hi() const { return header.at("ids")[1].get<std::int64_t>(); }

std::vector<ShardFolder> read_shard_folders(const std::vector<fs::path>& shards) {
  if (shards.empty()) throw ConfigError("shards", "none given");
  std::vector<ShardFolder> parts;
  for (const auto& dir : shards) {
    const fs::path file = dir / "shard.tether";
    ShardFolder s{dir, {}, {}};
    switch (read_sealed_file(file, shard_format, s.header, s.tally)) {
      case SealedRead::ok:
        break;
      case SealedRead::missing:
        throw ConfigError(dir.string(), "holds no shard.tether: not the folder of a finished `tether run --shard` "
                                        "or `tether sample --shard`");
      case SealedRead::other_format:
        throw ConfigError(file.string(), "is not a shard file of this version of tether: run the shard again");
      case SealedRead::damaged:
        throw ConfigError(file.string(), "is damaged (its bytes do not have the CRC-32 it was sealed with): run "
                                         "the shard again");
    }
    const nlohmann::json& ids = s.header["ids"];
    if (!s.header["files"].is_object() || !ids.is_array() || ids.size() != 2 || !ids[0].is_number_integer() ||
        !ids[1].is_number_integer() || ids[0].get<std::int64_t>() > ids[1].get<std::int64_t>())
      throw ConfigError(file.string(), "is not a shard file of this version of tether: run the shard again");
    // Every file the shard left, verified whole before any is used.
    for (const auto& [name, record] : s.header["files"].items()) {
      if (!recordable(name))
        throw ConfigError(file.string(), "records a file \"" + name.substr(0, 40) + "\" that tether does not write");
      std::uint32_t crc = 0;
      if (!matches_record(dir / name, record, crc))
        throw ConfigError((dir / name).string(), fs::exists(dir / name)
                                                     ? "is damaged (its bytes do not have the CRC-32 its shard.tether "
                                                       "recorded): run the shard again"
                                                     : "is missing: run the shard again");
      std::error_code ec;
      if (fs::file_size(dir / name, ec) != record["bytes"].get<std::uintmax_t>())
        throw ConfigError((dir / name).string(), "is longer than its shard.tether recorded: run the shard again");
    }
    parts.push_back(std::move(s));
  }
  // One command, config and backend; shards 0 .. K-1, each once.
  const nlohmann::json& first = parts.front().header;
  const std::int64_t count = first.value("shards", std::int64_t(0));
  for (const auto& p : parts)
    for (const char* key : {"command", "config", "backend", "shards"})  // batch sizes change no bit
      if (p.header[key] != first[key])
        throw ConfigError(p.dir.string(), std::string("is a shard of another run than ") + parts.front().dir.string() +
                                              " (its " + key + " differs)");
  if (std::int64_t(parts.size()) != count)
    throw ConfigError(parts.front().dir.string(), "is one of " + std::to_string(count) + " shards; " +
                                                      std::to_string(parts.size()) + " were given");
  std::sort(parts.begin(), parts.end(), [](const ShardFolder& a, const ShardFolder& b) {
    return a.header.value("shard", 0) < b.header.value("shard", 0);
  });
  for (std::int64_t k = 0; k < count; ++k)
    if (parts[std::size_t(k)].header.value("shard", -1) != k)
      throw ConfigError(parts[std::size_t(k)].dir.string(), "shard " + std::to_string(k) + " of " +
                                                                std::to_string(count) + " is missing or given twice");
  for (std::size_t k = 0; k < parts.size(); ++k)  // their ids one range, cut where the config cuts it
    if (parts[k].lo() != (k == 0 ? 0 : parts[k - 1].hi()))
      throw ConfigError(parts[k].dir.string(), "holds ids " + std::to_string(parts[k].lo()) + " to " +
                                                   std::to_string(parts[k].hi()) + ", which do not follow shard " +
                                                   std::to_string(k == 0 ? 0 : k - 1) + "'s");
  return parts;
}

namespace {

// One row of a shard's final.csv (id, q, p, status) as its writer wrote it:
// the id expected next, every number whole, a status by name, and finite
// numbers where the status is ok (a trajectory whose numbers stop being
// finite fails). What a checksum cannot vouch for, such as a shard written by a
// faulty build, is still refused by name.
void check_final_csv_row(const std::string& line, std::int64_t id, int dof, const fs::path& file) {
  const auto bad = [&](const std::string& what) {
    throw ConfigError(file.string(), "row of trajectory " + std::to_string(id) + ": " + what + ": run the shard again");
  };
  std::vector<std::string_view> fields;
  for (std::size_t at = 0;;) {
    const std::size_t comma = line.find(',', at);
    fields.emplace_back(line.data() + at, (comma == std::string::npos ? line.size() : comma) - at);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (fields.size() != 2 * std::size_t(dof) + 2)
    bad(std::to_string(fields.size()) + " fields, not " + std::to_string(2 * dof + 2));
  std::int64_t got = -1;
  const auto [end, ec] = std::from_chars(fields[0].data(), fields[0].data() + fields[0].size(), got);
  if (ec != std::errc() || end != fields[0].data() + fields[0].size() || got != id)
    bad("its id is \"" + std::string(fields[0].substr(0, 24)) + "\"");
  const std::string_view status = fields.back();
  int which = -1;
  for (int v = 0; v < status_count; ++v)
    if (status == status_name(Status(v))) which = v;
  if (which < 0) bad("its status \"" + std::string(status.substr(0, 24)) + "\" is none of tether's");
  for (std::size_t k = 1; k + 1 < fields.size(); ++k) {
    double x = 0;
    const auto [e, err] = std::from_chars(fields[k].data(), fields[k].data() + fields[k].size(), x);
    if (err != std::errc() || e != fields[k].data() + fields[k].size())
      bad("field " + std::to_string(k) + " \"" + std::string(fields[k].substr(0, 24)) + "\" is not a number");
    if (which == int(Status::ok) && !std::isfinite(x))
      bad("field " + std::to_string(k) + " is " + std::string(fields[k]) + " in a trajectory whose status is ok");
  }
}

}  // namespace

void merge_run_shard_folders(OutputFolder& folder, const std::vector<ShardFolder>& parts) {
  const nlohmann::json& first = parts.front().header;
  // As the shards parsed it, without this machine's memory checks or the start draws (the merge needs neither).
  RunConfig c = parse_config_as_written(first["config"].dump(), "the shards' config");
  if (parts.back().hi() != c.size)
    throw ConfigError(parts.back().dir.string(), "ends at id " + std::to_string(parts.back().hi()) + ", not at the " +
                                                     std::to_string(c.size) + " trajectories of its config");
  c.backend = first.value("backend", std::string());
  c.batch_size = first.value("batch_size", c.batch_size);
  std::vector<std::string> tallies;
  for (const auto& p : parts) tallies.push_back(p.tally);
  RunResult r = merge_shards(c, tallies);
  r.backend = c.backend;
  r.family = first.value("family", std::string());
  for (const auto& p : parts) r.wall_seconds = std::max(r.wall_seconds, p.header.value("wall_seconds", 0.0));

  std::vector<fs::path> finals_bin, snapshots;
  for (const auto& p : parts) {
    if (c.output_format == "netcdf" && c.write_final_states) finals_bin.push_back(p.file("final.bin"));
    if (!c.track_ids.empty()) snapshots.push_back(p.file("trajectories.bin"));
  }
  const bool final_csv = c.output_format == "csv" && c.write_final_states;
  if (final_csv) {  // the shards' rows in id order under one header, every one of them checked
    const fs::path out = folder.partial("final.csv");
    std::ofstream o(out, std::ios::binary);
    check_stream(o, out);
    const std::string header = csv_header(system_dof(c), false);
    o << header;
    for (const ShardFolder& part : parts) {
      const fs::path file = part.file("final.csv");
      std::ifstream in(file, std::ios::binary);
      std::string line;
      if (!std::getline(in, line) || line + '\n' != header)
        throw ConfigError(file.string(), "does not start with the header of this config's final.csv");
      std::int64_t id = part.lo();
      for (; std::getline(in, line); ++id) {
        check_final_csv_row(line, id, system_dof(c), file);
        o << line << '\n';
      }
      if (id != part.hi())
        throw ConfigError(file.string(), "holds " + std::to_string(id - part.lo()) + " rows, not the " +
                                             std::to_string(part.hi() - part.lo()) + " of its trajectories");
    }
    o.close();
    check_stream(o, out);
  }
  {  // the merged rows, where a run of the config would have streamed them
    TimeseriesFile rows(folder.partial(timeseries_name(c)), c.output_format == "csv", nullptr, "");
    for (const TimeseriesRow& t : r.timeseries) rows.put(t);
    rows.close();
  }
  write_run_outputs(folder, c, r, final_csv, finals_bin, snapshots);
  std::error_code ec;
  fs::remove(folder.partial("timeseries.bin"), ec);
}

void merge_shard_folders(const fs::path& out, const std::vector<fs::path>& shards) {
  const std::vector<ShardFolder> parts = read_shard_folders(shards);  // before `out` is touched
  OutputFolder folder(out);
  if (parts.front().header.value("command", "") == "sample")
    merge_sample_shard_folders(folder, parts);
  else
    merge_run_shard_folders(folder, parts);
}

// ---------------------------------------------------------------- results.nc

namespace {

class Netcdf {
 public:
  explicit Netcdf(const fs::path& file) : file_(file) {
    ok(nc_create(file.c_str(), NC_CLOBBER | NC_NETCDF4, &id_), "create");
  }
  ~Netcdf() {
    if (id_ >= 0) netcdf_discard(id_);  // unfinished: the caller removes the partial file
  }
  void ok(int status, const std::string& what) const { netcdf_check(status, "write", what, file_); }
  int dim(const char* name, std::size_t n) {
    int d;
    ok(nc_def_dim(id_, name, n, &d), name);
    return d;
  }
  int var(const char* name, nc_type type, std::vector<int> dims, const std::string& long_name, const char* units = nullptr) {
    int v;
    ok(nc_def_var(id_, name, type, int(dims.size()), dims.data(), &v), name);
    text(v, "long_name", long_name);
    if (units != nullptr) text(v, "units", units);
    return v;
  }
  void text(int var, const char* key, const std::string& value) {
    ok(nc_put_att_text(id_, var, key, value.size(), value.c_str()), key);
  }
  void close() {
    const int id = id_;
    id_ = -1;
    netcdf_close(id, file_);
  }
  int id() const { return id_; }

 private:
  fs::path file_;
  int id_ = -1;
};

// CF flag attributes: xarray and ncdump show each status by name.
void status_flags(Netcdf& nc, int var) {
  unsigned char values[status_count];  // Status, whose names status_name gives
  std::string meanings;
  for (int v = 0; v < status_count; ++v) {
    values[v] = static_cast<unsigned char>(v);
    if (v > 0) meanings += ' ';
    meanings += status_name(Status(v));
  }
  nc.ok(nc_put_att_uchar(nc.id(), var, "flag_values", NC_UBYTE, status_count, values), "flag_values");
  nc.text(var, "flag_meanings", meanings);
}

}  // namespace

nlohmann::ordered_json results_attributes(const RunConfig& c, const RunResult& r) {
  const nlohmann::ordered_json summary = run_summary(c, r);
  nlohmann::ordered_json a;
  a["Conventions"] = "CF-1.8";
  a["title"] = "tether run: " + r.system + " / " + describe_method(c);
  a["source"] = "tether";
  for (const char* key : {"system", "family", "method", "backend", "precision"})
    if (summary.contains(key) && summary[key].is_string()) a[key] = summary[key];
  a["summary"] = summary.dump();  // summary.json whole, for what has no attribute of its own
  a["energy_error_definition"] = summary.value("energy_error_definition", "");
  a["constraint_definition"] = summary.value("constraint_definition", "");
  a["dt"] = c.dt;
  a["steps"] = c.steps;
  a["trajectories"] = c.size;
  return a;
}

void write_results_netcdf(const fs::path& file, const RunConfig& c, const RunResult& r, const fs::path& timeseries,
                          const std::vector<fs::path>& finals, const std::vector<fs::path>& snapshots) {
  const int dof = system_dof(c);
  const std::size_t n = std::size_t(dof);
  Netcdf nc(file);
  const nlohmann::ordered_json attributes = results_attributes(c, r);
  for (const auto& [key, value] : attributes.items()) {
    if (value.is_string()) {
      nc.text(NC_GLOBAL, key.c_str(), value.get<std::string>());
    } else if (value.is_number_integer()) {
      const long long x = value.get<long long>();
      nc.ok(nc_put_att_longlong(nc.id(), NC_GLOBAL, key.c_str(), NC_INT64, 1, &x), key);
    } else {
      const double x = value.get<double>();
      nc.ok(nc_put_att_double(nc.id(), NC_GLOBAL, key.c_str(), NC_DOUBLE, 1, &x), key);
    }
  }

  const int coordinate = nc.dim("coordinate", n);
  const int coordinate_var = nc.var("coordinate", NC_INT, {coordinate}, "index of the generalized coordinate");
  // The timeseries along `step`, with time as a coordinate.
  const std::size_t rows = std::size_t(timeseries_rows(c));
  const int step = nc.dim("step", rows);
  const int step_var = nc.var("step", NC_INT64, {step}, "step number");
  const int time_var = nc.var("time", NC_DOUBLE, {step}, "time (step x dt)", "the system's time unit");
  struct Series {
    const char* name;
    const char* long_name;
    Real TimeseriesRow::*field;
  };
  const Series series[] = {
      {"mean_relative_energy_error", "mean over live trajectories of |H - H0| / scale", &TimeseriesRow::mean_energy_error},
      {"max_relative_energy_error", "max over live trajectories of |H - H0| / scale", &TimeseriesRow::max_energy_error},
      {"max_constraint_violation", "max over live trajectories of the position constraint residual",
       &TimeseriesRow::max_constraint_violation},
      {"max_velocity_constraint_violation", "max over live trajectories of the velocity constraint residual",
       &TimeseriesRow::max_velocity_constraint_violation}};
  std::vector<int> series_vars;
  for (const auto& s : series) {
    series_vars.push_back(nc.var(s.name, NC_DOUBLE, {step}, s.long_name, "1"));
    nc.text(series_vars.back(), "coordinates", "time");
  }
  const int live_var = nc.var("live_trajectories", NC_INT64, {step}, "trajectories not failed");
  nc.text(live_var, "coordinates", "time");

  // Final states along `trajectory`.
  int q_var = -1, p_var = -1, status_var = -1, failed_var = -1, error_vars[3] = {-1, -1, -1};
  if (c.write_final_states) {
    const int trajectory = nc.dim("trajectory", std::size_t(c.size));
    nc.var("trajectory", NC_INT64, {trajectory}, "trajectory id");
    q_var = nc.var("q", NC_DOUBLE, {trajectory, coordinate}, "final generalized positions");
    p_var = nc.var("p", NC_DOUBLE, {trajectory, coordinate}, "final momenta");
    status_var = nc.var("status", NC_UBYTE, {trajectory}, "how the trajectory ended");
    status_flags(nc, status_var);
    failed_var = nc.var("failed_step", NC_INT64, {trajectory},
                        "step at which the trajectory failed (-1: it did not; 0: its start could not be prepared)");
    const char* names[3] = {"energy_error", "constraint_violation", "velocity_constraint_violation"};
    const char* long_names[3] = {"relative energy error |H - H0| / scale at the last step",
                                 "position constraint residual at the last step",
                                 "velocity constraint residual at the last step"};
    for (int k = 0; k < 3; ++k) error_vars[k] = nc.var(names[k], NC_DOUBLE, {trajectory}, long_names[k], "1");
    for (int v : {q_var, p_var}) {
      const std::size_t chunks[2] = {std::min<std::size_t>(std::size_t(c.size), 4096), n};
      nc.ok(nc_def_var_chunking(nc.id(), v, NC_CHUNKED, chunks), "chunking");
    }
  }

  // Snapshots of the tracked trajectories along (tracked, snapshot).
  const std::size_t tracked_count = c.track_ids.size(), snaps = std::size_t(snapshots_per_trajectory(c));
  int tq = -1, tp = -1, tstatus = -1, tracked_var = -1, snap_step_var = -1, snap_time_var = -1;
  int tracked_error_vars[3] = {-1, -1, -1};
  if (tracked_count > 0) {
    const int tracked = nc.dim("tracked", tracked_count), snapshot = nc.dim("snapshot", snaps);
    tracked_var = nc.var("tracked", NC_INT64, {tracked}, "id of a trajectory followed (output.trajectories)");
    snap_step_var = nc.var("snapshot_step", NC_INT64, {snapshot}, "step of the snapshot");
    snap_time_var = nc.var("snapshot_time", NC_DOUBLE, {snapshot}, "time of the snapshot", "the system's time unit");
    tq = nc.var("tracked_q", NC_DOUBLE, {tracked, snapshot, coordinate}, "generalized positions of a followed trajectory");
    tp = nc.var("tracked_p", NC_DOUBLE, {tracked, snapshot, coordinate}, "momenta of a followed trajectory");
    tstatus = nc.var("tracked_status", NC_UBYTE, {tracked, snapshot}, "status of a followed trajectory at the snapshot");
    status_flags(nc, tstatus);
    for (int v : {tq, tp, tstatus}) nc.text(v, "coordinates", "snapshot_step snapshot_time");
    const char* names[3] = {"tracked_energy_error", "tracked_constraint_violation",
                            "tracked_velocity_constraint_violation"};
    const char* long_names[3] = {"relative energy error |H - H0| / scale at the snapshot",
                                 "position constraint residual at the snapshot",
                                 "velocity constraint residual at the snapshot"};
    for (int k = 0; k < 3; ++k) {
      tracked_error_vars[k] = nc.var(names[k], NC_DOUBLE, {tracked, snapshot}, long_names[k], "1");
      nc.text(tracked_error_vars[k], "coordinates", "snapshot_step snapshot_time");
    }
  }
  nc.ok(nc_enddef(nc.id()), "enddef");

  std::vector<int> coordinates(n);
  std::iota(coordinates.begin(), coordinates.end(), 0);
  nc.ok(nc_put_var_int(nc.id(), coordinate_var, coordinates.data()), "coordinate");
  {  // the timeseries, a block of rows at a time
    constexpr std::size_t block = 4096;
    std::vector<TimeseriesRow> held;
    std::size_t first = 0;
    const auto flush = [&] {
      const std::size_t count = held.size();
      if (count == 0) return;
      std::vector<long long> whole(count);
      std::vector<double> column(count);
      for (std::size_t i = 0; i < count; ++i) whole[i] = held[i].step;
      nc.ok(nc_put_vara_longlong(nc.id(), step_var, &first, &count, whole.data()), "step");
      for (std::size_t i = 0; i < count; ++i) whole[i] = held[i].live;
      nc.ok(nc_put_vara_longlong(nc.id(), live_var, &first, &count, whole.data()), "live_trajectories");
      for (std::size_t i = 0; i < count; ++i) column[i] = held[i].time;
      nc.ok(nc_put_vara_double(nc.id(), time_var, &first, &count, column.data()), "time");
      for (std::size_t s = 0; s < std::size(series); ++s) {
        for (std::size_t i = 0; i < count; ++i) column[i] = held[i].*series[s].field;
        nc.ok(nc_put_vara_double(nc.id(), series_vars[s], &first, &count, column.data()), series[s].name);
      }
      first += count;
      held.clear();
    };
    read_timeseries(timeseries, [&](const TimeseriesRow& t) {
      if (first + held.size() >= rows) throw std::runtime_error(timeseries.string() + " holds more rows than the config has");
      held.push_back(t);
      if (held.size() == block) flush();
    });
    flush();
    if (first != rows)
      throw std::runtime_error(timeseries.string() + " holds " + std::to_string(first) + " of the " +
                               std::to_string(rows) + " timeseries rows");
  }

  if (c.write_final_states) {
    // Records come in id order: written a block at a time.
    constexpr std::size_t block = 4096;
    std::vector<long long> ids, failed;
    std::vector<double> q, p, errors[3];
    std::vector<unsigned char> status;
    std::size_t first = 0;
    int trajectory_var;
    nc.ok(nc_inq_varid(nc.id(), "trajectory", &trajectory_var), "trajectory");
    const auto flush = [&] {
      const std::size_t count = ids.size();
      if (count == 0) return;
      const std::size_t start[2] = {first, 0}, count2[2] = {count, n};
      nc.ok(nc_put_vara_longlong(nc.id(), trajectory_var, start, &count, ids.data()), "trajectory");
      nc.ok(nc_put_vara_double(nc.id(), q_var, start, count2, q.data()), "q");
      nc.ok(nc_put_vara_double(nc.id(), p_var, start, count2, p.data()), "p");
      nc.ok(nc_put_vara_uchar(nc.id(), status_var, start, &count, status.data()), "status");
      nc.ok(nc_put_vara_longlong(nc.id(), failed_var, start, &count, failed.data()), "failed_step");
      for (int k = 0; k < 3; ++k) nc.ok(nc_put_vara_double(nc.id(), error_vars[k], start, &count, errors[k].data()), "errors");
      first += count;
      ids.clear(), q.clear(), p.clear(), status.clear(), failed.clear();
      for (auto& e : errors) e.clear();
    };
    std::int64_t expected = 0;
    for (const auto& part : finals) read_records(part, dof, [&](const TrajectoryRecord& t) {
      if (t.id != expected++) throw std::runtime_error(part.string() + " is not in trajectory order");
      if (t.status == Status::ok && !(std::all_of(t.q.begin(), t.q.end(), [](Real x) { return std::isfinite(x); }) &&
                                      std::all_of(t.p.begin(), t.p.end(), [](Real x) { return std::isfinite(x); })))
        throw std::runtime_error(part.string() + " is damaged (trajectory " + std::to_string(t.id) +
                                 " is ok but its state is not finite)");
      ids.push_back(t.id);
      q.insert(q.end(), t.q.begin(), t.q.end());
      p.insert(p.end(), t.p.begin(), t.p.end());
      status.push_back(static_cast<unsigned char>(t.status));
      failed.push_back(t.status == Status::ok ? -1 : t.failed_step);
      errors[0].push_back(t.energy_error), errors[1].push_back(t.constraint_violation), errors[2].push_back(t.velocity_violation);
      if (ids.size() == block) flush();
    });
    flush();
    if (expected != c.size)
      throw std::runtime_error("the final states hold " + std::to_string(expected) + " of " + std::to_string(c.size) +
                               " trajectories");
  }

  if (tracked_count > 0) {
    std::vector<long long> snap_steps(snaps);
    std::vector<double> snap_times(snaps);
    for (std::size_t s = 0; s < snaps; ++s) {
      snap_steps[s] = snapshot_step(c, std::int64_t(s));
      snap_times[s] = double(snap_steps[s]) * c.dt;
    }
    const std::vector<long long> tracked_ids(c.track_ids.begin(), c.track_ids.end());
    nc.ok(nc_put_var_longlong(nc.id(), tracked_var, tracked_ids.data()), "tracked");
    nc.ok(nc_put_var_longlong(nc.id(), snap_step_var, snap_steps.data()), "snapshot_step");
    nc.ok(nc_put_var_double(nc.id(), snap_time_var, snap_times.data()), "snapshot_time");
    for (const auto& part : snapshots) read_records(part, dof, [&](const TrajectoryRecord& t) {
      const auto at = std::lower_bound(c.track_ids.begin(), c.track_ids.end(), t.id);
      const auto s = std::size_t(snapshot_index(c, t.step));
      if (at == c.track_ids.end() || *at != t.id || snap_steps[s] != t.step)
        throw std::runtime_error(part.string() + " holds a snapshot no config asked for");
      const std::size_t start[3] = {std::size_t(at - c.track_ids.begin()), s, 0}, count[3] = {1, 1, n};
      nc.ok(nc_put_vara_double(nc.id(), tq, start, count, t.q.data()), "tracked_q");
      nc.ok(nc_put_vara_double(nc.id(), tp, start, count, t.p.data()), "tracked_p");
      const unsigned char st = static_cast<unsigned char>(t.status);
      nc.ok(nc_put_vara_uchar(nc.id(), tstatus, start, count, &st), "tracked_status");
      const Real errors[3] = {t.energy_error, t.constraint_violation, t.velocity_violation};
      for (int k = 0; k < 3; ++k)
        nc.ok(nc_put_vara_double(nc.id(), tracked_error_vars[k], start, count, &errors[k]), "tracked errors");
    });
  }
  nc.close();
}

}  // namespace tether

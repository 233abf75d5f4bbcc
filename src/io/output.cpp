#include "io/output.hpp"

#include <charconv>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace tether {

namespace fs = std::filesystem;

namespace {

void append_number(std::string& s, Real x) {
  char buf[32];
  const auto res = std::to_chars(buf, buf + sizeof buf, x);
  s.append(buf, res.ptr);
}

void check_stream(const std::ofstream& out, const fs::path& file) {
  if (!out) throw std::runtime_error("cannot write " + file.string());
}

}  // namespace

OutputFolder::OutputFolder(const fs::path& dir) : dir_(dir) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_)) throw std::runtime_error("cannot create output folder " + dir_.string());
  // A previous run's files must not sit beside this run's summary.
  for (const char* name : {"summary.json", "final.csv", "timeseries.csv"}) {
    fs::remove(dir_ / name, ec);
    if (ec) throw std::runtime_error("cannot remove the old " + (dir_ / name).string());
  }
}

void OutputFolder::commit(const std::string& name) const {
  std::error_code ec;
  fs::rename(partial(name), dir_ / name, ec);
  if (ec) throw std::runtime_error("cannot rename " + partial(name).string() + ": " + ec.message());
}

CsvFinalStates::CsvFinalStates(const fs::path& file, int dof) : out_(file, std::ios::binary), file_(file) {
  check_stream(out_, file_);
  std::string header = "id";
  for (int k = 0; k < dof; ++k) header += ",q" + std::to_string(k);
  for (int k = 0; k < dof; ++k) header += ",p" + std::to_string(k);
  out_ << header << ",status\n";
}

void CsvFinalStates::write(std::int64_t id, const std::vector<Real>& q, const std::vector<Real>& p, Status status) {
  line_.clear();
  line_ += std::to_string(id);
  for (Real x : q) { line_ += ','; append_number(line_, x); }
  for (Real x : p) { line_ += ','; append_number(line_, x); }
  line_ += ',';
  line_ += status_name(status);
  line_ += '\n';
  out_ << line_;
}

void CsvFinalStates::close() {
  out_.close();
  check_stream(out_, file_);
}

void write_timeseries(const fs::path& file, const RunResult& r) {
  std::ofstream out(file, std::ios::binary);
  check_stream(out, file);
  out << "step,time,live_trajectories,mean_relative_energy_error,max_relative_energy_error,"
         "max_constraint_violation,max_velocity_constraint_violation\n";
  std::string s;
  for (const auto& t : r.timeseries) {
    s.clear();
    s += std::to_string(t.step) + ',';
    append_number(s, t.time);
    s += ',' + std::to_string(t.live) + ',';
    append_number(s, t.mean_energy_error);
    s += ',';
    append_number(s, t.max_energy_error);
    s += ',';
    append_number(s, t.max_constraint_violation);
    s += ',';
    append_number(s, t.max_velocity_constraint_violation);
    out << s << '\n';
  }
  out.close();
  check_stream(out, file);
}

void write_summary(const fs::path& file, const RunConfig& c, const RunResult& r) {
  nlohmann::ordered_json j;
  j["system"] = r.system;
  j["family"] = r.family;
  j["method"] = r.method;
  if (r.stages > 0) j["stages"] = r.stages;
  j["backend"] = r.backend;
  j["precision"] = c.precision;
  j["trajectories"] = r.trajectories;
  j["steps"] = r.steps;
  j["dt"] = r.dt;
  j["max_constraint_violation"] = r.max_constraint_violation;
  j["max_velocity_constraint_violation"] = r.max_velocity_constraint_violation;
  j["max_relative_energy_error"] = r.max_relative_energy_error;
  j["newton_iterations"] = {{"mean", r.newton_mean}, {"max", r.newton_max}};
  j["failed_trajectories"] = r.failed;
  auto& f = j["failures"] = nlohmann::ordered_json::array();
  for (const auto& x : r.failures) f.push_back({{"id", x.id}, {"step", x.step}, {"reason", status_name(x.reason)}});
  j["failures_listed"] = r.failures.size();
  j["initial_projection"] = {{"projected_states", r.projected_states},
                             {"max_distance", r.max_projection_distance}};
  j["wall_seconds"] = r.wall_seconds;
  j["integration_seconds"] = r.integration_seconds;
  const double work = double(r.trajectory_steps);
  j["trajectory_steps_per_second"] = r.integration_seconds > 0 ? work / r.integration_seconds : 0.0;
  j["energy_error_definition"] =
      r.family == "nonholonomic"
          ? "|H - H0| / (|H0 - V0| + |V0|) per trajectory, H = H(q, p, lambda~(q, p))"
          : "|H - H0| / (K0 + |V0| + E_sys) per trajectory, E_sys the system's characteristic energy";
  j["constraint_definition"] =
      r.family == "nonholonomic"
          ? "position: max |h(q)| (0 without holonomic constraints); velocity: max_i |g_i(q) . qdot| and |Dh(q) qdot| "
            "with qdot = H_p (0 for canonical systems)"
          : "position: max |g(q)|; velocity: max |G(q) M^-1 p|";
  std::ofstream out(file, std::ios::binary);
  check_stream(out, file);
  out << j.dump(2) << '\n';
  out.close();
  check_stream(out, file);
}

}  // namespace tether

#include "tether/engine/config.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "config/json_node.hpp"
#include "config/resources.hpp"
#include "expr/declared_system.hpp"
#include "registry/catalog.hpp"
#include "tether/core/random.hpp"
#include "tether/engine/output.hpp"
#include "tether/engine/sample.hpp"
#include "tether/ensemble/advance.hpp"
#include "tether/shooting/shoot.hpp"

namespace tether {

ConfigError::ConfigError(std::string path, const std::string& message)
    : std::runtime_error("config error at " + path + ": " + message), path_(std::move(path)) {}

using nlohmann::json;

const std::vector<std::string>& system_names() {
  static const std::vector<std::string> v = unique_system_names();
  return v;
}
const std::vector<std::string>& method_names() {
  static const std::vector<std::string> v = unique_method_names();
  return v;
}
const std::vector<std::string>& backend_names() {
  static const std::vector<std::string> v{"auto", "cpu", "reference", "cuda"};
  return v;
}

namespace {

// The smallest step tether takes, sqrt(DBL_MIN): below it h^2, in every
// step's position update, underflows and the force drops out of the step.
// (Above it, the methods that move q by h M^-1 p form the new momentum
// without differencing positions, so a step too small to move q keeps p.)
constexpr Real min_dt = 1.4916681462400413e-154;

void check_step_size(Real dt, const std::string& path) {
  if (dt < min_dt)
    throw ConfigError(path, "gives steps of " + show(json(dt)) + ", below 1.5e-154, where h^2 underflows double "
                            "precision and the force drops out of the step");
}

Real step_size(const Node& node, const std::string& key) {
  const Real dt = node.positive(key);
  check_step_size(dt, node.at(key));
  return dt;
}

// The states a caller hands over as two count x columns arrays (row-major):
// what ensemble.initial.states lists, checked as the config's numbers are.
void states_from_arrays(const InMemoryRun& a, const std::string& where, std::vector<ExplicitState>& out) {
  if (a.count < 1) throw ConfigError(where, "must hold at least one state (q and p have 0 rows)");
  if (a.q_columns < 1 || a.p_columns < 1) throw ConfigError(where, "q and p must have at least one column");
  out.resize(std::size_t(a.count));
  for (std::int64_t i = 0; i < a.count; ++i) {
    ExplicitState& s = out[std::size_t(i)];
    s.q.assign(a.q + i * a.q_columns, a.q + (i + 1) * a.q_columns);
    s.p.assign(a.p + i * a.p_columns, a.p + (i + 1) * a.p_columns);
    for (const auto& [v, name] : {std::pair{&s.q, "q"}, std::pair{&s.p, "p"}})
      for (std::size_t k = 0; k < v->size(); ++k)
        if (!std::isfinite((*v)[k]))
          throw ConfigError(where + "." + name + "[" + std::to_string(i) + "][" + std::to_string(k) + "]",
                            std::string("must be a finite number, got ") +
                                (std::isnan((*v)[k]) ? "nan" : (*v)[k] > 0 ? "inf" : "-inf"));
  }
}

ExplicitState parse_state(const Node& s) {
  s.only({"q", "p"});
  return ExplicitState{s.numbers("q"), s.numbers("p")};
}

// The family decides what applies: index-1 systems take any (q, p), so no
// thermal sampler, and without holonomic constraints nothing to project.
InitialSpec parse_initial(const Node& ini, const SystemInfo& info, const InMemoryRun* in_memory = nullptr) {
  const std::string& system_name = info.name;
  const bool mixed = info.family == Family::mixed;
  const bool nonholonomic = mixed || info.family == Family::nonholonomic;
  if (nonholonomic && !mixed)
    for (const char* key : {"project", "tolerance"})
      if (ini.has(key))
        throw ConfigError(ini.at(key), std::string("does not apply to ") + system_name +
                                           ": every (q, p) is a valid state of an index-1 system");
  InitialSpec spec;
  spec.path = ini.path();
  if (ini.has("states")) {
    ini.only({"states", "project", "tolerance"});
    spec.kind = InitialSpec::Kind::states;
    const json& arr = ini.raw("states");
    if (in_memory != nullptr && in_memory->q != nullptr && arr == "arrays") {
      spec.states_as_arrays = true;
      spec.project = ini.boolean("project", false);
      spec.tolerance = ini.positive("tolerance", spec.tolerance);
      states_from_arrays(*in_memory, ini.at("states"), spec.states);
      return spec;
    }
    if (!arr.is_array() || arr.empty())
      throw ConfigError(ini.at("states"), "must be a non-empty array of {\"q\": [...], \"p\": [...]}");
    for (std::size_t i = 0; i < arr.size(); ++i)
      spec.states.push_back(parse_state(Node(arr[i], ini.at("states") + "[" + std::to_string(i) + "]")));
    spec.project = ini.boolean("project", false);
    spec.tolerance = ini.positive("tolerance", spec.tolerance);
    return spec;
  }
  // The canonical starts run or reuse RATTLE-HMC: what tether sample can sample.
  const auto needs_sampler = [&](const std::string& key, const std::string& what) {
    if (!can_sample(info))
      throw ConfigError(ini.at(key), what + " applies to the systems tether sample can sample (holonomic, reversed by "
                                     "p -> -p); for " + system_name + " use \"around\" or explicit states");
  };
  // The thermal and canonical starts draw positions by the system's own sampler.
  const auto needs_own_configurations = [&](const std::string& key, const std::string& what) {
    if (!info.samples_configurations)
      throw ConfigError(ini.at(key), what + " draws positions by a system's own sampler of its manifold, which " +
                                         system_name + ", a declared system, does not have: start from \"around\" "
                                         "(a cloud about one state, projected onto the manifold) or explicit states");
  };
  if (ini.has("draws")) {
    ini.only({"draws"});
    needs_sampler("draws", "a start from draws");
    spec.kind = InitialSpec::Kind::draws;
    spec.draws_file = ini.text("draws");  // read once the ensemble's size is known (load_start_draws)
    return spec;
  }
  static const std::vector<std::string> samplers{"thermal", "around", "canonical"};
  const std::string sampler = ini.string("sampler", samplers);
  if (sampler == "thermal" && nonholonomic)
    throw ConfigError(ini.at("sampler"), "\"thermal\" applies to holonomic systems; for " + system_name +
                                             " use \"around\" or explicit states");
  if (sampler == "canonical") {
    needs_sampler("sampler", "\"canonical\"");
    needs_own_configurations("sampler", "\"canonical\"");
    ini.only({"sampler", "temperature", "warmup", "steps", "dt", "target_acceptance"});
    spec.kind = InitialSpec::Kind::canonical;
    spec.temperature = ini.positive("temperature");
    spec.warmup = ini.integer("warmup", 1, std::int64_t(1) << 30, spec.warmup);
    spec.steps = static_cast<int>(ini.integer("steps", 1, 1 << 20, spec.steps));
    spec.dt = ini.has("dt") ? step_size(ini, "dt") : 0;  // 0: the run's method.dt
    spec.target_acceptance = ini.positive("target_acceptance", spec.target_acceptance);
    if (!(spec.target_acceptance < 1))
      throw ConfigError(ini.at("target_acceptance"), "must be in (0, 1), got " + show(json(spec.target_acceptance)));
  } else if (sampler == "thermal") {
    needs_own_configurations("sampler", "\"thermal\"");
    ini.only({"sampler", "temperature"});
    spec.kind = InitialSpec::Kind::thermal;
    spec.temperature = ini.non_negative("temperature");
  } else {
    ini.only({"sampler", "q", "p", "position_spread", "momentum_spread"});
    spec.kind = InitialSpec::Kind::around;
    spec.center = ExplicitState{ini.numbers("q"), ini.numbers("p")};
    spec.position_spread = ini.non_negative("position_spread", 0.0);
    spec.momentum_spread = ini.non_negative("momentum_spread", 0.0);
  }
  return spec;
}

// ensemble.initial.draws: the positions of c.size trajectories from a
// tether sample's draws.nc of the same system with the same parameters.
void load_start_draws(RunConfig& c) {
  const std::string where = c.initial.path + ".draws";
  // Held in memory until the run ends, as explicit states are: refused up front beyond 2 GiB.
  const int dof = system_dof(c);
  if (double(c.size) * dof * sizeof(Real) > double(std::int64_t(1) << 31))
    throw ConfigError(where, "would hold " + std::to_string(c.size) + " x " + std::to_string(dof) +
                                 " start positions in memory, over 2 GiB: run fewer trajectories per run");
  StartDraws d = read_start_draws(c.initial.draws_file, c.size, dof, where);
  if (d.system != c.system_name)
    throw ConfigError(where, "holds draws of " + d.system + ", not of " + c.system_name);
  const json own = system_parameter_values(system_info(c), c.system_parameters);
  if (d.system_parameters != own)
    throw ConfigError(where, "was sampled with system parameters " + d.system_parameters.dump() + "; this run's are " +
                                 own.dump());
  c.initial.temperature = d.temperature;
  c.initial.draw_q = std::move(d.q);
}

// method.name (among the system's methods), its variant and parameters, newton.
void parse_method(const Node& m, RunConfig& c, const std::set<std::string>& common) {
  c.method = choose_method(m, system_info(c), common, c.method_parameters);
  const MethodInfo& info = method_infos()[std::size_t(c.method)];
  c.method_name = info.name;
  c.method_config = m.json();
  c.stages = info.variant.key == "stages" ? info.variant.value.get<int>() : 0;
  const Node nw = m.object_or_empty("newton");
  nw.only({"tolerance", "max_iterations"});
  c.newton.tolerance = nw.positive("tolerance", c.newton.tolerance);
  c.newton.max_iterations = static_cast<int>(nw.integer("max_iterations", 1, 1000, c.newton.max_iterations));
  if (c.system >= 0 && !method_compiled_in(c.method)) {  // a build with some methods alone: compiled at first use
    c.declared = compiled_at_first_use(c.system);
    c.system = -1;
  }
}

void parse_system(const Node& sys, RunConfig& c) {
  if (sys.has("declare")) {
    if (sys.has("name"))
      throw ConfigError(sys.at("name"), "names a built-in system, and system.declare declares one: give one of them");
    sys.only({"declare", "parameters"});
    c.declared = declare_system(sys.object("declare"));
    c.system = -1;
    c.system_name = c.declared->name;
    const Node prm = sys.object_or_empty("parameters");
    read_declared_parameters(*c.declared, prm);
    c.system_parameters = prm.json();
    return;
  }
  if (auto resized = resized_system(sys)) {  // a size this build lacks: compiled at first use
    c.declared = std::move(resized);
    c.system = -1;
    c.system_name = c.declared->name;
    c.system_parameters = sys.has("parameters") ? sys.raw("parameters") : json::object();
    return;
  }
  c.system = choose_system(sys);
  c.system_name = system_infos()[std::size_t(c.system)].name;
  c.system_parameters = sys.has("parameters") ? sys.raw("parameters") : json::object();
}

}  // namespace

std::string describe_method(const RunConfig& c) { return describe_method(c.method, c.method_parameters); }

std::int64_t run_batch(const RunConfig& c, std::int64_t count) {
  return c.batch_size >= count ? count : (c.batch_size + observation_chunk - 1) / observation_chunk * observation_chunk;
}

// What a run will hold in memory: one batch of trajectories (q, p, q_prev
// and eight per-trajectory numbers), and every timeseries row until it ends
// where there are several batches (each adds to each row), a shard's or the
// caller keeps them (one batch of a whole run streams its rows to disk); the
// snapshots when sorted or kept; every final state when the caller keeps them.
void check_run_memory(const RunConfig& c, bool results_in_memory, const std::string& batch_key) {
  const double batch = double(std::min(c.size, c.batch_size));
  const double batch_bytes = batch * (3.0 * system_dof(c) + 8) * sizeof(Real);
  const bool streamed = !results_in_memory && c.shard_count <= 1 && run_batch(c, c.size) >= c.size;
  const double rows = double(timeseries_rows(c)), row_bytes = streamed ? 0 : rows * timeseries_row_bytes;
  // trajectories.csv is sorted by (id, step) in memory at the end of a run.
  const double snapshots = double(c.track_ids.size()) * double(snapshots_per_trajectory(c));
  if (c.output_format == "csv" || results_in_memory)
    refuse_beyond_memory("output.trajectories", snapshots * (2.0 * system_dof(c) + 8) * sizeof(Real),
                         std::to_string(std::int64_t(snapshots)) + " trajectory snapshots",
                         "follow fewer trajectories or raise output.trajectories.every, or write netcdf");
  if (results_in_memory && c.write_final_states)  // q, p and six numbers of every trajectory
    refuse_beyond_memory("ensemble.size", batch_bytes + double(c.size) * (2.0 * system_dof(c) + 6) * sizeof(Real),
                         "the final states of " + std::to_string(c.size) + " trajectories",
                         "run fewer trajectories per call, or set output.final_states to false");
  if (row_bytes > batch_bytes)
    refuse_beyond_memory("output.every", batch_bytes + row_bytes,
                         std::to_string(std::int64_t(rows)) + " timeseries rows (steps / every)",
                         results_in_memory || c.shard_count > 1
                             ? "raise output.every"
                             : "raise output.every, or run the ensemble as one batch (" + batch_key +
                                   " >= ensemble.size), which streams the rows to disk");
  else
    refuse_beyond_memory(c.batch_size < c.size ? batch_key : "ensemble.size", batch_bytes + row_bytes,
                         "batches of " + std::to_string(std::int64_t(batch)) + " trajectories",
                         "lower " + batch_key + " (the run goes through the ensemble batch by batch)");
}

namespace {

// output.checkpoint: {"every": N}, in the command's own unit (steps,
// iterations or shots of a batch); 0 without one.
std::int64_t checkpoint_every(const Node& out) {
  if (!out.has("checkpoint")) return 0;
  const Node ck = out.object("checkpoint");
  ck.only({"every"});
  return ck.integer("every", 1, INT64_MAX);
}

// on_this_machine: refuse what cannot fit in this machine's memory, and read the start draws.
RunConfig parse_run_config(const std::string& text, const std::string& source, bool on_this_machine,
                           const InMemoryRun* in_memory = nullptr) {
  const json j = parse_config_json(text, source);
  const Node top(j, "");
  top.only({"system", "method", "ensemble", "output", "backend", "precision"});
  RunConfig c;

  parse_system(top.object("system"), c);

  const Node m = top.object("method");
  parse_method(m, c, {"name", "dt", "steps", "newton"});
  c.dt = step_size(m, "dt");
  c.steps = m.integer("steps", 0, std::int64_t(1) << 40);

  const Node ens = top.object("ensemble");
  ens.only({"size", "seed", "batch_size", "initial"});
  c.initial = parse_initial(ens.object("initial"), system_info(c), in_memory);
  if (c.initial.kind == InitialSpec::Kind::states) {
    const auto n = static_cast<std::int64_t>(c.initial.states.size());
    c.size = ens.integer("size", 1, INT64_MAX, n);
    if (c.size != n)
      throw ConfigError(ens.at("size"), "is " + std::to_string(c.size) + " but ensemble.initial.states lists " +
                                            std::to_string(n) + " states");
  } else {
    c.size = ens.integer("size", 1, std::int64_t(1) << 34);
  }
  if (c.initial.kind == InitialSpec::Kind::draws && on_this_machine) load_start_draws(c);
  if (c.initial.kind == InitialSpec::Kind::canonical && c.initial.dt == 0) c.initial.dt = c.dt;
  c.seed = static_cast<std::uint64_t>(ens.integer("seed", 0, INT64_MAX, 0));
  c.batch_size = ens.integer("batch_size", 1, std::int64_t(1) << 30, c.batch_size);
  if (in_memory != nullptr && in_memory->batch_size != 0) {
    if (in_memory->batch_size < 1 || in_memory->batch_size > (std::int64_t(1) << 30))
      throw ConfigError("batch_size", "must be between 1 and 1073741824, got " + std::to_string(in_memory->batch_size));
    c.batch_size = in_memory->batch_size;
  }

  const Node out = top.object_or_empty("output");
  out.only({"every", "final_states", "checkpoint", "format", "trajectories"});
  c.output_every = out.integer("every", 1, INT64_MAX, std::max<std::int64_t>(1, c.steps / 100));
  c.output_every = std::min(c.output_every, std::max<std::int64_t>(1, c.steps));  // one interval at most the run
  c.write_final_states = out.boolean("final_states", true);
  c.checkpoint_every = checkpoint_every(out);
  static const std::string csv = "csv";
  c.output_format = out.string("format", {"csv", "netcdf"}, &csv);
  if (out.has("trajectories")) {
    const Node tr = out.object("trajectories");
    tr.only({"ids", "every"});
    if (!tr.has("ids")) throw ConfigError(tr.at("ids"), "is missing (the trajectory ids to follow)");
    const json& ids = tr.raw("ids");
    if (!ids.is_array() || ids.empty() || ids.size() > (std::size_t(1) << 20))
      throw ConfigError(tr.at("ids"), "must be an array of 1 to 2^20 trajectory ids");
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const std::string path = tr.at("ids") + "[" + std::to_string(i) + "]";
      if (!ids[i].is_number_integer() || ids[i].get<std::int64_t>() < 0 || ids[i].get<std::int64_t>() >= c.size)
        throw ConfigError(path, "must be a trajectory id from 0 to " + std::to_string(c.size - 1) + ", got " + show(ids[i]));
      c.track_ids.push_back(ids[i].get<std::int64_t>());
    }
    std::sort(c.track_ids.begin(), c.track_ids.end());
    if (const auto twice = std::adjacent_find(c.track_ids.begin(), c.track_ids.end()); twice != c.track_ids.end())
      throw ConfigError(tr.at("ids"), "lists trajectory " + std::to_string(*twice) + " twice");
    c.track_every = tr.integer("every", 1, INT64_MAX, c.output_every);
    c.track_every = std::min(c.track_every, std::max<std::int64_t>(1, c.steps));
  }

  if (on_this_machine) check_run_memory(c, in_memory != nullptr);

  static const std::string dbl = "double";
  if (top.has("backend")) c.backend = top.string("backend", backend_names());
  c.precision = top.has("precision") ? top.string("precision", {"double"}) : dbl;
  return c;
}

}  // namespace

RunConfig parse_config(const std::string& text, const std::string& source) { return parse_run_config(text, source, true); }
RunConfig parse_config_in_memory(const std::string& text, const std::string& source, const InMemoryRun& in_memory) {
  return parse_run_config(text, source, true, &in_memory);
}
RunConfig parse_config_as_written(const std::string& text, const std::string& source) {
  return parse_run_config(text, source, false);
}

namespace {

// A config is read whole, up to a bound: /dev/zero or a mistyped path to a
// data file is refused, not read until memory runs out.
constexpr std::streamsize max_config_bytes = std::streamsize(256) << 20;

}  // namespace

std::string read_config_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw ConfigError(path, "is a folder, not a config file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path, "cannot be read: " + std::string(std::strerror(errno)));
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, std::size_t(in.gcount()));
    if (std::streamsize(text.size()) > max_config_bytes)
      throw ConfigError(path, "is larger than 256 MiB, too large for a config (large ensembles start from "
                              "ensemble.initial.draws, a draws.nc file)");
  }
  if (in.bad()) throw ConfigError(path, "cannot be read: " + std::string(std::strerror(errno)));
  return text;
}

const SystemInfo& system_info(const RunConfig& c) {
  return c.declared ? c.declared->info : system_infos()[std::size_t(c.system)];
}

int system_dof(const RunConfig& c) { return system_info(c).dof; }

std::int64_t timeseries_rows(const RunConfig& c) { return (c.steps + c.output_every - 1) / c.output_every + 1; }

std::pair<std::int64_t, std::int64_t> shard_ids(const RunConfig& c, std::int64_t granule) {
  if (c.shard_count <= 1) return {0, c.size};
  const std::int64_t granules = (c.size + granule - 1) / granule;
  const auto cut = [&](std::int64_t k) { return std::min(c.size, granules * k / c.shard_count * granule); };
  return {cut(c.shard_index), cut(c.shard_index + 1)};
}

std::int64_t snapshots_per_trajectory(const RunConfig& c) {
  return c.track_ids.empty() ? 0 : (c.steps + c.track_every - 1) / c.track_every + 1;
}
std::int64_t snapshot_step(const RunConfig& c, std::int64_t k) { return std::min(c.steps, k * c.track_every); }
std::int64_t snapshot_index(const RunConfig& c, std::int64_t step) {
  return step >= c.steps ? snapshots_per_trajectory(c) - 1 : step / c.track_every;
}

namespace {

// A point of R^dof at `path`.
std::vector<Real> point(const json& v, const std::string& path, int dof, const std::string& what) {
  if (!v.is_array()) throw ConfigError(path, "must be an array of " + std::to_string(dof) + " numbers (" + what + ")");
  if (int(v.size()) != dof)
    throw ConfigError(path, "has " + std::to_string(v.size()) + " numbers, expected " + std::to_string(dof) + " (" +
                                what + ")");
  std::vector<Real> x;
  for (std::size_t i = 0; i < v.size(); ++i) x.push_back(Node::as_number(v[i], path + "[" + std::to_string(i) + "]"));
  return x;
}

std::vector<Real> point_at(const Node& node, const std::string& key, int dof, const std::string& what) {
  if (!node.has(key)) throw ConfigError(node.at(key), "is missing (" + what + ")");
  return point(node.raw(key), node.at(key), dof, what);
}

std::vector<std::vector<Real>> points(const Node& node, const std::string& key, int dof, const std::string& what) {
  if (!node.has(key)) throw ConfigError(node.at(key), "is missing");
  const json& arr = node.raw(key);
  if (!arr.is_array() || arr.empty()) throw ConfigError(node.at(key), "must be a non-empty array of points (" + what + ")");
  std::vector<std::vector<Real>> out;
  for (std::size_t i = 0; i < arr.size(); ++i)
    out.push_back(point(arr[i], node.at(key) + "[" + std::to_string(i) + "]", dof, what));
  return out;
}

constexpr std::int64_t max_shots = std::int64_t(1) << 31;

// A target and its result (TargetResult: target, p0, p(T) and a dozen
// numbers) are held until the shoot ends: refused before a grid or random
// set of them is generated if they cannot fit.
void refuse_targets_beyond_memory(const std::string& path, double count, int dof) {
  const double vector_bytes = 8.0 * dof + 40;  // a std::vector<Real> and its heap block
  refuse_beyond_memory(path, count * (4 * vector_bytes + 128), std::to_string(std::int64_t(count)) + " targets",
                       "fewer targets per shoot (several runs cover a larger set)");
}

void parse_targets(const Node& t, int dof, ShootSpec& s) {
  const int kinds = int(t.has("list")) + int(t.has("grid")) + int(t.has("random"));
  if (kinds != 1)
    throw ConfigError(t.at(kinds == 0 ? "list" : (t.has("random") ? "random" : "grid")),
                      kinds == 0 ? "is missing: give the targets as one of \"list\", \"grid\" or \"random\""
                                 : "give only one of \"list\", \"grid\" or \"random\"");
  t.only({"list", "grid", "random"});
  const std::string what = "a configuration q of the system";
  if (t.has("list")) {
    s.targets_kind = "list";
    s.targets = points(t, "list", dof, what);
    return;
  }
  const bool grid = t.has("grid");
  const Node g = t.object(grid ? "grid" : "random");
  g.only(grid ? std::set<std::string>{"min", "max", "count"} : std::set<std::string>{"min", "max", "count", "seed"});
  const std::vector<Real> lo = point_at(g, "min", dof, what), hi = point_at(g, "max", dof, what);
  for (int c = 0; c < dof; ++c) {
    if (!(hi[c] >= lo[c]))
      throw ConfigError(g.at("max") + "[" + std::to_string(c) + "]", "must be >= min[" + std::to_string(c) + "]");
    if (!std::isfinite(hi[c] - lo[c]))  // the targets lo + (hi - lo) t would not be numbers
      throw ConfigError(g.at("max") + "[" + std::to_string(c) + "]",
                        "is too far from min[" + std::to_string(c) + "]: max - min overflows a double");
  }
  if (grid) {
    s.targets_kind = "grid";
    if (!g.has("count")) throw ConfigError(g.at("count"), "is missing (points per coordinate)");
    const json& cnt = g.raw("count");
    if (!cnt.is_array() || int(cnt.size()) != dof)
      throw ConfigError(g.at("count"), "must be an array of " + std::to_string(dof) + " point counts, one per coordinate");
    std::vector<std::int64_t> counts;
    std::int64_t total = 1;
    for (int c = 0; c < dof; ++c) {
      const std::string path = g.at("count") + "[" + std::to_string(c) + "]";
      if (!cnt[c].is_number_integer() || cnt[c].get<std::int64_t>() < 1)
        throw ConfigError(path, "must be an integer >= 1, got " + show(cnt[c]));
      counts.push_back(cnt[c].get<std::int64_t>());
      if (counts.back() > 1 && hi[c] == lo[c])
        throw ConfigError(path, "is " + std::to_string(counts.back()) + " but min and max are equal");
      if (counts.back() > max_shots / total)
        throw ConfigError(g.at("count"), "gives more than " + std::to_string(max_shots) + " targets");
      total *= counts.back();
    }
    refuse_targets_beyond_memory(g.at("count"), double(total), dof);
    // Row-major order: the last coordinate varies fastest.
    for (std::int64_t i = 0; i < total; ++i) {
      std::vector<Real> q(dof);
      std::int64_t rest = i;
      for (int c = dof - 1; c >= 0; --c) {
        const std::int64_t j = rest % counts[c];
        rest /= counts[c];
        q[c] = counts[c] == 1 ? lo[c] : lo[c] + (hi[c] - lo[c]) * Real(j) / Real(counts[c] - 1);
      }
      s.targets.push_back(q);
    }
    return;
  }
  s.targets_kind = "random";
  const std::int64_t count = g.integer("count", 1, max_shots);
  refuse_targets_beyond_memory(g.at("count"), double(count), dof);
  const auto seed = static_cast<std::uint64_t>(g.integer("seed", 0, INT64_MAX, 0));
  for (std::int64_t i = 0; i < count; ++i) {
    CounterRng rng(seed, static_cast<std::uint64_t>(i));
    std::vector<Real> q(dof);
    for (int c = 0; c < dof; ++c) q[c] = lo[c] + (hi[c] - lo[c]) * rng.uniform();
    s.targets.push_back(q);
  }
}

void parse_guesses(const Node& g, int dof, ShootSpec& s) {
  g.only({"list", "toward", "random"});
  if (g.has("list")) s.guesses = points(g, "list", dof, "a covector p0 of the system");
  s.toward = g.boolean("toward", false);
  if (g.has("random")) {
    const Node r = g.object("random");
    r.only({"count", "scale", "seed"});
    s.random_guesses = r.integer("count", 1, 1 << 20);
    s.guess_scale = r.positive("scale", s.guess_scale);
    s.guess_seed = static_cast<std::uint64_t>(r.integer("seed", 0, INT64_MAX, 0));
  }
  if (s.guesses_per_target() == 0)
    throw ConfigError(g.at("list"), "no initial guesses: give a \"list\" of covectors, \"toward\": true, "
                                    "or \"random\": {\"count\": N, \"scale\": s}");
}

}  // namespace

RunConfig load_config_file(const std::string& path) { return parse_config(read_config_file(path), path); }

std::string canonical_config_file(const std::string& path) { return parse_config_json(read_config_file(path), path).dump(); }

ShootConfig parse_shoot_config(const std::string& text, const std::string& source) {
  const json j = parse_config_json(text, source);
  const Node top(j, "");
  top.only({"system", "method", "shoot", "output", "backend", "precision"});
  ShootConfig cfg;
  RunConfig& c = cfg.run;
  ShootSpec& s = cfg.shoot;

  const Node sys = top.object("system");
  parse_system(sys, c);
  if (system_info(c).family != Family::nonholonomic) {
    std::string allowed;
    for (const auto& info : system_infos())
      if (info.family == Family::nonholonomic) allowed += (allowed.empty() ? "" : ", ") + info.name;
    throw ConfigError(sys.at("name"), "shooting applies to the index-1 (nonholonomic) systems, whose every (q0, p0) "
                                      "starts a geodesic: " + allowed + "; got \"" + c.system_name + "\"");
  }
  const int dof = system_dof(c);

  const Node sh = top.object("shoot");
  sh.only({"q0", "time", "targets", "guesses", "newton", "continuation", "cut_locus", "accuracy", "nodes"});
  s.nodes = static_cast<int>(sh.integer("nodes", 1, kMaxShootingNodes, 1));
  s.q0 = point_at(sh, "q0", dof, "the start configuration q0");
  s.time = sh.positive("time");
  if (sh.has("accuracy")) {
    s.accuracy = sh.positive("accuracy");
    if (s.accuracy < 1e-13 || s.accuracy > 0.1)
      throw ConfigError(sh.at("accuracy"), "must be between 1e-13 (roundoff in q(T) is near there) and 0.1, got " +
                                               show(json(s.accuracy)));
  }

  const Node m = top.object("method");
  parse_method(m, c, {"name", "dt", "steps", "newton"});
  if (m.has("dt") && m.has("steps"))
    throw ConfigError(m.at("steps"), "give one of \"steps\" (dt = shoot.time / steps) and \"dt\", not both");
  if (s.accuracy > 0 && !m.has("dt") && !m.has("steps")) {
    // shoot.accuracy chooses the steps; this is the first count tried
    c.steps = (ShootSpec::start_steps + s.nodes - 1) / s.nodes * s.nodes;
    c.dt = s.time / Real(c.steps);
  } else if (!m.has("dt") && !m.has("steps")) {
    throw ConfigError(m.at("steps"), "give one of \"steps\" (dt = shoot.time / steps) and \"dt\", or "
                                     "shoot.accuracy to have the steps chosen");
  } else if (m.has("steps")) {
    c.steps = m.integer("steps", 1, s.accuracy > 0 ? ShootSpec::max_steps : 1 << 30);
    c.dt = s.time / Real(c.steps);
  } else {
    c.dt = step_size(m, "dt");
    const Real steps = std::round(s.time / c.dt);
    const Real most = s.accuracy > 0 ? Real(ShootSpec::max_steps) : Real(1 << 30);
    if (!(steps >= 1 && steps <= most) || std::fabs(steps * c.dt - s.time) > 1e-9 * s.time)
      throw ConfigError(m.at("dt"), "must divide shoot.time = " + show(json(s.time)) + " into whole steps, got " +
                                        show(json(c.dt)));
    c.steps = std::int64_t(steps);
    c.dt = s.time / steps;
  }
  check_step_size(c.dt, sh.at("time"));

  if (c.steps % s.nodes != 0)
    throw ConfigError(sh.at("nodes"), "must divide the " + std::to_string(c.steps) +
                                          " steps into arcs of equal length, got " + std::to_string(s.nodes));

  parse_targets(sh.object("targets"), dof, s);
  parse_guesses(sh.object("guesses"), dof, s);
  if (std::int64_t(s.targets.size()) > max_shots / s.guesses_per_target())
    throw ConfigError(sh.at("guesses"), "targets x guesses exceeds " + std::to_string(max_shots) + " shots");

  const Node nw = sh.object_or_empty("newton");
  nw.only({"tolerance", "max_iterations", "line_search", "max_backtracks", "stall_iterations"});
  s.tolerance = nw.positive("tolerance", s.tolerance);
  s.max_iterations = static_cast<int>(nw.integer("max_iterations", 1, 10000, s.max_iterations));
  s.line_search = nw.boolean("line_search", s.line_search);
  s.max_backtracks = static_cast<int>(nw.integer("max_backtracks", 0, 60, s.max_backtracks));
  s.stall_iterations = static_cast<int>(nw.integer("stall_iterations", 0, 10000, s.stall_iterations));

  if (sh.has("continuation")) {
    const Node ct = sh.object("continuation");
    ct.only({"rounds", "substeps"});
    s.continuation_rounds = static_cast<int>(ct.integer("rounds", 1, 1000, 3));
    s.continuation_substeps = static_cast<int>(ct.integer("substeps", 1, 10000, s.continuation_substeps));
  }
  const Node cut = sh.object_or_empty("cut_locus");
  cut.only({"margin"});
  s.cut_locus_margin = cut.non_negative("margin", s.cut_locus_margin);
  if (s.cut_locus_margin > 1)
    throw ConfigError(cut.at("margin"), "must be at most 1 (conjugate points are searched up to (1 + margin) T), "
                                        "got " + show(json(s.cut_locus_margin)));

  const Node out = top.object_or_empty("output");
  out.only({"geodesics", "checkpoint"});
  c.checkpoint_every = checkpoint_every(out);  // shots
  if (out.has("geodesics")) {
    const Node g = out.object("geodesics");
    g.only({"every", "targets"});
    s.geodesic_every = g.integer("every", 1, INT64_MAX);  // beyond the steps: the two ends only
    s.geodesic_targets = g.integer("targets", 1, INT64_MAX, std::int64_t(s.targets.size()));
    if (s.geodesic_targets > std::int64_t(s.targets.size()))  // a count larger than what it counts
      throw ConfigError(g.at("targets"), "is " + std::to_string(s.geodesic_targets) + ", more than the " +
                                             std::to_string(s.targets.size()) + " targets of shoot.targets");
  }

  static const std::string dbl = "double";
  if (top.has("backend")) c.backend = top.string("backend", backend_names());
  c.precision = top.has("precision") ? top.string("precision", {"double"}) : dbl;
  c.size = std::int64_t(s.targets.size());
  return cfg;
}

ShootConfig load_shoot_config_file(const std::string& path) {
  return parse_shoot_config(read_config_file(path), path);
}

SampleConfig parse_sample_config(const std::string& text, const std::string& source) {
  const json j = parse_config_json(text, source);
  const Node top(j, "");
  if (top.has("ensemble") && !top.has("sample"))
    throw ConfigError("sample", "is missing: this is a run config, for `tether run` (a sampling config has \"sample\" "
                                "where a run config has \"ensemble\")");
  top.only({"system", "method", "sample", "output", "backend", "precision"});
  SampleConfig cfg;
  RunConfig& c = cfg.run;
  SampleSpec& s = cfg.sample;

  const Node sys = top.object("system");
  parse_system(sys, c);
  const SystemInfo& info = system_info(c);
  if (!can_sample(info)) {
    std::vector<std::string> allowed;  // names, once each (chain has three variants)
    for (const auto& other : system_infos())
      if (can_sample(other) && std::find(allowed.begin(), allowed.end(), other.name) == allowed.end())
        allowed.push_back(other.name);
    throw ConfigError(sys.at("name"), "sampling applies to the holonomic systems, whose chains move on "
                                      "N = {g(q) = 0} by RATTLE-type steps: " + join(allowed) + "; got \"" +
                                          c.system_name + "\", a " + family_name(info.family) + " system");
  }

  const Node m = top.object("method");
  parse_method(m, c, {"name", "dt", "steps", "newton"});
  const MethodInfo& method = method_infos()[std::size_t(c.method)];
  if (!can_sample(method)) {
    std::vector<std::string> allowed;
    for (int k : info.methods) {
      const MethodInfo& other = method_infos()[std::size_t(k)];
      if (can_sample(other) && std::find(allowed.begin(), allowed.end(), other.name) == allowed.end())
        allowed.push_back(other.name);
    }
    throw ConfigError(m.at("name"), "\"" + c.method_name + "\" cannot run a Monte Carlo chain: its proposals must "
                                    "come from a symmetric, symplectic one-step method (for " + c.system_name +
                                        ": " + join(allowed) + ")");
  }
  c.dt = step_size(m, "dt");

  const Node sm = top.object("sample");
  sm.only({"algorithm", "metric", "max_depth", "max_energy_error", "chains", "draws", "warmup", "thin", "seed", "batch_size",
           "temperature", "jitter", "refresh_angle", "target_acceptance", "reversibility_tolerance", "initial"});
  static const std::string static_algorithm = "static";
  s.dynamic = sm.string("algorithm", {"static", "dynamic"}, &static_algorithm) == "dynamic";
  if (s.dynamic) {
    // The trajectory's length is the sampler's to choose: nothing may fix it.
    if (m.has("steps"))
      throw ConfigError(m.at("steps"), "fixes L, which sample.algorithm \"dynamic\" chooses per transition "
                                       "(at most 2^sample.max_depth - 1 steps); remove it");
    if (sm.has("refresh_angle"))
      throw ConfigError(sm.at("refresh_angle"), "applies to the static algorithm: a dynamic transition draws its "
                                                "momentum afresh");
    s.max_depth = int(sm.integer("max_depth", 1, 20, s.max_depth));
    s.max_energy_error = sm.positive("max_energy_error", s.max_energy_error);
    c.steps = 1;
  } else {
    for (const char* key : {"max_depth", "max_energy_error"})
      if (sm.has(key))
        throw ConfigError(sm.at(key), "applies to sample.algorithm \"dynamic\" (this sample is static)");
    c.steps = m.integer("steps", 1, 1 << 20);
  }
  s.chains = sm.integer("chains", 1, std::int64_t(1) << 34);
  s.draws = sm.integer("draws", 1, std::int64_t(1) << 40);
  s.warmup = sm.integer("warmup", 0, std::int64_t(1) << 40, 0);
  s.thin = sm.integer("thin", 1, std::int64_t(1) << 20, 1);
  if (s.draws > (std::int64_t(1) << 40) / s.thin - s.warmup / s.thin)
    throw ConfigError(sm.at("draws"), "with thin and warmup exceeds 2^40 iterations per chain");
  s.temperature = sm.positive("temperature", s.temperature);
  if (sm.has("jitter")) {
    const Node jt = sm.object("jitter");
    jt.only({"dt", "steps"});
    if (s.dynamic && jt.has("steps"))
      throw ConfigError(jt.at("steps"), "jitters L, which sample.algorithm \"dynamic\" chooses itself");
    s.step_jitter = jt.non_negative("dt", 0.0);
    s.steps_jitter = jt.non_negative("steps", 0.0);
    if (!(s.step_jitter < 1)) throw ConfigError(jt.at("dt"), "must be below 1 (h is drawn in h (1 +- jitter))");
    if (!(s.steps_jitter < 1)) throw ConfigError(jt.at("steps"), "must be below 1 (L is drawn in L (1 +- jitter))");
  }
  s.refresh_angle = sm.positive("refresh_angle", s.refresh_angle);
  if (s.refresh_angle > Real(1.5707963267948966))
    throw ConfigError(sm.at("refresh_angle"), "must be in (0, pi/2]: p <- cos(a) p + sin(a) xi, pi/2 a full "
                                              "refresh; got " + show(json(s.refresh_angle)));
  s.target_acceptance = sm.positive("target_acceptance", s.target_acceptance);
  if (!(s.target_acceptance < 1))
    throw ConfigError(sm.at("target_acceptance"), "must be in (0, 1), got " + show(json(s.target_acceptance)));
  s.reversibility_tolerance = sm.positive("reversibility_tolerance", s.reversibility_tolerance);
  static const std::string mass_metric = "mass";
  const std::string metric = sm.string("metric", {"mass", "identity", "diag", "dense"}, &mass_metric);
  for (MetricKind kind : {MetricKind::mass, MetricKind::identity, MetricKind::diag, MetricKind::dense})
    if (metric == metric_name(kind)) s.metric = kind;
  if (s.metric != MetricKind::mass && !method.takes_metric)
    throw ConfigError(sm.at("metric"), "\"" + metric + "\" runs with method \"rattle\" or a \"composition\" of it "
                                       "only (their kicks stay volume-preserving with the metric's log-determinant "
                                       "force); method is " + describe_method(c));
  if ((s.metric == MetricKind::diag || s.metric == MetricKind::dense) && s.warmup < 20)
    throw ConfigError(sm.at("metric"), "\"" + metric + "\" is estimated in warm-up windows and needs "
                                       "sample.warmup >= 20 (as Stan's), got " + std::to_string(s.warmup));
  c.seed = static_cast<std::uint64_t>(sm.integer("seed", 0, INT64_MAX, 0));
  c.batch_size = sm.integer("batch_size", 1, std::int64_t(1) << 30, c.batch_size);
  if (sm.has("initial")) {
    c.initial = parse_initial(sm.object("initial"), info);
    if (c.initial.kind == InitialSpec::Kind::canonical || c.initial.kind == InitialSpec::Kind::draws)
      throw ConfigError(sm.at("initial"), "starts tether run from a sample; tether sample itself starts from "
                                          "\"thermal\", \"around\" or explicit states and runs its own warm-up");
  } else {
    if (!info.samples_configurations)
      throw ConfigError(sm.at("initial"), "is missing: " + c.system_name + ", a declared system, has no sampler of its "
                                          "own manifold to start the chains from; give {\"sampler\": \"around\", "
                                          "\"q\": [...], \"p\": [...]} (projected onto the manifold) or explicit states");
    c.initial.kind = InitialSpec::Kind::thermal;
    c.initial.temperature = s.temperature;
    c.initial.path = "sample";  // the start's temperature is sample.temperature
  }
  if (c.initial.kind == InitialSpec::Kind::states && std::int64_t(c.initial.states.size()) != s.chains)
    throw ConfigError(sm.at("initial.states"), "lists " + std::to_string(c.initial.states.size()) +
                                                   " states for " + std::to_string(s.chains) + " chains");
  c.size = s.chains;
  const Node out = top.object_or_empty("output");
  out.only({"checkpoint"});  // draws.nc is the output
  c.checkpoint_every = checkpoint_every(out);  // iterations of a batch

  static const std::string dbl = "double";
  if (top.has("backend")) c.backend = top.string("backend", backend_names());
  c.precision = top.has("precision") ? top.string("precision", {"double"}) : dbl;
  return cfg;
}

std::string with_sample_algorithm(const std::string& text, const std::string& source, const std::string& algorithm) {
  if (algorithm != "static" && algorithm != "dynamic")
    throw ConfigError("algorithm", "must be \"static\" or \"dynamic\", got \"" + algorithm + "\"");
  json j = parse_config_json(text, source);
  if (!j.is_object() || !j.contains("sample") || !j["sample"].is_object()) return text;  // the parser says what is wrong
  json& s = j["sample"];
  s["algorithm"] = algorithm;
  if (algorithm == "dynamic") {
    s.erase("refresh_angle");
    if (s.contains("jitter") && s["jitter"].is_object()) s["jitter"].erase("steps");
    if (j.contains("method") && j["method"].is_object()) j["method"].erase("steps");
  } else {
    s.erase("max_depth");
    s.erase("max_energy_error");
  }
  return j.dump();
}

SampleConfig load_sample_config_file(const std::string& path) {
  return parse_sample_config(read_config_file(path), path);
}

namespace {

bool has_top_level_key(const std::string& path, const char* key) {
  try {
    const json j = parse_config_json(read_config_file(path), path);
    return j.is_object() && j.contains(key);
  } catch (const std::exception&) {
    return false;  // the run parser reports what is wrong
  }
}

}  // namespace

std::string config_command(const std::string& text, const std::string& source) {
  const json j = parse_config_json(text, source);
  if (j.is_object() && j.contains("shoot")) return "shoot";
  if (j.is_object() && j.contains("sample")) return "sample";
  return "run";
}

bool is_shoot_config_file(const std::string& path) { return has_top_level_key(path, "shoot"); }
bool is_sample_config_file(const std::string& path) { return has_top_level_key(path, "sample"); }
bool is_run_config_file(const std::string& path) {
  return has_top_level_key(path, "ensemble") && !is_shoot_config_file(path) && !is_sample_config_file(path);
}

}  // namespace tether

// tether_bench: trajectory-steps per second for every (backend, system,
// method, ensemble size), printed as one JSON document on stdout. Progress
// goes to stderr. See bench/README.md.
//
// Rate = trajectories * steps / RunResult::integration_seconds, i.e. the time
// spent inside Backend::advance only (initial-state preparation, observation
// and host<->device copies are excluded). Each point is run --repeats times and
// the median (default) or best time is reported; every repeat's time is kept.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sched.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "config/config.hpp"
#include "engine/engine.hpp"

#ifndef TETHER_BENCH_GIT_COMMIT
#define TETHER_BENCH_GIT_COMMIT "unknown"
#endif
#ifndef TETHER_BENCH_GIT_DIRTY
#define TETHER_BENCH_GIT_DIRTY -1
#endif
#ifndef TETHER_BENCH_BUILD_TYPE
#define TETHER_BENCH_BUILD_TYPE "unknown"
#endif

namespace {

using json = nlohmann::ordered_json;

// ---------------------------------------------------------------- the cases

const char* const kHolonomic = "holonomic";
const char* const kNonholonomic = "nonholonomic";
// The method library: each method on the systems it applies to, next
// to rattle on the same system (pairs listed per method, not per family).
const char* const kLibrary = "library";
const std::vector<std::string> kFamilies{kHolonomic, kNonholonomic, kLibrary};

struct SystemCase {
  std::string label;        // what records call it: spherical_pendulum, double_pendulum, chain4, heisenberg, ...
  std::string engine_name;  // system.name in the config
  std::string family;       // holonomic | nonholonomic | library (library-only systems)
  int beads = 0;            // chains only
  double dt = 0;
  double temperature = 0;   // thermal sampler only
  json parameters;
  json initial;             // ensemble.initial (without the seed, which is --seed)
};

struct MethodCase {
  std::string label;        // what records call it: rattle, gauss_legendre2, lie_rattle_cayley, ...
  std::string engine_name;  // method.name in the config
  int stages = 0;           // gauss_legendre only (1, 2, 3)
  std::string family;
  json options = json::object();   // further method keys (library: base, scheme, retraction, ...)
  std::vector<std::string> systems;  // library: the system labels it runs on
};

// Holonomic and nonholonomic methods run on every system of their family;
// a library method on the systems it lists.
bool pairs(const MethodCase& m, const SystemCase& s) {
  if (m.family == kLibrary) return std::find(m.systems.begin(), m.systems.end(), s.label) != m.systems.end();
  return m.family == s.family;
}

json around(std::vector<double> q, std::vector<double> p, double position_spread, double momentum_spread) {
  return json{{"sampler", "around"},
              {"q", q},
              {"p", p},
              {"position_spread", position_spread},
              {"momentum_spread", momentum_spread}};
}

// Parameters and step sizes follow configs/*.json (the chain uses the
// parameters of configs/chain16.json at every bead count). Nonholonomic
// systems take dt, parameters and the initial cloud from configs/heisenberg.json,
// heisenberg_vakonomic.json (its one state, given a momentum spread of 0.1),
// martinet.json, martinet_lagrangian.json and parallel_parking_bowl.json.
std::vector<SystemCase> all_systems() {
  std::vector<SystemCase> v;
  auto thermal = [](double kT) { return json{{"sampler", "thermal"}, {"temperature", kT}}; };
  v.push_back({"spherical_pendulum", "spherical_pendulum", kHolonomic, 0, 0.01, 0.5,
               json{{"mass", 1.0}, {"length", 1.0}, {"gravity", 9.81}}, thermal(0.5)});
  v.push_back({"double_pendulum", "double_pendulum", kHolonomic, 0, 0.005, 0.5,
               json{{"mass1", 1.0}, {"mass2", 1.0}, {"length1", 1.0}, {"length2", 1.0}, {"gravity", 9.81}},
               thermal(0.5)});
  for (int beads : tether::chain_sizes()) {
    json p{{"beads", beads},
           {"mass", 1.0},
           {"bond_length", 1.0},
           {"bend_stiffness", 60.0},
           {"bend_angle_degrees", 112.0},
           {"torsion", {1.116, 1.462, -1.578, -0.368, 3.156, -3.788}}};
    v.push_back({"chain" + std::to_string(beads), "chain", kHolonomic, beads, 0.002, 1.0, p, thermal(1.0)});
  }
  v.push_back({"heisenberg", "heisenberg", kNonholonomic, 0, 0.05, 0, json::object(),
               around({0, 0, 0}, {1, 0, 0}, 0.0, 1.0)});
  v.push_back({"heisenberg_vakonomic", "heisenberg_vakonomic", kNonholonomic, 0, 0.1, 0, json::object(),
               around({0, 0, 0}, {0.1, 0.3, 1.0}, 0.0, 0.1)});
  v.push_back({"martinet", "martinet", kNonholonomic, 0, 0.02, 0, json{{"beta", 0.5}},
               around({0, 0, 0}, {0, 1, 0}, 0.0, 0.3)});
  v.push_back({"martinet_lagrangian", "martinet_lagrangian", kNonholonomic, 0, 0.02, 0, json{{"beta", 0.5}},
               around({0, 0, 0}, {0, 1, 0}, 0.0, 0.3)});
  v.push_back({"parallel_parking", "parallel_parking", kNonholonomic, 0, 0.05, 0,
               json{{"length", 1.0}, {"alpha", 1.0}, {"beta", 1.0}, {"potential", "bowl"}},
               around({0.5, 0.2, 0.1, 0.3}, {0, 0, 0, 0}, 0.1, 0.1)});
  // Library-only systems, from configs/rigid_body_lie_rattle.json,
  // rigid_chain_double_pendulum.json, kepler_newmark.json and
  // magnetic_sphere_variational.json; the library also uses chain8 and
  // spherical_pendulum above.
  v.push_back({"rigid_body", "rigid_body", kLibrary, 0, 0.01, 1.0,
               json{{"inertia", {1.0, 1.5, 2.0}}, {"mass", 1.0}, {"gravity", 0.0}}, thermal(1.0)});
  v.push_back({"rigid_chain2", "rigid_chain", kLibrary, 0, 0.005, 1.0,
               json{{"links", 2}, {"inertia", {0.1, 0.1, 0.02}}, {"mass", 1.0}, {"length", 1.0}, {"gravity", 9.81}},
               thermal(1.0)});
  v.push_back({"kepler", "kepler", kLibrary, 0, 0.01, 0, json{{"mass", 1.0}, {"mu", 1.0}},
               around({1.0, 0.0}, {0.0, 1.2}, 0.02, 0.02)});
  v.push_back({"magnetic_sphere", "magnetic_sphere", kLibrary, 0, 0.05, 1.0,
               json{{"mass", 1.0}, {"kappa", 0.5}, {"field", 1.5}, {"gravity", 2.0}}, thermal(1.0)});
  return v;
}

// Every method of the engine, per family; gauss_legendre becomes one case per
// stage count (gauss_legendre1/2/3: orders 2, 4, 6).
std::vector<MethodCase> all_methods() {
  std::vector<MethodCase> v;
  const json none = json::object();
  for (const auto& m : tether::holonomic_method_names())
    if (m != "composition")  // needs a base and a scheme: the library's cases below
      v.push_back({m, m, 0, kHolonomic, none, {}});
  for (const auto& m : tether::nonholonomic_method_names()) {
    if (m == "gauss_legendre")
      for (int s = 1; s <= 3; ++s) v.push_back({m + std::to_string(s), m, s, kNonholonomic, none, {}});
    else
      v.push_back({m, m, 0, kNonholonomic, none, {}});
  }
  // The library, rattle first as the yardstick on each system.
  // magnetic_sphere has no rattle (its Lagrangian has a configuration-dependent
  // mass and a magnetic term: only the variational family applies).
  auto lib = [&](std::string label, std::string name, json options, std::vector<std::string> systems) {
    v.push_back({std::move(label), std::move(name), 0, kLibrary, std::move(options), std::move(systems)});
  };
  const std::vector<std::string> rigid{"rigid_body", "rigid_chain2"};
  lib("rattle", "rattle", none, {"chain8", "spherical_pendulum", "rigid_body", "rigid_chain2", "kepler"});
  lib("composition_rattle_triple_jump", "composition", json{{"base", "rattle"}, {"scheme", "triple_jump"}}, {"chain8"});
  lib("composition_rattle_suzuki", "composition", json{{"base", "rattle"}, {"scheme", "suzuki"}}, {"chain8"});
  lib("composition_rattle_yoshida6", "composition", json{{"base", "rattle"}, {"scheme", "yoshida6"}}, {"chain8"});
  lib("composition_rattle_kahan_li8", "composition", json{{"base", "rattle"}, {"scheme", "kahan_li8"}}, {"chain8"});
  lib("composition_midpoint_triple_jump", "composition",
      json{{"base", "constrained_midpoint"}, {"scheme", "triple_jump"}}, {"chain8"});
  lib("composition_euler_intrinsic_triple_jump", "composition",
      json{{"base", "symplectic_euler"}, {"form", "intrinsic"}, {"scheme", "triple_jump"}}, {"chain8"});
  lib("composition_euler_extrinsic_triple_jump", "composition",
      json{{"base", "symplectic_euler"}, {"form", "extrinsic"}, {"scheme", "triple_jump"}}, {"chain8"});
  lib("null_space_rattle", "null_space_rattle", none, rigid);
  for (const char* r : {"exp", "cayley"}) {
    lib(std::string("lie_rattle_") + r, "lie_rattle", json{{"retraction", r}}, rigid);
    lib(std::string("lie_lobatto_") + r, "lie_lobatto", json{{"retraction", r}}, rigid);
  }
  lib("theta_retraction_0", "theta_retraction", json{{"theta", 0.0}}, {"kepler"});
  lib("theta_retraction_0.5", "theta_retraction", json{{"theta", 0.5}}, {"kepler"});
  lib("newmark", "newmark", json{{"gamma", 0.5}, {"beta", 0.25}}, {"kepler"});
  lib("sphere_retraction_projection", "sphere_retraction", json{{"retraction", "projection"}}, {"spherical_pendulum"});
  lib("sphere_retraction_exp", "sphere_retraction", json{{"retraction", "exp"}}, {"spherical_pendulum"});
  lib("variational_rk4_fixed_point", "variational", json{{"layer", "rk4"}, {"alpha_plus", 0.5}, {"solver", "fixed_point"}},
      {"magnetic_sphere"});
  lib("variational_rk4_newton", "variational", json{{"layer", "rk4"}, {"alpha_plus", 0.5}, {"solver", "newton"}},
      {"magnetic_sphere"});
  lib("variational_heun_fixed_point", "variational",
      json{{"layer", "heun"}, {"alpha_plus", 0.5}, {"solver", "fixed_point"}}, {"magnetic_sphere"});
  return v;
}

std::string config_text(const SystemCase& s, const MethodCase& method, const std::string& backend,
                        std::int64_t trajectories, std::int64_t steps, std::uint64_t seed) {
  json c;
  c["system"] = json{{"name", s.engine_name}, {"parameters", s.parameters}};
  c["method"] = json{{"name", method.engine_name}, {"dt", s.dt}, {"steps", steps}};
  if (method.stages > 0) c["method"]["stages"] = method.stages;
  c["method"].update(method.options);
  c["ensemble"] = json{{"size", trajectories}, {"seed", seed}, {"initial", s.initial}};
  c["output"] = json{{"every", std::max<std::int64_t>(1, steps)}, {"final_states", false}};
  c["backend"] = backend;
  return c.dump();
}

// ---------------------------------------------------------------- helpers

std::vector<std::string> split_list(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  for (const auto& item : in) {
    std::stringstream ss(item);
    std::string tok;
    while (std::getline(ss, tok, ',')) {
      tok.erase(0, tok.find_first_not_of(" \t"));
      tok.erase(tok.find_last_not_of(" \t") + 1);
      if (!tok.empty()) out.push_back(tok);
    }
  }
  return out;
}

// "1000", "1e5", "1E6", "250k" -> integer count.
std::int64_t parse_count(const std::string& s, const std::string& what) {
  std::string t = s;
  double mult = 1;
  if (!t.empty() && (t.back() == 'k' || t.back() == 'K')) mult = 1e3, t.pop_back();
  else if (!t.empty() && (t.back() == 'm' || t.back() == 'M')) mult = 1e6, t.pop_back();
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(t, &used);
  } catch (...) {
    used = 0;
  }
  x *= mult;
  if (used != t.size() || t.empty() || !(x >= 1) || x > 1e12 || x != std::floor(x))
    throw CLI::ValidationError(what, "\"" + s + "\" is not a positive integer count (e.g. 1000, 1e5, 250k)");
  return static_cast<std::int64_t>(x);
}

std::string shell_quote(const std::string& a) {
  if (!a.empty() && a.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+=./:,@%") ==
                        std::string::npos)
    return a;
  std::string q = "'";
  for (char ch : a) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trim(std::string s) {
  s.erase(0, s.find_first_not_of(" \t\r\n"));
  s.erase(s.find_last_not_of(" \t\r\n") + 1);
  return s;
}

json machine_info() {
  json m;
  char host[256] = {0};
  m["hostname"] = gethostname(host, sizeof host - 1) == 0 ? std::string(host) : std::string("unknown");

  // CPU model and physical cores from /proc/cpuinfo (x86 "model name";
  // aarch64 kernels often list no model, then "unknown").
  std::string model = "unknown";
  std::set<std::pair<std::string, std::string>> cores;
  std::string phys, core;
  std::istringstream info(read_file("/proc/cpuinfo"));
  for (std::string line; std::getline(info, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (model == "unknown" && (key == "model name" || key == "Model" || key == "cpu model") && !value.empty())
      model = value;
    if (key == "physical id") phys = value;
    if (key == "core id") {
      core = value;
      cores.insert({phys, core});
    }
  }
  m["cpu_model"] = model;
  m["logical_cpus"] = std::thread::hardware_concurrency();
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    m["available_cpus"] = CPU_COUNT(&set);
  else
    m["available_cpus"] = nullptr;
  if (!cores.empty())
    m["physical_cores"] = cores.size();
  else
    m["physical_cores"] = nullptr;
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  m["omp_max_threads"] = threads;
  {
    std::istringstream mem(read_file("/proc/meminfo"));
    for (std::string line; std::getline(mem, line);)
      if (line.rfind("MemTotal:", 0) == 0) {
        m["memory_gib"] = std::round(std::stod(line.substr(9)) / (1024.0 * 1024.0) * 10) / 10;
        break;
      }
  }
  m["cuda_built"] = tether::cuda_built();
  m["cuda_devices"] = tether::cuda_device_count();
  return m;
}

json build_info() {
  json b;
  b["git_commit"] = TETHER_BENCH_GIT_COMMIT;
  const int dirty = TETHER_BENCH_GIT_DIRTY;
  if (dirty < 0)
    b["git_dirty"] = nullptr;
  else
    b["git_dirty"] = dirty != 0;
  b["build_type"] = TETHER_BENCH_BUILD_TYPE;
#if defined(__clang__)
  b["compiler"] = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  b["compiler"] = std::string("gcc ") + __VERSION__;
#else
  b["compiler"] = "unknown";
#endif
#ifdef NDEBUG
  b["ndebug"] = true;
#else
  b["ndebug"] = false;
#endif
  return b;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// ---------------------------------------------------------------- measuring

struct Measurement {
  std::vector<double> seconds, wall;
  std::int64_t failed = 0;
  double newton_mean = 0;
};

// Runs `repeats` times, then on (up to 20 x repeats runs in all) while the
// timed seconds add up to less than min_seconds, so that short points are not
// decided by one noisy sub-millisecond run.
Measurement measure(const SystemCase& s, const MethodCase& method, const std::string& backend,
                    std::int64_t trajectories, std::int64_t steps, int repeats, std::uint64_t seed,
                    double min_seconds = 0) {
  const tether::RunConfig cfg = tether::parse_config(config_text(s, method, backend, trajectories, steps, seed),
                                                     "bench:" + s.label + "/" + method.label);
  Measurement m;
  tether::RunOptions opt;  // no sink, no progress callback
  double total = 0;
  for (int r = 0; r < 20 * repeats && (r < repeats || total < min_seconds); ++r) {
    const tether::RunResult res = tether::run(cfg, opt);
    total += res.integration_seconds;
    m.seconds.push_back(res.integration_seconds);
    m.wall.push_back(res.wall_seconds);
    m.failed = std::max(m.failed, res.failed);
    m.newton_mean = res.newton_mean;
  }
  return m;
}

// Largest 1, 2 or 5 times a power of ten not above x (at least 1).
std::int64_t nice_floor(double x) {
  if (!(x >= 1)) return 1;
  if (x > 1e15) x = 1e15;
  double p = std::pow(10.0, std::floor(std::log10(x)));
  for (double m : {5.0, 2.0, 1.0})
    if (m * p <= x) return static_cast<std::int64_t>(m * p);
  return static_cast<std::int64_t>(p);
}

std::string loadavg() { return trim(read_file("/proc/loadavg")); }

std::vector<std::int64_t> parse_sizes(const std::vector<std::string>& args, const std::string& what) {
  std::vector<std::int64_t> sizes;
  for (const auto& s : split_list(args)) sizes.push_back(parse_count(s, what));
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  if (sizes.empty()) throw CLI::ValidationError(what, "no sizes given");
  return sizes;
}

// One family's part of the plan: its systems and methods pair with each other
// only (the engine refuses the other family's methods).
struct FamilyPlan {
  std::string family;
  std::vector<SystemCase> systems;
  std::vector<MethodCase> methods;
  std::vector<std::int64_t> sizes;
  std::int64_t steps = 0;
  int repeats = 0;
  std::int64_t reference_size = 0;
};

std::string fmt_count(std::int64_t n) {
  char buf[32];
  const double l = std::log10(double(n));
  if (n >= 1000 && l == std::floor(l))
    std::snprintf(buf, sizeof buf, "1e%d", int(l));
  else
    std::snprintf(buf, sizeof buf, "%lld", (long long)n);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + shell_quote(argv[i]);

  CLI::App app{"tether_bench: trajectory-steps per second per backend, system, method and ensemble size (JSON on stdout)"};
  std::vector<std::string> backends_arg, methods_arg, systems_arg, sizes_arg;
  std::int64_t steps_arg = 0, reference_steps = 0;
  std::string reference_size_arg, statistic = "median", output_path, family_arg = "all";
  int repeats = 0, reference_repeats = 0, threads = 0;
  double reference_budget = -1, min_time = -1;
  bool quick = false, no_warmup = false, quiet = false;
  std::uint64_t seed = 1;

  app.add_option("--family", family_arg,
                 "all, holonomic, nonholonomic or library: which systems (and so which methods) run (default all)")
      ->check(CLI::IsMember({"all", kHolonomic, kNonholonomic, kLibrary}));
  app.add_option("--backends", backends_arg,
                 "comma list of reference, cpu, cuda (default: reference,cpu and cuda when a device is present)")
      ->delimiter(',');
  app.add_option("--methods", methods_arg,
                 "comma list of methods; holonomic: symplectic_euler_a, symplectic_euler_b, shake, rattle, "
                 "constrained_midpoint; nonholonomic: gauss_legendre1, gauss_legendre2, gauss_legendre3 "
                 "(\"gauss_legendre\" = all three), symplectic_euler, stormer_verlet; library: rattle, composition_*, "
                 "null_space_rattle, lie_rattle_exp/cayley, lie_lobatto_exp/cayley, theta_retraction_0/0.5, newmark, "
                 "sphere_retraction_projection/exp, variational_* (an engine name stands for all its cases). Each "
                 "system runs the listed methods that apply to it (default: all)")
      ->delimiter(',');
  app.add_option("--systems", systems_arg,
                 "comma list of spherical_pendulum, double_pendulum, chain4, chain8, chain16 (\"chain\" = all three "
                 "chains), heisenberg, heisenberg_vakonomic, martinet, martinet_lagrangian, parallel_parking, "
                 "rigid_body, rigid_chain2, kepler, magnetic_sphere (default: all of --family)")
      ->delimiter(',');
  app.add_option("--sizes", sizes_arg,
                 "comma list of ensemble sizes for every family, e.g. 1e3,1e4 (default holonomic 1e3,1e4,1e5,1e6, "
                 "--quick 1e3,1e4,1e5; nonholonomic and library 1e2,1e3,1e4, --quick 1e2,1e3)")
      ->delimiter(',');
  app.add_option("--steps", steps_arg,
                 "steps per run for cpu and cuda, every family (default holonomic 100, nonholonomic 10, library 20; "
                 "--quick 5)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 30));
  app.add_option("--repeats", repeats,
                 "runs per point for cpu and cuda, every family (default holonomic 5, nonholonomic and library 3; "
                 "--quick 3)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--min-time", min_time,
                 "cpu/cuda: keep repeating a point (up to 20 x --repeats runs) until its runs add up to this many "
                 "seconds (default 0.5; --quick 0.2)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--statistic", statistic, "median or best of the repeats")
      ->check(CLI::IsMember({"median", "best"}));
  app.add_option("--reference-size", reference_size_arg,
                 "largest trajectory count for the reference backend (default: the smallest size of each family)");
  app.add_option("--reference-steps", reference_steps, "steps for the reference backend (default 5; --quick 2)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 30));
  app.add_option("--reference-repeats", reference_repeats, "runs per reference point (default 3)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--reference-budget", reference_budget,
                 "seconds per reference point, all repeats together: a pilot run sets the trajectory count, "
                 "at most --reference-size (default 20; --quick 3; 0: always --reference-size)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--threads", threads, "OpenMP threads for the cpu backend (default: all)")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "ensemble seed (thermal and around samplers)");
  app.add_option("-o,--output", output_path, "also write the JSON document to this file");
  app.add_flag("--quick", quick,
               "small preset for a 2-core CPU machine: sizes 1e3,1e4,1e5 (nonholonomic, library 1e2,1e3), 5 steps, "
               "3 repeats; reference 2 steps within 3 s per point (explicit options still win)");
  app.add_flag("--no-warmup", no_warmup, "skip the untimed warm-up run per (backend, system, method)");
  app.add_flag("-q,--quiet", quiet, "no progress on stderr");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  try {
    // ---- resolve the plan
    if (min_time < 0) min_time = quick ? 0.2 : 0.5;
    if (reference_steps == 0) reference_steps = quick ? 2 : 5;
    if (reference_repeats == 0) reference_repeats = 3;
    if (reference_budget < 0) reference_budget = quick ? 3 : 20;
    const std::vector<std::int64_t> sizes_given =
        sizes_arg.empty() ? std::vector<std::int64_t>{} : parse_sizes(sizes_arg, "--sizes");
    const std::int64_t reference_size_given =
        reference_size_arg.empty() ? 0 : parse_count(reference_size_arg, "--reference-size");

    std::vector<std::string> backends = split_list(backends_arg);
    if (backends.empty()) {
      backends = {"reference", "cpu"};
      if (tether::cuda_device_count() > 0) backends.push_back("cuda");
    }
    for (const auto& b : backends) {
      if (b != "reference" && b != "cpu" && b != "cuda")
        throw CLI::ValidationError("--backends", "unknown backend \"" + b + "\" (reference, cpu, cuda)");
      tether::resolve_backend(b);  // throws ConfigError when cuda is not built / no device
    }

    auto in_family = [&](const std::string& f) { return family_arg == "all" || family_arg == f; };
    const std::vector<MethodCase> known_methods = all_methods();
    // A system belongs to its own family, and to the library when a library
    // method runs on it (chain8, spherical_pendulum).
    auto system_in = [&](const SystemCase& s, const std::string& f) {
      return s.family == f || std::any_of(known_methods.begin(), known_methods.end(), [&](const MethodCase& m) {
               return m.family == f && f == kLibrary && pairs(m, s);
             });
    };
    auto system_selected = [&](const SystemCase& s) {
      return std::any_of(kFamilies.begin(), kFamilies.end(),
                         [&](const std::string& f) { return in_family(f) && system_in(s, f); });
    };

    // Methods: a label (rattle, gauss_legendre2, lie_rattle_cayley) or an
    // engine name standing for all its cases (gauss_legendre = gauss_legendre1,
    // 2, 3; lie_rattle = lie_rattle_exp, lie_rattle_cayley). "rattle" is both a
    // holonomic method and the library's yardstick.
    std::vector<MethodCase> methods;
    const std::vector<std::string> wanted_methods = split_list(methods_arg);
    if (wanted_methods.empty())
      methods = known_methods;
    else
      for (const auto& w : wanted_methods) {
        bool found = false;
        for (const auto& m : known_methods)
          if (m.label == w || m.engine_name == w) {
            if (std::none_of(methods.begin(), methods.end(),
                             [&](const MethodCase& x) { return x.label == m.label && x.family == m.family; }))
              methods.push_back(m);
            found = true;
          }
        if (!found) {
          std::string names;
          for (const auto& m : known_methods)
            if (names.find(m.label + ",") == std::string::npos) names += m.label + ", ";
          throw CLI::ValidationError("--methods", "unknown method \"" + w + "\" (" + names + "gauss_legendre)");
        }
      }

    const std::vector<SystemCase> known_systems = all_systems();
    std::vector<SystemCase> systems;
    const std::vector<std::string> wanted_systems = split_list(systems_arg);
    if (wanted_systems.empty()) {
      for (const auto& s : known_systems)
        if (system_selected(s)) systems.push_back(s);
    } else {
      for (const auto& w : wanted_systems) {
        bool found = false;
        for (const auto& s : known_systems)
          if (s.label == w || (w == "chain" && s.engine_name == "chain")) {
            if (!system_selected(s))
              throw CLI::ValidationError("--systems", "\"" + w + "\" is " + s.family + ", not in --family " + family_arg);
            if (std::none_of(systems.begin(), systems.end(), [&](const SystemCase& x) { return x.label == s.label; }))
              systems.push_back(s);
            found = true;
          }
        if (!found) throw CLI::ValidationError("--systems", "unknown system \"" + w + "\"");
      }
    }

    // Each family keeps the selected systems and methods that pair with
    // something selected there. A family left empty drops out quietly; a method
    // or system listed explicitly that pairs with nothing is an error.
    std::vector<FamilyPlan> plans;
    std::set<std::string> paired_methods, paired_systems;
    for (const auto& f : kFamilies) {
      if (!in_family(f)) continue;
      FamilyPlan fp;
      fp.family = f;
      for (const auto& m : methods)
        if (m.family == f &&
            std::any_of(systems.begin(), systems.end(), [&](const SystemCase& s) { return pairs(m, s); }))
          fp.methods.push_back(m);
      for (const auto& s : systems)
        if (system_in(s, f) &&
            std::any_of(fp.methods.begin(), fp.methods.end(), [&](const MethodCase& m) { return pairs(m, s); }))
          fp.systems.push_back(s);
      if (fp.systems.empty() || fp.methods.empty()) continue;
      for (const auto& m : fp.methods) paired_methods.insert(m.label);
      for (const auto& s : fp.systems) paired_systems.insert(s.label);
      const bool nh = f == kNonholonomic, library = f == kLibrary;
      // A nonholonomic trajectory-step costs ~1-240 us on one core, on cpu as
      // on the reference (implicit stages, s(2n+k) unknowns, Hessians of H),
      // against ~0.1-3 us for a holonomic one on cpu: smaller default ensembles,
      // fewer steps and repeats, so that the whole family (25 system/method
      // pairs) takes minutes on a 2-core machine. The library's compositions
      // cost 3-15 rattle steps and its variational steps are implicit in
      // 4 stages: sizes as the nonholonomic family's, a step count between.
      // See bench/README.md.
      if (!sizes_given.empty())
        fp.sizes = sizes_given;
      else if (nh || library)
        fp.sizes = quick ? std::vector<std::int64_t>{100, 1000} : std::vector<std::int64_t>{100, 1000, 10000};
      else
        fp.sizes = quick ? std::vector<std::int64_t>{1000, 10000, 100000}
                         : std::vector<std::int64_t>{1000, 10000, 100000, 1000000};
      fp.steps = steps_arg > 0 ? steps_arg : quick ? 5 : nh ? 10 : library ? 20 : 100;
      fp.repeats = repeats > 0 ? repeats : quick || nh || library ? 3 : 5;
      fp.reference_size = reference_size_given > 0 ? reference_size_given : fp.sizes.front();
      plans.push_back(fp);
    }
    for (const auto& w : wanted_methods)
      for (const auto& m : methods)
        if ((m.label == w || m.engine_name == w) && !paired_methods.count(m.label) &&
            std::none_of(methods.begin(), methods.end(), [&](const MethodCase& x) {
              return (x.label == w || x.engine_name == w) && paired_methods.count(x.label);
            }))
          throw CLI::ValidationError("--methods", "\"" + w + "\" runs on no selected system (--family " + family_arg +
                                                      ", --systems)");
    for (const auto& s : systems)
      if (!wanted_systems.empty() && !paired_systems.count(s.label))
        throw CLI::ValidationError("--systems", "\"" + s.label + "\" has no selected method (--family " + family_arg +
                                                    ", --methods)");
    if (plans.empty()) throw CLI::ValidationError("--systems", "no (system, method) pair to run");

#ifdef _OPENMP
    if (threads > 0) omp_set_num_threads(threads);
#endif

    std::string backend_set;
    for (const auto& b : backends) backend_set += (backend_set.empty() ? "" : "+") + b;

    json doc;
    doc["benchmark"] = "tether_bench";
    doc["started_utc"] = utc_now();
    doc["command_line"] = command_line;
    doc["machine"] = machine_info();
    doc["build"] = build_info();
    doc["backend_set"] = backend_set;
    doc["loadavg_start"] = loadavg();
    json settings;
    settings["quick"] = quick;
    settings["backends"] = backends;
    // The families that run (--family, narrowed by --systems/--methods).
    std::string ran;
    for (const auto& fp : plans) ran += (ran.empty() ? "" : "+") + fp.family;
    settings["family"] = plans.size() == kFamilies.size() ? std::string("all") : ran;
    settings["systems"] = json::array();
    settings["methods"] = json::array();
    json families = json::object();
    for (const auto& fp : plans) {
      json f;
      f["systems"] = json::array();
      f["methods"] = json::array();
      for (const auto& s : fp.systems) {
        json e{{"name", s.label}, {"family", fp.family}, {"dt", s.dt}};
        if (s.initial["sampler"] == "thermal") e["temperature"] = s.temperature;
        e["parameters"] = s.parameters;
        e["initial"] = s.initial;
        settings["systems"].push_back(e);
        f["systems"].push_back(s.label);
      }
      for (const auto& m : fp.methods) {
        json e{{"name", m.label}, {"family", m.family}, {"engine_method", m.engine_name}};
        e["stages"] = m.stages > 0 ? json(m.stages) : json(nullptr);
        if (!m.options.empty()) e["options"] = m.options;
        if (m.family == kLibrary) e["systems"] = m.systems;
        settings["methods"].push_back(e);
        f["methods"].push_back(m.label);
      }
      f["sizes"] = fp.sizes;
      f["steps"] = fp.steps;
      f["repeats"] = fp.repeats;
      f["reference_max_trajectories"] = fp.reference_size;
      families[fp.family] = f;
    }
    settings["families"] = families;
    settings["reference_steps"] = reference_steps;
    settings["reference_repeats"] = reference_repeats;
    settings["reference_budget_seconds"] = reference_budget;
    settings["min_time_seconds"] = min_time;
    settings["statistic"] = statistic;
    settings["warmup"] = !no_warmup;
    settings["seed"] = seed;
    settings["rate"] = "trajectories * steps / RunResult.integration_seconds (time inside Backend::advance only)";
    doc["settings"] = settings;

    // ---- run
    json records = json::array(), errors = json::array();
    const auto bench_start = std::chrono::steady_clock::now();
    for (const auto& backend : backends) {
      const bool is_reference = backend == "reference";
      for (const auto& fp : plans) {
        const int these_repeats = is_reference ? reference_repeats : fp.repeats;
        const std::int64_t these_steps = is_reference ? reference_steps : fp.steps;
        const std::int64_t reference_size = fp.reference_size;
        for (const auto& sys : fp.systems)
          for (const auto& method : fp.methods) {
            if (!pairs(method, sys)) continue;
            try {
              std::vector<std::int64_t> these_sizes =
                  is_reference ? std::vector<std::int64_t>{reference_size} : fp.sizes;
              if (is_reference && reference_budget > 0) {
                // The reference is a serial loop over trajectories, so its rate
                // does not depend on the ensemble size: a pilot (which is also
                // the warm-up) sizes the timed runs to the budget.
                const std::int64_t pilot_n = std::min<std::int64_t>(2, reference_size);
                const Measurement pilot = measure(sys, method, backend, pilot_n, 1, 1, seed);
                const double per_traj_step = pilot.seconds.front() / double(pilot_n);
                const double afford =
                    per_traj_step > 0 ? reference_budget / (per_traj_step * double(these_steps) * these_repeats)
                                      : 1e18;
                these_sizes = {std::clamp<std::int64_t>(nice_floor(afford), 1, reference_size)};
              } else if (!no_warmup) {
                measure(sys, method, backend, std::min<std::int64_t>(64, these_sizes.front()), 1, 1, seed);
              }
              for (std::int64_t n : these_sizes) {
                const Measurement m =
                    measure(sys, method, backend, n, these_steps, these_repeats, seed, is_reference ? 0.0 : min_time);
                const double best_secs = *std::min_element(m.seconds.begin(), m.seconds.end());
                const double median_secs = median(m.seconds);
                const double secs = statistic == "best" ? best_secs : median_secs;
                const double work = double(n) * double(these_steps);
                json r;
                r["backend"] = backend;
                r["family"] = fp.family;
                r["system"] = sys.label;
                r["method"] = method.label;
                r["stages"] = method.stages > 0 ? json(method.stages) : json(nullptr);
                r["trajectories"] = n;
                r["steps"] = these_steps;
                r["seconds"] = secs;
                if (secs > 0)
                  r["trajectory_steps_per_second"] = work / secs;
                else
                  r["trajectory_steps_per_second"] = nullptr;
                r["dt"] = sys.dt;
                r["repeats"] = m.seconds.size();
                r["statistic"] = statistic;
                r["seconds_median"] = median_secs;
                r["seconds_best"] = best_secs;
                r["seconds_each"] = m.seconds;
                r["wall_seconds_median"] = median(m.wall);
                r["failed_trajectories"] = m.failed;
                r["newton_mean"] = m.newton_mean;
                records.push_back(r);
                if (!quiet)
                  std::fprintf(stderr, "[bench] %-9s %-20s %-20s %6s x %-5lld %10.4g s  %10.4g traj-steps/s%s\n",
                               backend.c_str(), sys.label.c_str(), method.label.c_str(), fmt_count(n).c_str(),
                               (long long)these_steps, secs, secs > 0 ? work / secs : 0.0,
                               m.failed ? "  (some trajectories failed)" : "");
                if (m.failed > 0 && !quiet)
                  std::fprintf(stderr,
                               "[bench]   warning: %lld of %lld trajectories failed; the rate counts them as full\n",
                               (long long)m.failed, (long long)n);
              }
            } catch (const std::exception& e) {
              errors.push_back(json{{"backend", backend},
                                    {"family", fp.family},
                                    {"system", sys.label},
                                    {"method", method.label},
                                    {"error", e.what()}});
              if (!quiet)
                std::fprintf(stderr, "[bench] %s %s %s: error: %s\n", backend.c_str(), sys.label.c_str(),
                             method.label.c_str(), e.what());
            }
          }
      }
    }
    doc["loadavg_end"] = loadavg();
    doc["total_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - bench_start).count();
    doc["records"] = records;

    // ---- ratios, from this run only
    auto find = [&](const std::string& family, const std::string& backend, const std::string& sys,
                    const std::string& method, std::int64_t n) -> const json* {
      for (const auto& r : records)
        if (r["family"] == family && r["backend"] == backend && r["system"] == sys && r["method"] == method &&
            (n < 0 || r["trajectories"].get<std::int64_t>() == n) && r["trajectory_steps_per_second"].is_number())
          return &r;
      return nullptr;
    };
    auto fastest = [&](const std::string& family, const std::string& backend, const std::string& sys,
                       const std::string& method) -> const json* {
      const json* b = nullptr;
      for (const auto& r : records)
        if (r["family"] == family && r["backend"] == backend && r["system"] == sys && r["method"] == method &&
            r["trajectory_steps_per_second"].is_number() &&
            (!b || r["trajectory_steps_per_second"].get<double>() > (*b)["trajectory_steps_per_second"].get<double>()))
          b = &r;
      return b;
    };
    auto rate = [](const json* r) { return (*r)["trajectory_steps_per_second"].get<double>(); };

    json ratios;
    json cpu_ref = json::array();
    for (const auto& fp : plans)
      for (const auto& sys : fp.systems)
        for (const auto& mc : fp.methods) {
          const std::string& method = mc.label;
          const json* ref = find(fp.family, "reference", sys.label, method, -1);
          // cpu at the reference's size when measured, else at cpu's smallest size.
          const json* cpu_same = nullptr;
          if (ref) {
            cpu_same = find(fp.family, "cpu", sys.label, method, (*ref)["trajectories"].get<std::int64_t>());
            for (std::size_t k = 0; !cpu_same && k < fp.sizes.size(); ++k)
              cpu_same = find(fp.family, "cpu", sys.label, method, fp.sizes[k]);
          }
          const json* cpu_best = fastest(fp.family, "cpu", sys.label, method);
          if (!ref || !cpu_best) continue;
          json x;
          x["family"] = fp.family;
          x["system"] = sys.label;
          x["method"] = method;
          x["reference_trajectories"] = (*ref)["trajectories"];
          x["reference_steps"] = (*ref)["steps"];
          x["reference_trajectory_steps_per_second"] = rate(ref);
          if (cpu_same) {
            x["cpu_trajectories"] = (*cpu_same)["trajectories"];
            x["cpu_steps"] = (*cpu_same)["steps"];
            x["cpu_trajectory_steps_per_second"] = rate(cpu_same);
            x["cpu_over_reference"] = rate(cpu_same) / rate(ref);
          } else {
            x["cpu_trajectories"] = nullptr;
            x["cpu_steps"] = nullptr;
            x["cpu_trajectory_steps_per_second"] = nullptr;
            x["cpu_over_reference"] = nullptr;
          }
          x["cpu_fastest_trajectories"] = (*cpu_best)["trajectories"];
          x["cpu_fastest_trajectory_steps_per_second"] = rate(cpu_best);
          x["cpu_fastest_over_reference"] = rate(cpu_best) / rate(ref);
          cpu_ref.push_back(x);
        }
    ratios["cpu_over_reference_note"] =
        "cpu_over_reference: cpu at the reference's ensemble size, or at cpu's smallest size when the reference "
        "budget shrank the reference's ensemble (its rate does not depend on size: a serial loop over trajectories); "
        "cpu_fastest_over_reference: cpu at its fastest size. Rates use settings.statistic; all measured in this run.";
    ratios["cpu_over_reference"] = cpu_ref;

    json cuda_cpu = json::array();
    for (const auto& fp : plans)
      for (const auto& sys : fp.systems)
        for (const auto& mc : fp.methods)
          for (std::int64_t n : fp.sizes) {
            const json* g = find(fp.family, "cuda", sys.label, mc.label, n);
            const json* c = find(fp.family, "cpu", sys.label, mc.label, n);
            if (!g || !c) continue;
            cuda_cpu.push_back(json{{"family", fp.family},
                                    {"system", sys.label},
                                    {"method", mc.label},
                                    {"trajectories", n},
                                    {"cuda_over_cpu", rate(g) / rate(c)}});
          }
    if (!cuda_cpu.empty()) ratios["cuda_over_cpu"] = cuda_cpu;

    // The library against rattle on the same system, backend and ensemble size.
    json over_rattle = json::array();
    for (const auto& r : records) {
      if (r["family"] != kLibrary || r["method"] == "rattle" || !r["trajectory_steps_per_second"].is_number()) continue;
      const json* y = find(kLibrary, r["backend"], r["system"], "rattle", r["trajectories"].get<std::int64_t>());
      if (!y) continue;
      over_rattle.push_back(json{{"backend", r["backend"]},
                                 {"system", r["system"]},
                                 {"method", r["method"]},
                                 {"trajectories", r["trajectories"]},
                                 {"steps", r["steps"]},
                                 {"over_rattle", rate(&r) / rate(y)}});
    }
    if (!over_rattle.empty()) {
      ratios["library_over_rattle_note"] =
          "trajectory-steps/s of each library method over rattle's on the same system, backend and ensemble size "
          "(both at the same dt); magnetic_sphere has no rattle";
      ratios["library_over_rattle"] = over_rattle;
    }
    doc["ratios"] = ratios;
    doc["errors"] = errors;

    const std::string text = doc.dump(2) + "\n";
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    if (!output_path.empty()) {
      std::ofstream out(output_path, std::ios::binary);
      out << text;
      if (!out) {
        std::fprintf(stderr, "error: cannot write %s\n", output_path.c_str());
        return 1;
      }
    }
    return errors.empty() ? 0 : 1;
  } catch (const CLI::ValidationError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const tether::ConfigError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

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

#include "tether/engine.hpp"

#ifndef TETHER_BENCH_GIT_COMMIT
#define TETHER_BENCH_GIT_COMMIT "unknown"
#endif
#ifndef TETHER_BENCH_GIT_DIRTY
#define TETHER_BENCH_GIT_DIRTY -1
#endif
#ifndef TETHER_BENCH_BUILD_TYPE
#define TETHER_BENCH_BUILD_TYPE "unknown"
#endif
#ifndef TETHER_SOURCE_DIR
#define TETHER_SOURCE_DIR "."
#endif

namespace {

using json = nlohmann::ordered_json;

// ---------------------------------------------------------------- the cases

// Every (system, method) pair the registry allows (registry/cases.hpp): the
// system's parameters, dt and initial ensemble from its example config, the
// method's defaults. Records group them by the system's family.
struct Case {
  tether::RegistryCase pair;
  std::string family;  // holonomic | nonholonomic | mixed | lagrangian
  const std::string& system() const { return pair.system_label; }
  const std::string& method() const { return pair.method_label; }
  const std::string& system_name() const { return tether::system_infos()[std::size_t(pair.system)].name; }
  const std::string& method_name() const { return tether::method_infos()[std::size_t(pair.method)].name; }
};

std::vector<Case> all_cases(const std::string& configs_dir) {
  std::vector<Case> v;
  for (auto& c : tether::registry_cases(configs_dir)) {
    // The registry calls the mixed family "holonomic + nonholonomic"; --family and the records say "mixed".
    const tether::Family f = tether::system_infos()[std::size_t(c.system)].family;
    const std::string family = f == tether::Family::mixed ? "mixed" : tether::family_name(f);
    v.push_back({std::move(c), family});
  }
  return v;
}

// The case's config at n trajectories. An example that lists explicit states
// becomes n copies of its first state (the "around" sampler with no spread).
std::string config_text(const Case& c, const std::string& backend, std::int64_t trajectories, std::int64_t steps,
                        std::uint64_t seed) {
  json j = c.pair.config;
  j["method"]["steps"] = steps;
  json initial = j["ensemble"]["initial"];
  if (c.pair.explicit_states) {
    const json first = initial["states"][0];
    initial = json{{"sampler", "around"}, {"q", first["q"]}, {"p", first["p"]}};
  }
  j["ensemble"] = json{{"size", trajectories}, {"seed", seed}, {"initial", initial}};
  j["output"] = json{{"every", std::max<std::int64_t>(1, steps)}, {"final_states", false}};
  j["backend"] = backend;
  return j.dump();
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
Measurement measure(const Case& c, const std::string& backend, std::int64_t trajectories, std::int64_t steps,
                    int repeats, std::uint64_t seed, double min_seconds = 0) {
  const tether::RunConfig cfg = tether::parse_config(config_text(c, backend, trajectories, steps, seed),
                                                     "bench:" + c.system() + "/" + c.method());
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

// One family's part of the plan: its selected cases and their sizes.
struct FamilyPlan {
  std::string family;
  std::vector<Case> cases;
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

  std::string configs_dir = TETHER_SOURCE_DIR "/configs";
  app.add_option("--family", family_arg,
                 "all, holonomic, nonholonomic, mixed or lagrangian: the systems' family (default all)")
      ->check(CLI::IsMember({"all", "holonomic", "nonholonomic", "mixed", "lagrangian"}));
  app.add_option("--backends", backends_arg,
                 "comma list of reference, cpu, cuda (default: reference,cpu and cuda when a device is present)")
      ->delimiter(',');
  app.add_option("--methods", methods_arg,
                 "comma list of methods by case label (rattle, gauss_legendre_2, lie_rattle_cayley, "
                 "composition_rattle) or name (gauss_legendre = every stage count); `tether list` names them. "
                 "Each system runs the listed methods that apply to it (default: all)")
      ->delimiter(',');
  app.add_option("--systems", systems_arg,
                 "comma list of systems by case label (chain16, rigid_chain2) or name (chain = every bead count) "
                 "(default: all of --family)")
      ->delimiter(',');
  app.add_option("--configs", configs_dir,
                 "folder of example configs, one per system: each case's parameters, dt and initial ensemble")
      ->check(CLI::ExistingDirectory);
  app.add_option("--sizes", sizes_arg,
                 "comma list of ensemble sizes for every family, e.g. 1e3,1e4 (default holonomic 1e3,1e4,1e5,1e6, "
                 "--quick 1e3,1e4,1e5; the other families 1e2,1e3,1e4, --quick 1e2,1e3)")
      ->delimiter(',');
  app.add_option("--steps", steps_arg,
                 "steps per run for cpu and cuda, every family (default holonomic 100, nonholonomic 10, mixed and "
                 "lagrangian 20; --quick 5)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 30));
  app.add_option("--repeats", repeats,
                 "runs per point for cpu and cuda, every family (default holonomic 5, the others 3; --quick 3)")
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
               "small preset for a 2-core CPU machine: sizes 1e3,1e4,1e5 (other families 1e2,1e3), 5 steps, "
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

    // Cases: the registry's pairs of the selected family whose system and
    // method match --systems and --methods, by label or by name. A name that
    // matches no registered system or method, or that pairs with nothing
    // selected, is an error (exit 2).
    const std::vector<Case> known = all_cases(configs_dir);
    const std::vector<std::string> wanted_methods = split_list(methods_arg), wanted_systems = split_list(systems_arg);
    const auto listed = [](const std::vector<std::string>& wanted, const std::string& label, const std::string& name) {
      return wanted.empty() || std::find(wanted.begin(), wanted.end(), label) != wanted.end() ||
             std::find(wanted.begin(), wanted.end(), name) != wanted.end();
    };
    std::vector<Case> selected;
    for (const auto& c : known)
      if ((family_arg == "all" || c.family == family_arg) && listed(wanted_systems, c.system(), c.system_name()) &&
          listed(wanted_methods, c.method(), c.method_name()))
        selected.push_back(c);
    const auto check_listed = [&](const std::vector<std::string>& wanted, const char* option, bool systems) {
      for (const auto& w : wanted) {
        const auto matches = [&](const Case& c) {
          return systems ? c.system() == w || c.system_name() == w : c.method() == w || c.method_name() == w;
        };
        if (std::none_of(known.begin(), known.end(), matches)) {
          std::string names;
          for (const auto& c : known) {
            const std::string& n = systems ? c.system() : c.method();
            if (names.find(" " + n + ",") == std::string::npos) names += " " + n + ",";
          }
          names.pop_back();
          throw CLI::ValidationError(option, "unknown \"" + w + "\" (registered:" + names + ")");
        }
        if (std::none_of(selected.begin(), selected.end(), matches))
          throw CLI::ValidationError(option, "\"" + w + "\" pairs with nothing selected (--family " + family_arg +
                                                 ", --systems, --methods)");
      }
    };
    check_listed(wanted_systems, "--systems", true);
    check_listed(wanted_methods, "--methods", false);
    if (selected.empty()) throw CLI::ValidationError("--family", "no (system, method) pair to run");

    std::vector<FamilyPlan> plans;
    for (const char* f : {"holonomic", "nonholonomic", "mixed", "lagrangian"}) {
      FamilyPlan fp;
      fp.family = f;
      for (const auto& c : selected)
        if (c.family == f) fp.cases.push_back(c);
      if (fp.cases.empty()) continue;
      const bool holonomic = fp.family == "holonomic", nh = fp.family == "nonholonomic";
      // A nonholonomic trajectory-step costs ~1-240 us on one core, on cpu as
      // on the reference (implicit stages, s(2n+k) unknowns, Hessians of H),
      // against ~0.1-3 us for a holonomic one on cpu: smaller default ensembles,
      // fewer steps and repeats, so that each family takes minutes on a
      // 2-core machine. Mixed and Lagrangian steps are implicit too. See
      // bench/README.md.
      if (!sizes_given.empty())
        fp.sizes = sizes_given;
      else if (!holonomic)
        fp.sizes = quick ? std::vector<std::int64_t>{100, 1000} : std::vector<std::int64_t>{100, 1000, 10000};
      else
        fp.sizes = quick ? std::vector<std::int64_t>{1000, 10000, 100000}
                         : std::vector<std::int64_t>{1000, 10000, 100000, 1000000};
      fp.steps = steps_arg > 0 ? steps_arg : quick ? 5 : holonomic ? 100 : nh ? 10 : 20;
      fp.repeats = repeats > 0 ? repeats : quick || !holonomic ? 3 : 5;
      fp.reference_size = reference_size_given > 0 ? reference_size_given : fp.sizes.front();
      plans.push_back(fp);
    }

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
    settings["family"] = wanted_systems.empty() && wanted_methods.empty() && family_arg == "all" ? std::string("all") : ran;
    settings["configs"] = configs_dir;
    settings["cases"] = json::array();
    json families = json::object();
    for (const auto& fp : plans) {
      json f;
      f["cases"] = json::array();
      for (const auto& c : fp.cases) {
        // The config each point runs, less size, seed and steps.
        json e{{"system", c.system()}, {"method", c.method()}, {"family", fp.family}, {"example", c.pair.example}};
        e["config"] = json::parse(config_text(c, "cpu", 1, 1, seed));
        for (const char* k : {"backend", "output"}) e["config"].erase(k);
        e["config"]["ensemble"].erase("size");
        e["config"]["method"].erase("steps");
        settings["cases"].push_back(e);
        f["cases"].push_back(c.system() + "/" + c.method());
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
        for (const auto& c : fp.cases) {
            try {
              std::vector<std::int64_t> these_sizes =
                  is_reference ? std::vector<std::int64_t>{reference_size} : fp.sizes;
              if (is_reference && reference_budget > 0) {
                // The reference is a serial loop over trajectories, so its rate
                // does not depend on the ensemble size: a pilot (which is also
                // the warm-up) sizes the timed runs to the budget.
                const std::int64_t pilot_n = std::min<std::int64_t>(2, reference_size);
                const Measurement pilot = measure(c, backend, pilot_n, 1, 1, seed);
                const double per_traj_step = pilot.seconds.front() / double(pilot_n);
                const double afford =
                    per_traj_step > 0 ? reference_budget / (per_traj_step * double(these_steps) * these_repeats)
                                      : 1e18;
                these_sizes = {std::clamp<std::int64_t>(nice_floor(afford), 1, reference_size)};
              } else if (!no_warmup) {
                measure(c, backend, std::min<std::int64_t>(64, these_sizes.front()), 1, 1, seed);
              }
              for (std::int64_t n : these_sizes) {
                const Measurement m =
                    measure(c, backend, n, these_steps, these_repeats, seed, is_reference ? 0.0 : min_time);
                const double best_secs = *std::min_element(m.seconds.begin(), m.seconds.end());
                const double median_secs = median(m.seconds);
                const double secs = statistic == "best" ? best_secs : median_secs;
                const double work = double(n) * double(these_steps);
                json r;
                r["backend"] = backend;
                r["family"] = fp.family;
                r["system"] = c.system();
                r["method"] = c.method();
                r["trajectories"] = n;
                r["steps"] = these_steps;
                r["seconds"] = secs;
                if (secs > 0)
                  r["trajectory_steps_per_second"] = work / secs;
                else
                  r["trajectory_steps_per_second"] = nullptr;
                r["dt"] = c.pair.config["method"]["dt"];
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
                               backend.c_str(), c.system().c_str(), c.method().c_str(), fmt_count(n).c_str(),
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
                                    {"system", c.system()},
                                    {"method", c.method()},
                                    {"error", e.what()}});
              if (!quiet)
                std::fprintf(stderr, "[bench] %s %s %s: error: %s\n", backend.c_str(), c.system().c_str(),
                             c.method().c_str(), e.what());
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
      for (const auto& c : fp.cases) {
          const std::string& method = c.method();
          const Case& sys_case = c;
          const json* ref = find(fp.family, "reference", sys_case.system(), method, -1);
          // cpu at the reference's size when measured, else at cpu's smallest size.
          const json* cpu_same = nullptr;
          if (ref) {
            cpu_same = find(fp.family, "cpu", sys_case.system(), method, (*ref)["trajectories"].get<std::int64_t>());
            for (std::size_t k = 0; !cpu_same && k < fp.sizes.size(); ++k)
              cpu_same = find(fp.family, "cpu", sys_case.system(), method, fp.sizes[k]);
          }
          const json* cpu_best = fastest(fp.family, "cpu", sys_case.system(), method);
          if (!ref || !cpu_best) continue;
          json x;
          x["family"] = fp.family;
          x["system"] = sys_case.system();
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
      for (const auto& k : fp.cases)
          for (std::int64_t n : fp.sizes) {
            const json* g = find(fp.family, "cuda", k.system(), k.method(), n);
            const json* c = find(fp.family, "cpu", k.system(), k.method(), n);
            if (!g || !c) continue;
            cuda_cpu.push_back(json{{"family", fp.family},
                                    {"system", k.system()},
                                    {"method", k.method()},
                                    {"trajectories", n},
                                    {"cuda_over_cpu", rate(g) / rate(c)}});
          }
    if (!cuda_cpu.empty()) ratios["cuda_over_cpu"] = cuda_cpu;

    // Every method against rattle on the same system, backend and ensemble size.
    json over_rattle = json::array();
    for (const auto& r : records) {
      if (r["method"] == "rattle" || !r["trajectory_steps_per_second"].is_number()) continue;
      const json* y = find(r["family"], r["backend"], r["system"], "rattle", r["trajectories"].get<std::int64_t>());
      if (!y) continue;
      over_rattle.push_back(json{{"backend", r["backend"]},
                                 {"system", r["system"]},
                                 {"method", r["method"]},
                                 {"trajectories", r["trajectories"]},
                                 {"steps", r["steps"]},
                                 {"over_rattle", rate(&r) / rate(y)}});
    }
    if (!over_rattle.empty()) {
      ratios["over_rattle_note"] =
          "trajectory-steps/s of each method over rattle's on the same system, backend and ensemble size (both at "
          "the example's dt); systems rattle does not apply to have none";
      ratios["over_rattle"] = over_rattle;
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

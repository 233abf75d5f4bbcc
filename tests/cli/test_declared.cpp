// Systems declared in a config, through the tether command: compiled when
// first used (src/expr/compiled_pair.hpp), the same trajectories as the
// built-in system they spell out, a cache that a second run loads, that a
// damaged entry does not fool and that two runs at once fill once, and bad
// declarations refused before anything is compiled or written.
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <map>
#include <sstream>
#include <thread>
#include <tuple>
#include <vector>

#include "cli/cli_fixture.hpp"
#include "expr/declared_pendulum.hpp"

namespace tether::test {
namespace {

// The spherical pendulum written as expressions, a parameter overridden, with its built-in twin.
json declared_pendulum() {
  return {{"declare", declared_pendulum_declaration()}, {"parameters", {{"g", 3.7}}}};
}

json pendulum_run(const json& system, const std::string& backend) {
  json c = base_config();
  c["system"] = system;
  c["method"]["steps"] = 200;
  c["ensemble"] = json::parse(R"json({"size": 64, "seed": 3, "initial": {"sampler": "around", "q": [0.42, 0, -0.56],
                                   "p": [0, 1, 0.2], "position_spread": 0.05, "momentum_spread": 0.3}})json");
  c["backend"] = backend;
  return c;
}

json builtin_pendulum() {
  return {{"name", "spherical_pendulum"}, {"parameters", {{"mass", 1.5}, {"gravity", 3.7}, {"length", 0.7}}}};
}

// The largest difference between two final.csv files of the same ids and
// statuses, relative to the value where it is above 1 (momenta of 50).
double max_difference(const std::string& a, const std::string& b) {
  const auto la = lines(a), lb = lines(b);
  EXPECT_EQ(la.size(), lb.size());
  EXPECT_EQ(la.at(0), lb.at(0));
  double worst = 0;
  for (std::size_t i = 1; i < std::min(la.size(), lb.size()); ++i) {
    const auto ra = split(la[i], ','), rb = split(lb[i], ',');
    EXPECT_EQ(ra.back(), rb.back()) << "status of row " << i;
    for (std::size_t k = 0; k + 1 < ra.size(); ++k) {
      const double x = std::stod(ra[k]), y = std::stod(rb[k]);
      worst = std::max(worst, std::abs(x - y) / std::max(1.0, std::abs(x)));
    }
  }
  return worst;
}

// The suite's cache (CliTest), unless a test needs its own.
class Declared : public CliTest {
 protected:
  bool compiled(const Cli& r) const { return r.err.find("tether: compiling") != std::string::npos; }

  // configs/`file`, shortened to `steps` steps of `size` trajectories, on cpu
  // and reference: `system` with no failure, its constraints within
  // `violation` and its energy within `energy`, and the two backends' final
  // states apart by 1e-10 at most (the reference backend solves each step
  // by its own Newton, to the tolerance: the bound of the built-in pairs'
  // agreement, test_backends).
  void expect_on_both_host_backends(const std::string& file, int steps, int size, const std::string& system,
                                    double violation, double energy) {
    json c = json::parse(read_file(fs::path(TETHER_SOURCE_DIR) / "configs" / file));
    c["method"]["steps"] = steps;
    c["ensemble"]["size"] = size;
    for (const std::string backend : {"cpu", "reference"}) {
      c["backend"] = backend;
      const Cli r = run(write(file, c), dir_ / backend);
      ASSERT_EQ(r.code, 0) << r.err;
      const json s = json::parse(read_file(dir_ / backend / "summary.json"));
      EXPECT_EQ(s["system"], system);
      EXPECT_EQ(s["failed_trajectories"], 0) << backend;
      EXPECT_LT(s["max_constraint_violation"].get<double>(), violation) << backend;
      EXPECT_LT(s["max_relative_energy_error"].get<double>(), energy) << backend;
    }
    EXPECT_LT(max_difference(read_file(dir_ / "cpu" / "final.csv"), read_file(dir_ / "reference" / "final.csv")), 1e-10);
  }
};

TEST_F(Declared, ThePendulumDeclaredRunsAsTheBuiltInOneOnEveryHostBackend) {
  for (const std::string backend : {"cpu", "reference"}) {
    const Cli mine = run(write("mine.json", pendulum_run(declared_pendulum(), backend)), dir_ / ("mine_" + backend));
    ASSERT_EQ(mine.code, 0) << mine.err;
    const Cli theirs = run(write("theirs.json", pendulum_run(builtin_pendulum(), backend)), dir_ / ("theirs_" + backend));
    ASSERT_EQ(theirs.code, 0) << theirs.err;
    EXPECT_LT(max_difference(read_file(dir_ / ("mine_" + backend) / "final.csv"),
                             read_file(dir_ / ("theirs_" + backend) / "final.csv")),
              1e-12)
        << backend;
    const json s = json::parse(read_file(dir_ / ("mine_" + backend) / "summary.json"));
    EXPECT_EQ(s["system"], "my_pendulum");
    EXPECT_LT(s["max_constraint_violation"].get<double>(), 1e-10);
  }
}

TEST_F(Declared, ASecondRunLoadsTheCompiledPairAndADamagedOneIsRebuilt) {
  ::setenv("TETHER_CACHE_DIR", (dir_ / "cache").c_str(), 1);
  const fs::path cfg = write("c.json", pendulum_run(declared_pendulum(), "cpu"));
  const Cli first = run(cfg, dir_ / "a");
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_TRUE(compiled(first)) << first.err;
  const Cli second = run(cfg, dir_ / "b");
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_FALSE(compiled(second)) << second.err;
  EXPECT_EQ(read_file(dir_ / "a" / "final.csv"), read_file(dir_ / "b" / "final.csv"));
  // Every process prints the same source (GiNaC's term order varies with
  // addresses, tether's does not): none compiles again.
  for (int k = 0; k < 6; ++k) {
    const Cli again = run(cfg, dir_ / ("again" + std::to_string(k)));
    ASSERT_EQ(again.code, 0) << again.err;
    EXPECT_FALSE(compiled(again)) << "process " << k << " printed another source: " << again.err;
  }

  // One flipped byte in the library: its seal fails, it is compiled again.
  fs::path so;
  for (const auto& e : fs::recursive_directory_iterator(dir_ / "cache"))
    if (e.path().filename() == "pair.so") so = e.path();
  ASSERT_FALSE(so.empty());
  // Its key names each header it was compiled against with its size (a
  // changed one makes a new library), not the tree's own .cpp units.
  const std::string key = read_file(so.parent_path() / "key.txt");
  const fs::path header = fs::path(TETHER_SOURCE_DIR) / "src" / "engine" / "for_pair.hpp";
  EXPECT_NE(key.find("\n" + header.string() + " " + std::to_string(fs::file_size(header)) + " "), std::string::npos)
      << key;
  EXPECT_EQ(key.find("engine.cpp"), std::string::npos) << key;
  std::string bytes = read_file(so);
  bytes[bytes.size() / 2] ^= 0x10;
  std::ofstream(so, std::ios::binary) << bytes;
  const Cli third = run(cfg, dir_ / "c");
  ASSERT_EQ(third.code, 0) << third.err;
  EXPECT_TRUE(compiled(third)) << third.err;
  EXPECT_EQ(read_file(dir_ / "a" / "final.csv"), read_file(dir_ / "c" / "final.csv"));
}

// Whether process `pid` runs (is neither gone nor a zombie), from /proc.
bool running(pid_t pid) {
  const std::string stat = read_file(fs::path("/proc") / std::to_string(pid) / "stat");  // "pid (comm) state ..."
  const std::size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

// The first child of `parent` seen in /proc within `seconds`, or 0.
pid_t first_child(pid_t parent, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    std::istringstream children(read_file(fs::path("/proc") / std::to_string(parent) / "task" / std::to_string(parent) /
                                          "children"));
    if (pid_t child = 0; children >> child) return child;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 0;
}

// A tether ended while it compiles (timeout's SIGTERM) ends its compiler
// too: the driver and its cc1plus had run on, once for 73 minutes and 14 GB.
TEST_F(Declared, EndingTetherWhileItCompilesEndsTheCompiler) {
  ::setenv("TETHER_CACHE_DIR", (dir_ / "cache_ended").c_str(), 1);
  const fs::path cfg = write("c.json", pendulum_run(declared_pendulum(), "cpu"));
  const std::string out = (dir_ / "out").string(), config = cfg.string();
  std::vector<std::string> args = {TETHER_BINARY, "run", config, "--out", out, "--quiet"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t tether = 0;
  ASSERT_EQ(posix_spawn(&tether, argv[0], nullptr, nullptr, argv.data(), environ), 0);
  const pid_t driver = first_child(tether, 60);           // c++
  const pid_t proper = driver ? first_child(driver, 60) : 0;  // its cc1plus
  ASSERT_GT(proper, 0) << "tether started no compiler";
  ::kill(tether, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(tether, &status, 0), tether);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "tether ends as SIGTERM ends it, status " << status;
  for (int k = 0; k < 100 && (running(driver) || running(proper)); ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(running(driver)) << "the compiler's driver outlived tether";
  EXPECT_FALSE(running(proper)) << "cc1plus outlived tether";
  for (pid_t p : {driver, proper}) ::kill(p, SIGKILL);
  EXPECT_FALSE(fs::exists(dir_ / "out" / "summary.json"));
}

TEST_F(Declared, TwoRunsAtOnceCompileThePairOnceAndBothSucceed) {
  ::setenv("TETHER_CACHE_DIR", (dir_ / "cache").c_str(), 1);
  json c = pendulum_run(declared_pendulum(), "cpu");
  c["method"]["name"] = "shake";  // a pair no other test compiles in this cache
  const fs::path cfg = write("c.json", c);
  const auto one = [&](const std::string& name) {
    const fs::path err = dir_ / (name + ".stderr");
    const std::string cmd = quote(TETHER_BINARY) + " run " + quote(cfg) + " --out " + quote(dir_ / name) +
                            " --quiet 2>" + quote(err);
    const int rc = std::system(cmd.c_str());
    return std::pair{rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, read_file(err)};
  };
  auto a = std::async(std::launch::async, one, "a");
  auto b = std::async(std::launch::async, one, "b");
  const auto [code_a, err_a] = a.get();
  const auto [code_b, err_b] = b.get();
  EXPECT_EQ(code_a, 0) << err_a;
  EXPECT_EQ(code_b, 0) << err_b;
  const int compiles = int(err_a.find("tether: compiling") != std::string::npos) +
                       int(err_b.find("tether: compiling") != std::string::npos);
  EXPECT_EQ(compiles, 1) << err_a << "\n" << err_b;
  EXPECT_EQ(read_file(dir_ / "a" / "final.csv"), read_file(dir_ / "b" / "final.csv"));
}

// A molecule no built-in system covers, configs/water.json: a rigid
// three-site water (three distances held) turning in a field.
TEST_F(Declared, TheRigidWaterOfTheExampleKeepsItsDistancesOnEveryBackend) {
  expect_on_both_host_backends("water.json", 500, 16, "water", 1e-10, 1e-3);
}

// configs/bead_chain.json, a chain declared once for any number of beads
// (sizes, ranges, indexed names and sums written out), pulled at its ends:
// its bonds held on both backends, which agree.
TEST_F(Declared, TheBeadChainOfTheExampleKeepsItsBondsOnEveryBackend) {
  expect_on_both_host_backends("bead_chain.json", 300, 8, "bead_chain", 1e-12, 1e-4);
}

// configs/five_bar.json, a closed-loop planar linkage (four rods between two
// ground pivots, two degrees of freedom): RATTLE is symmetric, so running
// the final states back with p flipped returns to the start (to Newton's
// tolerance), and every step keeps the loop closed.
TEST_F(Declared, TheFiveBarLinkageRunsBackToItsStart) {
  json c = json::parse(read_file(fs::path(TETHER_SOURCE_DIR) / "configs" / "five_bar.json"));
  c["method"]["steps"] = 0;  // a 0-step run writes the initial states
  c["ensemble"]["size"] = 8;
  c["backend"] = "cpu";
  c["method"]["newton"] = {{"tolerance", 1e-13}, {"max_iterations", 50}};
  ASSERT_EQ(run(write("start.json", c), dir_ / "start").code, 0);
  c["method"]["steps"] = 400;
  const Cli forward = run(write("forward.json", c), dir_ / "forward");
  ASSERT_EQ(forward.code, 0) << forward.err;
  EXPECT_LT(json::parse(read_file(dir_ / "forward" / "summary.json"))["max_constraint_violation"].get<double>(), 1e-12);
  // The final states, p flipped, as explicit states.
  const auto rows = lines(read_file(dir_ / "forward" / "final.csv"));
  json states = json::array();
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const auto f = split(rows[i], ',');
    json q = json::array(), p = json::array();
    for (int k = 0; k < 6; ++k) q.push_back(std::stod(f[std::size_t(1 + k)]));
    for (int k = 0; k < 6; ++k) p.push_back(-std::stod(f[std::size_t(7 + k)]));
    states.push_back({{"q", q}, {"p", p}});
  }
  c["ensemble"] = states_ensemble(states);
  const Cli back = run(write("back.json", c), dir_ / "back");
  ASSERT_EQ(back.code, 0) << back.err;
  const auto start = lines(read_file(dir_ / "start" / "final.csv")), end = lines(read_file(dir_ / "back" / "final.csv"));
  ASSERT_EQ(start.size(), 9u);
  ASSERT_EQ(end.size(), 9u);
  for (std::size_t i = 1; i < start.size(); ++i) {
    const auto a = split(start[i], ','), b = split(end[i], ',');
    for (int k = 0; k < 12; ++k) {
      const double sign = k < 6 ? 1 : -1;  // p comes back flipped
      EXPECT_NEAR(std::stod(b[std::size_t(1 + k)]), sign * std::stod(a[std::size_t(1 + k)]), 1e-9)
          << "trajectory " << i - 1 << ", column " << k;
    }
  }
}

// The Heisenberg group declared by its frame runs and shoots as the built-in
// heisenberg does: the same type up to the order of its arithmetic.
TEST_F(Declared, TheHeisenbergFrameDeclaredRunsAndShootsAsTheBuiltInOne) {
  const json declared = json::parse(R"json({"declare": {"name": "my_heisenberg", "coordinates": ["x", "y", "z"],
                                                       "frame": [[1, 0, "-y/2"], [0, 1, "x/2"]]}})json");
  json run_config = json::parse(read_file(fs::path(TETHER_SOURCE_DIR) / "configs" / "heisenberg.json"));
  run_config["method"]["stages"] = 2;  // the pair the shots compile too
  run_config["ensemble"]["size"] = 64;
  run_config["backend"] = "cpu";
  json shoot_config = json::parse(read_file(fs::path(TETHER_SOURCE_DIR) / "configs" / "heisenberg_sphere.json"));
  shoot_config["shoot"]["targets"]["grid"]["count"] = {5, 1, 5};
  shoot_config.erase("output");
  shoot_config["backend"] = "cpu";
  for (const auto& [kind, theirs_system] : {std::pair{"mine", declared}, std::pair{"theirs", json{{"name", "heisenberg"}}}}) {
    run_config["system"] = theirs_system;
    shoot_config["system"] = theirs_system;
    const Cli r = run(write(std::string(kind) + "_run.json", run_config), dir_ / (std::string(kind) + "_run"));
    ASSERT_EQ(r.code, 0) << r.err;
    const Cli s = tether("shoot " + quote(write(std::string(kind) + "_shoot.json", shoot_config)) + " --out " +
                         quote(dir_ / (std::string(kind) + "_shoot")) + " --quiet");
    ASSERT_EQ(s.code, 0) << s.err;
  }
  EXPECT_LT(max_difference(read_file(dir_ / "mine_run" / "final.csv"), read_file(dir_ / "theirs_run" / "final.csv")),
            1e-12);
  const auto mine = lines(read_file(dir_ / "mine_shoot" / "shots.csv"));
  const auto theirs = lines(read_file(dir_ / "theirs_shoot" / "shots.csv"));
  ASSERT_EQ(mine.size(), theirs.size());
  ASSERT_EQ(mine.size(), 26u);
  const auto header = split(mine[0], ',');
  const auto column = [&](const std::string& name) {
    return std::size_t(std::find(header.begin(), header.end(), name) - header.begin());
  };
  for (std::size_t i = 1; i < mine.size(); ++i) {
    const auto a = split(mine[i], ','), b = split(theirs[i], ',');
    EXPECT_EQ(a[column("status")], b[column("status")]) << "target " << i - 1;
    EXPECT_NEAR(std::stod(a[column("length")]), std::stod(b[column("length")]), 1e-12) << "target " << i - 1;
  }
}

// SE(2) with X1 = cos(theta) dx + sin(theta) dy, X2 = dtheta, configs/se2.json,
// which no built-in system covers. Every target is reached; a target on the
// x axis is reached by the straight line (the projection of a horizontal
// curve onto the plane is no longer than the curve), so its distance is x;
// the reflection (x, y, theta) -> (x, -y, -theta) keeps the structure, so
// mirrored targets are equally far.
TEST_F(Declared, SE2GeodesicsReachEveryTargetWithTheKnownLengths) {
  json c = json::parse(read_file(fs::path(TETHER_SOURCE_DIR) / "configs" / "se2.json"));
  c["backend"] = "cpu";
  const Cli r = tether("shoot " + quote(write("se2.json", c)) + " --out " + quote(dir_ / "out") + " --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  const json s = json::parse(read_file(dir_ / "out" / "summary.json"));
  EXPECT_EQ(s["converged"], s["targets"]);
  const auto rows = lines(read_file(dir_ / "out" / "shots.csv"));
  const auto header = split(rows.at(0), ',');
  const auto column = [&](const std::string& name) {
    return std::size_t(std::find(header.begin(), header.end(), name) - header.begin());
  };
  // Targets by their grid coordinates in millionths (the grid's sums round in the last bit).
  const auto micro = [](const std::string& v) { return std::llround(std::stod(v) * 1e6); };
  std::map<std::tuple<long long, long long, long long>, double> length;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const auto f = split(rows[i], ',');
    length[{micro(f[column("q1_0")]), micro(f[column("q1_1")]), micro(f[column("q1_2")])}] =
        std::stod(f[column("length")]);
  }
  ASSERT_EQ(length.size(), 125u);
  int on_axis = 0, mirrored = 0;
  for (const auto& [target, l] : length) {
    const auto [x, y, theta] = target;
    if (y == 0 && theta == 0) {
      EXPECT_NEAR(l, double(x) * 1e-6, 1e-10) << "target (" << x << "e-6, 0, 0)";
      ++on_axis;
    }
    if (const auto m = length.find({x, -y, -theta}); m != length.end() && (y != 0 || theta != 0)) {
      EXPECT_NEAR(l, m->second, 1e-9) << "target (" << x << ", " << y << ", " << theta << ") e-6";
      ++mirrored;
    }
  }
  EXPECT_EQ(on_axis, 5);
  EXPECT_EQ(mirrored, 120);
}

// Bad declarations: one line naming the JSON path (and the position in the
// expression), exit 2, nothing compiled and nothing written.
// A built-in system at a size this build did not instantiate (chain: 4, 8
// and 16 beads) is compiled at first use, as a declared one, with the
// built-in's own sampler of its manifold for a thermal start.
TEST_F(Declared, AChainOfASizeTheBuildLacksIsCompiledAtFirstUse) {
  ::setenv("TETHER_CACHE_DIR", (dir_ / "cache").c_str(), 1);  // its own: the first run must compile
  json c = base_config();
  c["system"] = json::parse(R"json({"name": "chain", "parameters": {"beads": 5, "bend_stiffness": 20}})json");
  c["method"] = json::parse(R"json({"name": "rattle", "dt": 0.002, "steps": 100})json");
  c["ensemble"] = json::parse(R"json({"size": 40, "seed": 2, "initial": {"sampler": "thermal", "temperature": 1.0}})json");
  const Cli first = run(write("chain5.json", c), dir_ / "first");
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.err.find("compiling Chain<5> with rattle"), std::string::npos) << first.err;
  const json s = json::parse(read_file(dir_ / "first" / "summary.json"));
  EXPECT_EQ(s["system"], "chain");
  EXPECT_EQ(s["failed_trajectories"], 0);
  EXPECT_LT(s["max_constraint_violation"].get<double>(), 1e-10);
  EXPECT_LT(s["max_relative_energy_error"].get<double>(), 1e-3);
  const std::string header = read_file(dir_ / "first" / "final.csv").substr(0, 200);
  EXPECT_NE(header.find(",q14,"), std::string::npos) << "5 beads: 15 coordinates";
  EXPECT_EQ(header.find(",q15,"), std::string::npos);
  const Cli again = run(write("chain5.json", c), dir_ / "again");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(again.err.find("compiling"), std::string::npos) << "the second run loads the cached pair";
  EXPECT_EQ(read_file(dir_ / "again" / "final.csv"), read_file(dir_ / "first" / "final.csv"));
}

TEST_F(Declared, BadDeclarationsAreRefusedBeforeAnythingIsCompiledOrWritten) {
  ::setenv("TETHER_CACHE_DIR", (dir_ / "cache").c_str(), 1);
  struct Bad {
    std::string name;
    std::function<void(json&)> edit;
    std::string message;
  };
  const std::vector<Bad> cases = {
      {"a syntax error", [](json& c) { c["system"]["declare"]["potential"] = "m * g * (z"; },
       "config error at system.declare.potential"},
      {"an unknown symbol", [](json& c) { c["system"]["declare"]["potential"] = "m * h * z"; },
       "system.declare.potential: unknown symbol \"h\" at position 5"},
      {"code in an expression",
       [](json& c) { c["system"]["declare"]["potential"] = "z); system(\"touch /tmp/tether_pwned\"); (z"; },
       "system.declare.potential"},
      {"code in a name", [](json& c) { c["system"]["declare"]["name"] = "x\"; int main(){}"; }, "system.declare.name"},
      {"an index of a name without one", [](json& c) { c["system"]["declare"]["potential"] = "m * g * sum(i = 1..3, z[i])"; },
       "system.declare.potential: indexes \"z\" at position 23"},
      {"parentheses nested too deep (which overflowed GiNaC's parser)",
       [](json& c) { c["system"]["declare"]["potential"] = std::string(30000, '(') + "z" + std::string(30000, ')'); },
       "system.declare.potential: nests parentheses more than 200 deep"},
      {"code in a range",
       [](json& c) { c["system"]["declare"]["potential"] = "sum(i = 1..system(\"touch /tmp/tether_pwned\"), z)"; },
       "system.declare.potential: has \"system\" in an index"},
      {"an unknown parameter", [](json& c) { c["system"]["parameters"] = {{"h", 1}}; }, "system.parameters.h"},
      {"a name and a declaration", [](json& c) { c["system"]["name"] = "spherical_pendulum"; }, "system.name"},
      {"a thermal start", [](json& c) { c["ensemble"]["initial"] = {{"sampler", "thermal"}, {"temperature", 1}}; },
       "a declared system, does not have"},
      {"a method of another family", [](json& c) { c["method"]["name"] = "gauss_legendre"; },
       "does not apply to my_pendulum"},
  };
  for (const Bad& b : cases) {
    json c = pendulum_run(declared_pendulum(), "cpu");
    b.edit(c);
    const Cli r = run(write("bad.json", c), dir_ / "out");
    EXPECT_EQ(r.code, 2) << b.name << ": " << r.err;
    EXPECT_NE(one_error_line(r).find(b.message), std::string::npos) << b.name << ": " << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "out")) << b.name;
    EXPECT_FALSE(fs::exists(dir_ / "cache")) << b.name << ": compiled something";
  }
  EXPECT_FALSE(fs::exists("/tmp/tether_pwned"));
}

// Explicit states are checked against the declared manifold before anything is written.
TEST_F(Declared, StatesOffTheManifoldAreRefusedAtTheirPath) {
  json c = pendulum_run(declared_pendulum(), "cpu");
  c["ensemble"] = states_ensemble(json::parse(R"json([{"q": [0.42, 0, -0.56], "p": [0, 1, 0]},
                                                  {"q": [0.5, 0, -0.56], "p": [0, 1, 0]}])json"));
  const Cli r = run(write("c.json", c), dir_ / "out");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("ensemble.initial.states[1]"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

}  // namespace
}  // namespace tether::test

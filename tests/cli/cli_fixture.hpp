#pragma once
// What the tests of the `tether` command share: the real binary run in a
// fresh temporary folder per test (CliTest), its exit code and output (Cli),
// and the small configs the tests edit into the cases they need.
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support.hpp"

namespace tether::test {

namespace fs = std::filesystem;
using nlohmann::json;

inline std::string quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> v;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) v.push_back(l);
  return v;
}

inline std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> v;
  std::stringstream ss(line);
  for (std::string x; std::getline(ss, x, sep);) v.push_back(x);
  return v;
}

// A small valid run (milliseconds): tests edit it into the case they need.
inline json base_config() {
  return json::parse(R"({
    "system":   {"name": "spherical_pendulum"},
    "method":   {"name": "rattle", "dt": 0.01, "steps": 30},
    "ensemble": {"size": 5, "seed": 1, "initial": {"sampler": "thermal", "temperature": 0.5}},
    "output":   {"every": 10},
    "backend":  "cpu"})");
}

inline json states_ensemble(const json& states) { return {{"initial", {{"states", states}}}}; }

struct Cli {
  int code = -1;
  std::string out, err;
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "_" + info->name();
    for (char& c : name)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    dir_ = fs::temp_directory_path() / ("tether_cli_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // Declared systems compile into the suite's cache, not the user's.
    ::setenv("TETHER_CACHE_DIR", TETHER_TEST_CACHE, 1);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return dir_ / name;
  }
  fs::path write(const std::string& name, const json& j) const { return write(name, j.dump(2)); }

  // Runs the binary with `args` (already quoted); stdout and stderr captured apart.
  Cli tether(const std::string& args) const {
    const fs::path out = dir_ / "cli.stdout", err = dir_ / "cli.stderr";
    const std::string cmd = quote(TETHER_BINARY) + " " + args + " >" + quote(out) + " 2>" + quote(err);
    const int rc = std::system(cmd.c_str());
    Cli r;
    r.code = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    r.out = read_file(out);
    r.err = read_file(err);
    return r;
  }
  Cli run(const fs::path& config, const fs::path& out, const std::string& extra = "") const {
    return tether("run " + quote(config) + " --out " + quote(out) + " --quiet " + extra);
  }

  fs::path dir_;
};

// The one line a bad input earns: "error: ..." and nothing else.
inline std::string one_error_line(const Cli& r) {
  const auto ls = lines(r.err);
  EXPECT_EQ(ls.size(), 1u) << "stderr:\n" << r.err;
  if (ls.empty()) return "";
  EXPECT_EQ(ls[0].rfind("error: ", 0), 0u) << ls[0];
  return ls[0];
}

inline json shoot_config() {
  return json::parse(R"({
    "system": {"name": "heisenberg"},
    "method": {"name": "gauss_legendre", "stages": 1, "steps": 10},
    "shoot": {"q0": [0, 0, 0], "time": 1.0,
              "targets": {"list": [[0.5, 0.0, 0.0], [0.3, 0.2, 0.05], [-0.2, 0.4, -0.03]]},
              "guesses": {"toward": true}},
    "backend": "cpu"})");
}

// A chain16 run of a few seconds, checkpointed every 50 steps, in batches
// (so a stop can come in any batch).
inline json checkpointed_config() {
  return json::parse(R"({
    "system":   {"name": "chain", "parameters": {"beads": 16}},
    "method":   {"name": "rattle", "dt": 0.002, "steps": 12000},
    "ensemble": {"size": 300, "seed": 3, "batch_size": 128, "initial": {"sampler": "thermal", "temperature": 1.0}},
    "output":   {"every": 500, "checkpoint": {"every": 50}},
    "backend":  "cpu"})");
}

// `tether COMMAND` (run, sample, shoot) in the background, sent `signal` once its
// first checkpoint is on disk; out: "exit STATUS".
inline Cli stop_at_checkpoint(const fs::path& dir, const std::string& command, const fs::path& cfg, const fs::path& out,
                       const std::string& signal) {
  const fs::path o = dir / "signal.stdout", e = dir / "signal.stderr";
  const std::string checkpoint = quote(out / "checkpoint.tether"), summary = quote(out / "summary.json");
  const std::string cmd = "{ " + quote(TETHER_BINARY) + " " + command + " " + quote(cfg) + " --out " + quote(out) +
                          " --quiet & pid=$!; for i in $(seq 200); do [ -e " + checkpoint + " ] || [ -e " + summary +
                          " ] && break; sleep 0.05; done; kill -" + signal + " $pid; wait $pid; echo \"exit $?\"; } >" +
                          quote(o) + " 2>" + quote(e);
  Cli r;
  r.code = std::system(cmd.c_str());
  r.out = read_file(o);
  r.err = read_file(e);
  return r;
}

// summary.json without its timings (wall and integration seconds, the rate).
inline json without_timings(json s) {
  for (const char* key : {"wall_seconds", "integration_seconds", "trajectory_steps_per_second"}) s.erase(key);
  return s;
}

inline json sharded_config() {
  json j = base_config();
  j["ensemble"]["size"] = 3 * 4096 + 100;
  j["ensemble"]["batch_size"] = 1500;
  j["output"]["trajectories"] = {{"ids", {0, 4100, 12387}}, {"every", 7}};
  return j;
}

// Runs the K shards of `cfg` into dir/name_k and merges them (folders given
// last shard first) into dir/name; the merge's outcome.
inline Cli run_shards_and_merge(const fs::path& dir, const fs::path& cfg, int count, const std::string& name,
                         const std::function<Cli(const std::string&)>& tether) {
  std::string dirs;
  for (int k = count - 1; k >= 0; --k) {
    const fs::path d = dir / (name + "_" + std::to_string(k));
    const Cli r = tether("run " + quote(cfg) + " --out " + quote(d) + " --quiet --shard " + std::to_string(k) + "/" +
                         std::to_string(count));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(fs::exists(d / "shard.tether")) << d;
    EXPECT_FALSE(fs::exists(d / "summary.json")) << "a shard is not a finished run: " << d;
    dirs.append(" ").append(quote(d));
  }
  return tether("merge" + dirs + " --out " + quote(dir / name) + " --quiet");
}

inline json sample_config() {
  return json::parse(R"({
    "system": {"name": "spherical_pendulum"},
    "method": {"name": "rattle", "dt": 0.1, "steps": 5},
    "sample": {"chains": 6, "draws": 25, "warmup": 10, "thin": 2, "seed": 3, "temperature": 2},
    "backend": "cpu"})");
}

// summary.json of a sample without its timings.
inline json sample_without_timings(json s) {
  for (const char* key : {"wall_seconds", "sampling_seconds", "chain_iterations_per_second"}) s.erase(key);
  s["diagnostics"].erase("min_ess_bulk_per_second");
  return s;
}

// A sample config made dynamic: sample.algorithm "dynamic", no L.
inline json dynamic_sample(json j) {
  j["sample"]["algorithm"] = "dynamic";
  j["method"].erase("steps");
  return j;
}

// Seven chains in batches of 3 (which straddle the shards' slices).
inline json sharded_sample_config() {
  json j = sample_config();
  j["sample"]["chains"] = 7;
  j["sample"]["batch_size"] = 3;
  return j;
}

// Pendulum chains that sample for a second or two in one batch: the cpu
// backend's first window (5e6 steps) is about half of it, so the first
// checkpoint comes in the middle of the batch, the next at its end.
inline json checkpointed_sample_config() {
  json j = sample_config();
  j["sample"]["chains"] = 16;
  j["sample"]["warmup"] = 200;
  j["sample"]["draws"] = 3000;
  j["sample"]["thin"] = 20;
  j["output"] = {{"checkpoint", {{"every", 1000}}}};
  return j;
}

}  // namespace tether::test

// The `tether` command as a user meets it: the real binary, run in a fresh
// temporary folder per test, exit codes (2 bad input, 1 runtime error), one
// clear error line, and the files a run leaves behind.
#include <fcntl.h>
#include <netcdf.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include "cli/cli_fixture.hpp"
#include "tether/systems/spherical_pendulum.hpp"

namespace tether::test {
namespace {

// ---------------------------------------------------------------- list, validate

TEST_F(CliTest, ListNamesEverySystemMethodAndBackend) {
  const Cli r = tether("list");
  EXPECT_EQ(r.code, 0) << r.err;
  for (const auto& s : system_names()) EXPECT_NE(r.out.find(s), std::string::npos) << s;
  for (const auto& m : method_names()) EXPECT_NE(r.out.find(m), std::string::npos) << m;
  // "auto" is a choice among these, not a backend of its own.
  for (const char* b : {"reference", "cpu", "cuda"}) EXPECT_NE(r.out.find(b), std::string::npos) << b;
  EXPECT_NE(r.out.find("4, 8, 16"), std::string::npos) << "chain sizes";
  EXPECT_NE(r.out.find("system.declare"), std::string::npos) << "what a config may declare";
}

TEST_F(CliTest, ValidateShippedConfigs) {
  for (const char* name : {"spherical_pendulum", "double_pendulum", "chain16", "pendulum_states"}) {
    const fs::path cfg = fs::path(TETHER_SOURCE_DIR) / "configs" / (std::string(name) + ".json");
    const Cli r = tether("validate " + quote(cfg));
    EXPECT_EQ(r.code, 0) << name << ": " << r.err;
    EXPECT_NE(r.out.find("ok"), std::string::npos) << r.out;
    EXPECT_EQ(r.err, "");
  }
}

// ---------------------------------------------------------------- bad input

struct BadInput {
  std::string name;
  std::function<std::string()> config;  // the file's text
  std::vector<std::string> expect;      // the JSON path and the value, in the error line
  std::string extra_args = "";
};

void PrintTo(const BadInput& b, std::ostream* os) { *os << b.name; }

std::string edited(const std::function<void(json&)>& edit) {
  json j = base_config();
  edit(j);
  return j.dump(2);
}

const json on_sphere = json::array({{{"q", {1.0, 0.0, 0.0}}, {"p", {0.0, 1.0, 0.0}}},
                                    {{"q", {0.0, 0.0, -1.0}}, {"p", {1.0, 0.0, 0.0}}}});

std::vector<BadInput> bad_inputs() {
  std::vector<BadInput> v;
  auto add = [&](std::string name, std::function<void(json&)> edit, std::vector<std::string> expect,
                 std::string extra = "") {
    v.push_back({std::move(name), [edit] { return edited(edit); }, std::move(expect), std::move(extra)});
  };
  v.push_back({"invalid_json", [] { return std::string(R"({"system": {"name": "spherical_pendulum",})"); },
               {"config.json", "not valid JSON"}});
  add("unknown_top_level_key", [](json& j) { j["outputs"] = j["output"]; }, {"outputs", "unknown key"});
  add("unknown_nested_key", [](json& j) { j["method"]["newton"] = {{"tol", 1e-12}}; },
      {"method.newton.tol", "unknown key"});
  add("unknown_system", [](json& j) { j["system"]["name"] = "triple_pendulum"; }, {"system.name", "triple_pendulum"});
  add("unknown_method", [](json& j) { j["method"]["name"] = "verlet"; }, {"method.name", "verlet"});
  add("missing_method", [](json& j) { j.erase("method"); }, {"method", "missing"});
  add("negative_dt", [](json& j) { j["method"]["dt"] = -0.01; }, {"method.dt", "-0.01"});
  add("zero_dt", [](json& j) { j["method"]["dt"] = 0; }, {"method.dt", "got 0"});
  add("dt_whose_square_underflows", [](json& j) { j["method"]["dt"] = 1e-300; }, {"method.dt", "below 1.5e-154"});
  add("string_dt", [](json& j) { j["method"]["dt"] = "0.01"; }, {"method.dt", "\"0.01\""});
  add("fractional_steps", [](json& j) { j["method"]["steps"] = 10.5; }, {"method.steps", "10.5"});
  add("string_steps", [](json& j) { j["method"]["steps"] = "ten"; }, {"method.steps", "\"ten\""});
  add("negative_steps", [](json& j) { j["method"]["steps"] = -3; }, {"method.steps", "-3"});
  add("zero_size", [](json& j) { j["ensemble"]["size"] = 0; }, {"ensemble.size", "got 0"});
  add("negative_temperature", [](json& j) { j["ensemble"]["initial"]["temperature"] = -1; },
      {"ensemble.initial.temperature", "-1"});
  add("chain_of_two_beads", [](json& j) { j["system"] = {{"name", "chain"}, {"parameters", {{"beads", 2}}}}; },
      {"system.parameters.beads", "between 3 and 64, got 2"});
  add("newton_max_iterations_zero", [](json& j) { j["method"]["newton"] = {{"max_iterations", 0}}; },
      {"method.newton.max_iterations", "got 0"});
  add("wrong_state_dimension",
      [](json& j) {
        json s = on_sphere;
        s[1]["q"] = {0.0, -1.0};
        j["ensemble"] = states_ensemble(s);
      },
      {"ensemble.initial.states[1].q", "2 entries"});
  add("off_manifold_state",
      [](json& j) {
        json s = on_sphere;
        s[0]["q"] = {1.5, 0.0, 0.0};
        j["ensemble"] = states_ensemble(s);
      },
      {"ensemble.initial.states[0].q", "off the constraint manifold"});
  add("off_tangent_momentum",
      [](json& j) {
        json s = on_sphere;
        s[1]["p"] = {1.0, 0.0, 0.2};
        j["ensemble"] = states_ensemble(s);
      },
      {"ensemble.initial.states[1].p", "hidden constraint"});
  add("unknown_backend", [](json& j) { j["backend"] = "gpu"; }, {"backend", "\"gpu\""});
  add("unknown_backend_option", [](json&) {}, {"backend", "\"gpu\""}, "--backend gpu");
  add("unknown_precision", [](json& j) { j["precision"] = "single"; }, {"precision", "single"});
  add("unknown_output_format", [](json& j) { j["output"]["format"] = "hdf5"; }, {"output.format", "\"hdf5\""});
  add("tracked_id_beyond_the_ensemble", [](json& j) { j["output"]["trajectories"] = {{"ids", {0, 5}}}; },
      {"output.trajectories.ids[1]", "from 0 to 4, got 5"});
  add("tracked_id_twice", [](json& j) { j["output"]["trajectories"] = {{"ids", {3, 1, 3}}}; },
      {"output.trajectories.ids", "trajectory 3 twice"});
  add("tracked_ids_not_a_list", [](json& j) { j["output"]["trajectories"] = {{"ids", 2}}; },
      {"output.trajectories.ids", "must be an array"});
  // The value is quoted as JSON, so an escaped newline in it cannot split the error line.
  add("system_name_with_newline", [](json& j) { j["system"]["name"] = "spherical\npendulum"; },
      {"system.name", "spherical"});
  // JSON has no literal for infinity; an overflowing number is the way to write one.
  // Nesting far beyond any config: refused before nlohmann::json's recursive
  // copies could overflow the stack (10^5 levels crashed validate and run).
  v.push_back({"nested_100000_levels",
               [] { return R"({"system": )" + std::string(100000, '[') + std::string(100000, ']') + "}"; },
               {"system[0][0]", "nests deeper than 64 levels"}});
  // JSON leaves a repeated key's meaning undefined; nlohmann keeps the last silently.
  v.push_back({"duplicate_key",
               [] {
                 std::string t = base_config().dump();
                 const std::string dt = "\"dt\":0.01";
                 t.replace(t.find(dt), dt.size(), dt + ",\"dt\":0.02");
                 return t;
               },
               {"method.dt", "appears twice"}});
  // An unknown key is named, but a huge one is not echoed whole.
  add("unknown_key_of_a_million_characters", [](json& j) { j["method"][std::string(1000000, 'x')] = 1; },
      {"method.xxxxxxxx", "...: unknown key"});
  v.push_back({"non_finite_number",
               [] {
                 std::string t = base_config().dump();
                 const std::string dt = "\"dt\":0.01";
                 t.replace(t.find(dt), dt.size(), "\"dt\":1e999");
                 return t;
               },
               {"config.json", "1e999"}});
  return v;
}

class BadInputTest : public CliTest, public ::testing::WithParamInterface<BadInput> {};

TEST_P(BadInputTest, ExitsTwoWithOneErrorLineAndNoSummary) {
  const BadInput& c = GetParam();
  const fs::path cfg = write("config.json", c.config()), out = dir_ / "out";
  const Cli r = run(cfg, out, c.extra_args);
  EXPECT_EQ(r.code, 2) << r.err.substr(0, 2000);
  const std::string line = one_error_line(r);
  EXPECT_LT(line.size(), 400u) << "an error line echoes at most a bounded part of the input";
  for (const auto& s : c.expect) EXPECT_NE(line.find(s), std::string::npos) << "expected \"" << s << "\" in: " << line;
  // Rejected before anything is written: no folder, so certainly no summary.json.
  EXPECT_FALSE(fs::exists(out / "summary.json"));
  EXPECT_FALSE(fs::exists(out)) << "a rejected config should leave no trace";

  // validate reports the same problem, the same way (backend overrides are run-only).
  if (c.extra_args.empty()) {
    const Cli v = tether("validate " + quote(cfg));
    EXPECT_EQ(v.code, 2) << v.out;
    EXPECT_EQ(one_error_line(v), line);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, BadInputTest, ::testing::ValuesIn(bad_inputs()),
                         [](const auto& info) { return info.param.name; });

TEST_F(CliTest, MissingConfigFile) {
  const fs::path missing = dir_ / "missing.json", out = dir_ / "out";
  const Cli r = run(missing, out);
  EXPECT_EQ(r.code, 2);
  const std::string line = one_error_line(r);
  EXPECT_NE(line.find(missing.string()), std::string::npos) << line;
  EXPECT_NE(line.find("cannot be read"), std::string::npos) << line;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(tether("validate " + quote(missing)).code, 2);
}

// A path to something endless (a device, a pipe) is read up to a bound, not until memory runs out.
TEST_F(CliTest, EndlessConfigFileIsRefusedAtABound) {
  const fs::path out = dir_ / "out";
  for (const std::string& args : {std::string("validate /dev/zero"), "run /dev/zero --out " + quote(out)}) {
    const Cli r = tether(args);
    EXPECT_EQ(r.code, 2) << args;
    const std::string line = one_error_line(r);
    EXPECT_NE(line.find("/dev/zero"), std::string::npos) << line;
    EXPECT_NE(line.find("larger than 256 MiB"), std::string::npos) << line;
  }
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(CliTest, CudaBackendUnavailable) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  json j = base_config();
  j["backend"] = "cuda";
  const fs::path cfg = write("config.json", j), out = dir_ / "out";
  for (const std::string extra : {"", "--backend cuda"}) {
    const fs::path c = extra.empty() ? cfg : write("cpu.json", base_config());
    const Cli r = run(c, out, extra);
    EXPECT_EQ(r.code, 2) << extra;
    const std::string line = one_error_line(r);
    EXPECT_NE(line.find("backend"), std::string::npos) << line;
    EXPECT_NE(line.find("cuda"), std::string::npos) << line;
    const char* why = !cuda_built() ? "no CUDA support" : cuda_compile_check_only() ? "only to check them" : "no CUDA device";
    EXPECT_NE(line.find(why), std::string::npos) << line;
    EXPECT_FALSE(fs::exists(out / "summary.json"));
  }
}

TEST_F(CliTest, BadUsageExitsTwo) {
  const fs::path cfg = write("config.json", base_config()), out = dir_ / "out";
  for (const std::string& args : std::vector<std::string>{"",                                          // no subcommand
                                 "run " + quote(cfg),                                        // no --out
                                 "run --out " + quote(out),                                  // no config
                                 "frobnicate",                                               // unknown subcommand
                                 "run " + quote(cfg) + " --out " + quote(out) + " --threads 0",
                                 "run " + quote(cfg) + " --out " + quote(out) + " --batch-size -4",
                                 "run " + quote(cfg) + " --out " + quote(out) + " --bogus",
                                 "validate"}) {
    const Cli r = tether(args);
    EXPECT_EQ(r.code, 2) << "tether " << args << "\n" << r.err;
    EXPECT_FALSE(r.err.empty()) << "tether " << args << " should say what is wrong";
    EXPECT_FALSE(fs::exists(out / "summary.json")) << "tether " << args;
  }
  EXPECT_EQ(tether("--help").code, 0);
}

// A rejected config must not touch an existing run's folder: the old
// summary.json still describes the complete files beside it, and a typo in a
// new config should not destroy finished results.
TEST_F(CliTest, RejectedConfigLeavesAnEarlierRunIntact) {
  const fs::path out = dir_ / "out";
  const Cli first = run(write("good.json", base_config()), out);
  ASSERT_EQ(first.code, 0) << first.err;
  const std::string summary = read_file(out / "summary.json"), finals = read_file(out / "final.csv");
  ASSERT_FALSE(summary.empty());

  json bad = base_config();
  bad["method"]["dt"] = -1;
  const Cli r = run(write("bad.json", bad), out);
  EXPECT_EQ(r.code, 2);
  one_error_line(r);
  EXPECT_EQ(read_file(out / "summary.json"), summary);
  EXPECT_EQ(read_file(out / "final.csv"), finals);
}

// A run that passed validation and then fails leaves the previous run's
// results as they were (its summary.json still vouches for its own files)
// and none of its own.
TEST_F(CliTest, RuntimeFailureLeavesTheEarlierRunIntact) {
  const fs::path out = dir_ / "out";
  ASSERT_EQ(run(write("first.json", base_config()), out).code, 0);
  const std::string summary = read_file(out / "summary.json"), finals = read_file(out / "final.csv");
  fs::create_directories(out / "final.csv.partial" / "x");  // a folder with content: cannot be cleared or written
  json j = base_config();
  j["ensemble"]["size"] = 3;
  const Cli r = run(write("config.json", j), out);
  EXPECT_EQ(r.code, 1) << r.err;
  const std::string line = one_error_line(r);
  EXPECT_NE(line.find("final.csv"), std::string::npos) << line;
  EXPECT_EQ(read_file(out / "summary.json"), summary);
  EXPECT_EQ(read_file(out / "final.csv"), finals);
  EXPECT_FALSE(fs::exists(out / "timeseries.csv.partial"));
}

// Two runs into one folder at once: the second is refused while the first
// holds the folder (here the test holds its lock), and the first's files are
// untouched; once it lets go, a run goes through.
TEST_F(CliTest, AFolderInUseByAnotherRunIsRefused) {
  const fs::path out = dir_ / "out";
  ASSERT_EQ(run(write("first.json", base_config()), out).code, 0);
  const std::string summary = read_file(out / "summary.json");
  const int fd = ::open((out / ".tether.lock").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  json j = base_config();
  j["ensemble"]["size"] = 2;
  const fs::path cfg = write("second.json", j);
  for (const std::string command : {"run", "shoot", "sample"}) {
    const Cli r = command == "run" ? run(cfg, out)
                                   : tether(command + " " + quote(command == "shoot" ? write("s.json", shoot_config())
                                                                                       : write("m.json", sample_config())) +
                                            " --out " + quote(out) + " --quiet");
    EXPECT_EQ(r.code, 1) << command << ": " << r.err;
    const std::string line = one_error_line(r);
    EXPECT_NE(line.find("in use by another tether run"), std::string::npos) << line;
    EXPECT_EQ(read_file(out / "summary.json"), summary) << command;
  }
  ::close(fd);
  const Cli r = run(cfg, out);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(read_file(out / "summary.json")).value("trajectories", -1), 2);
}

TEST_F(CliTest, UncreatableOutputFolderIsARuntimeError) {
  const fs::path file = write("plain_file", std::string("x"));
  const Cli r = run(write("config.json", base_config()), file / "out");
  EXPECT_EQ(r.code, 1) << r.err;
  const std::string line = one_error_line(r);
  EXPECT_NE(line.find("output folder"), std::string::npos) << line;
}

// ---------------------------------------------------------------- successful runs

TEST_F(CliTest, RunWritesTheContractFiles) {
  const fs::path out = dir_ / "out";
  const Cli r = run(write("config.json", base_config()), out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, "") << "--quiet";

  const json s = json::parse(read_file(out / "summary.json"));
  for (const char* key : {"system", "method", "backend", "precision", "trajectories", "steps", "dt",
                          "max_constraint_violation", "max_velocity_constraint_violation", "max_relative_energy_error",
                          "newton_iterations", "failed_trajectories", "failures", "wall_seconds",
                          "trajectory_steps_per_second"})
    EXPECT_TRUE(s.contains(key)) << key;
  EXPECT_EQ(s.value("system", ""), "spherical_pendulum");
  EXPECT_EQ(s.value("method", ""), "rattle");
  EXPECT_EQ(s.value("backend", ""), "cpu");
  EXPECT_EQ(s.value("precision", ""), "double");
  EXPECT_EQ(s.value("trajectories", -1), 5);
  EXPECT_EQ(s.value("steps", -1), 30);
  EXPECT_DOUBLE_EQ(s.value("dt", 0.0), 0.01);
  EXPECT_LT(s.value("max_constraint_violation", 1.0), 1e-12);
  EXPECT_LT(s.value("max_velocity_constraint_violation", 1.0), 1e-12);
  EXPECT_LT(s.value("max_relative_energy_error", 1.0), 1e-2);
  ASSERT_TRUE(s["newton_iterations"].is_object());
  EXPECT_TRUE(s["newton_iterations"]["mean"].is_number());
  EXPECT_TRUE(s["newton_iterations"]["max"].is_number_integer());
  EXPECT_GT(s["newton_iterations"]["mean"].get<double>(), 0);
  EXPECT_GE(s["newton_iterations"]["max"].get<double>(), s["newton_iterations"]["mean"].get<double>());
  EXPECT_EQ(s.value("failed_trajectories", -1), 0);
  EXPECT_TRUE(s["failures"].is_array() && s["failures"].empty());
  EXPECT_GE(s.value("wall_seconds", -1.0), 0);
  EXPECT_GT(s.value("trajectory_steps_per_second", -1.0), 0);

  const auto f = lines(read_file(out / "final.csv"));
  ASSERT_EQ(f.size(), 6u);
  EXPECT_EQ(f[0], "id,q0,q1,q2,p0,p1,p2,status");
  for (int i = 0; i < 5; ++i) {
    const auto cells = split(f[std::size_t(i) + 1], ',');
    ASSERT_EQ(cells.size(), 8u) << f[std::size_t(i) + 1];
    EXPECT_EQ(cells[0], std::to_string(i));
    EXPECT_EQ(cells[7], "ok");
    // Round-trip decimals: the written state is still on the sphere.
    const double x = std::stod(cells[1]), y = std::stod(cells[2]), z = std::stod(cells[3]);
    EXPECT_NEAR(x * x + y * y + z * z, 1.0, 1e-12);
  }

  const auto t = lines(read_file(out / "timeseries.csv"));
  ASSERT_EQ(t.size(), 5u);  // header + steps 0, 10, 20, 30
  EXPECT_EQ(t[0].rfind("step,time,", 0), 0u) << t[0];
  EXPECT_EQ(split(t[1], ',')[0], "0");
  EXPECT_EQ(split(t[4], ',')[0], "30");
  EXPECT_EQ(split(t[4], ',')[2], "5");  // live trajectories

  for (const auto& e : fs::directory_iterator(out))
    EXPECT_NE(e.path().extension(), ".partial") << e.path();
}

TEST_F(CliTest, OverridesAndOptionalFinalStates) {
  json j = base_config();
  j["system"] = {{"name", "chain"}, {"parameters", {{"beads", 4}}}};
  j["method"]["dt"] = 0.002;
  j["backend"] = "auto";
  const fs::path out = dir_ / "out";
  Cli r = run(write("chain.json", j), out, "--backend reference --threads 1 --batch-size 2");
  ASSERT_EQ(r.code, 0) << r.err;
  json s = json::parse(read_file(out / "summary.json"));
  EXPECT_EQ(s.value("backend", ""), "reference");
  const auto f = lines(read_file(out / "final.csv"));
  ASSERT_EQ(f.size(), 6u);
  EXPECT_EQ(split(f[0], ',').size(), 1u + 12 + 12 + 1) << f[0];
  EXPECT_EQ(split(f[0], ',')[12], "q11");
  EXPECT_EQ(split(f[0], ',')[13], "p0");

  // "auto" resolves to a real backend in the summary; final states can be switched off.
  j["output"]["final_states"] = false;
  const fs::path out2 = dir_ / "out2";
  r = run(write("chain2.json", j), out2);
  ASSERT_EQ(r.code, 0) << r.err;
  s = json::parse(read_file(out2 / "summary.json"));
  EXPECT_EQ(s.value("backend", ""), cuda_device_count() > 0 ? "cuda" : "cpu");
  EXPECT_FALSE(fs::exists(out2 / "final.csv"));
  EXPECT_TRUE(fs::exists(out2 / "timeseries.csv"));
}

// Reusing a folder: a run that writes no final states must not leave the
// previous run's final.csv beside its own summary.json, where it would pass
// for this run's final states.
TEST_F(CliTest, RerunWithoutFinalStatesLeavesNoStaleFinalCsv) {
  const fs::path out = dir_ / "out";
  ASSERT_EQ(run(write("first.json", base_config()), out).code, 0);
  ASSERT_TRUE(fs::exists(out / "final.csv"));
  json j = base_config();
  j["ensemble"]["size"] = 2;
  j["output"]["final_states"] = false;
  const Cli r = run(write("second.json", j), out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(read_file(out / "summary.json")).value("trajectories", -1), 2);
  EXPECT_FALSE(fs::exists(out / "final.csv")) << "final.csv of the earlier 5-trajectory run is still there";

  // A killed run's leftover is cleared by the next run in the folder.
  std::ofstream(out / "final.csv.partial") << "id,q0\n1,";
  ASSERT_EQ(run(write("second.json", j), out).code, 0);
  EXPECT_FALSE(fs::exists(out / "final.csv.partial"));
}

// A finite state whose energy overflows (gravity 1e300 on a rigid body) fails
// as non_finite at the observation that sees it: no NaN in the files, and
// the summary does not report a clean run.
TEST_F(CliTest, NonFiniteEnergyFailsTheTrajectory) {
  json j = base_config();
  j["system"] = {{"name", "rigid_body"}, {"parameters", {{"inertia", {1.0, 1.5, 2.0}}, {"mass", 1.0}, {"gravity", 1e300}}}};
  j["method"] = {{"name", "lie_rattle"}, {"retraction", "cayley"}, {"dt", 0.01}, {"steps", 100}};
  j["output"]["every"] = 5;
  const fs::path out = dir_ / "out";
  const Cli r = run(write("config.json", j), out);
  ASSERT_EQ(r.code, 0) << r.err;
  const json s = json::parse(read_file(out / "summary.json"));
  EXPECT_EQ(s.value("failed_trajectories", -1), 5) << s.dump(2);
  ASSERT_FALSE(s["failures"].empty());
  for (const auto& f : s["failures"]) {
    EXPECT_EQ(f.value("reason", ""), "non_finite");
    EXPECT_EQ(f.value("step", -1) % 5, 0) << "failed at an observation";
  }
  EXPECT_EQ(read_file(out / "timeseries.csv").find("nan"), std::string::npos);
  EXPECT_EQ(read_file(out / "summary.json").find("null"), std::string::npos);
  for (const auto& row : lines(read_file(out / "final.csv"))) EXPECT_EQ(row.find("nan"), std::string::npos) << row;
}

// What cannot fit is refused before the folder is touched, with the figure
// and the key to change: a timeseries of 2^40 rows (held in memory where the
// ensemble runs in several batches; streamed to disk, and too large for it,
// where it runs as one), a batch of 2^30 chain16 trajectories (1.3 TB), a
// shooting grid of 10^9 targets (validated in milliseconds, not by generating
// them), and the same batch asked for by --batch-size.
TEST_F(CliTest, WhatCannotFitIsRefusedUpFront) {
  const fs::path out = dir_ / "out";
  ASSERT_EQ(run(write("first.json", base_config()), out).code, 0);
  const std::string summary = read_file(out / "summary.json");
  json rows = base_config();
  rows["method"]["steps"] = std::int64_t(1) << 40;
  rows["output"]["every"] = 1;
  json batched_rows = rows;
  batched_rows["ensemble"]["size"] = 200;
  batched_rows["ensemble"]["batch_size"] = 64;
  json batch = base_config();
  batch["system"] = {{"name", "chain"}, {"parameters", {{"beads", 16}}}};
  batch["ensemble"]["size"] = std::int64_t(1) << 30;
  batch["ensemble"]["batch_size"] = std::int64_t(1) << 30;
  json grid = shoot_config();
  grid["shoot"]["targets"] = {{"grid", {{"min", {-1, -1, -1}}, {"max", {1, 1, 1}}, {"count", {1000, 1000, 1000}}}}};
  const struct {
    json config;
    std::string command, path, why;
    int validate;  // what `tether validate` exits with: it knows memory, not the disk of a folder
  } cases[] = {{rows, "run", "output.every", " free: raise output.every", 0},
               {batched_rows, "run", "output.every", "of memory", 2},
               {batch, "run", "ensemble.batch_size", "of memory", 2},
               {grid, "shoot", "shoot.targets.grid.count", "of memory", 2}};
  for (const auto& c : cases) {
    const fs::path cfg = write("big.json", c.config);
    const Cli r = tether(c.command + " " + quote(cfg) + " --out " + quote(out) + " --quiet");
    EXPECT_EQ(r.code, 2) << c.path << ": " << r.err;
    const std::string line = one_error_line(r);
    EXPECT_NE(line.find(c.path), std::string::npos) << line;
    EXPECT_NE(line.find(c.why), std::string::npos) << line;
    EXPECT_EQ(read_file(out / "summary.json"), summary) << "the earlier results are kept";
    EXPECT_EQ(tether("validate " + quote(cfg)).code, c.validate) << c.path;
  }
  // Held rows name the way to stream them.
  const Cli held = tether("validate " + quote(write("big.json", batched_rows)));
  EXPECT_NE(one_error_line(held).find("run the ensemble as one batch (ensemble.batch_size >= ensemble.size)"),
            std::string::npos)
      << held.err;
  // The config fits; the batch the option asks for does not, and is refused naming the option.
  batch["ensemble"].erase("batch_size");
  batch["output"]["final_states"] = false;
  const Cli r = tether("run " + quote(write("big.json", batch)) + " --out " + quote(out) + " --quiet --batch-size " +
                       std::to_string(std::int64_t(1) << 30));
  EXPECT_EQ(r.code, 2) << r.err;
  const std::string line = one_error_line(r);
  EXPECT_NE(line.find("--batch-size"), std::string::npos) << line;
  EXPECT_NE(line.find("of memory"), std::string::npos) << line;
  EXPECT_EQ(read_file(out / "summary.json"), summary) << "the earlier results are kept";
}

// Failed trajectories are not bad input: the run completes (exit 0), warns,
// and lists them.
TEST_F(CliTest, FailedTrajectoriesAreReportedNotFatal) {
  json j = base_config();
  j["ensemble"] = states_ensemble(json::array({{{"q", {1.0, 0.0, 0.0}}, {"p", {0.0, 0.3, 0.0}}},
                                               {{"q", {0.0, 0.0, -1.0}}, {"p", {40.0, 0.0, 0.0}}}}));
  j["method"]["dt"] = 0.05;
  // h|p| = 2 > L: the second state's first step has no solution.
  const fs::path out = dir_ / "out";
  const Cli r = run(write("config.json", j), out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: 1 of 2 trajectories failed"), std::string::npos) << r.err;
  const json s = json::parse(read_file(out / "summary.json"));
  EXPECT_EQ(s.value("failed_trajectories", -1), 1);
  ASSERT_EQ(s["failures"].size(), 1u);
  EXPECT_EQ(s["failures"][0].value("id", -1), 1);
  EXPECT_GT(s["failures"][0].value("step", 0), 0);
  EXPECT_EQ(s["failures"][0].value("reason", ""), "newton_not_converged");
  // The failing step's iterations count in the mean as in the max.
  EXPECT_LE(s["newton_iterations"].value("mean", 1e9), s["newton_iterations"].value("max", 0));
  const auto f = lines(read_file(out / "final.csv"));
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(split(f[1], ',').back(), "ok");
  EXPECT_EQ(split(f[2], ',').back(), "newton_not_converged");
  // No NaN reaches the files.
  EXPECT_EQ(read_file(out / "timeseries.csv").find("nan"), std::string::npos);
  EXPECT_EQ(read_file(out / "summary.json").find("null"), std::string::npos);
}


// ---------------------------------------------------------------- nonholonomic family

// A small valid nonholonomic run: the parallel parking vehicle (dof 4).
json parking_config() {
  return json::parse(R"({
    "system":   {"name": "parallel_parking", "parameters": {"length": 0.3}},
    "method":   {"name": "gauss_legendre", "stages": 2, "dt": 0.05, "steps": 40},
    "ensemble": {"size": 6, "seed": 3, "initial": {"sampler": "around", "q": [0.3, 0, 0, 1.5707963267948966],
                 "p": [0, 0, 1.09, 1], "position_spread": 0.1, "momentum_spread": 0.1}},
    "output":   {"every": 10},
    "backend":  "cpu"})");
}

json heisenberg_config() {
  return json::parse(R"({
    "system":   {"name": "heisenberg"},
    "method":   {"name": "gauss_legendre", "stages": 1, "dt": 0.05, "steps": 20},
    "ensemble": {"size": 4, "seed": 1, "initial": {"sampler": "around", "q": [0.1, -0.2, 0.3], "p": [0.5, 0.3, -0.4],
                 "position_spread": 0.1, "momentum_spread": 0.1}},
    "backend":  "cpu"})");
}

TEST_F(CliTest, NonholonomicRunWritesFamilyStagesAndFinalStates) {
  const fs::path out = dir_ / "out";
  const Cli r = run(write("parking.json", parking_config()), out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");

  const json s = json::parse(read_file(out / "summary.json"));
  EXPECT_EQ(s.value("system", ""), "parallel_parking");
  EXPECT_EQ(s.value("family", ""), "nonholonomic");
  EXPECT_EQ(s.value("method", ""), "gauss_legendre");
  ASSERT_TRUE(s.contains("stages"));
  EXPECT_TRUE(s["stages"].is_number_integer());
  EXPECT_EQ(s.value("stages", -1), 2);
  EXPECT_EQ(s.value("backend", ""), "cpu");
  EXPECT_EQ(s.value("trajectories", -1), 6);
  EXPECT_EQ(s.value("steps", -1), 40);
  EXPECT_EQ(s.value("failed_trajectories", -1), 0);
  ASSERT_TRUE(s["max_constraint_violation"].is_number());
  EXPECT_EQ(s["max_constraint_violation"].get<double>(), 0.0) << "no position constraints in this family";
  ASSERT_TRUE(s["max_velocity_constraint_violation"].is_number());
  EXPECT_LE(s["max_velocity_constraint_violation"].get<double>(), 1e-12);
  EXPECT_LT(s.value("max_relative_energy_error", 1.0), 1e-2);
  EXPECT_GT(s["newton_iterations"]["mean"].get<double>(), 0);

  const auto f = lines(read_file(out / "final.csv"));
  ASSERT_EQ(f.size(), 7u);
  const auto header = split(f[0], ',');
  ASSERT_EQ(header.size(), 1u + 4 + 4 + 1) << f[0];
  EXPECT_EQ(header[0], "id");
  EXPECT_EQ(header[4], "q3");
  EXPECT_EQ(header[5], "p0");
  EXPECT_EQ(header[8], "p3");
  EXPECT_EQ(header[9], "status");
  for (int i = 0; i < 6; ++i) {
    const auto cells = split(f[std::size_t(i) + 1], ',');
    ASSERT_EQ(cells.size(), 10u) << f[std::size_t(i) + 1];
    EXPECT_EQ(cells[0], std::to_string(i));
    EXPECT_EQ(cells[9], "ok");
    for (int k = 1; k < 9; ++k) EXPECT_TRUE(std::isfinite(std::stod(cells[std::size_t(k)]))) << cells[std::size_t(k)];
  }
  const auto t = lines(read_file(out / "timeseries.csv"));
  ASSERT_EQ(t.size(), 6u);  // header + steps 0, 10, 20, 30, 40
  EXPECT_EQ(split(t[5], ',')[0], "40");
  EXPECT_EQ(split(t[5], ',')[2], "6");
  for (std::size_t i = 1; i < t.size(); ++i) EXPECT_EQ(std::stod(split(t[i], ',')[5]), 0.0) << t[i];

  // Without stages in the method there is no "stages" key; a holonomic run says its family.
  json se = parking_config();
  se["method"].erase("stages");
  se["method"]["name"] = "stormer_verlet";
  const fs::path out2 = dir_ / "out2";
  ASSERT_EQ(run(write("sv.json", se), out2).code, 0);
  const json s2 = json::parse(read_file(out2 / "summary.json"));
  EXPECT_EQ(s2.value("family", ""), "nonholonomic");
  EXPECT_EQ(s2.value("method", ""), "stormer_verlet");
  EXPECT_FALSE(s2.contains("stages")) << s2.dump();
  const fs::path out3 = dir_ / "out3";
  ASSERT_EQ(run(write("holonomic.json", base_config()), out3).code, 0);
  const json s3 = json::parse(read_file(out3 / "summary.json"));
  EXPECT_EQ(s3.value("family", ""), "holonomic");
  EXPECT_FALSE(s3.contains("stages")) << s3.dump();
}

// Every stage count reaches the integrator: the summary reports it, and the
// final states differ between 1, 2 and 3 stages (orders 2, 4, 6).
TEST_F(CliTest, NonholonomicStagesSelectTheMethod) {
  std::vector<std::string> finals;
  for (int stages : {1, 2, 3}) {
    json j = heisenberg_config();
    j["method"]["stages"] = stages;
    const fs::path out = dir_ / ("out" + std::to_string(stages));
    const Cli r = run(write("h" + std::to_string(stages) + ".json", j), out);
    ASSERT_EQ(r.code, 0) << r.err;
    const json s = json::parse(read_file(out / "summary.json"));
    EXPECT_EQ(s.value("system", ""), "heisenberg");
    EXPECT_EQ(s.value("stages", -1), stages);
    EXPECT_EQ(s["max_velocity_constraint_violation"].get<double>(), 0.0) << "canonical form";
    const auto f = lines(read_file(out / "final.csv"));
    ASSERT_EQ(f.size(), 5u);
    EXPECT_EQ(split(f[0], ',').size(), 1u + 3 + 3 + 1) << f[0];
    finals.push_back(read_file(out / "final.csv"));
  }
  EXPECT_NE(finals[0], finals[1]);
  EXPECT_NE(finals[1], finals[2]);
}

// A nonholonomic config edited into a bad one.
std::string nh_edited(json j, const std::function<void(json&)>& edit) {
  edit(j);
  return j.dump(2);
}

const json heisenberg_states = json::array({{{"q", {0.0, 0.0, 0.0}}, {"p", {1.0, 0.0, 0.0}}},
                                            {{"q", {0.1, 0.2, 0.3}}, {"p", {0.0, 1.0, 0.5}}}});

std::vector<BadInput> nonholonomic_bad_inputs() {
  std::vector<BadInput> v;
  auto add = [&](std::string name, std::function<json()> base, std::function<void(json&)> edit,
                 std::vector<std::string> expect) {
    v.push_back({std::move(name), [base, edit] { return nh_edited(base(), edit); }, std::move(expect)});
  };
  add("rattle_on_heisenberg", heisenberg_config, [](json& j) { j["method"] = {{"name", "rattle"}, {"dt", 0.05}, {"steps", 10}}; },
      {"method.name", "rattle", "heisenberg"});
  add("shake_on_parallel_parking", parking_config,
      [](json& j) { j["method"] = {{"name", "shake"}, {"dt", 0.05}, {"steps", 10}}; }, {"method.name", "shake"});
  add("gauss_legendre_on_spherical_pendulum", base_config, [](json& j) { j["method"]["name"] = "gauss_legendre"; j["method"]["stages"] = 2; },
      {"method.name", "gauss_legendre", "spherical_pendulum"});
  add("stormer_verlet_on_chain", base_config,
      [](json& j) {
        j["system"] = {{"name", "chain"}, {"parameters", {{"beads", 4}}}};
        j["method"]["name"] = "stormer_verlet";
      },
      {"method.name", "stormer_verlet"});
  add("gauss_legendre_without_stages", heisenberg_config, [](json& j) { j["method"].erase("stages"); },
      {"method.stages", "missing"});
  add("gauss_legendre_stages_4", heisenberg_config, [](json& j) { j["method"]["stages"] = 4; },
      {"method.stages", "4"});
  add("gauss_legendre_stages_0", heisenberg_config, [](json& j) { j["method"]["stages"] = 0; },
      {"method.stages", "0"});
  add("gauss_legendre_stages_string", heisenberg_config, [](json& j) { j["method"]["stages"] = "2"; },
      {"method.stages", "\"2\""});
  add("stages_on_rattle", base_config, [](json& j) { j["method"]["stages"] = 2; },
      {"method.stages", "gauss_legendre"});
  add("stages_on_symplectic_euler", heisenberg_config, [](json& j) { j["method"]["name"] = "symplectic_euler"; },
      {"method.stages", "gauss_legendre"});
  add("thermal_on_martinet", heisenberg_config,
      [](json& j) {
        j["system"] = {{"name", "martinet"}};
        j["ensemble"]["initial"] = {{"sampler", "thermal"}, {"temperature", 0.5}};
      },
      {"ensemble.initial.sampler", "thermal"});
  add("project_on_heisenberg", heisenberg_config,
      [](json& j) {
        j["ensemble"] = states_ensemble(heisenberg_states);
        j["ensemble"]["initial"]["project"] = true;
      },
      {"ensemble.initial.project"});
  add("tolerance_on_heisenberg", heisenberg_config,
      [](json& j) {
        j["ensemble"] = states_ensemble(heisenberg_states);
        j["ensemble"]["initial"]["tolerance"] = 1e-8;
      },
      {"ensemble.initial.tolerance"});
  add("unknown_parameter_on_heisenberg", heisenberg_config,
      [](json& j) { j["system"]["parameters"] = {{"beta", 0.5}}; }, {"system.parameters.beta", "unknown key"});
  add("unknown_parameter_on_martinet", heisenberg_config,
      [](json& j) { j["system"] = {{"name", "martinet"}, {"parameters", {{"alpha", 1.0}}}}; },
      {"system.parameters.alpha", "unknown key"});
  add("string_beta_on_martinet_lagrangian", heisenberg_config,
      [](json& j) { j["system"] = {{"name", "martinet_lagrangian"}, {"parameters", {{"beta", "0.5"}}}}; },
      {"system.parameters.beta", "\"0.5\""});
  add("parking_potential_unknown", parking_config, [](json& j) { j["system"]["parameters"]["potential"] = "saddle"; },
      {"system.parameters.potential", "saddle"});
  add("parking_negative_length", parking_config, [](json& j) { j["system"]["parameters"]["length"] = -0.3; },
      {"system.parameters.length", "-0.3"});
  add("parking_zero_alpha", parking_config, [](json& j) { j["system"]["parameters"]["alpha"] = 0; },
      {"system.parameters.alpha", "got 0"});
  add("parking_state_wrong_dimension", parking_config,
      [](json& j) {
        j["ensemble"] = states_ensemble(json::array({{{"q", {0.3, 0.0, 0.0, 1.5}}, {"p", {0.0, 0.0, 1.0, 1.0}}},
                                                     {{"q", {0.3, 0.0, 0.0}}, {"p", {0.0, 0.0, 1.0, 1.0}}}}));
      },
      {"ensemble.initial.states[1].q", "3 entries", "4"});
  add("parking_state_wrong_momentum_dimension", parking_config,
      [](json& j) {
        j["ensemble"] = states_ensemble(json::array({{{"q", {0.3, 0.0, 0.0, 1.5}}, {"p", {0.0, 0.0, 1.0, 1.0, 0.0}}}}));
      },
      {"ensemble.initial.states[0].p", "5 entries"});
  add("parking_around_center_wrong_dimension", parking_config,
      [](json& j) { j["ensemble"]["initial"]["q"] = {0.3, 0.0, 0.0}; }, {"ensemble.initial.q", "3 entries"});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Nonholonomic, BadInputTest, ::testing::ValuesIn(nonholonomic_bad_inputs()),
                         [](const auto& info) { return info.param.name; });

// Explicit states of an index-1 system need no manifold: any (q, p) runs.
TEST_F(CliTest, NonholonomicExplicitStatesRun) {
  json j = heisenberg_config();
  j["ensemble"] = states_ensemble(heisenberg_states);
  const fs::path out = dir_ / "out";
  const Cli r = run(write("states.json", j), out);
  ASSERT_EQ(r.code, 0) << r.err;
  const json s = json::parse(read_file(out / "summary.json"));
  EXPECT_EQ(s.value("trajectories", -1), 2);
  EXPECT_EQ(s.value("failed_trajectories", -1), 0);
  EXPECT_EQ(s["initial_projection"].value("projected_states", -1), 0);
  const auto f = lines(read_file(out / "final.csv"));
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(split(f[1], ',').back(), "ok");
  EXPECT_EQ(split(f[2], ',').back(), "ok");
}

// Section of `tether list` output from the line starting with `heading` to the next unindented line.
std::vector<std::string> list_section(const std::string& out, const std::string& heading) {
  std::vector<std::string> names;
  bool in = false;
  for (const auto& l : lines(out)) {
    if (!l.empty() && l[0] != ' ') {
      in = l.rfind(heading, 0) == 0;
      continue;
    }
    if (!in) continue;
    std::stringstream ss(l);
    std::string first;
    ss >> first;
    names.push_back(first);
  }
  return names;
}

TEST_F(CliTest, ListNamesTheNonholonomicSystemsAndBothMethodFamilies) {
  const Cli r = tether("list");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto systems = list_section(r.out, "systems");
  for (const char* s : {"heisenberg", "heisenberg_vakonomic", "martinet", "martinet_lagrangian", "parallel_parking",
                        "spherical_pendulum", "double_pendulum", "chain"})
    EXPECT_NE(std::find(systems.begin(), systems.end(), s), systems.end()) << s << " not under systems:\n" << r.out;

  const auto holonomic = list_section(r.out, "methods for holonomic");
  const auto nonholonomic = list_section(r.out, "methods for nonholonomic");
  ASSERT_FALSE(holonomic.empty()) << r.out;
  ASSERT_FALSE(nonholonomic.empty()) << r.out;
  auto has = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  for (const char* m : {"symplectic_euler_a", "symplectic_euler_b", "shake", "rattle", "constrained_midpoint"}) {
    EXPECT_TRUE(has(holonomic, m)) << m;
    EXPECT_FALSE(has(nonholonomic, m)) << m;
  }
  for (const char* m : {"gauss_legendre", "symplectic_euler", "stormer_verlet"}) {
    EXPECT_TRUE(has(nonholonomic, m)) << m;
    EXPECT_FALSE(has(holonomic, m)) << m;
  }
  // Gauss-Legendre is listed once per stage count.
  EXPECT_EQ(std::count(nonholonomic.begin(), nonholonomic.end(), "gauss_legendre"), 3) << r.out;
  for (const char* st : {"stages 1", "stages 2", "stages 3"}) EXPECT_NE(r.out.find(st), std::string::npos) << st;
}

// `tether list --json` is the registry: every system and method the parser
// knows, each parameter with its type, default and meaning.
TEST_F(CliTest, ListJsonGivesTheRegistryWithParameterSchemas) {
  const Cli r = tether("list --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  std::set<std::string> systems, methods;
  for (const auto& s : j.at("systems")) {
    systems.insert(s.at("name").get<std::string>());
    EXPECT_GT(s.at("dof").get<int>(), 0);
    EXPECT_FALSE(s.at("methods").empty()) << s.at("name");
    for (const auto& p : s.at("parameters"))
      for (const char* key : {"name", "type", "default", "meaning"}) EXPECT_TRUE(p.contains(key)) << s.at("name") << " " << p;
  }
  for (const auto& m : j.at("methods")) methods.insert(m.at("name").get<std::string>());
  EXPECT_EQ(systems, std::set<std::string>(system_names().begin(), system_names().end()));
  EXPECT_EQ(methods, std::set<std::string>(method_names().begin(), method_names().end()));
  // A parameter's declared default is the value a run uses when the key is absent.
  for (const auto& s : j.at("systems"))
    if (s.at("name") == "spherical_pendulum")
      for (const auto& p : s.at("parameters"))
        if (p.at("name") == "gravity") EXPECT_EQ(p.at("default").get<double>(), SphericalPendulum{}.prm.gravity);
}

// Every config shipped in configs/ validates, whatever configs are added later.
TEST_F(CliTest, ValidateEveryConfigInConfigsFolder) {
  const fs::path folder = fs::path(TETHER_SOURCE_DIR) / "configs";
  std::vector<fs::path> configs;
  for (const auto& e : fs::directory_iterator(folder))
    if (e.path().extension() == ".json") configs.push_back(e.path());
  EXPECT_GE(configs.size(), 4u);
  for (const fs::path& cfg : configs) {
    const Cli r = tether("validate " + quote(cfg));
    EXPECT_EQ(r.code, 0) << cfg << ": " << r.err;
    EXPECT_NE(r.out.find("ok"), std::string::npos) << cfg << ": " << r.out;
    // Nothing on stderr but, for a declared system's first use, that it compiles.
    for (const auto& line : lines(r.err)) EXPECT_EQ(line.rfind("tether: compil", 0), 0u) << cfg << ": " << line;
  }
}


// A state where the Martinet frame is singular (1 + beta x = 0): bad input
// (exit 2, naming the state) or a failed trajectory (exit 0), but never NaN,
// infinity or null in the files.
TEST_F(CliTest, NonholonomicSingularStateLeavesNoNanInTheFiles) {
  for (const char* system : {"martinet", "martinet_lagrangian"}) {
    json j = heisenberg_config();
    j["system"] = {{"name", system}, {"parameters", {{"beta", -2.0}}}};
    j["ensemble"] = states_ensemble(json::array({{{"q", {0.5, 0.0, 0.0}}, {"p", {1.0, 1.0, 0.0}}},
                                                 {{"q", {0.1, 0.0, 0.0}}, {"p", {1.0, 1.0, 0.0}}}}));
    const fs::path out = dir_ / (std::string("out_") + system);
    const Cli r = run(write(std::string(system) + ".json", j), out);
    if (r.code == 2) {
      EXPECT_NE(one_error_line(r).find("ensemble.initial.states[0]"), std::string::npos) << system;
      EXPECT_FALSE(fs::exists(out)) << system;
      continue;
    }
    ASSERT_EQ(r.code, 0) << system << ": " << r.err;
    const std::string summary = read_file(out / "summary.json"), series = read_file(out / "timeseries.csv");
    EXPECT_EQ(summary.find("null"), std::string::npos) << system << ":\n" << summary;
    EXPECT_EQ(series.find("nan"), std::string::npos) << system << ":\n" << series;
    EXPECT_EQ(series.find("inf"), std::string::npos) << system << ":\n" << series;
    const json s = json::parse(summary);
    EXPECT_EQ(s.value("failed_trajectories", -1), 1) << system;
    ASSERT_EQ(s["failures"].size(), 1u) << system;
    EXPECT_EQ(s["failures"][0].value("id", -1), 0) << system;
  }
}

// ---------------------------------------------------------------- shoot

TEST_F(CliTest, ShootWritesOneRowPerTargetAndASummary) {
  json j = shoot_config();
  j["output"] = {{"geodesics", {{"every", 5}}}};
  const fs::path out = dir_ / "shots";
  const Cli r = tether("shoot " + quote(write("shoot.json", j)) + " --out " + quote(out) + " --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto rows = lines(read_file(out / "shots.csv"));
  ASSERT_EQ(rows.size(), 4u);
  const auto header = split(rows[0], ',');
  const auto col = [&](const std::string& name) {
    return std::size_t(std::find(header.begin(), header.end(), name) - header.begin());
  };
  for (const char* name : {"target", "converged", "status", "iterations", "residual", "p0_2", "length", "energy",
                           "pT_0", "pT_2", "conjugate_point", "conjugate_time", "second_length", "near_cut_locus"})
    EXPECT_LT(col(name), header.size()) << name;
  for (std::size_t t = 1; t < rows.size(); ++t) {
    const auto cells = split(rows[t], ',');
    EXPECT_EQ(cells[0], std::to_string(t - 1));
    EXPECT_EQ(cells[col("converged")], "1") << rows[t];
    EXPECT_LE(std::stod(cells[col("residual")]), 1e-10) << rows[t];
  }
  const json s = json::parse(read_file(out / "summary.json"));
  EXPECT_EQ(s["targets"], 3);
  EXPECT_EQ(s["converged"], 3);
  EXPECT_EQ(s["shots"], 3);
  EXPECT_GT(s["shots_per_second"].get<double>(), 0);
  // Geodesics sampled at t = 0, 0.5, 1 for each of the three targets.
  EXPECT_EQ(lines(read_file(out / "geodesics.csv")).size(), 1u + 3 * 3);
}

// A target that does not converge keeps its row, with its status and residual,
// and the command warns (exit 0: the other targets are good results).
TEST_F(CliTest, ShootReportsTargetsThatDidNotConverge) {
  json j = shoot_config();
  // On the z-axis the straight guess is p0 = (0, 0, 0.4): no horizontal
  // momentum, the curve stays at the origin and dq(T)/dp0 is singular.
  j["shoot"]["targets"]["list"].push_back({0.0, 0.0, 0.4});
  const fs::path out = dir_ / "shots";
  const Cli r = tether("shoot " + quote(write("shoot.json", j)) + " --out " + quote(out) + " --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: 1 of 4 targets did not converge"), std::string::npos) << r.err;
  const auto rows = lines(read_file(out / "shots.csv"));
  ASSERT_EQ(rows.size(), 5u);
  const auto cells = split(rows[4], ',');
  EXPECT_EQ(cells[0], "3");
  EXPECT_EQ(cells[4], "0") << rows[4];
  EXPECT_EQ(cells[5], "singular_jacobian") << rows[4];
  const json s = json::parse(read_file(out / "summary.json"));
  EXPECT_EQ(s["not_converged"], 1);
  EXPECT_EQ(lines(read_file(out / "shots.csv")).size(), 5u);
}

// ---------------------------------------------------------------- checkpoint and resume

// Killed with SIGKILL, or stopped with SIGTERM (which writes a last
// checkpoint and exits 128 + 15 with a message), part-way, then resumed: the
// outputs are those of the uninterrupted run, byte for byte (summary.json but
// for its timings).
// In batches (the timeseries held in the checkpoint) and as one batch (its
// rows streamed: the checkpoint records how far timeseries.csv had got).
TEST_F(CliTest, AStoppedRunResumesToTheSameBytes) {
  json one_batch = checkpointed_config();
  one_batch["ensemble"].erase("batch_size");
  for (const auto& [name, config] : {std::pair<std::string, json>{"batches", checkpointed_config()}, {"one", one_batch}}) {
    const fs::path cfg = write(name + ".json", config), whole = dir_ / ("whole_" + name);
    ASSERT_EQ(run(cfg, whole).code, 0);
    for (const std::string signal : {"KILL", "TERM"}) {
      const std::string what = name + ", " + signal;
      const fs::path out = dir_ / ("stopped_" + name + "_" + signal);
      const Cli stopped = stop_at_checkpoint(dir_, "run", cfg, out, signal);
      if (fs::exists(out / "summary.json")) GTEST_SKIP() << "the run finished before the signal: a faster machine";
      ASSERT_TRUE(fs::exists(out / "checkpoint.tether")) << what << ": " << stopped.err;
      EXPECT_FALSE(fs::exists(out / "final.csv"));
      EXPECT_FALSE(fs::exists(out / "timeseries.csv"));
      if (signal == "TERM") {
        EXPECT_NE(stopped.err.find("stopped by SIGTERM: checkpoint written; go on with `tether run"), std::string::npos)
            << stopped.err;
        EXPECT_EQ(stopped.out, "exit 143\n") << "exit status 128 + SIGTERM";
      }
      const Cli resumed = run(cfg, out, "--resume");
      ASSERT_EQ(resumed.code, 0) << what << ": " << resumed.err;
      for (const char* file : {"final.csv", "timeseries.csv"})
        EXPECT_EQ(read_file(out / file), read_file(whole / file)) << what << ": " << file;
      EXPECT_EQ(without_timings(json::parse(read_file(out / "summary.json"))),
                without_timings(json::parse(read_file(whole / "summary.json"))))
          << what;
      EXPECT_FALSE(fs::exists(out / "checkpoint.tether")) << "a finished run leaves no checkpoint";
      EXPECT_FALSE(fs::exists(out / "final.csv.partial"));
      EXPECT_FALSE(fs::exists(out / "timeseries.csv.partial"));
    }
  }
}

// A resume with another config (or options) than the one that wrote the
// checkpoint is refused, naming what differs, and the checkpoint survives;
// with none to resume, nothing is created.
TEST_F(CliTest, ResumeRefusesAnotherConfigAndAFolderWithoutCheckpoint) {
  const fs::path cfg = write("config.json", checkpointed_config()), out = dir_ / "out";
  stop_at_checkpoint(dir_, "run", cfg, out, "KILL");
  if (fs::exists(out / "summary.json")) GTEST_SKIP() << "the run finished before the signal: a faster machine";
  ASSERT_TRUE(fs::exists(out / "checkpoint.tether"));
  json other = checkpointed_config();
  other["method"]["dt"] = 0.001;
  const Cli r = run(write("other.json", other), out, "--resume");
  EXPECT_EQ(r.code, 2) << r.err;
  std::string line = one_error_line(r);
  EXPECT_NE(line.find("method.dt: is 0.001 here but 0.002 in what wrote the checkpoint"), std::string::npos) << line;
  const Cli b = run(cfg, out, "--resume --batch-size 64");
  EXPECT_EQ(b.code, 2) << b.err;
  line = one_error_line(b);
  EXPECT_NE(line.find("--batch-size: is 64 here but 128 in what wrote the checkpoint"), std::string::npos) << line;
  const Cli k = run(cfg, out, "--resume --backend reference");
  EXPECT_EQ(k.code, 2) << k.err;
  line = one_error_line(k);
  EXPECT_NE(line.find("--backend: is \"reference\" here but \"cpu\" in what wrote the checkpoint"), std::string::npos)
      << line;
  EXPECT_TRUE(fs::exists(out / "checkpoint.tether"));
  EXPECT_TRUE(fs::exists(out / "final.csv.partial"));
  // Another command refused in that folder leaves the checkpoint and what it goes on from.
  EXPECT_EQ(tether("merge " + quote(dir_ / "nowhere") + " --out " + quote(out) + " --quiet").code, 2);
  EXPECT_TRUE(fs::exists(out / "checkpoint.tether"));
  EXPECT_TRUE(fs::exists(out / "final.csv.partial"));

  const Cli none = run(cfg, dir_ / "fresh", "--resume");
  EXPECT_EQ(none.code, 1) << none.err;
  line = one_error_line(none);
  EXPECT_NE(line.find("holds no checkpoint"), std::string::npos) << line;
  EXPECT_FALSE(fs::exists(dir_ / "fresh"));
}

// A run that starts from a sample's draws is resumed only from the same
// draws: a draws.nc replaced since (another seed) is refused by name.
TEST_F(CliTest, ResumeRefusesChangedStartDraws) {
  const auto sample = [&](int seed, const std::string& name) {
    json j = sample_config();
    j["sample"]["seed"] = seed;
    return tether("sample " + quote(write(name + ".json", j)) + " --out " + quote(dir_ / name) + " --quiet");
  };
  ASSERT_EQ(sample(3, "draws_a").code, 0);
  ASSERT_EQ(sample(4, "draws_b").code, 0);
  fs::create_directories(dir_ / "start");
  fs::copy_file(dir_ / "draws_a" / "draws.nc", dir_ / "start" / "draws.nc");
  json j = base_config();
  j["method"]["steps"] = 3000000;
  j["ensemble"] = {{"size", 100}, {"seed", 1}, {"initial", {{"draws", (dir_ / "start" / "draws.nc").string()}}}};
  j["output"] = {{"every", 100000}, {"checkpoint", {{"every", 1000}}}};
  const fs::path cfg = write("from_draws.json", j), out = dir_ / "out";
  stop_at_checkpoint(dir_, "run", cfg, out, "TERM");
  if (fs::exists(out / "summary.json")) GTEST_SKIP() << "the run finished before the signal: a faster machine";
  ASSERT_TRUE(fs::exists(out / "checkpoint.tether"));
  fs::copy_file(dir_ / "draws_b" / "draws.nc", dir_ / "start" / "draws.nc", fs::copy_options::overwrite_existing);
  const Cli r = run(cfg, out, "--resume");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(one_error_line(r).find("ensemble.initial.draws: names a file whose draws differ from those the checkpoint"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::exists(out / "checkpoint.tether")) << "the refusal keeps the checkpoint";
}

// ---------------------------------------------------------------- netCDF output and snapshots

// Every value of a netCDF variable, as doubles (the library converts).
std::vector<double> nc_values(int file, const std::string& name) {
  int var = -1, dims = 0, ids[NC_MAX_VAR_DIMS];
  EXPECT_EQ(nc_inq_varid(file, name.c_str(), &var), NC_NOERR) << name;
  if (var < 0) return {};
  nc_inq_varndims(file, var, &dims);
  nc_inq_vardimid(file, var, ids);
  std::size_t n = 1;
  for (int d = 0; d < dims; ++d) {
    std::size_t len = 0;
    nc_inq_dimlen(file, ids[d], &len);
    n *= len;
  }
  std::vector<double> v(n);
  EXPECT_EQ(nc_get_var_double(file, var, v.data()), NC_NOERR) << name;
  return v;
}

std::string nc_text(int file, const std::string& var_name, const std::string& key) {
  int var = NC_GLOBAL;
  if (!var_name.empty()) nc_inq_varid(file, var_name.c_str(), &var);
  std::size_t n = 0;
  if (nc_inq_attlen(file, var, key.c_str(), &n) != NC_NOERR) return "";
  std::string s(n, '\0');
  nc_get_att_text(file, var, key.c_str(), s.data());
  return s;
}

// The numbers of a CSV file's column `name`, every row.
std::vector<double> csv_column(const std::string& text, const std::string& name) {
  const auto rows = lines(text);
  const auto head = split(rows.at(0), ',');
  const auto at = std::find(head.begin(), head.end(), name) - head.begin();
  std::vector<double> v;
  for (std::size_t i = 1; i < rows.size(); ++i) v.push_back(std::stod(split(rows[i], ',').at(std::size_t(at))));
  return v;
}

// Pendulums in three batches, two of them followed every 7 steps: the same
// run written as CSV and as netCDF holds the same numbers, bit for bit.
json tracked_config() {
  json j = base_config();
  j["ensemble"]["size"] = 130;
  j["ensemble"]["batch_size"] = 64;
  j["output"]["trajectories"] = {{"ids", {100, 1}}, {"every", 7}};
  return j;
}

TEST_F(CliTest, SnapshotsFollowTrajectoriesAndMatchShorterRuns) {
  const fs::path out = dir_ / "csv";
  ASSERT_EQ(run(write("tracked.json", tracked_config()), out).code, 0);
  const auto rows = lines(read_file(out / "trajectories.csv"));
  ASSERT_EQ(rows.size(), 1u + 2 * 6) << "steps 0, 7, 14, 21, 28 and the last, 30, for ids 1 and 100";
  EXPECT_EQ(rows[0],
            "id,step,time,q0,q1,q2,p0,p1,p2,status,energy_error,constraint_violation,velocity_constraint_violation");
  const std::vector<std::string> expected_steps{"0", "7", "14", "21", "28", "30"};
  for (std::size_t i = 0; i < 12; ++i) {
    const auto cells = split(rows[1 + i], ',');
    EXPECT_EQ(cells[0], i < 6 ? "1" : "100") << rows[1 + i];
    EXPECT_EQ(cells[1], expected_steps[i % 6]) << rows[1 + i];
    EXPECT_EQ(cells[9], "ok");
  }
  // Each snapshot's residuals, against the pendulum's own H = |p|^2 / 2m + m g z
  // and g(q) = (|q|^2 - L^2) / 2L (m = L = 1, g = 9.81) computed here from its
  // q and p: the error is relative to K0 + |V0| + m g L at step 0.
  const auto column = [&](const std::string& name) { return csv_column(read_file(out / "trajectories.csv"), name); };
  const auto q0 = column("q0"), q1 = column("q1"), q2 = column("q2"), p0 = column("p0"), p1 = column("p1"),
             p2 = column("p2"), energy_error = column("energy_error"), constraint = column("constraint_violation"),
             velocity = column("velocity_constraint_violation");
  for (std::size_t i = 0; i < 12; ++i) {
    const auto kinetic = [&](std::size_t k) { return 0.5 * (p0[k] * p0[k] + p1[k] * p1[k] + p2[k] * p2[k]); };
    const std::size_t start = i - i % 6;
    const double h = kinetic(i) + 9.81 * q2[i], h0 = kinetic(start) + 9.81 * q2[start];
    const double scale = kinetic(start) + std::abs(9.81 * q2[start]) + 9.81;
    EXPECT_NEAR(energy_error[i], std::abs(h - h0) / scale, 1e-14) << "snapshot row " << i;
    EXPECT_NEAR(constraint[i], std::abs((q0[i] * q0[i] + q1[i] * q1[i] + q2[i] * q2[i] - 1) / 2), 1e-15);
    EXPECT_NEAR(velocity[i], std::abs(q0[i] * p0[i] + q1[i] * p1[i] + q2[i] * p2[i]), 1e-15);
    if (i % 6 == 0) EXPECT_EQ(energy_error[i], 0.0) << "step 0 is where H0 is taken";
    else EXPECT_GT(energy_error[i], 0.0) << "RATTLE does not keep H exactly: a zero here is a residual not taken";
  }
  // The snapshot at step k is the final state of the same run stopped at k.
  const auto finals = lines(read_file(out / "final.csv"));
  for (const int steps : {0, 14}) {
    json j = tracked_config();
    j["method"]["steps"] = steps;
    j["output"].erase("trajectories");
    const fs::path short_out = dir_ / ("steps" + std::to_string(steps));
    ASSERT_EQ(run(write("short.json", j), short_out).code, 0);
    const auto short_finals = lines(read_file(short_out / "final.csv"));
    for (const auto& [id, row] : {std::pair{1, steps == 0 ? 1 : 3}, std::pair{100, steps == 0 ? 7 : 9}}) {
      auto snap = split(rows[std::size_t(row)], ',');
      auto fin = split(short_finals[std::size_t(id) + 1], ',');
      ASSERT_EQ(snap[1], std::to_string(steps));
      snap.erase(snap.begin() + 1, snap.begin() + 3);  // step, time
      snap.resize(fin.size());                          // the residuals
      EXPECT_EQ(snap, fin) << "id " << id << " at step " << steps;
    }
  }
  // The last snapshot is the final state.
  auto last = split(rows[12], ',');
  last.erase(last.begin() + 1, last.begin() + 3);
  last.resize(split(finals[101], ',').size());
  EXPECT_EQ(last, split(finals[101], ','));
}

TEST_F(CliTest, NetcdfHoldsWhatTheCsvFilesHold) {
  const fs::path csv = dir_ / "csv", nc = dir_ / "nc";
  ASSERT_EQ(run(write("csv.json", tracked_config()), csv).code, 0);
  json j = tracked_config();
  j["output"]["format"] = "netcdf";
  const Cli r = run(write("nc.json", j), nc);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* name : {"final.csv", "timeseries.csv", "trajectories.csv"}) EXPECT_FALSE(fs::exists(nc / name)) << name;
  EXPECT_TRUE(fs::exists(nc / "summary.json"));
  for (const auto& e : fs::directory_iterator(nc))
    EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos) << e.path();

  int file = -1;
  ASSERT_EQ(nc_open((nc / "results.nc").c_str(), NC_NOWRITE, &file), NC_NOERR);
  // Final states: q, p in the CSV's shortest round-trip decimals, so equal as doubles.
  const std::string finals = read_file(csv / "final.csv");
  const auto q = nc_values(file, "q"), p = nc_values(file, "p");
  ASSERT_EQ(q.size(), 130u * 3);
  for (int k = 0; k < 3; ++k) {
    const auto qk = csv_column(finals, "q" + std::to_string(k)), pk = csv_column(finals, "p" + std::to_string(k));
    for (std::size_t i = 0; i < 130; ++i) {
      EXPECT_EQ(q[i * 3 + std::size_t(k)], qk[i]) << "q" << k << " of " << i;
      EXPECT_EQ(p[i * 3 + std::size_t(k)], pk[i]) << "p" << k << " of " << i;
    }
  }
  EXPECT_EQ(nc_values(file, "status"), std::vector<double>(130, 0.0));
  EXPECT_EQ(nc_values(file, "failed_step"), std::vector<double>(130, -1.0));
  EXPECT_EQ(nc_text(file, "status", "flag_meanings"), "ok newton_not_converged singular_matrix non_finite");
  for (double e : nc_values(file, "energy_error")) EXPECT_LT(e, 1e-3);
  // The timeseries, with time as a coordinate.
  const std::string series = read_file(csv / "timeseries.csv");
  EXPECT_EQ(nc_values(file, "step"), csv_column(series, "step"));
  EXPECT_EQ(nc_values(file, "time"), csv_column(series, "time"));
  for (const char* name : {"mean_relative_energy_error", "max_relative_energy_error", "max_constraint_violation",
                           "max_velocity_constraint_violation"})
    EXPECT_EQ(nc_values(file, name), csv_column(series, name)) << name;
  EXPECT_EQ(nc_text(file, "max_relative_energy_error", "coordinates"), "time");
  // The snapshots: (tracked, snapshot, coordinate), ids ascending.
  EXPECT_EQ(nc_values(file, "tracked"), (std::vector<double>{1, 100}));
  EXPECT_EQ(nc_values(file, "snapshot_step"), (std::vector<double>{0, 7, 14, 21, 28, 30}));
  const std::string snaps = read_file(csv / "trajectories.csv");
  const auto tq = nc_values(file, "tracked_q");
  ASSERT_EQ(tq.size(), 2u * 6 * 3);
  for (int k = 0; k < 3; ++k) {
    const auto column = csv_column(snaps, "q" + std::to_string(k));
    for (std::size_t i = 0; i < 12; ++i) EXPECT_EQ(tq[i * 3 + std::size_t(k)], column[i]) << "snapshot row " << i;
  }
  for (const char* name : {"energy_error", "constraint_violation", "velocity_constraint_violation"}) {
    const std::string tracked = std::string("tracked_") + name;
    EXPECT_EQ(nc_values(file, tracked.c_str()), csv_column(snaps, name)) << tracked;
    EXPECT_EQ(nc_text(file, tracked.c_str(), "coordinates"), "snapshot_step snapshot_time") << tracked;
    // The last snapshot is the final state, observed by the backend's own reduction.
    EXPECT_NEAR(nc_values(file, tracked.c_str())[5], nc_values(file, name)[1], 1e-14) << name << " of id 1";
  }
  // What summary.json says, as attributes.
  EXPECT_EQ(nc_text(file, "", "system"), "spherical_pendulum");
  EXPECT_EQ(nc_text(file, "", "Conventions"), "CF-1.8");
  EXPECT_EQ(json::parse(nc_text(file, "", "summary")).value("trajectories", -1), 130);
  nc_close(file);
}

// A checkpointed netCDF run with snapshots, killed and resumed, holds the
// numbers of the run never stopped.
TEST_F(CliTest, AStoppedNetcdfRunResumesToTheSameNumbers) {
  json j = checkpointed_config();
  j["ensemble"].erase("batch_size");  // one batch: its timeseries streams into timeseries.bin
  j["output"]["format"] = "netcdf";
  j["output"]["trajectories"] = {{"ids", {0, 150, 299}}, {"every", 1000}};
  const fs::path cfg = write("config.json", j), whole = dir_ / "whole", out = dir_ / "stopped";
  ASSERT_EQ(run(cfg, whole).code, 0);
  stop_at_checkpoint(dir_, "run", cfg, out, "KILL");
  if (fs::exists(out / "summary.json")) GTEST_SKIP() << "the run finished before the signal: a faster machine";
  ASSERT_TRUE(fs::exists(out / "checkpoint.tether"));
  const Cli resumed = run(cfg, out, "--resume");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  int a = -1, b = -1;
  ASSERT_EQ(nc_open((whole / "results.nc").c_str(), NC_NOWRITE, &a), NC_NOERR);
  ASSERT_EQ(nc_open((out / "results.nc").c_str(), NC_NOWRITE, &b), NC_NOERR);
  for (const char* name : {"q", "p", "status", "failed_step", "energy_error", "constraint_violation", "step",
                           "max_relative_energy_error", "mean_relative_energy_error", "tracked_q", "tracked_p"})
    EXPECT_EQ(nc_values(a, name), nc_values(b, name)) << name;
  nc_close(a);
  nc_close(b);
}

// ---------------------------------------------------------------- shards and merge

// 3 x 4096 + 100 pendulums in batches of 1536 (which straddle the 4096-trajectory
// slices shards are cut at), three of them followed.
// --shard k/K integrates one slice; `tether merge` joins the K folders into
// the files one run writes, byte for byte (summary.json but for its timings),
// for K = 2 and 4, CSV and netCDF.
TEST_F(CliTest, ShardsMergeIntoTheSingleRunsBytes) {
  const auto cli = [this](const std::string& args) { return tether(args); };
  for (const std::string format : {"csv", "netcdf"}) {
    json j = sharded_config();
    j["output"]["format"] = format;
    const fs::path cfg = write(format + ".json", j), whole = dir_ / ("whole_" + format);
    ASSERT_EQ(run(cfg, whole).code, 0);
    for (const int count : {2, 4}) {
      const std::string name = "merged_" + format + std::to_string(count);
      const Cli m = run_shards_and_merge(dir_, cfg, count, name, cli);
      ASSERT_EQ(m.code, 0) << m.err;
      const fs::path merged = dir_ / name;
      EXPECT_EQ(without_timings(json::parse(read_file(merged / "summary.json"))),
                without_timings(json::parse(read_file(whole / "summary.json"))))
          << name;
      if (format == "csv") {
        for (const char* file : {"final.csv", "timeseries.csv", "trajectories.csv"})
          EXPECT_EQ(read_file(merged / file), read_file(whole / file)) << name << ": " << file;
        continue;
      }
      int a = -1, b = -1;
      ASSERT_EQ(nc_open((whole / "results.nc").c_str(), NC_NOWRITE, &a), NC_NOERR);
      ASSERT_EQ(nc_open((merged / "results.nc").c_str(), NC_NOWRITE, &b), NC_NOERR);
      for (const char* var : {"q", "p", "status", "energy_error", "mean_relative_energy_error",
                              "max_relative_energy_error", "live_trajectories", "tracked_q", "tracked_p"})
        EXPECT_EQ(nc_values(a, var), nc_values(b, var)) << name << ": " << var;
      nc_close(a);
      nc_close(b);
    }
  }
}

// Shards that do not make one run are refused by name, and --shard by its value.
TEST_F(CliTest, MergeRefusesShardsThatDoNotMakeOneRun) {
  const fs::path cfg = write("config.json", sharded_config());
  for (int k = 0; k < 3; ++k)
    ASSERT_EQ(run(cfg, dir_ / ("s" + std::to_string(k)), "--shard " + std::to_string(k) + "/3").code, 0);
  json other = sharded_config();
  other["method"]["dt"] = 0.02;
  ASSERT_EQ(run(write("other.json", other), dir_ / "other", "--shard 2/3").code, 0);
  const auto merge = [&](const std::vector<std::string>& dirs) {
    std::string args = "merge";
    for (const auto& d : dirs) args.append(" ").append(quote(dir_ / d));
    return tether(args + " --out " + quote(dir_ / "merged") + " --quiet");
  };
  struct Case {
    std::vector<std::string> dirs;
    std::string expect;
  };
  for (const Case& c : {Case{{"s0", "s1"}, "one of 3 shards; 2 were given"},
                        Case{{"s0", "s1", "s1"}, "shard 2 of 3 is missing or given twice"},
                        Case{{"s0", "s1", "other"}, "is a shard of another run"},
                        Case{{"s0", "s1", "nowhere"}, "holds no shard.tether"}}) {
    const Cli r = merge(c.dirs);
    EXPECT_EQ(r.code, 2) << r.err;
    const std::string line = one_error_line(r);
    EXPECT_NE(line.find(c.expect), std::string::npos) << line;
    EXPECT_FALSE(fs::exists(dir_ / "merged" / "summary.json"));
  }
  for (const auto& [shard, expect] : {std::pair<std::string, std::string>{"3/3", "0 <= k < K"},
                                      {"1/x", "0 <= k < K"},
                                      {"0/5", "at most 4 shards"}}) {
    const Cli r = run(cfg, dir_ / "bad", "--shard " + shard);
    EXPECT_EQ(r.code, 2) << shard;
    const std::string line = one_error_line(r);
    EXPECT_NE(line.find("--shard"), std::string::npos) << line;
    EXPECT_NE(line.find(expect), std::string::npos) << line;
  }
}

// A write that fails says why, in the operating system's words (/dev/full:
// every write fails with ENOSPC, as on a full disk).
TEST(OutputErrors, SayTheOperatingSystemsReason) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  ShootResult r;
  r.targets.resize(10000);  // more than a stream buffer, so a write reaches the device before close
  try {
    write_shots("/dev/full", r);
    ADD_FAILURE() << "writing to /dev/full succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/full: No space left on device"), std::string::npos) << e.what();
  }
}

// A shoot in which nothing converged has no converged residual to report: null, not 0.
TEST_F(CliTest, ShootWithNothingConvergedReportsNoResidual) {
  json j = shoot_config();
  j["shoot"]["targets"]["list"] = {{0.0, 0.0, 0.4}};  // the cut locus: the straight guess is singular
  const fs::path out = dir_ / "shots";
  const Cli r = tether("shoot " + quote(write("shoot.json", j)) + " --out " + quote(out) + " --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  const json s = json::parse(read_file(out / "summary.json"));
  EXPECT_EQ(s["converged"], 0);
  EXPECT_TRUE(s["converged_residual"]["max"].is_null()) << s["converged_residual"];
  EXPECT_TRUE(s["converged_residual"]["median"].is_null()) << s["converged_residual"];
  EXPECT_TRUE(s["newton"]["mean_iterations_converged"].is_null()) << s["newton"];
}

// summary.json says which Newton ran: its settings as given, and every shot status, stalled included.
TEST_F(CliTest, ShootSummaryRecordsItsNewtonSettings) {
  json j = shoot_config();
  j["shoot"]["newton"]["max_backtracks"] = 7;
  j["shoot"]["newton"]["stall_iterations"] = 3;
  const fs::path out = dir_ / "shots";
  const Cli r = tether("shoot " + quote(write("shoot.json", j)) + " --out " + quote(out) + " --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  const json s = json::parse(read_file(out / "summary.json"));
  EXPECT_EQ(s["newton"]["max_backtracks"], 7) << s["newton"];
  EXPECT_EQ(s["newton"]["stall_iterations"], 3) << s["newton"];
  for (int k = 0; k < shot_status_count; ++k)
    EXPECT_TRUE(s["by_status"].contains(shot_status_name(ShotStatus(k)))) << s["by_status"];
}

TEST_F(CliTest, ShootBadInputNamesThePathAndWritesNothing) {
  struct Case {
    std::function<void(json&)> edit;
    std::string path;
  };
  const std::vector<Case> cases{
      {[](json& j) { j["shoot"]["q0"] = {0, 0}; }, "shoot.q0"},
      {[](json& j) { j["shoot"]["targets"]["list"][1] = {1, 2}; }, "shoot.targets.list[1]"},
      {[](json& j) { j["system"]["name"] = "spherical_pendulum"; }, "system.name"},
      {[](json& j) { j["shoot"]["guesses"] = json::object(); }, "shoot.guesses"},
      {[](json& j) { j["method"]["dt"] = 0.3; j["method"].erase("steps"); }, "method.dt"},
      {[](json& j) { j["shoot"]["newton"] = {{"tolerence", 1e-9}}; }, "shoot.newton.tolerence"},
      {[](json& j) { j["shoot"]["cut_locus"] = {{"margin", -0.1}}; }, "shoot.cut_locus.margin"},
      {[](json& j) { j["output"] = {{"geodesics", {{"every", 1}, {"targets", 4}}}}; },
       "output.geodesics.targets: is 4, more than the 3 targets"},
  };
  for (const Case& c : cases) {
    json j = shoot_config();
    c.edit(j);
    const fs::path out = dir_ / "never";
    const Cli r = tether("shoot " + quote(write("bad.json", j)) + " --out " + quote(out) + " --quiet");
    EXPECT_EQ(r.code, 2) << c.path;
    EXPECT_NE(one_error_line(r).find(c.path), std::string::npos) << c.path << ": " << r.err;
    EXPECT_FALSE(fs::exists(out)) << c.path;
    const Cli v = tether("validate " + quote(dir_ / "bad.json"));
    EXPECT_EQ(v.code, 2) << c.path;
    EXPECT_NE(one_error_line(v).find(c.path), std::string::npos) << c.path << ": " << v.err;
  }
}

// validate says how the steps are set and whether shots have nodes.
TEST_F(CliTest, ValidateDescribesAccuracyAndNodes) {
  json j = shoot_config();
  j["method"].erase("steps");
  j["shoot"]["accuracy"] = 1e-9;
  j["shoot"]["nodes"] = 4;
  const Cli v = tether("validate " + quote(write("shoot.json", j)));
  EXPECT_EQ(v.code, 0) << v.err;
  EXPECT_NE(v.out.find("steps chosen for accuracy 1e-09 from 16"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("4 shooting nodes"), std::string::npos) << v.out;
}

// Each kind of config goes to its own command.
// Each command given another command's config says which command takes it,
// naming the key that marks that kind, and touches no folder.
TEST_F(CliTest, ACommandGivenAnotherCommandsConfigSaysWhichTakesIt) {
  const fs::path run_cfg = write("run.json", base_config()), shoot_cfg = write("shoot.json", shoot_config()),
                 sample_cfg = write("sample.json", sample_config());
  for (const auto& [command, cfg, expect] :
       {std::tuple<std::string, fs::path, std::string>{"run", shoot_cfg, "shoot: this is a shooting config: run it with `tether shoot"},
        {"run", sample_cfg, "sample: this is a sampling config: run it with `tether sample"},
        {"shoot", run_cfg, "ensemble: this is a run config: run it with `tether run"},
        {"shoot", sample_cfg, "sample: this is a sampling config: run it with `tether sample"},
        {"sample", run_cfg, "ensemble: this is a run config: run it with `tether run"},
        {"sample", shoot_cfg, "shoot: this is a shooting config: run it with `tether shoot"}}) {
    const Cli r = tether(command + " " + quote(cfg) + " --out " + quote(dir_ / "never") + " --quiet");
    EXPECT_EQ(r.code, 2) << command << " " << cfg;
    EXPECT_NE(one_error_line(r).find(expect), std::string::npos) << command << ": " << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "never"));
  }
  const Cli v = tether("validate " + quote(shoot_cfg));
  EXPECT_EQ(v.code, 0) << v.err;
  EXPECT_NE(v.out.find("shoot: heisenberg"), std::string::npos) << v.out;
}

// ---------------------------------------------------------------- sample

// What `tether sample` printed on stderr: summary.json's warnings, one line each.
std::string printed_warnings(const json& summary) {
  std::string lines;
  for (const auto& w : summary["warnings"]) lines += "warning: " + w.get<std::string>() + " (summary.json)\n";
  return lines;
}

TEST_F(CliTest, SampleWritesDrawsAndASummary) {
  const fs::path out = dir_ / "samples";
  const Cli r = tether("sample " + quote(write("sample.json", sample_config())) + " --out " + quote(out) + " --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, printed_warnings(json::parse(read_file(out / "summary.json"))));
  // draws.nc is netCDF-4 (an HDF5 file: its signature first).
  EXPECT_EQ(read_file(out / "draws.nc").substr(0, 8), std::string("\x89HDF\r\n\x1a\n", 8));
  EXPECT_FALSE(fs::exists(out / "draws.nc.partial"));
  const json s = json::parse(read_file(out / "summary.json"));
  EXPECT_EQ(s["command"], "sample");
  EXPECT_EQ(s["chains"], 6);
  EXPECT_EQ(s["draws"], 25);
  std::int64_t proposals = 0;
  for (const auto& [reason, count] : s["rejected"].items()) proposals += count.get<std::int64_t>();
  const double rate = s["acceptance"]["rate"].get<double>();
  EXPECT_NEAR(double(proposals), (1 - rate) * 6 * 25, 1e-6);
  EXPECT_EQ(s["chain_iterations"].get<double>(), 6.0 * (10 + 25 * 2));
  const json& d = s["diagnostics"];
  EXPECT_EQ(d["chains_used"], 6);
  ASSERT_EQ(d["q"].size(), 3u);
  for (const char* key : {"mean", "sd", "rhat", "ess_bulk", "ess_tail"}) EXPECT_TRUE(d["q"][2][key].is_number()) << key;
  EXPECT_GE(d["max_rhat"].get<double>(), d["q"][2]["rhat"].get<double>());
  const Cli v = tether("validate " + quote(dir_ / "sample.json"));
  EXPECT_EQ(v.code, 0) << v.err;
  EXPECT_NE(v.out.find("sample: spherical_pendulum, rattle, 6 chains x 25 draws"), std::string::npos) << v.out;
}

// What Stan would warn of, and only then: a sample that mixes has no
// warning; chains stuck where they started (two starts, steps too short to
// leave them) draw R-hat's; a dynamic trajectory cut at max_depth, and one
// whose energy error passes max_energy_error, theirs; chains whose momentum
// is barely refreshed, E-BFMI's. Each is printed on stderr as summary.json
// lists it.
TEST_F(CliTest, SampleWarnsAsStanWouldAndOnlyThen) {
  const auto sample = [&](const json& config, const std::string& name) {
    const Cli r = tether("sample " + quote(write(name + ".json", config)) + " --out " + quote(dir_ / name) + " --quiet");
    EXPECT_EQ(r.code, 0) << r.err;
    const json s = json::parse(read_file(dir_ / name / "summary.json"));
    EXPECT_EQ(r.err, printed_warnings(s)) << name;
    return s["warnings"];
  };
  json mixes = json::parse(R"({"system": {"name": "spherical_pendulum"}, "method": {"name": "rattle", "dt": 0.05, "steps": 20},
    "sample": {"chains": 8, "draws": 400, "warmup": 200, "seed": 3, "temperature": 2, "jitter": {"dt": 0.1, "steps": 0.2}},
    "backend": "cpu"})");
  EXPECT_EQ(sample(mixes, "mixes"), json::array());

  json stuck = mixes;
  stuck["method"] = {{"name", "rattle"}, {"dt", 0.001}, {"steps", 1}};
  stuck["sample"]["warmup"] = 0;
  stuck["sample"]["draws"] = 50;
  json states = json::array();
  for (int k = 0; k < 8; ++k) states.push_back({{"q", {k < 4 ? 0.6 : -0.6, 0, -0.8}}, {"p", {0, 0, 0}}});
  stuck["sample"]["initial"] = {{"states", states}};
  const json r = sample(stuck, "stuck");
  ASSERT_EQ(r.size(), 1u) << r;
  EXPECT_NE(r[0].get<std::string>().find("is above 1.01: the chains disagree"), std::string::npos) << r;

  json shallow = mixes;
  shallow["method"].erase("steps");
  shallow["sample"]["algorithm"] = "dynamic";
  shallow["sample"]["jitter"].erase("steps");
  shallow["sample"]["max_depth"] = 2;
  const json d = sample(shallow, "shallow");
  ASSERT_EQ(d.size(), 1u) << d;
  EXPECT_NE(d[0].get<std::string>().find("cut at sample.max_depth 2 before they turned back"), std::string::npos) << d;

  json diverging = shallow;
  diverging["sample"].erase("max_depth");
  diverging["sample"]["max_energy_error"] = 0.01;
  const json v = sample(diverging, "diverging");
  ASSERT_GE(v.size(), 1u) << v;
  EXPECT_NE(v[0].get<std::string>().find("came from trajectories that diverged"), std::string::npos) << v;

  // A momentum barely refreshed (5 degrees) leaves each chain's energy where
  // it was: E-BFMI far below 0.3, where the sample that mixes has it above.
  json sluggish = mixes;
  sluggish["sample"]["refresh_angle"] = 0.09;
  sample(sluggish, "sluggish");
  const json low = json::parse(read_file(dir_ / "sluggish" / "summary.json"));
  EXPECT_EQ(low["diagnostics"]["low_energy_bfmi_chains"], 8) << low["diagnostics"];
  bool warned = false;
  for (const auto& w : low["warnings"]) warned |= w.get<std::string>().find("8 of 8 chains diagnosed have an E-BFMI below 0.3") == 0;
  EXPECT_TRUE(warned) << low["warnings"];
  const json fine = json::parse(read_file(dir_ / "mixes" / "summary.json"))["diagnostics"];
  EXPECT_GT(fine["min_energy_bfmi"].get<double>(), 0.3) << fine;
  EXPECT_EQ(fine["low_energy_bfmi_chains"], 0);
}

TEST_F(CliTest, SampleBadInputNamesThePathAndWritesNothing) {
  struct Case {
    std::function<void(json&)> edit;
    std::string path;
  };
  const std::vector<Case> cases{
      {[](json& j) { j["system"]["name"] = "heisenberg"; }, "system.name"},
      {[](json& j) { j["method"]["name"] = "symplectic_euler_b"; }, "method.name"},
      {[](json& j) { j["sample"]["draws"] = 0; }, "sample.draws"},
      {[](json& j) { j["sample"]["refresh_angle"] = 0; }, "sample.refresh_angle"},
      {[](json& j) { j["sample"]["initial"] = {{"states", {{{"q", {0, 0, 2}}, {"p", {0, 0, 0}}}}}}; },
       "sample.initial.states"},
      // An explicit start off the sphere: found by the engine, still before anything is written.
      {[](json& j) {
         j["sample"]["chains"] = 1;
         j["sample"]["initial"] = {{"states", {{{"q", {0, 0, 2}}, {"p", {0, 0, 0}}}}}};
       },
       "sample.initial.states[0].q"},
  };
  for (const Case& c : cases) {
    json j = sample_config();
    c.edit(j);
    const fs::path out = dir_ / "never";
    const Cli r = tether("sample " + quote(write("bad.json", j)) + " --out " + quote(out) + " --quiet");
    EXPECT_EQ(r.code, 2) << c.path;
    EXPECT_NE(one_error_line(r).find(c.path), std::string::npos) << c.path << ": " << r.err;
    EXPECT_FALSE(fs::exists(out)) << c.path;
  }
  // Each kind of config goes to its own command.
  const Cli r = run(write("sample.json", sample_config()), dir_ / "never");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(one_error_line(r).find("tether sample"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "never"));
}

// ---------------------------------------------------------------- sample: shards, merge, checkpoints

// Every draws.nc variable's values, group by group (posterior, sample_stats;
// tree_depth where the sample is dynamic, inverse_metric where the file has it).
std::map<std::string, std::vector<double>> draws_values(const fs::path& file, bool dynamic = false) {
  std::map<std::string, std::vector<double>> v;
  int id = -1;
  EXPECT_EQ(nc_open(file.c_str(), NC_NOWRITE, &id), NC_NOERR) << file;
  if (id < 0) return v;
  std::pair<const char*, std::vector<const char*>> groups[] = {
      {"posterior", {"q", "potential", "chain", "draw"}},
      {"sample_stats", {"acceptance_rate", "energy", "step_size", "n_steps", "diverging", "outcome"}}};
  if (dynamic) groups[1].second.push_back("tree_depth");
  for (const auto& [group, names] : groups) {
    int g = -1;
    EXPECT_EQ(nc_inq_grp_ncid(id, group, &g), NC_NOERR) << group;
    for (const char* name : names) v[std::string(group) + "/" + name] = nc_values(g, name);
  }
  int stats = -1, var = -1;
  if (nc_inq_grp_ncid(id, "sample_stats", &stats) == NC_NOERR && nc_inq_varid(stats, "inverse_metric", &var) == NC_NOERR)
    v["sample_stats/inverse_metric"] = nc_values(stats, "inverse_metric");
  nc_close(id);
  return v;
}

// --shard k/K samples a slice of the chains; `tether merge` joins the K
// folders (given last first) into the draws.nc and summary.json one sample
// writes: the same numbers, and summary.json but for its timings; for the
// static and the dynamic algorithm.
TEST_F(CliTest, SampleShardsMergeIntoTheSingleSamplesNumbers) {
 for (const bool dynamic : {false, true}) {
  const std::string tag = dynamic ? "dynamic_" : "static_";
  json config = sharded_sample_config();
  if (dynamic) {  // with a metric adapted per chain in warm-up windows
    config = dynamic_sample(config);
    config["sample"]["metric"] = "diag";
    config["sample"]["warmup"] = 30;
  }
  const fs::path cfg = write(tag + "sample.json", config);
  const fs::path whole = dir_ / (tag + "whole");
  const auto sample = [&](const fs::path& out, const std::string& extra) {
    return tether("sample " + quote(cfg) + " --out " + quote(out) + " --quiet " + extra);
  };
  ASSERT_EQ(sample(whole, "").code, 0);
  EXPECT_FALSE(fs::exists(whole / "draws.bin")) << "the side file goes once draws.nc is made";
  const auto expected = draws_values(whole / "draws.nc", dynamic);
  ASSERT_EQ(expected.at("posterior/q").size(), 7u * 25 * 3);
  if (dynamic) {  // Sigma's diagonal, every chain's
    ASSERT_EQ(expected.count("sample_stats/inverse_metric"), 1u);
    const std::vector<double>& sigma = expected.at("sample_stats/inverse_metric");
    EXPECT_EQ(sigma.size(), 7u * 3);
    for (double x : sigma) EXPECT_GT(x, 0);
  }
  for (const int count : {2, 3, 7}) {
    std::string dirs;
    for (int k = count - 1; k >= 0; --k) {
      const fs::path d = dir_ / (tag + "shard" + std::to_string(count) + "_" + std::to_string(k));
      const Cli r = sample(d, "--shard " + std::to_string(k) + "/" + std::to_string(count));
      ASSERT_EQ(r.code, 0) << r.err;
      EXPECT_TRUE(fs::exists(d / "shard.tether") && fs::exists(d / "draws.bin")) << d;
      EXPECT_FALSE(fs::exists(d / "summary.json") || fs::exists(d / "draws.nc")) << "a shard is not a finished sample";
      dirs.append(" ").append(quote(d));
    }
    const fs::path merged = dir_ / (tag + "merged" + std::to_string(count));
    const Cli m = tether("merge" + dirs + " --out " + quote(merged) + " --quiet");
    ASSERT_EQ(m.code, 0) << m.err;
    EXPECT_EQ(draws_values(merged / "draws.nc", dynamic), expected) << tag << count << " shards";
    EXPECT_EQ(sample_without_timings(json::parse(read_file(merged / "summary.json"))),
              sample_without_timings(json::parse(read_file(whole / "summary.json"))))
        << tag << count << " shards";
  }
 }
  // Shards of a sample and of a run do not merge; a sample has at most one shard per chain.
  ASSERT_EQ(run(write("run.json", base_config()), dir_ / "run_shard", "--shard 1/2").code, 2) << "5 trajectories, one slice";
  const Cli r = tether("sample " + quote(write("sample.json", sharded_sample_config())) + " --out " +
                       quote(dir_ / "bad") + " --quiet --shard 0/8");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(one_error_line(r).find("--shard: 7 chains make at most 7 shards, not 8"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "bad"));
}

// Killed with SIGKILL, or stopped with SIGTERM (a last checkpoint, exit 143),
// after its first checkpoint, then resumed: the draws and summary of the
// sample never stopped. A dynamic sample is killed and resumed too.
TEST_F(CliTest, AStoppedSampleResumesToTheSameDraws) {
  const fs::path cfg = write("sample.json", checkpointed_sample_config()), whole = dir_ / "whole";
  const auto sample = [&](const fs::path& c, const fs::path& out, const std::string& extra) {
    return tether("sample " + quote(c) + " --out " + quote(out) + " --quiet " + extra);
  };
  ASSERT_EQ(sample(cfg, whole, "").code, 0);
  const auto expected = draws_values(whole / "draws.nc");
  {
    json dynamic = dynamic_sample(checkpointed_sample_config());
    dynamic["sample"]["metric"] = "dense";  // its metric is part of the checkpoint
    dynamic["sample"]["draws"] = 1000;      // (each of its transitions costs some 3 static ones)
    const fs::path dynamic_cfg = write("dynamic.json", dynamic);
    const fs::path dynamic_whole = dir_ / "dynamic_whole", out = dir_ / "dynamic_stopped";
    ASSERT_EQ(sample(dynamic_cfg, dynamic_whole, "").code, 0);
    stop_at_checkpoint(dir_, "sample", dynamic_cfg, out, "KILL");
    if (fs::exists(out / "summary.json")) GTEST_SKIP() << "the sample finished before the signal: a faster machine";
    {
      ASSERT_TRUE(fs::exists(out / "checkpoint.tether"));
      ASSERT_EQ(sample(dynamic_cfg, out, "--resume").code, 0);
      const auto resumed = draws_values(out / "draws.nc", true);
      EXPECT_EQ(resumed.count("sample_stats/inverse_metric"), 1u) << "Sigma, whichever side of the checkpoint its block fell";
      EXPECT_EQ(resumed, draws_values(dynamic_whole / "draws.nc", true));
      EXPECT_EQ(sample_without_timings(json::parse(read_file(out / "summary.json"))),
                sample_without_timings(json::parse(read_file(dynamic_whole / "summary.json"))));
    }
  }
  for (const std::string signal : {"KILL", "TERM"}) {
    const fs::path out = dir_ / ("stopped_" + signal);
    const Cli stopped = stop_at_checkpoint(dir_, "sample", cfg, out, signal);
    if (fs::exists(out / "summary.json")) GTEST_SKIP() << "the sample finished before the signal: a faster machine";
    ASSERT_TRUE(fs::exists(out / "checkpoint.tether")) << signal << ": " << stopped.err;
    EXPECT_TRUE(fs::exists(out / "draws.bin.partial")) << "what the checkpoint goes on from";
    if (signal == "TERM") {
      EXPECT_NE(stopped.err.find("stopped by SIGTERM: checkpoint written; go on with `tether sample"), std::string::npos)
          << stopped.err;
      EXPECT_EQ(stopped.out, "exit 143\n");
    }
    if (signal == "KILL") {  // a resume with another config, or by another command, is refused and destroys nothing
      json other = checkpointed_sample_config();
      other["sample"]["seed"] = 4;
      const Cli r = sample(write("other.json", other), out, "--resume");
      EXPECT_EQ(r.code, 2);
      EXPECT_NE(one_error_line(r).find("sample.seed: is 4 here but 3 in what wrote the checkpoint"), std::string::npos)
          << r.err;
      const Cli w = run(write("run.json", base_config()), out, "--resume");
      EXPECT_EQ(w.code, 2);
      EXPECT_NE(one_error_line(w).find("was written by `tether sample`, not `tether run`"), std::string::npos) << w.err;
      EXPECT_TRUE(fs::exists(out / "checkpoint.tether") && fs::exists(out / "draws.bin.partial"));
    }
    const Cli resumed = sample(cfg, out, "--resume");
    ASSERT_EQ(resumed.code, 0) << signal << ": " << resumed.err;
    EXPECT_EQ(draws_values(out / "draws.nc"), expected) << signal;
    EXPECT_EQ(sample_without_timings(json::parse(read_file(out / "summary.json"))),
              sample_without_timings(json::parse(read_file(whole / "summary.json"))))
        << signal;
    EXPECT_FALSE(fs::exists(out / "checkpoint.tether") || fs::exists(out / "draws.bin.partial"));
  }
}

// The shipped Heisenberg grid (two seconds or so), checkpointed after every
// batch of shots: stopped by SIGKILL or SIGTERM and resumed, it writes the
// files of the shoot never stopped (summary.json but for its timings).
TEST_F(CliTest, AStoppedShootResumesToTheSameFiles) {
  json j = json::parse(read_file(fs::path(TETHER_SOURCE_DIR) / "configs/heisenberg_sphere.json"));
  j["backend"] = "cpu";
  j["output"]["checkpoint"] = {{"every", 1}};
  const fs::path cfg = write("shoot.json", j), whole = dir_ / "whole";
  const auto shoot = [&](const fs::path& out, const std::string& extra) {
    return tether("shoot " + quote(cfg) + " --out " + quote(out) + " --quiet " + extra);
  };
  ASSERT_EQ(shoot(whole, "").code, 0);
  const auto without = [](json s) {
    for (const char* key : {"wall_seconds", "shooting_seconds", "shots_per_second"}) s.erase(key);
    return s;
  };
  for (const std::string signal : {"KILL", "TERM"}) {
    const fs::path out = dir_ / ("stopped_" + signal);
    const Cli stopped = stop_at_checkpoint(dir_, "shoot", cfg, out, signal);
    if (fs::exists(out / "summary.json")) GTEST_SKIP() << "the shoot finished before the signal: a faster machine";
    ASSERT_TRUE(fs::exists(out / "checkpoint.tether")) << signal << ": " << stopped.err;
    if (signal == "TERM") {
      EXPECT_NE(stopped.err.find("stopped by SIGTERM: checkpoint written; go on with `tether shoot"), std::string::npos)
          << stopped.err;
      EXPECT_EQ(stopped.out, "exit 143\n");
    } else {  // another command's --resume is refused, and destroys nothing
      const Cli s = tether("sample " + quote(write("sample.json", sample_config())) + " --out " + quote(out) +
                           " --quiet --resume");
      EXPECT_EQ(s.code, 2);
      EXPECT_NE(one_error_line(s).find("was written by `tether shoot`, not `tether sample`"), std::string::npos) << s.err;
      EXPECT_TRUE(fs::exists(out / "checkpoint.tether"));
    }
    const Cli resumed = shoot(out, "--resume");
    ASSERT_EQ(resumed.code, 0) << signal << ": " << resumed.err;
    for (const char* file : {"shots.csv", "geodesics.csv"})
      EXPECT_EQ(read_file(out / file), read_file(whole / file)) << signal << ": " << file;
    EXPECT_EQ(without(json::parse(read_file(out / "summary.json"))), without(json::parse(read_file(whole / "summary.json"))))
        << signal;
    EXPECT_FALSE(fs::exists(out / "checkpoint.tether"));
  }
}

}  // namespace
}  // namespace tether::test

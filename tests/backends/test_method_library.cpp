// The method library through the engine: every new (system, method) pair
// runs on the cpu backend (the GPU step code) and on the reference backend
// (a generic dense Newton on the method's own equations), and the two agree;
// bad method and system parameters are named by their JSON path.
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "method_library_cases.hpp"
#include "support.hpp"

namespace tether::test {
namespace {

using nlohmann::json;
using library::Case;
using library::cases;
using library::thermal;

class MethodLibrary : public ::testing::TestWithParam<Case> {};

TEST_P(MethodLibrary, CpuAgreesWithReference) {
  const Case& c = GetParam();
  json method = c.method;
  method["dt"] = 0.01;
  method["steps"] = 20;
  json cfg = {{"system", c.system}, {"method", method},
              {"ensemble", {{"size", 4}, {"seed", 17}, {"initial", c.initial}}}, {"output", {{"every", 10}}}};
  MemorySink cpu, ref;
  cfg["backend"] = "cpu";
  const RunResult rc = run_json(cfg.dump(), &cpu);
  cfg["backend"] = "reference";
  const RunResult rr = run_json(cfg.dump(), &ref);
  ASSERT_EQ(rc.failed, 0);
  ASSERT_EQ(rr.failed, 0);
  ASSERT_EQ(cpu.rows.size(), ref.rows.size());
  Real worst = 0, scale = 1;
  for (std::size_t i = 0; i < cpu.rows.size(); ++i)
    for (std::size_t k = 0; k < cpu.rows[i].q.size(); ++k) {
      worst = std::max({worst, std::abs(cpu.rows[i].q[k] - ref.rows[i].q[k]), std::abs(cpu.rows[i].p[k] - ref.rows[i].p[k])});
      scale = std::max({scale, std::abs(cpu.rows[i].p[k])});
    }
  EXPECT_LT(worst / scale, 1e-9);
  EXPECT_LT(rc.max_constraint_violation, 1e-11);
  EXPECT_LT(rc.max_velocity_constraint_violation, 1e-10);
  EXPECT_LT(rc.max_relative_energy_error, 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Library, MethodLibrary, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

std::string config_error(const json& system, const json& method) {
  json m = method;
  m["dt"] = 0.01;
  m["steps"] = 1;
  const json cfg = {{"system", system}, {"method", m}, {"ensemble", {{"size", 1}, {"initial", thermal(1.0)}}}, {"output", {{"every", 1}}}};
  try {
    check_config(parse_config(cfg.dump(), "test"));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(MethodLibrary, BadParametersAreNamed) {
  auto has = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos ? ::testing::AssertionSuccess()
                                                   : ::testing::AssertionFailure() << message;
  };
  const json rigid = {{"name", "rigid_body"}};
  EXPECT_TRUE(has(config_error({{"name", "rigid_body"}, {"parameters", {{"inertia", {1.0, 2.0, 3.0}}}}}, {{"name", "rattle"}}),
                  "system.parameters.inertia: principal moments must be positive and each below the sum"));
  EXPECT_TRUE(has(config_error({{"name", "rigid_chain"}, {"parameters", {{"links", 9}}}}, {{"name", "rattle"}}),
                  "system.parameters.links: must be between 1 and 8, got 9"));
  EXPECT_TRUE(has(config_error(rigid, {{"name", "lie_rattle"}}), "method.retraction: is missing (one of: exp, cayley)"));
  EXPECT_TRUE(has(config_error(rigid, {{"name", "lie_rattle"}, {"retraction", "projection"}}),
                  "method.retraction: unknown value \"projection\""));
  EXPECT_TRUE(has(config_error({{"name", "spherical_pendulum"}}, {{"name", "lie_rattle"}, {"retraction", "exp"}}),
                  "method.name: \"lie_rattle\" does not apply to spherical_pendulum"));
  EXPECT_TRUE(has(config_error({{"name", "double_pendulum"}}, {{"name", "newmark"}}),
                  "method.name: \"newmark\" does not apply to double_pendulum"));
  EXPECT_TRUE(has(config_error({{"name", "kepler"}}, {{"name", "theta_retraction"}, {"theta", 1.5}}),
                  "method.theta: must be in [0, 1]"));
  EXPECT_TRUE(has(config_error({{"name", "kepler"}}, {{"name", "rattle"}, {"gamma", 0.5}}),
                  "method.gamma: applies only to newmark"));
  const json magnetic = {{"name", "magnetic_sphere"}};
  EXPECT_TRUE(has(config_error(magnetic, {{"name", "rattle"}}), "method.name: \"rattle\" does not apply to magnetic_sphere"));
  EXPECT_TRUE(has(config_error(magnetic, {{"name", "variational"}, {"alpha_plus", 1.5}}), "alpha_plus must be in [0, 1]"));
  EXPECT_TRUE(has(config_error(magnetic, {{"name", "variational"},
                                          {"layer", {{"a", {{0.0, 0.5}, {0.5, 0.0}}}, {"b", {0.5, 0.5}}, {"c", {0.5, 0.5}}}}}),
                  "the tableau must be explicit"));
  EXPECT_TRUE(has(config_error(magnetic, {{"name", "variational"}, {"layer", {{"a", {{0.0}}}, {"b", {1.0, 0.0}}, {"c", {0.0}}}}}),
                  "method.layer: a (rows), b and c must all have the same length"));
}

}  // namespace
}  // namespace tether::test

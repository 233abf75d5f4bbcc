// The property suite, generated from the registry: every (system, method)
// pair it allows, from the system's example config and the method's
// defaults, checked through the engine for
//   - both constraint levels, |g(q)| and |G(q) M^-1 p|, at every step;
//   - agreement of the cpu backend with the independent reference solver;
//   - bitwise determinism over thread counts and batch sizes;
//   - reversibility, where the method declares itself symmetric and the
//     system is reversed by p -> -p;
//   - symplecticity, where the method declares itself symplectic: the
//     canonical form dq ^ dp on pairs of tangent vectors of T*N, pushed
//     forward by differences of the flow, is kept.
// Each check's power is shown on a registered method that lacks the
// property (the last tests). cuda agreement is test_cuda's (gpu label).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "tether/engine.hpp"
#include "registry_cases.hpp"
#include "support.hpp"

namespace tether {
namespace {

using nlohmann::json;
using test::MemorySink;
using State = ExplicitState;

const SystemInfo& system_of(const RegistryCase& c) { return system_infos()[std::size_t(c.system)]; }
const MethodInfo& method_of(const RegistryCase& c) { return method_infos()[std::size_t(c.method)]; }

RunResult run_config(const json& config, MemorySink& sink) {
  RunOptions opt;
  opt.final_states = &sink;
  return run(parse_config(config.dump(), "registry case"), opt);
}

std::vector<State> states_of(const MemorySink& sink) {
  std::vector<State> z;
  for (const auto& row : sink.rows) z.push_back({row.q, row.p});
  return z;
}

// `steps` steps from explicit states (projected onto T*N first when asked:
// index-1 systems take any (q, p) and have nothing to project).
std::vector<State> advance(const RegistryCase& c, const std::vector<State>& z, std::int64_t steps, bool project = false) {
  json cfg = c.config;
  cfg["method"]["steps"] = steps;
  json states = json::array();
  for (const auto& s : z) states.push_back({{"q", s.q}, {"p", s.p}});
  cfg["ensemble"] = {{"initial", {{"states", states}}}};
  if (project && system_of(c).family != Family::nonholonomic) cfg["ensemble"]["initial"]["project"] = true;
  cfg["backend"] = "cpu";
  MemorySink sink;
  const RunResult r = run_config(cfg, sink);
  EXPECT_EQ(r.failed, 0) << "from explicit states, " << steps << " steps";
  return states_of(sink);
}

// A few states on T*N from the example's own initial ensemble, a few steps in.
std::vector<State> typical_states(const RegistryCase& c, std::int64_t size) {
  MemorySink sink;
  const RunResult r = run_config(test::case_config(c, 5, size, "cpu"), sink);
  EXPECT_EQ(r.failed, 0);
  return states_of(sink);
}

Real largest_difference(const std::vector<State>& a, const std::vector<State>& b) {
  Real worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t k = 0; k < a[i].q.size(); ++k)
      worst = std::max({worst, std::abs(a[i].q[k] - b[i].q[k]), std::abs(a[i].p[k] - b[i].p[k])});
  return worst;
}

Real magnitude(const std::vector<State>& z) {
  Real m = 1;
  for (const auto& s : z)
    for (std::size_t k = 0; k < s.q.size(); ++k) m = std::max({m, std::abs(s.q[k]), std::abs(s.p[k])});
  return m;
}

// |z0 - flip(Phi^N(flip(Phi^N(z0))))|, flip(q, p) = (q, -p), relative to |z0|.
Real reversal_error(const RegistryCase& c, std::int64_t steps) {
  const std::vector<State> z0 = typical_states(c, 3);
  std::vector<State> z = advance(c, z0, steps);
  for (auto& s : z)
    for (auto& x : s.p) x = -x;
  z = advance(c, z, steps);
  for (auto& s : z)
    for (auto& x : s.p) x = -x;
  return largest_difference(z, z0) / magnitude(z0);
}

// The symplecticity defect of N steps at a typical state z0: tangent vectors
// t_k of T*N at z0 are differences of the projections P(z0 + j eps xi_k),
// j = +-1, +-2, of random displacements xi_k; their images T_k the same
// differences of Phi^N(P(z0 + j eps xi_k)). Returns max |w(T_k, T_l) - w(t_k, t_l)|
// over max |w(t_k, t_l)|, w the canonical form sum dq ^ dp. The fourth-order
// stencil leaves O(eps^4) and the Newton tolerance over eps: ~1e-9 at eps = 1e-4
// (a central difference's O(eps^2) was 1e-5 on the stiff chains, whatever the method).
Real symplecticity_defect(const RegistryCase& c, std::int64_t steps) {
  const State z0 = typical_states(c, 1).at(0);
  const std::size_t n = z0.q.size();
  constexpr int directions = 4;
  constexpr Real eps = 1e-4;
  constexpr Real offsets[4] = {2, 1, -1, -2}, weights[4] = {-1, 8, -8, 1};  // f' ~ sum w f(x + o eps) / (12 eps)
  std::mt19937_64 rng(12345);
  std::normal_distribution<Real> normal;
  std::vector<State> displaced;
  for (int k = 0; k < directions; ++k) {
    State xi{std::vector<Real>(n), std::vector<Real>(n)};
    for (std::size_t i = 0; i < n; ++i) xi.q[i] = normal(rng), xi.p[i] = normal(rng);
    for (Real o : offsets) {
      State s = z0;
      for (std::size_t i = 0; i < n; ++i) s.q[i] += o * eps * xi.q[i], s.p[i] += o * eps * xi.p[i];
      displaced.push_back(s);
    }
  }
  const std::vector<State> on = advance(c, displaced, 0, true), moved = advance(c, on, steps);
  const auto tangent = [&](const std::vector<State>& z, int k) {
    State t{std::vector<Real>(n, 0.0), std::vector<Real>(n, 0.0)};
    for (int j = 0; j < 4; ++j)
      for (std::size_t i = 0; i < n; ++i) {
        t.q[i] += weights[j] * z[std::size_t(4 * k + j)].q[i] / (12 * eps);
        t.p[i] += weights[j] * z[std::size_t(4 * k + j)].p[i] / (12 * eps);
      }
    return t;
  };
  const auto omega = [&](const State& a, const State& b) {
    Real w = 0;
    for (std::size_t i = 0; i < n; ++i) w += a.q[i] * b.p[i] - a.p[i] * b.q[i];
    return w;
  };
  Real defect = 0, scale = 0;
  for (int k = 0; k < directions; ++k)
    for (int l = k + 1; l < directions; ++l) {
      const Real before = omega(tangent(on, k), tangent(on, l));
      defect = std::max(defect, std::abs(omega(tangent(moved, k), tangent(moved, l)) - before));
      scale = std::max(scale, std::abs(before));
    }
  return defect / scale;
}

constexpr Real kConstraintBound = 1e-12;   // both levels, as everywhere in the suite
constexpr Real kReferenceBound = 1e-9;     // two solvers' Newton iterates, 20 steps, relative
constexpr Real kReversalBound = 1e-10;     // 2 x 20 steps at the Newton tolerance, relative (seen: 7e-13)
constexpr Real kSymplecticBound = 1e-6;    // seen: 2e-8 at most; trapezoidal Newmark 2e-5
constexpr std::int64_t kSteps = 20;

class RegistryPair : public ::testing::TestWithParam<RegistryCase> {};

TEST_P(RegistryPair, KeepsBothConstraintLevelsEveryStep) {
  json cfg = test::case_config(GetParam(), 40, 8, "cpu");
  cfg["output"] = {{"every", 1}};
  MemorySink sink;
  const RunResult r = run_config(cfg, sink);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.timeseries.size(), 41u);
  EXPECT_LT(r.max_constraint_violation, kConstraintBound);
  EXPECT_LT(r.max_velocity_constraint_violation, kConstraintBound);
}

TEST_P(RegistryPair, ReferenceSolverAgrees) {
  MemorySink cpu, ref;
  const RunResult rc = run_config(test::case_config(GetParam(), kSteps, 4, "cpu"), cpu);
  const RunResult rr = run_config(test::case_config(GetParam(), kSteps, 4, "reference"), ref);
  ASSERT_EQ(rr.backend, "reference");
  ASSERT_EQ(rc.failed + rr.failed, 0);
  ASSERT_EQ(cpu.rows.size(), ref.rows.size());
  EXPECT_LT(largest_difference(states_of(cpu), states_of(ref)) / magnitude(states_of(cpu)), kReferenceBound);
}

TEST_P(RegistryPair, DeterministicOverThreadsAndBatchSizes) {
  const int threads = omp_get_max_threads();
  json one = test::case_config(GetParam(), kSteps, 7, "cpu"), split = one;
  one["ensemble"]["batch_size"] = 7;
  split["ensemble"]["batch_size"] = 3;
  MemorySink a, b;
  omp_set_num_threads(1);
  run_config(one, a);
  omp_set_num_threads(2);
  run_config(split, b);
  omp_set_num_threads(threads);
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (std::size_t i = 0; i < a.rows.size(); ++i) {
    EXPECT_EQ(a.rows[i].q, b.rows[i].q) << "trajectory " << i;  // bitwise
    EXPECT_EQ(a.rows[i].p, b.rows[i].p) << "trajectory " << i;
    EXPECT_EQ(a.rows[i].status, b.rows[i].status);
  }
}

TEST_P(RegistryPair, ReversibleWhenSymmetric) {
  const RegistryCase& c = GetParam();
  if (!method_of(c).symmetric) GTEST_SKIP() << c.method_label << " is not symmetric";
  if (!system_of(c).reversed_by_momentum_flip) GTEST_SKIP() << c.system_label << " is not reversed by p -> -p";
  EXPECT_LT(reversal_error(c, kSteps), kReversalBound);
}

TEST_P(RegistryPair, SymplecticWhenDeclared) {
  const RegistryCase& c = GetParam();
  if (!method_of(c).symplectic) GTEST_SKIP() << c.method_label << " does not claim symplecticity";
  EXPECT_LT(symplecticity_defect(c, kSteps), kSymplecticBound);
}

INSTANTIATE_TEST_SUITE_P(Registry, RegistryPair, ::testing::ValuesIn(test::all_registry_cases()),
                         [](const auto& info) { return test::case_name(info.param); });

const RegistryCase& find_case(const std::string& system, const std::string& method) {
  for (const auto& c : test::all_registry_cases())
    if (c.system_label == system && c.method_label == method) return c;
  throw std::runtime_error("no registry case " + system + " / " + method);
}

// Every registered system has an example config, every pair a case.
TEST(RegistryCases, CoverEveryAllowedPair) {
  std::size_t pairs = 0;
  for (const auto& s : system_infos()) pairs += s.methods.size();
  EXPECT_EQ(test::all_registry_cases().size(), pairs);
}

TEST(RegistryCases, AMissingExampleIsNamed) {
  try {
    example_config_path(TETHER_SOURCE_DIR "/configs", "no_such_system");
    FAIL() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no example config for system \"no_such_system\""), std::string::npos)
        << e.what();
  }
}

// The checks can fail: symplectic Euler A is not symmetric, and the
// trapezoidal Newmark keeps dx ^ dp rather than dq ^ dp (BM21 Remark 5.5).
TEST(RegistryPropertyPower, ReversalCheckFailsOnANonSymmetricMethod) {
  const RegistryCase& c = find_case("double_pendulum", "symplectic_euler_a");
  ASSERT_FALSE(method_of(c).symmetric);
  EXPECT_GT(reversal_error(c, kSteps), 100 * kReversalBound);
}

TEST(RegistryPropertyPower, SymplecticityCheckFailsOnTrapezoidalNewmark) {
  const RegistryCase& c = find_case("kepler", "newmark");
  ASSERT_FALSE(method_of(c).symplectic);
  EXPECT_GT(symplecticity_defect(c, kSteps), 10 * kSymplecticBound);
}

}  // namespace
}  // namespace tether

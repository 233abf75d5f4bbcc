// gpu-labelled: the cuda backend against the cpu backend on the same
// ensembles. Skipped where no device is present, unless TETHER_REQUIRE_GPU=1
// (set it on GPU machines so a broken driver cannot pass as a skip).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "tether/engine/shooting.hpp"
#include "method_library_cases.hpp"
#include "registry_cases.hpp"
#include "support.hpp"

namespace tether {
namespace {

// Why no device can be used, or nullptr when one can.
const char* missing_device() {
  if (!cuda_built()) return "built without CUDA";
  if (cuda_compile_check_only()) return "kernels compiled to check them only (TETHER_CUDA_COMPILE_CHECK=ON)";
  if (cuda_device_count() == 0) return "no CUDA device present";
  return nullptr;
}

bool gpu_required() {
  const char* req = std::getenv("TETHER_REQUIRE_GPU");
  return req && std::string(req) == "1";
}

// GTEST_SKIP/FAIL must run in the test body itself to end it.
#define TETHER_REQUIRE_DEVICE()                                                          \
  if (const char* why = missing_device()) {                                              \
    if (gpu_required()) FAIL() << "TETHER_REQUIRE_GPU=1 but the device is unusable: " << why; \
    GTEST_SKIP() << why;                                                                 \
  }

// One config run on cpu and on cuda; config(backend) gives its JSON text.
struct CpuAndCuda {
  test::MemorySink cpu, gpu;
  RunResult rc, rg;
};

template <class Config>
CpuAndCuda run_on_both(const Config& config) {
  CpuAndCuda r;
  r.rc = test::run_json(config("cpu"), &r.cpu);
  r.rg = test::run_json(config("cuda"), &r.gpu);
  return r;
}

// Ran on cuda, with the same trajectories, failures and statuses, and final
// q and p within `tolerance` of cpu's.
::testing::AssertionResult same_final_states(const CpuAndCuda& r, Real tolerance) {
  if (r.rg.backend != "cuda") return ::testing::AssertionFailure() << "ran on " << r.rg.backend << ", not cuda";
  if (r.cpu.rows.size() != r.gpu.rows.size())
    return ::testing::AssertionFailure() << r.cpu.rows.size() << " cpu rows against " << r.gpu.rows.size() << " cuda";
  if (r.rc.failed != r.rg.failed)
    return ::testing::AssertionFailure() << r.rc.failed << " failed on cpu against " << r.rg.failed << " on cuda";
  Real worst = 0;
  for (std::size_t i = 0; i < r.cpu.rows.size(); ++i) {
    if (r.cpu.rows[i].status != r.gpu.rows[i].status)
      return ::testing::AssertionFailure() << "trajectory " << i << ": statuses differ";
    for (std::size_t c = 0; c < r.cpu.rows[i].q.size(); ++c) {
      worst = std::max(worst, std::abs(r.cpu.rows[i].q[c] - r.gpu.rows[i].q[c]));
      worst = std::max(worst, std::abs(r.cpu.rows[i].p[c] - r.gpu.rows[i].p[c]));
    }
  }
  if (!(worst < tolerance))
    return ::testing::AssertionFailure() << "largest |cpu - cuda| " << worst << " (tolerance " << tolerance << ")";
  return ::testing::AssertionSuccess();
}

// How far cuda's final states may be from cpu's. Same step code; nvcc
// contracts to fused multiply-adds and its libm may differ by ulps. A cpu
// build with -ffp-contract=fast -march=native moved these final states by at
// most 1.3e-10 (chain16, symplectic Euler A), so 1e-8 leaves room while still
// catching any real difference in the step. Built with TETHER_FMA=OFF both
// sides do the same arithmetic but for libm's ulps: 1e-12.
#ifdef TETHER_NO_FMA
constexpr Real cuda_tolerance = 1e-12;
#else
constexpr Real cuda_tolerance = 1e-8;
#endif

// The timeseries rows agree: the same live counts at the same steps, the
// statistics within `tolerance` (relative to the largest of a column).
::testing::AssertionResult same_timeseries(const RunResult& rc, const RunResult& rg, Real tolerance) {
  if (rc.timeseries.size() != rg.timeseries.size())
    return ::testing::AssertionFailure() << rc.timeseries.size() << " cpu rows against " << rg.timeseries.size();
  for (std::size_t i = 0; i < rc.timeseries.size(); ++i) {
    const TimeseriesRow &a = rc.timeseries[i], &b = rg.timeseries[i];
    if (a.step != b.step || a.live != b.live)
      return ::testing::AssertionFailure() << "row " << i << ": step " << a.step << "/" << b.step << ", live " << a.live
                                           << "/" << b.live;
    const Real pairs[4][2] = {{a.mean_energy_error, b.mean_energy_error},
                              {a.max_energy_error, b.max_energy_error},
                              {a.max_constraint_violation, b.max_constraint_violation},
                              {a.max_velocity_constraint_violation, b.max_velocity_constraint_violation}};
    for (const auto& ab : pairs)
      if (!(std::abs(ab[0] - ab[1]) <= tolerance * std::max<Real>(1, std::abs(ab[0]))))
        return ::testing::AssertionFailure() << "row " << i << " (step " << a.step << "): " << ab[0] << " on cpu, "
                                             << ab[1] << " on cuda";
  }
  return ::testing::AssertionSuccess();
}

// Every (system, method) pair of the registry (tests/registry_cases.hpp):
// 100 steps of its example's dt and initial ensemble, 1000 trajectories
// (or the example's explicit states) in batches of 320: several batches and
// a partial last one. (At 250 steps the sweep took about 6 minutes on an
// H100, each thread's steps one after another.)
class CudaAgreesWithCpu : public ::testing::TestWithParam<RegistryCase> {};

TEST_P(CudaAgreesWithCpu, FinalStatesAndStatistics) {
  TETHER_REQUIRE_DEVICE();
  const CpuAndCuda r = run_on_both([&](const char* backend) {
    nlohmann::json cfg = test::case_config(GetParam(), 100, 1000, backend);
    cfg["ensemble"]["seed"] = 5;
    cfg["ensemble"]["batch_size"] = 320;
    cfg["output"] = {{"every", 25}};
    return cfg.dump();
  });
  const RunResult &rc = r.rc, &rg = r.rg;
  EXPECT_TRUE(same_final_states(r, cuda_tolerance));
  EXPECT_TRUE(same_timeseries(rc, rg, 1e-9));
  EXPECT_LT(rg.max_constraint_violation, 1e-12);
  EXPECT_LT(rg.max_velocity_constraint_violation, 1e-12);
  EXPECT_NEAR(rg.max_relative_energy_error, rc.max_relative_energy_error, 1e-9);
}

INSTANTIATE_TEST_SUITE_P(Registry, CudaAgreesWithCpu, ::testing::ValuesIn(test::all_registry_cases()),
                         [](const auto& info) { return test::case_name(info.param); });

// The method library's parameter choices beyond the defaults (every case of
// test_method_library), 600 trajectories in batches of 256, on cuda and cpu.
class CudaAgreesWithCpuLibrary : public ::testing::TestWithParam<test::library::Case> {};

TEST_P(CudaAgreesWithCpuLibrary, FinalStates) {
  TETHER_REQUIRE_DEVICE();
  const test::library::Case& c = GetParam();
  nlohmann::json method = c.method;
  method["dt"] = 0.01;
  method["steps"] = 60;
  const nlohmann::json cfg = {
      {"system", c.system},
      {"method", method},
      {"ensemble", {{"size", 600}, {"seed", 5}, {"batch_size", 256}, {"initial", c.initial}}},
      {"output", {{"every", 20}}}};
  const CpuAndCuda r = run_on_both([&](const char* backend) {
    nlohmann::json on = cfg;
    on["backend"] = backend;
    return on.dump();
  });
  EXPECT_TRUE(same_final_states(r, cuda_tolerance));
  EXPECT_TRUE(same_timeseries(r.rc, r.rg, 1e-9));
  EXPECT_LT(r.rg.max_constraint_violation, 1e-11);
  EXPECT_NEAR(r.rg.max_relative_energy_error, r.rc.max_relative_energy_error, 1e-9);
}

INSTANTIATE_TEST_SUITE_P(Library, CudaAgreesWithCpuLibrary, ::testing::ValuesIn(test::library::cases()),
                         [](const auto& info) { return info.param.name; });

// tether shoot: the same covectors, statuses and conjugate points from one
// thread per shot, by single and by multiple shooting (a kernel each).
TEST(CudaShoot, AgreesWithCpu) {
  TETHER_REQUIRE_DEVICE();
  const std::pair<const char*, int> cases[] = {{R"({"name": "gauss_legendre", "stages": 3, "steps": 40})", 1},
                                               {R"({"name": "stormer_verlet", "steps": 40})", 1},
                                               {R"({"name": "gauss_legendre", "stages": 2, "steps": 40})", 4}};
  for (const auto& [method, nodes] : cases) {
    const auto cfg = [&](const std::string& backend) {
      return parse_shoot_config(R"({"system": {"name": "heisenberg"}, "method": )" + std::string(method) +
                                    R"(, "shoot": {"q0": [0, 0, 0], "time": 1.0, "nodes": )" +
                                    std::to_string(nodes) + R"(,
            "targets": {"grid": {"min": [-1, 0, -0.3], "max": [1, 0, 0.3], "count": [9, 1, 7]}},
            "guesses": {"toward": true, "random": {"count": 4, "scale": 2.0, "seed": 1}}},
            "backend": ")" + backend + R"("})",
                                "test");
    };
    const ShootResult rc = shoot(cfg("cpu"), {}), rg = shoot(cfg("cuda"), {});
    EXPECT_EQ(rg.backend, "cuda");
    ASSERT_EQ(rc.targets.size(), rg.targets.size());
    for (std::size_t t = 0; t < rc.targets.size(); ++t) {
      ASSERT_EQ(rc.targets[t].status, rg.targets[t].status) << method << " nodes " << nodes << " target " << t;
      if (rc.targets[t].status != ShotStatus::converged) continue;
      const TargetResult &a = rc.targets[t], &b = rg.targets[t];
      EXPECT_NEAR(a.length, b.length, 1e-9 * a.length) << t;
      // On the z-axis (the cut locus) every rotation of the minimiser is one, and
      // roundoff picks which: there only the lengths must agree.
      if (a.near_cut_locus && a.second_length <= a.length * (1 + 1e-9)) continue;
      for (std::size_t c = 0; c < 3; ++c) {
        EXPECT_NEAR(a.p0[c], b.p0[c], 1e-8) << t;
        EXPECT_NEAR(a.pT[c], b.pT[c], 1e-8) << t;
      }
      EXPECT_EQ(std::isnan(a.conjugate_time), std::isnan(b.conjugate_time)) << t;
      EXPECT_EQ(a.near_cut_locus, b.near_cut_locus) << t;
    }
  }
}

// tether sample: the same draws from one thread per chain, or a tile of
// threads (a chain of 16 beads: RATTLE and the triple jump), as on the cpu
// (the chains' random streams are keyed by (seed, chain, iteration)), to
// roundoff over a short run.
TEST(CudaSample, AgreesWithCpu) {
  TETHER_REQUIRE_DEVICE();
  const std::string rattle = R"({"name": "rattle", "dt": 0.05, "steps": 8})";
  const std::string chain = R"({"name": "chain", "parameters": {"beads": 16, "bend_stiffness": 20.0}})";
  const std::pair<std::string, std::string> pairs[] = {
      {R"({"name": "spherical_pendulum"})", rattle},
      {R"({"name": "double_pendulum"})", rattle},
      {chain, R"({"name": "rattle", "dt": 0.02, "steps": 8})"},
      {chain, R"({"name": "composition", "base": "rattle", "scheme": "triple_jump", "dt": 0.04, "steps": 4})"}};
  for (const auto& [system, method] : pairs) {
    SampleConfig c = parse_sample_config(R"({"system": )" + system + R"(, "method": )" + method + R"(,
        "sample": {"chains": 300, "draws": 10, "warmup": 5, "seed": 3, "temperature": 2,
                   "jitter": {"dt": 0.1, "steps": 0.25}}})",
                                         "test");
    test::MemoryDraws cpu(300, 10, system_dof(c.run)), gpu(300, 10, system_dof(c.run));
    for (auto [backend, keep] : {std::pair{"cpu", &cpu}, std::pair{"cuda", &gpu}}) {
      c.run.backend = backend;
      SampleOptions opt;
      opt.draws = keep;
      EXPECT_EQ(sample(c, opt).backend, backend);
    }
    ASSERT_EQ(cpu.q.size(), gpu.q.size()) << system << method;
    EXPECT_EQ(cpu.outcome, gpu.outcome) << system << method;
    for (std::size_t k = 0; k < cpu.q.size(); ++k) ASSERT_NEAR(cpu.q[k], gpu.q[k], 1e-7) << system << method << " " << k;
  }
}

// The dynamic algorithm and the adapted metrics on a GPU thread: the same
// trajectories' depths, draws and each chain's Sigma as the cpu's (a chain's
// tree scratch lives on the device; its metric's windows are summed there).
// Integrable targets (the pendulum, Neumann's problem on the sphere) and the
// shortest warm-up a metric takes, so that the two backends' last bits (their
// fused multiply-adds) do not grow into different trajectories. They still
// grow on the stiff Bingham target (scales 100x apart, h omega = 0.5): on an
// H200 (2026-11-30) its draws after 25 iterations were 8.5e-8 apart with the
// system's mass, 2.5e-7 with the diagonal metric and 8.1e-6 with the dense
// one (metrics 1.3e-9 and 6.4e-8 relative), the pendulum's 4e-11. So the
// trees must be the same, and the draws and metrics the same to 1e-4: a wrong
// tree, metric or draw is off by the target's scale, 0.04 and more. The
// largest differences go into the test's XML.
TEST(CudaSample, DynamicTrajectoriesAndAdaptedMetricsAgreeWithCpu) {
  TETHER_REQUIRE_DEVICE();
  for (const std::string metric : {"mass", "diag", "dense"})
    for (const std::string system :
         {R"({"name": "spherical_pendulum"})",
          R"({"name": "fisher_bingham", "parameters": {"kappa": 0, "bingham": [0, -3, -300, 0, 0, 0]}})"}) {
      SampleConfig c = parse_sample_config(R"({"system": )" + system + R"(, "method": {"name": "rattle", "dt": 0.02},
          "sample": {"algorithm": "dynamic", "metric": ")" + metric + R"(", "chains": 200, "draws": 5,
                     "warmup": 20, "seed": 5, "temperature": 2}})",
                                           "test");
      const int dof = system_dof(c.run);
      test::MemoryDraws cpu(200, 10, dof, c.sample.metric), gpu(200, 10, dof, c.sample.metric);
      for (auto [backend, keep] : {std::pair{"cpu", &cpu}, std::pair{"cuda", &gpu}}) {
        c.run.backend = backend;
        SampleOptions opt;
        opt.draws = keep;
        EXPECT_EQ(sample(c, opt).backend, backend);
      }
      const std::string what = system + " " + metric;
      EXPECT_EQ(cpu.outcome, gpu.outcome) << what;
      EXPECT_EQ(cpu.tree_depth, gpu.tree_depth) << what;
      ASSERT_EQ(cpu.q.size(), gpu.q.size());
      ASSERT_EQ(cpu.inverse_metric.size(), gpu.inverse_metric.size());
      Real q_apart = 0, metric_apart = 0;  // absolute; relative
      for (std::size_t k = 0; k < cpu.q.size(); ++k) q_apart = std::max(q_apart, std::fabs(cpu.q[k] - gpu.q[k]));
      for (std::size_t k = 0; k < cpu.inverse_metric.size(); ++k)
        metric_apart = std::max(metric_apart, std::fabs(cpu.inverse_metric[k] - gpu.inverse_metric[k]) /
                                                  std::fabs(cpu.inverse_metric[k]));
      const std::string name = std::string(system.find("fisher") != std::string::npos ? "fisher_bingham" : "pendulum") +
                               "_" + metric;
      char apart[64];
      std::snprintf(apart, sizeof apart, "%.3e %.3e", q_apart, metric_apart);
      ::testing::Test::RecordProperty("draws_and_inverse_metric_apart_" + name, apart);
      EXPECT_LE(q_apart, 1e-4) << what;
      EXPECT_LE(metric_apart, 1e-4) << what;
    }
}

// A failed trajectory keeps its last good state on a GPU thread too: a
// composition's failed step moves the state part-way, and the kernel replays
// the launch's good steps (test_backends.cpp's LastGoodState on cpu and
// reference). Pendula falling from near the top fail at steps 2-4, in
// launches of 2 steps; the state kept is, bit for bit, a cuda run's of f - 1.
TEST(CudaFailure, KeepsTheLastGoodStateOfAComposition) {
  TETHER_REQUIRE_DEVICE();
  const auto config = [](const std::string& states, long steps) {
    return R"({"system": {"name": "spherical_pendulum"},
      "method": {"name": "composition", "base": "rattle", "scheme": "triple_jump", "dt": 0.05, "steps": )" +
           std::to_string(steps) + R"(}, "ensemble": {"initial": {"states": [)" + states +
           R"(]}}, "output": {"every": 2}, "backend": "cuda"})";
  };
  std::vector<std::string> states;
  std::string all;
  for (int k = 0; k < 16; ++k) {
    char state[128];
    std::snprintf(state, sizeof state, R"({"q": [%.17g, 0, %.17g], "p": [0, %.17g, 0]})", std::sin(2.8), -std::cos(2.8),
                  11.0 + 0.05 * k);
    states.push_back(state);
    all += (k ? ", " : "") + states.back();
  }
  test::MemorySink sink;
  const RunResult r = test::run_json(config(all, 7), &sink);
  ASSERT_EQ(r.backend, "cuda");
  ASSERT_EQ(r.failed, 16);
  for (const Failure& f : r.failures) {
    ASSERT_GE(f.step, 2) << "trajectory " << f.id;
    test::MemorySink before;
    ASSERT_EQ(test::run_json(config(states[std::size_t(f.id)], f.step - 1), &before).failed, 0);
    const auto& kept = sink.rows[std::size_t(f.id)];
    for (std::size_t c = 0; c < kept.q.size(); ++c) {
      EXPECT_EQ(kept.q[c], before.rows[0].q[c]) << "trajectory " << f.id << ", failed at step " << f.step;
      EXPECT_EQ(kept.p[c], before.rows[0].p[c]) << "trajectory " << f.id << ", failed at step " << f.step;
    }
  }
}

// A chain's RATTLE, and a composition of it, run as a tile of 16 threads
// per trajectory (advance_tile): 37 chains (a partial last block of tiles),
// launches of 7 steps, Newton cut at 3 iterations so that part of them fail
// (RATTLE: 21, at steps 1 to 40; the triple jump: 13, at steps 2 to 32). The same
// trajectories fail at the same steps for the same reason as on cpu, which
// runs the same tile step, and every final state, a failed one's last good
// state included (a composition's: the failed step's start), agrees.
class CudaTile : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaTile, FailuresAndLastGoodStatesAreCpus) {
  TETHER_REQUIRE_DEVICE();
  // Each step long enough that Newton, cut short, fails part of the ensemble
  // (on the cpu: 21, 19, 13, 28, 21 and 16 of 37); the midpoint rule's fixed
  // point takes 10-12 iterations at 0.01.
  const std::map<std::string, std::string> methods = {
      {"rattle", R"("name": "rattle", "dt": 0.035, "newton": {"tolerance": 1e-13, "max_iterations": 3})"},
      {"shake", R"("name": "shake", "dt": 0.025, "newton": {"tolerance": 1e-13, "max_iterations": 3})"},
      {"composition", R"("name": "composition", "base": "rattle", "scheme": "triple_jump", "dt": 0.02,
                         "newton": {"tolerance": 1e-13, "max_iterations": 3})"},
      {"constrained_midpoint",
       R"("name": "constrained_midpoint", "dt": 0.015, "newton": {"tolerance": 1e-13, "max_iterations": 12})"},
      {"symplectic_euler_b",
       R"("name": "symplectic_euler_b", "dt": 0.04, "newton": {"tolerance": 1e-13, "max_iterations": 3})"},
      {"composition_symplectic_euler", R"("name": "composition", "base": "symplectic_euler", "scheme": "triple_jump",
                                          "dt": 0.03, "newton": {"tolerance": 1e-13, "max_iterations": 3})"},
  };
  const std::string method = methods.at(GetParam());
  const auto config = [&](const std::string& backend) {
    return R"({"system": {"name": "chain", "parameters": {"beads": 16, "bend_stiffness": 60.0,
                "bend_angle_degrees": 112.0, "torsion": [1.116, 1.462, -1.578, -0.368, 3.156, -3.788]}},
      "method": {)" + method + R"(, "steps": 40},
      "ensemble": {"size": 37, "seed": 5, "initial": {"sampler": "thermal", "temperature": 2.0}},
      "output": {"every": 7}, "backend": ")" +
           backend + R"("})";
  };
  const CpuAndCuda r = run_on_both(config);
  ASSERT_GE(r.rc.failed, 10) << "the config was meant to fail part of the ensemble";
  ASSERT_LT(r.rc.failed, 37);
  ASSERT_EQ(r.rc.failures.size(), r.rg.failures.size());
  for (std::size_t k = 0; k < r.rc.failures.size(); ++k) {
    EXPECT_EQ(r.rc.failures[k].id, r.rg.failures[k].id);
    EXPECT_EQ(r.rc.failures[k].step, r.rg.failures[k].step) << "trajectory " << r.rc.failures[k].id;
    EXPECT_EQ(r.rc.failures[k].reason, r.rg.failures[k].reason) << "trajectory " << r.rc.failures[k].id;
  }
  EXPECT_TRUE(same_final_states(r, cuda_tolerance));
  EXPECT_TRUE(same_timeseries(r.rc, r.rg, 1e-9));
}

INSTANTIATE_TEST_SUITE_P(Chain16, CudaTile,
                         ::testing::Values("rattle", "shake", "composition", "constrained_midpoint",
                                           "symplectic_euler_b", "composition_symplectic_euler"));

TEST(Cuda, AutoPicksCudaWhenADeviceIsPresent) {
  TETHER_REQUIRE_DEVICE();
  EXPECT_EQ(resolve_backend("auto"), "cuda");
  EXPECT_EQ(resolve_backend("auto", auto_cuda_min_ensemble), "cuda");
  EXPECT_EQ(resolve_backend("auto", 32), "cpu") << "a small ensemble stays on the cpu";
  EXPECT_EQ(resolve_backend("auto", auto_cuda_min_ensemble, auto_cuda_min_shots), "cpu") << "shots cross over later";
  EXPECT_EQ(resolve_backend("cuda", 32), "cuda") << "asked for by name, it is used";
}

}  // namespace
}  // namespace tether

// Cross-backend agreement and the engine's ensemble contracts: determinism
// under thread count and batch size, failure reporting, explicit states,
// samplers and the timeseries layout.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backends/backend.hpp"  // observation_chunk, parallel_threshold
#include "tether/systems/double_pendulum.hpp"
#include "tether/systems/spherical_pendulum.hpp"
#include "support.hpp"

namespace tether::test {
namespace {

using nlohmann::json;

const json torsion = {1.116, 1.462, -1.578, -0.368, 3.156, -3.788};

json system_json(const std::string& name) {
  if (name == "chain4") return {{"name", "chain"}, {"parameters", {{"beads", 4}, {"torsion", torsion}}}};
  if (name == "chain16")
    return {{"name", "chain"},
            {"parameters", {{"beads", 16}, {"bend_stiffness", 60.0}, {"bend_angle_degrees", 112.0}, {"torsion", torsion}}}};
  return {{"name", name}};
}

// A thermal ensemble config; tests edit the returned JSON further.
json thermal_config(const std::string& system, const std::string& method, double dt, long steps, long size,
                    const std::string& backend = "cpu", long seed = 5, double temperature = 0.5) {
  return {{"system", system_json(system)},
          {"method", {{"name", method}, {"dt", dt}, {"steps", steps}}},
          {"ensemble", {{"size", size}, {"seed", seed}, {"initial", {{"sampler", "thermal"}, {"temperature", temperature}}}}},
          {"output", {{"every", std::max(1L, steps / 4)}}},
          {"backend", backend}};
}

struct Outcome {
  RunResult result;
  MemorySink sink;
  // The first id of each batch the run went through. Final states stream out
  // batch by batch, after the batch is integrated, so the number of rows
  // written when progress is reported is the first id of the batch being
  // integrated. Empty when there is nothing to integrate (steps = 0).
  std::vector<std::int64_t> batch_starts;
};

Outcome run_cfg(const json& cfg) {
  Outcome o;
  RunOptions opt;
  opt.final_states = &o.sink;
  opt.progress = [&o](double, double) {
    const auto written = std::int64_t(o.sink.rows.size());
    if (o.batch_starts.empty() || o.batch_starts.back() != written) o.batch_starts.push_back(written);
  };
  o.result = run(parse_config(cfg.dump(), "test"), opt);
  return o;
}

using Starts = std::vector<std::int64_t>;

// The batch sizes below are chosen in whole observation chunks (see the
// BatchSizeRoundsUpToWholeObservationChunks test); the expected batch starts
// are written out for this chunk.
static_assert(observation_chunk == 64);

// Rows arrive in id order, exactly once each.
void expect_ids_complete(const MemorySink& sink, std::int64_t size) {
  ASSERT_EQ(std::int64_t(sink.rows.size()), size);
  for (std::int64_t i = 0; i < size; ++i) EXPECT_EQ(sink.rows[std::size_t(i)].id, i);
}

Real max_abs_diff(const std::vector<Real>& a, const std::vector<Real>& b) {
  EXPECT_EQ(a.size(), b.size());
  Real d = 0;
  for (std::size_t k = 0; k < std::min(a.size(), b.size()); ++k) d = std::max(d, std::abs(a[k] - b[k]));
  return d;
}

// Bitwise, not ==: also distinguishes -0.0 and catches NaN == NaN.
bool same_bits(const std::vector<Real>& a, const std::vector<Real>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(Real)) == 0;
}
bool same_bits(Real a, Real b) { return std::memcmp(&a, &b, sizeof(Real)) == 0; }

void expect_same_final_states(const MemorySink& a, const MemorySink& b, const std::string& what) {
  ASSERT_EQ(a.rows.size(), b.rows.size()) << what;
  for (std::size_t i = 0; i < a.rows.size(); ++i) {
    EXPECT_EQ(a.rows[i].id, b.rows[i].id) << what;
    EXPECT_TRUE(same_bits(a.rows[i].q, b.rows[i].q)) << what << ": q of trajectory " << i;
    EXPECT_TRUE(same_bits(a.rows[i].p, b.rows[i].p)) << what << ": p of trajectory " << i;
    EXPECT_EQ(a.rows[i].status, b.rows[i].status) << what;
  }
}

// Every column bitwise, the mean included: the mean is the in-order sum of
// per-chunk sums (observation_chunk trajectories each), and batches are whole
// chunks, so its summation order does not depend on batch size or threads.
void expect_same_timeseries(const RunResult& a, const RunResult& b, const std::string& what) {
  ASSERT_EQ(a.timeseries.size(), b.timeseries.size()) << what;
  for (std::size_t r = 0; r < a.timeseries.size(); ++r) {
    const TimeseriesRow &x = a.timeseries[r], &y = b.timeseries[r];
    EXPECT_EQ(x.step, y.step) << what;
    EXPECT_EQ(x.live, y.live) << what;
    EXPECT_TRUE(same_bits(x.time, y.time)) << what << " row " << r;
    EXPECT_TRUE(same_bits(x.mean_energy_error, y.mean_energy_error))
        << what << " row " << r << ": mean energy error " << x.mean_energy_error << " vs " << y.mean_energy_error;
    EXPECT_TRUE(same_bits(x.max_energy_error, y.max_energy_error)) << what << " row " << r;
    EXPECT_TRUE(same_bits(x.max_constraint_violation, y.max_constraint_violation)) << what << " row " << r;
    EXPECT_TRUE(same_bits(x.max_velocity_constraint_violation, y.max_velocity_constraint_violation))
        << what << " row " << r;
  }
  EXPECT_EQ(a.failed, b.failed) << what;
  EXPECT_TRUE(same_bits(a.newton_mean, b.newton_mean)) << what;
  EXPECT_EQ(a.newton_max, b.newton_max) << what;
}

// ---------------------------------------------------------------- reference vs cpu

struct CrossCase {
  std::string system;
  double dt;
  long steps, size;
};

class ReferenceVsCpu : public ::testing::TestWithParam<std::tuple<CrossCase, std::string>> {};

TEST_P(ReferenceVsCpu, FinalStatesAgree) {
  const auto& [c, method] = GetParam();
  json cfg = thermal_config(c.system, method, c.dt, c.steps, c.size, "reference", 21, c.system.starts_with("chain") ? 1.0 : 0.5);
  const Outcome ref = run_cfg(cfg);
  cfg["backend"] = "cpu";
  const Outcome cpu = run_cfg(cfg);
  EXPECT_EQ(ref.result.backend, "reference");
  EXPECT_EQ(cpu.result.backend, "cpu");

  expect_ids_complete(ref.sink, c.size);
  expect_ids_complete(cpu.sink, c.size);
  Real dq = 0, dp = 0;
  for (std::size_t i = 0; i < ref.sink.rows.size() && i < cpu.sink.rows.size(); ++i) {
    EXPECT_EQ(ref.sink.rows[i].status, Status::ok) << "reference, trajectory " << i;
    EXPECT_EQ(cpu.sink.rows[i].status, Status::ok) << "cpu, trajectory " << i;
    dq = std::max(dq, max_abs_diff(ref.sink.rows[i].q, cpu.sink.rows[i].q));
    dp = std::max(dp, max_abs_diff(ref.sink.rows[i].p, cpu.sink.rows[i].p));
  }
  EXPECT_LT(dq, 1e-10);
  EXPECT_LT(dp, 1e-10);
  EXPECT_EQ(ref.result.failed, 0);
  EXPECT_EQ(cpu.result.failed, 0);
  EXPECT_LT(ref.result.max_constraint_violation, 1e-12);
  EXPECT_LT(cpu.result.max_constraint_violation, 1e-12);
  // Both observe the same trajectories: the energy drift must agree too.
  EXPECT_NEAR(ref.result.max_relative_energy_error, cpu.result.max_relative_energy_error, 1e-9);
}

std::string cross_name(const ::testing::TestParamInfo<ReferenceVsCpu::ParamType>& info) {
  return std::get<0>(info.param).system + "_" + std::get<1>(info.param);
}

INSTANTIATE_TEST_SUITE_P(AllMethods, ReferenceVsCpu,
                         ::testing::Combine(::testing::Values(CrossCase{"spherical_pendulum", 0.01, 200, 8},
                                                              CrossCase{"double_pendulum", 0.005, 200, 8},
                                                              CrossCase{"chain4", 0.002, 80, 4},
                                                              // the reference backend is slow on chain16 (dense FD Jacobians)
                                                              CrossCase{"chain16", 0.002, 25, 2}),
                                            ::testing::Values("symplectic_euler_a", "symplectic_euler_b", "shake",
                                                              "rattle", "constrained_midpoint")),
                         cross_name);

// ---------------------------------------------------------------- determinism

// Runs cfg (n trajectories) on 1 thread, then on 2 threads whole and in each
// batching (with the batch starts it must show), and expects the very same
// bits each time. base receives the 1-thread outcome.
void expect_thread_and_batch_independence(const json& cfg, long n,
                                          const std::vector<std::pair<long, Starts>>& batchings, Outcome& base) {
  omp_set_num_threads(1);
  base = run_cfg(cfg);
  expect_ids_complete(base.sink, n);
  ASSERT_EQ(base.result.failed, 0);
  EXPECT_EQ(base.batch_starts, Starts{0});

  omp_set_num_threads(2);
  {
    const Outcome two = run_cfg(cfg);
    expect_same_final_states(base.sink, two.sink, "2 threads");
    expect_same_timeseries(base.result, two.result, "2 threads");
  }
  for (const auto& [batch, starts] : batchings) {
    json b = cfg;
    b["ensemble"]["batch_size"] = batch;
    const Outcome o = run_cfg(b);
    const std::string what = "batch_size " + std::to_string(batch);
    EXPECT_EQ(o.batch_starts, starts) << what;
    expect_same_final_states(base.sink, o.sink, what);
    expect_same_timeseries(base.result, o.result, what);
  }
}

class Determinism : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void TearDown() override { omp_set_num_threads(saved_threads_); }
  int saved_threads_ = omp_get_max_threads();
};

TEST_P(Determinism, ThreadCountAndBatchSizeDoNotChangeResults) {
  const auto& [system, method] = GetParam();
  // 600 trajectories: at least parallel_threshold, so in one batch two threads
  // really share the work; not a multiple of 64 or 128, so the last batch is partial.
  const long n = 600;
  ASSERT_GE(n, parallel_threshold);
  const bool chain = system.starts_with("chain");
  // chain16 is costly: fewer steps.
  json cfg = thermal_config(system, method, chain ? 0.002 : 0.01, chain ? 40 : 120, n, "cpu", 99, chain ? 1.0 : 0.5);
  cfg["output"]["every"] = chain ? 15 : 25;  // 0, 15, 30, 40 or 0, 25, ..., 100, 120

  // Batches of 64 and 128 run serially (below the threshold); in batches of
  // 512 the first is shared by both threads, the second is not.
  Outcome base;
  expect_thread_and_batch_independence(cfg, n,
                                       {{64, {0, 64, 128, 192, 256, 320, 384, 448, 512, 576}},
                                        {128, {0, 128, 256, 384, 512}},
                                        {512, {0, 512}},
                                        {1L << 20, {0}}},
                                       base);
}

INSTANTIATE_TEST_SUITE_P(Systems, Determinism,
                         ::testing::Values(std::tuple{"spherical_pendulum", "rattle"},
                                           std::tuple{"double_pendulum", "shake"},
                                           std::tuple{"chain16", "constrained_midpoint"}),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

// Many reduction chunks, and well above parallel_threshold: the parallel
// reduction must sum its chunks in a fixed order whatever the thread count.
// "auto" sends a small ensemble to the cpu backend whether or not a GPU is
// present; a backend asked for by name is used (or refused) as asked.
TEST(ResolveBackend, AutoKeepsSmallEnsemblesOnTheCpu) {
  for (const std::int64_t small : {std::int64_t(1), std::int64_t(32), auto_cuda_min_ensemble - 1})
    EXPECT_EQ(resolve_backend("auto", small), "cpu") << small;
  EXPECT_EQ(resolve_backend("auto", auto_cuda_min_ensemble), resolve_backend("auto"));
  // Shots cross over later than trajectories (a Newton solve per thread).
  static_assert(auto_cuda_min_shots > auto_cuda_min_ensemble);
  EXPECT_EQ(resolve_backend("auto", auto_cuda_min_shots - 1, auto_cuda_min_shots), "cpu");
  EXPECT_EQ(resolve_backend("auto", auto_cuda_min_shots, auto_cuda_min_shots), resolve_backend("auto"));
  EXPECT_EQ(resolve_backend("reference", 1), "reference");
  EXPECT_EQ(resolve_backend("cpu", std::int64_t(1) << 30), "cpu");
}

TEST(Determinism, LargeEnsembleReductionIndependentOfThreadCount) {
  const int saved = omp_get_max_threads();
  json cfg = thermal_config("spherical_pendulum", "symplectic_euler_a", 0.01, 20, 9001, "cpu", 17);
  cfg["output"]["every"] = 5;
  omp_set_num_threads(1);
  const Outcome one = run_cfg(cfg);
  omp_set_num_threads(2);
  const Outcome two = run_cfg(cfg);
  omp_set_num_threads(saved);
  expect_same_final_states(one.sink, two.sink, "9001 trajectories, 2 threads");
  expect_same_timeseries(one.result, two.result, "9001 trajectories, 2 threads");
}

// timeseries.csv must not change with --batch-size, the mean energy error to
// the last bit. Each batch's energy errors are summed per chunk of 64
// trajectories and the chunk sums are added in id order; were a batch to end
// inside a chunk, that chunk's sum would be split in two and the mean would
// move by an ulp or so.
TEST(Determinism, BatchSizeKeepsTimeseriesMeanBitwise) {
  // 250 = 3 * 64 + 58 = 128 + 122: several batches, the last one partial.
  json cfg = thermal_config("double_pendulum", "shake", 0.01, 120, 250, "cpu", 99);
  cfg["output"]["every"] = 25;
  const Outcome base = run_cfg(cfg);
  ASSERT_EQ(base.batch_starts, Starts{0});
  ASSERT_EQ(base.result.failed, 0);
  for (const auto& [batch, starts] : std::vector<std::pair<long, Starts>>{{64, {0, 64, 128, 192}}, {128, {0, 128}}}) {
    json b = cfg;
    b["ensemble"]["batch_size"] = batch;
    const Outcome split = run_cfg(b);
    const std::string what = "batch_size " + std::to_string(batch) + " vs one batch";
    EXPECT_EQ(split.batch_starts, starts) << what;
    expect_same_timeseries(base.result, split.result, what);
    expect_same_final_states(base.sink, split.sink, what);
  }
}

// To keep batches whole chunks, the runner rounds a batch size smaller than
// the ensemble up to a multiple of observation_chunk (64): batch_size 1 or 7
// runs exactly like 64, 100 like 128, and 199 (rounded to 256) in one batch.
TEST(Determinism, BatchSizeRoundsUpToWholeObservationChunks) {
  json cfg = thermal_config("spherical_pendulum", "rattle", 0.01, 20, 200, "cpu", 7);
  cfg["output"]["every"] = 5;
  cfg["ensemble"]["batch_size"] = 64;
  const Outcome by64 = run_cfg(cfg);
  ASSERT_EQ(by64.batch_starts, (Starts{0, 64, 128, 192}));
  const std::vector<std::pair<long, Starts>> rounded{
      {1, {0, 64, 128, 192}}, {7, {0, 64, 128, 192}}, {63, {0, 64, 128, 192}}, {65, {0, 128}},
      {100, {0, 128}},        {199, {0}},             {200, {0}}};
  for (const auto& [batch, starts] : rounded) {
    json b = cfg;
    b["ensemble"]["batch_size"] = batch;
    const Outcome o = run_cfg(b);
    const std::string what = "batch_size " + std::to_string(batch);
    EXPECT_EQ(o.batch_starts, starts) << what;
    expect_same_final_states(by64.sink, o.sink, what);
    expect_same_timeseries(by64.result, o.result, what);
  }
}

// The reference backend is serial, but it shares the batch loop.
TEST(Determinism, ReferenceBackendIndependentOfBatchSize) {
  // 130 = 2 * 64 + 2: three batches of 64, the last with 2 trajectories.
  json cfg = thermal_config("spherical_pendulum", "symplectic_euler_b", 0.01, 40, 130, "reference");
  cfg["output"]["every"] = 10;
  const Outcome base = run_cfg(cfg);
  ASSERT_EQ(base.batch_starts, Starts{0});
  ASSERT_EQ(base.result.failed, 0);
  cfg["ensemble"]["batch_size"] = 64;
  const Outcome split = run_cfg(cfg);
  EXPECT_EQ(split.batch_starts, (Starts{0, 64, 128}));
  expect_ids_complete(split.sink, 130);
  expect_same_final_states(base.sink, split.sink, "reference, batch_size 64");
  expect_same_timeseries(base.result, split.result, "reference, batch_size 64");
}

// ---------------------------------------------------------------- failures

// Spherical pendulum states on T*N (unit sphere, unit mass). With h = 0.05 a
// fast one (|p| = 40) is predicted h|p| = 2 off along the tangent, and no
// q + lambda q_old lies on the sphere: its first step has no solution at
// all, whatever the solver. Slow ones (|p| = 0.3) are routine.
json pendulum_state(double angle, double speed) {
  const double c = std::cos(angle), s = std::sin(angle);
  // q on the unit sphere, p horizontal and tangent (q . p = 0).
  return {{"q", {s, 0.0, -c}}, {"p", {0.0, speed, 0.0}}};
}

json states_config(const json& states, const std::string& method, double dt, long steps, int max_iterations,
                   const std::string& backend = "cpu") {
  return {{"system", {{"name", "spherical_pendulum"}}},
          {"method", {{"name", method}, {"dt", dt}, {"steps", steps}, {"newton", {{"max_iterations", max_iterations}}}}},
          {"ensemble", {{"initial", {{"states", states}}}}},
          {"output", {{"every", 10}}},
          {"backend", backend}};
}

class Failures : public ::testing::TestWithParam<std::string> {};

TEST_P(Failures, FailedTrajectoriesAreReportedKeptAndIsolated) {
  const std::string backend = GetParam();
  const std::vector<bool> fast{false, true, false, false, true, false, true, false};
  json states = json::array(), survivors = json::array();
  for (std::size_t i = 0; i < fast.size(); ++i) {
    const json s = pendulum_state(0.2 + 0.1 * double(i), fast[i] ? 40.0 : 0.3);
    states.push_back(s);
    if (!fast[i]) survivors.push_back(s);
  }
  const json cfg = states_config(states, "rattle", 0.05, 60, 50, backend);
  const Outcome mixed = run_cfg(cfg);
  const RunResult& r = mixed.result;

  // Never dropped: every id exactly once, in order.
  expect_ids_complete(mixed.sink, std::int64_t(fast.size()));
  std::int64_t expected_failed = 0;
  for (bool f : fast) expected_failed += f;
  EXPECT_EQ(r.failed, expected_failed);
  ASSERT_EQ(std::int64_t(r.failures.size()), expected_failed);
  std::set<std::int64_t> failed_ids;
  for (const Failure& f : r.failures) {
    failed_ids.insert(f.id);
    ASSERT_GE(f.id, 0);
    ASSERT_LT(f.id, std::int64_t(fast.size()));
    EXPECT_TRUE(fast[std::size_t(f.id)]) << "trajectory " << f.id << " should not fail";
    EXPECT_GT(f.step, 0) << "trajectory " << f.id;
    EXPECT_LE(f.step, 60);
    EXPECT_NE(f.reason, Status::ok);
    EXPECT_EQ(mixed.sink.rows[std::size_t(f.id)].status, f.reason);
    // The last good state is kept, and it is a real state.
    for (Real x : mixed.sink.rows[std::size_t(f.id)].q) EXPECT_TRUE(std::isfinite(x));
    for (Real x : mixed.sink.rows[std::size_t(f.id)].p) EXPECT_TRUE(std::isfinite(x));
  }
  EXPECT_EQ(std::int64_t(failed_ids.size()), expected_failed) << "each failure listed once";
  if (backend == "cpu") {
    for (const Failure& f : r.failures) EXPECT_EQ(f.reason, Status::newton_not_converged);
  }

  // Statistics over the live trajectories only: no NaN, and the live count drops.
  ASSERT_EQ(r.timeseries.size(), 7u);
  EXPECT_EQ(r.timeseries.front().live, std::int64_t(fast.size()));
  EXPECT_EQ(r.timeseries.back().live, std::int64_t(fast.size()) - expected_failed);
  for (const TimeseriesRow& t : r.timeseries) {
    EXPECT_TRUE(std::isfinite(t.mean_energy_error)) << "step " << t.step;
    EXPECT_TRUE(std::isfinite(t.max_energy_error)) << "step " << t.step;
    EXPECT_TRUE(std::isfinite(t.max_constraint_violation)) << "step " << t.step;
    EXPECT_TRUE(std::isfinite(t.max_velocity_constraint_violation)) << "step " << t.step;
    EXPECT_LT(t.max_constraint_violation, 1e-12) << "step " << t.step;
  }
  EXPECT_TRUE(std::isfinite(r.max_relative_energy_error));
  EXPECT_TRUE(std::isfinite(r.newton_mean));
  EXPECT_LT(r.max_constraint_violation, 1e-12);

  // The survivors are unaffected: same bits as a run where nothing fails.
  const Outcome clean = run_cfg(states_config(survivors, "rattle", 0.05, 60, 50, backend));
  EXPECT_EQ(clean.result.failed, 0);
  std::size_t k = 0;
  for (std::size_t i = 0; i < fast.size(); ++i) {
    if (fast[i]) continue;
    ASSERT_LT(k, clean.sink.rows.size());
    EXPECT_EQ(mixed.sink.rows[i].status, Status::ok);
    EXPECT_TRUE(same_bits(mixed.sink.rows[i].q, clean.sink.rows[k].q)) << "trajectory " << i;
    EXPECT_TRUE(same_bits(mixed.sink.rows[i].p, clean.sink.rows[k].p)) << "trajectory " << i;
    ++k;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Failures, ::testing::Values("cpu", "reference"));

// A huge step on a thermal ensemble: whatever fails is reported with a step,
// and the final states still list every trajectory.
TEST(Failures, CoarseStepOnThermalEnsemble) {
  // Hot double pendulums, a coarse step and 4 Newton iterations: about one in
  // seven of 200 fails (under the failure report cap of 100), in every batch of 64.
  const long n = 200;
  json cfg = thermal_config("double_pendulum", "constrained_midpoint", 0.03, 20, n, "cpu", 3, 5.0);
  cfg["method"]["newton"] = {{"max_iterations", 4}};
  cfg["output"]["every"] = 5;
  cfg["ensemble"]["batch_size"] = 64;
  const Outcome o = run_cfg(cfg);
  EXPECT_EQ(o.batch_starts, (Starts{0, 64, 128, 192}));
  expect_ids_complete(o.sink, n);
  EXPECT_GT(o.result.failed, 0) << "the step should be too large for some trajectories";
  EXPECT_LT(o.result.failed, n) << "the step should be fine for some trajectories";
  ASSERT_EQ(std::int64_t(o.result.failures.size()), o.result.failed);
  std::int64_t not_ok = 0;
  for (const auto& row : o.sink.rows) not_ok += row.status != Status::ok;
  EXPECT_EQ(not_ok, o.result.failed);
  std::set<std::int64_t> failing_batches, failing_steps;
  for (const Failure& f : o.result.failures) {
    EXPECT_GT(f.step, 0);
    EXPECT_LE(f.step, 20);
    EXPECT_EQ(o.sink.rows[std::size_t(f.id)].status, f.reason);
    failing_batches.insert(f.id / 64);
    failing_steps.insert(f.step);
  }
  EXPECT_GE(failing_batches.size(), 3u) << "failures should land in several batches";
  EXPECT_GE(failing_steps.size(), 2u) << "failures should happen at different steps";
  for (std::size_t i = 1; i < o.result.failures.size(); ++i)
    EXPECT_LT(o.result.failures[i - 1].id, o.result.failures[i].id) << "failures listed by id";
  // Failures are a property of the trajectory, not of the batching.
  for (const long batch : {128L, 1L << 20}) {
    json b = cfg;
    b["ensemble"]["batch_size"] = batch;
    const Outcome other = run_cfg(b);
    const std::string what = "failing ensemble, batch_size 64 vs " + std::to_string(batch);
    EXPECT_EQ(other.batch_starts, batch == 128 ? (Starts{0, 128}) : (Starts{0})) << what;
    expect_same_final_states(o.sink, other.sink, what);
    expect_same_timeseries(o.result, other.result, what);
    ASSERT_EQ(other.result.failures.size(), o.result.failures.size()) << what;
    for (std::size_t i = 0; i < o.result.failures.size(); ++i) {
      EXPECT_EQ(other.result.failures[i].id, o.result.failures[i].id) << what;
      EXPECT_EQ(other.result.failures[i].step, o.result.failures[i].step) << what;
      EXPECT_EQ(other.result.failures[i].reason, o.result.failures[i].reason) << what;
    }
  }
  for (const TimeseriesRow& t : o.result.timeseries) {
    EXPECT_TRUE(std::isfinite(t.mean_energy_error));
    EXPECT_TRUE(std::isfinite(t.max_energy_error));
    EXPECT_TRUE(std::isfinite(t.max_constraint_violation));
    EXPECT_TRUE(std::isfinite(t.max_velocity_constraint_violation));
  }
  EXPECT_EQ(o.result.timeseries.back().live, n - o.result.failed);
}

// The failure list is capped, the count is not.
TEST(Failures, ReportCapLimitsListNotCount) {
  json states = json::array();
  for (int i = 0; i < 6; ++i) states.push_back(pendulum_state(0.3, 40.0));
  MemorySink sink;
  RunOptions opt;
  opt.final_states = &sink;
  opt.failure_report_cap = 2;
  const RunResult r = run(parse_config(states_config(states, "rattle", 0.05, 10, 50).dump(), "test"), opt);
  EXPECT_EQ(r.failed, 6);
  ASSERT_EQ(r.failures.size(), 2u);
  EXPECT_EQ(r.failures[0].id, 0);
  EXPECT_EQ(r.failures[1].id, 1);
  // All failed: the statistics have no live trajectory to average, and must not divide by zero.
  for (const TimeseriesRow& t : r.timeseries) EXPECT_TRUE(std::isfinite(t.mean_energy_error));
  EXPECT_EQ(r.timeseries.back().live, 0);
}

// A failed trajectory keeps its last good state bit for bit: for a failure
// at step f, the state a run of f - 1 steps ends in. RATTLE's failed step
// leaves the state as it was; a composition's moves it part-way (its
// substeps go in place) and the ensemble loop replays the launch's good
// steps. From near the top of the sphere the pendulum falls and speeds up
// until a step predicts a point that no projection reaches: for the triple
// jump, its middle substep of 1.70 dt first.
class LastGoodState : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(LastGoodState, IsTheStateBeforeTheFailedStep) {
  const auto& [backend, method] = GetParam();
  const bool composition = method == "composition";
  json states = json::array();
  for (int k = 0; k < 16; ++k) states.push_back(pendulum_state(2.8, composition ? 11.0 + 0.05 * k : 19.4 + 0.035 * k));
  const auto config = [&](const json& which, long steps) {
    json cfg = states_config(which, method, 0.05, steps, 50, backend);
    if (composition) cfg["method"].update({{"base", "rattle"}, {"scheme", "triple_jump"}});
    cfg["output"]["every"] = 2;  // launches of 2 steps: a replay starts at the failed launch's start
    return cfg;
  };
  const Outcome o = run_cfg(config(states, 7));
  ASSERT_EQ(o.result.failed, 16) << "every trajectory should fail within 7 steps";
  std::set<std::int64_t> steps;
  for (const Failure& f : o.result.failures) {
    ASSERT_GE(f.step, 2) << "trajectory " << f.id << " should take a good step first";
    steps.insert(f.step);
    const Outcome before = run_cfg(config(json::array({states[std::size_t(f.id)]}), f.step - 1));
    ASSERT_EQ(before.result.failed, 0);
    const auto& kept = o.sink.rows[std::size_t(f.id)];
    EXPECT_TRUE(same_bits(kept.q, before.sink.rows[0].q)) << "q of trajectory " << f.id << ", failed at step " << f.step;
    EXPECT_TRUE(same_bits(kept.p, before.sink.rows[0].p)) << "p of trajectory " << f.id << ", failed at step " << f.step;
  }
  EXPECT_GE(steps.size(), 2u) << "failures should come at different steps";
}

INSTANTIATE_TEST_SUITE_P(Backends, LastGoodState,
                         ::testing::Combine(::testing::Values("cpu", "reference"),
                                            ::testing::Values("rattle", "composition")),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

// The same for chains on the cpu, whose RATTLE and its compositions step in
// tiles there (a lockstep group of cpu_lanes trajectories, a failed one
// replaced by a ghost): a composition's failed tile step leaves its start,
// with no replay. Thermal chains, Newton cut at 3 iterations: 10 of 24 fail
// by RATTLE (dt 0.04), 11 by the triple jump (dt 0.025), at steps 1-12. (The
// reference backend's dense Newton needs more than 3 iterations: the
// pendula above test its replay.)
class ChainLastGoodState : public ::testing::TestWithParam<std::string> {};

TEST_P(ChainLastGoodState, IsTheStateBeforeTheFailedStep) {
  const std::string backend = "cpu", method = GetParam();
  const auto config = [&](long steps) {
    json cfg = {{"system",
                 {{"name", "chain"},
                  {"parameters",
                   {{"beads", 8}, {"bend_stiffness", 60.0}, {"bend_angle_degrees", 112.0},
                    {"torsion", {1.116, 1.462, -1.578, -0.368, 3.156, -3.788}}}}}},
                {"method", {{"name", method}, {"dt", method == "rattle" ? 0.04 : 0.025}, {"steps", steps}, {"newton", {{"tolerance", 1e-13}, {"max_iterations", 3}}}}},
                {"ensemble", {{"size", 24}, {"seed", 11}, {"initial", {{"sampler", "thermal"}, {"temperature", 2.0}}}}},
                {"output", {{"every", 2}}},
                {"backend", backend}};
    if (method == "composition") cfg["method"].update({{"base", "rattle"}, {"scheme", "triple_jump"}});
    return cfg;
  };
  const Outcome start = run_cfg(config(0));
  const Outcome o = run_cfg(config(12));
  ASSERT_GE(o.result.failed, 4) << "the config was meant to fail part of the ensemble";
  ASSERT_LT(o.result.failed, 24);
  std::set<std::int64_t> steps;
  for (const Failure& f : o.result.failures) {
    steps.insert(f.step);
    json alone = config(f.step - 1);
    const auto& s = start.sink.rows[std::size_t(f.id)];
    alone["ensemble"] = {{"initial", {{"states", json::array({{{"q", s.q}, {"p", s.p}}})}}}};
    const Outcome before = run_cfg(alone);
    ASSERT_EQ(before.result.failed, 0);
    const auto& kept = o.sink.rows[std::size_t(f.id)];
    EXPECT_TRUE(same_bits(kept.q, before.sink.rows[0].q)) << "q of trajectory " << f.id << ", failed at step " << f.step;
    EXPECT_TRUE(same_bits(kept.p, before.sink.rows[0].p)) << "p of trajectory " << f.id << ", failed at step " << f.step;
  }
  EXPECT_GE(steps.size(), 2u) << "failures should come at different steps";
}

INSTANTIATE_TEST_SUITE_P(Cpu, ChainLastGoodState, ::testing::Values("rattle", "composition"));

// ---------------------------------------------------------------- explicit states

json on_manifold_states() {
  return json::array({{{"q", {1.0, 0.0, 0.0}}, {"p", {0.0, 1.0, 0.0}}},
                      {{"q", {0.0, 0.6, -0.8}}, {"p", {0.5, 0.0, 0.0}}},
                      {{"q", {0.0, 0.0, -1.0}}, {"p", {1.0, 1.0, 0.0}}}});
}

// Runs a config expected to be rejected; returns the ConfigError's path.
std::string rejected_path(const json& cfg) {
  const RunConfig c = parse_config(cfg.dump(), "test");
  try {
    check_config(c);
  } catch (const ConfigError& e) {
    // run() must reject it the same way, not integrate it.
    try {
      run(c, RunOptions{});
      ADD_FAILURE() << "run() accepted what check_config rejected";
    } catch (const ConfigError& e2) {
      EXPECT_EQ(e2.path(), e.path());
    }
    return e.path();
  }
  ADD_FAILURE() << "check_config accepted " << cfg.dump();
  return "";
}

TEST(ExplicitStates, OnManifoldStatesAreAcceptedAsGiven) {
  json cfg = states_config(on_manifold_states(), "shake", 0.01, 0, 50);
  const Outcome o = run_cfg(cfg);
  expect_ids_complete(o.sink, 3);
  EXPECT_EQ(o.result.trajectories, 3);
  EXPECT_EQ(o.result.projected_states, 0);
  EXPECT_EQ(o.result.max_projection_distance, 0);
  // steps = 0: final states are the given states, bit for bit.
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(o.sink.rows[i].q, on_manifold_states()[i]["q"].get<std::vector<Real>>());
    EXPECT_EQ(o.sink.rows[i].p, on_manifold_states()[i]["p"].get<std::vector<Real>>());
  }
  cfg["method"]["steps"] = 100;
  const Outcome moved = run_cfg(cfg);
  EXPECT_EQ(moved.result.failed, 0);
  EXPECT_LT(moved.result.max_constraint_violation, 1e-12);
}

TEST(ExplicitStates, OffManifoldPositionRejectedWithPath) {
  json states = on_manifold_states();
  states[2]["q"] = {0.0, 0.0, -1.1};
  EXPECT_EQ(rejected_path(states_config(states, "rattle", 0.01, 10, 50)), "ensemble.initial.states[2].q");
}

TEST(ExplicitStates, OffTangentMomentumRejectedWithPath) {
  json states = on_manifold_states();
  states[1]["p"] = {0.5, 0.1, 0.0};  // q . p = 0.06
  EXPECT_EQ(rejected_path(states_config(states, "rattle", 0.01, 10, 50)), "ensemble.initial.states[1].p");
}

TEST(ExplicitStates, WrongDimensionRejectedWithPath) {
  json states = on_manifold_states();
  states[1]["q"] = {0.0, 1.0};
  EXPECT_EQ(rejected_path(states_config(states, "rattle", 0.01, 10, 50)), "ensemble.initial.states[1].q");
  states = on_manifold_states();
  states[0]["p"] = {0.0, 1.0, 0.0, 0.0};
  EXPECT_EQ(rejected_path(states_config(states, "rattle", 0.01, 10, 50)), "ensemble.initial.states[0].p");
  // Dimensions are checked even when projection is asked for.
  states = on_manifold_states();
  states[2]["q"] = {1.0};
  json cfg = states_config(states, "rattle", 0.01, 10, 50);
  cfg["ensemble"]["initial"]["project"] = true;
  EXPECT_EQ(rejected_path(cfg), "ensemble.initial.states[2].q");
}

TEST(ExplicitStates, ProjectMovesStatesOntoTheManifold) {
  json states = on_manifold_states();
  states[0] = {{"q", {1.2, 0.1, 0.0}}, {"p", {0.3, 1.0, 0.0}}};  // off in q and p
  states[2]["q"] = {0.0, 0.0, -0.9};                             // off in q only
  json cfg = states_config(states, "rattle", 0.01, 0, 50);
  cfg["ensemble"]["initial"]["project"] = true;
  const Outcome start = run_cfg(cfg);
  EXPECT_EQ(start.result.failed, 0);
  EXPECT_GE(start.result.projected_states, 2);
  EXPECT_LE(start.result.projected_states, 3);
  EXPECT_GT(start.result.max_projection_distance, 0.05);  // state 0 moved ~0.2 in q
  EXPECT_LT(start.result.max_projection_distance, 1.0);
  SphericalPendulum sys;
  for (const auto& row : start.sink.rows) {
    const Vec<3> q(row.q[0], row.q[1], row.q[2]), p(row.p[0], row.p[1], row.p[2]);
    EXPECT_LT(std::abs(sys.constraints(q)[0]), 1e-12) << "trajectory " << row.id;
    EXPECT_LT(std::abs(sys.constraint_jacobian_times(q, p)[0]), 1e-12) << "trajectory " << row.id;
  }
  // The on-manifold state is (at most negligibly) moved.
  EXPECT_LT(max_abs_diff(start.sink.rows[1].q, {0.0, 0.6, -0.8}), 1e-12);

  cfg["method"]["steps"] = 200;
  const Outcome o = run_cfg(cfg);
  EXPECT_EQ(o.result.failed, 0);
  EXPECT_LT(o.result.max_constraint_violation, 1e-12);
  EXPECT_LT(o.result.max_velocity_constraint_violation, 1e-12);
}

// A state projection cannot fix (q = 0: no direction to project along) is
// refused at its path before anything runs, not kept as a trajectory failed
// at step 0 beside statistics that leave it out.
TEST(ExplicitStates, UnprojectableStateIsRefusedAtItsPath) {
  json states = on_manifold_states();
  states[1] = {{"q", {0.0, 0.0, 0.0}}, {"p", {0.0, 1.0, 0.0}}};
  json cfg = states_config(states, "rattle", 0.01, 20, 50);
  cfg["ensemble"]["initial"]["project"] = true;
  EXPECT_EQ(rejected_path(cfg), "ensemble.initial.states[1]");
}

TEST(ExplicitStates, SizeMustMatchTheStateList) {
  json cfg = states_config(on_manifold_states(), "rattle", 0.01, 10, 50);
  cfg["ensemble"]["size"] = 4;
  try {
    parse_config(cfg.dump(), "test");
    ADD_FAILURE() << "size 4 with 3 states accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "ensemble.size");
  }
}

// ---------------------------------------------------------------- samplers

json around_config(long seed) {
  return {{"system", system_json("double_pendulum")},
          {"method", {{"name", "constrained_midpoint"}, {"dt", 0.005}, {"steps", 0}}},
          {"ensemble",
           {{"size", 40},
            {"seed", seed},
            {"initial",
             {{"sampler", "around"},
              {"q", {0.0, -1.0, 1.0, -1.0}},
              {"p", {0.0, 0.0, 0.0, 0.0}},
              {"position_spread", 0.05},
              {"momentum_spread", 0.1}}}}},
          {"backend", "cpu"}};
}

TEST(Samplers, AroundSamplerStatesLieOnTheCotangentBundle) {
  const Outcome o = run_cfg(around_config(3));
  expect_ids_complete(o.sink, 40);
  DoublePendulum sys;
  Real spread = 0;
  for (const auto& row : o.sink.rows) {
    EXPECT_EQ(row.status, Status::ok);
    const Vec<4> q(row.q[0], row.q[1], row.q[2], row.q[3]), p(row.p[0], row.p[1], row.p[2], row.p[3]);
    EXPECT_LT(max_abs(sys.constraints(q)), 1e-12) << "trajectory " << row.id;
    EXPECT_LT(max_abs(sys.constraint_jacobian_times(q, sys.inverse_mass_times(p))), 1e-12) << "trajectory " << row.id;
    // A cloud about the centre, not the centre itself.
    EXPECT_LT(max_abs_diff(row.q, {0.0, -1.0, 1.0, -1.0}), 0.5);
    spread = std::max(spread, max_abs_diff(row.p, {0, 0, 0, 0}));
  }
  EXPECT_GT(spread, 0.01);
  // steps = 0: the one timeseries row is the initial observation.
  ASSERT_EQ(o.result.timeseries.size(), 1u);
  EXPECT_LT(o.result.timeseries[0].max_constraint_violation, 1e-12);
}

TEST(Samplers, SeedSelectsTheEnsembleReproducibly) {
  const Outcome a = run_cfg(around_config(3)), again = run_cfg(around_config(3)), b = run_cfg(around_config(4));
  expect_same_final_states(a.sink, again.sink, "same seed");
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.sink.rows.size(); ++i) differ += !same_bits(a.sink.rows[i].q, b.sink.rows[i].q);
  EXPECT_EQ(differ, a.sink.rows.size()) << "a new seed must give every trajectory a new state";

  // Trajectories differ from each other within one ensemble too.
  EXPECT_FALSE(same_bits(a.sink.rows[0].q, a.sink.rows[1].q));

  // The thermal sampler likewise.
  const json t = thermal_config("chain4", "rattle", 0.002, 0, 10, "cpu", 8, 1.0);
  json t2 = t;
  t2["ensemble"]["seed"] = 9;
  const Outcome x = run_cfg(t), y = run_cfg(t), z = run_cfg(t2);
  expect_same_final_states(x.sink, y.sink, "thermal, same seed");
  EXPECT_FALSE(same_bits(x.sink.rows[0].q, z.sink.rows[0].q));
  EXPECT_FALSE(same_bits(x.sink.rows[0].p, z.sink.rows[0].p));
}

// ---------------------------------------------------------------- timeseries

std::vector<std::int64_t> timeseries_steps(long steps, long every) {
  json cfg = thermal_config("spherical_pendulum", "rattle", 0.01, steps, 3);
  if (every > 0)
    cfg["output"]["every"] = every;
  else
    cfg.erase("output");
  const RunResult r = run_json(cfg.dump());
  std::vector<std::int64_t> out;
  for (const auto& t : r.timeseries) {
    EXPECT_DOUBLE_EQ(t.time, double(t.step) * 0.01);
    EXPECT_EQ(t.live, 3);
    out.push_back(t.step);
  }
  return out;
}

TEST(Timeseries, RowsAtEveryOutputStepAndTheLastStep) {
  using V = std::vector<std::int64_t>;
  EXPECT_EQ(timeseries_steps(30, 10), (V{0, 10, 20, 30}));
  EXPECT_EQ(timeseries_steps(25, 10), (V{0, 10, 20, 25}));  // last partial interval
  EXPECT_EQ(timeseries_steps(7, 10), (V{0, 7}));
  EXPECT_EQ(timeseries_steps(5, 1), (V{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(timeseries_steps(0, 10), (V{0}));
  // Default: every steps/100.
  const V d = timeseries_steps(250, 0);
  ASSERT_EQ(d.size(), 126u);
  EXPECT_EQ(d[1], 2);
  EXPECT_EQ(d.back(), 250);
}

TEST(Timeseries, SummaryMaximaAreTheTimeseriesMaxima) {
  json cfg = thermal_config("double_pendulum", "shake", 0.01, 50, 8);
  cfg["output"]["every"] = 7;
  const RunResult r = run_json(cfg.dump());
  Real e = 0, g = 0, v = 0;
  for (const auto& t : r.timeseries) {
    e = std::max(e, t.max_energy_error);
    g = std::max(g, t.max_constraint_violation);
    v = std::max(v, t.max_velocity_constraint_violation);
    EXPECT_LE(t.mean_energy_error, t.max_energy_error);
  }
  EXPECT_EQ(r.max_relative_energy_error, e);
  EXPECT_EQ(r.max_constraint_violation, g);
  EXPECT_EQ(r.max_velocity_constraint_violation, v);
  EXPECT_EQ(r.timeseries.front().max_energy_error, 0);  // nothing has moved yet
}


// A run handed a TimeseriesSink: each row as it arrives, and how many had
// arrived at each progress report (progress comes between launches, and
// launches stop at every output step).
struct StreamedRun {
  struct Rows final : TimeseriesSink {
    std::vector<TimeseriesRow> rows;
    void row(const TimeseriesRow& t) override { rows.push_back(t); }
  } sink;
  std::vector<std::size_t> arrived;  // rows in the sink at each progress report
  RunResult result;
};

StreamedRun run_streamed(const json& cfg) {
  StreamedRun o;
  RunOptions opt;
  opt.timeseries = &o.sink;
  opt.progress = [&o](double, double) { o.arrived.push_back(o.sink.rows.size()); };
  o.result = run(parse_config(cfg.dump(), "test"), opt);
  return o;
}

// One batch streams its timeseries: every row reaches the sink as soon as it
// is observed (row 0 before the first launch ends, all but the last before
// the last one), none is kept in the result, and the rows are bit for bit
// those of a run that keeps them. Several batches add to every row, so
// theirs arrive only at the end, the same bits again.
TEST(Timeseries, OneBatchStreamsItsRowsAsTheyAreObserved) {
  json cfg = thermal_config("double_pendulum", "shake", 0.01, 120, 250, "cpu", 99);
  cfg["output"]["every"] = 5;
  const RunResult kept = run_json(cfg.dump());
  ASSERT_EQ(kept.timeseries.size(), 25u);

  const StreamedRun one = run_streamed(cfg);
  EXPECT_TRUE(one.result.timeseries.empty());
  ASSERT_FALSE(one.arrived.empty());
  EXPECT_EQ(one.arrived.front(), 1u);
  EXPECT_EQ(one.arrived.back(), 24u);
  EXPECT_TRUE(std::is_sorted(one.arrived.begin(), one.arrived.end()));
  RunResult streamed = one.result;
  streamed.timeseries = one.sink.rows;
  expect_same_timeseries(kept, streamed, "one batch, streamed");
  EXPECT_TRUE(same_bits(kept.max_relative_energy_error, one.result.max_relative_energy_error));
  EXPECT_TRUE(same_bits(kept.max_constraint_violation, one.result.max_constraint_violation));
  EXPECT_TRUE(same_bits(kept.max_velocity_constraint_violation, one.result.max_velocity_constraint_violation));

  cfg["ensemble"]["batch_size"] = 64;
  const StreamedRun four = run_streamed(cfg);
  EXPECT_TRUE(four.result.timeseries.empty());
  ASSERT_FALSE(four.arrived.empty());
  EXPECT_EQ(four.arrived.back(), 0u) << "a row is complete only after the last batch";
  RunResult batched = four.result;
  batched.timeseries = four.sink.rows;
  expect_same_timeseries(kept, batched, "four batches, rows at the end");
}


// ---------------------------------------------------------------- nonholonomic family

// A nonholonomic system's config block; parameters off their defaults where a
// system has them, so that they are seen to reach the integrator.
json nonholonomic_system_json(const std::string& name) {
  if (name == "martinet" || name == "martinet_lagrangian") return {{"name", name}, {"parameters", {{"beta", 0.5}}}};
  if (name == "parallel_parking")
    return {{"name", name}, {"parameters", {{"length", 0.3}, {"alpha", 1.5}, {"beta", 0.8}, {"potential", "bowl"}}}};
  return {{"name", name}};
}

// A state of each system to sample "around": generic (no coordinate zero, so
// no term of H vanishes), away from singularities (1 + beta x > 0).
std::pair<std::vector<Real>, std::vector<Real>> nonholonomic_center(const std::string& name) {
  if (name == "parallel_parking") return {{0.3, 0.1, 0.2, 1.5707963267948966}, {0.2, -0.1, 1.09, 1.0}};
  return {{0.2, -0.3, 0.1}, {0.6, 0.4, -0.5}};
}

// method: "gauss_legendre1".."gauss_legendre3", "symplectic_euler", "stormer_verlet".
json nonholonomic_method_json(const std::string& method, double dt, long steps) {
  json m = {{"dt", dt}, {"steps", steps}};
  if (method.starts_with("gauss_legendre")) {
    m["name"] = "gauss_legendre";
    m["stages"] = std::stoi(method.substr(std::string("gauss_legendre").size()));
  } else {
    m["name"] = method;
  }
  return m;
}

json nonholonomic_config(const std::string& system, const std::string& method, double dt, long steps, long size,
                         const std::string& backend = "cpu", long seed = 7) {
  const auto [q, p] = nonholonomic_center(system);
  return {{"system", nonholonomic_system_json(system)},
          {"method", nonholonomic_method_json(method, dt, steps)},
          {"ensemble",
           {{"size", size},
            {"seed", seed},
            {"initial",
             {{"sampler", "around"}, {"q", q}, {"p", p}, {"position_spread", 0.1}, {"momentum_spread", 0.1}}}}},
          {"output", {{"every", std::max(1L, steps / 4)}}},
          {"backend", backend}};
}

const std::vector<std::string> nonholonomic_systems{"heisenberg", "heisenberg_vakonomic", "martinet",
                                                    "martinet_lagrangian", "parallel_parking"};
const std::vector<std::string> nonholonomic_methods{"gauss_legendre1", "gauss_legendre2", "gauss_legendre3",
                                                    "symplectic_euler", "stormer_verlet"};

bool canonical_form(const std::string& system) { return system == "heisenberg" || system == "martinet"; }

class NonholonomicReferenceVsCpu : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

// The reference backend solves each method's residual with a finite-difference
// Jacobian and a chord Newton; cpu uses exact dual-number Jacobians. Both
// converge to roundoff, so the trajectories agree far below the method's error.
TEST_P(NonholonomicReferenceVsCpu, FinalStatesAgree) {
  const auto& [system, method] = GetParam();
  const long size = 12, steps = 30;
  json cfg = nonholonomic_config(system, method, 0.05, steps, size, "reference", 21);
  const Outcome ref = run_cfg(cfg);
  cfg["backend"] = "cpu";
  const Outcome cpu = run_cfg(cfg);
  EXPECT_EQ(ref.result.backend, "reference");
  EXPECT_EQ(cpu.result.backend, "cpu");
  for (const Outcome* o : {&ref, &cpu}) {
    EXPECT_EQ(o->result.family, "nonholonomic");
    EXPECT_EQ(o->result.stages, method.starts_with("gauss_legendre") ? method.back() - '0' : 0);
  }

  expect_ids_complete(ref.sink, size);
  expect_ids_complete(cpu.sink, size);
  Real dq = 0, dp = 0, moved = 0;
  const auto [q0, p0] = nonholonomic_center(system);
  for (std::size_t i = 0; i < ref.sink.rows.size() && i < cpu.sink.rows.size(); ++i) {
    EXPECT_EQ(ref.sink.rows[i].status, Status::ok) << "reference, trajectory " << i;
    EXPECT_EQ(cpu.sink.rows[i].status, Status::ok) << "cpu, trajectory " << i;
    dq = std::max(dq, max_abs_diff(ref.sink.rows[i].q, cpu.sink.rows[i].q));
    dp = std::max(dp, max_abs_diff(ref.sink.rows[i].p, cpu.sink.rows[i].p));
    moved = std::max(moved, max_abs_diff(cpu.sink.rows[i].q, q0));
    for (Real x : cpu.sink.rows[i].q) EXPECT_TRUE(std::isfinite(x));
    for (Real x : cpu.sink.rows[i].p) EXPECT_TRUE(std::isfinite(x));
  }
  EXPECT_LE(dq, 1e-11);
  EXPECT_LE(dp, 1e-11);
  // Agreement of trajectories that went somewhere (t = 1.5 at speed ~1).
  EXPECT_GT(moved, 0.3) << "the ensemble hardly moved";
  EXPECT_EQ(ref.result.failed, 0);
  EXPECT_EQ(cpu.result.failed, 0);
  EXPECT_EQ(ref.result.max_constraint_violation, 0);
  EXPECT_EQ(cpu.result.max_constraint_violation, 0);
  // Both observe the same trajectories with the same observer.
  EXPECT_NEAR(ref.result.max_relative_energy_error, cpu.result.max_relative_energy_error, 1e-9);
  EXPECT_NEAR(ref.result.max_velocity_constraint_violation, cpu.result.max_velocity_constraint_violation, 1e-12);
  EXPECT_LE(ref.result.max_velocity_constraint_violation, 1e-12);
  EXPECT_LE(cpu.result.max_velocity_constraint_violation, 1e-12);
  ASSERT_EQ(ref.result.timeseries.size(), cpu.result.timeseries.size());
  for (std::size_t r = 0; r < ref.result.timeseries.size(); ++r) {
    EXPECT_EQ(ref.result.timeseries[r].live, size);
    EXPECT_NEAR(ref.result.timeseries[r].mean_energy_error, cpu.result.timeseries[r].mean_energy_error, 1e-9)
        << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(AllMethods, NonholonomicReferenceVsCpu,
                         ::testing::Combine(::testing::ValuesIn(nonholonomic_systems),
                                            ::testing::ValuesIn(nonholonomic_methods)),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

class NonholonomicDeterminism : public Determinism {};

TEST_P(NonholonomicDeterminism, ThreadCountAndBatchSizeDoNotChangeResults) {
  const auto& [system, method] = GetParam();
  const long n = 600;  // >= parallel_threshold, not a multiple of 64 or 128
  ASSERT_GE(n, parallel_threshold);
  // Few steps: the dual-number Hessians make these steps costly.
  json cfg = nonholonomic_config(system, method, 0.05, 20, n, "cpu", 99);
  cfg["output"]["every"] = 8;  // 0, 8, 16, 20

  Outcome base;
  expect_thread_and_batch_independence(
      cfg, n, {{64, {0, 64, 128, 192, 256, 320, 384, 448, 512, 576}}, {128, {0, 128, 256, 384, 512}}, {512, {0, 512}}},
      base);
  if (HasFatalFailure()) return;
  // Not the trivial case: trajectories differ from each other.
  EXPECT_FALSE(same_bits(base.sink.rows[0].q, base.sink.rows[1].q));
}

INSTANTIATE_TEST_SUITE_P(Systems, NonholonomicDeterminism,
                         ::testing::Values(std::tuple{"parallel_parking", "gauss_legendre1"},
                                           std::tuple{"heisenberg_vakonomic", "gauss_legendre3"},
                                           std::tuple{"martinet_lagrangian", "stormer_verlet"},
                                           std::tuple{"martinet", "symplectic_euler"}),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

// The original constraints g_i(q) . qdot = 0 hold along every trajectory
// (MMVW13 Corollary 5): for form-1 systems the observer measures them and
// finds roundoff; canonical systems have no constraint rows and report 0.
class NonholonomicVelocityConstraint : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(NonholonomicVelocityConstraint, HoldsAlongTheRun) {
  const auto& [system, method] = GetParam();
  json cfg = nonholonomic_config(system, method, 0.02, 100, 32, "cpu", 4);
  cfg["output"]["every"] = 10;
  const RunResult r = run_json(cfg.dump());
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.family, "nonholonomic");
  EXPECT_EQ(r.max_constraint_violation, 0) << "no position constraints in this family";
  ASSERT_EQ(r.timeseries.size(), 11u);
  for (const TimeseriesRow& t : r.timeseries) {
    EXPECT_EQ(t.live, 32);
    EXPECT_EQ(t.max_constraint_violation, 0) << "step " << t.step;
    EXPECT_GE(t.max_velocity_constraint_violation, 0) << "step " << t.step;
    if (canonical_form(system))
      EXPECT_EQ(t.max_velocity_constraint_violation, 0) << "step " << t.step;
    else
      EXPECT_LE(t.max_velocity_constraint_violation, 1e-12) << "step " << t.step;
    EXPECT_TRUE(std::isfinite(t.max_energy_error)) << "step " << t.step;
  }
  if (canonical_form(system))
    EXPECT_EQ(r.max_velocity_constraint_violation, 0);
  else
    EXPECT_LE(r.max_velocity_constraint_violation, 1e-12);
}

INSTANTIATE_TEST_SUITE_P(AllMethods, NonholonomicVelocityConstraint,
                         ::testing::Combine(::testing::ValuesIn(nonholonomic_systems),
                                            ::testing::ValuesIn(nonholonomic_methods)),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });


// A state at a singularity of the metric (Martinet: 1 + beta x = 0, where the
// frame field X2 = d/dy / (1 + beta x) blows up) has no finite energy. It may
// be rejected as bad input, or fail as a trajectory; either way it must not
// count as live and bring NaN or infinity into the ensemble statistics.
class NonholonomicSingularState : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(NonholonomicSingularState, IsRejectedOrFailsWithoutPoisoningStatistics) {
  const auto& [system, backend] = GetParam();
  const json states = json::array({{{"q", {0.5, 0.0, 0.0}}, {"p", {1.0, 1.0, 0.0}}},    // beta = -2: 1 + beta x = 0
                                   {{"q", {0.1, 0.0, 0.0}}, {"p", {1.0, 1.0, 0.0}}}});  // regular
  const json cfg = {{"system", {{"name", system}, {"parameters", {{"beta", -2.0}}}}},
                    {"method", {{"name", "gauss_legendre"}, {"stages", 2}, {"dt", 0.02}, {"steps", 10}}},
                    {"ensemble", {{"initial", {{"states", states}}}}},
                    {"output", {{"every", 5}}},
                    {"backend", backend}};
  Outcome o;
  try {
    o = run_cfg(cfg);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path().rfind("ensemble.initial.states[0]", 0), 0u) << e.what();
    return;
  }
  expect_ids_complete(o.sink, 2);
  EXPECT_EQ(o.result.failed, 1);
  EXPECT_NE(o.sink.rows[0].status, Status::ok);
  EXPECT_EQ(o.sink.rows[1].status, Status::ok);
  ASSERT_EQ(o.result.timeseries.size(), 3u);
  for (const TimeseriesRow& t : o.result.timeseries) {
    EXPECT_EQ(t.live, 1) << "step " << t.step << ": the singular state is not a live trajectory";
    EXPECT_TRUE(std::isfinite(t.mean_energy_error)) << "step " << t.step << ": " << t.mean_energy_error;
    EXPECT_TRUE(std::isfinite(t.max_energy_error)) << "step " << t.step;
    EXPECT_TRUE(std::isfinite(t.max_velocity_constraint_violation))
        << "step " << t.step << ": " << t.max_velocity_constraint_violation;
  }
  EXPECT_TRUE(std::isfinite(o.result.max_relative_energy_error));
  EXPECT_TRUE(std::isfinite(o.result.max_velocity_constraint_violation)) << o.result.max_velocity_constraint_violation;
}

INSTANTIATE_TEST_SUITE_P(Martinet, NonholonomicSingularState,
                         ::testing::Combine(::testing::Values("martinet", "martinet_lagrangian"),
                                            ::testing::Values("cpu", "reference")),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

// The system parameters reach the integrator: changing any one of them
// changes the trajectories.
TEST(NonholonomicParameters, EachParameterChangesTheFinalStates) {
  auto finals = [](const std::string& system, const json& parameters) {
    json cfg = nonholonomic_config(system, "gauss_legendre2", 0.05, 20, 4, "cpu", 3);
    cfg["system"]["parameters"] = parameters;
    const Outcome o = run_cfg(cfg);
    EXPECT_EQ(o.result.failed, 0) << system << " " << parameters.dump();
    return o.sink;
  };
  auto differ = [](const MemorySink& a, const MemorySink& b) {
    if (a.rows.size() != b.rows.size()) return true;
    for (std::size_t i = 0; i < a.rows.size(); ++i)
      if (max_abs_diff(a.rows[i].q, b.rows[i].q) > 1e-6) return true;
    return false;
  };
  for (const char* system : {"martinet", "martinet_lagrangian"}) {
    const MemorySink base = finals(system, json::object());
    EXPECT_FALSE(differ(base, finals(system, {{"beta", 0.0}}))) << system << ": beta defaults to 0";
    EXPECT_TRUE(differ(base, finals(system, {{"beta", 0.5}}))) << system << ": beta";
  }
  const json parking = {{"length", 1.0}, {"alpha", 1.0}, {"beta", 1.0}, {"potential", "none"}};
  const MemorySink base = finals("parallel_parking", parking);
  EXPECT_FALSE(differ(base, finals("parallel_parking", json::object()))) << "documented defaults";
  for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{
           {"length", 0.3}, {"alpha", 2.0}, {"beta", 0.5}, {"potential", "bowl"}}) {
    json changed = parking;
    changed[key] = value;
    EXPECT_TRUE(differ(base, finals("parallel_parking", changed))) << "parallel_parking: " << key;
  }
}

}  // namespace
}  // namespace tether::test

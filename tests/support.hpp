#pragma once
// Small helpers shared by the tests.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tether/engine.hpp"
#include "tether/methods/projection.hpp"

namespace tether::test {

// A state (q, p); q_prev = q for the methods that keep one.
template <class S>
PhaseState<S> make_state(const Vec<S::dof>& q, const Vec<S::dof>& p) {
  PhaseState<S> s;
  s.q = q;
  s.p = p;
  s.q_prev = q;
  return s;
}

// Keeps every final state in memory, in id order.
struct MemorySink final : FinalStateSink {
  struct Row {
    std::int64_t id;
    std::vector<Real> q, p;
    Status status;
  };
  std::vector<Row> rows;
  std::vector<TrajectoryRecord> snapshots;
  void write(const TrajectoryRecord& r) override { rows.push_back({r.id, r.q, r.p, r.status}); }
  void snapshot(const TrajectoryRecord& r) override { snapshots.push_back(r); }
};

// Keeps every draw of a `tether sample` in memory, (chain, draw) in row-major order.
struct MemoryDraws final : DrawSink {
  std::int64_t chains = 0, draws = 0;
  int dof = 0;
  std::vector<Real> q, potential, acceptance, energy, step_size;
  std::vector<int> outcome, steps, tree_depth;
  std::vector<Real> inverse_metric;  // NaN until a block hands Sigma over
  MemoryDraws(std::int64_t c, std::int64_t d, int n, MetricKind metric = MetricKind::mass)
      : chains(c), draws(d), dof(n), q(std::size_t(c * d * n)), potential(std::size_t(c * d)),
        acceptance(std::size_t(c * d)), energy(std::size_t(c * d)), step_size(std::size_t(c * d)),
        outcome(std::size_t(c * d), -1), steps(std::size_t(c * d), -1), tree_depth(std::size_t(c * d), -1),
        inverse_metric(std::size_t(c * inverse_metric_values(metric, n)), Real(NAN)) {}
  void write(const DrawBlock& b) override {
    for (std::int64_t d = 0; d < b.draws; ++d)
      for (std::int64_t i = 0; i < b.chains; ++i) {
        const std::size_t at = std::size_t((b.first_chain + i) * draws + b.first_draw + d);
        const std::size_t from = std::size_t(d * b.chains + i);
        for (int c = 0; c < dof; ++c)
          q[at * std::size_t(dof) + std::size_t(c)] = b.q[(std::size_t(d) * dof + c) * std::size_t(b.chains) + std::size_t(i)];
        potential[at] = b.potential[from];
        acceptance[at] = b.acceptance[from];
        energy[at] = b.energy[from];
        step_size[at] = b.step_size[from];
        outcome[at] = b.outcome[from];
        steps[at] = b.steps[from];
        tree_depth[at] = b.tree_depth[from];
      }
    if (b.inverse_metric != nullptr) {  // chain i's Sigma: its values at [i][e]
      const std::int64_t values = std::int64_t(inverse_metric.size()) / chains;
      for (std::int64_t e = 0; e < values; ++e)
        for (std::int64_t i = 0; i < b.chains; ++i)
          inverse_metric[std::size_t((b.first_chain + i) * values + e)] = b.inverse_metric[e * b.chains + i];
    }
  }
};

// parse(json, "test") must throw a ConfigError at `path` whose message holds `words`.
template <class Parse>
void expect_config_error(Parse parse, const std::string& json, const std::string& path, const std::string& words) {
  try {
    parse(json, "test");
    ADD_FAILURE() << "accepted: " << json;
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), path) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

// Runs a config given as JSON text and returns the result; final states go to `sink` when given.
inline RunResult run_json(const std::string& json, MemorySink* sink = nullptr) {
  RunOptions opt;
  opt.final_states = sink;
  return run(parse_config(json, "test"), opt);
}

// Steps one trajectory `steps` times with method m's fast step; fails the test on a bad status.
template <class M, class S>
PhaseState<S> integrate(const S& sys, PhaseState<S> s, Real h, long steps, NewtonOptions opt = {}, const M& m = M{}) {
  m.start(sys, s, h);
  for (long n = 0; n < steps; ++n) {
    int it = 0;
    const Status st = m.step(sys, s, h, opt, it);
    if (st != Status::ok) {
      ADD_FAILURE() << M::name << " failed at step " << n << ": " << status_name(st);
      break;
    }
  }
  return s;
}

}  // namespace tether::test

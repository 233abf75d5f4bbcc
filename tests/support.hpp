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
  void write(std::int64_t id, const std::vector<Real>& q, const std::vector<Real>& p, Status s) override {
    rows.push_back({id, q, p, s});
  }
};

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

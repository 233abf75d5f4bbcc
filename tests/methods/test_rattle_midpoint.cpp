// Form 3 (MMVW13 Props 6-7): RATTLE with a midpoint inner step on the
// holonomic + nonholonomic system sphere_contact (S^3 with the Hopf-horizontal
// constraint). Oracle: horizontal great circles are geodesics. Also order 2
// on a generic geodesic, constraints at every step, symplecticity on T*N
// (with a negative control), reversibility, and reference vs cpu.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/initial_state.hpp"
#include "support.hpp"
#include "tether/methods/rattle_midpoint.hpp"
#include "tether/systems/sphere_contact.hpp"
#include "order_fit.hpp"

namespace tether {
namespace {

using State = PhaseState<SphereContact>;
const SphereContact kSys{};

State make_state(const Vec<4>& q, const Vec<4>& p) { return test::make_state<SphereContact>(q, p); }

// A generic point of T*N, by projecting an arbitrary (q, p).
State generic_state() {
  State s = make_state(Vec<4>(0.9, 0.3, -0.2, 0.25), Vec<4>(0.1, 0.4, 0.7, -0.3));
  EXPECT_EQ(project_onto_manifold_index1(kSys, NewtonOptions{}, s), Status::ok);
  return s;
}

NewtonOptions tight() {
  NewtonOptions opt;
  opt.tolerance = 1e-14;
  return opt;
}

// Horizontal great circle q(t) = cos t q0 + sin t v0, with q0 = (1,0,0,0),
// v0 = (0,0,1,0) orthogonal to q0 and to i q0 = (0,1,0,0); p = qdot, lambda = 0.
TEST(RattleMidpoint, HorizontalGreatCircleConvergesAtOrderTwo) {
  const Real T = 1;
  std::vector<Real> errors;
  for (int N : {20, 40, 80, 160}) {
    const State s = test::integrate<RattleMidpoint>(kSys, make_state(Vec<4>(1, 0, 0, 0), Vec<4>(0, 0, 1, 0)), T / N,
                                                    N, tight());
    const Vec<4> exact_q(std::cos(T), 0, std::sin(T), 0), exact_p(-std::sin(T), 0, std::cos(T), 0);
    const Real err = std::max(max_abs(Vec<4>(s.q - exact_q)), max_abs(Vec<4>(s.p - exact_p)));
    // It stays in the plane of the circle exactly (a symmetry of the discrete map).
    EXPECT_LE(std::abs(s.q[1]) + std::abs(s.q[3]), 1e-15);
    errors.push_back(err);
  }
  for (Real o : test::observed_orders(errors)) EXPECT_NEAR(o, 2.0, 0.05);
  EXPECT_LT(errors.back(), 1e-5);
}

TEST(RattleMidpoint, GenericGeodesicConvergesAtOrderTwo) {
  const State start = generic_state();
  const Real T = 1;
  const State ref = test::integrate<RattleMidpoint>(kSys, start, T / 5120, 5120, tight());
  std::vector<Real> errors;
  for (int N : {20, 40, 80}) {
    const State s = test::integrate<RattleMidpoint>(kSys, start, T / N, N, tight());
    errors.push_back(std::max(max_abs(Vec<4>(s.q - ref.q)), max_abs(Vec<4>(s.p - ref.p))));
  }
  for (Real o : test::observed_orders(errors)) EXPECT_NEAR(o, 2.0, 0.1);
}

// |h(q)|, |<iq, qdot>| and |Dh(q) qdot| at every step, and the energy error
// (which here stays at roundoff: no growth over 2e4 steps).
TEST(RattleMidpoint, ConstraintsHoldEveryStepAndEnergyStaysBounded) {
  State s = generic_state();
  Real e0, v0;
  Vec<1> lambda;
  energy_parts(kSys, s.q, s.p, e0, v0, lambda);
  Real worst_h = 0, worst_v = 0, worst_e = 0;
  const int steps = 20000;
  for (int n = 0; n < steps; ++n) {
    int it = 0;
    ASSERT_EQ(RattleMidpoint::step(kSys, s, 0.05, NewtonOptions{}, it), Status::ok) << "step " << n;
    Real e, v;
    ASSERT_EQ(energy_parts(kSys, s.q, s.p, e, v, lambda), Status::ok);
    worst_h = std::max(worst_h, max_abs(holonomic_values(kSys, s.q)));
    worst_v = std::max(worst_v, velocity_constraint_residual(kSys, s.q, s.p, lambda));
    worst_e = std::max(worst_e, std::abs(e - e0));
  }
  EXPECT_LE(worst_h, 1e-14);
  EXPECT_LE(worst_v, 1e-13);
  EXPECT_LE(worst_e, 1e-12 * e0);
}

// omega(xi, eta) = xi_q . eta_p - xi_p . eta_q on tangent vectors of T*N,
// built by central differences through the projection onto T*N.
template <class Map>
Real symplecticity_defect(const Map& map) {
  const State z0 = generic_state();
  const Real eps = 1e-5;
  auto tangent = [&](const Vec<8>& a, auto&& f) {
    State plus = make_state(z0.q + eps * a.head<4>(), z0.p + eps * a.tail<4>());
    State minus = make_state(z0.q - eps * a.head<4>(), z0.p - eps * a.tail<4>());
    EXPECT_EQ(project_onto_manifold_index1(kSys, tight(), plus), Status::ok);
    EXPECT_EQ(project_onto_manifold_index1(kSys, tight(), minus), Status::ok);
    f(plus);
    f(minus);
    Vec<8> t;
    t << (plus.q - minus.q) / (2 * eps), (plus.p - minus.p) / (2 * eps);
    return t;
  };
  auto omega = [](const Vec<8>& a, const Vec<8>& b) {
    return a.head<4>().dot(b.tail<4>()) - a.tail<4>().dot(b.head<4>());
  };
  const Vec<8> dirs[3] = {(Vec<8>() << 0.3, -0.2, 0.5, 0.1, 0.7, 0.2, -0.4, 0.3).finished(),
                          (Vec<8>() << -0.1, 0.6, 0.2, -0.3, 0.1, -0.5, 0.3, 0.6).finished(),
                          (Vec<8>() << 0.4, 0.1, -0.3, 0.5, -0.2, 0.3, 0.6, -0.1).finished()};
  Real worst = 0;
  for (int a = 0; a < 3; ++a)
    for (int b = a + 1; b < 3; ++b) {
      const Vec<8> xi = tangent(dirs[a], [](State&) {}), eta = tangent(dirs[b], [](State&) {});
      const Vec<8> xi1 = tangent(dirs[a], map), eta1 = tangent(dirs[b], map);
      worst = std::max(worst, std::abs(omega(xi1, eta1) - omega(xi, eta)));
    }
  return worst;
}

TEST(RattleMidpoint, StepIsSymplecticOnTheConstraintManifold) {
  const Real h = 0.1;
  auto step = [&](State& s) {
    for (int n = 0; n < 5; ++n) {
      int it = 0;
      ASSERT_EQ(RattleMidpoint::step(kSys, s, h, tight(), it), Status::ok);
    }
  };
  EXPECT_LT(symplecticity_defect(step), 1e-7);
  // Negative control: the same steps followed by p <- (1 + h) p, which stays
  // on T*N but scales omega.
  auto scaled = [&](State& s) {
    step(s);
    s.p *= 1 + h;
  };
  EXPECT_GT(symplecticity_defect(scaled), 1e-3);
}

TEST(RattleMidpoint, IsReversible) {
  const State start = generic_state();
  State s = test::integrate<RattleMidpoint>(kSys, start, 0.05, 200, tight());
  s = test::integrate<RattleMidpoint>(kSys, s, -0.05, 200, tight());
  EXPECT_LT(max_abs(Vec<4>(s.q - start.q)), 1e-12);
  EXPECT_LT(max_abs(Vec<4>(s.p - start.p)), 1e-12);
}

// The reference backend solves all unknowns (mu, q1, p^1, Lambda, nu, lambda1) at once
// with a finite-difference Jacobian; the fast path in two structured stages.
TEST(RattleMidpoint, ReferenceAndCpuBackendsAgree) {
  const std::string body = R"("system": {"name": "sphere_contact"},
      "method": {"name": "rattle_midpoint", "dt": 0.02, "steps": 50},
      "ensemble": {"size": 16, "seed": 9, "initial": {"sampler": "around", "q": [1, 0, 0, 0], "p": [0, 0, 1, 0],
                   "position_spread": 0.3, "momentum_spread": 0.5}})";
  test::MemorySink cpu, ref;
  const RunResult rc = test::run_json("{" + body + R"(, "backend": "cpu"})", &cpu);
  const RunResult rr = test::run_json("{" + body + R"(, "backend": "reference"})", &ref);
  ASSERT_EQ(rc.failed, 0);
  ASSERT_EQ(rr.failed, 0);
  ASSERT_EQ(cpu.rows.size(), ref.rows.size());
  Real worst = 0;
  for (std::size_t i = 0; i < cpu.rows.size(); ++i)
    for (int c = 0; c < 4; ++c)
      worst = std::max({worst, std::abs(cpu.rows[i].q[c] - ref.rows[i].q[c]),
                        std::abs(cpu.rows[i].p[c] - ref.rows[i].p[c])});
  EXPECT_LT(worst, 1e-11);
  EXPECT_LE(rc.max_constraint_violation, 1e-14);
  EXPECT_LE(rc.max_velocity_constraint_violation, 1e-13);
}

TEST(RattleMidpoint, OnlyPairsWithMixedSystems) {
  auto message = [](const std::string& json) {
    try {
      parse_config(json, "test");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string tail = R"(, "dt": 0.1, "steps": 1}, "ensemble": {"initial": {"states": [{"q": [1, 0, 0, 0], "p": [0, 0, 1, 0]}]}}})";
  EXPECT_NE(message(R"({"system": {"name": "sphere_contact"}, "method": {"name": "gauss_legendre", "stages": 2)" + tail)
                .find("method.name"),
            std::string::npos);
  EXPECT_NE(message(R"({"system": {"name": "parallel_parking"}, "method": {"name": "rattle_midpoint")" + tail)
                .find("does not apply to parallel_parking"),
            std::string::npos);
}

}  // namespace
}  // namespace tether

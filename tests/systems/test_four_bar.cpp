// The four-bar linkage: a closed loop that RATTLE keeps closed. Its oracle
// is the exact one-degree-of-freedom reduction in the crank angle theta,
// integrated far more finely than the methods under test.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "order_fit.hpp"
#include "support.hpp"
#include "tether/methods/rattle.hpp"
#include "tether/systems/four_bar.hpp"

namespace tether::test {
namespace {

using nlohmann::json;

// dq/dtheta on the linkage: B' = a (-sin, cos), and C' from differentiating
// the coupler and rocker constraints, (C - B).(C' - B') = 0, (C - D).C' = 0.
Vec<4> tangent(const FourBar& sys, Real theta) {
  const Vec<4> q = sys.configuration(theta);
  const Vec<2> b = FourBar::joint_b(q), c = FourBar::joint_c(q), d = sys.pivot_d();
  const Vec<2> db(-sys.prm.crank * std::sin(theta), sys.prm.crank * std::cos(theta));
  Mat<2, 2> a;
  a.row(0) = (c - b).transpose();
  a.row(1) = (c - d).transpose();
  const Vec<2> dc = a.lu().solve(Vec<2>((c - b).dot(db), 0));
  return Vec<4>(db[0], db[1], dc[0], dc[1]);
}

Real reduced_mass(const FourBar& sys, Real theta) {
  const Vec<4> j = tangent(sys, theta);
  return j.dot(sys.mass_times(j));
}

// The reduced Hamiltonian H = p^2 / (2 m(theta)) + V(q(theta)): its vector field.
Vec<2> reduced_field(const FourBar& sys, const Vec<2>& y) {
  const Real theta = y[0], p = y[1], h = 1e-5;
  const Real m = reduced_mass(sys, theta);
  const Real dm = (reduced_mass(sys, theta + h) - reduced_mass(sys, theta - h)) / (2 * h);
  const Real dv = sys.potential_gradient(sys.configuration(theta)).dot(tangent(sys, theta));
  return Vec<2>(p / m, p * p * dm / (2 * m * m) - dv);
}

// theta(T), p(T) by classical RK4 at a step where its error is ~1e-15.
Vec<2> reduced_flow(const FourBar& sys, Vec<2> y, Real time) {
  const int n = 20000;
  const Real h = time / n;
  for (int k = 0; k < n; ++k) {
    const Vec<2> k1 = reduced_field(sys, y), k2 = reduced_field(sys, y + h / 2 * k1);
    const Vec<2> k3 = reduced_field(sys, y + h / 2 * k2), k4 = reduced_field(sys, y + h * k3);
    y += h / 6 * (k1 + 2 * k2 + 2 * k3 + k4);
  }
  return y;
}

// The state at crank angle theta and rate omega: v = q'(theta) omega is
// tangent to the constraint manifold, so (q, M v) lies on T*N exactly.
PhaseState<FourBar> state_at(const FourBar& sys, Real theta, Real omega) {
  return make_state<FourBar>(sys.configuration(theta), sys.mass_times(tangent(sys, theta) * omega));
}

TEST(FourBar, ConstraintsAndTheirJacobianAgree) {
  const FourBar sys;
  const Vec<4> q = sys.configuration(0.7);
  EXPECT_LT(max_abs(sys.constraints(q)), 1e-15);
  // G v by central differences of g along v.
  const Vec<4> v(0.3, -0.2, 0.5, 0.1);
  const Real h = 1e-6;
  const Vec<3> fd = (sys.constraints(q + h * v) - sys.constraints(q - h * v)) / (2 * h);
  EXPECT_LT((fd - sys.constraint_jacobian_times(q, v)).cwiseAbs().maxCoeff(), 1e-9);
  // G^T is the adjoint of G, and gram(q, q) = G M^-1 G^T.
  const Vec<3> l(0.4, -1.1, 0.7);
  EXPECT_NEAR(l.dot(sys.constraint_jacobian_times(q, v)), v.dot(sys.constraint_transpose_times(q, l)), 1e-14);
  const Vec<3> gl = sys.constraint_jacobian_times(q, sys.inverse_mass_times(sys.constraint_transpose_times(q, l)));
  Vec<3> ml;
  for (int r = 0; r < 3; ++r) ml[r] = sys.gram(q, q).a(r, 0) * l[0] + sys.gram(q, q).a(r, 1) * l[1] + sys.gram(q, q).a(r, 2) * l[2];
  EXPECT_LT((gl - ml).cwiseAbs().maxCoeff(), 1e-14);
  // The tangent of the one-parameter family is in the null space of G.
  EXPECT_LT(max_abs(sys.constraint_jacobian_times(q, tangent(sys, 0.7))), 1e-14);
}

// RATTLE converges to the reduced flow at order 2, on a crank that turns
// through more than a full revolution.
TEST(FourBar, RattleConvergesToTheReducedFlowAtOrderTwo) {
  const FourBar sys;
  const Real theta0 = 0.3, omega0 = 6.0, time = 1.5;
  const Real m0 = reduced_mass(sys, theta0);
  const Vec<2> exact = reduced_flow(sys, Vec<2>(theta0, m0 * omega0), time);
  ASSERT_GT(exact[0] - theta0, 6.3) << "the crank should turn past a full revolution";
  const Vec<4> q_exact = sys.configuration(exact[0]);
  std::vector<double> hs, errs;
  for (const int steps : {150, 300, 600, 1200}) {
    const Real h = time / steps;
    const PhaseState<FourBar> end = integrate<Rattle>(sys, state_at(sys, theta0, omega0), h, steps);
    hs.push_back(h);
    errs.push_back((end.q - q_exact).norm());
    EXPECT_LT(max_abs(sys.constraints(end.q)), 1e-13);
  }
  for (double o : observed_orders(errs)) EXPECT_NEAR(o, 2.0, 0.1) << "errors " << errs.front() << " .. " << errs.back();
  EXPECT_LT(errs.back(), 1e-4);
}

// Through the engine, every trajectory of a thermal ensemble keeps the loop
// closed at both constraint levels, stays on its assembly branch, and its
// energy error oscillates without drift (symplectic).
TEST(FourBar, EnsembleKeepsTheLoopClosedAndTheEnergyBounded) {
  const json cfg = {{"system", {{"name", "four_bar"}}},
                    {"method", {{"name", "rattle"}, {"dt", 0.004}, {"steps", 20000}}},
                    {"ensemble", {{"size", 64}, {"seed", 5}, {"initial", {{"sampler", "thermal"}, {"temperature", 3.0}}}}},
                    {"output", {{"every", 1000}}},
                    {"backend", "cpu"}};
  MemorySink sink;
  const RunResult r = run_json(cfg.dump(), &sink);
  EXPECT_EQ(r.failed, 0);
  const FourBar sys;
  EXPECT_LT(r.max_constraint_violation, 1e-13 * sys.length_scale());
  EXPECT_LT(r.max_velocity_constraint_violation, 1e-12);
  // No drift: the largest error over the second half of the run is of the
  // size of the first half's (a drifting method's would keep growing).
  Real first = 0, second = 0;
  for (const auto& row : r.timeseries) {
    Real& half = row.step <= 10000 ? first : second;
    half = std::max(half, row.max_energy_error);
  }
  EXPECT_GT(first, 0);
  EXPECT_LT(second, 2 * first) << "first half " << first << ", second half " << second;
  ASSERT_EQ(sink.rows.size(), 64u);
  for (const auto& row : sink.rows) {
    const Vec<4> q = Eigen::Map<const Vec<4>>(row.q.data());
    const Vec<2> b = FourBar::joint_b(q), c = FourBar::joint_c(q), d = sys.pivot_d();
    EXPECT_NEAR(b.norm(), sys.prm.crank, 1e-13);
    EXPECT_NEAR((c - b).norm(), sys.prm.coupler, 1e-13);
    EXPECT_NEAR((c - d).norm(), sys.prm.rocker, 1e-13);
    // C stays to the left of B -> D, the branch the ensemble started on.
    const Vec<2> bd = d - b, bc = c - b;
    EXPECT_GT(bd[0] * bc[1] - bd[1] * bc[0], 0) << "trajectory " << row.id << " changed assembly branch";
  }
}

TEST(FourBar, LengthsThatFoldTheLoopAreRefused) {
  const json cfg = {{"system", {{"name", "four_bar"}, {"parameters", {{"crank", 0.9}, {"coupler", 0.5}}}}},
                    {"method", {{"name", "rattle"}, {"dt", 0.01}, {"steps", 1}}},
                    {"ensemble", {{"size", 1}, {"initial", {{"sampler", "thermal"}, {"temperature", 1.0}}}}}};
  try {
    parse_config(cfg.dump(), "test");
    FAIL() << "a non-Grashof linkage was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "system.parameters.crank");
    EXPECT_NE(std::string(e.what()).find("Grashof"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tether::test

// The Fisher-Bingham system (include/tether/systems/fisher_bingham.hpp) as
// mechanics: its gradient, and with kappa = 0 and A diagonal it is
// C. Neumann's problem, whose Uhlenbeck integrals
//   F_k = q_k^2 + sum_{j != k} (q_k p_j - q_j p_k)^2 / (a_k - a_j),
// for V = 1/2 sum a_k q_k^2 on the unit sphere (here a_k = -2 A_kk), are
// conserved (Mos80); RATTLE, symplectic, keeps each within O(h^2). Its
// exact marginals under `tether sample` are tested in tests/sampling/test_hmc.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "holonomic_cases.hpp"
#include "support.hpp"
#include "tether/engine/config.hpp"
#include "tether/methods/rattle.hpp"
#include "tether/systems/fisher_bingham.hpp"

namespace tether::test {
namespace {

FisherBingham neumann() { return fisher_bingham(Vec3(0, 0, 1), 0, Vec3(0.5, 1.0, 2.0).asDiagonal().toDenseMatrix()); }

Vec<3> uhlenbeck_integrals(const FisherBingham& sys, const Vec<3>& q, const Vec<3>& p) {
  const Vec<3> a(-2 * sys.prm.bingham[0], -2 * sys.prm.bingham[1], -2 * sys.prm.bingham[2]);
  Vec<3> f;
  for (int k = 0; k < 3; ++k) {
    f[k] = q[k] * q[k];
    for (int j = 0; j < 3; ++j)
      if (j != k) f[k] += std::pow(q[k] * p[j] - q[j] * p[k], 2) / (a[k] - a[j]);
  }
  return f;
}

// Largest drift of the three integrals, and of the height q_0^2 (which is
// not conserved: the test sees motion), over time T at step h.
std::pair<Real, Real> deviations(Real h, Real time) {
  const FisherBingham sys = neumann();
  const Vec<3> q = Vec<3>(1, 0.5, 0.3).normalized();
  Vec<3> p(0.2, -0.7, 0.9);
  p -= p.dot(q) * q;  // tangent: on T*N
  PhaseState<FisherBingham> s = make_state<FisherBingham>(q, p);
  const Vec<3> f0 = uhlenbeck_integrals(sys, s.q, s.p);
  Real drift = 0, moved = 0;
  const long steps = std::lround(time / h);
  for (long n = 0; n < steps; ++n) {
    s = integrate<Rattle>(sys, s, h, 1, NewtonOptions{1e-14, 50});
    drift = std::max(drift, max_abs(Vec<3>(uhlenbeck_integrals(sys, s.q, s.p) - f0)));
    moved = std::max(moved, std::abs(s.q[0] * s.q[0] - q[0] * q[0]));
  }
  return {drift, moved};
}

TEST(FisherBingham, NeumannIntegralsStayWithinSecondOrder) {
  const auto [coarse, moved] = deviations(0.02, 40);
  const auto [fine, unused] = deviations(0.01, 40);
  EXPECT_GT(moved, 0.1) << "the trajectory hardly moves: the test would see nothing";
  EXPECT_LT(fine, 1e-3);
  const Real ratio = coarse / fine;  // 4 for an O(h^2) bounded deviation, no drift
  EXPECT_GT(ratio, 3.0) << coarse << " " << fine;
  EXPECT_LT(ratio, 5.0) << coarse << " " << fine;
}

// grad V against central differences, for a general mean and a full matrix A.
TEST(FisherBingham, GradientIsTheDerivativeOfThePotential) {
  Mat<3, 3> a;
  a << 0.3, 0.4, -0.9, 0.4, -1.2, 0.25, -0.9, 0.25, 0.7;
  FisherBingham sys = fisher_bingham(Vec3(1, -2, 0.5), 2.5, a);
  const Vec<3> q(0.3, -0.4, 0.8);
  const Real eps = 1e-6;
  for (int k = 0; k < 3; ++k) {
    const Vec<3> e = Vec<3>::Unit(k);
    const Real diff = (sys.potential(q + eps * e) - sys.potential(q - eps * e)) / (2 * eps);
    EXPECT_NEAR(sys.potential_gradient(q)[k], diff, 1e-8) << k;
  }
  // V = -kappa mu.q - q^T A q with mu normalised: at q = mu, A = 0, V = -kappa.
  sys.prm.bingham[0] = sys.prm.bingham[1] = sys.prm.bingham[2] = sys.prm.bingham[3] = sys.prm.bingham[4] =
      sys.prm.bingham[5] = 0;
  EXPECT_NEAR(sys.potential(Vec<3>(1, -2, 0.5).normalized()), -2.5, 1e-14);
}

TEST(FisherBingham, ZeroMeanDirectionIsRefused) {
  const std::string json = R"({"system": {"name": "fisher_bingham", "parameters": {"mean": [0, 0, 0]}},
    "method": {"name": "rattle", "dt": 0.1, "steps": 1},
    "ensemble": {"size": 1, "initial": {"sampler": "thermal", "temperature": 1}}})";
  expect_config_error(parse_config, json, "system.parameters.mean", "zero vector");
}

}  // namespace
}  // namespace tether::test

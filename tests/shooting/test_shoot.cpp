// Geodesic shooting: q(T; p0) = q1 solved for the initial covector
// p0 by damped Newton on the exact Jacobian of the discrete flow
// (include/tether/shooting/shoot.hpp, src/engine/shooting.cpp). Covered here
// (sections 1, 4 and the condensed step of 11, the tangent maps, are in
// test_shoot_tangent.cpp):
//  2. Heisenberg: exact covectors recovered from the closed-form geodesic's endpoint;
//  3. Heisenberg: kept lengths against the closed-form sub-Riemannian distance;
//  5. the car's sideways manoeuvre (MMVW13 §5), with the velocity constraints
//     along the solved geodesic, and its mirror image;
//  6. failures are reported, one row per target in target order;
//  7. continuation solves what a poor guess cannot;
//  8. cpu against the reference backend; 9. thread-count independence;
//  10. p(T) against differences of the length, and the cut-locus flag;
//      shoot.accuracy against the closed-form endpoint;
//  11. multiple shooting: the same minimisers as single shooting;
//  13. line-search trials without the tangent leave Newton's iterates as they were;
//  14. shoot.newton.stall_iterations: a shot stops after that many slow iterations;
//  12. bad shooting configs, each named by its JSON path.
// Every expected value is derived from the mathematics, not read off output.
#include <omp.h>

#include <cmath>
#include <complex>
#include <random>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "compiled_steps_gauss_legendre.hpp"  // generated: the steps compiled once
#include "compiled_steps_stormer_verlet.hpp"
#include "compiled_steps_symplectic_euler.hpp"
#include "shooting/shoot_support.hpp"
#include "support.hpp"
#include "tether/engine/shooting.hpp"
#include "tether/systems/heisenberg.hpp"
#include "tether/systems/heisenberg_vakonomic.hpp"
#include "tether/systems/martinet.hpp"
#include "tether/systems/parallel_parking.hpp"

namespace tether {
namespace {

using namespace test;

// ---------------------------------------------------------------------------
// Helpers.


ShootResult shoot_json(const std::string& json) { return shoot(parse_shoot_config(json, "test"), ShootOptions{}); }

// json with every occurrence of `from` replaced by `to`.
std::string replaced(std::string json, const std::string& from, const std::string& to) {
  for (std::size_t at = json.find(from); at != std::string::npos; at = json.find(from, at + to.size()))
    json.replace(at, from.size(), to);
  return json;
}

std::string describe(const TargetResult& t) {
  std::string s = "target (";
  for (Real x : t.target) s += std::to_string(x) + " ";
  s += ") " + std::string(shot_status_name(t.status)) + " iterations " + std::to_string(t.iterations) +
       " residual " + std::to_string(t.residual) + " length " + std::to_string(t.length) + " conjugate_time " +
       std::to_string(t.conjugate_time) + " second_length " + std::to_string(t.second_length) +
       (t.near_cut_locus ? " near_cut_locus" : "") + " round " + std::to_string(t.round) + " p0 (";
  for (Real x : t.p0) s += std::to_string(x) + " ";
  return s + ")";
}

// "[x, y, z]" to full precision, for targets built in a test.
std::string json_point(const Vec3& q) {
  std::ostringstream s;
  s.precision(17);
  s << "[" << q[0] << ", " << q[1] << ", " << q[2] << "]";
  return s.str();
}

// Sub-Riemannian distance from the origin of the Heisenberg group (frame
// X = d/dx - y/2 d/dz, Y = d/dy + x/2 d/dz) to (x, y, z), and the p_z of the
// minimising geodesic at T = 1.
// Derivation: along a geodesic lambda = p_z is constant and (x + iy)' = c e^{i lambda t},
// so the projection to the plane is a circle arc of radius R = |c|/|lambda|
// traversed at speed |c| (the length L = |c| T), turning by theta = |lambda| T.
// z' = (x y' - y x')/2 is the rate of area swept from the origin, so z(T) is
// the signed area between the arc and its chord. With phi = theta/2: chord
// r = 2 R sin phi, L = 2 R phi, area = R^2/2 (2 phi - sin 2 phi), hence
//   L = r phi / sin phi  and  |z| / r^2 = (2 phi - sin 2 phi) / (8 sin^2 phi) =: f(phi).
// f increases from 0 to infinity on (0, pi), so the arc with phi in (0, pi)
// is unique; it is the minimiser (phi >= pi would turn past a full circle,
// beyond the first conjugate point, and is longer). On the z-axis (r = 0) the
// arc is a full circle: theta = 2 pi, |z| = pi R^2, L = 2 pi R = sqrt(4 pi |z|).
struct HeisenbergDistance {
  Real length, pz;
};
HeisenbergDistance heisenberg_distance(Real x, Real y, Real z) {
  const Real r = std::hypot(x, y);
  if (r == 0) return {std::sqrt(4 * kPi * std::abs(z)), (z > 0 ? 2 : -2) * kPi};
  const Real ratio = std::abs(z) / (r * r);
  const auto f = [](Real phi) { return (2 * phi - std::sin(2 * phi)) / (8 * std::sin(phi) * std::sin(phi)); };
  Real lo = 0, hi = kPi;
  for (int i = 0; i < 200; ++i) {
    const Real mid = (lo + hi) / 2;
    (f(mid) < ratio ? lo : hi) = mid;
  }
  const Real phi = (lo + hi) / 2;
  // phi = 0 (z = 0): the straight segment; pz takes the sign of z (the arc turns left for z > 0).
  return {phi == 0 ? r : r * phi / std::sin(phi), (z < 0 ? -2 : 2) * phi};
}

// ===========================================================================
// 2. Heisenberg: exact covectors recovered.
//
// q1 is the endpoint of the closed-form geodesic from (q0, p0*). The discrete
// GL3 flow (order 6) differs from the exact one by ~C T (|p_z| h)^6 |p|: with
// h = 0.01 and |p_z| <= 5 that is (0.05)^6 ~ 2e-8 times GL3's small error
// constant (~1e-4), ~1e-11. The recovered p0 differs from p0* by
// |J^-1| times that; away from the conjugate time (|p_z| T < 2 pi with margin)
// |J^-1| = O(1-10), so 1e-8 bounds it with room (observed <= 1.1e-12), while
// an order-2 error (~(|p_z| h)^2 ~ 1e-3) would not pass.
TEST(ShootHeisenberg, RecoversExactCovectors) {
  const Heisenberg sys;
  const ShootControl ctl = control(0.01, 100, 1e-12);
  const std::vector<Vec3> covectors{Vec3(0.7, 0.4, 1.3), Vec3(-1.1, 0.5, -3.0), Vec3(0.3, -0.9, 4.8),
                                    Vec3(1.5, 0.2, 0.0), Vec3(-0.4, -0.6, -4.5)};
  for (const Vec3& p_exact : covectors) {
    Vec<6> z0;
    z0 << kQ3, p_exact;
    const Vec3 target = heisenberg_exact(z0, 1.0).head<3>();
    Vec3 p = p_exact + Vec3(0.2, -0.15, 0.3);  // a perturbed guess
    int iterations = 0;
    Real residual = 0;
    ShotCarry<Heisenberg, CompiledFlow<GaussLegendre<3>>> carry;
    const ShotStatus st = shoot_newton<Heisenberg, CompiledFlow<GaussLegendre<3>>>(sys, ctl, carry, kQ3, target, p,
                                                                                    iterations, residual);
    ASSERT_EQ(st, ShotStatus::converged) << "p0* = " << p_exact.transpose();
    EXPECT_LE(residual, 1e-10);
    EXPECT_GT(iterations, 0);
    EXPECT_LT(max_abs(Vec3(p - p_exact)), 1e-8) << "p0* = " << p_exact.transpose() << "\nfound " << p.transpose();
  }
}

// ===========================================================================
// 3. Heisenberg: lengths against the closed-form distance.

// The oracle itself, at its two limits: a straight segment (z -> 0) has length
// r, and as r -> 0 the arc closes into the circle of length sqrt(4 pi |z|).
TEST(ShootHeisenberg, DistanceOracleLimits) {
  EXPECT_NEAR(heisenberg_distance(0.6, -0.8, 0).length, 1.0, 1e-15);
  EXPECT_NEAR(heisenberg_distance(0.6, -0.8, 1e-9).length, 1.0, 1e-8);
  EXPECT_NEAR(heisenberg_distance(1e-7, 0, 0.3).length, std::sqrt(4 * kPi * 0.3), 1e-5);
  EXPECT_EQ(heisenberg_distance(0, 0, -0.3).length, std::sqrt(4 * kPi * 0.3));
  // Dilations (x, y, z) -> (s x, s y, s^2 z) scale distances by s.
  EXPECT_NEAR(heisenberg_distance(0.6, 0.2, 0.5).length * 3, heisenberg_distance(1.8, 0.6, 4.5).length, 1e-12);
}

// tether shoot through a parsed config: the kept (shortest converged) geodesic
// of each target has the sub-Riemannian distance as its length, p_z = 2 phi,
// and no conjugate point. Tolerance: GL2 is order 4, with h = 1/40 and
// |p_z| h <= 0.11 the discrete endpoint map is off by ~(|p_z| h)^4 / 1e3 ~ 1e-7
// (relative), which moves p0 and hence L = sqrt(2 H) T by as much (observed
// <= 6e-7, largest for the largest |p_z|); 1e-5 relative is a safe bound, and
// a kept geodesic that is not the minimiser is off by O(1).
TEST(ShootHeisenberg, KeptLengthIsTheDistance) {
  const ShootResult r = shoot_json(R"({
    "system": {"name": "heisenberg"},
    "method": {"name": "gauss_legendre", "stages": 2, "steps": 40},
    "shoot": {"q0": [0, 0, 0], "time": 1.0,
      "targets": {"list": [[1, 0, 0.2], [0.5, 0.5, -0.1], [-0.8, 0.3, 0.3], [0.3, -0.6, 0.25], [0.5, 0, 0.25],
                           [0, 0.4, -0.12]]},
      "guesses": {"toward": true, "random": {"count": 12, "scale": 2.0, "seed": 3}}},
    "backend": "cpu"})");
  ASSERT_EQ(r.targets.size(), 6u);
  EXPECT_EQ(r.backend, "cpu");
  EXPECT_EQ(r.shots, 6 * 13);
  for (const TargetResult& t : r.targets) {
    ASSERT_EQ(t.status, ShotStatus::converged) << describe(t);
    const HeisenbergDistance d = heisenberg_distance(t.target[0], t.target[1], t.target[2]);
    EXPECT_NEAR(t.length, d.length, 1e-5 * d.length) << describe(t);
    EXPECT_NEAR(t.p0[2], d.pz, 1e-5 * std::abs(d.pz)) << describe(t);
    EXPECT_TRUE(std::isnan(t.conjugate_time)) << describe(t);
    EXPECT_LE(t.residual, 1e-10);
    EXPECT_EQ(t.attempts, 13);
    // H = L^2 / (2 T^2) for a constant-speed geodesic.
    EXPECT_NEAR(t.energy, d.length * d.length / 2, 1e-5 * d.length * d.length);
  }
}

// ===========================================================================
// 5. The car (MMVW13 §5, no potential) moves sideways by d: from (0, 0, 0, 0)
// to (0, d, 0, 0), a manoeuvre its constraints forbid doing directly.
TEST(ShootParallelParking, SidewaysManoeuvre) {
  const Real d = 0.5;
  const ShootResult r = shoot_json(R"({
    "system": {"name": "parallel_parking"},
    "method": {"name": "gauss_legendre", "stages": 2, "steps": 40},
    "shoot": {"q0": [0, 0, 0, 0], "time": 1.0,
      "targets": {"list": [[0, 0.5, 0, 0]]},
      "guesses": {"random": {"count": 4, "scale": 2.0, "seed": 1}},
      "newton": {"tolerance": 1e-11}},
    "backend": "cpu"})");
  ASSERT_EQ(r.targets.size(), 1u);
  const TargetResult& t = r.targets[0];
  ASSERT_EQ(t.status, ShotStatus::converged) << describe(t);
  // Any admissible path from y = 0 to y = d has length >= int |ydot| >= d.
  EXPECT_GT(t.length, d);

  // Along the solved geodesic, integrated again here with the GL2 step: the
  // original constraints (5.1), (5.3), g_i(q) . qdot = 0 with qdot = H_p, hold
  // at every step (MMVW13 Corollary 5): lambda~ solves H_lambda = 0, which
  // is exactly those constraints, to roundoff (eps |p| |g| ~ 1e-14 for |p| ~ 20;
  // measured 1e-14).
  const ParallelParking sys;
  PhaseState<ParallelParking> s = make_state<ParallelParking>(Vec<4>::Zero(), Eigen::Map<const Vec<4>>(t.p0.data()));
  Real worst = 0;
  for (int k = 0; k < 40; ++k) {
    int it = 0;
    ASSERT_EQ(CompiledFlow<GaussLegendre<2>>::step(sys, s, 1.0 / 40, NewtonOptions{}, it), Status::ok);
    Vec<2> lambda;
    ASSERT_EQ(solve_multipliers(sys, s.q, s.p, NewtonOptions{}, lambda, it), Status::ok);
    worst = std::max(worst, velocity_constraint_residual(sys, s.q, s.p, lambda));
  }
  EXPECT_LE(worst, 1e-12);
  // q(T) hits the target (the shot's tolerance was 1e-11; re-integration is the same arithmetic).
  EXPECT_LE((s.q - Vec<4>(0, d, 0, 0)).norm(), 1e-10) << s.q.transpose();

  // A second manoeuvre of the same length: run the solution backwards, shift
  // it by -d in y and reflect (x, y, theta, phi) -> (x, -y, -theta, -phi).
  // The constraints and the metric are invariant, so this is again a geodesic
  // from 0 to (0, d, 0, 0); its covector at t = 0 is -R^T p(T) =
  // (-p_x, p_y, p_theta, p_phi)(T). GL2 is symmetric and R a linear symplectic
  // symmetry, so the discrete flow reproduces the mirror up to roundoff and
  // the step Newton's floor (measured 1.5e-13 in q(T), 2e-13 relative in the
  // length); bound 1e-10 as for the direct hit. (With random guesses the
  // shooting finds this mirror manoeuvre too: same length, other p_x sign.)
  const Vec<4> mirrored(-s.p[0], s.p[1], s.p[2], s.p[3]);
  PhaseState<ParallelParking> m = make_state<ParallelParking>(Vec<4>::Zero(), mirrored);
  for (int k = 0; k < 40; ++k) {
    int it = 0;
    ASSERT_EQ(CompiledFlow<GaussLegendre<2>>::step(sys, m, 1.0 / 40, NewtonOptions{}, it), Status::ok);
  }
  EXPECT_LE((m.q - Vec<4>(0, d, 0, 0)).norm(), 1e-10) << m.q.transpose();
  ShotReport<4> report;
  ShotCarry<ParallelParking, CompiledFlow<GaussLegendre<2>>> carry;
  ASSERT_EQ((shot_report<ParallelParking, CompiledFlow<GaussLegendre<2>>>(sys, control(1.0 / 40, 40), carry,
                                                                        Vec<4>::Zero(), mirrored, report)),
            Status::ok);
  EXPECT_NEAR(report.length, t.length, 1e-10 * t.length);
}

// ===========================================================================
// 6. Failures are reported, never dropped: one row per target, in target order.

void expect_rows_in_order(const ShootResult& r, const std::vector<std::vector<Real>>& targets) {
  ASSERT_EQ(r.targets.size(), targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    EXPECT_EQ(r.targets[i].target, targets[i]) << "row " << i;
    EXPECT_EQ(r.targets[i].p0.size(), targets[i].size()) << "row " << i;
    EXPECT_GE(r.targets[i].attempts, 1) << "row " << i;
  }
}

TEST(ShootReporting, OutOfIterationsIsReportedWithItsResidual) {
  // Targets in the plane z = 0 are reached exactly by the toward guess
  // p0 = q1 / T: with p_z = 0 the geodesic is the straight segment, z' = 0.
  // The middle one needs several Newton iterations; one is allowed.
  const ShootResult r = shoot_json(R"({
    "system": {"name": "heisenberg"},
    "method": {"name": "gauss_legendre", "stages": 2, "steps": 40},
    "shoot": {"q0": [0, 0, 0], "time": 1.0,
      "targets": {"list": [[1, 0, 0], [0.3, 0.2, 1.5], [0, -0.7, 0]]},
      "guesses": {"toward": true},
      "newton": {"max_iterations": 1}},
    "backend": "cpu"})");
  expect_rows_in_order(r, {{1, 0, 0}, {0.3, 0.2, 1.5}, {0, -0.7, 0}});
  for (int i : {0, 2}) {
    const TargetResult& t = r.targets[std::size_t(i)];
    EXPECT_EQ(t.status, ShotStatus::converged) << describe(t);
    EXPECT_EQ(t.iterations, 0);
    EXPECT_NEAR(t.length, std::hypot(t.target[0], t.target[1]), 1e-12);
  }
  const TargetResult& far = r.targets[1];
  EXPECT_EQ(far.status, ShotStatus::max_iterations) << describe(far);
  EXPECT_EQ(far.iterations, 1);
  EXPECT_TRUE(std::isfinite(far.residual));
  EXPECT_GT(far.residual, 1e-10);
  for (Real x : far.p0) EXPECT_TRUE(std::isfinite(x));
  EXPECT_TRUE(std::isnan(far.length));  // no length for a geodesic not found
}

TEST(ShootReporting, MartinetTargetAcrossTheSingularPlaneIsReported) {
  // beta = 1: X2 = d/dy / (1 + x) blows up on the plane x = -1, where
  // H = ... + p_y^2 / (1 + x)^2; a target at x = -2 lies beyond it (off the
  // line y = 0, along which p_y = 0 and the plane is harmless).
  const ShootResult r = shoot_json(R"({
    "system": {"name": "martinet", "parameters": {"beta": 1}},
    "method": {"name": "gauss_legendre", "stages": 2, "steps": 40},
    "shoot": {"q0": [0, 0, 0], "time": 1.0,
      "targets": {"list": [[0.5, 0.2, 0.05], [-2, 0.5, 0.1], [0.3, -0.2, 0.02]]},
      "guesses": {"toward": true, "random": {"count": 8, "scale": 2.0, "seed": 1}}},
    "backend": "cpu"})");
  expect_rows_in_order(r, {{0.5, 0.2, 0.05}, {-2, 0.5, 0.1}, {0.3, -0.2, 0.02}});
  for (int i : {0, 2}) {
    const TargetResult& t = r.targets[std::size_t(i)];
    EXPECT_EQ(t.status, ShotStatus::converged) << describe(t);
    EXPECT_LE(t.residual, 1e-10);
    EXPECT_EQ(t.attempts, 9);
  }
  const TargetResult& across = r.targets[1];
  EXPECT_NE(across.status, ShotStatus::converged) << describe(across);
  EXPECT_FALSE(across.residual <= 1e-10) << describe(across);  // > tolerance, or inf when nothing integrated
  EXPECT_EQ(across.attempts, 9);
  EXPECT_EQ(across.converged_attempts, 0);
  EXPECT_TRUE(std::isnan(across.length));
}

// ===========================================================================
// 7. Continuation. From the guess (0.3, 0.2, 0) the target (0.3, 0.2, 0) is
// reached at once (straight segment), but (0.3, 0.2, 0.5) is not: near p_z = 0
// z(T) ~ p_z |c|^2 T^3 / 12 is tiny in p_z, Newton's first step jumps to
// |p_z| ~ 50 and the line search fails there. Walking the target up from
// (0.3, 0.2, 0) in 8 substeps follows the minimising branch, so the solution
// is the distance minimiser (checked against the closed form as in test 3).
TEST(ShootContinuation, SolvesWhatAPoorGuessCannot) {
  const std::string json = R"({
    "system": {"name": "heisenberg"},
    "method": {"name": "gauss_legendre", "stages": 2, "steps": 40},
    "shoot": {"q0": [0, 0, 0], "time": 1.0,
      "targets": {"list": [[0.3, 0.2, 0], [0.3, 0.2, 0.5]]},
      "guesses": {"list": [[0.3, 0.2, 0]]},
      "newton": {"max_iterations": 50}CONTINUATION},
    "backend": "cpu"})";
  const ShootResult direct = shoot_json(replaced(json, "CONTINUATION", ""));
  ASSERT_EQ(direct.targets.size(), 2u);
  EXPECT_EQ(direct.targets[0].status, ShotStatus::converged) << describe(direct.targets[0]);
  EXPECT_NE(direct.targets[1].status, ShotStatus::converged) << describe(direct.targets[1]);
  EXPECT_EQ(direct.continuation_rounds_run, 0);

  const ShootResult r =
      shoot_json(replaced(json, "CONTINUATION", R"(, "continuation": {"rounds": 3, "substeps": 8})"));
  ASSERT_EQ(r.targets.size(), 2u);
  EXPECT_EQ(r.targets[0].status, ShotStatus::converged);
  EXPECT_EQ(r.targets[0].round, 0);
  const TargetResult& t = r.targets[1];
  ASSERT_EQ(t.status, ShotStatus::converged) << describe(t);
  EXPECT_GE(t.round, 1);
  EXPECT_GE(r.continuation_rounds_run, 1);
  EXPECT_GE(t.attempts, 2);  // the failed direct shot, then the continued one
  EXPECT_LE(t.residual, 1e-10);
  const HeisenbergDistance d = heisenberg_distance(0.3, 0.2, 0.5);
  EXPECT_NEAR(t.length, d.length, 1e-5 * d.length) << describe(t);  // GL2 tolerance as in test 3
  EXPECT_TRUE(std::isnan(t.conjugate_time)) << describe(t);
}

// ===========================================================================
// 8. cpu against reference: the reference flow solves each step's equations
// as written with its own dense finite-difference Newton (reference_backend.hpp),
// which stops one (chord) iteration after its update falls below 1e-9: the
// two endpoint maps differ by ~1e-15 (heisenberg_vakonomic) to ~1e-11 (the car with
// |p| ~ 25, 10 steps; measured 7e-12 and 2.5e-11). The roots differ by |J^-1|
// times that, and |J^-1| is ~1e2 for the car (det J ~ t^10 near t = 0):
// measured 3e-12 (heisenberg_vakonomic) and 1.4e-10 = 6e-12 |p0| (car). Bound:
// 1e-9 max(1, |p0|). A step-equation mismatch between the two would be O(h) ~ 0.1.
void expect_backends_agree(const std::string& json) {
  const ShootResult cpu = shoot_json(replaced(json, "BACKEND", "cpu"));
  const ShootResult ref = shoot_json(replaced(json, "BACKEND", "reference"));
  EXPECT_EQ(cpu.backend, "cpu");
  EXPECT_EQ(ref.backend, "reference");
  ASSERT_EQ(cpu.targets.size(), ref.targets.size());
  for (std::size_t i = 0; i < cpu.targets.size(); ++i) {
    const TargetResult &a = cpu.targets[i], &b = ref.targets[i];
    ASSERT_EQ(a.status, ShotStatus::converged) << describe(a);
    ASSERT_EQ(b.status, ShotStatus::converged) << describe(b);
    Real size = 1;
    for (Real x : a.p0) size = std::max(size, std::abs(x));
    for (std::size_t c = 0; c < a.p0.size(); ++c)
      EXPECT_NEAR(a.p0[c], b.p0[c], 1e-9 * size) << "cpu " << describe(a) << "\nreference " << describe(b);
    EXPECT_NEAR(a.length, b.length, 1e-9 * a.length);
    // p(T) is p0 carried by two flows that agree to the bound above.
    for (Real x : a.pT) size = std::max(size, std::abs(x));
    for (std::size_t c = 0; c < a.pT.size(); ++c) EXPECT_NEAR(a.pT[c], b.pT[c], 1e-9 * size) << describe(a);
  }
}

TEST(ShootBackends, CpuMatchesReferenceHeisenbergVakonomic) {
  expect_backends_agree(R"({
    "system": {"name": "heisenberg_vakonomic"},
    "method": {"name": "stormer_verlet", "steps": 10},
    "shoot": {"q0": [0.1, -0.2, 0.05], "time": 1.0,
      "targets": {"list": [[0.6, 0.1, 0.1], [-0.3, 0.4, -0.05]]},
      "guesses": {"toward": true},
      "newton": {"tolerance": 1e-12}},
    "backend": "BACKEND"})");
}

TEST(ShootBackends, CpuMatchesReferenceParallelParking) {
  expect_backends_agree(R"({
    "system": {"name": "parallel_parking", "parameters": {"potential": "bowl"}},
    "method": {"name": "gauss_legendre", "stages": 1, "steps": 10},
    "shoot": {"q0": [0, 0, 0, 0], "time": 1.0,
      "targets": {"list": [[0.5, 0.1, 0.1, 0.1], [0.4, -0.05, -0.1, 0.2]]},
      "guesses": {"toward": true, "random": {"count": 2, "scale": 1.0, "seed": 4}},
      "newton": {"tolerance": 1e-12}},
    "backend": "BACKEND"})");
}

// Multiple shooting on the reference flow: the same covectors.
TEST(ShootBackends, CpuMatchesReferenceMultipleShooting) {
  expect_backends_agree(R"({
    "system": {"name": "heisenberg_vakonomic"},
    "method": {"name": "gauss_legendre", "stages": 2, "steps": 12},
    "shoot": {"q0": [0.1, -0.2, 0.05], "time": 1.0, "nodes": 3,
      "targets": {"list": [[0.6, 0.1, 0.1], [-0.3, 0.4, -0.05]]},
      "guesses": {"toward": true},
      "newton": {"tolerance": 1e-12}},
    "backend": "BACKEND"})");
}

// ===========================================================================
// 9. The cpu backend's results do not depend on the thread count, bit for bit:
// every shot is an independent computation, whichever thread runs it.
class ShootThreads : public ::testing::Test {
 protected:
  void TearDown() override { omp_set_num_threads(saved_); }
  int saved_ = omp_get_max_threads();
};

bool same_bits(Real a, Real b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST_F(ShootThreads, ResultsAreBitwiseIndependentOfThreads) {
  const std::string json = R"({
    "system": {"name": "heisenberg"},
    "method": {"name": "gauss_legendre", "stages": 2, "steps": 20},
    "shoot": {"q0": [0, 0, 0], "time": 1.0,
      "targets": {"grid": {"min": [-0.6, -0.5, -0.2], "max": [0.6, 0.5, 0.2], "count": [4, 3, 3]}},
      "guesses": {"toward": true, "random": {"count": 3, "scale": 2.0, "seed": 5}},
      "continuation": {"rounds": 1, "substeps": 4}},
    "backend": "cpu"})";
  omp_set_num_threads(1);
  const ShootResult one = shoot_json(json);
  omp_set_num_threads(2);
  const ShootResult two = shoot_json(json);
  ASSERT_EQ(one.targets.size(), 36u);
  ASSERT_EQ(two.targets.size(), 36u);
  EXPECT_EQ(one.shots, two.shots);
  EXPECT_EQ(one.shooting_iterations, two.shooting_iterations);
  int converged = 0;
  for (std::size_t i = 0; i < one.targets.size(); ++i) {
    const TargetResult &a = one.targets[i], &b = two.targets[i];
    converged += a.status == ShotStatus::converged;
    EXPECT_EQ(a.status, b.status) << i;
    EXPECT_EQ(a.iterations, b.iterations) << i;
    EXPECT_EQ(a.attempts, b.attempts) << i;
    EXPECT_EQ(a.round, b.round) << i;
    for (std::size_t c = 0; c < a.p0.size(); ++c) EXPECT_TRUE(same_bits(a.p0[c], b.p0[c])) << i;
    for (std::size_t c = 0; c < a.pT.size(); ++c) EXPECT_TRUE(same_bits(a.pT[c], b.pT[c])) << i;
    for (auto [x, y] : {std::pair{a.residual, b.residual}, {a.length, b.length}, {a.energy, b.energy},
                        {a.conjugate_time, b.conjugate_time}, {a.second_length, b.second_length}})
      EXPECT_TRUE(same_bits(x, y)) << i << ": " << x << " vs " << y;
    EXPECT_EQ(a.near_cut_locus, b.near_cut_locus) << i;
  }
  EXPECT_GT(converged, 30);  // not a comparison of failures only
}

// ===========================================================================
// 10. What an outer optimisation needs: p(T) as the gradient of the length,
// and the targets near the cut locus.

// p(T) / sqrt(2 H) is the gradient of the length in the target (shoot.hpp):
// checked against fourth-order central differences, step e = 1e-3, of the
// lengths tether itself finds for the displaced targets, and of the
// closed-form distance. Errors: the stencil's truncation e^4 |L^(5)| / 30
// ~ 1e-12 |L^(5)|; the Newton tolerance 1e-12 moves each length by ~|grad L|
// 1e-12, 1.5e-12 / e = 1.5e-9 in the difference; GL3 at h = 1/80 makes p(T)
// and the discrete lengths' gradient differ from the exact one by
// ~(|p_z| h)^6 / 1e4 ~ 1e-12. Bound 2e-8 (|grad L| >= 1 here); a p(T) off by a
// factor, a sign, or a step (p one step before T: |p'| h ~ 1e-2) fails it.
TEST(ShootGradient, FinalCovectorIsTheLengthGradient) {
  const std::vector<Vec3> bases{Vec3(1, 0, 0.2), Vec3(0.5, 0.5, -0.1), Vec3(-0.8, 0.3, 0.3), Vec3(0.3, -0.6, 0.25),
                                Vec3(0.6, 0.2, 0.05)};
  const Real e = 1e-3;
  const Real offsets[4] = {-2 * e, -e, e, 2 * e}, weights[4] = {1, -8, 8, -1};  // / (12 e)
  std::string list;
  auto add = [&](const Vec3& q) { list += (list.empty() ? "" : ", ") + json_point(q); };
  for (const Vec3& b : bases) {
    add(b);
    for (int c = 0; c < 3; ++c)
      for (Real o : offsets) add(b + o * Vec3::Unit(c));
  }
  const ShootResult r = shoot_json(R"({
    "system": {"name": "heisenberg"},
    "method": {"name": "gauss_legendre", "stages": 3, "steps": 80},
    "shoot": {"q0": [0, 0, 0], "time": 1.0, "targets": {"list": [)" + list + R"(]},
      "guesses": {"toward": true, "random": {"count": 4, "scale": 2.0, "seed": 3}},
      "newton": {"tolerance": 1e-12}},
    "backend": "cpu"})");
  ASSERT_EQ(r.targets.size(), bases.size() * 13);
  for (std::size_t b = 0; b < bases.size(); ++b) {
    const TargetResult& t = r.targets[13 * b];
    ASSERT_EQ(t.status, ShotStatus::converged) << describe(t);
    EXPECT_FALSE(t.near_cut_locus) << describe(t);
    ASSERT_EQ(Eigen::Map<const Vec3>(t.target.data()), bases[b]);
    const Vec3 gradient = Eigen::Map<const Vec3>(t.pT.data()) / std::sqrt(2 * t.energy);
    for (int c = 0; c < 3; ++c) {
      Real shot = 0, exact = 0;
      for (int k = 0; k < 4; ++k) {
        const TargetResult& d = r.targets[13 * b + 1 + 4 * std::size_t(c) + std::size_t(k)];
        ASSERT_EQ(d.status, ShotStatus::converged) << describe(d);
        shot += weights[k] * d.length;
        const Vec3 q = Eigen::Map<const Vec3>(d.target.data());
        exact += weights[k] * heisenberg_distance(q[0], q[1], q[2]).length;
      }
      shot /= 12 * e;
      exact /= 12 * e;
      EXPECT_NEAR(gradient[c], shot, 2e-8) << "component " << c << " of " << describe(t);
      EXPECT_NEAR(gradient[c], exact, 2e-8) << "component " << c << " of " << describe(t);
    }
  }
}

// The target (r, 0, z) is reached by the arc of half-angle phi with
// z / r^2 = f(phi) (heisenberg_distance above); its first conjugate time is
// pi / phi (T = 1: 2 pi / |p_z| with p_z = 2 phi, test 4), so it is flagged by
// the default margin 0.05 exactly when phi >= pi / 1.05 = 2.992. The next
// shortest geodesics turn by more than a full circle and are >= 1.1 times as
// long for these phi (the arc with phi' in (pi, 2 pi) and the same f: 1.12 at
// phi = 3.0), so the length criterion adds nothing off the axis. On the z-axis
// (r = 0) every rotation of the full circle is a minimiser: the conjugate point
// is at T and distinct converged shots have equal lengths.
TEST(ShootCutLocus, FlagsTargetsWhoseConjugatePointIsNear) {
  const auto f = [](Real phi) { return (2 * phi - std::sin(2 * phi)) / (8 * std::sin(phi) * std::sin(phi)); };
  // Each arc scaled to length 2 (r = 2 sin phi / phi), so one guess scale fits all.
  const auto target = [&](Real phi) {
    const Real r = 2 * std::sin(phi) / phi;
    return json_point(Vec3(r, 0, r * r * f(phi)));
  };
  const std::vector<Real> far{0.5, 1.5, 2.5, 2.9}, near{3.02, 3.1};
  std::string list;
  for (Real phi : far) list += target(phi) + ", ";
  for (Real phi : near) list += target(phi) + ", ";
  list += "[0, 0, 0.3], [0, 0, -0.5]";
  const std::string json = R"({
    "system": {"name": "heisenberg"},
    "method": {"name": "gauss_legendre", "stages": 3, "steps": 80},
    "shoot": {"q0": [0, 0, 0], "time": 1.0, "targets": {"list": [)" + list + R"(]},
      "guesses": {"toward": true, "random": {"count": 12, "scale": 4.0, "seed": 7}},
      "newton": {"tolerance": 1e-11}MARGIN},
    "backend": "cpu"})";
  const ShootResult r = shoot_json(replaced(json, "MARGIN", ""));
  ASSERT_EQ(r.targets.size(), far.size() + near.size() + 2);
  for (std::size_t i = 0; i < r.targets.size(); ++i) {
    const TargetResult& t = r.targets[i];
    ASSERT_EQ(t.status, ShotStatus::converged) << describe(t);
    const HeisenbergDistance d = heisenberg_distance(t.target[0], t.target[1], t.target[2]);
    const Real phi = std::abs(d.pz) / 2, conjugate = kPi / phi;
    EXPECT_NEAR(t.length, d.length, 1e-8 * d.length) << describe(t);
    if (i < far.size()) {
      EXPECT_FALSE(t.near_cut_locus) << describe(t);
      EXPECT_TRUE(std::isnan(t.conjugate_time)) << describe(t);  // searched up to 1.05 T
      EXPECT_GT(t.second_length, 1.1 * t.length) << describe(t);
    } else if (i < far.size() + near.size()) {
      EXPECT_TRUE(t.near_cut_locus) << describe(t);
      EXPECT_NEAR(t.conjugate_time, conjugate, 1e-3) << describe(t);
      EXPECT_GT(t.conjugate_time, 1.0) << describe(t);  // still the minimiser at T
    } else {
      EXPECT_TRUE(t.near_cut_locus) << describe(t);
      EXPECT_NEAR(t.conjugate_time, 1.0, 1e-3) << describe(t);
      EXPECT_NEAR(t.second_length, t.length, 1e-8 * t.length) << describe(t);
    }
  }
  // Margin 0: only targets already at or past a conjugate point, or with an
  // equally short second geodesic, would be flagged; the near ones are not.
  const ShootResult strict = shoot_json(replaced(json, "MARGIN", R"(, "cut_locus": {"margin": 0})"));
  for (std::size_t i = 0; i < far.size() + near.size(); ++i) {
    EXPECT_FALSE(strict.targets[i].near_cut_locus) << describe(strict.targets[i]);
    EXPECT_TRUE(std::isnan(strict.targets[i].conjugate_time)) << describe(strict.targets[i]);
  }
}

// shoot.accuracy: the step count is chosen until every target's Richardson
// estimate of |q_h(T) - q(T)| / |q1 - q0| is within it. Checked against the
// exact endpoint of the closed-form geodesic from the kept p0, for methods of
// orders 1 to 6: the true error is within the accuracy, the estimate within a
// factor 2 of it (Richardson is asymptotically exact; the Newton residual,
// <= 1e-13, is far below), and the steps are not far more than needed (the
// choice aims at half the accuracy: the worst true error is above 1/50 of it).
// Not for symplectic Euler: its q(T) error on these Heisenberg geodesics falls
// like h^2, not h (measured: 1.4e-2 at 16 steps, 1.7e-5 at 453), so the
// step count projected with its order 1 overshoots; its estimate, which
// assumes order 1, is then up to 1.5 times the true error, still within 2.
TEST(ShootAccuracy, ChosenStepsMeetTheAccuracyAgainstTheClosedForm) {
  struct Case {
    const char* method;
    Real accuracy;
    bool order_as_declared;
  };
  for (const Case& c : {Case{R"({"name": "gauss_legendre", "stages": 3})", 1e-10, true},
                        Case{R"({"name": "gauss_legendre", "stages": 2})", 1e-9, true},
                        Case{R"({"name": "gauss_legendre", "stages": 1})", 1e-6, true},
                        Case{R"({"name": "stormer_verlet"})", 1e-6, true},
                        Case{R"({"name": "symplectic_euler"})", 1e-3, false}}) {
    std::ostringstream accuracy;
    accuracy << c.accuracy;
    const ShootResult r = shoot_json(R"({
      "system": {"name": "heisenberg"}, "method": )" + std::string(c.method) + R"(,
      "shoot": {"q0": [0, 0, 0], "time": 1.0, "accuracy": )" + accuracy.str() + R"(,
        "targets": {"list": [[1, 0, 0.2], [0.5, 0.5, -0.1], [-0.8, 0.3, 0.3], [0.3, -0.6, 0.25]]},
        "guesses": {"toward": true, "random": {"count": 4, "scale": 2.0, "seed": 3}},
        "newton": {"tolerance": 1e-13}},
      "backend": "cpu"})");
    EXPECT_TRUE(r.accuracy_reached) << c.method;
    EXPECT_GE(r.passes, 2) << c.method;  // 16 steps, the first count tried, are too few for each
    Real worst = 0;
    for (const TargetResult& t : r.targets) {
      ASSERT_EQ(t.status, ShotStatus::converged) << c.method << " " << describe(t);
      Vec<6> z0;
      z0 << Vec3::Zero(), Eigen::Map<const Vec3>(t.p0.data());
      const Vec3 q1 = Eigen::Map<const Vec3>(t.target.data());
      const Real error = (heisenberg_exact(z0, 1.0).head<3>() - q1).norm() / q1.norm();
      worst = std::max(worst, error);
      EXPECT_LE(error, c.accuracy) << c.method << " " << r.steps << " steps, " << describe(t);
      EXPECT_GT(t.error_estimate, error / 2) << c.method << " " << describe(t);
      EXPECT_LT(t.error_estimate, error * 2) << c.method << " " << describe(t);
    }
    if (c.order_as_declared)
      EXPECT_GT(worst, c.accuracy / 50) << c.method << ": " << r.steps << " steps are far more than needed";
  }
}

// ===========================================================================
// 11. Multiple shooting (its condensed Newton step: test_shoot_tangent.cpp).
// Where both converge, multiple and single shooting find the same geodesics:
// the same discrete flow from the same p0 (multiple shooting's report
// restarts each arc at its node, which agrees with the flow from p0 to the
// tolerance times the arcs' growth). Bounds as for cpu against reference.
TEST(ShootMultipleHeisenberg, SameMinimisersAsSingleShooting) {
  const std::string json = R"({
    "system": {"name": "heisenberg"},
    "method": {"name": "gauss_legendre", "stages": 3, "steps": 40},
    "shoot": {"q0": [0, 0, 0], "time": 1.0NODES,
      "targets": {"grid": {"min": [-1, -0.5, -0.3], "max": [1, 0.5, 0.3], "count": [4, 3, 3]}},
      "guesses": {"toward": true, "random": {"count": 4, "scale": 2.0, "seed": 2}},
      "newton": {"tolerance": 1e-12}},
    "backend": "cpu"})";
  const ShootResult single = shoot_json(replaced(json, "NODES", ""));
  for (int nodes : {2, 4, 8}) {
    const ShootResult multiple = shoot_json(replaced(json, "NODES", ", \"nodes\": " + std::to_string(nodes)));
    ASSERT_EQ(single.targets.size(), multiple.targets.size());
    int both = 0;
    for (std::size_t i = 0; i < single.targets.size(); ++i) {
      const TargetResult &a = single.targets[i], &b = multiple.targets[i];
      if (a.status != ShotStatus::converged || b.status != ShotStatus::converged) continue;
      ++both;
      EXPECT_NEAR(a.length, b.length, 1e-10 * a.length) << nodes << " nodes\n" << describe(a) << "\n" << describe(b);
      EXPECT_NEAR(a.energy, b.energy, 1e-9 * a.energy) << nodes << " nodes, " << describe(a);
      for (std::size_t c = 0; c < 3; ++c) {
        EXPECT_NEAR(a.p0[c], b.p0[c], 1e-8 * (1 + std::abs(a.p0[c]))) << nodes << " nodes, " << describe(a);
        EXPECT_NEAR(a.pT[c], b.pT[c], 1e-8 * (1 + std::abs(a.pT[c]))) << nodes << " nodes, " << describe(a);
      }
      EXPECT_EQ(std::isnan(a.conjugate_time), std::isnan(b.conjugate_time)) << describe(a);
      EXPECT_EQ(a.near_cut_locus, b.near_cut_locus) << describe(a);
    }
    EXPECT_EQ(both, 36) << nodes << " nodes";
  }
}

// ===========================================================================
// 12. Bad shooting configs: ConfigError at the JSON path, naming the problem.

const char* const kGoodShoot = R"({
  "system": {"name": "heisenberg"},
  "method": {"name": "gauss_legendre", "stages": 2, "steps": 20},
  "shoot": {"q0": [0, 0, 0], "time": 1.0,
    "targets": {"list": [[1, 0, 0], [0, 1, 0.1]]},
    "guesses": {"toward": true},
    "newton": {"tolerance": 1e-10}},
  "backend": "cpu"})";

void expect_shoot_config_error(const std::string& json, const std::string& path, const std::string& words) {
  try {
    parse_shoot_config(json, "test");
    ADD_FAILURE() << "accepted, expected an error at " << path << "\n" << json;
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), path) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what() << "\n(expected: " << words << ")";
  }
}

TEST(ShootConfig, GoodConfigParses) {
  const ShootConfig c = parse_shoot_config(kGoodShoot, "test");
  EXPECT_EQ(c.run.steps, 20);
  EXPECT_DOUBLE_EQ(c.run.dt, 0.05);
  EXPECT_EQ(c.shoot.targets.size(), 2u);
  EXPECT_EQ(c.shoot.guesses_per_target(), 1);
  // dt instead of steps: 0.05 divides 1.0 into 20 steps.
  const ShootConfig d = parse_shoot_config(replaced(kGoodShoot, R"("steps": 20)", R"("dt": 0.05)"), "test");
  EXPECT_EQ(d.run.steps, 20);
}

TEST(ShootConfig, HolonomicSystemsAreRefused) {
  expect_shoot_config_error(replaced(replaced(kGoodShoot, "heisenberg", "spherical_pendulum"),
                                     R"("name": "gauss_legendre", "stages": 2)", R"("name": "rattle")"),
                            "system.name", "spherical_pendulum");
  // Mixed (holonomic + nonholonomic) systems: Gauss-Legendre does not keep h(q) = 0.
  expect_shoot_config_error(replaced(replaced(kGoodShoot, "heisenberg", "sphere_contact"),
                                     R"("name": "gauss_legendre", "stages": 2)", R"("name": "rattle_midpoint")"),
                            "system.name", "sphere_contact");
}

TEST(ShootConfig, PointsOfTheWrongLength) {
  expect_shoot_config_error(replaced(kGoodShoot, R"("q0": [0, 0, 0])", R"("q0": [0, 0])"), "shoot.q0",
                            "has 2 numbers, expected 3");
  expect_shoot_config_error(replaced(kGoodShoot, "[0, 1, 0.1]", "[0, 1]"), "shoot.targets.list[1]",
                            "has 2 numbers, expected 3");
}

TEST(ShootConfig, GridCountZero) {
  expect_shoot_config_error(
      replaced(kGoodShoot, R"("list": [[1, 0, 0], [0, 1, 0.1]])",
               R"("grid": {"min": [0, 0, 0], "max": [1, 1, 1], "count": [2, 2, 0]})"),
      "shoot.targets.grid.count[2]", ">= 1");
}

TEST(ShootConfig, OneKindOfTargets) {
  expect_shoot_config_error(
      replaced(kGoodShoot, R"("list": [[1, 0, 0], [0, 1, 0.1]])",
               R"("list": [[1, 0, 0]], "random": {"min": [0, 0, 0], "max": [1, 1, 1], "count": 3})"),
      "shoot.targets.random", "only one of");
  // The path names a key that is there: with list and grid, not "random".
  expect_shoot_config_error(
      replaced(kGoodShoot, R"("list": [[1, 0, 0], [0, 1, 0.1]])",
               R"("list": [[1, 0, 0]], "grid": {"min": [0, 0, 0], "max": [1, 1, 1], "count": [2, 2, 2]})"),
      "shoot.targets.grid", "only one of");
  expect_shoot_config_error(replaced(kGoodShoot, R"("list": [[1, 0, 0], [0, 1, 0.1]])", ""), "shoot.targets.list",
                            "is missing");
}

TEST(ShootConfig, GuessesAreRequired) {
  expect_shoot_config_error(replaced(kGoodShoot, R"("guesses": {"toward": true},)", ""), "shoot.guesses",
                            "is missing");
  expect_shoot_config_error(replaced(kGoodShoot, R"("guesses": {"toward": true})", R"("guesses": {"toward": false})"),
                            "shoot.guesses.list", "no initial guesses");
}

TEST(ShootConfig, StepsAndDt) {
  expect_shoot_config_error(replaced(kGoodShoot, R"("steps": 20)", R"("steps": 20, "dt": 0.05)"), "method.steps",
                            "not both");
  expect_shoot_config_error(replaced(kGoodShoot, R"(, "steps": 20)", ""), "method.steps", "give one of");
  expect_shoot_config_error(replaced(kGoodShoot, R"("steps": 20)", R"("dt": 0.3)"), "method.dt",
                            "must divide shoot.time");
}

TEST(ShootConfig, CutLocusMargin) {
  EXPECT_EQ(parse_shoot_config(kGoodShoot, "test").shoot.cut_locus_margin, 0.05);
  const std::string with = replaced(kGoodShoot, R"("guesses": {"toward": true},)",
                                    R"("guesses": {"toward": true}, "cut_locus": {"margin": 0.2},)");
  ASSERT_NE(with, kGoodShoot);
  EXPECT_EQ(parse_shoot_config(with, "test").shoot.cut_locus_margin, 0.2);
  expect_shoot_config_error(replaced(with, "0.2", "-0.1"), "shoot.cut_locus.margin", ">= 0");
  expect_shoot_config_error(replaced(with, "0.2", "1.5"), "shoot.cut_locus.margin", "at most 1");
  expect_shoot_config_error(replaced(with, "0.2", R"("wide")"), "shoot.cut_locus.margin", "must be a number");
  expect_shoot_config_error(replaced(with, R"("margin")", R"("margins")"), "shoot.cut_locus.margins", "unknown key");
}

// Without shoot.accuracy nothing is estimated; with it the steps may be left out.
TEST(ShootConfig, Accuracy) {
  EXPECT_EQ(parse_shoot_config(kGoodShoot, "test").shoot.accuracy, 0);
  const std::string with = replaced(replaced(kGoodShoot, R"(, "steps": 20)", ""), R"("time": 1.0,)",
                                    R"("time": 1.0, "accuracy": 1e-9,)");
  const ShootConfig c = parse_shoot_config(with, "test");
  EXPECT_EQ(c.shoot.accuracy, 1e-9);
  EXPECT_EQ(c.run.steps, ShootSpec::start_steps);
  expect_shoot_config_error(replaced(with, "1e-9", "0"), "shoot.accuracy", "must be positive");
  expect_shoot_config_error(replaced(with, "1e-9", "1e-15"), "shoot.accuracy", "between 1e-13");
  expect_shoot_config_error(replaced(with, "1e-9", "0.5"), "shoot.accuracy", "between 1e-13");
  const ShootResult r = shoot_json(kGoodShoot);
  for (const TargetResult& t : r.targets) EXPECT_TRUE(std::isnan(t.error_estimate)) << describe(t);
  EXPECT_EQ(r.passes, 1);
}

TEST(ShootConfig, Nodes) {
  EXPECT_EQ(parse_shoot_config(kGoodShoot, "test").shoot.nodes, 1);
  const std::string with = replaced(kGoodShoot, R"("time": 1.0,)", R"("time": 1.0, "nodes": 4,)");
  EXPECT_EQ(parse_shoot_config(with, "test").shoot.nodes, 4);
  expect_shoot_config_error(replaced(with, R"("nodes": 4)", R"("nodes": 3)"), "shoot.nodes", "must divide the 20 steps");
  expect_shoot_config_error(replaced(with, R"("nodes": 4)", R"("nodes": 0)"), "shoot.nodes", "between 1 and 16");
  expect_shoot_config_error(replaced(with, R"("nodes": 4)", R"("nodes": 17)"), "shoot.nodes", "between 1 and 16");
  // With shoot.accuracy the first step count is 16 rounded up to a multiple of the nodes.
  const std::string chosen = replaced(replaced(with, R"(, "steps": 20)", ""), R"("nodes": 4)",
                                      R"("nodes": 3, "accuracy": 1e-8)");
  EXPECT_EQ(parse_shoot_config(chosen, "test").run.steps, 18);
}

TEST(ShootConfig, StallIterations) {
  EXPECT_EQ(parse_shoot_config(kGoodShoot, "test").shoot.stall_iterations, 0);
  const std::string with = replaced(kGoodShoot, R"("tolerance": 1e-10)", R"("tolerance": 1e-10, "stall_iterations": 5)");
  EXPECT_EQ(parse_shoot_config(with, "test").shoot.stall_iterations, 5);
  expect_shoot_config_error(replaced(with, R"("stall_iterations": 5)", R"("stall_iterations": -1)"),
                            "shoot.newton.stall_iterations", "between 0 and 10000");
  expect_shoot_config_error(replaced(with, R"("stall_iterations": 5)", R"("stall_iterations": 2.5)"),
                            "shoot.newton.stall_iterations", "integer");
}

TEST(ShootConfig, UnknownNewtonKey) {
  expect_shoot_config_error(replaced(kGoodShoot, R"("tolerance": 1e-10)", R"("tolerence": 1e-10)"),
                            "shoot.newton.tolerence", "unknown key");
}

// ===========================================================================
// 13. Line-search trials without the tangent (shoot.hpp, with_tangent): a
// backtracking trial integrates q(T) alone, and an accepted one is integrated
// again with its tangent. That must leave Newton's iterates as they were:
// against the textbook damped Newton written out here (every trial with its
// tangent), the same status and iterations for every shot, and the same p0 to
// roundoff amplified by the iterations (1e-8) where it converged. The shots
// start from scattered guesses, so most of them backtrack; the counting flow
// checks that trials without the tangent were taken.

// The shots of sections 13 and 14, from scattered guesses. Heisenberg GL3 at
// 16 steps: 60 targets across the grid's range, each with one guess.
template <int N>
struct Shot {
  Vec<N> target, guess;
};
struct HeisenbergShots {
  Heisenberg sys;
  ShootControl ctl = control(1.0 / 16, 16, 1e-12);
  Vec3 q0 = Vec3::Zero();
  std::vector<Shot<3>> shots;
};
HeisenbergShots heisenberg_shots() {
  HeisenbergShots h;
  h.ctl.max_iterations = 40;
  std::mt19937_64 rng(7);
  std::normal_distribution<Real> normal(0, 2);
  for (int t = 0; t < 60; ++t) {
    const Vec3 target(-1.2 + 0.04 * t, 0.3 * std::sin(Real(t)), 0.4 * std::cos(Real(3 * t)));
    const Vec3 guess(normal(rng), normal(rng), normal(rng));
    h.shots.push_back({target, guess});
  }
  return h;
}
// The car in its bowl at T = 4, GL2 160 steps, multiple shooting over 4 nodes: 12 targets.
struct BowlShots {
  ParallelParking sys;
  ShootControl ctl = control(4.0 / 160, 160, 1e-10);
  Vec<4> q0 = Vec<4>::Zero();
  std::vector<Shot<4>> shots;
};
BowlShots bowl_shots() {
  BowlShots b;
  b.sys.prm.potential = ParallelParking::Parameters::Potential::bowl;
  b.ctl.nodes = 4;
  b.ctl.max_iterations = 60;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<Real> box(-1, 1);
  std::normal_distribution<Real> normal(0, 1);
  for (int t = 0; t < 12; ++t) {
    const Vec<4> target(box(rng), box(rng), box(rng) / 2, box(rng) / 2);
    const Vec<4> guess(normal(rng), normal(rng), normal(rng), normal(rng));
    b.shots.push_back({target, guess});
  }
  return b;
}

struct StepCount {
  long with_tangent = 0, without = 0;
};
StepCount step_count;

// The method's own flow, counting its steps with and without the tangent.
template <class M>
struct CountingFlow : CompiledFlow<M> {
  template <class S, int C>
  static Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations,
                     Tangent<S, C>* tangent, typename MethodFlow<M>::template Carry<S>* carry = nullptr) {
    ++(tangent ? step_count.with_tangent : step_count.without);
    return CompiledFlow<M>::step(sys, s, h, opt, iterations, tangent, carry);
  }
};

// Damped Newton with the tangent integrated on every trial (Armijo, halving).
template <class S, class Flow>
ShotStatus textbook_newton(const S& sys, const ShootControl& ctl, const Vec<S::dof>& q0, const Vec<S::dof>& target,
                           Vec<S::dof>& p, int& iterations) {
  constexpr int n = S::dof;
  Vec<n> qT;
  Mat<n, n> jac;
  ShotCarry<S, Flow> carry;
  if (shoot_endpoint<S, Flow>(sys, ctl, carry, q0, p, qT, &jac) != Status::ok) return ShotStatus::integration_failed;
  Real residual = (qT - target).norm();
  for (;;) {
    if (residual <= ctl.tolerance) return ShotStatus::converged;
    if (iterations >= ctl.max_iterations) return ShotStatus::max_iterations;
    const Vec<n> d = jac.partialPivLu().solve(target - qT);
    ++iterations;
    bool accepted = false;
    Real alpha = 1;
    for (int b = 0; b <= ctl.max_backtracks && !accepted; ++b, alpha /= 2) {
      Vec<n> trial_qT;
      Mat<n, n> trial_jac;
      if (shoot_endpoint<S, Flow>(sys, ctl, carry, q0, p + alpha * d, trial_qT, &trial_jac) != Status::ok) continue;
      const Real trial = (trial_qT - target).norm();
      if (trial <= (1 - Real(1e-4) * alpha) * residual) {
        p += alpha * d;
        qT = trial_qT;
        jac = trial_jac;
        residual = trial;
        accepted = true;
      }
    }
    if (!accepted) return ShotStatus::line_search_failed;
  }
}

TEST(ShootNewton, TrialsWithoutTangentLeaveTheIteratesAsTheyWere) {
  using Flow = CountingFlow<GaussLegendre<3>>;
  const auto [sys, ctl, q0, shots] = heisenberg_shots();
  int converged = 0, backtracked = 0;
  long with_tangent = 0, with_tangent_textbook = 0, without = 0;
  for (int t = 0; t < int(shots.size()); ++t) {
    const auto [target, guess] = shots[std::size_t(t)];
    Vec3 p = guess, p_textbook = guess;
    int iterations = 0, iterations_textbook = 0;
    Real residual;
    step_count = {};
    ShotCarry<Heisenberg, Flow> carry;
    const ShotStatus st = shoot_newton<Heisenberg, Flow>(sys, ctl, carry, q0, target, p, iterations, residual);
    const StepCount ours = step_count;
    step_count = {};
    const ShotStatus textbook = textbook_newton<Heisenberg, Flow>(sys, ctl, q0, target, p_textbook, iterations_textbook);
    ASSERT_EQ(step_count.without, 0);
    // Each iteration's trials: the textbook one integrates the tangent on all
    // of them, so more integrations than iterations + 1 means it backtracked.
    const long integrations = step_count.with_tangent / ctl.steps;
    backtracked += integrations > iterations_textbook + 1;
    with_tangent += ours.with_tangent;
    EXPECT_EQ(st, textbook) << "target " << t;
    EXPECT_EQ(iterations, iterations_textbook) << "target " << t;
    if (st == ShotStatus::converged && textbook == ShotStatus::converged) {
      ++converged;
      for (int c = 0; c < 3; ++c) EXPECT_NEAR(p[c], p_textbook[c], 1e-8 * (1 + std::abs(p[c]))) << "target " << t;
      EXPECT_LE(residual, ctl.tolerance);
    }
    without += ours.without;
    with_tangent_textbook += step_count.with_tangent;
  }
  EXPECT_GE(converged, 30);
  EXPECT_GE(backtracked, 30);
  EXPECT_GT(without, 0);
  EXPECT_LT(with_tangent, with_tangent_textbook);
}

// The same for multiple shooting: the car in its bowl at T = 4, 4 nodes on
// the straight segment, sweeps that all carry the tangent.
template <class S, class Flow>
ShotStatus textbook_multiple_newton(const S& sys, const ShootControl& ctl, const Vec<S::dof>& target,
                                    ShootingNodes<S>& w, int& iterations) {
  constexpr int n = S::dof;
  Real residual;
  ShotCarry<S, Flow> carry;
  if (shooting_sweep<S, Flow>(sys, ctl, carry, target, w, residual) != Status::ok)
    return ShotStatus::integration_failed;
  Vec<2 * n> base[kMaxShootingNodes], dz[kMaxShootingNodes];
  for (;;) {
    if (residual <= ctl.tolerance) return ShotStatus::converged;
    if (iterations >= ctl.max_iterations) return ShotStatus::max_iterations;
    if (!shooting_direction<S>(ctl, w, dz)) return ShotStatus::singular_jacobian;
    ++iterations;
    for (int k = 0; k < ctl.nodes; ++k) base[k] = w.z[k];
    bool accepted = false;
    Real alpha = 1;
    for (int b = 0; b <= ctl.max_backtracks && !accepted; ++b, alpha /= 2) {
      for (int k = 0; k < ctl.nodes; ++k) w.z[k] = base[k] + alpha * dz[k];
      Real trial;
      if (shooting_sweep<S, Flow>(sys, ctl, carry, target, w, trial) == Status::ok &&
          trial <= (1 - Real(1e-4) * alpha) * residual) {
        residual = trial;
        accepted = true;
      }
    }
    if (!accepted) return ShotStatus::line_search_failed;
  }
}

TEST(ShootNewton, MultipleShootingTrialsWithoutTangentLeaveTheIteratesAsTheyWere) {
  using Flow = CountingFlow<GaussLegendre<2>>;
  const auto [sys, ctl, q0, shots] = bowl_shots();
  int converged = 0;
  long with_tangent = 0, with_tangent_textbook = 0, without = 0;
  for (int t = 0; t < int(shots.size()); ++t) {
    const auto [target, guess] = shots[std::size_t(t)];
    ShootingNodes<ParallelParking> ours, textbook;
    ShotCarry<ParallelParking, Flow> carry;
    ASSERT_TRUE((initial_nodes<ParallelParking, Flow>(sys, ctl, carry, q0, guess, target, false, ours)));
    textbook = ours;
    int iterations = 0, iterations_textbook = 0;
    Real residual;
    step_count = {};
    const ShotStatus st =
        multiple_shoot_newton<ParallelParking, Flow>(sys, ctl, carry, target, ours, iterations, residual);
    with_tangent += step_count.with_tangent;
    without += step_count.without;
    step_count = {};
    const ShotStatus expected =
        textbook_multiple_newton<ParallelParking, Flow>(sys, ctl, target, textbook, iterations_textbook);
    with_tangent_textbook += step_count.with_tangent;
    EXPECT_EQ(st, expected) << "target " << t;
    EXPECT_EQ(iterations, iterations_textbook) << "target " << t;
    if (st == ShotStatus::converged && expected == ShotStatus::converged) {
      ++converged;
      for (int k = 0; k < ctl.nodes; ++k)
        for (int c = 0; c < 8; ++c)
          EXPECT_NEAR(ours.z[k][c], textbook.z[k][c], 1e-8 * (1 + std::abs(textbook.z[k][c])))
              << "target " << t << " node " << k;
    }
  }
  EXPECT_GE(converged, 6);
  EXPECT_GT(without, 0);
  EXPECT_LT(with_tangent, with_tangent_textbook);
}

// ===========================================================================
// 14. shoot.newton.stall_iterations (shoot.hpp, Progress): a shot stops as
// `stalled` once that many iterations in a row each cut the residual by less
// than 10%. The residual after each iteration is read off solves stopped
// after 1, 2, ... iterations (without the test, whose iterates are the same),
// and the rule applied to that sequence says where the shot must stop: there,
// with that residual; a shot the rule never stops ends as it did without it.

struct Outcome {
  ShotStatus status;
  int iterations;
  Real residual;
};

// solve(ctl) runs one shot under ctl; returns how many shots the rule stopped.
template <class Solve>
int expect_stall_rule(ShootControl ctl, int stall, Solve&& solve, const std::string& shot) {
  ctl.stall_iterations = 0;
  const int most = ctl.max_iterations;
  std::vector<Real> residual{solve([&] {
                               ShootControl c = ctl;
                               c.max_iterations = 0;
                               return c;
                             }()).residual};
  Outcome expected{ShotStatus::max_iterations, most, 0};
  int slow = 0;
  for (int m = 1; m <= most; ++m) {
    ShootControl c = ctl;
    c.max_iterations = m;
    const Outcome o = solve(c);
    if (o.status != ShotStatus::max_iterations) {  // ended within m iterations without the rule
      expected = o;
      break;
    }
    residual.push_back(o.residual);
    slow = residual[std::size_t(m)] > Real(0.9) * residual[std::size_t(m - 1)] ? slow + 1 : 0;
    if (slow == stall) {
      expected = {ShotStatus::stalled, m, o.residual};
      break;
    }
    expected.residual = o.residual;
  }
  ctl.max_iterations = most;
  ctl.stall_iterations = stall;
  const Outcome o = solve(ctl);
  EXPECT_EQ(o.status, expected.status) << shot;
  EXPECT_EQ(o.iterations, expected.iterations) << shot;
  EXPECT_EQ(o.residual, expected.residual) << shot;  // the same iterates, so the same bits
  return expected.status == ShotStatus::stalled;
}

TEST(ShootNewton, StalledShotsStopAfterTheirSlowIterations) {
  using Flow = MethodFlow<GaussLegendre<3>>;
  const auto [sys, ctl, q0, shots] = heisenberg_shots();
  int stalled = 0;
  for (int t = 0; t < int(shots.size()); ++t) {
    const auto [target, guess] = shots[std::size_t(t)];
    stalled += expect_stall_rule(ctl, 5, [&](const ShootControl& c) {
      Vec3 p = guess;
      Outcome o{};  // iterations from 0
      ShotCarry<Heisenberg, Flow> carry;
      o.status = shoot_newton<Heisenberg, Flow>(sys, c, carry, q0, target, p, o.iterations, o.residual);
      return o;
    }, "target " + std::to_string(t));
  }
  // The rule is exercised (shots stop) and is not all there is (the rest end as before).
  RecordProperty("stalled", stalled);
  EXPECT_GE(stalled, 3);
  EXPECT_LE(stalled, 30);
}

TEST(ShootNewton, StalledMultipleShootingStopsAfterItsSlowIterations) {
  using Flow = MethodFlow<GaussLegendre<2>>;
  const auto [sys, ctl, q0, shots] = bowl_shots();
  int stalled = 0;
  for (int t = 0; t < int(shots.size()); ++t) {
    const auto [target, guess] = shots[std::size_t(t)];
    stalled += expect_stall_rule(ctl, 3, [&](const ShootControl& c) {
      ShootingNodes<ParallelParking> w;
      ShotCarry<ParallelParking, Flow> carry;
      Outcome o{};  // iterations from 0
      if (!initial_nodes<ParallelParking, Flow>(sys, c, carry, q0, guess, target, false, w))
        return Outcome{ShotStatus::integration_failed, 0, 0};
      o.status = multiple_shoot_newton<ParallelParking, Flow>(sys, c, carry, target, w, o.iterations, o.residual);
      return o;
    }, "target " + std::to_string(t));
  }
  RecordProperty("stalled", stalled);
  EXPECT_GE(stalled, 1);
}

}  // namespace
}  // namespace tether

// Constrained Hamiltonian Monte Carlo (include/tether/sampling/hmc.hpp,
// `tether sample`). Covered here:
//  1. exact marginals by one-sample Kolmogorov-Smirnov tests on independent
//     chains (the last draw of each), with the power of each test shown on a
//     deliberately wrong sampler that the same test must reject:
//     a. the spherical pendulum's height (uniform surface measure);
//     b. the double pendulum's relative angle, whose surface measure is NOT
//        uniform in the angles (derived below); uniform angles fail;
//     c. a free rigid body's rotation angle under the Haar measure;
//     d. a statistical target: the Fisher-Bingham density on S^2, axially
//        symmetric and in a rotated frame (general mean and matrix A);
//  2. the reversibility check fires where Newton finds another root backwards;
//  3. a Newton failure is a rejection with its reason, the chain unharmed;
//  4. the draws do not depend on threads, batch size or backend scheduling;
//     the reference backend agrees with cpu;
//  5. dual averaging reaches its target acceptance;
//  6. bad sampling configs, each named by its JSON path;
//  7. draws.nc read back through the netCDF library: ArviZ's layout, every value;
//  8. R-hat and ESS against ArviZ's on fixed draws (tests/fixtures);
//  9. every (system, method) pair of the registry that can sample does;
// 10. `tether run` from canonical states: "canonical" gives the draws of
//     tether sample's chains and the exact marginal where "thermal" does not;
//     "draws" starts from a draws.nc; bad starts named by their path;
// 11. chains in tiles (sampling/hmc_tile.hpp): the momenta drawn bead by
//     bead are the one-thread transition's to the bit, and its transitions
//     take the one-thread transition's decisions, states to roundoff;
// 12. dynamic integration time (dynamic_transition): the marginals of 1 with
//     the power of each test on broken variants, the reversibility check,
//     the subtree bookkeeping, the trajectory's bounds, the engine;
// 13. a metric other than the mass (sampling/metric.hpp): its algebra, the
//     log-determinant term's gradient and its vanishing where M = M0, the
//     marginals of 1 with each metric (the power: without the term they
//     fail), Stan's windows and estimate, adaptation that finds a target's
//     scales, the engine and bad configs.
// Every expected value is derived from the mathematics, not read off output.
#include <netcdf.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <unistd.h>

#include <fstream>
#include <Eigen/Geometry>
#include <nlohmann/json.hpp>

#include "support.hpp"
#include "tether/engine/output.hpp"
#include "tether/methods/rattle.hpp"
#include "holonomic_cases.hpp"
#include "tether/methods/composition.hpp"
#include "tether/sampling/hmc_tile.hpp"
#include "tether/systems/chain.hpp"
#include "tether/systems/double_pendulum.hpp"
#include "tether/systems/fisher_bingham.hpp"
#include "tether/systems/four_bar.hpp"
#include "tether/systems/rigid_body.hpp"
#include "tether/systems/spherical_pendulum.hpp"

namespace tether {
namespace {

constexpr Real kPi = 3.14159265358979323846;

// One transition of the chain whose state is s: the library keeps a chain in
// memory (ChainSlot), here s itself with room for its proposal (and a
// dynamic trajectory) beside it.
template <class S, class M>
HmcDraw transition(const S& sys, const M& method, const HmcControl& ctl, Real h, std::uint64_t chain,
                   std::uint64_t iteration, PhaseState<S>& s) {
  Vec<S::dof> proposal_q, proposal_p;
  std::vector<Real> tree(ctl.dynamic ? std::size_t(DynamicTree::vectors(ctl.max_depth) * S::dof) : 0);
  const ChainSlot slot{s.q.data(), s.p.data(), proposal_q.data(), proposal_p.data(), 1, tree.data()};
  return tether::transition(sys, method, ctl, h, chain, iteration, slot);
}

// ---------------------------------------------------------------------------
// Kolmogorov-Smirnov: the statistic D_n = sup |F_n - F| of a sample against a
// continuous CDF, and its asymptotic p-value P(sqrt(n) D > x) =
// 2 sum_k (-1)^(k-1) exp(-2 k^2 x^2) (with Stephens' small-n correction).
Real ks_statistic(std::vector<Real> x, const std::function<Real(Real)>& cdf) {
  std::sort(x.begin(), x.end());
  const Real n = Real(x.size());
  Real d = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const Real f = cdf(x[i]);
    d = std::max({d, Real(i + 1) / n - f, f - Real(i) / n});
  }
  return d;
}
Real ks_p_value(Real d, std::size_t count) {
  const Real n = Real(count), t = (std::sqrt(n) + 0.12 + 0.11 / std::sqrt(n)) * d;
  Real p = 0;
  for (int k = 1; k <= 100; ++k) p += 2 * ((k % 2) ? 1 : -1) * std::exp(-2 * k * k * t * t);
  return std::clamp<Real>(p, 0, 1);
}

// The last state of each of `chains` independent chains, each started at
// `start` and run for `iterations` transitions with step size h: independent
// draws, exact once the chains have forgotten their common start.
template <class S, class M = Rattle>
std::vector<PhaseState<S>> final_states(const S& sys, const HmcControl& ctl, Real h, int chains, int iterations,
                                        const Vec<S::dof>& start, std::int64_t* rejected_by_reversibility = nullptr) {
  std::vector<PhaseState<S>> out(static_cast<std::size_t>(chains));
  std::int64_t reversibility = 0;
#pragma omp parallel for schedule(dynamic, 16) reduction(+ : reversibility)
  for (int c = 0; c < chains; ++c) {
    PhaseState<S> s = test::make_state<S>(start, Vec<S::dof>::Zero());
    for (int k = 0; k < iterations; ++k)
      if (transition(sys, M{}, ctl, h, std::uint64_t(c), std::uint64_t(k), s).outcome ==
          HmcOutcome::reversibility)
        ++reversibility;
    out[std::size_t(c)] = s;
  }
  if (rejected_by_reversibility) *rejected_by_reversibility = reversibility;
  return out;
}

HmcControl control(Real temperature, int steps, std::uint64_t seed) {
  HmcControl c;
  c.temperature = temperature;
  c.steps = steps;
  c.seed = seed;
  return c;
}

// A test at this level passes a correct sampler with probability 0.999 and
// must reject the wrong ones far beyond it (p < 1e-6 is demanded of them).
constexpr Real kAlpha = 1e-3, kPowerP = 1e-6;

// ===========================================================================
// 1a. Spherical pendulum, V = m g z on the sphere |q| = l with M = m I. The
// metric M induces on the sphere is m times the round one, so sigma_N is
// uniform, and by Archimedes' theorem z is uniform on [-l, l] under it:
// z has density proportional to exp(-a z), a = m g / kT, on [-l, l], so
//   F(z) = (exp(a l) - exp(-a z)) / (exp(a l) - exp(-a l)).
// Power: without the momentum projection p keeps its normal component, whose
// kinetic energy enters H but not the motion: the chain is biased upward.
Real sphere_height_cdf(Real z, Real a, Real l) {
  return (std::exp(a * l) - std::exp(-a * z)) / (std::exp(a * l) - std::exp(-a * l));
}

// (It works through the energy: RATTLE's first step removes the normal part
// from the motion, so the bias grows with the energy error, i.e. with h.)
// Power, second: without the Metropolis test the O(h^2) energy error is
// never corrected. Both at a step (h = 0.2, kT = 2) where the right sampler
// accepts ~90% of proposals.
TEST(HmcMarginal, SphericalPendulumHeight) {
  SphericalPendulum sys;
  const Real kT = 2, a = sys.prm.mass * sys.prm.gravity / kT;
  const Vec3 equator(1, 0, 0);
  auto heights = [&](const HmcControl& ctl) {
    std::vector<Real> z;
    for (const auto& s : final_states(sys, ctl, 0.2, 4000, 150, equator)) z.push_back(s.q[2]);
    return z;
  };
  auto cdf = [&](Real z) { return sphere_height_cdf(z, a, sys.prm.length); };
  const HmcControl right = control(kT, 10, 21);
  const auto z = heights(right);
  EXPECT_GT(ks_p_value(ks_statistic(z, cdf), z.size()), kAlpha) << "D = " << ks_statistic(z, cdf);

  HmcControl unprojected = right;
  unprojected.project_momentum = false;
  const auto zu = heights(unprojected);
  EXPECT_LT(ks_p_value(ks_statistic(zu, cdf), zu.size()), kPowerP) << "the test cannot tell an unprojected sampler";
  HmcControl unchecked = right;
  unchecked.metropolis = false;
  const auto zm = heights(unchecked);
  EXPECT_LT(ks_p_value(ks_statistic(zm, cdf), zm.size()), kPowerP) << "the test cannot tell a sampler without Metropolis";
}

// ===========================================================================
// 1b. Double pendulum in Cartesian coordinates, q = (x1, x2) in R^2 x R^2,
// |x1| = l1, |x2 - x1| = l2, M = diag(m1, m1, m2, m2). In the angles from
// the downward vertical, x1 = l1 (sin t1, -cos t1), x2 = x1 + l2 (sin t2, -cos t2),
// the metric M induces is the Lagrangian mass matrix
//   [[(m1 + m2) l1^2, m2 l1 l2 cos(t1 - t2)], [m2 l1 l2 cos(t1 - t2), m2 l2^2]],
// of determinant m2 l1^2 l2^2 (m1 + m2 sin^2(t1 - t2)). So sigma_N =
// sqrt(det) dt1 dt2 is NOT uniform in the angles. Without gravity (V = 0)
// the relative angle d = t1 - t2 (mod 2 pi, in (-pi, pi]) has density
// proportional to sqrt(m1 + m2 sin^2 d), whatever kT (t1 integrates out).
// Power: the angles drawn uniformly (what the `thermal` initial sampler does,
// and what sampling in the angles with a flat prior would give) fail.
Real relative_angle(const Vec<4>& q) {
  const Real t1 = std::atan2(q[0], -q[1]), t2 = std::atan2(q[2] - q[0], -(q[3] - q[1]));
  Real d = t1 - t2;
  while (d > kPi) d -= 2 * kPi;
  while (d <= -kPi) d += 2 * kPi;
  return d;
}

// The CDF of d on (-pi, pi] by Simpson's rule on a fine grid (error ~1e-12).
std::function<Real(Real)> relative_angle_cdf(Real m1, Real m2) {
  constexpr int grid = 4000;
  auto density = [=](Real d) { return std::sqrt(m1 + m2 * std::sin(d) * std::sin(d)); };
  const Real dx = 2 * kPi / grid;
  std::vector<Real> cumulative(grid + 1, 0);
  for (int i = 0; i < grid; ++i) {
    const Real x0 = -kPi + i * dx;
    cumulative[std::size_t(i + 1)] =
        cumulative[std::size_t(i)] + dx / 6 * (density(x0) + 4 * density(x0 + dx / 2) + density(x0 + dx));
  }
  return [=](Real d) {
    const Real u = (d + kPi) / dx;
    const int i = std::clamp(int(u), 0, grid - 1);
    const Real x0 = -kPi + i * dx, t = d - x0;  // within the cell: Simpson again from x0 to d
    const Real part = t / 6 * (density(x0) + 4 * density(x0 + t / 2) + density(d));
    return (cumulative[std::size_t(i)] + part) / cumulative[grid];
  };
}

TEST(HmcMarginal, DoublePendulumRelativeAngleFollowsTheSurfaceMeasure) {
  DoublePendulum sys;
  sys.prm.gravity = 0;
  sys.prm.mass1 = 1;
  sys.prm.mass2 = 16;  // density from 1 to sqrt(17): far from uniform
  const auto cdf = relative_angle_cdf(sys.prm.mass1, sys.prm.mass2);
  const Vec<4> start(1, 0, 1, -1);  // t1 = pi/2, t2 = 0
  std::vector<Real> d;
  for (const auto& s : final_states(sys, control(1.0, 20, 33), 0.05, 4000, 60, start)) d.push_back(relative_angle(s.q));
  EXPECT_GT(ks_p_value(ks_statistic(d, cdf), d.size()), kAlpha) << "D = " << ks_statistic(d, cdf);

  // Power: the same number of independent uniform angles.
  std::vector<Real> uniform;
  for (std::uint64_t i = 0; i < d.size(); ++i) {
    CounterRng rng(99, i);
    Real x = 2 * kPi * (rng.uniform() - rng.uniform());  // t1 - t2 with both uniform
    while (x > kPi) x -= 2 * kPi;
    while (x <= -kPi) x += 2 * kPi;
    uniform.push_back(x);
  }
  EXPECT_LT(ks_p_value(ks_statistic(uniform, cdf), uniform.size()), kPowerP) << "the test cannot tell uniform angles";
}

// ===========================================================================
// 1c. A free rigid body (no potential on R; gravity off, so the centre
// diffuses freely) in ambient coordinates R in R^{3x3}, R^T R = I, with the
// kinetic energy tr(Rdot J Rdot^T) / 2: the metric is invariant under
// R -> Q R, so its volume is a left-invariant measure on SO(3), the Haar
// measure (SO(3) is compact). Under Haar the rotation angle w,
// cos w = (tr R - 1) / 2, has density (1 - cos w) / pi on [0, pi], so
//   F(w) = (w - sin w) / pi.
// (RATTLE keeps the free body's energy exactly, MZ05, so every proposal is
// accepted: the test is of the flow and the momentum refresh alone.)
// Power: the classic wrong "uniform rotation", a uniform axis and a uniform
// angle in [0, pi], fails the same test.
TEST(HmcMarginal, RigidBodyRotationAngleIsHaar) {
  RigidBody sys;
  sys.prm.gravity = 0;
  Vec<12> start = Vec<12>::Zero();
  start[0] = start[4] = start[8] = 1;  // R = I, centre at the origin
  std::vector<Real> w;
  for (const auto& s : final_states(sys, control(1.0, 10, 44), 0.2, 1000, 40, start)) {
    const Real c = (s.q[0] + s.q[4] + s.q[8] - 1) / 2;
    w.push_back(std::acos(std::clamp<Real>(c, -1, 1)));
  }
  auto cdf = [](Real x) { return (x - std::sin(x)) / kPi; };
  EXPECT_GT(ks_p_value(ks_statistic(w, cdf), w.size()), kAlpha) << "D = " << ks_statistic(w, cdf);
  std::vector<Real> uniform;
  for (std::uint64_t i = 0; i < w.size(); ++i) uniform.push_back(kPi * CounterRng(98, i).uniform());
  EXPECT_LT(ks_p_value(ks_statistic(uniform, cdf), uniform.size()), kPowerP) << "the test cannot tell uniform angles";
}

// ===========================================================================
// 1d. Fisher-Bingham on the unit sphere (M = I, so sigma_N is the round
// measure), density exp(kappa mu.q + q^T A q). With mu = e_z and A = beta e_z e_z^T
// it depends on z alone and, the area element being uniform in z
// (Archimedes), z has density proportional to exp(kappa z + beta z^2) on
// [-1, 1]; its CDF by Simpson's rule. In a rotated frame, mu' = R e_z and
// A' = R A R^T, the draws q' rotated back, R^T q', have the same z-marginal:
// that covers a general mean and a full matrix A.
// Power: the von Mises-Fisher draws (A = 0, the quadratic term dropped) fail
// the axial test, and the unrotated heights q'_z fail the rotated one.
std::function<Real(Real)> fisher_bingham_height_cdf(Real kappa, Real beta) {
  constexpr int grid = 4000;
  auto density = [=](Real z) { return std::exp(kappa * z + beta * z * z); };
  const Real dz = Real(2) / grid;
  std::vector<Real> cumulative(grid + 1, 0);
  for (int i = 0; i < grid; ++i) {
    const Real z0 = -1 + i * dz;
    cumulative[std::size_t(i + 1)] =
        cumulative[std::size_t(i)] + dz / 6 * (density(z0) + 4 * density(z0 + dz / 2) + density(z0 + dz));
  }
  return [=](Real z) {
    const int i = std::clamp(int((z + 1) / dz), 0, grid - 1);
    const Real z0 = -1 + i * dz, t = z - z0;
    return (cumulative[std::size_t(i)] + t / 6 * (density(z0) + 4 * density(z0 + t / 2) + density(z))) /
           cumulative[grid];
  };
}

TEST(HmcMarginal, FisherBinghamHeight) {
  const Real kappa = 3, beta = 2;
  const auto cdf = fisher_bingham_height_cdf(kappa, beta);
  Mat<3, 3> a = Mat<3, 3>::Zero();
  a(2, 2) = beta;
  const Vec3 equator(1, 0, 0);
  std::vector<Real> z;
  for (const auto& s : final_states(test::fisher_bingham(Vec3(0, 0, 1), kappa, a), control(1, 10, 41), 0.15, 4000, 80, equator))
    z.push_back(s.q[2]);
  EXPECT_GT(ks_p_value(ks_statistic(z, cdf), z.size()), kAlpha) << "D = " << ks_statistic(z, cdf);

  std::vector<Real> vmf;
  for (const auto& s : final_states(test::fisher_bingham(Vec3(0, 0, 1), kappa, Mat<3, 3>::Zero()), control(1, 10, 41), 0.15,
                                    4000, 80, equator))
    vmf.push_back(s.q[2]);
  EXPECT_LT(ks_p_value(ks_statistic(vmf, cdf), vmf.size()), kPowerP) << "the test cannot tell the A term";
}

TEST(HmcMarginal, FisherBinghamInARotatedFrame) {
  const Real kappa = 1.5, beta = 3;  // bimodal in z: exp(1.5 z + 3 z^2)
  const auto cdf = fisher_bingham_height_cdf(kappa, beta);
  const Mat<3, 3> r = Eigen::AngleAxis<Real>(2.1, Vec3(1, 2, 3).normalized()).toRotationMatrix();
  Mat<3, 3> a = Mat<3, 3>::Zero();
  a(2, 2) = beta;
  // A' = R A R^T, plus a multiple of I, which changes nothing on the sphere.
  const FisherBingham sys = test::fisher_bingham(Vec3(r * Vec3(0, 0, 2)), kappa, r * a * r.transpose() + Mat<3, 3>::Identity());
  std::vector<Real> z, unrotated;
  for (const auto& s : final_states(sys, control(1, 10, 43), 0.15, 4000, 80, Vec3(1, 0, 0))) {
    z.push_back((r.transpose() * s.q)[2]);
    unrotated.push_back(s.q[2]);
  }
  EXPECT_GT(ks_p_value(ks_statistic(z, cdf), z.size()), kAlpha) << "D = " << ks_statistic(z, cdf);
  EXPECT_LT(ks_p_value(ks_statistic(unrotated, cdf), unrotated.size()), kPowerP) << "the test cannot tell the frame";
}

// ===========================================================================
// 2. The reversibility check fires where it must. With a large step the
// position solve of RATTLE can converge, from (q', -p'), to another point of
// N than q (the constraint equations have several roots; Newton takes the one
// its start leads to). Found deterministically: the first such state of a
// fixed random sequence for the double pendulum. One transition from it,
// with its own momentum kept (refresh_cos = 1), must be rejected for
// reversibility; without the check it would have been taken.
TEST(HmcReversibility, AnotherRootBackwardsIsRejected) {
  const DoublePendulum sys;
  const NewtonOptions opt;
  PhaseState<DoublePendulum> found;
  Real h = 0;
  bool have = false;
  for (std::uint64_t i = 0; i < 1000 && !have; ++i) {
    CounterRng rng(3, i);
    PhaseState<DoublePendulum> s;
    s.q = sys.thermal_configuration(rng, 1.0);
    Vec<4> xi;
    for (int c = 0; c < 4; ++c) xi[c] = rng.normal();
    s.p = (0.5 + 4 * rng.uniform()) * sys.sqrt_mass_times(xi);
    ASSERT_EQ(project_momentum(sys, s.q, s.p), Status::ok);
    s.q_prev = s.q;
    const Real step = 0.05 + 0.6 * rng.uniform();
    PhaseState<DoublePendulum> f = s, b;
    int it = 0;
    if (Rattle::step(sys, f, step, opt, it) != Status::ok) continue;
    b = f;
    b.p = -b.p;
    if (Rattle::step(sys, b, step, opt, it) != Status::ok) continue;
    // Newton converged backwards (b is on N), but elsewhere.
    if (max_abs(Vec<4>(b.q - s.q)) > 1e-3) {
      EXPECT_LT(max_abs(sys.constraints(b.q)), 1e-12);
      found = s;
      h = step;
      have = true;
    }
  }
  ASSERT_TRUE(have) << "no state whose backward step finds another root";

  HmcControl ctl = control(1.0, 1, 7);
  ctl.refresh_cos = 1;  // the state's own momentum, no fresh draw
  PhaseState<DoublePendulum> s = found;
  const HmcDraw d = transition(sys, Rattle{}, ctl, h, 0, 0, s);
  EXPECT_EQ(d.outcome, HmcOutcome::reversibility);
  EXPECT_EQ(d.acceptance, 0);
  EXPECT_EQ(s.q, found.q);  // the chain stays, with its momentum reversed
  EXPECT_LT(max_abs(Vec<4>(s.p + found.p)), 1e-13 * (1 + max_abs(found.p)));

  ctl.check_reversibility = false;  // the wrong sampler takes the move
  s = found;
  EXPECT_NE(transition(sys, Rattle{}, ctl, h, 0, 0, s).outcome, HmcOutcome::reversibility);
}

// ===========================================================================
// 3. A Newton failure is a rejection with its reason. From the equator with
// h = 0.3 the pendulum falls through the bottom at |v| h > l, where RATTLE's
// position equation has no solution: every proposal fails, the chain stays
// where it was, finite, and each draw says why.
TEST(HmcFailure, NewtonFailureIsARejectionNotACrash) {
  const SphericalPendulum sys;
  PhaseState<SphericalPendulum> s = test::make_state<SphericalPendulum>(Vec3(1, 0, 0), Vec3::Zero());
  const HmcControl ctl = control(1.0, 10, 5);
  for (std::uint64_t k = 0; k < 20; ++k) {
    const HmcDraw d = transition(sys, Rattle{}, ctl, 0.3, 0, k, s);
    EXPECT_EQ(d.outcome, HmcOutcome::newton);
    EXPECT_EQ(d.acceptance, 0);
    EXPECT_TRUE(std::isfinite(d.energy));
    EXPECT_EQ(s.q, Vec3(1, 0, 0));
  }
}

// ===========================================================================
// 4-6. The engine: `tether sample` through tether::sample.

using test::MemoryDraws;

std::string sample_json(const std::string& system, const std::string& method, const std::string& sample) {
  return R"({"system": )" + system + R"(, "method": )" + method + R"(, "sample": )" + sample + "}";
}
const std::string kSphere = R"({"name": "spherical_pendulum"})";
const std::string kRattle = R"({"name": "rattle", "dt": 0.15, "steps": 8})";

SampleResult sample_into(const std::string& json, MemoryDraws& out, const std::string& backend = "cpu") {
  SampleConfig c = parse_sample_config(json, "test");
  c.run.backend = backend;
  SampleOptions opt;
  opt.draws = &out;
  return sample(c, opt);
}

// 4. Bitwise the same draws whatever the thread count and batch size (each
// chain's stream is keyed by (seed, chain, iteration)); warm-up and thinning
// included, and every draw written exactly once.
TEST(HmcEngine, DrawsDoNotDependOnThreadsOrBatches) {
  const std::string base = R"({"chains": 300, "draws": 40, "warmup": 30, "thin": 2, "seed": 9, "temperature": 3,
                              "jitter": {"dt": 0.2, "steps": 0.25}BATCH})";
  auto run = [&](int threads, const std::string& batch) {
    omp_set_num_threads(threads);
    std::string s = base;
    s.replace(s.find("BATCH"), 5, batch);
    MemoryDraws out(300, 40, 3);
    const SampleResult r = sample_into(sample_json(kSphere, kRattle, s), out);
    EXPECT_EQ(r.outcomes[0] + r.outcomes[1] + r.outcomes[2] + r.outcomes[3], 300 * 40);
    return out;
  };
  const int all = omp_get_max_threads();
  const MemoryDraws a = run(1, ""), b = run(std::max(2, all), R"(, "batch_size": 64)"), c = run(2, R"(, "batch_size": 7)");
  omp_set_num_threads(all);
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.q, c.q);
  EXPECT_EQ(a.outcome, c.outcome);
  EXPECT_EQ(a.step_size, c.step_size);
  EXPECT_EQ(*std::min_element(a.outcome.begin(), a.outcome.end()), 0);  // every draw written
  for (std::size_t k = 0; k < a.q.size(); k += 3) {  // and on the sphere
    const Real r = std::sqrt(a.q[k] * a.q[k] + a.q[k + 1] * a.q[k + 1] + a.q[k + 2] * a.q[k + 2]);
    ASSERT_NEAR(r, 1, 1e-12);
  }
}

// The reference backend (each step solved from RATTLE's equations by a
// generic dense Newton) takes the same decisions and agrees to its
// tolerance over a short run (a long one would amplify roundoff through the
// chaotic flow and the accept/reject thresholds).
void expect_reference_agrees_with_cpu(const std::string& json, std::int64_t chains, std::int64_t draws, int dof) {
  MemoryDraws cpu(chains, draws, dof), ref(chains, draws, dof);
  sample_into(json, cpu, "cpu");
  sample_into(json, ref, "reference");
  EXPECT_EQ(cpu.outcome, ref.outcome);
  EXPECT_EQ(cpu.steps, ref.steps);
  EXPECT_EQ(cpu.tree_depth, ref.tree_depth);
  for (std::size_t k = 0; k < cpu.q.size(); ++k) EXPECT_NEAR(cpu.q[k], ref.q[k], 1e-8) << k;
}

TEST(HmcEngine, ReferenceAgreesWithCpu) {
  expect_reference_agrees_with_cpu(sample_json(kSphere, R"({"name": "rattle", "dt": 0.05, "steps": 8})",
                                               R"({"chains": 20, "draws": 6, "seed": 4, "temperature": 3})"),
                                   20, 6, 3);
}

// 5. Dual averaging (HG14): after warm-up the chains' mean acceptance
// probability is near the target. The averaged step size lands somewhat
// above it in acceptance (hbar averages log h over the warm-up), so the
// bounds are loose, but a target of 0.6 and of 0.95 must give clearly
// different step sizes and acceptances on either side of 0.8.
TEST(HmcEngine, DualAveragingReachesItsTarget) {
  auto run = [&](Real target) {
    const std::string s = R"({"chains": 200, "draws": 100, "warmup": 300, "seed": 2, "temperature": 2,
                              "target_acceptance": )" + std::to_string(target) + "}";
    MemoryDraws out(200, 100, 3);
    return sample_into(sample_json(kSphere, R"({"name": "rattle", "dt": 0.05, "steps": 8})", s), out);
  };
  const SampleResult low = run(0.6), high = run(0.95);
  EXPECT_NEAR(low.mean_acceptance, 0.6, 0.15);
  EXPECT_NEAR(high.mean_acceptance, 0.95, 0.04);
  EXPECT_GT(low.step_size_min, high.step_size_max);
}

// 6. Bad sampling configs: ConfigError at the JSON path, naming the problem.
using test::expect_config_error;
void expect_sample_error(const std::string& json, const std::string& path, const std::string& words) {
  expect_config_error(parse_sample_config, json, path, words);
}

TEST(HmcConfig, BadInputIsNamedByItsPath) {
  const std::string ok = R"({"chains": 10, "draws": 10})";
  expect_sample_error(sample_json(R"({"name": "heisenberg"})", R"({"name": "gauss_legendre", "dt": 0.1, "steps": 2})", ok),
                      "system.name", "holonomic");
  expect_sample_error(sample_json(R"({"name": "magnetic_sphere"})", R"({"name": "variational", "dt": 0.1, "steps": 2})", ok),
                      "system.name", "holonomic");
  expect_sample_error(sample_json(kSphere, R"({"name": "symplectic_euler_a", "dt": 0.1, "steps": 2})", ok), "method.name",
                      "symmetric, symplectic one-step");
  expect_sample_error(sample_json(kSphere, R"({"name": "shake", "dt": 0.1, "steps": 2})", ok), "method.name",
                      "symmetric, symplectic one-step");
  expect_sample_error(sample_json(kSphere, kRattle, R"({"draws": 10})"), "sample.chains", "missing");
  expect_sample_error(sample_json(kSphere, kRattle, R"({"chains": 10, "draws": 10, "thin": 0})"), "sample.thin", "between");
  expect_sample_error(sample_json(kSphere, kRattle, R"({"chains": 10, "draws": 10, "refresh_angle": 2})"),
                      "sample.refresh_angle", "pi/2");
  expect_sample_error(sample_json(kSphere, kRattle, R"({"chains": 10, "draws": 10, "target_acceptance": 1})"),
                      "sample.target_acceptance", "(0, 1)");
  expect_sample_error(sample_json(kSphere, kRattle, R"({"chains": 10, "draws": 10, "jitter": {"dt": 1}})"),
                      "sample.jitter.dt", "below 1");
  expect_sample_error(sample_json(kSphere, kRattle, R"({"chains": 10, "draws": 10, "temperature": -1})"),
                      "sample.temperature", "positive");
  expect_sample_error(sample_json(kSphere, kRattle, R"({"chains": 10, "draws": 10, "warmpu": 5})"), "sample.warmpu",
                      "unknown");
  expect_sample_error(sample_json(kSphere, R"({"name": "rattle", "dt": 0.1})", ok), "method.steps", "missing");
  // theta_retraction is symmetric only at theta = 1/2: refused by the engine, before anything runs.
  SampleConfig c = parse_sample_config(
      sample_json(R"({"name": "kepler"})", R"({"name": "theta_retraction", "theta": 0.3, "dt": 0.1, "steps": 2})", ok),
      "test");
  c.run.backend = "cpu";
  try {
    sample(c, SampleOptions{});
    ADD_FAILURE() << "theta 0.3 accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.path(), "method");
    EXPECT_NE(std::string(e.what()).find("not symmetric"), std::string::npos) << e.what();
  }
}

// 7. draws.nc read back with the netCDF C library: the groups, dimensions and
// variables ArviZ's from_netcdf reads, and every value as the sampler gave it.
TEST(HmcOutput, DrawsFileHoldsEveryDrawInArvizLayout) {
  const std::string json = sample_json(kSphere, kRattle, R"({"chains": 70, "draws": 30, "warmup": 5, "seed": 1,
                                                               "temperature": 3, "batch_size": 64})");
  SampleConfig c = parse_sample_config(json, "test");
  c.run.backend = "cpu";
  MemoryDraws memory(70, 30, 3);
  const std::filesystem::path file = std::filesystem::temp_directory_path() / ("tether_draws_" + std::to_string(::getpid()) + ".nc");
  {
    NetcdfDraws netcdf(file, c, 3);
    struct Both final : DrawSink {
      DrawSink *a, *b;
      void write(const DrawBlock& block) override { a->write(block), b->write(block); }
    } both;
    both.a = &memory;
    both.b = &netcdf;
    SampleOptions opt;
    opt.draws = &both;
    sample(c, opt);
    netcdf.close();
  }
  int file_id, post, stats, var;
  ASSERT_EQ(nc_open(file.c_str(), NC_NOWRITE, &file_id), NC_NOERR);
  ASSERT_EQ(nc_inq_grp_ncid(file_id, "posterior", &post), NC_NOERR);
  ASSERT_EQ(nc_inq_grp_ncid(file_id, "sample_stats", &stats), NC_NOERR);
  auto dim = [](int group, const char* name) {
    int id;
    std::size_t n = 0;
    EXPECT_EQ(nc_inq_dimid(group, name, &id), NC_NOERR) << name;
    EXPECT_EQ(nc_inq_dimlen(group, id, &n), NC_NOERR) << name;
    return n;
  };
  EXPECT_EQ(dim(post, "chain"), 70u);
  EXPECT_EQ(dim(post, "draw"), 30u);
  EXPECT_EQ(dim(post, "q_dim"), 3u);
  EXPECT_EQ(dim(stats, "chain"), 70u);
  std::vector<double> q(70 * 30 * 3), potential(70 * 30), acceptance(70 * 30), step(70 * 30);
  ASSERT_EQ(nc_inq_varid(post, "q", &var), NC_NOERR);
  ASSERT_EQ(nc_get_var_double(post, var, q.data()), NC_NOERR);
  ASSERT_EQ(nc_inq_varid(post, "potential", &var), NC_NOERR);
  ASSERT_EQ(nc_get_var_double(post, var, potential.data()), NC_NOERR);
  ASSERT_EQ(nc_inq_varid(stats, "acceptance_rate", &var), NC_NOERR);
  ASSERT_EQ(nc_get_var_double(stats, var, acceptance.data()), NC_NOERR);
  ASSERT_EQ(nc_inq_varid(stats, "step_size", &var), NC_NOERR);
  ASSERT_EQ(nc_get_var_double(stats, var, step.data()), NC_NOERR);
  std::vector<unsigned char> outcome(70 * 30);
  std::vector<signed char> diverging(70 * 30);
  ASSERT_EQ(nc_inq_varid(stats, "outcome", &var), NC_NOERR);
  ASSERT_EQ(nc_get_var_uchar(stats, var, outcome.data()), NC_NOERR);
  ASSERT_EQ(nc_inq_varid(stats, "diverging", &var), NC_NOERR);
  ASSERT_EQ(nc_get_var_schar(stats, var, diverging.data()), NC_NOERR);
  for (const char* name : {"energy", "n_steps"}) EXPECT_EQ(nc_inq_varid(stats, name, &var), NC_NOERR) << name;
  nc_close(file_id);
  std::filesystem::remove(file);
  EXPECT_EQ(q, memory.q);
  EXPECT_EQ(potential, memory.potential);
  EXPECT_EQ(acceptance, memory.acceptance);
  EXPECT_EQ(step, memory.step_size);
  for (std::size_t k = 0; k < outcome.size(); ++k) {
    ASSERT_EQ(int(outcome[k]), memory.outcome[k]) << k;
    ASSERT_EQ(diverging[k], outcome[k] == std::uint8_t(HmcOutcome::newton)) << k;
  }
  // potential is V(q) of the stored q: m g z.
  for (std::size_t k = 0; k < potential.size(); ++k) ASSERT_NEAR(potential[k], 9.81 * q[3 * k + 2], 1e-12);
}

// 8. VGSCB21's diagnostics against ArviZ's on the same draws: the fixture
// (tests/fixtures/make_arviz_diagnostics.py) holds six sets of 4 x 301 draws
// (odd, so the split drops a middle draw) built to exercise each part: iid,
// strong and negative autocorrelation (Geyer's sequences), one shifted chain
// (R-hat 1.20), a heavy tail and ties (average ranks), with ArviZ's values.
// ArviZ sums the autocovariances by FFT, tether directly: they agree to
// roundoff, so 1e-9 relative is a tight bound; a wrong split, rank offset or
// truncation moves them by percents. Each chain's E-BFMI (Bet16), the draws
// taken as energies, against ArviZ's bfmi: about 2 for independent draws,
// 2 (1 - phi) = 0.2 for the AR(1) with phi 0.9.
TEST(HmcDiagnostics, RhatEssAndBfmiMatchArviz) {
  std::ifstream in(std::string(TETHER_SOURCE_DIR) + "/tests/fixtures/arviz_diagnostics.json");
  ASSERT_TRUE(in) << "missing fixture";
  const nlohmann::json j = nlohmann::json::parse(in);
  const std::int64_t chains = j["chains"], draws = j["draws"];
  for (const auto& [name, c] : j["cases"].items()) {
    const std::vector<double> x = c["x"];
    const ChainDiagnostics d = diagnose_chains(x, chains, draws);
    EXPECT_NEAR(d.rhat, c["rhat"].get<double>(), 1e-9 * c["rhat"].get<double>()) << name;
    EXPECT_NEAR(d.ess_bulk, c["ess_bulk"].get<double>(), 1e-9 * c["ess_bulk"].get<double>()) << name;
    EXPECT_NEAR(d.ess_tail, c["ess_tail"].get<double>(), 1e-9 * c["ess_tail"].get<double>()) << name;
    const std::vector<double> bfmi = energy_bfmi(x, chains, draws), expected = c["bfmi"];
    ASSERT_EQ(bfmi.size(), expected.size()) << name;
    for (std::size_t k = 0; k < bfmi.size(); ++k) EXPECT_NEAR(bfmi[k], expected[k], 1e-12 * expected[k]) << name << k;
  }
  // By hand: energies 1 2 4 3, steps 1 2 -1 (squares summing to 6),
  // deviations -1.5 -0.5 1.5 0.5 (to 5): 1.2; the second chain is constant.
  const std::vector<double> by_hand = energy_bfmi({1, 2, 4, 3, 1, 1, 1, 1}, 2, 4);
  EXPECT_DOUBLE_EQ(by_hand[0], 1.2);
  EXPECT_TRUE(std::isnan(by_hand[1]));
  EXPECT_TRUE(std::isnan(energy_bfmi({1, 2}, 2, 1)[0])) << "one draw";
  // Fewer than 4 draws, or R-hat of one chain: NaN, as ArviZ.
  EXPECT_TRUE(std::isnan(diagnose_chains({1, 2, 3}, 1, 3).ess_bulk));
  EXPECT_TRUE(std::isnan(diagnose_chains({1, 2, 3, 4, 5}, 1, 5).rhat));
}

// 9. Every holonomic system of the registry can be sampled, with every
// method that can run a chain: a short sample from its example config's
// parameters, step size and start (tests/registry_cases: the registry's one
// case list) writes every draw, finite, and its chains move.
TEST(HmcRegistry, EverySamplerPairSamples) {
  int pairs = 0;
  for (const RegistryCase& rc : registry_cases(std::string(TETHER_SOURCE_DIR) + "/configs")) {
    const SystemInfo& sys = system_infos()[std::size_t(rc.system)];
    const MethodInfo& method = method_infos()[std::size_t(rc.method)];
    if (!can_sample(sys) || !can_sample(method))
      continue;
    nlohmann::json j;
    j["system"] = rc.config["system"];
    j["method"] = rc.config["method"];
    j["method"]["steps"] = 5;
    const nlohmann::json& initial = rc.config["ensemble"]["initial"];
    const std::int64_t chains = initial.contains("states") ? std::int64_t(initial["states"].size()) : 6;
    j["sample"] = {{"chains", chains}, {"draws", 8}, {"seed", 1}, {"temperature", 1.0}, {"initial", initial}};
    SampleConfig c = parse_sample_config(j.dump(), rc.system_label + "/" + rc.method_label);
    c.run.backend = "cpu";
    MemoryDraws out(chains, 8, sys.dof);
    const SampleResult r = sample(c, SampleOptions{&out});
    const std::string label = rc.system_label + " / " + rc.method_label;
    EXPECT_EQ(*std::min_element(out.outcome.begin(), out.outcome.end()), 0) << label;  // written, some accepted
    for (Real x : out.q) ASSERT_TRUE(std::isfinite(x)) << label;
    for (Real x : out.energy) ASSERT_TRUE(std::isfinite(x)) << label;
    EXPECT_GT(r.mean_acceptance, 0.5) << label;
    ++pairs;
  }
  EXPECT_GE(pairs, 20);  // every holonomic system, with rattle at least
}

// ===========================================================================
// 10. tether run from canonical states (ensemble.initial).

std::string run_config(const std::string& system, const std::string& method, const std::string& ensemble) {
  return R"({"system": )" + system + R"(, "method": )" + method + R"(, "ensemble": )" + ensemble + "}";
}

// Trajectory states of a run of 0 steps: its start, by trajectory id.
std::vector<test::MemorySink::Row> start_states(const std::string& json) {
  test::MemorySink sink;
  run_json(json, &sink);
  std::sort(sink.rows.begin(), sink.rows.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return sink.rows;
}

// |G(q) M^-1 p| of a double pendulum state: zero on T*N.
Real hidden_constraint(const DoublePendulum& sys, const std::vector<Real>& q, const std::vector<Real>& p) {
  const Vec<4> qv(q[0], q[1], q[2], q[3]), pv(p[0], p[1], p[2], p[3]);
  return max_abs(sys.constraint_jacobian_times(qv, sys.inverse_mass_times(pv)));
}

// "canonical" is, trajectory by trajectory, the one draw that tether sample
// gives chain id after the same warm-up from the same thermal start: bitwise
// the same q (the momenta are the chain's, on T*N).
TEST(CanonicalStart, IsTheDrawOfTetherSample) {
  const std::string system = R"({"name": "double_pendulum"})";
  MemoryDraws draws(50, 1, 4);
  sample_into(sample_json(system, R"({"name": "rattle", "dt": 0.04, "steps": 10})",
                          R"({"chains": 50, "draws": 1, "warmup": 40, "seed": 5, "temperature": 2})"),
              draws);
  const auto rows = start_states(run_config(system, R"({"name": "rattle", "dt": 0.04, "steps": 0})",
                                            R"({"size": 50, "seed": 5, "batch_size": 7, "initial":
                                                {"sampler": "canonical", "temperature": 2, "warmup": 40, "steps": 10}})"));
  ASSERT_EQ(rows.size(), 50u);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (int c = 0; c < 4; ++c) EXPECT_EQ(rows[i].q[std::size_t(c)], draws.q[i * 4 + std::size_t(c)]) << i;
    EXPECT_LT(hidden_constraint(DoublePendulum{}, rows[i].q, rows[i].p), 1e-10) << i;
  }
}

// The same for a chain, whose sampler runs in a tile (host_chain) in
// tether sample and in the canonical start alike.
TEST(CanonicalStart, IsTheDrawOfTetherSampleForAChainInATile) {
  const std::string system = R"({"name": "chain", "parameters": {"beads": 8, "bend_stiffness": 20.0}})";
  MemoryDraws draws(12, 1, 24);
  sample_into(sample_json(system, R"({"name": "rattle", "dt": 0.02, "steps": 10})",
                          R"({"chains": 12, "draws": 1, "warmup": 20, "seed": 5, "temperature": 1})"),
              draws);
  const auto rows = start_states(run_config(system, R"({"name": "rattle", "dt": 0.02, "steps": 0})",
                                            R"({"size": 12, "seed": 5, "batch_size": 5, "initial":
                                                {"sampler": "canonical", "temperature": 1, "warmup": 20, "steps": 10}})"));
  ASSERT_EQ(rows.size(), 12u);
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t c = 0; c < 24; ++c) EXPECT_EQ(rows[i].q[c], draws.q[i * 24 + c]) << i;
}

// 1b's exact marginal, now of a run's start: "canonical" passes the relative-
// angle test, and "thermal" (uniform angles) fails it: the README's reason to
// prefer the canonical starts where the thermal one is not exact.
TEST(CanonicalStart, HasTheExactMarginalWhereThermalDoesNot) {
  const std::string system = R"({"name": "double_pendulum", "parameters": {"gravity": 0, "mass1": 1, "mass2": 16}})";
  const std::string method = R"({"name": "rattle", "dt": 0.05, "steps": 0})";
  const auto cdf = relative_angle_cdf(1, 16);
  auto p_value = [&](const std::string& initial) {
    std::vector<Real> d;
    for (const auto& row : start_states(run_config(system, method, R"({"size": 4000, "seed": 3, "initial": )" + initial + "}")))
      d.push_back(relative_angle(Vec<4>(row.q[0], row.q[1], row.q[2], row.q[3])));
    return ks_p_value(ks_statistic(d, cdf), d.size());
  };
  EXPECT_GT(p_value(R"({"sampler": "canonical", "temperature": 1, "warmup": 60, "steps": 20})"), kAlpha);
  EXPECT_LT(p_value(R"({"sampler": "thermal", "temperature": 1})"), kPowerP) << "the test cannot tell the thermal start";
}

// A sample's draws.nc, written as tether sample writes it.
void write_draws(const std::string& json, const std::filesystem::path& file) {
  SampleConfig c = parse_sample_config(json, "test");
  c.run.backend = "cpu";
  NetcdfDraws netcdf(file, c, system_infos()[std::size_t(c.run.system)].dof);
  SampleOptions opt;
  opt.draws = &netcdf;
  sample(c, opt);
  netcdf.close();
}

struct DrawsStart : ::testing::Test {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tether_start_" + std::to_string(::getpid()));
  const std::filesystem::path file = dir / "draws.nc";
  const std::string system = R"({"name": "double_pendulum", "parameters": {"mass2": 2}})";
  void SetUp() override {
    std::filesystem::create_directories(dir);
    write_draws(sample_json(system, R"({"name": "rattle", "dt": 0.04, "steps": 6})",
                            R"({"chains": 7, "draws": 5, "seed": 2, "temperature": 1.5})"),
                file);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::string config(const std::string& sys, std::int64_t size, const std::string& path) const {
    return run_config(sys, R"({"name": "rattle", "dt": 0.04, "steps": 0})",
                      R"({"size": )" + std::to_string(size) + R"(, "seed": 4, "batch_size": 6, "initial": {"draws": ")" +
                          path + R"("}})");
  }
};

// Trajectory i starts at chain i mod 7's draw 4 - i / 7 (the last draws
// first), exactly; its momentum is on T*N.
TEST_F(DrawsStart, TakesTheLastDrawsOfEveryChain) {
  MemoryDraws memory(7, 5, 4);
  sample_into(sample_json(system, R"({"name": "rattle", "dt": 0.04, "steps": 6})",
                          R"({"chains": 7, "draws": 5, "seed": 2, "temperature": 1.5})"),
              memory);
  DoublePendulum sys;
  sys.prm.mass2 = 2;
  const auto rows = start_states(config(system, 20, file.string()));
  ASSERT_EQ(rows.size(), 20u);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::size_t chain = i % 7, draw = 4 - i / 7;
    for (std::size_t c = 0; c < 4; ++c) EXPECT_EQ(rows[i].q[c], memory.q[(chain * 5 + draw) * 4 + c]) << i;
    EXPECT_LT(hidden_constraint(sys, rows[i].q, rows[i].p), 1e-10) << i;
  }
}

void expect_run_error(const std::string& json, const std::string& path, const std::string& words) {
  expect_config_error(parse_config, json, path, words);
}

TEST_F(DrawsStart, BadStartsAreNamedByTheirPath) {
  const std::string at = "ensemble.initial.draws";
  expect_run_error(config(system, 20, (dir / "missing.nc").string()), at, "does not exist");
  std::ofstream(dir / "text.nc") << "not netCDF";
  expect_run_error(config(system, 20, (dir / "text.nc").string()), at, "not a draws.nc");
  expect_run_error(config(system, 36, file.string()), at, "fewer than the 36 trajectories");
  expect_run_error(config(R"({"name": "double_pendulum"})", 20, file.string()), at, "was sampled with system parameters");
  expect_run_error(config(R"({"name": "chain", "parameters": {"beads": 4}})", 20, file.string()), at, "q has 4 coordinates, not 12");
  expect_run_error(config(system, 20, ""), at, "non-empty string");

  const std::string rattle = R"({"name": "rattle", "dt": 0.04, "steps": 0})";
  expect_run_error(run_config(R"({"name": "heisenberg"})", R"({"name": "gauss_legendre", "stages": 2, "dt": 0.1, "steps": 1})",
                              R"({"size": 2, "initial": {"sampler": "canonical", "temperature": 1}})"),
                   "ensemble.initial.sampler", "holonomic");
  expect_run_error(run_config(R"({"name": "magnetic_sphere"})", R"({"name": "variational", "layer": "rk4", "dt": 0.1, "steps": 1})",
                              R"({"size": 2, "initial": {"sampler": "canonical", "temperature": 1}})"),
                   "ensemble.initial.sampler", "reversed by p -> -p");
  expect_run_error(run_config(system, rattle, R"({"size": 2, "initial": {"sampler": "canonical"}})"),
                   "ensemble.initial.temperature", "missing");
  expect_run_error(run_config(system, rattle, R"({"size": 2, "initial": {"sampler": "canonical", "temperature": 1, "warmup": 0}})"),
                   "ensemble.initial.warmup", "");
  expect_sample_error(sample_json(system, kRattle, R"({"chains": 2, "draws": 2, "initial": {"draws": "x.nc"}})"),
                      "sample.initial", "runs its own warm-up");
  expect_sample_error(run_config(system, rattle, R"({"size": 2, "initial": {"sampler": "thermal", "temperature": 1}})"),
                      "sample", "this is a run config");
}

// ===========================================================================
// 11. Chains in tiles.

// Bead b's normals are 3b .. 3b + 2 of the one-thread draw, which follows
// two uniforms, and the uniform after the n normals comes from the block
// after theirs: an odd n (5 beads) leaves a pair's second normal unused.
TEST(TileHmc, EachBeadDrawsTheOneThreadNormals) {
  for (int beads : {4, 5, 16}) {
    const int n = 3 * beads;
    for (std::uint64_t iteration : {0u, 7u}) {
      CounterRng rng(99, 3, iteration + 1);
      rng.uniform(), rng.uniform();
      std::vector<Real> xi(std::size_t(n), 0.0);
      for (Real& x : xi) x = rng.normal();
      const Real u = rng.uniform();
      for (int b = 0; b < beads; ++b) {
        const tile::Triple<Real> mine = bead_normals(99, 3, iteration, b);
        for (int k = 0; k < 3; ++k) EXPECT_EQ(mine.c[k], xi[std::size_t(3 * b + k)]) << beads << " beads, bead " << b;
      }
      EXPECT_EQ(CounterRng(99, 3, iteration + 1, std::uint32_t(1 + (n + 1) / 2)).uniform(), u) << beads << " beads";
    }
  }
}

TEST(TileHmc, TheTilesEnergyIsTheOneThreadOnesToRoundoff) {
  const Chain<16> sys = test::make_chain<16>();
  const PhaseState<Chain<16>> s = test::chain_state(sys);
  using X = tile::Emulated<Real, 16>;
  Chain<16>::Beads<X> q, p;
  for (int b = 0; b < 16; ++b)
    for (int k = 0; k < 3; ++k) q.c[k].v[b] = s.q[3 * b + k], p.c[k].v[b] = s.p[3 * b + k];
  const Real one_thread = total_energy(sys, s.q, s.p), tiled = tile_total_energy<Chain<16>, X>(sys, q, p);
  EXPECT_NEAR(tiled, one_thread, 1e-14 * std::fabs(one_thread));
  EXPECT_NEAR(sys.tile_potential(q), sys.potential(s.q), 1e-14 * std::fabs(sys.potential(s.q)));
  EXPECT_NE(sys.potential(s.q), 0.0);
}

// Chains stepped by tile_hmc_transition and by hmc_transition from the same
// states with the same streams: the same step sizes, step counts and
// outcomes, transition after transition (accepted and rejected both
// occur), the states and acceptance probabilities to roundoff.
template <int N, class M>
void tile_chains_against_one_thread(const M& method, Real h, int steps, Real temperature) {
  using S = Chain<N>;
  using X = tile::Emulated<Real, N>;
  const S sys = test::make_chain<N>();
  HmcControl ctl = control(temperature, steps, 17);
  ctl.step_jitter = 0.2;
  ctl.steps_jitter = 0.3;
  int accepted = 0, rejected = 0;
  Real worst = 0;
  for (std::uint64_t chain = 0; chain < 6; ++chain) {
    PhaseState<S> a = test::chain_state(
        sys, [&](int i) { return sys.prm.bend_angle + 0.1 * std::sin(1.3 * i + Real(chain)); },
        [&](int i) { return 3.14159265358979 + 0.5 * std::sin(2.1 * i + 0.7 * Real(chain)); });
    PhaseState<S> b = a;
    Vec<S::dof> proposal_q, proposal_p;
    const ChainSlot slot{b.q.data(), b.p.data(), proposal_q.data(), proposal_p.data(), 1};
    for (std::uint64_t k = 0; k < 12; ++k) {
      const HmcDraw da = transition(sys, method, ctl, h, chain, k, a);
      const HmcDraw db = tile_hmc_transition<S, M, X>(sys, method, ctl, h, chain, k, slot);
      ASSERT_EQ(da.outcome, db.outcome) << "chain " << chain << " transition " << k;
      ASSERT_EQ(da.step_size, db.step_size);
      ASSERT_EQ(da.steps, db.steps);
      EXPECT_NEAR(da.acceptance, db.acceptance, 1e-9);
      EXPECT_NEAR(da.energy, db.energy, 1e-11 * std::fabs(da.energy));
      worst = std::max({worst, max_abs(Vec<S::dof>(a.q - b.q)), max_abs(Vec<S::dof>(a.p - b.p))});
      (da.outcome == HmcOutcome::accepted ? accepted : rejected) += 1;
    }
  }
  EXPECT_LT(worst, 1e-9);
  EXPECT_GT(accepted, 10) << M::name;
  EXPECT_GT(rejected, 3) << M::name;
}

TEST(TileHmc, ChainsInTilesAreTheOneThreadSampler) {
  tile_chains_against_one_thread<4>(Rattle{}, 0.05, 8, 2.0);
  tile_chains_against_one_thread<16>(Rattle{}, 0.04, 8, 2.0);
  Composition<Rattle> triple_jump;
  triple_jump.prm.scheme = CompositionScheme::triple_jump;
  tile_chains_against_one_thread<16>(triple_jump, 0.08, 4, 2.0);
  tile_chains_against_one_thread<4>(ConstrainedMidpoint{}, 0.07, 8, 2.0);
  Composition<SymplecticEulerPair> pair;
  pair.prm.scheme = CompositionScheme::triple_jump;
  tile_chains_against_one_thread<16>(pair, 0.08, 4, 2.0);
  Composition<ConstrainedMidpoint> midpoints;
  midpoints.prm.scheme = CompositionScheme::triple_jump;
  tile_chains_against_one_thread<4>(midpoints, 0.06, 4, 2.0);
}


// ===========================================================================
// 12. Dynamic integration time (dynamic_transition, Bet17): the exact
// marginals of 1a, 1b and 1d, each test's power shown on deliberately
// broken variants that the same test must reject:
//   - no multinomial weights (the next state drawn uniformly from the
//     trajectory): the energy error is never corrected, as without Metropolis;
//   - the criterion on the whole trajectory only, not on its subtrees: a
//     trajectory grown from another of its states would have stopped
//     earlier, so the transition is no longer reversible (HG14 §3.1).
// Not among them: a criterion on ambient momenta. Each state's momentum is
// projected onto T*N, so M^-1 p at either end is tangent (G M^-1 p = 0) and
// its product with the ambient sum rho is the tangent one; and any criterion
// evaluated alike on every subtree keeps the sampler exact (it changes the
// trajectories' lengths, not their symmetry). Unprojected momenta are
// absorbed by RATTLE's first position solve, so they change only the start's
// weight, which 4000 chains cannot see: the static tests show that power.
// The reversibility check is shown to fire where it must (another root
// backwards) by a transition found deterministically, as in 2.
// Then the subtree bookkeeping against a direct enumeration, the trajectory's
// statistics, and the engine: draws independent of threads, batches and
// backend, dual averaging, bad configs.

HmcControl dynamic_control(Real temperature, std::uint64_t seed) {
  HmcControl c = control(temperature, 1, seed);
  c.dynamic = true;
  return c;
}

// The KS p-value of statistic(q) over the last states of 4000 chains from
// `start` against its exact CDF.
template <class M = Rattle, class S, class Statistic>
Real marginal_p_value(const S& sys, const HmcControl& ctl, Real h, int iterations, const Vec<S::dof>& start,
                      Statistic statistic, const std::function<Real(Real)>& cdf) {
  std::vector<Real> x;
  for (const auto& s : final_states<S, M>(sys, ctl, h, 4000, iterations, start)) x.push_back(statistic(s.q));
  return ks_p_value(ks_statistic(x, cdf), x.size());
}

TEST(DynamicHmcMarginal, SphericalPendulumHeight) {
  SphericalPendulum sys;
  const Real kT = 2, a = sys.prm.mass * sys.prm.gravity / kT;
  const Vec3 equator(1, 0, 0);
  auto p_value = [&](const HmcControl& ctl, Real h) {
    return marginal_p_value(sys, ctl, h, 30, equator, [](const Vec3& q) { return q[2]; },
                            [&](Real x) { return sphere_height_cdf(x, a, sys.prm.length); });
  };
  const HmcControl right = dynamic_control(kT, 61);
  EXPECT_GT(p_value(right, 0.2), kAlpha);
  EXPECT_GT(p_value(right, 0.45), kAlpha);  // large energy errors, corrected by the weights

  HmcControl uniform = right;
  uniform.multinomial = false;
  EXPECT_LT(p_value(uniform, 0.45), kPowerP) << "the test cannot tell a sampler without multinomial weights";
  HmcControl whole = right;
  whole.check_subtrees = false;
  EXPECT_LT(p_value(whole, 0.2), kPowerP) << "the test cannot tell a criterion on the whole trajectory only";
}

TEST(DynamicHmcMarginal, DoublePendulumRelativeAngleFollowsTheSurfaceMeasure) {
  DoublePendulum sys;
  sys.prm.gravity = 0;
  sys.prm.mass1 = 1;
  sys.prm.mass2 = 16;
  const auto cdf = relative_angle_cdf(sys.prm.mass1, sys.prm.mass2);
  auto p_value = [&](const HmcControl& ctl, Real h) {
    return marginal_p_value(sys, ctl, h, 20, Vec<4>(1, 0, 1, -1), relative_angle, cdf);
  };
  const HmcControl right = dynamic_control(1, 63);
  EXPECT_GT(p_value(right, 0.05), kAlpha);
  HmcControl whole = right;
  whole.check_subtrees = false;
  EXPECT_LT(p_value(whole, 0.05), kPowerP) << "the test cannot tell a criterion on the whole trajectory only";
}

TEST(DynamicHmcMarginal, FisherBinghamHeight) {
  const Real kappa = 1.5, beta = 3;  // bimodal in z
  const auto cdf = fisher_bingham_height_cdf(kappa, beta);
  Mat<3, 3> a = Mat<3, 3>::Zero();
  a(2, 2) = beta;
  const FisherBingham sys = test::fisher_bingham(Vec3(0, 0, 1), kappa, a);
  auto p_value = [&](const HmcControl& ctl, Real h) {
    return marginal_p_value(sys, ctl, h, 30, Vec3(1, 0, 0), [](const Vec3& q) { return q[2]; }, cdf);
  };
  const HmcControl right = dynamic_control(1, 65);
  EXPECT_GT(p_value(right, 0.15), kAlpha);
  EXPECT_GT(p_value(right, 0.3), kAlpha);  // (at 0.5, half the first steps fail: 30 iterations do not mix)
  HmcControl uniform = right;
  uniform.multinomial = false;
  EXPECT_LT(p_value(uniform, 0.3), kPowerP) << "the test cannot tell a sampler without multinomial weights";
  HmcControl whole = right;
  whole.check_subtrees = false;
  EXPECT_LT(p_value(whole, 0.15), kPowerP) << "the test cannot tell a criterion on the whole trajectory only";
}

// The reversibility check: the first transitions of a fixed sequence (double
// pendulum, h = 0.7, where a step back from (q', -p') may find another root)
// that a failed check stopped. Without the check the same transition goes on
// past that step, taking it.
TEST(DynamicHmc, TheReversibilityCheckStopsATrajectoryThatIsNoInvolution) {
  DoublePendulum sys;
  sys.prm.gravity = 0;
  sys.prm.mass2 = 16;
  const HmcControl checked = dynamic_control(1, 71);
  HmcControl unchecked = checked;
  unchecked.check_reversibility = false;
  int found = 0;
  for (std::uint64_t chain = 0; chain < 2000 && found < 3; ++chain) {
    PhaseState<DoublePendulum> s = test::make_state<DoublePendulum>(Vec<4>(1, 0, 1, -1), Vec<4>::Zero());
    for (std::uint64_t k = 0; k < 20 && found < 3; ++k) {
      PhaseState<DoublePendulum> t = s;
      const HmcDraw d = transition(sys, Rattle{}, checked, 0.7, chain, k, s);
      if (d.outcome != HmcOutcome::reversibility) continue;
      ++found;
      const HmcDraw e = transition(sys, Rattle{}, unchecked, 0.7, chain, k, t);
      EXPECT_NE(e.outcome, HmcOutcome::reversibility);
      EXPECT_GT(e.steps, d.steps) << "chain " << chain << " transition " << k;
    }
  }
  EXPECT_EQ(found, 3);
}

// First same as last in the sampler (hmc_step): RATTLE's end force is the
// next step's first, and the reversibility check's, so a step costs one
// gradient instead of two, and the transitions are the same: bit for bit
// where the compiler fuses no multiply-adds (TETHER_FMA=OFF, or a portable
// build), to roundoff where it does, since it fuses the two code paths'
// kicks differently.

// A Fisher-Bingham density (whose gradient, unlike the pendulum's, moves
// with q: a stale force would show), counting its gradients.
struct CountingFisherBingham : FisherBingham {
  int* evaluations = nullptr;
  Vec<dof> potential_gradient(const Vec<dof>& q) const {
    ++*evaluations;
    return FisherBingham::potential_gradient(q);
  }
};

// RATTLE whose steps do not carry their force: the sampler before.
struct RattleWithoutCarry : Rattle {
  static constexpr bool carries_force = false;
};

TEST(HmcForceCarry, TransitionsAreTheSameWithAGradientAStepSaved) {
  int evaluations = 0;
  Mat<3, 3> bingham = Mat<3, 3>::Zero();
  bingham(2, 2) = 3;
  CountingFisherBingham sys;
  static_cast<FisherBingham&>(sys) = test::fisher_bingham(Vec3(0, 0, 1), 1.5, bingham);
  sys.evaluations = &evaluations;
  for (const bool dynamic : {false, true}) {
    HmcControl ctl = control(1, 12, 5);
    ctl.dynamic = dynamic;
    ctl.max_depth = 6;
    PhaseState<CountingFisherBingham> a = test::make_state<CountingFisherBingham>(Vec3(1, 0, 0), Vec3::Zero()), b = a;
    long with = 0, without = 0, steps = 0, accepted = 0;
    for (std::uint64_t k = 0; k < 60; ++k) {
      evaluations = 0;
      const HmcDraw d = transition(sys, Rattle{}, ctl, 0.15, 3, k, a);
      with += evaluations;
      evaluations = 0;
      const HmcDraw e = transition(sys, RattleWithoutCarry{}, ctl, 0.15, 3, k, b);
      without += evaluations;
      const std::string where = "transition " + std::to_string(k) + (dynamic ? ", dynamic" : ", static");
      ASSERT_EQ(d.outcome, e.outcome) << where;
      ASSERT_EQ(d.steps, e.steps) << where;
#ifdef TETHER_NO_FMA
      const Real roundoff = 0;
#else
      const Real roundoff = 1e-13;
#endif
      ASSERT_LE(std::abs(d.energy - e.energy), roundoff) << where;
      ASSERT_LE(max_abs(Vec3(a.q - b.q)), roundoff) << where;
      ASSERT_LE(max_abs(Vec3(a.p - b.p)), roundoff) << where;
      steps += d.steps;
      accepted += d.outcome == HmcOutcome::accepted;
    }
    if (!dynamic) EXPECT_GT(accepted, 30);  // (a dynamic draw's outcome says how its trajectory ended)
    EXPECT_GT(steps, 60 * 4) << (dynamic ? "dynamic" : "static");
    // Each step and each check's step took two gradients; now one, and one
    // more where a trajectory (static: L steps, then L back) or a subtree starts.
    EXPECT_EQ(without, 4 * steps) << (dynamic ? "dynamic" : "static");
    if (dynamic)
      EXPECT_LE(with, 2 * steps + 60 * ctl.max_depth);
    else
      EXPECT_EQ(with, 2 * steps + 60);
    EXPECT_GE(with, 2 * steps);
  }
}

// closed_subtrees against the recursive tree it replaces: in a subtree of
// 2^depth leaves grown leaf by leaf, the aligned subtrees of 2, 4, ... leaves
// that end at leaf n start at leaves s; checkpoint k, written at the even
// leaves, must hold leaf s of the subtree of 2^(hi - k + 1) leaves.
TEST(DynamicHmc, CheckpointsAreTheFirstLeavesOfTheClosedSubtrees) {
  for (int depth = 0; depth <= 10; ++depth) {
    std::vector<int> written(12, -1);  // checkpoint -> the leaf it holds
    for (int n = 0; n < (1 << depth); ++n) {
      int lo = 0, hi = 0;
      closed_subtrees(n, lo, hi);
      if (n % 2 == 0) written[std::size_t(hi)] = n;
      std::vector<int> starts;  // of the aligned subtrees of >= 2 leaves ending at n, smallest first
      for (int size = 2; size <= (1 << depth); size *= 2)
        if ((n + 1) % size == 0) starts.push_back(n + 1 - size);
      ASSERT_EQ(hi - lo + 1, int(starts.size())) << "leaf " << n;
      for (int k = hi; k >= lo; --k) ASSERT_EQ(written[std::size_t(k)], starts[std::size_t(hi - k)]) << "leaf " << n;
      ASSERT_LT(hi, std::max(depth, 1)) << "leaf " << n;  // max_depth checkpoints suffice
    }
  }
}

// A trajectory's statistics: depth d (the subtrees merged, Stan's) took
// 2^d - 1 steps, and up to 2^d more in a subtree it dropped; max_depth bounds
// d, and a trajectory stopped there dropped nothing; the momentum and the
// position stay on T*N.
TEST(DynamicHmc, TrajectoriesKeepTheirBounds) {
  SphericalPendulum sys;
  for (int max_depth : {2, 10}) {
    HmcControl ctl = dynamic_control(2, 67);
    ctl.max_depth = max_depth;
    PhaseState<SphericalPendulum> s = test::make_state<SphericalPendulum>(Vec3(1, 0, 0), Vec3::Zero());
    int u_turns = 0, at_max = 0;
    for (int k = 0; k < 400; ++k) {
      const HmcDraw d = transition(sys, Rattle{}, ctl, 0.1, 0, std::uint64_t(k), s);
      ASSERT_GE(d.tree_depth, 1);  // (no step fails here, and a subtree of one step has no U-turn inside)
      ASSERT_LE(d.tree_depth, max_depth);
      ASSERT_GE(d.steps, (1 << d.tree_depth) - 1);
      ASSERT_LE(d.steps, (1 << (d.tree_depth + 1)) - 1);
      if (d.outcome == HmcOutcome::max_depth) ASSERT_EQ(d.steps, (1 << max_depth) - 1);
      ASSERT_GE(d.acceptance, 0);
      ASSERT_LE(d.acceptance, 1);
      ASSERT_NEAR(s.q.norm(), 1, 1e-12);
      ASSERT_NEAR(s.q.dot(s.p), 0, 1e-12);
      ASSERT_NEAR(d.energy, total_energy(sys, s.q, s.p), 1e-12);
      u_turns += d.outcome == HmcOutcome::u_turn;
      at_max += d.outcome == HmcOutcome::max_depth;
    }
    if (max_depth == 2) EXPECT_GT(at_max, 200);  // a half period is ~30 steps of 0.1
    if (max_depth == 10) EXPECT_EQ(u_turns, 400);
  }
}

const std::string kDynamic = R"({"name": "rattle", "dt": 0.15})";

TEST(DynamicHmcEngine, DrawsDoNotDependOnThreadsOrBatches) {
  const std::string base = R"({"algorithm": "dynamic", "chains": 100, "draws": 20, "warmup": 20, "thin": 2,
                              "seed": 9, "temperature": 3, "jitter": {"dt": 0.2}BATCH})";
  auto run = [&](int threads, const std::string& batch, const std::string& backend) {
    omp_set_num_threads(threads);
    std::string s = base;
    s.replace(s.find("BATCH"), 5, batch);
    MemoryDraws out(100, 20, 3);
    const SampleResult r = sample_into(sample_json(kSphere, kDynamic, s), out, backend);
    EXPECT_EQ(r.outcomes[std::size_t(HmcOutcome::u_turn)] + r.outcomes[std::size_t(HmcOutcome::max_depth)] +
                  r.outcomes[std::size_t(HmcOutcome::divergence)] + r.outcomes[std::size_t(HmcOutcome::newton)] +
                  r.outcomes[std::size_t(HmcOutcome::reversibility)],
              100 * 20);
    std::int64_t steps = 0;
    for (int k : out.steps) steps += k;
    EXPECT_EQ(r.steps, steps);
    return out;
  };
  const int all = omp_get_max_threads();
  const MemoryDraws a = run(1, "", "cpu"), b = run(std::max(2, all), R"(, "batch_size": 16)", "cpu"),
                    c = run(2, R"(, "batch_size": 7)", "cpu");
  omp_set_num_threads(all);
  for (const MemoryDraws* other : {&b, &c}) {
    EXPECT_EQ(a.q, other->q);
    EXPECT_EQ(a.tree_depth, other->tree_depth);
    EXPECT_EQ(a.steps, other->steps);
    EXPECT_EQ(a.step_size, other->step_size);
    EXPECT_EQ(a.acceptance, other->acceptance);
  }
  EXPECT_GE(*std::min_element(a.tree_depth.begin(), a.tree_depth.end()), 0);  // every draw written
  EXPECT_GT(*std::max_element(a.tree_depth.begin(), a.tree_depth.end()), 2);
}

// The reference backend takes the same decisions over a short sample and
// agrees to its solver's tolerance (as HmcEngine.ReferenceAgreesWithCpu).
TEST(DynamicHmcEngine, ReferenceAgreesWithCpu) {
  expect_reference_agrees_with_cpu(
      sample_json(kSphere, R"({"name": "rattle", "dt": 0.05})",
                  R"({"algorithm": "dynamic", "chains": 12, "draws": 4, "seed": 4, "temperature": 3})"),
      12, 4, 3);
}

// Warm-up adapts the step size to the mean acceptance statistic (Stan's accept_stat__).
// As in 5, the averaged step lands somewhat above the target in acceptance.
TEST(DynamicHmcEngine, DualAveragingReachesItsTarget) {
  auto run = [&](Real target) {
    MemoryDraws out(100, 50, 3);
    return sample_into(sample_json(kSphere, kDynamic,
                                   R"({"algorithm": "dynamic", "chains": 100, "draws": 50, "warmup": 200, "seed": 2,
                                       "temperature": 2, "target_acceptance": )" + std::to_string(target) + "}"),
                       out);
  };
  const SampleResult low = run(0.6), high = run(0.95);
  EXPECT_NEAR(low.mean_acceptance, 0.6, 0.08);  // (a failed step counts 0: at 0.6 a third of the trajectories meet one)
  EXPECT_NEAR(high.mean_acceptance, 0.95, 0.03);
  EXPECT_GT(low.step_size_min, high.step_size_max);
}

TEST(DynamicHmcConfig, BadInputIsNamedByItsPath) {
  const std::string dyn = R"({"algorithm": "dynamic", "chains": 10, "draws": 10)";
  expect_sample_error(sample_json(kSphere, kDynamic, R"({"algorithm": "nuts", "chains": 10, "draws": 10})"),
                      "sample.algorithm", "dynamic");
  expect_sample_error(sample_json(kSphere, kRattle, dyn + "}"), "method.steps", "chooses");
  expect_sample_error(sample_json(kSphere, kDynamic, dyn + R"(, "max_depth": 0})"), "sample.max_depth", "between");
  expect_sample_error(sample_json(kSphere, kDynamic, dyn + R"(, "max_depth": 21})"), "sample.max_depth", "between");
  expect_sample_error(sample_json(kSphere, kDynamic, dyn + R"(, "max_energy_error": 0})"), "sample.max_energy_error",
                      "positive");
  expect_sample_error(sample_json(kSphere, kDynamic, dyn + R"(, "refresh_angle": 1})"), "sample.refresh_angle",
                      "afresh");
  expect_sample_error(sample_json(kSphere, kDynamic, dyn + R"(, "jitter": {"steps": 0.1}})"), "sample.jitter.steps",
                      "chooses");
  expect_sample_error(sample_json(kSphere, kRattle, R"({"chains": 10, "draws": 10, "max_depth": 5})"),
                      "sample.max_depth", "dynamic");
  expect_sample_error(sample_json(kSphere, kDynamic, R"({"chains": 10, "draws": 10})"), "method.steps", "missing");
}

// ===========================================================================
// 13. A metric other than the mass. A fixed Sigma as a chain stores it: its
// diagonal, or the packed lower Cholesky factor.
template <int N>
std::vector<Real> stored_metric(MetricKind kind, const Mat<N, N>& sigma) {
  std::vector<Real> v(std::size_t(metric_values(kind, N)));
  const Mat<N, N> l = sigma.llt().matrixL();
  for (int r = 0; r < N; ++r) {
    if (kind != MetricKind::dense) v[std::size_t(r)] = sigma(r, r);
    else
      for (int c = 0; c <= r; ++c) v[std::size_t(packed_index(r, c))] = l(r, c);
  }
  return v;
}

template <int N>
Mat<N, N> random_covariance(std::uint64_t seed) {
  CounterRng rng(seed, 0, 0);
  Mat<N, N> a;
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < N; ++c) a(r, c) = rng.normal();
  return a * a.transpose() / N + Real(0.1) * Mat<N, N>::Identity();
}

// Sigma p, Sigma^-1 v and a square root C C^T = Sigma^-1, column by column, against Eigen's.
TEST(Metric, AppliesSigmaItsInverseAndARootOfIt) {
  const Mat<5, 5> sigma = random_covariance<5>(3);
  for (MetricKind kind : {MetricKind::diag, MetricKind::dense}) {
    const Mat<5, 5> want = kind == MetricKind::dense ? sigma : Mat<5, 5>(sigma.diagonal().asDiagonal());
    const std::vector<Real> v = stored_metric(kind, sigma);
    const ChainMetric m{kind, v.data(), 1};
    Mat<5, 5> inverse, times, root;
    for (int j = 0; j < 5; ++j) {
      const Vec<5> e = Vec<5>::Unit(j);
      inverse.col(j) = m.inverse_times(e);
      times.col(j) = m.times(e);
      root.col(j) = m.sqrt_times(e);
    }
    EXPECT_LT((inverse - want).norm(), 1e-13) << metric_name(kind);
    EXPECT_LT((times - Mat<5, 5>(want.inverse())).norm(), 1e-11 * want.inverse().norm()) << metric_name(kind);
    EXPECT_LT((root * root.transpose() - Mat<5, 5>(want.inverse())).norm(), 1e-11 * want.inverse().norm())
        << metric_name(kind);
  }
}

// V_M's gradient is its derivative (central differences of V_M itself, in
// the ambient space where both are defined), for constraints with several
// rows (the double pendulum's two, a chain's three bonds) and a dense Sigma; and
// where M is the system's own mass, V_M is V.
TEST(Metric, LogDeterminantTermHasItsGradientAndVanishesAtTheMass) {
  auto check = [](const auto& sys, const auto& q, std::uint64_t seed) {
    using S = std::decay_t<decltype(sys)>;
    constexpr int n = S::dof;
    const Mat<n, n> sigma = random_covariance<n>(seed);
    const std::vector<Real> v = stored_metric(MetricKind::dense, sigma);
    const MetricSystem<S> m{sys, ChainMetric{MetricKind::dense, v.data(), 1}, Real(1.7)};
    const Vec<n> grad = m.potential_gradient(q);
    const Real d = 1e-6;
    for (int j = 0; j < n; ++j) {
      Vec<n> up = q, down = q;
      up[j] += d;
      down[j] -= d;
      EXPECT_NEAR(grad[j], (m.potential(up) - m.potential(down)) / (2 * d), 1e-6 * (1 + grad.norm())) << S::name << " " << j;
    }
    EXPECT_GT(std::abs(m.potential(q) - sys.potential(q)), 1e-3) << S::name << ": the term is there";
    // Sigma = M0^-1 (these systems' masses are diagonal): V_M = V.
    std::vector<Real> own(n);
    for (int c = 0; c < n; ++c) own[std::size_t(c)] = sys.inverse_mass_times(Vec<n>(Vec<n>::Unit(c)))[c];
    const MetricSystem<S> same{sys, ChainMetric{MetricKind::diag, own.data(), 1}, Real(1.7)};
    EXPECT_NEAR(same.potential(q), sys.potential(q), 1e-12 * (1 + std::abs(sys.potential(q)))) << S::name;
    EXPECT_LT((same.potential_gradient(q) - sys.potential_gradient(q)).norm(), 1e-8) << S::name;
  };
  DoublePendulum dp;
  dp.prm.mass2 = 3;
  check(dp, Vec<4>(0.6, -0.8, 1.5, -1.2), 5);
  Chain<4> chain;
  CounterRng rng(5, 0, 0);
  check(chain, chain.thermal_configuration(rng, 1), 7);
}

// Stan's windows: 75 / 25, 50, 100, 200, 500 / 50 for 1000 warm-up
// iterations; 15% / 75% / 10% below 150; dual averaging restarts after each.
TEST(Metric, WindowsAreStans) {
  auto windows = [](std::int64_t warmup) {
    const MetricWindows w = MetricWindows::stan(warmup);
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    std::int64_t start = 0, end = -1;
    for (std::int64_t k = 0; k < warmup; ++k) {
      std::int64_t s = 0, e = 0;
      if (w.window_of(k, s, e) && (s != start || e != end)) out.emplace_back(start = s, end = e);
    }
    return out;
  };
  using W = std::vector<std::pair<std::int64_t, std::int64_t>>;
  EXPECT_EQ(windows(1000), (W{{75, 99}, {100, 149}, {150, 249}, {250, 449}, {450, 949}}));
  EXPECT_EQ(windows(500), (W{{75, 99}, {100, 149}, {150, 249}, {250, 449}}));
  EXPECT_EQ(windows(150), (W{{75, 99}}));
  EXPECT_EQ(windows(100), (W{{15, 89}}));
  const MetricWindows w = MetricWindows::stan(1000);
  EXPECT_EQ(w.restart_before(0), 0);
  EXPECT_EQ(w.restart_before(99), 0);
  EXPECT_EQ(w.restart_before(100), 100);
  EXPECT_EQ(w.restart_before(149), 100);
  EXPECT_EQ(w.restart_before(150), 150);
  EXPECT_EQ(w.restart_before(999), 950);
}

// A window's estimate is Stan's regularised sample covariance (its diagonal
// for diag), here with length scale 2; an estimate that is not finite is
// refused and Sigma kept. Either way the window's sums restart.
TEST(Metric, WindowEstimateIsStansRegularisedCovariance) {
  constexpr int n = 3, count = 30;
  CounterRng rng(11, 0, 0);
  std::vector<Vec<n>> x(count);
  for (auto& v : x) v = Vec<n>(rng.normal(), 2 + 3 * rng.normal(), rng.normal()) + Vec<n>(0, 0, 0.5 * v[0]);
  Vec<n> mean = Vec<n>::Zero();
  for (const auto& v : x) mean += v / count;
  Mat<n, n> cov = Mat<n, n>::Zero();
  for (const auto& v : x) cov += (v - mean) * (v - mean).transpose() / (count - 1);
  const Mat<n, n> want = Real(count) / (count + 5) * cov + Real(1e-3 * 4 * 5) / (count + 5) * Mat<n, n>::Identity();
  for (MetricKind kind : {MetricKind::diag, MetricKind::dense}) {
    const MetricLayout l = MetricLayout::of(kind, n);
    std::vector<Real> m(std::size_t(l.size));
    metric_start(kind, n, m.data(), 1, 0);
    for (int k = 0; k < count; ++k) metric_add_state<n>(kind, l, m.data(), 1, x[std::size_t(k)], k + 1);
    ASSERT_TRUE(metric_end_window<n>(kind, l, m.data(), 1, count, 2));
    const ChainMetric got{kind, m.data() + l.values, 1};
    Mat<n, n> sigma;
    for (int j = 0; j < n; ++j) sigma.col(j) = got.inverse_times(Vec<n>(Vec<n>::Unit(j)));
    const Mat<n, n> expected = kind == MetricKind::dense ? want : Mat<n, n>(want.diagonal().asDiagonal());
    EXPECT_LT((sigma - expected).norm(), 1e-12 * expected.norm()) << metric_name(kind);
    for (int e = l.mean; e < l.mu; ++e) EXPECT_EQ(m[std::size_t(e)], 0) << "the sums restart";
    const std::vector<Real> before(m.begin(), m.end());
    for (int k = 0; k < 5; ++k) metric_add_state<n>(kind, l, m.data(), 1, Vec<n>(1, Real(NAN), 0), k + 1);
    EXPECT_FALSE(metric_end_window<n>(kind, l, m.data(), 1, 5, 2)) << metric_name(kind);
    EXPECT_EQ(m, before) << "Sigma kept, the sums restarted";
  }
}

// After a window, a step size from trial steps (Stan's init_stepsize): on the
// Bingham density exp(-5000 z^2) on the sphere with its own scales as Sigma,
// from a step a million times too small and from one a hundred times too
// large the trials end within a factor 8 of each other (each stops at the
// first step whose acceptance crossed 0.8, one from below and one from
// above, each trial with its own momentum); that step is tens of times the
// one the mass allows (what warm-up kept before the window); and the chain
// has not moved.
TEST(Metric, AStepSizeFromTrialsCrossesStansThresholdFromEitherSide) {
  Mat<3, 3> a = Mat<3, 3>::Zero();
  a(2, 2) = -5000;
  const FisherBingham sys = test::fisher_bingham(Vec3(0, 0, 1), 0, a);
  const std::vector<Real> scales = stored_metric(MetricKind::diag, Mat<3, 3>(Vec3(0.5, 0.5, 1e-4).asDiagonal()));
  const std::vector<Real> mass = stored_metric(MetricKind::identity, Mat<3, 3>(Mat<3, 3>::Identity()));
  const MetricSystem<FisherBingham> adapted{sys, ChainMetric{MetricKind::diag, scales.data(), 1}, 1};
  const MetricSystem<FisherBingham> unit{sys, ChainMetric{MetricKind::identity, mass.data(), 1}, 1};
  std::vector<Real> q = {0.6, 0.8, 0}, p = {0.1, -0.2, 0.3}, pq(3), pp(3);
  const ChainSlot slot{q.data(), p.data(), pq.data(), pp.data(), 1, nullptr};
  const HmcControl ctl = dynamic_control(1, 93);
  for (std::uint64_t iteration : {75, 100, 150}) {
    const Real up = reasonable_step_size(adapted, Rattle{}, ctl, 1e-6, 3, iteration, slot);
    const Real down = reasonable_step_size(adapted, Rattle{}, ctl, 100, 3, iteration, slot);
    const Real with_mass = reasonable_step_size(unit, Rattle{}, ctl, 1e-6, 3, iteration, slot);
    EXPECT_GT(up, 1e-3) << iteration;
    EXPECT_LT(down, 10) << iteration;
    EXPECT_LT(std::max(up / down, down / up), 8) << iteration << ": " << up << " from below, " << down << " from above";
    EXPECT_GT(std::min(up, down) / with_mass, 10) << iteration;
    EXPECT_EQ(reasonable_step_size(adapted, Rattle{}, ctl, 1e-6, 3, iteration, slot), up) << "a pure function";
  }
  EXPECT_EQ(q, (std::vector<Real>{0.6, 0.8, 0}));
  EXPECT_EQ(p, (std::vector<Real>{0.1, -0.2, 0.3}));
}

// The marginals of 1a with a fixed metric far from the mass (Sigma =
// diag(4, 1, 0.2), and that rotated for dense), by both algorithms: exact.
// Power: without the log-determinant term the chain samples the measure M
// induces, sqrt(q.Sigma q) times the target here, which the test rejects.
TEST(MetricHmcMarginal, SphericalPendulumHeightWithEachMetric) {
  SphericalPendulum sys;
  const Real kT = 2, a = sys.prm.mass * sys.prm.gravity / kT;
  const Vec3 start(0.6, 0, -0.8);  // where most of the mass is: a heavy direction mixes slowly
  const auto height = [](const Vec3& q) { return q[2]; };
  const auto cdf = [&](Real x) { return sphere_height_cdf(x, a, sys.prm.length); };
  const Mat<3, 3> axes = Vec3(4, 1, 0.2).asDiagonal();
  const Mat<3, 3> r = Eigen::AngleAxis<Real>(0.5, Vec3(1, -2, 1).normalized()).toRotationMatrix();
  for (const auto& [kind, sigma] : {std::pair{MetricKind::identity, Mat<3, 3>(Mat<3, 3>::Identity())},
                                    std::pair{MetricKind::diag, axes},
                                    std::pair{MetricKind::dense, Mat<3, 3>(r * axes * r.transpose())}}) {
    const std::vector<Real> v = stored_metric(kind, sigma);
    MetricSystem<SphericalPendulum> m{sys, ChainMetric{kind, v.data(), 1}, kT};
    const Real ps = marginal_p_value(m, control(kT, 10, 81), 0.1, 60, start, height, cdf);
    const Real pd = marginal_p_value(m, dynamic_control(kT, 83), 0.1, 40, start, height, cdf);
    EXPECT_GT(ps, kAlpha) << metric_name(kind);
    EXPECT_GT(pd, kAlpha) << metric_name(kind);
    if (kind == MetricKind::identity) continue;
    // With the dense metric (the stepper's path is the diagonal's), RATTLE's composition to order 4
    // (triple jump), whose substeps keep the kick's properties (at a smaller step: its substeps are up
    // to 1.7 h, and this metric's position solves fail often at 0.1).
    using TripleJump = Composition<Rattle>;
    const bool composition = kind == MetricKind::dense;
    if (composition)
      EXPECT_GT(marginal_p_value<TripleJump>(m, control(kT, 10, 89), 0.05, 60, start, height, cdf), kAlpha)
          << metric_name(kind) << ", composition";
    m.correct_measure = false;
    EXPECT_LT(marginal_p_value(m, dynamic_control(kT, 83), 0.1, 40, start, height, cdf), kPowerP)
        << metric_name(kind) << ": the test cannot tell a sampler without the log-determinant term";
    if (composition)
      EXPECT_LT(marginal_p_value<TripleJump>(m, control(kT, 10, 89), 0.05, 60, start, height, cdf), kPowerP)
          << metric_name(kind) << ", composition: the test cannot tell a sampler without the log-determinant term";
  }
}

// 1b and 1d with dense metrics: several constraints, unequal masses (the
// term's M0 part), a statistical target.
TEST(MetricHmcMarginal, DoublePendulumAndFisherBinghamWithADenseMetric) {
  DoublePendulum dp;
  dp.prm.gravity = 0;
  dp.prm.mass1 = 1;
  dp.prm.mass2 = 4;
  const std::vector<Real> v4 = stored_metric(MetricKind::dense, random_covariance<4>(13));
  const MetricSystem<DoublePendulum> mdp{dp, ChainMetric{MetricKind::dense, v4.data(), 1}, 1};
  EXPECT_GT(marginal_p_value(mdp, dynamic_control(1, 85), 0.1, 20, Vec<4>(1, 0, 1, -1), relative_angle,
                             relative_angle_cdf(dp.prm.mass1, dp.prm.mass2)),
            kAlpha);
  const Real kappa = 1.5, beta = 3;
  Mat<3, 3> a = Mat<3, 3>::Zero();
  a(2, 2) = beta;
  const FisherBingham fb = test::fisher_bingham(Vec3(0, 0, 1), kappa, a);
  const std::vector<Real> v3 = stored_metric(MetricKind::dense, random_covariance<3>(17));
  const MetricSystem<FisherBingham> mfb{fb, ChainMetric{MetricKind::dense, v3.data(), 1}, 1};
  EXPECT_GT(marginal_p_value(mfb, dynamic_control(1, 87), 0.15, 30, Vec3(1, 0, 0), [](const Vec3& q) { return q[2]; },
                             fisher_bingham_height_cdf(kappa, beta)),
            kAlpha);
}

// Warm-up finds a target's scales: on a Bingham density exp(-5000 z^2) on
// the sphere, x and y have variance (1 - 1/10^4)/2 and z 1/10^4 (to 1e-8).
// After 1000 warm-up iterations each chain's Sigma holds them (to the
// sampling error of its last window, 500 correlated states, plus Stan's
// regularisation, 1e-5 on the diagonal), and its step size is some 30 times
// what the mass allows.
TEST(MetricHmcEngine, WarmupFindsTheTargetsScales) {
  Mat<3, 3> a = Mat<3, 3>::Zero();
  a(2, 2) = -5000;
  const FisherBingham sys = test::fisher_bingham(Vec3(0, 0, 1), 0, a);
  for (MetricKind kind : {MetricKind::diag, MetricKind::dense}) {
    constexpr int chains = 8, n = 3;
    const MetricLayout l = MetricLayout::of(kind, n);
    std::vector<Real> q(n * chains), p(n * chains, 0), pq(n * chains), pp(n * chains), h(chains, 0.01),
        lhb(chains, 0), hb(chains, 0), metric(std::size_t(l.size * chains));
    std::vector<Real> tree(std::size_t(DynamicTree::vectors(10) * n * chains));
    for (int i = 0; i < chains; ++i) {
      q[std::size_t(i)] = 1;  // (1, 0, 0): on the equator
      metric_start(kind, n, metric.data() + i, chains, std::log(0.1));
    }
    SampleView v;
    v.count = chains, v.q = q.data(), v.p = p.data(), v.proposal_q = pq.data(), v.proposal_p = pp.data();
    v.step_size = h.data(), v.log_h_bar = lhb.data(), v.h_bar = hb.data(), v.tree = tree.data();
    v.metric = metric.data();
    HmcControl ctl = dynamic_control(1, 91);
    ctl.metric = kind;
    SamplePlan plan;
    plan.iterations = plan.warmup = 1000;
    plan.mu = std::log(0.1);
    plan.windows = MetricWindows::stan(1000);
    for (int i = 0; i < chains; ++i) run_chain(sys, Rattle{}, ctl, plan, v, i);
    for (int i = 0; i < chains; ++i) {
      const ChainMetric m{kind, metric.data() + l.values * chains + i, chains};
      Mat<3, 3> sigma;
      for (int j = 0; j < 3; ++j) sigma.col(j) = m.inverse_times(Vec3(Vec3::Unit(j)));
      EXPECT_NEAR(sigma(0, 0), 0.5, 0.2) << metric_name(kind) << " chain " << i;
      EXPECT_NEAR(sigma(1, 1), 0.5, 0.2) << metric_name(kind) << " chain " << i;
      EXPECT_NEAR(sigma(2, 2), 1.1e-4, 0.4e-4) << metric_name(kind) << " chain " << i;
      EXPECT_EQ(metric[std::size_t(l.fallbacks * chains + i)], 0);
      EXPECT_GT(h[std::size_t(i)], 0.3) << metric_name(kind) << " chain " << i;
    }
  }
}

// The engine: draws independent of threads and batches with adapted metrics
// (each chain adapts its own), the reference backend agreeing with cpu.
TEST(MetricHmcEngine, DrawsDoNotDependOnThreadsOrBatches) {
  for (const std::string metric : {"diag", "dense"}) {
    const std::string base = R"({"algorithm": "dynamic", "metric": ")" + metric +
                             R"(", "chains": 50, "draws": 20, "warmup": 60, "seed": 9, "temperature": 3BATCH})";
    auto run = [&](int threads, const std::string& batch) {
      omp_set_num_threads(threads);
      std::string s = base;
      s.replace(s.find("BATCH"), 5, batch);
      MemoryDraws out(50, 20, 3);
      sample_into(sample_json(kSphere, R"({"name": "rattle", "dt": 0.1})", s), out);
      return out;
    };
    const int all = omp_get_max_threads();
    const MemoryDraws a = run(1, ""), b = run(std::max(2, all), R"(, "batch_size": 7)");
    omp_set_num_threads(all);
    EXPECT_EQ(a.q, b.q) << metric;
    EXPECT_EQ(a.step_size, b.step_size) << metric;
    EXPECT_GE(*std::min_element(a.outcome.begin(), a.outcome.end()), 0) << "every draw written";
  }
  // (Without warm-up: dual averaging tries steps where the reference solver
  // fails and cpu's does not. The identity on unequal masses: V_M is not V.)
  expect_reference_agrees_with_cpu(sample_json(R"({"name": "double_pendulum", "parameters": {"mass2": 3}})",
                                               R"({"name": "rattle", "dt": 0.05})",
                                               R"({"algorithm": "dynamic", "metric": "identity", "chains": 12,
                                                   "draws": 4, "seed": 4})"),
                                   12, 4, 4);
  // A composition of RATTLE steps with a fixed metric, through the host chain's step pointer.
  expect_reference_agrees_with_cpu(sample_json(R"({"name": "double_pendulum", "parameters": {"mass2": 3}})",
                                               R"({"name": "composition", "base": "rattle", "scheme": "triple_jump",
                                                   "dt": 0.03, "steps": 5})",
                                               R"({"metric": "identity", "chains": 12, "draws": 4, "seed": 6})"),
                                   12, 4, 4);
}

// summary.json's metric_scales through the engine: each coordinate's
// sqrt(Sigma_cc) over the chains, on the Bingham target above (sd 0.707,
// 0.707, 0.00707). The last window has n = 100 states here, so the range is
// wide, and Stan's regularisation, 1e-3 5/(n + 5) on the variances, is as
// large as z's own: what the scales estimate is sqrt(n/(n + 5) sd^2 + that),
// 0.69 for x and y and 0.0098 for z.
// The sink is handed each chain's Sigma (draws.nc's inverse_metric): its
// diagonal gives the scales; a dense one is symmetric positive definite.
TEST(MetricHmcEngine, ReportsTheScalesItLearned) {
  for (const std::string metric : {"diag", "dense"}) {
    const MetricKind kind = metric == "diag" ? MetricKind::diag : MetricKind::dense;
    MemoryDraws out(20, 5, 3, kind);
    const SampleResult r = sample_into(
        sample_json(R"({"name": "fisher_bingham", "parameters": {"kappa": 0, "bingham": [0, 0, -10000, 0, 0, 0]}})",
                    R"({"name": "rattle", "dt": 0.01})",
                    R"({"algorithm": "dynamic", "metric": ")" + metric +
                        R"(", "chains": 20, "draws": 5, "warmup": 300, "seed": 3})"),
        out);
    ASSERT_EQ(r.metric_scale_min.size(), 3u) << metric;
    ASSERT_EQ(r.metric_scale_max.size(), 3u) << metric;
    EXPECT_EQ(r.metric_fallbacks, 0) << metric;
    for (int c = 0; c < 3; ++c) {
      const Real variance = c < 2 ? 0.5 : 5e-5, n = 100;
      const Real sd = std::sqrt(n / (n + 5) * variance + 1e-3 * 5 / (n + 5));
      EXPECT_GT(r.metric_scale_min[c], 0.5 * sd) << metric << " " << c;
      EXPECT_LT(r.metric_scale_max[c], 1.5 * sd) << metric << " " << c;
      EXPECT_LE(r.metric_scale_min[c], r.metric_scale_max[c]);
    }
    for (int i = 0; i < 20; ++i) {
      Eigen::Matrix3d sigma = Eigen::Matrix3d::Zero();
      for (int a = 0; a < 3; ++a)
        for (int b = 0; b < 3; ++b)
          if (kind == MetricKind::dense) sigma(a, b) = out.inverse_metric[std::size_t(i * 9 + a * 3 + b)];
          else if (a == b) sigma(a, b) = out.inverse_metric[std::size_t(i * 3 + b)];
      for (int c = 0; c < 3; ++c) {
        EXPECT_GE(std::sqrt(sigma(c, c)), r.metric_scale_min[c] * (1 - 1e-12)) << metric << " chain " << i;
        EXPECT_LE(std::sqrt(sigma(c, c)), r.metric_scale_max[c] * (1 + 1e-12)) << metric << " chain " << i;
      }
      EXPECT_TRUE(sigma.isApprox(sigma.transpose(), 1e-14)) << metric << " chain " << i;
      EXPECT_EQ(Eigen::LLT<Eigen::Matrix3d>(sigma).info(), Eigen::Success) << metric << " chain " << i;
    }
  }
  MemoryDraws out(4, 5, 3);
  EXPECT_TRUE(sample_into(sample_json(kSphere, kRattle, R"({"chains": 4, "draws": 5})"), out).metric_scale_min.empty());
}

TEST(MetricHmcConfig, BadInputIsNamedByItsPath) {
  const std::string ok = R"("chains": 10, "draws": 10, "warmup": 20)";
  expect_sample_error(sample_json(kSphere, kRattle, R"({"metric": "unit", )" + ok + "}"), "sample.metric", "dense");
  expect_sample_error(sample_json(kSphere, R"({"name": "composition", "base": "constrained_midpoint", "scheme": "triple_jump", "dt": 0.1, "steps": 2})",
                                  R"({"metric": "diag", )" + ok + "}"),
                      "sample.metric", "method is composition (base constrained_midpoint, scheme triple_jump)");
  parse_sample_config(sample_json(kSphere, R"({"name": "composition", "base": "rattle", "scheme": "suzuki", "dt": 0.1, "steps": 2})",
                                  R"({"metric": "dense", )" + ok + "}"),
                      "test");
  expect_sample_error(sample_json(kSphere, kRattle, R"({"metric": "dense", "chains": 10, "draws": 10, "warmup": 19})"),
                      "sample.metric", "warmup >= 20");
  parse_sample_config(sample_json(kSphere, kRattle, R"({"metric": "identity", "chains": 10, "draws": 10})"), "test");
}

}  // namespace
}  // namespace tether

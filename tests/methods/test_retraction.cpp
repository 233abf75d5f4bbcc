// Retraction-map integrators of BM21 and the unconstrained Kepler system:
// exact-solution orders (Kepler's equation), symplecticity of one-step maps by
// finite differences, first integrals, agreement with independently written
// methods, residuals of the reference form. Every expected value comes from
// the mathematics (orders, invariants, formulas), never from program output.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tether/methods/constrained_midpoint.hpp"
#include "tether/methods/newmark.hpp"
#include "tether/methods/rattle.hpp"
#include "tether/methods/retraction.hpp"
#include "tether/methods/shake.hpp"
#include "tether/methods/sphere_retraction.hpp"
#include "tether/methods/symplectic_euler_a.hpp"
#include "tether/methods/symplectic_euler_b.hpp"
#include "tether/systems/kepler.hpp"
#include "tether/systems/spherical_pendulum.hpp"
#include "order_fit.hpp"

namespace tether {

static void PrintTo(Status s, std::ostream* os) { *os << status_name(s); }

namespace {

constexpr Real kPi = 3.14159265358979323846;

NewtonOptions tight() {
  NewtonOptions o;
  o.tolerance = 1e-14;
  o.max_iterations = 50;
  return o;
}

// ---------------------------------------------------------------------------
// Exact Kepler orbit (ellipse, semi-major axis a, eccentricity e), perihelion
// on +x at t = 0, counter-clockwise: Kepler's equation E - e sin E = n t.
struct KeplerOrbit {
  Real mu = 1.2, mass = 1.5, a = 1.0, e = 0.5;

  Real mean_motion() const { return std::sqrt(mu / (a * a * a)); }
  Real period() const { return 2 * kPi / mean_motion(); }

  void state(Real t, Vec<2>& q, Vec<2>& p) const {
    const Real M = mean_motion() * t;
    Real E = M + e * std::sin(M);
    for (int i = 0; i < 100; ++i) {
      const Real dE = (E - e * std::sin(E) - M) / (1 - e * std::cos(E));
      E -= dE;
      if (std::fabs(dE) < 1e-16) break;
    }
    const Real b = a * std::sqrt(1 - e * e), Edot = mean_motion() / (1 - e * std::cos(E));
    q = Vec<2>(a * (std::cos(E) - e), b * std::sin(E));
    p = mass * Vec<2>(-a * std::sin(E) * Edot, b * std::cos(E) * Edot);
  }

  Kepler system() const {
    Kepler k;
    k.prm.mass = mass;
    k.prm.mu = mu;
    return k;
  }
  PhaseState<Kepler> initial() const {
    PhaseState<Kepler> s;
    state(0, s.q, s.p);
    s.q_prev = s.q;
    return s;
  }
};

// n steps of method m; false (with a gtest failure) on a non-ok status.
template <class S, class M>
bool run(const M& m, const S& sys, PhaseState<S>& s, Real h, int n, const NewtonOptions& opt = tight(),
         int* iterations = nullptr) {
  m.start(sys, s, h);
  int it = 0;
  for (int i = 0; i < n; ++i) {
    const Status st = m.step(sys, s, h, opt, it);
    if (st != Status::ok) {
      ADD_FAILURE() << M::name << ": step " << i << " returned " << status_name(st);
      return false;
    }
  }
  if (iterations) *iterations = it;
  return true;
}

// Observed order of m on the Kepler orbit over [0, T], max-norm error in (q, p).
template <class M>
Real kepler_order(const M& m, std::vector<Real>* errors = nullptr) {
  const KeplerOrbit orbit;
  const Kepler sys = orbit.system();
  const Real T = 2.0;
  Vec<2> qe, pe;
  orbit.state(T, qe, pe);
  std::vector<Real> hs, errs;
  for (int n = 200; n <= 1600; n *= 2) {
    PhaseState<Kepler> s = orbit.initial();
    if (!run(m, sys, s, T / n, n)) return -1;
    hs.push_back(T / n);
    errs.push_back(std::max(max_abs(Vec<2>(s.q - qe)), max_abs(Vec<2>(s.p - pe))));
  }
  if (errors) *errors = errs;
  return test::fitted_order(hs, errs);
}

// Canonical J = [[0, I], [-I, 0]].
template <int N>
Mat<2 * N, 2 * N> omega() {
  Mat<2 * N, 2 * N> o = Mat<2 * N, 2 * N>::Zero();
  o.template topRightCorner<N, N>().setIdentity();
  o.template bottomLeftCorner<N, N>() = -Mat<N, N>::Identity();
  return o;
}

// Jacobian of the one-step map of m at s by central differences.
template <class M, class S>
Mat<2 * S::dof, 2 * S::dof> step_jacobian(const M& m, const S& sys, const PhaseState<S>& s, Real h,
                                          Real eps = 1e-5) {
  constexpr int n = S::dof;
  Mat<2 * n, 2 * n> jac;
  for (int j = 0; j < 2 * n; ++j) {
    PhaseState<S> a = s, b = s;
    if (j < n) { a.q[j] += eps; b.q[j] -= eps; }
    else { a.p[j - n] += eps; b.p[j - n] -= eps; }
    int it = 0;
    EXPECT_EQ(m.step(sys, a, h, tight(), it), Status::ok);
    EXPECT_EQ(m.step(sys, b, h, tight(), it), Status::ok);
    Vec<2 * n> d;
    d << a.q - b.q, a.p - b.p;
    jac.col(j) = d / (2 * eps);
  }
  return jac;
}

template <int K>
Real symplectic_defect(const Mat<K, K>& jac) {
  const Mat<K, K> o = omega<K / 2>();
  return (jac.transpose() * o * jac - o).cwiseAbs().maxCoeff();
}

// A system without a Hessian (for the finite-difference fallback).
struct NoHessian {
  static constexpr int dof = 2;
  Kepler k;
  Vec<2> potential_gradient(const Vec<2>& x) const { return k.potential_gradient(x); }
};

// A state of the e = 0.5 orbit a little past perihelion (strong, varying force).
PhaseState<Kepler> kepler_test_state() {
  const KeplerOrbit orbit;
  PhaseState<Kepler> s;
  orbit.state(0.3, s.q, s.p);
  s.q_prev = s.q;
  return s;
}

// ---------------------------------------------------------------------------
// The Kepler system.

TEST(Kepler, GradientAndHessianMatchFiniteDifferences) {
  const Kepler sys = KeplerOrbit().system();
  const Vec<2> q(0.7, -0.4);
  const Real d = 1e-6;
  for (int j = 0; j < 2; ++j) {
    Vec<2> a = q, b = q;
    a[j] += d;
    b[j] -= d;
    EXPECT_NEAR((sys.potential(a) - sys.potential(b)) / (2 * d), sys.potential_gradient(q)[j], 1e-8);
    const Vec<2> col = (sys.potential_gradient(a) - sys.potential_gradient(b)) / (2 * d);
    for (int i = 0; i < 2; ++i) EXPECT_NEAR(col[i], sys.potential_hessian(q)(i, j), 1e-7);
  }
  // The finite-difference fallback for systems without a Hessian.
  static_assert(has_potential_hessian<Kepler>::value && !has_potential_hessian<NoHessian>::value);
  const Mat<2, 2> fd = potential_hessian_of(NoHessian{sys}, q);
  EXPECT_LT((fd - sys.potential_hessian(q)).cwiseAbs().maxCoeff(), 1e-8);
}

// The oracle itself: Hamilton's equations (by differentiating it in t),
// energy -mu m / (2a), angular momentum m sqrt(mu a (1 - e^2)), |A| = mu m^2 e.
TEST(Kepler, OracleSolvesHamiltonsEquations) {
  const KeplerOrbit orbit;
  const Kepler sys = orbit.system();
  const Real energy = -orbit.mu * orbit.mass / (2 * orbit.a);
  const Real ang = orbit.mass * std::sqrt(orbit.mu * orbit.a * (1 - orbit.e * orbit.e));
  for (Real t : {0.0, 0.4, 1.7, 3.9, 6.5}) {
    Vec<2> q, p, qa, pa, qb, pb;
    orbit.state(t, q, p);
    const Real d = 1e-5;
    orbit.state(t + d, qa, pa);
    orbit.state(t - d, qb, pb);
    EXPECT_LT(max_abs(Vec<2>((qa - qb) / (2 * d) - sys.inverse_mass_times(p))), 1e-8);
    EXPECT_LT(max_abs(Vec<2>((pa - pb) / (2 * d) + sys.potential_gradient(q))), 1e-8);
    EXPECT_NEAR(p.squaredNorm() / (2 * orbit.mass) + sys.potential(q), energy, 1e-13);
    EXPECT_NEAR(Kepler::angular_momentum(q, p), ang, 1e-13);
    EXPECT_NEAR(sys.runge_lenz(q, p).norm(), orbit.mu * orbit.mass * orbit.mass * orbit.e, 1e-13);
  }
  // Circular momentum: the orbit through (r, 0) with that momentum has e = 0.
  const Vec<2> q(0.8, 0.0), p = sys.circular_momentum(q);
  EXPECT_LT(sys.runge_lenz(q, p).norm(), 1e-14);
}

// The holonomic family with constraint_count = 0: RATTLE and SHAKE are
// Stormer-Verlet, symplectic Euler A/B the two symplectic Euler methods.
template <class M>
void expect_kepler_order(const M& m, Real expected) {
  std::vector<Real> errs;
  const Real order = kepler_order(m, &errs);
  std::printf("  %-22s order %.3f  errors %.2e .. %.2e\n", M::name, order, errs.front(), errs.back());
  EXPECT_NEAR(order, expected, 0.1) << M::name;
}

TEST(Kepler, HolonomicMethodsKeepTheirOrders) {
  expect_kepler_order(SymplecticEulerA{}, 1);
  expect_kepler_order(SymplecticEulerB{}, 1);
  expect_kepler_order(Rattle{}, 2);
  expect_kepler_order(Shake{}, 2);
  expect_kepler_order(ConstrainedMidpoint{}, 2);
}

// Their reference residuals with empty multiplier blocks (ResidualLayout, k = 0).
template <class M>
Real holonomic_residual(const M& m) {
  const Kepler sys = KeplerOrbit().system();
  PhaseState<Kepler> s0;
  KeplerOrbit().state(0.3, s0.q, s0.p);
  s0.q_prev = s0.q;
  const Real h = 0.05;
  m.start(sys, s0, h);
  PhaseState<Kepler> s1 = s0;
  int it = 0;
  EXPECT_EQ(m.step(sys, s1, h, NewtonOptions(), it), Status::ok);
  static_assert(ResidualLayout<Kepler>::size == 4);
  return m.residual(sys, s0, h, ResidualLayout<Kepler>::pack(s1.q, s1.p)).cwiseAbs().maxCoeff();
}

TEST(Kepler, HolonomicResidualsVanishAtTheirSteps) {
  EXPECT_LT(holonomic_residual(SymplecticEulerA{}), 1e-12);
  EXPECT_LT(holonomic_residual(SymplecticEulerB{}), 1e-12);
  EXPECT_LT(holonomic_residual(Rattle{}), 1e-12);
  EXPECT_LT(holonomic_residual(Shake{}), 1e-12);
  EXPECT_LT(holonomic_residual(ConstrainedMidpoint{}), 1e-12);
}

// ---------------------------------------------------------------------------
// ThetaRetraction.

ThetaRetraction theta_method(Real theta) {
  ThetaRetraction m;
  m.prm.theta = theta;
  return m;
}

// theta = 0 / 1 are, written out independently, symplectic Euler A / B.
TEST(ThetaRetraction, EndsAreTheSymplecticEulerMethods) {
  const Kepler sys = KeplerOrbit().system();
  PhaseState<Kepler> a = KeplerOrbit().initial(), b = a, c = a, d = a;
  const Real h = 0.01;
  ASSERT_TRUE(run(theta_method(0), sys, a, h, 300));
  ASSERT_TRUE(run(SymplecticEulerA{}, sys, b, h, 300));
  ASSERT_TRUE(run(theta_method(1), sys, c, h, 300));
  ASSERT_TRUE(run(SymplecticEulerB{}, sys, d, h, 300));
  EXPECT_LT(max_abs(Vec<2>(a.q - b.q)) + max_abs(Vec<2>(a.p - b.p)), 1e-12);
  EXPECT_LT(max_abs(Vec<2>(c.q - d.q)) + max_abs(Vec<2>(c.p - d.p)), 1e-12);
}

TEST(ThetaRetraction, Orders) {
  for (Real theta : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    const ThetaRetraction m = theta_method(theta);
    std::vector<Real> errs;
    const Real order = kepler_order(m, &errs);
    std::printf("  theta %.2f  order %.3f  errors %.2e .. %.2e\n", theta, order, errs.front(), errs.back());
    EXPECT_NEAR(order, m.effective_order(), 0.1) << "theta " << theta;
    EXPECT_EQ(m.effective_order(), theta == 0.5 ? 2 : 1);
  }
}

// Prop. 5.1: symplectic for every theta. Control: explicit Euler is not.
TEST(ThetaRetraction, OneStepMapIsSymplectic) {
  const Kepler sys = KeplerOrbit().system();
  const PhaseState<Kepler> s = kepler_test_state();
  const Real h = 0.1;
  for (Real theta : {0.0, 0.3, 0.5, 0.8, 1.0}) {
    const Real defect = symplectic_defect<4>(step_jacobian(theta_method(theta), sys, s, h));
    std::printf("  theta %.1f  |J^T Omega J - Omega| = %.1e\n", theta, defect);
    EXPECT_LT(defect, 1e-8) << "theta " << theta;
  }
  Mat<4, 4> euler = Mat<4, 4>::Identity();  // d(q + h M^-1 p, p - h grad V(q))
  euler.topRightCorner<2, 2>() = h / sys.prm.mass * Mat<2, 2>::Identity();
  euler.bottomLeftCorner<2, 2>() = -h * sys.potential_hessian(s.q);
  EXPECT_GT(symplectic_defect<4>(euler), 1e-3);
}

// A central force conserves q x p for every theta (q1 x p1 - q0 x p0 =
// qb x dp + dq x pb, both parallel pairs), to roundoff.
TEST(ThetaRetraction, ConservesAngularMomentum) {
  const Kepler sys = KeplerOrbit().system();
  for (Real theta : {0.0, 0.3, 0.5, 1.0}) {
    PhaseState<Kepler> s = KeplerOrbit().initial();
    const Real l0 = Kepler::angular_momentum(s.q, s.p);
    ASSERT_TRUE(run(theta_method(theta), sys, s, 0.01, 2000));
    EXPECT_NEAR(Kepler::angular_momentum(s.q, s.p), l0, 1e-12 * l0) << "theta " << theta;
  }
}

template <class M, class S>
Real residual_at_step(const M& m, const S& sys, const PhaseState<S>& s0, Real h) {
  PhaseState<S> s1 = s0;
  int it = 0;
  EXPECT_EQ(m.step(sys, s1, h, NewtonOptions(), it), Status::ok);
  return m.residual(sys, s0, h, ResidualLayout<S>::pack(s1.q, s1.p)).cwiseAbs().maxCoeff();
}

TEST(ThetaRetraction, ResidualVanishesAtTheStep) {
  const Kepler sys = KeplerOrbit().system();
  for (Real theta : {0.0, 0.25, 0.5, 0.75, 1.0})
    for (Real t : {0.0, 0.3, 2.0}) {
      PhaseState<Kepler> s;
      KeplerOrbit().state(t, s.q, s.p);
      s.q_prev = s.q;
      EXPECT_LT(residual_at_step(theta_method(theta), sys, s, 0.05), 1e-12) << theta << " " << t;
    }
}

TEST(ThetaRetraction, FailuresAreReportedAndLeaveTheState) {
  const Kepler sys = KeplerOrbit().system();
  PhaseState<Kepler> s;
  s.q = Vec<2>::Zero();  // the singularity: theta < 1 evaluates the force near q0
  s.p = Vec<2>(0, 1);
  s.q_prev = s.q;
  const PhaseState<Kepler> before = s;
  int it = 0;
  for (Real theta : {0.0, 0.5}) {
    EXPECT_NE(theta_method(theta).step(sys, s, 0.01, NewtonOptions(), it), Status::ok) << theta;
    EXPECT_TRUE(s.q == before.q && s.p == before.p);
  }
  s = KeplerOrbit().initial();
  NewtonOptions one;
  one.max_iterations = 1;
  const PhaseState<Kepler> start = s;
  EXPECT_EQ(theta_method(0.5).step(sys, s, 0.05, one, it), Status::newton_not_converged);
  EXPECT_TRUE(s.q == start.q && s.p == start.p);
  int iterations = 0;  // quadratic convergence: a few updates per step
  ASSERT_TRUE(run(theta_method(0.5), sys, s, 0.01, 100, NewtonOptions(), &iterations));
  std::printf("  theta 0.5: %.2f Newton updates per step\n", iterations / 100.0);
  EXPECT_LE(iterations, 100 * 4);
}

// ---------------------------------------------------------------------------
// Newmark.

Newmark newmark(Real gamma, Real beta) {
  Newmark m;
  m.prm.gamma = gamma;
  m.prm.beta = beta;
  return m;
}

TEST(Newmark, VerletMemberIsRattle) {
  const Kepler sys = KeplerOrbit().system();
  PhaseState<Kepler> a = KeplerOrbit().initial(), b = a;
  ASSERT_TRUE(run(newmark(0.5, 0), sys, a, 0.01, 2000));
  ASSERT_TRUE(run(Rattle{}, sys, b, 0.01, 2000));
  EXPECT_LT(max_abs(Vec<2>(a.q - b.q)) + max_abs(Vec<2>(a.p - b.p)), 1e-11);
}

TEST(Newmark, OrderTwoIffGammaIsOneHalf) {
  const Real params[4][2] = {{0.5, 0.25}, {0.5, 0.0}, {0.6, 0.3}, {0.6, 0.0}};
  for (const auto& gb : params) {
    const Newmark m = newmark(gb[0], gb[1]);
    std::vector<Real> errs;
    const Real order = kepler_order(m, &errs);
    std::printf("  gamma %.2f beta %.2f  order %.3f  errors %.2e .. %.2e\n", gb[0], gb[1], order, errs.front(),
                errs.back());
    EXPECT_NEAR(order, gb[0] == 0.5 ? 2 : 1, 0.1);
    EXPECT_EQ(m.effective_order(), gb[0] == 0.5 ? 2 : 1);
  }
}

TEST(Newmark, ResidualVanishesAtTheStep) {
  const Kepler sys = KeplerOrbit().system();
  const Real params[3][2] = {{0.5, 0.25}, {0.5, 0.0}, {0.6, 0.3}};
  for (const auto& gb : params)
    for (Real t : {0.0, 0.3, 2.0}) {
      PhaseState<Kepler> s;
      KeplerOrbit().state(t, s.q, s.p);
      s.q_prev = s.q;
      EXPECT_LT(residual_at_step(newmark(gb[0], gb[1]), sys, s, 0.05), 1e-12);
    }
}

// (1/2, 0) is canonically symplectic. (1/2, beta) preserves dx ^ dp with
// x = q + beta h^2 M^-1 grad V(q), not dq ^ dp: its canonical defect is small
// (O(h^3)) but far above the finite-difference floor.
TEST(Newmark, SymplecticStructure) {
  const Kepler sys = KeplerOrbit().system();
  const PhaseState<Kepler> s = kepler_test_state();
  auto modified_defect = [&](const Newmark& m, Real h) {
    const Mat<4, 4> jac = step_jacobian(m, sys, s, h);
    PhaseState<Kepler> s1 = s;
    int it = 0;
    EXPECT_EQ(m.step(sys, s1, h, tight(), it), Status::ok);
    auto chart = [&](const Vec<2>& q) {  // d(x, p) / d(q, p)
      Mat<4, 4> t = Mat<4, 4>::Identity();
      t.topLeftCorner<2, 2>() += m.prm.beta * h * h / sys.prm.mass * sys.potential_hessian(q);
      return t;
    };
    const Mat<4, 4> in_x = chart(s1.q) * jac * chart(s.q).inverse();
    return symplectic_defect<4>(in_x);
  };
  const Real verlet = symplectic_defect<4>(step_jacobian(newmark(0.5, 0), sys, s, 0.1));
  const Real trap_h = symplectic_defect<4>(step_jacobian(newmark(0.5, 0.25), sys, s, 0.1));
  const Real trap_h2 = symplectic_defect<4>(step_jacobian(newmark(0.5, 0.25), sys, s, 0.05));
  const Real modified = modified_defect(newmark(0.5, 0.25), 0.1);
  const Real damped = modified_defect(newmark(0.6, 0.3), 0.1);
  std::printf("  canonical defect: (1/2,0) %.1e  (1/2,1/4) h=0.1 %.2e h=0.05 %.2e (ratio %.2f)\n", verlet, trap_h,
              trap_h2, trap_h / trap_h2);
  std::printf("  dx^dp defect: (1/2,1/4) %.1e  (0.6,0.3) %.2e\n", modified, damped);
  EXPECT_LT(verlet, 1e-8);
  EXPECT_LT(modified, 1e-8);
  EXPECT_GT(trap_h, 1e-5);               // not canonically symplectic (Remark 5.5)
  EXPECT_NEAR(trap_h / trap_h2, 8, 2.5);  // the O(h^3) defect of a conjugate of the midpoint rule
  EXPECT_GT(damped, 1e-3);               // gamma != 1/2 preserves no such form
}

// gamma > 1/2 damps: energy drifts down period after period; gamma = 1/2
// keeps it bounded (max over the last quarter of the run no larger than over
// the first: each quarter spans several perihelion passages).
TEST(Newmark, EnergyDriftOnlyOffGammaOneHalf) {
  const KeplerOrbit orbit;
  const Kepler sys = orbit.system();
  const int per_period = 400, periods = 12;
  const Real h = orbit.period() / per_period;
  auto energy = [&](const PhaseState<Kepler>& s) { return s.p.squaredNorm() / (2 * orbit.mass) + sys.potential(s.q); };
  // Relative energy error after every step.
  auto history = [&](const Newmark& m) {
    std::vector<Real> err;
    PhaseState<Kepler> s = orbit.initial();
    const Real e0 = energy(s);
    int it = 0;
    for (int k = 0; k < periods * per_period; ++k) {
      const Status st = m.step(sys, s, h, tight(), it);
      EXPECT_EQ(st, Status::ok) << "gamma " << m.prm.gamma << " step " << k;
      if (st != Status::ok) break;
      err.push_back((energy(s) - e0) / std::fabs(e0));
    }
    return err;
  };
  const std::vector<Real> mid = history(newmark(0.5, 0.25)), damped = history(newmark(0.55, 0.3));
  ASSERT_EQ(mid.size(), std::size_t(periods * per_period));
  ASSERT_EQ(damped.size(), std::size_t(periods * per_period));
  const std::size_t quarter = mid.size() / 4;
  Real first = 0, last = 0;
  for (std::size_t k = 0; k < quarter; ++k) first = std::max(first, std::fabs(mid[k]));
  for (std::size_t k = mid.size() - quarter; k < mid.size(); ++k) last = std::max(last, std::fabs(mid[k]));
  std::printf("  (1/2,1/4) max |dE/E| first quarter %.2e last quarter %.2e;  (0.55,0.3) after 1, %d periods %.2e %.2e\n",
              first, last, periods, damped[per_period - 1], damped.back());
  EXPECT_LT(last, 1.5 * first);
  for (int k = 1; k < periods; ++k)
    EXPECT_LT(damped[(k + 1) * per_period - 1], damped[k * per_period - 1]) << "period " << k;
  EXPECT_LT(damped.back(), -50 * std::max(first, last));
}

// ---------------------------------------------------------------------------
// SphereRetraction on the spherical pendulum (L != 1, m != 1 to exercise the
// rescaling).

SphericalPendulum pendulum(Real gravity = 9.81) {
  SphericalPendulum sys;
  sys.prm.mass = 0.7;
  sys.prm.length = 1.3;
  sys.prm.gravity = gravity;
  return sys;
}

PhaseState<SphericalPendulum> pendulum_state(const SphericalPendulum& sys) {
  const Real L = sys.prm.length;
  PhaseState<SphericalPendulum> s;
  s.q = L * Vec3(std::sin(1.0) * std::cos(0.3), std::sin(1.0) * std::sin(0.3), -std::cos(1.0));
  Vec3 p(0.4, 1.1, 0.2);
  p -= s.q.dot(p) / (L * L) * s.q;
  s.p = p;
  s.q_prev = s.q;
  return s;
}

template <class M>
class SphereTest : public ::testing::Test {};
using SphereMethods = ::testing::Types<SphereProjection, SphereExp>;
struct RetractionName {
  template <class M>
  static std::string GetName(int) { return M::retraction; }
};
TYPED_TEST_SUITE(SphereTest, SphereMethods, RetractionName);

Real pendulum_energy(const SphericalPendulum& sys, const PhaseState<SphericalPendulum>& s) {
  return s.p.squaredNorm() / (2 * sys.prm.mass) + sys.potential(s.q);
}

TYPED_TEST(SphereTest, StaysOnTheCotangentBundleAndKeepsJz) {
  const SphericalPendulum sys = pendulum();
  PhaseState<SphericalPendulum> s = pendulum_state(sys);
  const Real L = sys.prm.length, jz0 = SphericalPendulum::vertical_angular_momentum(s.q, s.p);
  const Real e0 = pendulum_energy(sys, s), scale = sys.energy_scale();
  const int n = 10000;
  Real radial = 0, tangency = 0, jz = 0, first = 0, last = 0;
  int it = 0;
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(TypeParam::step(sys, s, 0.01, NewtonOptions(), it), Status::ok);
    radial = std::max(radial, std::fabs(s.q.norm() - L) / L);
    tangency = std::max(tangency, std::fabs(s.q.dot(s.p)) / (L * s.p.norm()));
    jz = std::max(jz, std::fabs(SphericalPendulum::vertical_angular_momentum(s.q, s.p) - jz0));
    const Real de = std::fabs(pendulum_energy(sys, s) - e0) / scale;
    if (i < n / 4) first = std::max(first, de);
    if (i >= 3 * n / 4) last = std::max(last, de);
  }
  std::printf("  %s: max ||q|-L|/L %.1e  max |q.p|/(L|p|) %.1e  max |dJz| %.1e (Jz %.3f)  |dE|/E first %.2e last %.2e\n",
              TypeParam::retraction, radial, tangency, jz, jz0, first, last);
  EXPECT_LT(radial, 1e-15 * 4);
  EXPECT_LT(tangency, 1e-15 * 4);
  // Exact up to roundoff, which accumulates ~eps |q| |p| per step; a method
  // that did not conserve Jz would drift by O(h) = 1e-2.
  EXPECT_LT(jz, n * 1e-15 * L * s.p.norm());
  EXPECT_LT(first, 0.05);             // O(h) oscillation of a first-order method
  EXPECT_LT(last, 1.5 * first);       // and no drift over 1e4 steps
}

TYPED_TEST(SphereTest, OrderOne) {
  const SphericalPendulum sys = pendulum();
  const Real T = 1.0;
  PhaseState<SphericalPendulum> ref = pendulum_state(sys);
  ASSERT_TRUE(run(Rattle{}, sys, ref, T / 32768, 32768));  // error ~1e-9
  std::vector<Real> hs, errs;
  for (int n = 200; n <= 1600; n *= 2) {
    PhaseState<SphericalPendulum> s = pendulum_state(sys);
    ASSERT_TRUE(run(TypeParam{}, sys, s, T / n, n));
    hs.push_back(T / n);
    errs.push_back(std::max(max_abs(Vec3(s.q - ref.q)), max_abs(Vec3(s.p - ref.p))));
  }
  const Real order = test::fitted_order(hs, errs);
  std::printf("  %s: order %.3f  errors %.2e .. %.2e\n", TypeParam::retraction, order, errs.front(), errs.back());
  EXPECT_NEAR(order, 1, 0.1);
}

// omega restricted to T*S^2 (a submanifold of R^6 with sum dq_i ^ dp_i) on a
// basis of its tangent space, pushed forward by finite differences along
// curves that stay on T*S^2.
template <class Step>
Real sphere_symplectic_defect(const Step& step, const SphericalPendulum& sys, const PhaseState<SphericalPendulum>& s) {
  const Real L = sys.prm.length;
  const Vec3 n = s.q / L;
  const Vec3 ta = n.cross(Vec3(0.3, -0.5, 0.8)).normalized(), tb = n.cross(ta);
  Mat<6, 4> basis = Mat<6, 4>::Zero();
  const Vec3 t[2] = {ta, tb};
  for (int j = 0; j < 2; ++j) {
    basis.col(j) << t[j], -(t[j].dot(s.p) / (L * L)) * s.q;  // keeps q . p = 0
    basis.col(2 + j) << Vec3::Zero(), t[j];
  }
  auto on_bundle = [&](const Vec<6>& z) {
    PhaseState<SphericalPendulum> r;
    r.q = L * Vec3(z.head<3>()).normalized();
    r.p = z.tail<3>() - r.q.dot(Vec3(z.tail<3>())) / (L * L) * r.q;
    r.q_prev = r.q;
    return r;
  };
  Vec<6> z0;
  z0 << s.q, s.p;
  const Real eps = 1e-5;
  Mat<6, 4> image;
  for (int j = 0; j < 4; ++j) {
    PhaseState<SphericalPendulum> a = on_bundle(z0 + eps * basis.col(j)), b = on_bundle(z0 - eps * basis.col(j));
    step(a);
    step(b);
    image.col(j) << (a.q - b.q) / (2 * eps), (a.p - b.p) / (2 * eps);
  }
  const Mat<6, 6> o = omega<3>();
  return (image.transpose() * o * image - basis.transpose() * o * basis).cwiseAbs().maxCoeff();
}

TYPED_TEST(SphereTest, SymplecticOnTheCotangentBundle) {
  const SphericalPendulum sys = pendulum();
  const PhaseState<SphericalPendulum> s = pendulum_state(sys);
  const Real h = 0.05;
  const Real defect = sphere_symplectic_defect(
      [&](PhaseState<SphericalPendulum>& x) {
        int it = 0;
        EXPECT_EQ(TypeParam::step(sys, x, h, tight(), it), Status::ok);
      },
      sys, s);
  std::printf("  %s: symplectic defect on T*S^2 %.1e\n", TypeParam::retraction, defect);
  EXPECT_LT(defect, 1e-8);
}

// Example 5.4's equations as printed, read in R^3 (kinetic H_q = 0, d_x R at
// fixed ambient xi), on the unit-sphere variables: pt = P0 (p0 - h grad V),
// xi = h pt / m, x1 = (x0 + xi)/|x0 + xi|, p1 in T_x1 S^2 with c P0 p1 = pt.
// Not symplectic: the same check fails, so the check can fail.
TEST(SphereRetraction, PrintedExample54IsNotSymplectic) {
  const SphericalPendulum sys = pendulum();
  const Real h = 0.05, L = sys.prm.length, m = sys.prm.mass * L * L;
  auto literal = [&](PhaseState<SphericalPendulum>& s) {
    const Vec3 x0 = s.q / L;
    Vec3 pt = L * (s.p - h * sys.potential_gradient(s.q));
    pt -= x0.dot(pt) * x0;
    const Vec3 xi = h * pt / m;
    const Vec3 x1 = (x0 + xi).normalized();
    const Real c = x0.dot(x1), phi = std::acos(c);
    const Vec3 t0 = xi.normalized(), nn = x0.cross(t0), t1 = -std::sin(phi) * x0 + std::cos(phi) * t0;
    const Vec3 p1 = pt.dot(t0) / (c * c) * t1 + pt.dot(nn) / c * nn;
    s.q = L * x1;
    s.p = p1 / L;
  };
  const Real defect = sphere_symplectic_defect(literal, sys, pendulum_state(sys));
  std::printf("  printed Example 5.4: symplectic defect %.2e\n", defect);
  EXPECT_GT(defect, 1e-4);
}

// Free motion (g = 0): the exp version is the exact geodesic flow (rotation
// about q0 x p0 at rate |p| / (m L)); the projection version keeps |p| and
// the great circle exactly.
TEST(SphereRetraction, FreeMotionFollowsGreatCircles) {
  const SphericalPendulum sys = pendulum(0.0);
  const PhaseState<SphericalPendulum> s0 = pendulum_state(sys);
  const Real L = sys.prm.length, h = 0.02;
  const int n = 500;
  const Vec3 axis = s0.q.cross(s0.p).normalized();
  const Real angle = n * h * s0.p.norm() / (sys.prm.mass * L);
  const Eigen::AngleAxis<Real> rot(angle, axis);
  PhaseState<SphericalPendulum> e = s0, pr = s0;
  ASSERT_TRUE(run(SphereExp{}, sys, e, h, n));
  ASSERT_TRUE(run(SphereProjection{}, sys, pr, h, n));
  EXPECT_LT(max_abs(Vec3(e.q - rot * s0.q)), 1e-12);
  EXPECT_LT(max_abs(Vec3(e.p - rot * s0.p)), 1e-12);
  EXPECT_NEAR(pr.p.norm(), s0.p.norm(), 1e-13);
  EXPECT_LT(std::fabs(pr.q.dot(axis)), 1e-13);
}

TYPED_TEST(SphereTest, ResidualVanishesAtTheStep) {
  const SphericalPendulum sys = pendulum();
  using Lay = ResidualLayout<SphericalPendulum>;
  PhaseState<SphericalPendulum> s0 = pendulum_state(sys);
  for (int k = 0; k < 3; ++k) {
    const Real h = 0.05;
    PhaseState<SphericalPendulum> s1 = s0;
    int it = 0;
    ASSERT_EQ(TypeParam::step(sys, s1, h, NewtonOptions(), it), Status::ok);
    Eigen::VectorXd x = Lay::pack(s1.q, s1.p);
    // The multipliers only absorb normal components: fit them, then all of
    // R must vanish.
    const Eigen::VectorXd r0 = TypeParam::residual(sys, s0, h, x);
    const Real L = sys.prm.length;
    x[6] = -L * s0.q.dot(Vec3(r0.head<3>())) / s0.q.squaredNorm();
    x[7] = -L * s1.q.dot(Vec3(r0.segment<3>(3))) / s1.q.squaredNorm();
    const Real r = TypeParam::residual(sys, s0, h, x).cwiseAbs().maxCoeff();
    EXPECT_LT(r, 1e-12) << TypeParam::retraction << " step " << k;
    s0 = s1;
  }
}

// ---------------------------------------------------------------------------
// The reference path: a generic dense Newton (finite-difference Jacobian,
// pivoted LU) on each residual from the guess (q0 + h M^-1 p0, p0, 0, 0)
// lands on the fast step's state.
template <class M, class S>
Real reference_disagreement(const M& m, const S& sys, const PhaseState<S>& s0, Real h) {
  using Lay = ResidualLayout<S>;
  auto res = [&](const Eigen::VectorXd& y) { return m.residual(sys, s0, h, y); };
  Eigen::VectorXd x = Lay::pack(s0.q + h * sys.inverse_mass_times(s0.p), s0.p);
  for (int it = 0; it < 30; ++it) {
    Eigen::MatrixXd jac(x.size(), x.size());
    for (Eigen::Index j = 0; j < x.size(); ++j) {
      Eigen::VectorXd a = x, b = x;
      const Real d = 6e-6 * std::max<Real>(1, std::fabs(x[j]));
      a[j] += d;
      b[j] -= d;
      jac.col(j) = (res(a) - res(b)) / (2 * d);
    }
    const Eigen::VectorXd dx = jac.partialPivLu().solve(res(x));
    x -= dx;
    if (dx.lpNorm<Eigen::Infinity>() < 1e-15 * (1 + x.lpNorm<Eigen::Infinity>())) break;
  }
  PhaseState<S> s1 = s0;
  int iterations = 0;
  EXPECT_EQ(m.step(sys, s1, h, tight(), iterations), Status::ok);
  return std::max(max_abs(Vec<S::dof>(Lay::q1(x) - s1.q)), max_abs(Vec<S::dof>(Lay::p1(x) - s1.p)));
}

TEST(ReferencePath, AgreesWithTheFastSteps) {
  const Kepler kepler = KeplerOrbit().system();
  const PhaseState<Kepler> k0 = kepler_test_state();
  const SphericalPendulum sphere = pendulum();
  const PhaseState<SphericalPendulum> p0 = pendulum_state(sphere);
  const Real d[6] = {reference_disagreement(theta_method(0.3), kepler, k0, 0.05),
                     reference_disagreement(theta_method(0.5), kepler, k0, 0.05),
                     reference_disagreement(newmark(0.5, 0.25), kepler, k0, 0.05),
                     reference_disagreement(newmark(0.6, 0.3), kepler, k0, 0.05),
                     reference_disagreement(SphereProjection{}, sphere, p0, 0.05),
                     reference_disagreement(SphereExp{}, sphere, p0, 0.05)};
  std::printf("  reference vs fast: theta .3 %.1e  theta .5 %.1e  newmark %.1e %.1e  sphere proj %.1e exp %.1e\n", d[0],
              d[1], d[2], d[3], d[4], d[5]);
  for (Real v : d) EXPECT_LT(v, 1e-12);
}

}  // namespace
}  // namespace tether

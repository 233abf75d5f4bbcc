// Rigid bodies in ambient coordinates (BMS24 Example 5.3): the systems'
// derivatives, RATTLE and the null-space RATTLE on the free body against
// Euler's exact solution (rigid_body_oracle.hpp), and on rigid chains.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "rigid_body_oracle.hpp"
#include "tether/core/random.hpp"
#include "tether/methods/null_space_rattle.hpp"
#include "tether/methods/rattle.hpp"
#include "tether/systems/rigid_body.hpp"
#include "tether/systems/rigid_chain.hpp"
#include "order_fit.hpp"

namespace {

using namespace tether;
namespace ro = tether::rigid_oracle;

// ---------------------------------------------------------------- helpers

template <class S>
Real energy(const S& sys, const Vec<S::dof>& q, const Vec<S::dof>& p) {
  return Real(0.5) * p.dot(sys.inverse_mass_times(p)) + sys.potential(q);
}

template <int N>
Vec<N> normal_vector(CounterRng& rng) {
  Vec<N> v;
  for (int i = 0; i < N; ++i) v[i] = rng.normal();
  return v;
}

// A state on T*N: a random configuration and the momentum of a random
// tangent velocity T(q) eta (eta of size `rate`).
template <class S>
PhaseState<S> random_state(const S& sys, std::uint64_t seed, Real rate) {
  CounterRng rng(seed, 7);
  PhaseState<S> s;
  s.q = sys.random_configuration(rng);
  s.p = sys.mass_times(sys.tangent_basis_times(s.q, Vec<S::tangent_dim>(rate * normal_vector<S::tangent_dim>(rng))));
  s.q_prev = s.q;
  return s;
}

// --------------------------------------------------- Jacobi elliptic functions

TEST(JacobiElliptic, SpecialParameters) {
  for (Real u : {-2.3, -0.4, 0.0, 0.7, 1.9, 5.1}) {
    const auto z = ro::jacobi(u, 0), o = ro::jacobi(u, 1);
    EXPECT_NEAR(z.sn, std::sin(u), 1e-15);
    EXPECT_NEAR(z.cn, std::cos(u), 1e-15);
    EXPECT_NEAR(o.sn, std::tanh(u), 1e-15);
    EXPECT_NEAR(o.dn, 1 / std::cosh(u), 1e-15);
    // Near m = 0 (A&S 16.13.1-3): sn = sin u - m/4 (u - sin u cos u) cos u + O(m^2).
    const Real m = 1e-5;
    const auto s = ro::jacobi(u, m);
    EXPECT_NEAR(s.sn, std::sin(u) - m / 4 * (u - std::sin(u) * std::cos(u)) * std::cos(u), 1e-9);
    EXPECT_NEAR(s.cn, std::cos(u) + m / 4 * (u - std::sin(u) * std::cos(u)) * std::sin(u), 1e-9);
    EXPECT_NEAR(s.dn, 1 - m / 2 * std::sin(u) * std::sin(u), 1e-9);
    // Near m = 1 (A&S 16.15.1): sn = tanh u + m1/4 (sinh u cosh u - u) sech^2 u, m1 = 1 - m.
    const auto t = ro::jacobi(u, 1 - m);
    const Real sech = 1 / std::cosh(u);
    if (std::fabs(u) < 2.5) {  // the O(m1^2) remainder grows like m1^2 e^{4|u|}
      EXPECT_NEAR(t.sn, std::tanh(u) + m / 4 * (std::sinh(u) * std::cosh(u) - u) * sech * sech, 1e-8);
    }
  }
}

TEST(JacobiElliptic, IdentitiesQuarterPeriodAndDerivatives) {
  // K(1/2) = Gamma(1/4)^2 / (4 sqrt(pi)).
  EXPECT_NEAR(ro::complete_k(0.5), std::pow(std::tgamma(0.25), 2) / (4 * std::sqrt(M_PI)), 1e-14);
  for (Real m : {0.1, 0.5, 0.9, 0.999}) {
    const Real K = ro::complete_k(m);
    const auto q = ro::jacobi(K, m);
    EXPECT_NEAR(q.sn, 1, 1e-13);
    EXPECT_NEAR(q.cn, 0, 1e-7);  // cn ~ sqrt(1 - sn) near K: the weakest value
    EXPECT_NEAR(q.dn, std::sqrt(1 - m), 1e-12);
    EXPECT_NEAR(ro::elliptic_f(M_PI / 2, m), K, 1e-13);
    for (Real u = -7; u < 7; u += 0.37) {
      const auto j = ro::jacobi(u, m);
      EXPECT_NEAR(j.sn * j.sn + j.cn * j.cn, 1, 1e-14);
      EXPECT_NEAR(m * j.sn * j.sn + j.dn * j.dn, 1, 1e-14);
      // Half-period shift: sn(u + 2K) = -sn(u), dn(u + 2K) = dn(u).
      const auto k2 = ro::jacobi(u + 2 * K, m);
      EXPECT_NEAR(k2.sn, -j.sn, 1e-13);
      EXPECT_NEAR(k2.dn, j.dn, 1e-13);
      // Derivatives by central differences: sn' = cn dn, cn' = -sn dn, dn' = -m sn cn.
      const Real d = 1e-5;
      const auto a = ro::jacobi(u + d, m), b = ro::jacobi(u - d, m);
      EXPECT_NEAR((a.sn - b.sn) / (2 * d), j.cn * j.dn, 1e-9);
      EXPECT_NEAR((a.cn - b.cn) / (2 * d), -j.sn * j.dn, 1e-9);
      EXPECT_NEAR((a.dn - b.dn) / (2 * d), -m * j.sn * j.cn, 1e-9);
      // Carlson's F inverts the amplitude: F(am u | m) = u, am u = atan2(sn, cn) + 2 pi n.
      const Real am = std::atan2(j.sn, j.cn) + 2 * M_PI * std::round((u / K - std::atan2(j.sn, j.cn) * 2 / M_PI) / 4);
      EXPECT_NEAR(ro::elliptic_f(am, m), u, 1e-12);
    }
  }
}

// ------------------------------------------------------- free rigid body oracle

// m' = m x I^-1 m.
Vec3 euler_rhs(const Vec3& inertia, const Vec3& m) { return m.cross(m.cwiseQuotient(inertia)); }

void check_oracle(const Vec3& inertia, const Vec3& m0, bool expect_above) {
  const ro::FreeRigidBody body(inertia, m0);
  if (body.elliptic()) {
    EXPECT_EQ(body.above_middle_axis(), expect_above);
  }
  EXPECT_LT((body.body_momentum(0) - m0).norm(), 1e-13 * m0.norm());
  for (Real t = 0; t < 20; t += 0.61) {
    const Vec3 m = body.body_momentum(t);
    EXPECT_NEAR(m.squaredNorm(), body.momentum_squared(), 1e-13 * body.momentum_squared());
    EXPECT_NEAR(0.5 * m.dot(m.cwiseQuotient(inertia)), body.energy(), 1e-13 * body.energy());
    const Real d = 1e-5;
    const Vec3 rate = (body.body_momentum(t + d) - body.body_momentum(t - d)) / (2 * d);
    EXPECT_LT((rate - euler_rhs(inertia, m)).norm(), 1e-8 * (1 + m.squaredNorm())) << "t = " << t;
  }
  // The motion in the body frame is periodic.
  if (body.period() > 0) {
    EXPECT_LT((body.body_momentum(body.period()) - m0).norm(), 1e-11 * m0.norm());
  }
}

TEST(FreeRigidBodyOracle, SolvesEulersEquationsOnBothBranches) {
  const Vec3 inertia(1, 2, 2.5);
  // |m|^2 > 2 E I2 iff m3^2 (1 - I2/I3) > m1^2 (I2/I1 - 1), here m3^2 > 5 m1^2.
  for (const Vec3& m0 : {Vec3(0.3, 0.5, 1.2), Vec3(-0.3, 0.5, -1.2), Vec3(0.1, -0.9, 0.6)})
    check_oracle(inertia, m0, true);
  for (const Vec3& m0 : {Vec3(1.0, 0.5, 0.8), Vec3(-1.0, -0.5, 0.8), Vec3(0.9, 0.2, -0.3)})
    check_oracle(inertia, m0, false);
  // Moments in another order, and a symmetric top (I1 = I2) and its precession.
  check_oracle(Vec3(2.5, 1, 2), Vec3(0.3, 0.5, 1.2), false);
  check_oracle(Vec3(2.5, 1, 2), Vec3(1.2, 0.5, 0.2), true);
  check_oracle(Vec3(1.5, 1.5, 2.2), Vec3(0.4, -0.7, 1.1), false);
  check_oracle(Vec3(1.5, 2.2, 2.2), Vec3(0.4, -0.7, 1.1), false);
}

// ------------------------------------------------------------ system checks

template <class S>
void check_system_derivatives(const S& sys) {
  constexpr int n = S::dof, k = S::constraint_count, d = S::tangent_dim;
  static_assert(S::dof == 12 * S::bodies && k == 6 * S::bodies + S::joint_count && d + k == n, "dimensions");
  CounterRng rng(11, 3);
  for (int trial = 0; trial < 5; ++trial) {
    const Vec<n> on = sys.random_configuration(rng);
    EXPECT_LT(max_abs(sys.constraints(on)), 1e-14 * sys.length_scale());
    for (int b = 0; b < S::bodies; ++b) EXPECT_NEAR(S::rotation(on, b).determinant(), 1, 1e-14);
    const Vec<n> q = on + 0.1 * normal_vector<n>(rng);  // off N too: the formulas hold in R^n
    const Vec<n> v = normal_vector<n>(rng);
    const Vec<k> lambda = normal_vector<k>(rng);
    const Real e = 1e-6;
    // D g(q) v by central differences (g is quadratic: exact up to roundoff).
    const Vec<k> fd = (sys.constraints(Vec<n>(q + e * v)) - sys.constraints(Vec<n>(q - e * v))) / (2 * e);
    EXPECT_LT(max_abs(Vec<k>(fd - sys.constraint_jacobian_times(q, v))), 1e-8);
    const Vec<S::joint_count> fdj =
        (sys.joint_constraints(Vec<n>(q + e * v)) - sys.joint_constraints(Vec<n>(q - e * v))) / (2 * e);
    if (S::joint_count > 0) {
      EXPECT_LT(max_abs(Vec<S::joint_count>(fdj - sys.joint_jacobian_times(q, v))), 1e-8);
    }
    // Transposes.
    EXPECT_NEAR(lambda.dot(sys.constraint_jacobian_times(q, v)), sys.constraint_transpose_times(q, lambda).dot(v),
                1e-12 * (1 + lambda.norm() * v.norm()));
    const Vec<S::joint_count> lj = lambda.template tail<S::joint_count>();
    EXPECT_NEAR(lj.dot(sys.joint_jacobian_times(q, v)), sys.joint_transpose_times(q, lj).dot(v), 1e-12 * (1 + v.norm()));
    // Potential gradient.
    EXPECT_NEAR((sys.potential(Vec<n>(q + e * v)) - sys.potential(Vec<n>(q - e * v))) / (2 * e),
                sys.potential_gradient(q).dot(v), 1e-7);
    // Gram matrix against G M^-1 G^T from a finite-difference G.
    Mat<k, n> G;
    for (int j = 0; j < n; ++j) {
      Vec<n> u = Vec<n>::Zero();
      u[j] = e;
      G.col(j) = (sys.constraints(Vec<n>(q + u)) - sys.constraints(Vec<n>(q - u))) / (2 * e);
    }
    const Vec<n> qb = q + 0.05 * normal_vector<n>(rng);
    Mat<k, n> Gb;
    for (int j = 0; j < n; ++j) {
      Vec<n> u = Vec<n>::Zero();
      u[j] = e;
      Gb.col(j) = (sys.constraints(Vec<n>(qb + u)) - sys.constraints(Vec<n>(qb - u))) / (2 * e);
    }
    Mat<n, n> minv = Mat<n, n>::Zero();
    for (int j = 0; j < n; ++j) {
      Vec<n> u = Vec<n>::Zero();
      u[j] = 1;
      minv.col(j) = sys.inverse_mass_times(u);
    }
    const Mat<k, k> expected = G * minv * Gb.transpose();
    EXPECT_LT((sys.gram(q, qb).a - expected).cwiseAbs().maxCoeff(), 1e-7 * (1 + expected.cwiseAbs().maxCoeff()));
    // Mass matrix: M^-1 M = Id and sqrt(M)^2 = M.
    EXPECT_LT(max_abs(Vec<n>(sys.inverse_mass_times(sys.mass_times(v)) - v)), 1e-14 * max_abs(v));
    EXPECT_LT(max_abs(Vec<n>(sys.sqrt_mass_times(sys.sqrt_mass_times(v)) - sys.mass_times(v))), 1e-13 * max_abs(v));
    // Tangent (null-space) basis at q on N: G T = 0, transpose, full rank.
    const Vec<d> eta = normal_vector<d>(rng);
    EXPECT_LT(max_abs(sys.constraint_jacobian_times(on, sys.tangent_basis_times(on, eta))), 1e-14 * (1 + eta.norm()));
    EXPECT_NEAR(v.dot(sys.tangent_basis_times(on, eta)), sys.tangent_basis_transpose_times(on, v).dot(eta),
                1e-12 * (1 + v.norm() * eta.norm()));
    Mat<d, d> reduced;
    for (int j = 0; j < d; ++j) {
      Vec<d> u = Vec<d>::Zero();
      u[j] = 1;
      reduced.col(j) = sys.tangent_basis_transpose_times(on, sys.mass_times(sys.tangent_basis_times(on, u)));
    }
    EXPECT_GT(reduced.determinant(), 1e-6 * std::pow(reduced.trace() / d, d));
    // Kinetic energy of P = R hat(xi) J is 1/2 xi.I xi; alpha = I xi.
    for (int b = 0; b < S::bodies; ++b) {
      const Vec3 xi = normal_vector<3>(rng), xdot = normal_vector<3>(rng);
      Vec<n> p = Vec<n>::Zero();
      rigid::set_matrix_block(p, b, sys.rotation_momentum(S::rotation(on, b), xi, b));
      rigid::set_vector_block(p, b, Vec3(sys.body_mass(b) * xdot));
      const Vec3 I = sys.principal_inertia(b);
      EXPECT_NEAR(0.5 * p.dot(sys.inverse_mass_times(p)),
                  0.5 * xi.dot(I.cwiseProduct(xi)) + 0.5 * sys.body_mass(b) * xdot.squaredNorm(), 1e-13 * (1 + p.squaredNorm()));
      EXPECT_LT((S::body_angular_momentum(on, p, b) - I.cwiseProduct(xi)).norm(), 1e-14 * (1 + xi.norm()));
      EXPECT_LT((sys.body_angular_velocity(on, p, b) - xi).norm(), 1e-14 * (1 + xi.norm()));
      // Tangent: the hidden constraints of that body's orthogonality hold.
      EXPECT_LT(max_abs(Vec<6>(sys.constraint_jacobian_times(on, sys.inverse_mass_times(p)).template segment<6>(6 * b))),
                1e-14 * (1 + xi.norm()) * sys.length_scale());
    }
  }
}

TEST(RigidSystems, DerivativesAgainstFiniteDifferences) {
  RigidBody body;
  body.prm.gravity = 9.81;
  check_system_derivatives(body);
  RigidChain<1> top;
  check_system_derivatives(top);
  RigidChain<2> pair;
  pair.prm.inertia[1] = 0.09;  // asymmetric links (0.1, 0.09, 0.03): J = (0.01, 0.02, 0.08)
  pair.prm.inertia[2] = 0.03;
  pair.prm.length = 1.3;
  check_system_derivatives(pair);
  RigidChain<3> three;
  check_system_derivatives(three);
}

TEST(RigidSystems, RandomAttitudeIsHaarUniform) {
  // Under Haar measure E[R] = 0 and E[R_ij^2] = 1/3 (each column is uniform on S^2).
  RigidBody body;
  CounterRng rng(5, 1);
  const int count = 20000;
  Mat<3, 3> mean = Mat<3, 3>::Zero(), square = Mat<3, 3>::Zero();
  for (int i = 0; i < count; ++i) {
    const Mat<3, 3> R = RigidBody::rotation(body.random_configuration(rng));
    mean += R / count;
    square += R.cwiseProduct(R) / count;
  }
  // Standard errors: sqrt(1/3 / n) ~ 0.004 and sqrt((1/5 - 1/9) / n) ~ 0.002; 5 sigma.
  EXPECT_LT(mean.cwiseAbs().maxCoeff(), 0.02);
  EXPECT_LT((square.array() - 1.0 / 3).abs().maxCoeff(), 0.011);
}

TEST(RigidSystems, HeavyTopThermalAxisFollowsBoltzmann) {
  // a = R e3 has density ~ exp(beta a_z) on the sphere: E[a_z] = coth beta - 1/beta.
  RigidChain<1> top;
  const Real kT = 2.0;
  const Real beta = top.prm.mass * top.prm.gravity * top.prm.length / (2 * kT);
  CounterRng rng(9, 4);
  const int count = 20000;
  Real sum = 0;
  for (int i = 0; i < count; ++i) {
    const Vec<12> q = top.thermal_configuration(rng, kT);
    EXPECT_LT(max_abs(top.constraints(q)), 1e-14);
    sum += RigidChain<1>::rotation(q, 0)(2, 2);
  }
  EXPECT_NEAR(sum / count, 1 / std::tanh(beta) - 1 / beta, 5 * 0.5 / std::sqrt(Real(count)));
}

// ------------------------------------------------------- methods: free body

// Runs `steps` steps of method M, checking the constraints and the hidden
// constraints after every step.
template <class M, class S>
void run(const S& sys, PhaseState<S>& s, Real h, int steps, const NewtonOptions& opt = NewtonOptions{}) {
  int iterations = 0;
  const Real tol = 1e-12 * sys.length_scale();
  for (int i = 0; i < steps; ++i) {
    ASSERT_EQ(M::step(sys, s, h, opt, iterations), Status::ok) << M::name << " step " << i;
    ASSERT_LT(max_abs(sys.constraints(s.q)), tol) << M::name << " step " << i;
    ASSERT_LT(max_abs(sys.constraint_jacobian_times(s.q, sys.inverse_mass_times(s.p))),
              tol * (1 + max_abs(sys.inverse_mass_times(s.p))))
        << M::name << " step " << i;
  }
}

template <class M>
Real oracle_order(const Vec3& inertia, const Vec3& xi0, Real gravity, std::vector<Real>* errors = nullptr) {
  RigidBody sys;
  for (int i = 0; i < 3; ++i) sys.prm.inertia[i] = inertia[i];
  sys.prm.gravity = gravity;
  CounterRng rng(3, 3);
  PhaseState<RigidBody> s0;
  s0.q = sys.random_configuration(rng);
  s0.p = sys.momentum(s0.q, xi0, Vec3(0.1, -0.2, 0.3));
  s0.q_prev = s0.q;
  const ro::FreeRigidBody exact(inertia, inertia.cwiseProduct(xi0));
  const Real T = 2;
  std::vector<Real> hs, err;
  for (int level = 0; level < 5; ++level) {
    const int steps = 20 << level;
    const Real h = T / steps;
    PhaseState<RigidBody> s = s0;
    run<M>(sys, s, h, steps);
    hs.push_back(h);
    err.push_back((RigidBody::body_angular_momentum(s.q, s.p) - exact.body_momentum(T)).norm());
  }
  if (errors) *errors = err;
  return test::fitted_order(hs, err);
}

TEST(FreeBodyMethods, SecondOrderAgainstJacobiOracle) {
  const Vec3 inertia(1, 2, 2.5);
  // Body angular velocities on each branch (m = I xi): above / below the middle axis.
  const Vec3 above = Vec3(0.3, 0.5, 1.2).cwiseQuotient(inertia), below = Vec3(1.0, 0.5, 0.8).cwiseQuotient(inertia);
  for (const Vec3& xi0 : {above, below}) {
    std::vector<Real> e1, e2;
    const Real r = oracle_order<Rattle>(inertia, xi0, 0, &e1);
    const Real n = oracle_order<NullSpaceRattle>(inertia, xi0, 9.81, &e2);
    EXPECT_NEAR(r, 2, 0.1);
    EXPECT_NEAR(n, 2, 0.1);
    // Same discrete solution: the same errors.
    for (std::size_t i = 0; i < e1.size(); ++i) EXPECT_NEAR(e1[i], e2[i], 1e-10);
    std::printf("order vs oracle: rattle %.4f null_space_rattle %.4f, errors %.3e .. %.3e\n", r, n, e1.front(),
                e1.back());
  }
  // Symmetric top: precession.
  EXPECT_NEAR(oracle_order<NullSpaceRattle>(Vec3(1.5, 1.5, 2.2), Vec3(0.4, -0.7, 1.1), 0), 2, 0.1);
}

TEST(FreeBodyMethods, NullSpaceAgreesWithRattleEveryStep) {
  RigidBody sys;
  sys.prm.inertia[0] = 0.7;
  sys.prm.gravity = 9.81;
  PhaseState<RigidBody> s = random_state(sys, 21, 2.0);
  Real worst = 0;
  NewtonOptions opt;
  int it = 0;
  for (int i = 0; i < 2000; ++i) {
    PhaseState<RigidBody> a = s, b = s;
    ASSERT_EQ(Rattle::step(sys, a, 0.02, opt, it), Status::ok);
    ASSERT_EQ(NullSpaceRattle::step(sys, b, 0.02, opt, it), Status::ok);
    worst = std::max(worst, std::max(max_abs(Vec<12>(a.q - b.q)), max_abs(Vec<12>(a.p - b.p)) / (1 + max_abs(a.p))));
    s = a;
  }
  std::printf("free body: max per-step |rattle - null_space_rattle| = %.2e\n", worst);
  EXPECT_LT(worst, 1e-12);
}

template <class M>
void long_run_free_body() {
  RigidBody sys;
  sys.prm.inertia[0] = 0.8;  // (0.8, 1.5, 2)
  const Vec3 xi0(0.9, -0.4, 1.3);
  CounterRng rng(4, 4);
  PhaseState<RigidBody> s;
  s.q = sys.random_configuration(rng);
  s.p = sys.momentum(s.q, xi0, Vec3(0.2, 0, 0));
  s.q_prev = s.q;
  const Real h = 0.05, e0 = energy(sys, s.q, s.p);
  const Vec3 pi0 = RigidBody::angular_momentum(s.q, s.p);
  const int steps = 20000, quarter = steps / 4;
  Real first = 0, last = 0, pi_err = 0;
  for (int i = 0; i < steps; ++i) {
    run<M>(sys, s, h, 1);
    const Real de = std::fabs(energy(sys, s.q, s.p) - e0) / e0;
    if (i < quarter) first = std::max(first, de);
    if (i >= steps - quarter) last = std::max(last, de);
    pi_err = std::max(pi_err, (RigidBody::angular_momentum(s.q, s.p) - pi0).norm() / pi0.norm());
  }
  std::printf("%s free body, %d steps h=%.2f: rel energy error (exactly conserved) first quarter %.2e last quarter %.2e; "
              "spatial angular momentum %.2e\n",
              M::name, steps, h, first, last, pi_err);
  // RATTLE on the free body is the Moser-Veselov discretization, which
  // conserves the energy exactly (MZ05): only roundoff and the solver
  // tolerance remain, no O(h^2) term.
  // The spatial angular momentum is the momentum map of a linear symmetry
  // (R -> Q R), conserved by RATTLE up to the same.
  EXPECT_LT(last, 1e-11);
  EXPECT_LT(first, 1e-11);
  EXPECT_LT(pi_err, 1e-11);
}

TEST(FreeBodyMethods, LongRunEnergyBoundedAngularMomentumConserved) {
  long_run_free_body<Rattle>();
  long_run_free_body<NullSpaceRattle>();
}

TEST(FreeBodyMethods, CentreFallsExactlyUnderGravity) {
  // The centre decouples: x'' = -g e_z, which Stormer-Verlet integrates exactly.
  RigidBody sys;
  sys.prm.gravity = 9.81;
  PhaseState<RigidBody> s = random_state(sys, 2, 1.0);
  const Vec3 x0 = RigidBody::translation(s.q), v0 = rigid::vector_block(s.p, 0) / sys.prm.mass;
  run<NullSpaceRattle>(sys, s, 0.01, 300);
  const Real T = 3;
  const Vec3 x = x0 + T * v0 - 0.5 * 9.81 * T * T * Vec3(0, 0, 1);
  EXPECT_LT((RigidBody::translation(s.q) - x).norm(), 1e-11);
}

TEST(FreeBodyMethods, FailedStepLeavesStateAndReportsStatus) {
  RigidBody sys;
  PhaseState<RigidBody> s = random_state(sys, 8, 3.0), before = s;
  NewtonOptions opt;
  opt.max_iterations = 1;
  int it = 0;
  EXPECT_EQ(NullSpaceRattle::step(sys, s, 0.5, opt, it), Status::newton_not_converged);
  EXPECT_EQ(s.q, before.q);
  EXPECT_EQ(s.p, before.p);
}

// ------------------------------------------------ reference residual agreement

// A plain dense Newton with a central-difference Jacobian on a method's residual.
template <class S, class M>
Eigen::VectorXd solve_residual(const S& sys, const PhaseState<S>& s0, Real h) {
  using L = ResidualLayout<S>;
  Eigen::VectorXd x = L::pack(s0.q + h * sys.inverse_mass_times(s0.p), s0.p);
  for (int it = 0; it < 30; ++it) {
    const Eigen::VectorXd r = M::residual(sys, s0, h, x);
    Eigen::MatrixXd jac(L::size, L::size);
    for (int j = 0; j < L::size; ++j) {
      Eigen::VectorXd xp = x, xm = x;
      xp[j] += 1e-6;
      xm[j] -= 1e-6;
      jac.col(j) = (M::residual(sys, s0, h, xp) - M::residual(sys, s0, h, xm)) / 2e-6;
    }
    const Eigen::VectorXd dx = jac.partialPivLu().solve(r);
    x -= dx;
    if (dx.lpNorm<Eigen::Infinity>() < 1e-14 * (1 + x.lpNorm<Eigen::Infinity>())) break;
  }
  return x;
}

template <class S>
void check_residuals(const S& sys, std::uint64_t seed) {
  using L = ResidualLayout<S>;
  const PhaseState<S> s0 = random_state(sys, seed, 1.5);
  const Real h = 0.05;
  PhaseState<S> fast = s0;
  int it = 0;
  ASSERT_EQ(NullSpaceRattle::step(sys, fast, h, NewtonOptions{}, it), Status::ok);
  // The fast step solves the residual (multipliers zero) ...
  const Eigen::VectorXd at_fast = NullSpaceRattle::residual(sys, s0, h, L::pack(fast.q, fast.p));
  EXPECT_LT(at_fast.lpNorm<Eigen::Infinity>(), 1e-11);
  // ... and the generic solves of both residuals land on it.
  const Eigen::VectorXd xn = solve_residual<S, NullSpaceRattle>(sys, s0, h);
  const Eigen::VectorXd xr = solve_residual<S, Rattle>(sys, s0, h);
  const Real dn = std::max(max_abs(Vec<S::dof>(L::q1(xn) - fast.q)), max_abs(Vec<S::dof>(L::p1(xn) - fast.p)));
  const Real dr = std::max(max_abs(Vec<S::dof>(L::q1(xr) - fast.q)), max_abs(Vec<S::dof>(L::p1(xr) - fast.p)));
  std::printf("%s: |reference(null_space residual) - fast| = %.2e, |reference(rattle residual) - fast| = %.2e\n",
              S::name, dn, dr);
  EXPECT_LT(dn, 1e-11);
  EXPECT_LT(dr, 1e-11);
}

TEST(NullSpaceRattleResidual, GenericSolveAgreesWithFastStep) {
  RigidBody body;
  body.prm.gravity = 9.81;
  check_residuals(body, 31);
  check_residuals(RigidChain<1>{}, 32);
  check_residuals(RigidChain<2>{}, 33);
}

// ------------------------------------------------------------ rigid chains

template <class M, int B>
void long_run_chain(const RigidChain<B>& sys, std::uint64_t seed, Real h, int steps) {
  using S = RigidChain<B>;
  PhaseState<S> s = random_state(sys, seed, 1.5);
  const Real e0 = energy(sys, s.q, s.p), scale = sys.energy_scale();
  const Real lz0 = S::vertical_angular_momentum(s.q, s.p), spin0 = S::body_angular_momentum(s.q, s.p, 0)[2];
  const int quarter = steps / 4;
  Real first = 0, last = 0, lz_err = 0, spin_err = 0;
  for (int i = 0; i < steps; ++i) {
    run<M>(sys, s, h, 1);
    if (::testing::Test::HasFatalFailure()) return;
    const Real de = std::fabs(energy(sys, s.q, s.p) - e0) / scale;
    if (i < quarter) first = std::max(first, de);
    if (i >= steps - quarter) last = std::max(last, de);
    lz_err = std::max(lz_err, std::fabs(S::vertical_angular_momentum(s.q, s.p) - lz0));
    spin_err = std::max(spin_err, std::fabs(S::body_angular_momentum(s.q, s.p, 0)[2] - spin0));
  }
  std::printf("%s rigid_chain<%d>, %d steps h=%.3f: energy error/scale first quarter %.2e last quarter %.2e; "
              "|dLz| %.2e; |d alpha_3 of link 0| %.2e\n",
              M::name, B, steps, h, first, last, lz_err, spin_err);
  EXPECT_LT(first, 1e-2);
  EXPECT_LT(last, 2 * first);
  EXPECT_LT(lz_err, 1e-10);  // rotations about z: exact momentum map
  if (B == 1 && sys.prm.inertia[0] == sys.prm.inertia[1]) {
    EXPECT_LT(spin_err, 1e-10);  // Lagrange top: rotations about the body axis
  }
}

TEST(RigidChainMethods, HeavyTopAndDoublePendulumInvariants) {
  RigidChain<1> lagrange;  // I1 = I2: Lagrange top
  long_run_chain<Rattle>(lagrange, 41, 0.01, 10000);
  long_run_chain<NullSpaceRattle>(lagrange, 41, 0.01, 10000);
  RigidChain<2> pair;
  pair.prm.inertia[1] = 0.09;
  pair.prm.inertia[2] = 0.03;
  long_run_chain<Rattle>(pair, 42, 0.005, 10000);
  long_run_chain<NullSpaceRattle>(pair, 42, 0.005, 10000);
}

template <int B>
void chain_agreement(const RigidChain<B>& sys, std::uint64_t seed) {
  using S = RigidChain<B>;
  PhaseState<S> s = random_state(sys, seed, 1.5);
  Real worst = 0;
  int it = 0;
  for (int i = 0; i < 1000; ++i) {
    PhaseState<S> a = s, b = s;
    ASSERT_EQ(Rattle::step(sys, a, 0.01, NewtonOptions{}, it), Status::ok);
    ASSERT_EQ(NullSpaceRattle::step(sys, b, 0.01, NewtonOptions{}, it), Status::ok);
    worst = std::max(worst, std::max(max_abs(Vec<S::dof>(a.q - b.q)), max_abs(Vec<S::dof>(a.p - b.p)) / (1 + max_abs(a.p))));
    s = a;
  }
  std::printf("rigid_chain<%d>: max per-step |rattle - null_space_rattle| = %.2e\n", B, worst);
  EXPECT_LT(worst, 1e-12);
}

TEST(RigidChainMethods, NullSpaceAgreesWithRattleEveryStep) {
  chain_agreement(RigidChain<1>{}, 51);
  RigidChain<2> pair;
  pair.prm.inertia[1] = 0.09;
  pair.prm.inertia[2] = 0.03;
  chain_agreement(pair, 52);
}

}  // namespace

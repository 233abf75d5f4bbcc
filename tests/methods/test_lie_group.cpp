// SO(3) retractions and the Lie-group methods of BMS24 §6.2 (LieRattle,
// eqs. (6.8)-(6.10); LieLobatto, eqs. (6.4)-(6.7)) on the rigid-body systems.
// References are independent of the code under test: the matrix exponential
// series, matrix inverses, finite differences, an RK4 solution of Euler's
// equations, the ambient RATTLE, and a dense Newton on the paper's equations.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>
#include <random>
#include <vector>

#include "rigid_body_oracle.hpp"
#include "tether/core/so3.hpp"
#include "tether/methods/lie_rattle.hpp"
#include "tether/methods/rattle.hpp"
#include "tether/systems/rigid_body.hpp"
#include "tether/systems/rigid_chain.hpp"
#include "order_fit.hpp"

using namespace tether;

namespace {

using Mat3 = Mat<3, 3>;

struct TestRng {
  std::mt19937_64 engine;
  explicit TestRng(unsigned seed) : engine(seed) {}
  double uniform() { return std::uniform_real_distribution<double>(0, 1)(engine); }
  Vec3 vector(double scale) {
    std::uniform_real_distribution<double> u(-1, 1);
    return scale * Vec3(u(engine), u(engine), u(engine));
  }
};

Mat3 matrix_exponential_series(const Vec3& x) {
  const Mat3 a = hat(x);
  Mat3 term = Mat3::Identity(), sum = Mat3::Identity();
  for (int k = 1; k < 60; ++k) {
    term = term * a / k;
    sum += term;
  }
  return sum;
}

Mat3 cayley_definition(const Vec3& x) {
  return (Mat3::Identity() - hat(x) / 2).inverse() * (Mat3::Identity() + hat(x) / 2);
}

// Central difference of tau at x in direction eta.
template <class Tau>
Mat3 map_difference(const Vec3& x, const Vec3& eta, double d = 1e-5) {
  return (Tau::map(Vec3(x + d * eta)) - Tau::map(Vec3(x - d * eta))) / (2 * d);
}

template <class S>
double energy(const S& sys, const PhaseState<S>& s) {
  return 0.5 * s.p.dot(sys.inverse_mass_times(s.p)) + sys.potential(s.q);
}

template <class S>
double orthogonality_error(const PhaseState<S>& s) {
  double e = 0;
  for (int b = 0; b < S::bodies; ++b) {
    const Mat3 R = rigid::matrix_block(s.q, b);
    e = std::max(e, (R.transpose() * R - Mat3::Identity()).cwiseAbs().maxCoeff());
  }
  return e;
}

// Runs `steps` steps; fails the test (and stops) on a non-ok status.
template <class M, class S>
PhaseState<S> run(const M& method, const S& sys, PhaseState<S> s, double h, int steps, int* iterations = nullptr) {
  NewtonOptions opt;
  int it = 0;
  for (int i = 0; i < steps; ++i) {
    const Status st = method.step(sys, s, h, opt, it);
    if (st != Status::ok) {
      ADD_FAILURE() << M::name << ": step " << i << " " << status_name(st);
      break;
    }
  }
  if (iterations) *iterations = it;
  return s;
}

template <class S>
double state_distance(const PhaseState<S>& a, const PhaseState<S>& b) {
  return std::max((a.q - b.q).cwiseAbs().maxCoeff(), (a.p - b.p).cwiseAbs().maxCoeff());
}

// ---- free rigid body ----------------------------------------------------------

RigidBody make_body(double gravity) {
  RigidBody sys;
  sys.prm.inertia[0] = 1.0, sys.prm.inertia[1] = 2.0, sys.prm.inertia[2] = 2.5;
  sys.prm.mass = 1.5;
  sys.prm.gravity = gravity;
  return sys;
}

PhaseState<RigidBody> body_state(const RigidBody& sys) {
  PhaseState<RigidBody> s;
  s.q.setZero();
  const Eigen::Quaterniond quat(Eigen::Vector4d(0.3, -0.5, 0.2, 0.78).normalized());
  RigidBody::set_rotation(s.q, 0, quat.toRotationMatrix());
  RigidBody::set_translation(s.q, 0, Vec3(0.1, -0.2, 0.3));
  s.p = sys.momentum(s.q, Vec3(1.0, 0.6, -0.9), Vec3(0.4, -0.3, 1.2));
  s.q_prev = s.q;
  return s;
}

// Euler's equations by classical RK4 with a tiny step (R' = R hat(w),
// I w' = (I w) x w), the centre by its exact parabola: an independent solution.
PhaseState<RigidBody> euler_top_reference(const RigidBody& sys, const PhaseState<RigidBody>& s0, double t_end) {
  const Vec3 inertia = sys.principal_inertia(0);
  using Y = Eigen::Matrix<double, 12, 1>;
  auto rhs = [&](const Y& y) {
    Mat3 R;
    for (int i = 0; i < 9; ++i) R(i / 3, i % 3) = y[i];
    const Vec3 w = y.tail<3>();
    const Mat3 dR = R * hat(w);
    Y d;
    for (int i = 0; i < 9; ++i) d[i] = dR(i / 3, i % 3);
    d.tail<3>() = (inertia.cwiseProduct(w)).cross(w).cwiseQuotient(inertia);
    return d;
  };
  Y y;
  const Mat3 R0 = RigidBody::rotation(s0.q);
  for (int i = 0; i < 9; ++i) y[i] = R0(i / 3, i % 3);
  y.tail<3>() = sys.body_angular_velocity(s0.q, s0.p);
  const int n = static_cast<int>(std::ceil(t_end / 2e-4));
  const double h = t_end / n;
  for (int i = 0; i < n; ++i) {
    const Y k1 = rhs(y), k2 = rhs(y + h / 2 * k1), k3 = rhs(y + h / 2 * k2), k4 = rhs(y + h * k3);
    y += h / 6 * (k1 + 2 * k2 + 2 * k3 + k4);
  }
  PhaseState<RigidBody> s;
  s.q.setZero();
  Mat3 R;
  for (int i = 0; i < 9; ++i) R(i / 3, i % 3) = y[i];
  RigidBody::set_rotation(s.q, 0, R);
  const Vec3 v0 = RigidBody::translation(s0.p) / sys.prm.mass, g(0, 0, -sys.prm.gravity);
  RigidBody::set_translation(s.q, 0, Vec3(RigidBody::translation(s0.q) + t_end * v0 + 0.5 * t_end * t_end * g));
  s.p = sys.momentum(s.q, Vec3(y.tail<3>()), Vec3(v0 + t_end * g));
  return s;
}

// ---- chains ---------------------------------------------------------------------

template <int B>
RigidChain<B> make_chain() {
  RigidChain<B> sys;
  sys.prm.inertia[0] = 0.12, sys.prm.inertia[1] = 0.1, sys.prm.inertia[2] = 0.03;
  sys.prm.mass = 1.0;
  sys.prm.length = 1.0;
  sys.prm.gravity = 9.81;
  return sys;
}

// Random attitudes with the joints holding, random body rates, consistent momenta.
template <int B>
PhaseState<RigidChain<B>> chain_state(const RigidChain<B>& sys, unsigned seed) {
  TestRng rng(seed);
  PhaseState<RigidChain<B>> s;
  s.q = sys.random_configuration(rng);
  Vec<RigidChain<B>::tangent_dim> eta;
  for (int b = 0; b < B; ++b) eta.template segment<3>(3 * b) = rng.vector(2.0);
  s.p = sys.mass_times(sys.tangent_basis_times(s.q, eta));
  s.q_prev = s.q;
  return s;
}

// A dense Newton (central-difference Jacobian, full-pivot LU) on the method's
// residual as written, from its own guess.
template <class M, class S>
PhaseState<S> reference_step(const S& sys, const PhaseState<S>& s, double h, double* final_residual) {
  Eigen::VectorXd x = M::reference_guess(sys, s, h);
  for (int it = 0; it < 60; ++it) {
    const Eigen::VectorXd r = M::residual(sys, s, h, x);
    Eigen::MatrixXd jac(r.size(), x.size());
    for (int j = 0; j < x.size(); ++j) {
      const double d = 1e-6 * (1 + std::fabs(x[j]));
      Eigen::VectorXd xp = x, xm = x;
      xp[j] += d, xm[j] -= d;
      jac.col(j) = (M::residual(sys, s, h, xp) - M::residual(sys, s, h, xm)) / (2 * d);
    }
    const Eigen::VectorXd dx = jac.fullPivLu().solve(-r);
    x += dx;
    if (dx.cwiseAbs().maxCoeff() < 1e-15 * (1 + x.cwiseAbs().maxCoeff())) break;
  }
  *final_residual = M::residual(sys, s, h, x).cwiseAbs().maxCoeff();
  PhaseState<S> next;
  M::reference_finish(sys, s, h, x, next);
  return next;
}

}  // namespace

// ================================ so(3) ========================================

TEST(So3, HatVeeAndCross) {
  TestRng rng(1);
  for (int i = 0; i < 20; ++i) {
    const Vec3 x = rng.vector(2), y = rng.vector(2);
    EXPECT_LT((hat(x) * y - x.cross(y)).cwiseAbs().maxCoeff(), 1e-15);
    EXPECT_LT((vee(hat(x)) - x).cwiseAbs().maxCoeff(), 1e-16);
    EXPECT_LT((hat(x) + hat(x).transpose()).cwiseAbs().maxCoeff(), 1e-16);
  }
}

TEST(So3, ExpIsTheMatrixExponential) {
  TestRng rng(2);
  // Both branches: |x|^2 across the series switch at 1e-2, tiny, and large.
  const double norms[] = {0, 1e-9, 1e-4, 0.0999, 0.1001, 0.5, 1.0, 2.0, 3.0};
  for (double nrm : norms)
    for (int i = 0; i < 5; ++i) {
      Vec3 x = rng.vector(1);
      x *= nrm / x.norm();
      EXPECT_LT((So3Exp::map(x) - matrix_exponential_series(x)).cwiseAbs().maxCoeff(), 4e-15) << nrm;
    }
}

TEST(So3, CayleyIsItsDefinition) {
  TestRng rng(3);
  for (double nrm : {0.0, 1e-6, 0.3, 1.0, 5.0, 40.0})
    for (int i = 0; i < 5; ++i) {
      Vec3 x = rng.vector(1);
      x *= nrm / x.norm();
      EXPECT_LT((So3Cayley::map(x) - cayley_definition(x)).cwiseAbs().maxCoeff(), 1e-14) << nrm;
    }
}

template <class Tau>
void check_rotation_and_inverse() {
  TestRng rng(4);
  for (int i = 0; i < 50; ++i) {
    const Vec3 x = rng.vector(3);
    const Mat3 R = Tau::map(x);
    EXPECT_LT((R.transpose() * R - Mat3::Identity()).cwiseAbs().maxCoeff(), 2e-15) << Tau::name;
    EXPECT_NEAR(R.determinant(), 1, 2e-15) << Tau::name;
    // A retraction: tau(x) tau(-x) = e.
    EXPECT_LT((R * Tau::map(Vec3(-x)) - Mat3::Identity()).cwiseAbs().maxCoeff(), 2e-15) << Tau::name;
  }
}

TEST(So3, RetractionsAreRotations) {
  check_rotation_and_inverse<So3Exp>();
  check_rotation_and_inverse<So3Cayley>();
}

// The defining property: D tau(x)[eta] tau(x)^T = hat(d^R tau_x eta), so
// dR_inv(x) vee(D tau(x)[eta] tau(x)^T) = eta; and D tau(x)[eta] =
// tau(x) hat(d^L tau_x eta) with d^L tau_x^-1 = d^R tau_{-x}^-1.
template <class Tau>
void check_differentials(double max_norm) {
  TestRng rng(5);
  for (double nrm : {1e-7, 0.05, 0.0999, 0.1001, 0.7, max_norm})
    for (int i = 0; i < 8; ++i) {
      Vec3 x = rng.vector(1);
      x *= nrm / x.norm();
      const Vec3 eta = rng.vector(1);
      const Mat3 d = map_difference<Tau>(x, eta), t = Tau::map(x);
      const Vec3 right = vee(Mat3(d * t.transpose())), left = vee(Mat3(t.transpose() * d));
      // The finite difference is exactly tangent up to its own error.
      EXPECT_LT((d * t.transpose() - hat(right)).cwiseAbs().maxCoeff(), 1e-9);
      EXPECT_LT((Tau::dR_inv(x) * right - eta).cwiseAbs().maxCoeff(), 1e-9) << Tau::name << " " << nrm;
      EXPECT_LT((Tau::dR_inv(Vec3(-x)) * left - eta).cwiseAbs().maxCoeff(), 1e-9) << Tau::name << " " << nrm;
    }
}

TEST(So3, TrivializedInverseDifferentialsMatchFiniteDifferences) {
  check_differentials<So3Exp>(3.0);  // dexp^-1 is singular at |x| = 2 pi
  check_differentials<So3Cayley>(8.0);
}

// dexp_x^-1 = sum_k B_k / k! ad_x^k (Bernoulli numbers, B_1 = -1/2), ad_x = hat(x)
// on so(3): an independent check of both branches of the closed form.
TEST(So3, DexpInverseIsTheBernoulliSeries) {
  const double bernoulli[21] = {
      1,       -0.5, 1.0 / 6,       0, -1.0 / 30,     0, 1.0 / 42,       0, -1.0 / 30, 0, 5.0 / 66, 0, -691.0 / 2730, 0,
      7.0 / 6, 0,    -3617.0 / 510, 0, 43867.0 / 798, 0, -174611.0 / 330};
  TestRng rng(6);
  for (double nrm : {1e-6, 0.05, 0.0999, 0.1001, 0.5, 1.0})
    for (int i = 0; i < 4; ++i) {
      Vec3 x = rng.vector(1);
      x *= nrm / x.norm();
      Mat3 power = Mat3::Identity(), sum = Mat3::Zero();
      double factorial = 1;
      for (int k = 0; k <= 20; ++k) {
        if (k > 0) power = power * hat(x), factorial *= k;
        sum += bernoulli[k] / factorial * power;
      }
      EXPECT_LT((So3Exp::dR_inv(x) - sum).cwiseAbs().maxCoeff(), 2e-15) << nrm;
    }
}

TEST(So3, ExpAndCayleyAgreeToThirdOrder) {
  const Vec3 x(0.3, -0.7, 0.5);
  std::vector<double> scale, map_diff, dinv_diff;
  for (double e = 0.2; e > 1e-3; e /= 2) {
    const Vec3 y = e * x;
    scale.push_back(e);
    map_diff.push_back((So3Exp::map(y) - So3Cayley::map(y)).norm());
    dinv_diff.push_back((So3Exp::dR_inv(y) - So3Cayley::dR_inv(y)).norm());
  }
  EXPECT_NEAR(test::fitted_order(scale, map_diff), 3.0, 0.05);
  EXPECT_NEAR(test::fitted_order(scale, dinv_diff), 2.0, 0.05);  // both I - hat/2 + O(|x|^2)
}

// ============================ free rigid body ==================================

template <class M>
void check_body_order(double gravity, double* order_out) {
  const RigidBody sys = make_body(gravity);
  const PhaseState<RigidBody> s0 = body_state(sys);
  const double t_end = 2.0;
  const PhaseState<RigidBody> ref = euler_top_reference(sys, s0, t_end);
  // The RK4 reference against the Jacobi elliptic solution of Euler's equations.
  const rigid_oracle::FreeRigidBody exact(sys.principal_inertia(0), RigidBody::body_angular_momentum(s0.q, s0.p));
  EXPECT_LT((RigidBody::body_angular_momentum(ref.q, ref.p) - exact.body_momentum(t_end)).cwiseAbs().maxCoeff(), 1e-11);
  std::vector<double> hs, errs, alpha_errs;
  for (int n = 20; n <= 160; n *= 2) {
    const double h = t_end / n;
    hs.push_back(h);
    const PhaseState<RigidBody> s = run(M{}, sys, s0, h, n);
    errs.push_back(state_distance(s, ref));
    alpha_errs.push_back((RigidBody::body_angular_momentum(s.q, s.p) - exact.body_momentum(t_end)).norm());
  }
  EXPECT_NEAR(test::fitted_order(hs, alpha_errs), 2.0, 0.1) << M::name << "<" << M::Retraction::name << "> vs oracle";
  const double order = test::fitted_order(hs, errs);
  EXPECT_NEAR(order, 2.0, 0.1) << M::name << "<" << M::Retraction::name << "> errors " << errs.front() << " .. "
                               << errs.back();
  *order_out = order;
  std::printf(
      "  %-20s<%s> g=%.2f errors %.3e %.3e %.3e %.3e  order %.3f; body momentum vs Jacobi oracle %.3e .. %.3e order "
      "%.3f\n",
      M::name, M::Retraction::name, gravity, errs[0], errs[1], errs[2], errs[3], order, alpha_errs.front(),
      alpha_errs.back(), test::fitted_order(hs, alpha_errs));
}

TEST(LieGroupRigidBody, SecondOrderAgainstEulerTop) {
  double o;
  for (double g : {0.0, 9.81}) {
    check_body_order<LieRattle<So3Exp>>(g, &o);
    check_body_order<LieRattle<So3Cayley>>(g, &o);
    check_body_order<LieLobatto<So3Exp>>(g, &o);
    check_body_order<LieLobatto<So3Cayley>>(g, &o);
  }
}

template <class M>
void check_body_invariants() {
  const RigidBody sys = make_body(9.81);
  const PhaseState<RigidBody> s0 = body_state(sys);
  const double h = 0.05;
  const int steps = 10000;
  const Vec3 pi0 = RigidBody::rotation(s0.q) * RigidBody::body_angular_momentum(s0.q, s0.p);
  // Energy of the rotation alone (the centre falls freely; its energy is exact anyway).
  auto rot_energy = [&](const PhaseState<RigidBody>& s) {
    const Vec3 a = RigidBody::body_angular_momentum(s.q, s.p);
    return 0.5 * a.dot(a.cwiseQuotient(sys.principal_inertia(0)));
  };
  const double e0 = rot_energy(s0), e_total0 = energy(sys, s0);
  double max_orth = 0, max_pi = 0, max_total = 0, first_half = 0, second_half = 0;
  PhaseState<RigidBody> s = s0;
  NewtonOptions opt;
  int it = 0;
  for (int i = 0; i < steps; ++i) {
    ASSERT_EQ(M::step(sys, s, h, opt, it), Status::ok) << i;
    max_orth = std::max(max_orth, orthogonality_error(s));
    const Vec3 pi = RigidBody::rotation(s.q) * RigidBody::body_angular_momentum(s.q, s.p);
    max_pi = std::max(max_pi, (pi - pi0).cwiseAbs().maxCoeff());
    const double de = std::fabs(rot_energy(s) - e0);
    (i < steps / 2 ? first_half : second_half) = std::max(i < steps / 2 ? first_half : second_half, de);
    // relative to the size of its terms: the body falls ~1e6 over this run
    const double trans_size = sys.prm.mass * sys.prm.gravity * std::fabs(s.q[11]) +
                              0.5 * RigidBody::translation(s.p).squaredNorm() / sys.prm.mass;
    max_total = std::max(max_total, std::fabs(energy(sys, s) - e_total0 - (rot_energy(s) - e0)) / trans_size);
  }
  const std::string tag = std::string(M::name) + "<" + M::Retraction::name + ">";
  EXPECT_LT(max_orth, 1e-13) << tag;                // no projection, products of rotations
  EXPECT_LT(max_pi, 1e-12 * pi0.norm()) << tag;     // equivariance
  EXPECT_LT(first_half, 1e-2 * e0) << tag;          // O(h^2) oscillation
  EXPECT_LT(second_half, 1.5 * first_half) << tag;  // and no drift
  EXPECT_LT(max_total, 1e-12) << tag;               // translation: Verlet, exact under uniform gravity
  std::printf(
      "  %-24s 1e4 steps h=0.05: |R^T R - I| %.2e  |pi - pi0| %.2e  rot. energy err %.2e / %.2e (halves)  trans. %.1e  "
      "%.2f Newton/step\n",
      tag.c_str(), max_orth, max_pi / pi0.norm(), first_half / e0, second_half / e0, max_total, double(it) / steps);
}

TEST(LieGroupRigidBody, OrthogonalityMomentumAndEnergyOverLongRuns) {
  check_body_invariants<LieRattle<So3Exp>>();
  check_body_invariants<LieRattle<So3Cayley>>();
  check_body_invariants<LieLobatto<So3Exp>>();
  check_body_invariants<LieLobatto<So3Cayley>>();
}

// Without joints both compositions solve the same equations: (6.6) with no
// multiplier makes alpha_1/2 the momentum eq. (6.10) names.
TEST(LieGroupRigidBody, RattleAndLobattoCoincideWithoutJoints) {
  const RigidBody sys = make_body(9.81);
  const PhaseState<RigidBody> s0 = body_state(sys);
  EXPECT_LT(state_distance(run(LieRattle<So3Exp>{}, sys, s0, 0.1, 50), run(LieLobatto<So3Exp>{}, sys, s0, 0.1, 50)),
            1e-12);
  EXPECT_LT(
      state_distance(run(LieRattle<So3Cayley>{}, sys, s0, 0.1, 50), run(LieLobatto<So3Cayley>{}, sys, s0, 0.1, 50)),
      1e-12);
}

// ======================= fast step vs. the paper's equations =====================

template <class M, class S>
void check_against_reference(const S& sys, const PhaseState<S>& s0, double h) {
  PhaseState<S> fast = s0;
  NewtonOptions opt;
  int it = 0;
  ASSERT_EQ(M::step(sys, fast, h, opt, it), Status::ok);
  double res = 0;
  const PhaseState<S> ref = reference_step<M>(sys, s0, h, &res);
  const std::string tag = std::string(M::name) + "<" + M::Retraction::name + "> on " + S::name;
  EXPECT_LT(res, 1e-12) << tag;
  EXPECT_LT(state_distance(fast, ref), 1e-12) << tag;
  std::printf("  %-40s |fast - reference| %.2e (residual %.1e)\n", tag.c_str(), state_distance(fast, ref), res);
}

TEST(LieGroupReference, FastStepSolvesThePapersEquations) {
  const RigidBody body = make_body(9.81);
  const auto bs = body_state(body);
  check_against_reference<LieRattle<So3Exp>>(body, bs, 0.2);
  check_against_reference<LieRattle<So3Cayley>>(body, bs, 0.2);
  check_against_reference<LieLobatto<So3Exp>>(body, bs, 0.2);
  check_against_reference<LieLobatto<So3Cayley>>(body, bs, 0.2);
  const auto c1 = make_chain<1>();
  const auto s1 = chain_state(c1, 7);
  check_against_reference<LieRattle<So3Exp>>(c1, s1, 0.05);
  check_against_reference<LieLobatto<So3Cayley>>(c1, s1, 0.05);
  const auto c2 = make_chain<2>();
  const auto s2 = chain_state(c2, 11);
  check_against_reference<LieRattle<So3Exp>>(c2, s2, 0.05);
  check_against_reference<LieRattle<So3Cayley>>(c2, s2, 0.05);
  check_against_reference<LieLobatto<So3Exp>>(c2, s2, 0.05);
  check_against_reference<LieLobatto<So3Cayley>>(c2, s2, 0.05);
}

// On R^3 (tau = addition) the method is RATTLE: a body with its rotation
// frozen (zero rate, spherical inertia) and only its centre moving follows
// the ambient RATTLE step for step... which here is the exact parabola.
TEST(LieGroupRigidBody, TranslationsFollowRattle) {
  RigidBody sys = make_body(9.81);
  PhaseState<RigidBody> s0 = body_state(sys);
  s0.p = sys.momentum(s0.q, Vec3::Zero(), Vec3(0.4, -0.3, 1.2));
  const auto lie = run(LieRattle<So3Exp>{}, sys, s0, 0.1, 30);
  const auto amb = run(Rattle{}, sys, s0, 0.1, 30);
  EXPECT_LT(state_distance(lie, amb), 1e-12);
}

// ================================ chains =======================================

template <class M, int B>
void check_chain_invariants(double h, int steps) {
  const auto sys = make_chain<B>();
  const auto s0 = chain_state(sys, 100 + B);
  const double e0 = energy(sys, s0), lz0 = RigidChain<B>::vertical_angular_momentum(s0.q, s0.p);
  double max_joint = 0, max_hidden = 0, max_orth = 0, max_lz = 0, first_half = 0, second_half = 0;
  auto s = s0;
  NewtonOptions opt;
  int it = 0;
  for (int i = 0; i < steps; ++i) {
    ASSERT_EQ(M::step(sys, s, h, opt, it), Status::ok) << i;
    max_joint = std::max(max_joint, max_abs(sys.joint_constraints(s.q)));
    max_hidden = std::max(max_hidden, max_abs(sys.constraint_jacobian_times(s.q, sys.inverse_mass_times(s.p))));
    max_orth = std::max(max_orth, orthogonality_error(s));
    max_lz = std::max(max_lz, std::fabs(RigidChain<B>::vertical_angular_momentum(s.q, s.p) - lz0));
    const double de = std::fabs(energy(sys, s) - e0);
    (i < steps / 2 ? first_half : second_half) = std::max(i < steps / 2 ? first_half : second_half, de);
  }
  const std::string tag = std::string(M::name) + "<" + M::Retraction::name + "> chain<" + std::to_string(B) + ">";
  const double L = sys.prm.length, E = sys.energy_scale();
  EXPECT_LT(max_joint, 1e-12 * L) << tag;
  EXPECT_LT(max_hidden, 1e-11 * L) << tag;  // |D phi M^-1 p| in length/time, rates ~ 5/s
  EXPECT_LT(max_orth, 1e-13) << tag;
  EXPECT_LT(max_lz, 1e-11 * E) << tag;
  EXPECT_LT(first_half, 2e-2 * E) << tag;
  EXPECT_LT(second_half, 1.5 * first_half + 1e-12 * E) << tag;
  std::printf(
      "  %-34s %d steps h=%.3g: joints %.1e hidden %.1e orth %.1e |dLz| %.1e energy err %.2e / %.2e  %.1f "
      "Newton/step\n",
      tag.c_str(), steps, h, max_joint, max_hidden, max_orth, max_lz, first_half / E, second_half / E,
      double(it) / steps);
}

TEST(LieGroupChain, ConstraintsMomentumAndEnergy) {
  check_chain_invariants<LieRattle<So3Exp>, 1>(0.01, 4000);
  check_chain_invariants<LieRattle<So3Cayley>, 1>(0.01, 4000);
  check_chain_invariants<LieLobatto<So3Exp>, 1>(0.01, 4000);
  check_chain_invariants<LieLobatto<So3Cayley>, 1>(0.01, 4000);
  check_chain_invariants<LieRattle<So3Exp>, 2>(0.01, 4000);
  check_chain_invariants<LieRattle<So3Cayley>, 2>(0.01, 4000);
  check_chain_invariants<LieLobatto<So3Exp>, 2>(0.01, 4000);
  check_chain_invariants<LieLobatto<So3Cayley>, 2>(0.01, 4000);
}

// Against a Richardson-extrapolated fine ambient RATTLE solution: both the
// Lie methods and RATTLE are order 2, so they converge to the same solution,
// yet at a given step they differ by O(h^2): different methods.
TEST(LieGroupChain, SecondOrderAndSameLimitAsAmbientRattle) {
  const auto sys = make_chain<2>();
  const auto s0 = chain_state(sys, 5);
  const double t_end = 0.5;
  const auto fine = run(Rattle{}, sys, s0, t_end / 4000, 4000), finer = run(Rattle{}, sys, s0, t_end / 8000, 8000);
  PhaseState<RigidChain<2>> ref = finer;
  ref.q = (4 * finer.q - fine.q) / 3;
  ref.p = (4 * finer.p - fine.p) / 3;
  std::vector<double> hs;
  std::vector<double> err[5], diff;
  for (int n = 20; n <= 160; n *= 2) {
    const double h = t_end / n;
    hs.push_back(h);
    const auto amb = run(Rattle{}, sys, s0, h, n);
    const PhaseState<RigidChain<2>> lie[4] = {
        run(LieRattle<So3Exp>{}, sys, s0, h, n), run(LieRattle<So3Cayley>{}, sys, s0, h, n),
        run(LieLobatto<So3Exp>{}, sys, s0, h, n), run(LieLobatto<So3Cayley>{}, sys, s0, h, n)};
    for (int m = 0; m < 4; ++m) err[m].push_back(state_distance(lie[m], ref));
    err[4].push_back(state_distance(amb, ref));
    diff.push_back(state_distance(lie[0], amb));
  }
  const char* names[5] = {"lie_rattle<exp>", "lie_rattle<cayley>", "lie_lobatto<exp>", "lie_lobatto<cayley>",
                          "rattle (ambient)"};
  for (int m = 0; m < 5; ++m) {
    const double order = test::fitted_order(hs, err[m]);
    EXPECT_NEAR(order, 2.0, 0.15) << names[m];
    std::printf("  chain<2> %-20s errors %.3e %.3e %.3e %.3e  order %.3f\n", names[m], err[m][0], err[m][1], err[m][2],
                err[m][3], order);
  }
  EXPECT_NEAR(test::fitted_order(hs, diff), 2.0, 0.15);
  EXPECT_GT(diff.back(), 1e3 * 1e-12);  // distinct methods, not the same map
  std::printf("  |lie_rattle<exp> - rattle| %.3e .. %.3e  order %.3f\n", diff.front(), diff.back(),
              test::fitted_order(hs, diff));
}

// A failed step reports its reason and leaves the state as it was.
TEST(LieGroupChain, FailureIsReportedAndStateKept) {
  const auto sys = make_chain<2>();
  const auto s0 = chain_state(sys, 9);
  NewtonOptions few;
  few.max_iterations = 1;
  auto s = s0;
  int it = 0;
  EXPECT_NE(LieRattle<So3Exp>::step(sys, s, 0.05, few, it), Status::ok);
  EXPECT_EQ(state_distance(s, s0), 0.0);
  EXPECT_NE(LieLobatto<So3Cayley>::step(sys, s, 0.05, few, it), Status::ok);
  EXPECT_EQ(state_distance(s, s0), 0.0);
  auto bad = s0;
  bad.p[3] = std::nan("");
  const auto bad0 = bad;
  EXPECT_NE(LieRattle<So3Cayley>::step(sys, bad, 0.05, NewtonOptions{}, it), Status::ok);
  EXPECT_NE(LieLobatto<So3Exp>::step(sys, bad, 0.05, NewtonOptions{}, it), Status::ok);
  EXPECT_EQ((bad.q - bad0.q).cwiseAbs().maxCoeff(), 0.0);
  // dexp^-1 is singular at |x| = 2 pi: a step that would need it fails cleanly.
  const RigidBody body = make_body(0);
  auto fast = body_state(body);
  fast.p = body.momentum(fast.q, Vec3(0, 0, 1e3), Vec3::Zero());
  const auto fast0 = fast;
  const Status st = LieRattle<So3Exp>::step(body, fast, 12.6e-3, NewtonOptions{}, it);
  if (st != Status::ok) {
    EXPECT_EQ(state_distance(fast, fast0), 0.0);
  }
  EXPECT_TRUE(all_finite(fast.q) && all_finite(fast.p));
}

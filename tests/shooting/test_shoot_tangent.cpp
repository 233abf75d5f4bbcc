// The tangent maps shooting rests on (include/tether/shooting/shoot.hpp),
// every system x every method that shoots:
//  1. the shooting Jacobian dq(T)/dp0 and the full tangent d(q, p)(T)/d(q0, p0)
//     against central finite differences;
//  4. conjugate points: Heisenberg's first at 2 pi / |p_z|, none on the car's
//     straight run;
//  11. multiple shooting: the condensed Newton step against the block system's.
// (The numbers follow test_shoot.cpp's sections, which cover the rest.)
// Every expected value is derived from the mathematics, not read off output.
#include <cmath>
#include <string>

#include <Eigen/Dense>

#include "compiled_steps_gauss_legendre.hpp"  // generated: the steps compiled once
#include "compiled_steps_stormer_verlet.hpp"
#include "compiled_steps_symplectic_euler.hpp"
#include "shooting/shoot_support.hpp"
#include "support.hpp"
#include "tether/systems/heisenberg.hpp"
#include "tether/systems/heisenberg_vakonomic.hpp"
#include "tether/systems/martinet.hpp"
#include "tether/systems/parallel_parking.hpp"

namespace tether {
namespace {

using namespace test;

template <class M>
class ShootJacobian : public ::testing::Test {};
TYPED_TEST_SUITE(ShootJacobian, AllMethods, MethodName);

// ===========================================================================
// 1. The shooting Jacobian is the derivative of the discrete flow.
//
// Tolerance: central differences with d = 1e-6 have truncation error
// d^2/6 |d^3 q(T)/dp0^3| ~ 1e-12 here and roundoff ~ eps |q(T)| / d ~ 1e-10
// (each step's Newton stops at its roundoff floor, and the iteration count is
// the same at p0 +- d, so the computed map is smooth in p0; observed
// 1e-10 to 4e-10 over all systems and methods). 1e-7 relative leaves a wide margin, while a tangent that dropped one term (a multiplier
// column, one stage's coupling) is off by O(h) ~ 1e-2 after 20 steps.

constexpr Real kFdStep = 1e-6, kFdTolerance = 1e-7, kDt = 0.05;
constexpr int kSteps = 20;

template <class M, class S>
void check_endpoint_jacobian(const S& sys, const Vec<S::dof>& q0, const Vec<S::dof>& p0) {
  constexpr int n = S::dof;
  const ShootControl ctl = control(kDt, kSteps);
  Vec<n> qT, plain;
  Mat<n, n> jac;
  ShotCarry<S, CompiledFlow<M>> carry;
  ASSERT_EQ((shoot_endpoint<S, CompiledFlow<M>>(sys, ctl, carry, q0, p0, qT, &jac)), Status::ok);
  ASSERT_EQ((shoot_endpoint<S, CompiledFlow<M>>(sys, ctl, carry, q0, p0, plain, nullptr)), Status::ok);
  // Carrying the tangent must not move the state (it is computed after the step, from the same stages);
  // only the Hessian-carrying dual numbers may round the gradient differently.
  EXPECT_LT(max_abs(Vec<n>(qT - plain)), 1e-14 * (1 + max_abs(qT)));
  Mat<n, n> fd;
  for (int k = 0; k < n; ++k) {
    Vec<n> pp = p0, pm = p0, qp, qm;
    pp[k] += kFdStep;
    pm[k] -= kFdStep;
    ASSERT_EQ((shoot_endpoint<S, CompiledFlow<M>>(sys, ctl, carry, q0, pp, qp, nullptr)), Status::ok);
    ASSERT_EQ((shoot_endpoint<S, CompiledFlow<M>>(sys, ctl, carry, q0, pm, qm, nullptr)), Status::ok);
    fd.col(k) = (qp - qm) / (2 * kFdStep);
  }
  const Real scale = std::max<Real>(1, jac.cwiseAbs().maxCoeff());
  EXPECT_LT((jac - fd).cwiseAbs().maxCoeff(), kFdTolerance * scale) << S::name << "\nexact\n" << jac << "\nfd\n" << fd;
  // Not vacuous: after 20 steps the Jacobian is far from its t = 0 value (zero).
  EXPECT_GT(jac.cwiseAbs().maxCoeff(), 0.1);
}

TYPED_TEST(ShootJacobian, Heisenberg) { check_endpoint_jacobian<TypeParam>(Heisenberg{}, kQ3, kP3); }
TYPED_TEST(ShootJacobian, HeisenbergVakonomic) {
  check_endpoint_jacobian<TypeParam>(HeisenbergVakonomic{}, kQ3, kP3);
}
// beta = 0.5: the X2 = d/dy / (1 + beta x) coefficient varies along the path.
TYPED_TEST(ShootJacobian, Martinet) { check_endpoint_jacobian<TypeParam>(martinet(0.5), kMartinetQ, kMartinetP); }
TYPED_TEST(ShootJacobian, MartinetLagrangian) {
  check_endpoint_jacobian<TypeParam>(martinet_lagrangian(0.5), kMartinetQ, kMartinetP);
}
TYPED_TEST(ShootJacobian, ParallelParkingBowl) {
  check_endpoint_jacobian<TypeParam>(parking_bowl(), kParkingQ, kParkingP);
}

// The full tangent map d(q, p)(T) / d(q0, p0), carried by M::step itself,
// against central differences of the flat map (q0, p0) -> (q, p)(T). The
// tangent is linear in its columns, so the map is carried as two tangents of
// S::dof columns, started from (I; 0) (the q0 directions) and (0; I) (the p0
// directions): the width single shooting carries. The q0 columns exercise the
// H_qq and H_q lambda terms of the stage tangents that the p0 columns alone
// would barely weigh.
template <class M, class S>
void check_full_tangent(const S& sys, const Vec<S::dof>& q0, const Vec<S::dof>& p0) {
  constexpr int n = S::dof, m = 2 * n;
  const NewtonOptions opt;
  // carried: each step starts from the last one's carry; else every step from its own Jacobian.
  auto flow = [&](const Vec<m>& x, Tangent<S, n>* t, bool carried) {
    PhaseState<S> s = make_state<S>(x.template head<n>(), x.template tail<n>());
    ShotCarry<S, CompiledFlow<M>> carry;
    for (int k = 0; k < kSteps; ++k) {
      int it = 0;
      if (!carried) restart(carry);
      EXPECT_EQ(CompiledFlow<M>::step(sys, s, kDt, opt, it, t, &carry), Status::ok);
    }
    Vec<m> out;
    out << s.q, s.p;
    return out;
  };
  // The full tangent from the two halves, each integrated with or without the carry.
  auto full_tangent = [&](const Vec<m>& x, bool carried, Vec<m>& end) {
    Mat<m, m> tangent = Mat<m, m>::Identity();
    for (int half = 0; half < 2; ++half) {
      Tangent<S, n> t = tangent.template middleCols<n>(half * n);
      end = flow(x, &t, carried);
      tangent.template middleCols<n>(half * n) = t;
    }
    return tangent;
  };
  Vec<m> x0, end, carried_end;
  x0 << q0, p0;
  const Mat<m, m> tangent = full_tangent(x0, false, end);
  // A step that starts its Newton from the previous step's factored Jacobian
  // (the method's Carry) reaches the same state and tangent: only the chord
  // matrix differs, never the converged stages' Jacobian.
  {
    const Mat<m, m> carried = full_tangent(x0, true, carried_end);
    EXPECT_LT(max_abs(Vec<m>(carried_end - end)), 1e-13 * (1 + max_abs(end)));
    EXPECT_LT((carried - tangent).cwiseAbs().maxCoeff(), 1e-12 * std::max<Real>(1, tangent.cwiseAbs().maxCoeff()));
  }
  Mat<m, m> fd;
  for (int k = 0; k < m; ++k) {
    Vec<m> xp = x0, xm = x0;
    xp[k] += kFdStep;
    xm[k] -= kFdStep;
    fd.col(k) = (flow(xp, nullptr, false) - flow(xm, nullptr, false)) / (2 * kFdStep);
  }
  const Real scale = std::max<Real>(1, tangent.cwiseAbs().maxCoeff());
  EXPECT_LT((tangent - fd).cwiseAbs().maxCoeff(), kFdTolerance * scale) << "exact\n" << tangent << "\nfd\n" << fd;
  // The map is symplectic (MMVW13 Props 3-4; LJM12): T^t J T = J is a second,
  // independent check of the tangent (roundoff ~ 1e-14 |T|^2).
  Mat<m, m> j = Mat<m, m>::Zero();
  j.template topRightCorner<n, n>().setIdentity();
  j.template bottomLeftCorner<n, n>() = -Mat<n, n>::Identity();
  EXPECT_LT((tangent.transpose() * j * tangent - j).cwiseAbs().maxCoeff(), 1e-12 * scale * scale);
}

TYPED_TEST(ShootJacobian, ParallelParkingBowlFullTangent) {
  check_full_tangent<TypeParam>(parking_bowl(), kParkingQ, kParkingP);
}
TYPED_TEST(ShootJacobian, MartinetLagrangianFullTangent) {
  check_full_tangent<TypeParam>(martinet_lagrangian(0.5), kMartinetQ, kMartinetP);
}


// ===========================================================================
// 4. Conjugate points. For p0 with p_z = omega != 0 the projection is a circle
// closed at t = 2 pi / |omega|; there all geodesics with the same |(u, v)|
// and omega (rotated about the z-axis through q0) meet again, so J = dq(t)/dp0
// degenerates: det J(t) is proportional to sin(omega t / 2) (omega t/2 cos(omega t/2)
// - sin(omega t/2)), whose first zero for t > 0 is the simple zero of the sine
// at omega t = 2 pi (the second factor vanishes only at omega t / 2 ~ 4.49).
// So det J changes sign there. By left-invariance this does not depend on q0.
//
// Every method, h = 1/1000 (|omega| h < 0.012). Tolerance: even the order-1
// methods put the discrete zero within ~1e-5 of the exact one, and
// shot_report's linear interpolation of det between steps adds
// O(h^2 |det''/det'|) ~ 1e-5: 1e-3 is safe, and a conjugate time off by one
// whole feature (a step, or 2 pi / omega confused with pi / omega) is not.
template <class M>
class ShootConjugate : public ::testing::Test {};
TYPED_TEST_SUITE(ShootConjugate, AllMethods, MethodName);

TYPED_TEST(ShootConjugate, HeisenbergFirstConjugateTimeIsTwoPiOverOmega) {
  const Heisenberg sys;
  const ShootControl ctl = control(1.0 / 1000, 1000);
  ShotCarry<Heisenberg, CompiledFlow<TypeParam>> carry;
  struct Case {
    Vec3 q0, p0;
  };
  const Real omega1 = 2 * kPi / 0.7, omega2 = 2 * kPi / 0.55;
  for (const Case& c : {Case{Vec3::Zero(), Vec3(1, 0, omega1)}, Case{kQ3, Vec3(1, 0, omega1)},
                        Case{kQ3, Vec3(0.6, -0.8, -omega2)}, Case{kQ3, Vec3(-0.3, 0.2, 2 * kPi / 0.93)}}) {
    ShotReport<3> report;
    ASSERT_EQ((shot_report<Heisenberg, CompiledFlow<TypeParam>>(sys, ctl, carry, c.q0, c.p0, report)), Status::ok);
    EXPECT_NEAR(report.conjugate_time, 2 * kPi / std::abs(c.p0[2]), 1e-3)
        << "q0 = " << c.q0.transpose() << ", p0 = " << c.p0.transpose();
  }
  // |omega| T < 2 pi: no conjugate point up to T (also for omega = 0, the straight line).
  for (const Vec3& p0 : {Vec3(1, 0, 2 * kPi / 1.3), Vec3(0.6, -0.8, -5.0), Vec3(0.5, 0.5, 0.0)}) {
    ShotReport<3> report;
    ASSERT_EQ((shot_report<Heisenberg, CompiledFlow<TypeParam>>(sys, ctl, carry, kQ3, p0, report)), Status::ok);
    EXPECT_TRUE(std::isnan(report.conjugate_time)) << "p0 = " << p0.transpose() << " conjugate_time "
                                                   << report.conjugate_time;
  }
}

// Driving straight ahead, (0, 0, 0, 0) to (a, 0, 0, 0) with p0 = (a, 0, 0, 0)/T,
// is the shortest path (any admissible path has length >= int |xdot| >= a,
// and this one has length a), and it is not abnormal (the car's abnormal
// curves steer in place, along d/dphi: [d/dphi, D^2] lies in D^2), so it has
// no conjugate point in (0, T]. Near t = 0, det J(t) ~ t^10 for the car: over
// the first one or two steps it is at the roundoff of J's entries (smallest
// singular value ~1e-17 of the largest), and its sign there is noise.
TYPED_TEST(ShootConjugate, ParallelParkingStraightRunHasNone) {
  const ParallelParking sys;
  ShotCarry<ParallelParking, CompiledFlow<TypeParam>> carry;
  for (int steps : {10, 40, 160}) {
    const ShootControl ctl = control(1.0 / steps, steps);
    for (const Vec<4>& p0 : {Vec<4>(0.5, 0, 0, 0), Vec<4>(-0.8, 0, 0, 0)}) {
      ShotReport<4> report;
      ASSERT_EQ(
          (shot_report<ParallelParking, CompiledFlow<TypeParam>>(sys, ctl, carry, Vec<4>::Zero(), p0, report)),
          Status::ok);
      EXPECT_NEAR(report.length, std::abs(p0[0]), 1e-14);
      EXPECT_TRUE(std::isnan(report.conjugate_time)) << steps << " steps, p0 = " << p0.transpose()
                                                     << ": conjugate_time " << report.conjugate_time;
    }
  }
}


// ===========================================================================
// 11. Multiple shooting.

// The condensed Newton step (shooting_direction) is the Newton step of the
// whole block system: unknowns x = (p0, z_1, z_2), residuals
// F = (Phi_0(q0, p0) - z_1, Phi_1(z_1) - z_2, q(Phi_2(z_2)) - q1), its
// Jacobian by central differences of arcs integrated here step by step, and
// checked against the block equations J dx = -F. Differences with step 1e-6
// are accurate to ~1e-10 relative, so |J dx + F| <= 1e-8 (|J| |dx| + |F|)
// holds for the exact step whatever J's condition (the car's dq/dp0 is
// nearly singular at short horizons: det J ~ t^10), while a condensation that
// dropped b_k, or used (0; I) where A_k belongs, leaves ~|J| |F| (J's
// condition here is below 1e6). Where J is well conditioned (Heisenberg) the
// step itself is compared with the dense solution, to 1e-6.
template <class M>
class ShootMultiple : public ::testing::Test {};
TYPED_TEST_SUITE(ShootMultiple, AllMethods, MethodName);

template <class M, class S>
void check_condensed_step(const S& sys, Real dt, const Vec<S::dof>& q0, const Vec<S::dof>& p0,
                          const Vec<S::dof>& q1) {
  constexpr int n = S::dof, m = 2 * n, dim = n + 2 * m;
  ShootControl ctl = control(dt, 12);
  ctl.nodes = 3;
  auto arc = [&](const Vec<m>& z) {
    PhaseState<S> s = make_state<S>(z.template head<n>(), z.template tail<n>());
    for (int j = 0; j < 4; ++j) {
      int it = 0;
      EXPECT_EQ(CompiledFlow<M>::step(sys, s, dt, NewtonOptions{}, it), Status::ok);
    }
    Vec<m> out;
    out << s.q, s.p;
    return out;
  };
  auto residual = [&](const Eigen::VectorXd& x) {
    Vec<m> z0, z1 = x.segment<m>(n), z2 = x.segment<m>(n + m);
    z0 << q0, x.head<n>();
    Eigen::VectorXd f(dim);
    f << arc(z0) - z1, arc(z1) - z2, arc(z2).template head<n>() - q1;
    return f;
  };
  // Nodes near, not on, the trajectory from (q0, p0).
  Eigen::VectorXd x(dim);
  Vec<m> z0;
  z0 << q0, p0;
  const Vec<m> z1 = arc(z0), z2 = arc(z1);
  x << p0, z1 + 0.01 * Vec<m>::LinSpaced(-1, 1), z2 - 0.02 * Vec<m>::LinSpaced(0.5, -1);
  Eigen::MatrixXd jac(dim, dim);
  for (int c = 0; c < dim; ++c) {
    Eigen::VectorXd xp = x, xm = x;
    xp[c] += kFdStep;
    xm[c] -= kFdStep;
    jac.col(c) = (residual(xp) - residual(xm)) / (2 * kFdStep);
  }
  const Eigen::VectorXd f = residual(x), full = jac.fullPivLu().solve(-f);

  ShootingNodes<S> w;
  w.z[0] = z0;
  w.z[1] = x.segment<m>(n);
  w.z[2] = x.segment<m>(n + m);
  Real norm;
  ShotCarry<S, CompiledFlow<M>> carry;
  ASSERT_EQ((shooting_sweep<S, CompiledFlow<M>>(sys, ctl, carry, q1, w, norm)), Status::ok);
  EXPECT_NEAR(norm, residual(x).norm(), 1e-12 * (1 + norm));
  Vec<m> dz[kMaxShootingNodes];
  ASSERT_TRUE(shooting_direction<S>(ctl, w, dz));
  Eigen::VectorXd condensed(dim);
  condensed << dz[0].template tail<n>(), dz[1], dz[2];
  EXPECT_EQ(dz[0].template head<n>(), Vec<n>::Zero());
  EXPECT_LT((jac * condensed + f).norm(), 1e-8 * (jac.norm() * condensed.norm() + f.norm()));
  const Eigen::JacobiSVD<Eigen::MatrixXd> svd(jac);
  const Real condition = svd.singularValues()(0) / svd.singularValues()(dim - 1);
  EXPECT_LT(condition, 1e6);  // else the test above loses its power
  if (condition < 1e3)
    EXPECT_LT((condensed - full).norm(), 1e-6 * full.norm()) << "condensed " << condensed.transpose()
                                                             << "\nfull      " << full.transpose();
}

TYPED_TEST(ShootMultiple, CondensedStepIsTheBlockNewtonStepHeisenberg) {
  check_condensed_step<TypeParam>(Heisenberg{}, kDt, kQ3, kP3, Vec3(0.9, 0.3, 0.4));
}
TYPED_TEST(ShootMultiple, CondensedStepIsTheBlockNewtonStepParking) {
  check_condensed_step<TypeParam>(parking_bowl(), 0.1, kParkingQ, kParkingP, Vec<4>(0.8, 0.1, 0.3, 0.2));
}

}  // namespace
}  // namespace tether

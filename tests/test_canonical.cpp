// Canonical sub-Riemannian systems with Gauss-Legendre, symplectic Euler and
// Stormer-Verlet (groundwork for the nonholonomic family): derivatives against finite differences, the
// Heisenberg geodesics against their closed form, orders 2/4/6,
// symplecticity and bounded energy error.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>
#include <complex>
#include <cstdio>

#include "tether/methods/canonical_splitting.hpp"
#include "tether/methods/gauss_legendre.hpp"

namespace tether {
namespace {

// Heisenberg geodesic from z0 at time t. With lambda = p_z (constant),
// u = p_x - y lambda/2, v = p_y + x lambda/2, the equations give
// (u + iv)' = i lambda (u + iv) and (x + iy)' = u + iv, z' = Im(conj(x + iy)(u + iv)) / 2.
Vec<6> heisenberg_exact(const Vec<6>& z0, Real t) {
  using C = std::complex<Real>;
  const Real lambda = z0[5];
  const C w0(z0[0], z0[1]), c0(z0[3] - z0[1] * lambda / 2, z0[4] + z0[0] * lambda / 2);
  const C i(0, 1);
  // (e^{i lambda t} - 1) / (i lambda) and (t - sin(lambda t)/lambda) / lambda, with their lambda -> 0 limits.
  const C e = std::abs(lambda * t) < 1e-8 ? C(t, 0) : (std::exp(i * lambda * t) - 1.0) / (i * lambda);
  const Real s = std::abs(lambda * t) < 1e-4 ? lambda * t * t * t / 6 : (t - std::sin(lambda * t) / lambda) / lambda;
  const C w = w0 + c0 * e, c = c0 * std::exp(i * lambda * t);
  Vec<6> z;
  z[0] = w.real();
  z[1] = w.imag();
  z[2] = z0[2] + 0.5 * (std::imag(std::conj(w0) * c0 * e) + std::norm(c0) * s);
  z[3] = c.real() + z[1] * lambda / 2;
  z[4] = c.imag() - z[0] * lambda / 2;
  z[5] = lambda;
  return z;
}

template <class Method, class Sys>
Vec<6> integrate(const Sys& sys, Vec<6> z, Real h, int steps) {
  NewtonOptions opt;
  opt.tolerance = 1e-15;
  for (int n = 0; n < steps; ++n) {
    int it = 0;
    const Status st = Method::step(sys, z, h, opt, it);
    if (st != Status::ok) {
      ADD_FAILURE() << "step " << n << ": " << status_name(st);
      break;
    }
  }
  return z;
}

const Vec<6> kStart = (Vec<6>() << 0.2, -0.1, 0.05, 0.7, 0.4, 1.3).finished();

template <class Sys>
void check_derivatives(const Sys& sys) {
  for (int trial = 0; trial < 5; ++trial) {
    const Vec<6> z = kStart + 0.3 * Vec<6>::Random();
    const Vec<6> f = hamiltonian_vector_field(sys, z);
    const Mat<6, 6> jac = hamiltonian_vector_field_jacobian(sys, z);
    for (int k = 0; k < 6; ++k) {
      const Real d = 1e-5;
      Vec<6> zp = z, zm = z;
      zp[k] += d;
      zm[k] -= d;
      // X_H = J grad H: dH/dz_k against column k of -J X_H.
      const Real dh = (frame_hamiltonian(sys, zp) - frame_hamiltonian(sys, zm)) / (2 * d);
      const Real from_field = k < 3 ? -f[k + 3] : f[k - 3];
      EXPECT_NEAR(from_field, dh, 1e-8 * (1 + std::abs(dh)));
      const Vec<6> col = (hamiltonian_vector_field(sys, zp) - hamiltonian_vector_field(sys, zm)) / (2 * d);
      EXPECT_LT(max_abs(Vec<6>(jac.col(k) - col)), 1e-8 * (1 + max_abs(col))) << "column " << k;
    }
  }
}

TEST(SubRiemannian, HeisenbergDerivativesMatchFiniteDifferences) { check_derivatives(Heisenberg{}); }

TEST(SubRiemannian, MartinetDerivativesMatchFiniteDifferences) {
  Martinet m;
  m.beta = 0.7;
  check_derivatives(m);
}

// The oracle itself: its time derivative is the Hamiltonian vector field.
TEST(SubRiemannian, HeisenbergClosedFormSolvesHamiltonsEquations) {
  const Heisenberg sys;
  for (Real t : {0.0, 0.4, 1.7}) {
    const Real d = 1e-6;
    const Vec<6> dz = (heisenberg_exact(kStart, t + d) - heisenberg_exact(kStart, t - d)) / (2 * d);
    EXPECT_LT(max_abs(Vec<6>(dz - hamiltonian_vector_field(sys, heisenberg_exact(kStart, t)))), 1e-8);
  }
  EXPECT_LT(max_abs(Vec<6>(heisenberg_exact(kStart, 0) - kStart)), 1e-15);
}

template <class M>
class CanonicalMethodTest : public ::testing::Test {};
using Methods = ::testing::Types<GaussLegendre<1>, GaussLegendre<2>, GaussLegendre<3>, CanonicalSymplecticEuler,
                                 CanonicalStormerVerlet>;
TYPED_TEST_SUITE(CanonicalMethodTest, Methods);

template <class M>
class GaussLegendreTest : public ::testing::Test {};
using Rules = ::testing::Types<GaussLegendre<1>, GaussLegendre<2>, GaussLegendre<3>>;
TYPED_TEST_SUITE(GaussLegendreTest, Rules);

// Error at T = 2 against the closed form, for h and h/2: observed order 2s.
TYPED_TEST(GaussLegendreTest, OrderAgainstHeisenbergClosedForm) {
  const Heisenberg sys;
  const Real T = 2;
  const Vec<6> exact = heisenberg_exact(kStart, T);
  // Coarse enough that the s = 3 error stays well above roundoff.
  const int n0 = TypeParam::order >= 6 ? 4 : 16;
  Real err[3];
  for (int k = 0; k < 3; ++k) {
    const int n = n0 << k;
    err[k] = max_abs(Vec<6>(integrate<TypeParam>(sys, kStart, T / n, n) - exact));
  }
  const Real observed = std::log2(err[1] / err[2]);
  ::testing::Test::RecordProperty("observed_order", std::to_string(observed));
  char errors[96];
  std::snprintf(errors, sizeof errors, "%.3e %.3e %.3e", err[0], err[1], err[2]);
  ::testing::Test::RecordProperty("errors", errors);
  EXPECT_NEAR(observed, TypeParam::order, 0.25) << "errors " << err[0] << " " << err[1] << " " << err[2];
  EXPECT_LT(err[2], 1e-3);
}

// Observed order on the Martinet structure (non-separable, beta != 0),
// against Gauss-Legendre 3 at a step 64 times finer than the finest tested.
TYPED_TEST(CanonicalMethodTest, OrderOnMartinet) {
  Martinet sys;
  sys.beta = 0.5;
  const Vec<6> z0 = (Vec<6>() << 0.1, 0.2, 0.0, 0.5, 0.3, 0.8).finished();
  const Real T = 2;
  const int n0 = TypeParam::order >= 6 ? 4 : 16;
  const Vec<6> reference = integrate<GaussLegendre<3>>(sys, z0, T / (n0 * 256), n0 * 256);
  Real err[3];
  for (int k = 0; k < 3; ++k) {
    const int n = n0 << k;
    err[k] = max_abs(Vec<6>(integrate<TypeParam>(sys, z0, T / n, n) - reference));
  }
  const Real observed = std::log2(err[1] / err[2]);
  ::testing::Test::RecordProperty("observed_order", std::to_string(observed));
  EXPECT_NEAR(observed, TypeParam::order, 0.25) << "errors " << err[0] << " " << err[1] << " " << err[2];
}

// On the Heisenberg structure symplectic Euler (35) and the midpoint rule
// give the same steps (observed to roundoff), so the closed-form oracle
// cannot measure Euler's order there; on Martinet they differ at O(h^2).
TEST(CanonicalSymplecticEuler, CoincidesWithMidpointOnHeisenbergOnly) {
  Vec<6> a = kStart, b = kStart;
  const Heisenberg heis;
  a = integrate<CanonicalSymplecticEuler>(heis, a, 0.125, 16);
  b = integrate<GaussLegendre<1>>(heis, b, 0.125, 16);
  EXPECT_LT(max_abs(Vec<6>(a - b)), 1e-12);
  Martinet mart;
  mart.beta = 0.5;
  a = integrate<CanonicalSymplecticEuler>(mart, kStart, 0.125, 16);
  b = integrate<GaussLegendre<1>>(mart, kStart, 0.125, 16);
  EXPECT_GT(max_abs(Vec<6>(a - b)), 1e-3);
}

// The one-step map's Jacobian is symplectic: Phi'^T J Phi' = J.
TYPED_TEST(CanonicalMethodTest, StepIsSymplectic) {
  Martinet sys;
  sys.beta = 0.5;
  const Real h = 0.1, d = 1e-6;
  Mat<6, 6> dphi;
  for (int k = 0; k < 6; ++k) {
    Vec<6> zp = kStart, zm = kStart;
    zp[k] += d;
    zm[k] -= d;
    dphi.col(k) = (integrate<TypeParam>(sys, zp, h, 1) - integrate<TypeParam>(sys, zm, h, 1)) / (2 * d);
  }
  Mat<6, 6> J = Mat<6, 6>::Zero();
  J.topRightCorner<3, 3>().setIdentity();
  J.bottomLeftCorner<3, 3>() = -Mat<3, 3>::Identity();
  EXPECT_LT((dphi.transpose() * J * dphi - J).cwiseAbs().maxCoeff(), 1e-8);
  // Negative control: an explicit Euler step is not symplectic.
  Mat<6, 6> euler = Mat<6, 6>::Identity() + h * hamiltonian_vector_field_jacobian(sys, kStart);
  EXPECT_GT((euler.transpose() * J * euler - J).cwiseAbs().maxCoeff(), 1e-3);
}

// Bounded energy error over many steps on the Martinet structure (no drift).
TYPED_TEST(CanonicalMethodTest, MartinetEnergyErrorStaysBounded) {
  Martinet sys;
  sys.beta = 0.5;
  Vec<6> z = (Vec<6>() << 0.1, 0.2, 0.0, 0.5, 0.3, 0.8).finished();
  const Real h = 0.05, h0 = frame_hamiltonian(sys, z);
  Real first = 0, last = 0;
  NewtonOptions opt;
  opt.tolerance = 1e-15;
  const int steps = 20000;
  for (int n = 0; n < steps; ++n) {
    int it = 0;
    ASSERT_EQ(TypeParam::step(sys, z, h, opt, it), Status::ok) << "step " << n;
    const Real e = std::abs(frame_hamiltonian(sys, z) - h0);
    (n < steps / 10 ? first : last) = std::max(n < steps / 10 ? first : last, e);
  }
  EXPECT_LT(last, 3 * first + 1e-13);
  EXPECT_LT(last, (TypeParam::order == 1 ? 1e-1 : 1e-2) * h0);
}

}  // namespace
}  // namespace tether

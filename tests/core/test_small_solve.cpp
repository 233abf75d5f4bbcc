// DenseLU and ComplexLU (small_solve.hpp) against Eigen's partial-pivoting LU,
// and DenseMatrix in lanes against one trajectory's solve.
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <string>

#include <Eigen/LU>

#include "tether/core/small_solve.hpp"

namespace tether {
namespace {

// x and det against Eigen's LU of the same matrix, at dynamic size: one
// instantiation of Eigen's LU for every K (fixed sizes took most of this
// unit's compile time).
void expect_agrees_with_eigen(const Eigen::MatrixXd& a, const Eigen::VectorXd& b, const Eigen::VectorXd& x, Real det,
                              const std::string& where) {
  const Eigen::PartialPivLU<Eigen::MatrixXd> ref(a);
  const Eigen::VectorXd x_ref = ref.solve(b);
  const Real cond = ref.rcond() > 0 ? 1 / ref.rcond() : 1e16;
  EXPECT_LT((x - x_ref).cwiseAbs().maxCoeff(), 1e-14 * cond * (1 + x_ref.cwiseAbs().maxCoeff())) << where;
  EXPECT_LT((a * x - b).cwiseAbs().maxCoeff(), 1e-13 * (1 + a.cwiseAbs().maxCoeff() * x.cwiseAbs().maxCoeff()))
      << where;
  EXPECT_NEAR(det, ref.determinant(), 1e-12 * std::abs(ref.determinant()) * cond) << where;
}

template <int K>
void check_random(unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<Real> u(-1, 1);
  for (int trial = 0; trial < 20; ++trial) {
    Mat<K, K> a;
    Vec<K> b;
    for (int r = 0; r < K; ++r) {
      b[r] = u(gen);
      for (int c = 0; c < K; ++c) a(r, c) = u(gen);
    }
    DenseLU<K> lu;
    ASSERT_TRUE(lu.factor(a));
    Vec<K> x;
    ASSERT_TRUE(lu.solve(b, x));
    expect_agrees_with_eigen(a, b, x, lu.determinant(), "K = " + std::to_string(K) + ", trial " + std::to_string(trial));
  }
}

TEST(DenseLU, AgreesWithEigenPartialPivLU) {
  check_random<1>(1);
  check_random<2>(2);
  check_random<6>(3);
  check_random<kRegisterLU>(6);      // the largest whose rows swap by selects
  check_random<kRegisterLU + 1>(7);  // the smallest whose rows swap by index
  check_random<12>(4);
  check_random<18>(5);
}

// A zero leading entry forces a row swap; the permutation is applied to the
// right-hand side, and the determinant changes sign with it.
TEST(DenseLU, PivotsPastAZeroLeadingEntry) {
  Mat<3, 3> a;
  a << 0, 2, 1, 1, 1, 1, 2, 0, 3;
  const Vec3 x_true(1, -2, 0.5);
  DenseLU<3> lu;
  ASSERT_TRUE(lu.factor(a));
  Vec3 x;
  ASSERT_TRUE(lu.solve(a * x_true, x));
  EXPECT_LT(max_abs(Vec3(x - x_true)), 1e-15);
  EXPECT_NEAR(lu.determinant(), a.determinant(), 1e-14);
}

// A singular matrix is refused by factor, not divided through.
TEST(DenseLU, RefusesASingularMatrix) {
  Mat<3, 3> a;
  a << 1, 2, 3, 2, 4, 6, 0, 1, 1;
  DenseLU<3> lu;
  EXPECT_FALSE(lu.factor(a));
}

// Up to kRegisterLU rows are swapped by selects in unrolled loops (so that a
// GPU thread keeps the factors in registers); the arithmetic is that of the
// looped factorization, so the factors are the same to the bit. Matrices with
// ties and zeros in the pivot column exercise every swap.
template <int K>
void check_unrolled_is_looped(unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> small(-2, 2);
  std::uniform_real_distribution<Real> u(-1, 1);
  for (int trial = 0; trial < 200; ++trial) {
    Mat<K, K> a;
    for (int r = 0; r < K; ++r)
      for (int c = 0; c < K; ++c) a(r, c) = trial % 2 ? Real(small(gen)) : u(gen);
    DenseLU<K> looped, unrolled;
    looped.lu = a, unrolled.lu = a;
    const bool ok = looped.factor_looped();
    ASSERT_EQ(unrolled.factor_unrolled(), ok) << "K = " << K << ", trial " << trial;
    if (!ok) continue;
    for (int c = 0; c < K; ++c) {
      EXPECT_EQ(unrolled.perm[c], looped.perm[c]);
      EXPECT_EQ(unrolled.inverse_pivot[c], looped.inverse_pivot[c]);
    }
    EXPECT_TRUE(unrolled.lu == looped.lu) << "K = " << K << ", trial " << trial;
  }
}

TEST(DenseLU, UnrolledFactorsAreTheLoopedOnesToTheBit) {
  check_unrolled_is_looped<2>(11);
  check_unrolled_is_looped<3>(12);
  check_unrolled_is_looped<kRegisterLU>(13);
  check_unrolled_is_looped<8>(14);
}

// DenseMatrix in lanes (up to kLanesLU rows): every lane gets what the
// one-trajectory solve gives its matrix, outcome included, to roundoff (the
// compiler fuses multiply-adds differently in the two), each lane with its
// own pivots: through ties, zeros in the pivot column, a singular matrix
// beside regular ones and a leading entry of 1e-18, where another lane's
// pivot order would be wrong by 1e2.
template <int K>
void check_lanes_are_one_trajectory_solves(unsigned seed) {
  constexpr int W = 4;
  using L = Lanes<W>;
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> small(-2, 2);
  std::uniform_real_distribution<Real> u(-1, 1);
  int refused = 0, swapped = 0;
  for (int trial = 0; trial < 100; ++trial) {
    DenseMatrix<K, L> m;
    Vec<K, L> b;
    std::array<DenseMatrix<K>, W> one;
    std::array<Vec<K>, W> one_b;
    for (int l = 0; l < W; ++l) {
      for (int r = 0; r < K; ++r) {
        one_b[l][r] = u(gen);
        for (int c = 0; c < K; ++c) one[l].a(r, c) = (trial + l) % 2 ? Real(small(gen)) : u(gen);
      }
      if (l == 1 && trial % 5 == 0) one[l].a.row(K - 1) = 2 * one[l].a.row(0);  // singular
      if (l == 2 && trial % 3 == 0) one[l].a(0, 0) = 1e-18;                       // pivots, or is wrong
      for (int r = 0; r < K; ++r) {
        b[r].v[l] = one_b[l][r];
        for (int c = 0; c < K; ++c) m.a(r, c).v[l] = one[l].a(r, c);
      }
    }
    Vec<K, L> x;
    const LaneMask<W> solved = m.solve(b, x);
    for (int l = 0; l < W; ++l) {
      Vec<K> want;
      const bool ok = one[l].solve(one_b[l], want);
      ASSERT_EQ(solved.m[l] != 0, ok) << "K = " << K << ", trial " << trial << ", lane " << l;
      refused += !ok;
      DenseLU<K> f;
      swapped += f.factor(one[l].a) && f.perm[0] != 0;
      if (!ok) continue;
      const Eigen::PartialPivLU<Eigen::MatrixXd> ref{Eigen::MatrixXd(one[l].a)};
      const Real cond = ref.rcond() > 0 ? 1 / ref.rcond() : 1e16;
      for (int r = 0; r < K; ++r)
        EXPECT_NEAR(x[r].v[l], want[r], 1e-15 * cond * (1 + max_abs(want)))
            << "K = " << K << ", trial " << trial << ", lane " << l;
    }
  }
  EXPECT_GT(refused, 0) << "K = " << K;  // the cases the test is meant to see
  EXPECT_GT(swapped, 0) << "K = " << K;
}

TEST(DenseMatrix, SolvesInLanesAsOneTrajectoryEach) {
  check_lanes_are_one_trajectory_solves<2>(21);
  check_lanes_are_one_trajectory_solves<3>(22);
  check_lanes_are_one_trajectory_solves<kRegisterLU + 1>(23);  // one trajectory's rows swap by index there
  check_lanes_are_one_trajectory_solves<kLanesLU>(24);
  static_assert(DenseMatrix<kLanesLU>::solves_in_lanes && !DenseMatrix<kLanesLU + 1>::solves_in_lanes);
}

// ComplexLU against Eigen's LU of the real form of the same system,
// [[Re A, -Im A], [Im A, Re A]] (x_re; x_im) = (b_re; b_im), and a singular
// one refused. (Dynamic size: one Eigen instantiation for every K.)
template <int K>
void check_complex(unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<Real> u(-1, 1);
  for (int trial = 0; trial < 20; ++trial) {
    Mat<K, K> re, im;
    Vec<K> br, bi;
    for (int r = 0; r < K; ++r) {
      br[r] = u(gen), bi[r] = u(gen);
      for (int c = 0; c < K; ++c) re(r, c) = u(gen), im(r, c) = u(gen);
    }
    ComplexLU<K> lu;
    ASSERT_TRUE(lu.factor(re, im));
    Vec<K> xr, xi;
    ASSERT_TRUE(lu.solve(br, bi, xr, xi));
    Eigen::MatrixXd a(2 * K, 2 * K);
    a << re, -im, im, re;
    Eigen::VectorXd b(2 * K);
    b << br, bi;
    const Eigen::PartialPivLU<Eigen::MatrixXd> ref(a);
    const Eigen::VectorXd x = ref.solve(b);
    const Real cond = ref.rcond() > 0 ? 1 / ref.rcond() : 1e16;
    const Real tolerance = 1e-14 * cond * (1 + x.cwiseAbs().maxCoeff());
    for (int r = 0; r < K; ++r) {
      EXPECT_LT(std::abs(xr[r] - x[r]), tolerance) << "K = " << K;
      EXPECT_LT(std::abs(xi[r] - x[K + r]), tolerance) << "K = " << K;
    }
  }
}

TEST(ComplexLU, AgreesWithEigenPartialPivLU) {
  check_complex<1>(6);
  check_complex<6>(7);
  check_complex<10>(8);
  Mat<2, 2> re, im;
  re << 1, 2, 2, 4;
  im << 1, 1, 2, 2;  // row 2 = 2 x row 1
  ComplexLU<2> lu;
  EXPECT_FALSE(lu.factor(re, im));
}

}  // namespace
}  // namespace tether

// Unit tests of the mechanical systems (derivatives, constraint Jacobians,
// Gram matrices, masses, sampling, symmetries) and of the small solvers.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "registry/parameter_io.hpp"
#include "tether/core/random.hpp"
#include "tether/core/small_solve.hpp"
#include "tether/systems/chain.hpp"
#include "tether/systems/double_pendulum.hpp"
#include "tether/systems/spherical_pendulum.hpp"

namespace tether {
namespace {

constexpr Real eps = std::numeric_limits<Real>::epsilon();
constexpr Real pi = 3.14159265358979323846;

// Butane-like chain with every term switched on and nothing at its default
// value, so a wrong factor of mass, length or stiffness cannot cancel out.
ChainParameters test_chain_parameters() {
  ChainParameters p;
  p.mass = 1.3;
  p.bond_length = 0.9;
  p.bend_stiffness = 20.0;
  p.bend_angle = 1.95;
  const Real rb[6] = {1.116, 1.462, -1.578, -0.368, 3.156, -3.788};  // sums to zero
  for (int n = 0; n < 6; ++n) p.torsion[n] = rb[n];
  p.has_torsion = true;
  return p;
}

// Per system: a non-default instance and its length scale.
template <class S>
struct SystemSetup;

template <>
struct SystemSetup<SphericalPendulum> {
  static SphericalPendulum make() {
    SphericalPendulum s;
    s.prm.mass = 1.7;
    s.prm.length = 1.3;
    s.prm.gravity = 9.81;
    return s;
  }
  static Real length(const SphericalPendulum& s) { return s.prm.length; }
};

template <>
struct SystemSetup<DoublePendulum> {
  static DoublePendulum make() {
    DoublePendulum s;
    s.prm.mass1 = 1.4;
    s.prm.mass2 = 0.6;
    s.prm.length1 = 1.2;
    s.prm.length2 = 0.7;
    s.prm.gravity = 9.81;
    return s;
  }
  static Real length(const DoublePendulum& s) { return s.prm.length1 + s.prm.length2; }
};

template <int N>
struct SystemSetup<Chain<N>> {
  static Chain<N> make() {
    Chain<N> s;
    s.prm = test_chain_parameters();
    return s;
  }
  static Real length(const Chain<N>& s) { return s.prm.bond_length; }
};

template <int N>
Vec<N> normal_vec(CounterRng& rng) {
  Vec<N> v;
  for (int i = 0; i < N; ++i) v[i] = rng.normal();
  return v;
}

template <int K>
Mat<K, K> to_dense(const DenseMatrix<K>& m) {
  return m.a;
}

template <int K>
Mat<K, K> to_dense(const TridiagonalMatrix<K>& m) {
  Mat<K, K> d = Mat<K, K>::Zero();
  for (int i = 0; i < K; ++i) {
    d(i, i) = m.diag[i];
    if (i > 0) d(i, i - 1) = m.lower[i];
    if (i + 1 < K) d(i, i + 1) = m.upper[i];
  }
  return d;
}

template <class S>
class SystemTest : public ::testing::Test {
 protected:
  static constexpr int D = S::dof;
  static constexpr int K = S::constraint_count;
  static constexpr int points = 8;

  S sys = SystemSetup<S>::make();
  Real L = SystemSetup<S>::length(sys);
  CounterRng rng{20240917, 7};

  // On the manifold, then pushed off it in a random direction: generic, so
  // that no term vanishes by symmetry.
  Vec<D> generic_point() { return sys.random_configuration(rng) + 0.05 * L * normal_vec<D>(rng); }
};

using Systems = ::testing::Types<SphericalPendulum, DoublePendulum, Chain<4>, Chain<8>, Chain<16>>;

class SystemNames {
 public:
  template <class S>
  static std::string GetName(int) {
    if constexpr (std::is_same_v<S, SphericalPendulum>) return "SphericalPendulum";
    else if constexpr (std::is_same_v<S, DoublePendulum>) return "DoublePendulum";
    else return "Chain" + std::to_string(S::beads);
  }
};

TYPED_TEST_SUITE(SystemTest, Systems, SystemNames);

TYPED_TEST(SystemTest, PotentialGradientMatchesCentralDifferences) {
  constexpr int D = TestFixture::D;
  // Fourth-order central stencil: truncation ~h^4 and roundoff ~eps V / h are
  // both far below 1e-7 even where a bond angle is far from theta0.
  const Real h = 1e-4 * this->L;
  const auto v = [&](const Vec<D>& q, int i, Real t) {
    Vec<D> x = q;
    x[i] += t;
    return this->sys.potential(x);
  };
  for (int k = 0; k < TestFixture::points; ++k) {
    const Vec<D> q = this->generic_point();
    const Vec<D> grad = this->sys.potential_gradient(q);
    Vec<D> fd;
    for (int i = 0; i < D; ++i)
      fd[i] = (8 * (v(q, i, h) - v(q, i, -h)) - (v(q, i, 2 * h) - v(q, i, -2 * h))) / (12 * h);
    ASSERT_TRUE(all_finite(grad));
    EXPECT_LE(max_abs<D>(fd - grad), 1e-7 * max_abs<D>(grad)) << "point " << k;
  }
}

TYPED_TEST(SystemTest, ConstraintJacobianMatchesDirectionalDifference) {
  constexpr int D = TestFixture::D, K = TestFixture::K;
  const Real h = 1e-4 * this->L;
  for (int k = 0; k < TestFixture::points; ++k) {
    const Vec<D> q = this->generic_point();
    const Vec<D> v = normal_vec<D>(this->rng);
    const Vec<K> gv = this->sys.constraint_jacobian_times(q, v);
    // g is quadratic in q, so the central difference is exact up to roundoff.
    const Vec<K> fd = (this->sys.constraints(q + h * v) - this->sys.constraints(q - h * v)) / (2 * h);
    EXPECT_LE(max_abs<K>(fd - gv), 1e-9 * q.norm() * v.norm() / this->L) << "point " << k;
  }
}

TYPED_TEST(SystemTest, ConstraintTransposeIsAdjointOfJacobian) {
  constexpr int D = TestFixture::D, K = TestFixture::K;
  for (int k = 0; k < TestFixture::points; ++k) {
    const Vec<D> q = this->generic_point();
    const Vec<D> v = normal_vec<D>(this->rng);
    const Vec<K> l = normal_vec<K>(this->rng);
    const Vec<D> gtl = this->sys.constraint_transpose_times(q, l);
    const Vec<K> gv = this->sys.constraint_jacobian_times(q, v);
    const Real lhs = v.dot(gtl), rhs = gv.dot(l);
    EXPECT_NEAR(lhs, rhs, 64 * eps * (v.norm() * gtl.norm() + gv.norm() * l.norm())) << "point " << k;
  }
}

TYPED_TEST(SystemTest, GramMatchesAssembledMatrixAndSolves) {
  constexpr int D = TestFixture::D, K = TestFixture::K;
  for (int k = 0; k < TestFixture::points; ++k) {
    const Vec<D> qa = this->generic_point();
    // qb one "step" away from qa (the case the methods use), and qb == qa.
    for (const Real step : {0.02, 0.0}) {
      const Vec<D> qb = qa + step * this->L * normal_vec<D>(this->rng);
      Mat<K, K> dense;
      for (int j = 0; j < K; ++j) {
        const Vec<K> e = Vec<K>::Unit(j);
        dense.col(j) = this->sys.constraint_jacobian_times(
            qa, this->sys.inverse_mass_times(this->sys.constraint_transpose_times(qb, e)));
      }
      const auto gram = this->sys.gram(qa, qb);
      const Real scale = dense.cwiseAbs().maxCoeff();
      EXPECT_LE((to_dense(gram) - dense).cwiseAbs().maxCoeff(), 16 * eps * scale)
          << "point " << k << " step " << step;

      const Vec<K> rhs = normal_vec<K>(this->rng);
      Vec<K> x;
      ASSERT_TRUE(gram.solve(rhs, x)) << "point " << k << " step " << step;
      const Vec<K> ref = dense.fullPivLu().solve(rhs);
      EXPECT_LE((x - ref).norm(), 1e-11 * ref.norm()) << "point " << k << " step " << step;
    }
  }
}

TYPED_TEST(SystemTest, MassOperatorsAreConsistent) {
  constexpr int D = TestFixture::D;
  for (int k = 0; k < TestFixture::points; ++k) {
    const Vec<D> v = normal_vec<D>(this->rng);
    const Real tol = 4 * eps * v.norm();
    EXPECT_LE((this->sys.inverse_mass_times(this->sys.mass_times(v)) - v).norm(), tol);
    EXPECT_LE((this->sys.mass_times(this->sys.inverse_mass_times(v)) - v).norm(), tol);
    const Vec<D> mv = this->sys.mass_times(v);
    EXPECT_LE((this->sys.sqrt_mass_times(this->sys.sqrt_mass_times(v)) - mv).norm(), 4 * eps * mv.norm());
    EXPECT_GT(v.dot(mv), 0);  // M is positive definite
  }
}

TYPED_TEST(SystemTest, RandomConfigurationLiesOnManifold) {
  constexpr int K = TestFixture::K;
  for (int k = 0; k < 200; ++k) {
    const auto q = this->sys.random_configuration(this->rng);
    EXPECT_LT(max_abs<K>(this->sys.constraints(q)), 1e-13 * this->L) << "draw " << k;
  }
}

TYPED_TEST(SystemTest, RandomConfigurationIsPureFunctionOfRngState) {
  CounterRng a(11, 3), b(11, 3), c(11, 4);
  const auto qa = this->sys.random_configuration(a), qb = this->sys.random_configuration(b);
  const auto qc = this->sys.random_configuration(c);
  EXPECT_EQ(qa, qb);
  EXPECT_NE(qa, qc);
}

TYPED_TEST(SystemTest, EnergyScaleIsPositive) {
  const TypeParam defaults{};
  EXPECT_GT(defaults.energy_scale(), 0);
  EXPECT_GT(this->sys.energy_scale(), 0);
}

// ---------------------------------------------------------------------------
// Spherical pendulum specifics.

TEST(SphericalPendulum, VerticalAngularMomentumIsZComponentOfQCrossP) {
  CounterRng rng(5, 1);
  for (int k = 0; k < 16; ++k) {
    const Vec3 q = normal_vec<3>(rng), p = normal_vec<3>(rng);
    EXPECT_NEAR(SphericalPendulum::vertical_angular_momentum(q, p), q.cross(p)[2], 4 * eps * q.norm() * p.norm());
  }
  EXPECT_EQ(SphericalPendulum::vertical_angular_momentum(Vec3(1, 0, 0), Vec3(0, 2, 0)), 2);
  EXPECT_EQ(SphericalPendulum::vertical_angular_momentum(Vec3(0, 1, 0), Vec3(3, 0, 0)), -3);
}

// The first integral exists because V and g are invariant under rotations
// about z; the constraint forces G^T lambda are radial (zero torque about z).
TEST(SphericalPendulum, SymmetryBehindVerticalAngularMomentum) {
  const SphericalPendulum sys = SystemSetup<SphericalPendulum>::make();
  CounterRng rng(5, 2);
  for (int k = 0; k < 16; ++k) {
    const Vec3 q = sys.random_configuration(rng) + 0.1 * normal_vec<3>(rng);
    const Mat<3, 3> rz = Eigen::AngleAxisd(6.28 * rng.uniform(), Vec3::UnitZ()).toRotationMatrix();
    const Vec3 p = normal_vec<3>(rng);
    EXPECT_NEAR(sys.potential(rz * q), sys.potential(q), 8 * eps * sys.energy_scale());
    EXPECT_NEAR(sys.constraints(rz * q)[0], sys.constraints(q)[0], 8 * eps * sys.prm.length);
    EXPECT_NEAR(SphericalPendulum::vertical_angular_momentum(rz * q, rz * p),
                SphericalPendulum::vertical_angular_momentum(q, p), 8 * eps * q.norm() * p.norm());
    const Vec3 f = sys.constraint_transpose_times(q, Vec<1>(rng.normal()));
    EXPECT_NEAR(SphericalPendulum::vertical_angular_momentum(q, f), 0, 8 * eps * q.norm() * f.norm());
    EXPECT_EQ(SphericalPendulum::vertical_angular_momentum(q, sys.potential_gradient(q)), 0);
  }
}

// ---------------------------------------------------------------------------
// Chain specifics.

template <class C>
class ChainTest : public ::testing::Test {
 protected:
  static constexpr int N = C::beads;
  using Q = typename C::Q;
  C sys = SystemSetup<C>::make();
  CounterRng rng{777, 3};

  Q generic_point() { return sys.random_configuration(rng) + 0.05 * sys.prm.bond_length * normal_vec<C::dof>(rng); }

  // Planar trans zig-zag with every bond at length b and every bond angle at
  // theta0: all bend terms vanish and every dihedral is trans (phi = pi).
  Q zigzag() const {
    const Real b = sys.prm.bond_length, alpha = (pi - sys.prm.bend_angle) / 2;
    Q q = Q::Zero();
    for (int i = 0; i + 1 < N; ++i) {
      const Vec3 d = b * Vec3(std::cos(alpha), (i % 2 == 0 ? 1 : -1) * std::sin(alpha), 0);
      C::add_bead(q, i + 1, C::bead(q, i) + d);
    }
    return q;
  }

  static Q rigid_motion(const Q& q, const Mat<3, 3>& r, const Vec3& t) {
    Q out;
    for (int i = 0; i < N; ++i) {
      const Vec3 x = r * C::bead(q, i) + t;
      for (int c = 0; c < 3; ++c) out[3 * i + c] = x[c];
    }
    return out;
  }

  Mat<3, 3> random_rotation() {
    Eigen::Quaterniond u(rng.normal(), rng.normal(), rng.normal(), rng.normal());
    return u.normalized().toRotationMatrix();
  }
};

using Chains = ::testing::Types<Chain<4>, Chain<8>, Chain<16>>;

class ChainNames {
 public:
  template <class C>
  static std::string GetName(int) {
    return "Chain" + std::to_string(C::beads);
  }
};

TYPED_TEST_SUITE(ChainTest, Chains, ChainNames);

TYPED_TEST(ChainTest, PotentialInvariantUnderRigidMotion) {
  using C = TypeParam;
  constexpr int N = TestFixture::N;
  for (int k = 0; k < 8; ++k) {
    const auto q = this->generic_point();
    const Mat<3, 3> r = this->random_rotation();
    const Vec3 t = 3.0 * normal_vec<3>(this->rng);
    const auto qr = TestFixture::rigid_motion(q, r, t);
    const Real v = this->sys.potential(q);
    EXPECT_NEAR(this->sys.potential(qr), v, 1e-12 * this->sys.energy_scale()) << "point " << k;
    // The gradient is equivariant: grad V(Rq + t) = R grad V(q), bead by bead.
    const auto g = this->sys.potential_gradient(q), gr = this->sys.potential_gradient(qr);
    const Real gs = max_abs<C::dof>(g);
    for (int i = 0; i < N; ++i)
      EXPECT_LE((C::bead(gr, i) - r * C::bead(g, i)).cwiseAbs().maxCoeff(), 1e-11 * gs) << "bead " << i;
    EXPECT_LE(max_abs<N - 1>(this->sys.constraints(qr) - this->sys.constraints(q)), 1e-13 * q.norm());
  }
}

// Translation and rotation invariance imply that internal forces, the
// potential's and the constraints', have zero net force and zero net torque:
// that is why the chain conserves linear and angular momentum.
TYPED_TEST(ChainTest, InternalForcesHaveNoNetForceOrTorque) {
  using C = TypeParam;
  constexpr int N = TestFixture::N;
  for (int k = 0; k < 8; ++k) {
    const auto q = this->generic_point();
    const auto g = this->sys.potential_gradient(q);
    const Real gs = g.norm() * q.norm();
    EXPECT_LE(C::linear_momentum(g).norm(), 1e-12 * g.norm());
    EXPECT_LE(C::angular_momentum(q, g).norm(), 1e-12 * gs);
    const auto f = this->sys.constraint_transpose_times(q, normal_vec<N - 1>(this->rng));
    EXPECT_LE(C::linear_momentum(f).norm(), 1e-13 * f.norm());
    EXPECT_LE(C::angular_momentum(q, f).norm(), 1e-13 * f.norm() * q.norm());
  }
}

TYPED_TEST(ChainTest, MomentaAreBeadSums) {
  using C = TypeParam;
  constexpr int N = TestFixture::N;
  const auto q = this->generic_point();
  const auto p = normal_vec<C::dof>(this->rng);
  const Eigen::Map<const Mat<3, N>> qm(q.data()), pm(p.data());
  Vec3 ang = Vec3::Zero();
  for (int i = 0; i < N; ++i) ang += qm.col(i).cross(pm.col(i));
  EXPECT_LE((C::linear_momentum(p) - pm.rowwise().sum()).norm(), 1e-14 * p.norm());
  EXPECT_LE((C::angular_momentum(q, p) - ang).norm(), 1e-14 * p.norm() * q.norm());

  // Rigid motion v_i = u + w x r_i: P = m (N u + w x sum r_i).
  const Vec3 u = normal_vec<3>(this->rng), w = normal_vec<3>(this->rng);
  typename TestFixture::Q v;
  for (int i = 0; i < N; ++i) {
    const Vec3 vi = u + w.cross(C::bead(q, i));
    for (int c = 0; c < 3; ++c) v[3 * i + c] = vi[c];
  }
  const Vec3 expect = this->sys.prm.mass * (N * u + w.cross(qm.rowwise().sum()));
  EXPECT_LE((C::linear_momentum(this->sys.mass_times(v)) - expect).norm(), 1e-13 * expect.norm());
  // Rigid motion keeps the bond lengths: G v = 0.
  EXPECT_LE(max_abs<N - 1>(this->sys.constraint_jacobian_times(q, v)), 1e-13 * q.norm() * v.norm());
}

TYPED_TEST(ChainTest, TransZigZagIsTheMinimum) {
  using C = TypeParam;
  constexpr int N = TestFixture::N;
  const auto q = this->zigzag();
  const Real es = this->sys.energy_scale(), b = this->sys.prm.bond_length;
  EXPECT_LT(max_abs<N - 1>(this->sys.constraints(q)), 1e-14 * N * b);
  for (int i = 0; i + 1 < N - 1; ++i)
    EXPECT_NEAR(C::bend_cosine(C::bond(q, i), C::bond(q, i + 1)), std::cos(this->sys.prm.bend_angle), 1e-14);
  // The butane coefficients sum to zero, so V(trans) = 0 exactly, and the
  // zig-zag is a stationary point.
  EXPECT_NEAR(this->sys.potential(q), 0, 1e-13 * es);
  EXPECT_LE(max_abs<C::dof>(this->sys.potential_gradient(q)), 1e-12 * es / b);
  // Both terms are non-negative, so nothing nearby is lower.
  for (int k = 0; k < 32; ++k) {
    const typename C::Q qp = q + 0.05 * b * normal_vec<C::dof>(this->rng);  // not auto: an Eigen expression would dangle
    EXPECT_GT(this->sys.potential(qp), 0) << "perturbation " << k;
  }
}

// Twisting the zig-zag about one bond changes only that dihedral: V equals
// the Ryckaert-Bellemans series sum c_n cos^n(psi), psi = phi - pi.
TYPED_TEST(ChainTest, TorsionFollowsRyckaertBellemans) {
  using C = TypeParam;
  constexpr int N = TestFixture::N;
  const auto q0 = this->zigzag();
  const auto& c = this->sys.prm.torsion;
  const Vec3 origin = C::bead(q0, 2), axis = C::bond(q0, 1).normalized();
  Real vmin = 1e300, psi_at_min = 0;
  for (int s = -18; s <= 18; ++s) {
    const Real psi = pi * s / 18;
    const Mat<3, 3> r = Eigen::AngleAxisd(psi, axis).toRotationMatrix();
    auto q = q0;
    for (int i = 3; i < N; ++i) {
      const Vec3 x = origin + r * (C::bead(q0, i) - origin);
      for (int k = 0; k < 3; ++k) q[3 * i + k] = x[k];
    }
    Real expect = 0;
    for (int n = 0; n < 6; ++n) expect += c[n] * std::pow(std::cos(psi), n);
    EXPECT_NEAR(this->sys.potential(q), expect, 1e-12 * this->sys.energy_scale()) << "psi " << psi;
    if (expect < vmin) { vmin = expect; psi_at_min = psi; }
  }
  EXPECT_EQ(psi_at_min, 0);
  EXPECT_NEAR(vmin, 0, 1e-14);
  // The series itself is non-negative on cos psi in [-1, 1] with its zero at trans.
  for (int k = 0; k <= 200; ++k) {
    const Real cos_phi = -1 + k * 0.01;
    if (k == 0) EXPECT_NEAR(this->sys.torsion_energy(cos_phi), 0, 1e-14);
    else EXPECT_GT(this->sys.torsion_energy(cos_phi), 0) << "cos phi " << cos_phi;
  }
}

TYPED_TEST(ChainTest, GramIsTridiagonalWithZeroCorners) {
  const auto qa = this->generic_point(), qb = this->generic_point();
  const auto gram = this->sys.gram(qa, qb);
  // Row 0 has no sub-diagonal and the last row no super-diagonal.
  EXPECT_EQ(gram.lower[0], 0);
  EXPECT_EQ(gram.upper[TestFixture::N - 2], 0);
}

// ---------------------------------------------------------------------------
// Small solvers.

template <int K>
void check_dense_solve(std::uint64_t stream) {
  CounterRng rng(99, stream);
  for (int trial = 0; trial < 20; ++trial) {
    DenseMatrix<K> m;
    for (int i = 0; i < K; ++i)
      for (int j = 0; j < K; ++j) m.a(i, j) = rng.normal();
    if (trial % 2 == 0) m.a(0, 0) = 0;  // forces a row swap when K > 1
    const Vec<K> rhs = normal_vec<K>(rng);
    Vec<K> x;
    if (K == 1 && m.a(0, 0) == 0) continue;  // that is the singular case, tested below
    ASSERT_TRUE(m.solve(rhs, x)) << "K " << K << " trial " << trial;
    const Vec<K> ref = m.a.fullPivLu().solve(rhs);
    const Real cond = m.a.norm() * m.a.inverse().norm();  // Frobenius, an upper bound
    EXPECT_LE((x - ref).norm(), 1e-14 * cond * ref.norm()) << "K " << K << " trial " << trial;
    EXPECT_LE((m.a * x - rhs).norm(), 1e-13 * m.a.norm() * x.norm()) << "K " << K << " trial " << trial;
  }
}

TEST(DenseMatrix, SolveMatchesEigen) {
  check_dense_solve<1>(1);
  check_dense_solve<2>(2);
  check_dense_solve<5>(5);
}

TEST(DenseMatrix, SingularReturnsFalse) {
  Vec<1> x1;
  DenseMatrix<1> m1;
  m1.a(0, 0) = 0;
  EXPECT_FALSE(m1.solve(Vec<1>(1), x1));
  EXPECT_FALSE(m1.solve(Vec<1>(0), x1));  // 0/0

  DenseMatrix<2> m2;
  m2.a << 1, 2, 2, 4;
  Vec<2> x2;
  EXPECT_FALSE(m2.solve(Vec<2>(1, 1), x2));

  // Two equal rows stay equal through elimination, so one of them becomes an
  // exact zero row; a zero column is never a usable pivot.
  CounterRng rng(99, 6);
  DenseMatrix<5> m5;
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 5; ++j) m5.a(i, j) = rng.normal();
  Vec<5> x5;
  const Vec<5> rhs = normal_vec<5>(rng);
  ASSERT_TRUE(m5.solve(rhs, x5));
  DenseMatrix<5> dup = m5;
  dup.a.row(3) = dup.a.row(1);
  EXPECT_FALSE(dup.solve(rhs, x5));
  DenseMatrix<5> zc = m5;
  zc.a.col(2).setZero();
  EXPECT_FALSE(zc.solve(rhs, x5));
  DenseMatrix<5> nan = m5;
  nan.a(4, 4) = std::numeric_limits<Real>::quiet_NaN();
  EXPECT_FALSE(nan.solve(rhs, x5));
}

template <int K>
void check_tridiagonal_solve(std::uint64_t stream) {
  CounterRng rng(123, stream);
  for (int trial = 0; trial < 20; ++trial) {
    TridiagonalMatrix<K> m;
    for (int i = 0; i < K; ++i) {
      m.lower[i] = rng.normal();
      m.upper[i] = rng.normal();
      // Diagonally dominant (like the chain Gram), with mixed signs.
      m.diag[i] = (trial % 2 ? -1 : 1) * (std::abs(m.lower[i]) + std::abs(m.upper[i]) + 0.5 + rng.uniform());
    }
    // Entries outside the matrix must be ignored.
    m.lower[0] = std::numeric_limits<Real>::quiet_NaN();
    m.upper[K - 1] = std::numeric_limits<Real>::quiet_NaN();
    const Vec<K> rhs = normal_vec<K>(rng);
    Vec<K> x;
    ASSERT_TRUE(m.solve(rhs, x)) << "K " << K << " trial " << trial;
    const Mat<K, K> d = to_dense(m);
    const Vec<K> ref = d.fullPivLu().solve(rhs);
    EXPECT_LE((x - ref).norm(), 1e-13 * ref.norm()) << "K " << K << " trial " << trial;
  }
}

TEST(TridiagonalMatrix, SolveMatchesDenseEigen) {
  check_tridiagonal_solve<1>(1);
  check_tridiagonal_solve<3>(3);
  check_tridiagonal_solve<7>(7);
  check_tridiagonal_solve<15>(15);
}

TEST(TridiagonalMatrix, ZeroPivotReturnsFalse) {
  TridiagonalMatrix<3> m;
  m.lower << 0, 1, 1;
  m.diag << 0, 2, 2;
  m.upper << 1, 1, 0;
  Vec<3> x;
  EXPECT_FALSE(m.solve(Vec<3>(1, 1, 1), x));  // first pivot
  m.diag << 1, 1, 2;                          // second pivot 1 - 1*1 = 0
  EXPECT_FALSE(m.solve(Vec<3>(1, 1, 1), x));
  m.diag << 2, 2, 2;
  EXPECT_TRUE(m.solve(Vec<3>(1, 1, 1), x));
}

// Thermal configurations: the pendulum's height follows exp(-m g z / kT)
// on the sphere exactly; its mean is known in closed form.
TEST(ThermalConfiguration, SphericalPendulumHeightIsBoltzmann) {
  SphericalPendulum sys;
  sys.prm.mass = 1.3;
  sys.prm.length = 0.8;
  sys.prm.gravity = 9.81;
  const Real kT = 2.0, a = sys.prm.mass * sys.prm.gravity / kT, L = sys.prm.length;
  // s = z + L has density a e^{-a s} / (1 - e^{-2aL}) on [0, 2L].
  const Real mean_s = 1 / a - 2 * L / std::expm1(2 * a * L);
  const int n = 200000;
  Real sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    CounterRng rng(3, std::uint64_t(i));
    const Vec<3> q = sys.thermal_configuration(rng, kT);
    ASSERT_LT(std::abs(sys.constraints(q)[0]), 1e-14);
    sum += q[2] + L;
    sum2 += (q[2] + L) * (q[2] + L);
  }
  const Real m = sum / n, se = std::sqrt((sum2 / n - m * m) / n);
  EXPECT_NEAR(m, mean_s, 5 * se);
  // Far from uniform (mean L): the weight really is applied.
  EXPECT_LT(m, L - 20 * se);
  CounterRng cold(3, 0);
  EXPECT_NEAR(sys.thermal_configuration(cold, 0.0)[2], -L, 1e-15);  // kT = 0: hanging straight down
}

// Chain: bond-angle cosines follow the bending factor (a Gaussian in
// cos theta of variance kT / k, its truncation to [-1, 1] negligible here),
// dihedrals are uniform, and the chain is centred on N.
TEST(ThermalConfiguration, ChainBendAnglesAreBoltzmann) {
  Chain<8> sys;
  sys.prm.bend_stiffness = 60;
  sys.prm.bend_angle = 112 * 3.14159265358979323846 / 180;
  const Real kT = 1.5, c0 = std::cos(sys.prm.bend_angle);
  Real sum = 0, sum2 = 0;
  int n = 0;
  for (int t = 0; t < 20000; ++t) {
    CounterRng rng(9, std::uint64_t(t));
    const auto q = sys.thermal_configuration(rng, kT);
    ASSERT_LT(max_abs(sys.constraints(q)), 1e-13);
    Vec3 centre = Vec3::Zero();
    for (int i = 0; i < 8; ++i) centre += Chain<8>::bead(q, i);
    ASSERT_LT(centre.norm(), 1e-12);
    for (int i = 0; i + 1 < 7; ++i) {
      const Real c = Chain<8>::bend_cosine(Chain<8>::bond(q, i), Chain<8>::bond(q, i + 1));
      sum += c;
      sum2 += c * c;
      ++n;
    }
  }
  const Real m = sum / n, var = sum2 / n - m * m;
  EXPECT_NEAR(m, c0, 5 * std::sqrt(var / n));
  EXPECT_NEAR(var, kT / sys.prm.bend_stiffness, 0.05 * kT / sys.prm.bend_stiffness);
}

// The forces read cos(theta0) from the parameter rather than evaluating it:
// each way of setting the angle (its default, an assignment, a config) sets
// the cosine to what cos() gives, bit for bit, and the bending force vanishes
// at the rest angle that was set.
TEST(ChainParameters, TheBendAngleCarriesItsCosine) {
  const ChainParameters d;
  EXPECT_EQ(d.bend_angle.cosine, std::cos(d.bend_angle.radians));
  ChainParameters p;
  p.bend_angle = 1.95;
  EXPECT_EQ(p.bend_angle.radians, 1.95);
  EXPECT_EQ(p.bend_angle.cosine, std::cos(1.95));
  const auto c = configured<Chain<3>>(nlohmann::json{{"bend_angle_degrees", 112.0}}, "system.parameters");
  EXPECT_EQ(c.prm.bend_angle.radians, 112.0 * pi / 180);
  EXPECT_EQ(c.prm.bend_angle.cosine, std::cos(112.0 * pi / 180));
  // Three beads at the rest angle: no bending force (only the angle's cosine enters).
  Chain<3> sys = c;
  sys.prm.bend_angle = 2.0;
  Chain<3>::Q q = Chain<3>::Q::Zero();
  q.segment<3>(3) = Vec3(1, 0, 0);
  q.segment<3>(6) = Vec3(1 - std::cos(2.0), std::sin(2.0), 0);
  EXPECT_LT(sys.potential_gradient(q).norm(), 1e-14);
}

}  // namespace
}  // namespace tether

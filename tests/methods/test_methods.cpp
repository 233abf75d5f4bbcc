// Property tests of the five holonomic integrators (BMS24 §5.1-5.2):
// observed order, the constraint and hidden constraint, energy behaviour,
// first integrals, time reversibility, symplecticity on T*N, and the
// equivalence of SHAKE and RATTLE positions. Every expected value below is
// derived from the mathematics of the method, not read off its output.
#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "engine/initial_state.hpp"
#include "holonomic_cases.hpp"
#include "support.hpp"
#include "tether/ensemble/view.hpp"
#include "tether/methods/constrained_midpoint.hpp"
#include "tether/methods/rattle.hpp"
#include "tether/methods/shake.hpp"
#include "tether/methods/symplectic_euler_a.hpp"
#include "tether/methods/symplectic_euler_b.hpp"
#include "tether/systems/chain.hpp"
#include "tether/systems/double_pendulum.hpp"
#include "tether/systems/spherical_pendulum.hpp"
#include "order_fit.hpp"

namespace tether {

// Readable statuses in gtest failure messages (found by ADL).
static void PrintTo(Status s, std::ostream* os) { *os << status_name(s); }

namespace {

using test::integrate;
using test::chain_state;
using test::double_pendulum_state;
using test::make_chain;
using test::pendulum_state;
using test::put_on_manifold;
using Eigen::MatrixXd;
using Eigen::VectorXd;

constexpr Real kPi = 3.14159265358979323846;

// ---------------------------------------------------------------------------
// What the paper says about each method, written down independently of the
// headers' own constants.
template <class M>
struct Expected;
template <>
struct Expected<SymplecticEulerA> {  // BMS24 §5.1.1
  static constexpr int order = 1;
  static constexpr bool symmetric = false;
};
template <>
struct Expected<SymplecticEulerB> {  // BMS24 §5.1.2, eqs. (5.3)-(5.6)
  static constexpr int order = 1;
  static constexpr bool symmetric = false;
};
template <>
struct Expected<Shake> {  // BMS24 §5.1.2, the two-step form after (5.2)
  static constexpr int order = 2;
  static constexpr bool symmetric = true;
};
template <>
struct Expected<Rattle> {  // BMS24 eqs. (5.16)-(5.18)
  static constexpr int order = 2;
  static constexpr bool symmetric = true;
};
template <>
struct Expected<ConstrainedMidpoint> {  // BMS24 §5.1.3
  static constexpr int order = 2;
  static constexpr bool symmetric = true;
};

using AllMethods = ::testing::Types<SymplecticEulerA, SymplecticEulerB, Shake, Rattle, ConstrainedMidpoint>;
struct MethodName {
  template <class M>
  static std::string GetName(int) { return M::name; }
};

template <class M>
class MethodTest : public ::testing::Test {};
TYPED_TEST_SUITE(MethodTest, AllMethods, MethodName);

// ---------------------------------------------------------------------------
// Small helpers.

template <class S>
VectorXd pack(const PhaseState<S>& s) {
  VectorXd x(2 * S::dof);
  x << s.q, s.p;
  return x;
}
template <class S>
PhaseState<S> unpack(const VectorXd& x) {
  PhaseState<S> s;
  s.q = x.head<S::dof>();
  s.p = x.tail<S::dof>();
  s.q_prev = s.q;
  return s;
}

// One step of M; for SHAKE from (q, p) alone (start() builds q_{-1} from p).
template <class M, class S>
Status one_step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt = {}) {
  int it = 0;
  return M::step(sys, s, h, opt, it);
}

// For messages and recorded properties: std::to_string prints 0.000000 for 1e-12.
std::string sci(Real x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3e", x);
  return buf;
}

template <class S>
Real constraint_residual(const S& sys, const PhaseState<S>& s) {
  return max_abs(sys.constraints(s.q));
}
template <class S>
Real hidden_constraint_residual(const S& sys, const PhaseState<S>& s) {
  return max_abs(sys.constraint_jacobian_times(s.q, sys.inverse_mass_times(s.p)));
}

// ---------------------------------------------------------------------------
// 0. The headers declare the orders the paper proves.

TYPED_TEST(MethodTest, DeclaresThePapersOrder) {
  EXPECT_EQ(TypeParam::order, Expected<TypeParam>::order);
}

// ---------------------------------------------------------------------------
// 1. Observed order by step halving. With y_h = Phi_h^{T/h}(y0) = y(T) + C h^p
// + O(h^{p+1}), log2(|y_h - y_{h/2}| / |y_{h/2} - y_{h/4}|) -> p.
// Step halving alone only shows that the method converges to *something*
// (a method with, say, half the force would pass), so the finest solution is
// also compared with an independent reference: the index-1 formulation
//   q' = M^-1 p,  p' = -grad V + G^T lambda,
//   (G M^-1 G^T) lambda = G M^-1 grad V - G(v) v   (d^2 g / dt^2 = 0, v = M^-1 p;
//   g is a homogeneous quadratic plus a constant, so v^T g'' v = G(v) v),
// integrated by classical RK4 at a step where its O(h^4) error is negligible.

template <class S>
VectorXd index1_rhs(const S& sys, const VectorXd& x) {
  constexpr int n = S::dof;
  const Vec<n> q = x.head<n>(), p = x.tail<n>(), v = sys.inverse_mass_times(p), f = sys.potential_gradient(q);
  const Vec<S::constraint_count> rhs =
      sys.constraint_jacobian_times(q, sys.inverse_mass_times(f)) - sys.constraint_jacobian_times(v, v);
  Vec<S::constraint_count> lambda;
  EXPECT_TRUE(sys.gram(q, q).solve(rhs, lambda));
  VectorXd dx(2 * n);
  dx << v, -f + sys.constraint_transpose_times(q, lambda);
  return dx;
}

template <class S>
VectorXd reference_solution(const S& sys, const PhaseState<S>& x0, Real T, long steps) {
  VectorXd x = pack(x0);
  const Real h = T / Real(steps);
  for (long i = 0; i < steps; ++i) {
    const VectorXd k1 = index1_rhs(sys, x), k2 = index1_rhs(sys, VectorXd(x + h / 2 * k1)),
                   k3 = index1_rhs(sys, VectorXd(x + h / 2 * k2)), k4 = index1_rhs(sys, VectorXd(x + h * k3));
    x += h / 6 * (k1 + 2 * k2 + 2 * k3 + k4);
  }
  return x;
}

template <class M, class S>
void expect_order(const S& sys, const PhaseState<S>& x0, Real T, long n0) {
  constexpr int levels = 6, p_expected = Expected<M>::order;
  std::vector<VectorXd> y;
  for (int l = 0; l < levels; ++l) {
    const long n = n0 << l;
    y.push_back(pack(integrate<M>(sys, x0, T / Real(n), n)));
  }
  std::vector<Real> differences;
  for (int l = 0; l + 1 < levels; ++l) differences.push_back((y[l] - y[l + 1]).norm());
  const std::vector<Real> p = test::observed_orders(differences);
  std::string all;
  for (Real o : p) all.append(" ").append(sci(o));
  SCOPED_TRACE(std::string(M::name) + " on " + S::name + ", observed orders:" + all);
  // The last two ratios (smallest steps) are in the asymptotic regime.
  for (std::size_t i = p.size() - 2; i < p.size(); ++i) EXPECT_NEAR(p[i], p_expected, 0.2);

  // Richardson: the error of y_h is ~ |y_h - y_{2h}| / (2^p - 1).
  const VectorXd& fine = y[levels - 1];
  const Real estimate = (fine - y[levels - 2]).norm() / ((1 << p_expected) - 1);
  const Real error = (fine - reference_solution(sys, x0, T, 8 * (n0 << (levels - 1)))).norm();
  EXPECT_LT(error, 1.25 * estimate) << "converges, but not to the reference solution";
  EXPECT_GT(error, 0.8 * estimate);
}

TYPED_TEST(MethodTest, OrderOnSphericalPendulum) {
  const SphericalPendulum sys;
  expect_order<TypeParam>(sys, pendulum_state(sys), 1.0, 20);
}

TYPED_TEST(MethodTest, OrderOnDoublePendulum) {
  const DoublePendulum sys;
  expect_order<TypeParam>(sys, double_pendulum_state(sys), 1.0, 20);
}

TYPED_TEST(MethodTest, OrderOnChain4WithBendAndTorsion) {
  const Chain<4> sys = make_chain<4>();
  expect_order<TypeParam>(sys, chain_state(sys), 1.0, 20);
}

// ---------------------------------------------------------------------------
// 2. g(q) = 0 and G(q) M^-1 p = 0 at every step (BMS24 eq. (5.18)): the
// position solve stops at |g| <= tol = 1e-13 and the momentum projection is
// a linear solve, so both stay at roundoff for as long as we integrate.

template <class M, class S>
void expect_on_manifold(const S& sys, PhaseState<S> s, Real h, long steps) {
  const NewtonOptions opt;
  M::start(sys, s, h);
  Real worst_g = 0, worst_v = 0;
  for (long n = 0; n < steps; ++n) {
    const Status st = one_step<M>(sys, s, h, opt);
    ASSERT_EQ(st, Status::ok) << M::name << " failed at step " << n;
    worst_g = std::max(worst_g, constraint_residual(sys, s));
    worst_v = std::max(worst_v, hidden_constraint_residual(sys, s));
  }
  EXPECT_LT(worst_g, 1e-12) << M::name << " on " << S::name;
  EXPECT_LT(worst_v, 1e-12) << M::name << " on " << S::name;
}

TYPED_TEST(MethodTest, StaysOnManifoldSphericalPendulum) {
  const SphericalPendulum sys;
  expect_on_manifold<TypeParam>(sys, pendulum_state(sys), 0.01, 100000);
}

TYPED_TEST(MethodTest, StaysOnManifoldChain8) {
  const Chain<8> sys = make_chain<8>();
  expect_on_manifold<TypeParam>(sys, chain_state(sys), 0.005, 100000);
}

// A step far smaller than the motion's time scale keeps the energy to
// roundoff: the one-step methods form M (q1 - q0)/h without differencing
// positions, which would lose eps |q| / (h |M^-1 p|) of the momentum (5e-7
// of the energy at h = 1e-12, all of the kinetic energy once h |M^-1 p| is
// below the spacing of doubles at q). SHAKE's two-step form keeps only
// positions and has that floor by construction: not tested here.
TYPED_TEST(MethodTest, TinyStepsKeepTheEnergy) {
  if constexpr (TypeParam::two_step) {
    GTEST_SKIP() << "SHAKE's velocities are differences of positions";
  } else {
    const SphericalPendulum sys;
    PhaseState<SphericalPendulum> s0;
    s0.q << 0.6, 0.48, -0.64;                       // on the unit sphere, no coordinate near 0
    s0.p << 0.8, -0.25, 0.5625;                     // tangent: q . p = 0
    s0.q_prev = s0.q;
    const Real e0 = total_energy(sys, s0.q, s0.p);  // K = 0.57, V = -6.3: the scale is |V|
    for (const Real h : {1e-12, 1e-16, 1e-150}) {  // the truncation error below roundoff, even at order 1
      PhaseState<SphericalPendulum> s = s0;
      TypeParam::start(sys, s, h);
      for (int n = 0; n < 1000; ++n) ASSERT_EQ(one_step<TypeParam>(sys, s, h), Status::ok) << "h " << h << " step " << n;
      // 1000 roundings of p by steps near its last bit (FMA or not): far below the 5.6e-7 of the differencing
      EXPECT_LT(std::abs(total_energy(sys, s.q, s.p) - e0), 1e-11 * std::abs(e0)) << TypeParam::name << " h " << h;
      // and the momentum moved by the forces alone (gravity and the rod's pull, under 30 per unit time)
      EXPECT_LT(max_abs(Vec<3>(s.p - s0.p)), 30 * 1000 * h + 1e-14) << TypeParam::name << " h " << h;
    }
  }
}

// ---------------------------------------------------------------------------
// 3. RATTLE's energy error on the spherical pendulum is O(h^2) and does not
// drift (symplectic, backward error analysis): the worst error over the last
// 1e5 of 1e6 steps is no larger than over the first 1e5.

// Max |H - H0| over each consecutive window of `window` steps.
template <class M, class S>
std::vector<Real> energy_error_windows(const S& sys, PhaseState<S> s, Real h, long steps, long window) {
  const Real h0 = total_energy(sys, s.q, s.p);
  std::vector<Real> out(std::size_t(steps / window), 0.0);
  M::start(sys, s, h);
  for (long n = 0; n < steps; ++n) {
    EXPECT_EQ(one_step<M>(sys, s, h), Status::ok);
    Real& w = out[std::size_t(n / window)];
    w = std::max(w, std::abs(total_energy(sys, s.q, s.p) - h0));
  }
  return out;
}

TEST(RattleEnergy, BoundedWithoutDriftOverMillionSteps) {
  const SphericalPendulum sys;
  const Real scale = sys.energy_scale();  // m g L
  const std::vector<Real> w = energy_error_windows<Rattle>(sys, pendulum_state(sys), 0.01, 1000000, 100000);
  const Real first = w.front(), last = w.back(), worst = *std::max_element(w.begin(), w.end());
  RecordProperty("first_window_max_rel", sci(first / scale));
  RecordProperty("last_window_max_rel", sci(last / scale));
  EXPECT_GT(first, 0.0);
  EXPECT_LE(last, 2 * first + 1e-12 * scale) << "energy error grows: first " << first << " last " << last;
  EXPECT_LT(worst, 1e-2 * scale);

  // O(h^2): halving the step divides the error bound by ~4.
  const std::vector<Real> w2 = energy_error_windows<Rattle>(sys, pendulum_state(sys), 0.005, 200000, 200000);
  const Real ratio = first / w2.front();
  EXPECT_GT(ratio, 3.0);
  EXPECT_LT(ratio, 5.0);
}

// ---------------------------------------------------------------------------
// 4. First integrals from symmetries (discrete Noether). The constraint
// forces G^T lambda are radial (pendulum) or along bonds (chain), and grad V
// is vertical (pendulum) or invariant under translations and rotations
// (chain), so in exact arithmetic these are conserved whatever the
// multipliers. What remains is roundoff, and its size is known: p1 is formed
// as M (q1 - q0) / h, so each component carries ~eps m |q| / h per step, and
// these add up as a random walk. The budget below is that estimate (summed
// over the dof components); any O(h^p) violation is orders of magnitude above.

Real roundoff_budget(long steps, int dof, Real mass, Real q_max, Real h) {
  const Real eps = std::numeric_limits<Real>::epsilon();
  return eps * std::sqrt(Real(steps)) * std::sqrt(Real(dof)) * mass * q_max / h;
}

TYPED_TEST(MethodTest, ConservesVerticalAngularMomentumOnSphericalPendulum) {
  const SphericalPendulum sys;
  const Real h = 0.01;
  const long steps = 100000;
  PhaseState<SphericalPendulum> s = pendulum_state(sys);
  const Real lz0 = SphericalPendulum::vertical_angular_momentum(s.q, s.p);
  ASSERT_GT(std::abs(lz0), 1.0);  // a genuinely rotating orbit
  TypeParam::start(sys, s, h);
  Real worst = 0;
  for (long n = 0; n < steps; ++n) {
    ASSERT_EQ(one_step<TypeParam>(sys, s, h), Status::ok);
    worst = std::max(worst, std::abs(SphericalPendulum::vertical_angular_momentum(s.q, s.p) - lz0));
  }
  // L_z = q_x p_y - q_y p_x with |q| = L: the budget is ~1e-11 (6e-12 |L_z|),
  // against ~1e-4 for an O(h^2) defect.
  const Real L = sys.prm.length;
  EXPECT_LT(worst, L * roundoff_budget(steps, 2, sys.prm.mass, L, h)) << TypeParam::name << ": " << sci(worst);
}

TEST(RattleMomenta, Chain8ConservesLinearAndAngularMomentum) {
  const Chain<8> sys = make_chain<8>();
  const Real h = 0.005;
  const long steps = 100000;
  PhaseState<Chain<8>> s = chain_state(sys);
  const Vec3 P0 = Chain<8>::linear_momentum(s.p), L0 = Chain<8>::angular_momentum(s.q, s.p);
  // The centre of mass is at rest (so |q| stays bounded); every bead's
  // momentum still changes, so P = 0 is a nontrivial balance of forces.
  ASSERT_GT(L0.norm(), 0.5);
  Real worst_p = 0, worst_l = 0, q_max = s.q.cwiseAbs().maxCoeff();
  for (long n = 0; n < steps; ++n) {
    ASSERT_EQ(one_step<Rattle>(sys, s, h), Status::ok);
    worst_p = std::max(worst_p, (Chain<8>::linear_momentum(s.p) - P0).norm());
    worst_l = std::max(worst_l, (Chain<8>::angular_momentum(s.q, s.p) - L0).norm());
    q_max = std::max(q_max, s.q.cwiseAbs().maxCoeff());
  }
  const Real budget = roundoff_budget(steps, Chain<8>::dof, sys.prm.mass, q_max, h);
  RecordProperty("linear_error", sci(worst_p));
  RecordProperty("angular_error", sci(worst_l));
  // ~1.4e-10 with q_max ~ 2.5 (|p| ~ 2.2, |L0| ~ 0.7), against O(h^2) ~ 1e-5.
  EXPECT_LT(worst_p, budget) << sci(worst_p);
  EXPECT_LT(worst_l, q_max * budget) << sci(worst_l);
}

// ---------------------------------------------------------------------------
// 5. Time reversibility: for a symmetric method Phi_{-h} = Phi_h^{-1}, so N
// steps with h then N with -h return to the start up to roundoff and the
// Newton tolerance. The non-symmetric Euler methods (Phi_{-h} = (Phi_h^*)^{-1}
// != Phi_h^{-1}) must not, which shows the check has teeth.

template <class M, class S>
Real reversal_error(const S& sys, const PhaseState<S>& x0, Real h, long steps) {
  const PhaseState<S> fwd = integrate<M>(sys, x0, h, steps);
  const PhaseState<S> back = integrate<M>(sys, fwd, -h, steps);
  return (pack(back) - pack(x0)).cwiseAbs().maxCoeff() / pack(x0).cwiseAbs().maxCoeff();
}

TYPED_TEST(MethodTest, TimeReversibility) {
  using M = TypeParam;
  const SphericalPendulum sp;
  const DoublePendulum dp;
  // A low-energy double pendulum: regular, so roundoff is not amplified
  // exponentially on the way back.
  const Real e_sp = reversal_error<M>(sp, pendulum_state(sp), 0.01, 1000);
  const Real e_dp = reversal_error<M>(dp, double_pendulum_state(dp, 0.3, 0.2, 0.1, -0.2), 0.01, 1000);
  if constexpr (Expected<M>::symmetric) {
    EXPECT_LT(e_sp, 1e-10) << M::name;
    EXPECT_LT(e_dp, 1e-10) << M::name;
  } else {
    // Each step back misses by O(h^2) (the method differs from its adjoint
    // at second order), accumulated over 1000 steps.
    EXPECT_GT(e_sp, 1e-4) << M::name;
    EXPECT_GT(e_dp, 1e-4) << M::name;
  }
}

// ---------------------------------------------------------------------------
// 6. Symplecticity on T*N. T*N = {F(x) = (g(q), G(q) M^-1 p) = 0} is a
// symplectic submanifold of (R^2n, J) (BMS24 §5.1, Leg(TN)). With xi_j a
// basis of ker DF(x) and the chart psi(u) = project(x + Xi u), B = D psi(0)
// spans T_x(T*N) and A = D(Phi o psi)(0) = D Phi B; Phi is symplectic on T*N
// iff A^T J A = B^T J B. Derivatives by central differences.

template <class S>
VectorXd manifold_equations(const S& sys, const VectorXd& x) {
  const PhaseState<S> s = unpack<S>(x);
  VectorXd f(2 * S::constraint_count);
  f << sys.constraints(s.q), sys.constraint_jacobian_times(s.q, sys.inverse_mass_times(s.p));
  return f;
}

// Orthonormal basis of ker DF(x): 2(n - k) columns. F is quadratic in x for
// every system here, so the central difference is exact up to roundoff.
template <class S>
MatrixXd tangent_basis(const S& sys, const VectorXd& x) {
  constexpr int n = S::dof, k = S::constraint_count;
  MatrixXd dF(2 * k, 2 * n);
  const Real eps = 1e-4;
  for (int j = 0; j < 2 * n; ++j) {
    VectorXd e = VectorXd::Zero(2 * n);
    e[j] = eps;
    dF.col(j) = (manifold_equations(sys, x + e) - manifold_equations(sys, x - e)) / (2 * eps);
  }
  Eigen::FullPivLU<MatrixXd> lu(dF);
  EXPECT_EQ(lu.rank(), 2 * k) << "constraints not independent at the base point";
  Eigen::JacobiSVD<MatrixXd> svd(dF, Eigen::ComputeFullV);
  return svd.matrixV().rightCols(2 * n - 2 * k);
}

MatrixXd canonical_j(int n) {
  MatrixXd J = MatrixXd::Zero(2 * n, 2 * n);
  J.topRightCorner(n, n).setIdentity();
  J.bottomLeftCorner(n, n) = -MatrixXd::Identity(n, n);
  return J;
}

// max |A^T J A - B^T J B| / max |B^T J B| for the one-step map `phi`.
template <class S, class Map>
Real symplecticity_defect(const S& sys, const PhaseState<S>& x0, Map phi) {
  constexpr int n = S::dof, k = S::constraint_count, d = 2 * (n - k);
  const VectorXd x = pack(x0);
  const MatrixXd xi = tangent_basis(sys, x);
  const NewtonOptions opt;
  auto chart = [&](const VectorXd& u) {
    PhaseState<S> s = unpack<S>(x + xi * u);
    EXPECT_EQ(project_onto_manifold(sys, opt, s), Status::ok);
    return s;
  };
  const Real eps = 1e-6;
  MatrixXd A(2 * n, d), B(2 * n, d);
  for (int j = 0; j < d; ++j) {
    VectorXd u = VectorXd::Zero(d);
    u[j] = eps;
    const PhaseState<S> sp = chart(u), sm = chart(-u);
    B.col(j) = (pack(sp) - pack(sm)) / (2 * eps);
    A.col(j) = (pack(phi(sp)) - pack(phi(sm))) / (2 * eps);
  }
  const MatrixXd J = canonical_j(n);
  const MatrixXd wb = B.transpose() * J * B, wa = A.transpose() * J * A;
  return (wa - wb).cwiseAbs().maxCoeff() / wb.cwiseAbs().maxCoeff();
}

// The one-step map of M on T*N. SHAKE's map is start() (q_{-1} from p) then
// one step, so it is checked as a map of (q, p) too; its multi-step form is
// tied to RATTLE by the SHAKE == RATTLE test below.
template <class M, class S>
auto method_map(const S& sys, Real h) {
  return [&sys, h](PhaseState<S> s) {
    M::start(sys, s, h);
    EXPECT_EQ(one_step<M>(sys, s, h), Status::ok);
    return s;
  };
}

TYPED_TEST(MethodTest, SymplecticOnManifoldSphericalPendulum) {
  const SphericalPendulum sys;
  EXPECT_LT(symplecticity_defect(sys, pendulum_state(sys), method_map<TypeParam>(sys, 0.1)), 1e-7);
}

TYPED_TEST(MethodTest, SymplecticOnManifoldDoublePendulum) {
  const DoublePendulum sys;
  EXPECT_LT(symplecticity_defect(sys, double_pendulum_state(sys), method_map<TypeParam>(sys, 0.05)), 1e-7);
}

TYPED_TEST(MethodTest, SymplecticOnManifoldChain4) {
  const Chain<4> sys = make_chain<4>();
  EXPECT_LT(symplecticity_defect(sys, chain_state(sys), method_map<TypeParam>(sys, 0.05)), 1e-7);
}

// Negative controls: maps of T*N into itself that are not symplectic must
// fail the same check.
// (i) RATTLE followed by p <- 1.01 p (re-projected) scales omega by ~1.01.
template <class S>
Real scaled_rattle_defect(const S& sys, const PhaseState<S>& x0, Real h) {
  return symplecticity_defect(sys, x0, [&sys, h](PhaseState<S> s) {
    EXPECT_EQ(one_step<Rattle>(sys, s, h), Status::ok);
    s.p *= 1.01;
    EXPECT_EQ(project_momentum(sys, s.q, s.p), Status::ok);
    return s;
  });
}

// (ii) A plausible slip: RATTLE with the position constraint force along
// G(q_pred)^T instead of G(q0)^T (projecting along the normal at the
// predictor). Still consistent and on T*N, but no longer symplectic.
template <class S>
Real misdirected_rattle_defect(const S& sys, const PhaseState<S>& x0, Real h) {
  return symplecticity_defect(sys, x0, [&sys, h](PhaseState<S> s) {
    const Vec<S::dof> q_pred = s.q + h * sys.inverse_mass_times(s.p - Real(0.5) * h * sys.potential_gradient(s.q));
    Vec<S::dof> q1;
    int it = 0;
    EXPECT_EQ(solve_position_multipliers(sys, q_pred, q_pred, NewtonOptions{}, q1, it), Status::ok);
    Vec<S::dof> p1 = sys.mass_times(q1 - s.q) / h - Real(0.5) * h * sys.potential_gradient(q1);
    EXPECT_EQ(project_momentum(sys, q1, p1), Status::ok);
    s.q = q1;
    s.p = p1;
    return s;
  });
}

TEST(SymplecticityCheck, DetectsNonSymplecticMaps) {
  const SphericalPendulum sp;
  const DoublePendulum dp;
  const Chain<4> ch = make_chain<4>();
  EXPECT_GT(scaled_rattle_defect(sp, pendulum_state(sp), 0.1), 1e-3);
  EXPECT_GT(scaled_rattle_defect(dp, double_pendulum_state(dp), 0.05), 1e-3);
  EXPECT_GT(misdirected_rattle_defect(sp, pendulum_state(sp), 0.1), 1e-4);
  EXPECT_GT(misdirected_rattle_defect(dp, double_pendulum_state(dp), 0.05), 1e-4);
  EXPECT_GT(misdirected_rattle_defect(ch, chain_state(ch), 0.05), 1e-4);
}

// ---------------------------------------------------------------------------
// 7. SHAKE and RATTLE compute the same positions in exact arithmetic (seed
// 000 §5.1.2: eliminating p from (5.16)-(5.17) gives the two-step form with
// mu = lambda~^(0) + lambda^(1)). Over 1000 steps they agree to roundoff and
// Newton tolerance, far below the O(h^2) discretisation error that would
// separate two merely second-order methods.

TEST(ShakeRattle, SamePositionsOnDoublePendulum) {
  const DoublePendulum sys;
  const Real h = 0.005;
  // Moderate energy, regular motion: no exponential amplification of roundoff.
  const PhaseState<DoublePendulum> x0 = double_pendulum_state(sys, 0.6, -0.3, 0.4, 0.8);
  PhaseState<DoublePendulum> r = x0, s = x0;
  Shake::start(sys, s, h);
  Real worst = 0;
  for (int n = 0; n < 1000; ++n) {
    ASSERT_EQ(one_step<Rattle>(sys, r, h), Status::ok);
    ASSERT_EQ(one_step<Shake>(sys, s, h), Status::ok);
    worst = std::max(worst, max_abs(Vec<4>(r.q - s.q)));
  }
  EXPECT_LT(worst, 1e-9);
  // Both recover p_{n+1} from the same q_n, q_{n+1} by (5.17)-(5.18).
  EXPECT_LT(max_abs(Vec<4>(r.p - s.p)), 1e-9);
  // Scale of a genuine O(h^2) difference: RATTLE with h against h/2.
  const PhaseState<DoublePendulum> half = integrate<Rattle>(sys, x0, h / 2, 2000);
  EXPECT_GT(max_abs(Vec<4>(half.q - r.q)), 1e3 * 1e-9);
}

// ---------------------------------------------------------------------------
// A known limit of ConstrainedMidpoint's position stage, pinned down so a
// change to it is noticed. Near a collinear bead triple the Ryckaert-Bellemans
// torsion has a gradient ~ 1/sin(theta), and the stage iterates the midpoint
// force by plain fixed point, contracting only by ~ h^2/4 |M^-1 grad^2 V| per
// iteration: 50 iterations are not enough at h = 0.005. The failure
// must be reported with the state left as it was, never a silent bad step.
// RATTLE, explicit in the force, takes 2 Newton updates on the same state.
TEST(ConstrainedMidpointStage, NearCollinearBeadsFailLoudlyAndConvergeAtHalfTheStep) {
  const Chain<4> sys = make_chain<4>();
  // Bond angle at bead 1 of 180 - 0.57 degrees: bend energy ~4.4, within
  // reach of a chain at kT ~ 1.
  const auto x0 = chain_state(
      sys, [&](int i) { return i == 1 ? kPi - 0.01 : sys.prm.bend_angle; }, [](int) { return 2.0; });
  PhaseState<Chain<4>> r = x0, m = x0;
  EXPECT_EQ(one_step<Rattle>(sys, r, 0.005), Status::ok);
  EXPECT_EQ(one_step<ConstrainedMidpoint>(sys, m, 0.005), Status::newton_not_converged);
  EXPECT_EQ(m.q, x0.q);
  EXPECT_EQ(m.p, x0.p);
  // The contraction factor scales with h^2: half the step converges.
  EXPECT_EQ(one_step<ConstrainedMidpoint>(sys, m, 0.0025), Status::ok);
  EXPECT_LT(max_abs(sys.constraints(m.q)), 1e-12);
}


// ---------------------------------------------------------------------------
// First same as last: a loop that carries RATTLE's or SHAKE's end force
// (ForceCarry) evaluates grad V once per step instead of twice and gives the
// very same states, bit for bit; a failed step leaves state and carry as they
// were.

// Chain<8> that counts its force evaluations.
struct CountingChain : Chain<8> {
  int* evaluations = nullptr;
  Vec<dof> potential_gradient(const Vec<dof>& q) const {
    ++*evaluations;
    return Chain<8>::potential_gradient(q);
  }
};

template <class M>
void expect_carry_is_exact_and_saves_a_force() {
  int evaluations = 0;
  CountingChain sys;
  static_cast<Chain<8>&>(sys) = make_chain<8>();
  sys.evaluations = &evaluations;
  const Real h = 0.002;
  PhaseState<CountingChain> plain, carried;
  const auto x0 = chain_state(static_cast<const Chain<8>&>(sys));
  plain.q = carried.q = x0.q;
  plain.p = carried.p = x0.p;
  M::start(sys, plain, h);
  M::start(sys, carried, h);
  const int steps = 200;
  evaluations = 0;
  for (int n = 0; n < steps; ++n) ASSERT_EQ(one_step<M>(sys, plain, h), Status::ok);
  const int without = evaluations;
  evaluations = 0;
  ForceCarry<CountingChain> carry;
  for (int n = 0; n < steps; ++n) {
    int it = 0;
    ASSERT_EQ(M::step(sys, carried, h, NewtonOptions{}, it, &carry), Status::ok);
  }
  EXPECT_EQ(without, 2 * steps) << M::name;
  EXPECT_EQ(evaluations, steps + 1) << M::name;
  EXPECT_EQ(plain.q, carried.q) << M::name;  // bitwise
  EXPECT_EQ(plain.p, carried.p) << M::name;
  EXPECT_EQ(carry.force, sys.Chain<8>::potential_gradient(carried.q)) << M::name;

  // A step that cannot converge (no Newton iterations allowed) changes nothing.
  const PhaseState<CountingChain> before = carried;
  const Vec<CountingChain::dof> force = carry.force;
  int it = 0;
  EXPECT_EQ(M::step(sys, carried, h, NewtonOptions{1e-13, 0}, it, &carry), Status::newton_not_converged);
  EXPECT_EQ(carried.q, before.q);
  EXPECT_EQ(carried.p, before.p);
  EXPECT_EQ(carry.force, force);
}

TEST(ForceCarry, RattleCarriedIsExactAndSavesAForcePerStep) { expect_carry_is_exact_and_saves_a_force<Rattle>(); }
TEST(ForceCarry, ShakeCarriedIsExactAndSavesAForcePerStep) { expect_carry_is_exact_and_saves_a_force<Shake>(); }

}  // namespace
}  // namespace tether

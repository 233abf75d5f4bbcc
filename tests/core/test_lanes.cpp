// Step code in lanes (core/lanes.hpp): W trajectories stepped in lockstep
// must each get what the same step code gives it alone, and no lane may
// depend on its neighbours, converged, failing or fast.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "holonomic_cases.hpp"
#include "tether/core/dual.hpp"
#include "tether/core/lanes.hpp"
#include "tether/ensemble/advance.hpp"
#include "tether/methods/composition.hpp"
#include "tether/methods/constrained_midpoint.hpp"
#include "tether/methods/rattle.hpp"
#include "tether/methods/shake.hpp"
#include "tether/methods/symplectic_euler_a.hpp"
#include "tether/methods/symplectic_euler_b.hpp"
#include "tether/systems/chain.hpp"
#include "tether/systems/double_pendulum.hpp"
#include "tether/systems/four_bar.hpp"
#include "tether/systems/spherical_pendulum.hpp"

namespace tether {
namespace {

constexpr int W = 4;
using L = Lanes<W>;

TEST(Lanes, ArithmeticSelectAndMasksActLaneByLane) {
  L a, b;
  for (int l = 0; l < W; ++l) {
    a.v[l] = 1 + l;
    b.v[l] = 4 - 2 * l;
  }
  const L c = (a * b - 1) / 2 + sqrt(a * a);
  const LaneMask<W> less = a < b;
  const L pick = select(less, a, b);
  for (int l = 0; l < W; ++l) {
    EXPECT_EQ(c.v[l], ((1.0 + l) * (4 - 2 * l) - 1) / 2 + (1.0 + l));
    EXPECT_EQ(less.m[l] != 0, 1.0 + l < 4.0 - 2 * l);
    EXPECT_EQ(pick.v[l], std::min(1.0 + l, 4.0 - 2 * l));
  }
  EXPECT_TRUE(any(less));
  EXPECT_FALSE(none(less));
  EXPECT_TRUE(none(a < L(0.5)));
  Vec<2, L> v;
  v[0] = a;
  v[1] = b;
  v[1].v[2] = std::nan("");
  const LaneMask<W> finite = all_finite(v);
  const L m = max_abs(v);
  for (int l = 0; l < W; ++l) {
    EXPECT_EQ(finite.m[l] != 0, l != 2);
    if (l != 2) EXPECT_EQ(m.v[l], std::max(std::fabs(a.v[l]), std::fabs(b.v[l])));
  }
  EXPECT_TRUE(std::isnan(m.v[2])) << "max_abs propagates NaN per lane";
}

// assign_where: the lanes a mask selects take the value, the others keep
// theirs, also where the value is read from the vector assigned.
TEST(Lanes, AssignWhereTakesTheValueInSelectedLanesOnly) {
  Vec<3, L> x, value;
  LaneMask<W> m;
  for (int l = 0; l < W; ++l) {
    m.m[l] = l % 2 == 0 ? -1 : 0;
    for (int c = 0; c < 3; ++c) {
      x[c].v[l] = 10 * c + l;
      value[c].v[l] = -(10 * c + l) - 100;
    }
  }
  Vec<3, L> y = x;
  assign_where(m, y, value);
  for (int l = 0; l < W; ++l)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(y[c].v[l], l % 2 == 0 ? value[c].v[l] : x[c].v[l]) << c << ", lane " << l;
  assign_where(m, y, y + x);  // reads y before any coordinate of it is assigned
  for (int l = 0; l < W; ++l)
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(y[c].v[l], l % 2 == 0 ? value[c].v[l] + x[c].v[l] : x[c].v[l]) << c << ", lane " << l;
  Vec<3> r(1, 2, 3);
  assign_where(false, r, Vec<3>(4, 5, 6));
  EXPECT_EQ(r, Vec<3>(1, 2, 3));
  assign_where(true, r, Vec<3>(4, 5, 6));
  EXPECT_EQ(r, Vec<3>(4, 5, 6));
}

// max_abs and is_finite on Real (core/types.hpp) and lane by lane on
// special values: |-0| is 0, -inf counts as inf, a NaN wins over what came
// before it, an empty vector's largest |x| is 0.
TEST(Lanes, MaxAbsAndIsFiniteOnSpecialValuesAsOnReal) {
  const Real inf = std::numeric_limits<Real>::infinity(), nan = std::nan("");
  EXPECT_EQ(max_abs(Vec<3>(-0.0, -0.0, -0.0)), 0.0);
  EXPECT_FALSE(std::signbit(max_abs(Vec<3>(-0.0, -0.0, -0.0))));
  EXPECT_EQ(max_abs(Vec<3>(-3.0, 2.0, -0.0)), 3.0);
  EXPECT_EQ(max_abs(Vec<3>(1.0, -inf, 2.0)), inf);
  EXPECT_TRUE(std::isnan(max_abs(Vec<3>(1.0, 5.0, nan))));
  EXPECT_EQ(max_abs(Vec<0>()), 0.0);
  EXPECT_TRUE(is_finite(-0.0) && is_finite(1e308) && is_finite(-4.9e-324));
  EXPECT_FALSE(is_finite(inf) || is_finite(-inf) || is_finite(nan));
  // A NaN wins over what came before it and loses to what comes after (its
  // callers test finiteness first); lanes order it as Real does.
  EXPECT_EQ(max_abs(Vec<3>(1.0, nan, -0.5)), 0.5);
  const std::array<std::array<Vec<3>, W>, 2> groups = {
      {{Vec<3>(-0.0, -0.0, -0.0), Vec<3>(-3.0, 2.0, -0.0), Vec<3>(1.0, -inf, 2.0), Vec<3>(-7.0, 6.5, 0.25)},
       {Vec<3>(nan, 1.0, 2.0), Vec<3>(1.0, nan, -0.5), Vec<3>(-4.9e-324, 2.2e-308, -1e308), Vec<3>(3.0, 3.0, -nan)}}};
  for (const auto& rows : groups) {
    Vec<3, L> v;
    for (int l = 0; l < W; ++l)
      for (int c = 0; c < 3; ++c) v[c].v[l] = rows[l][c];
    const L m = max_abs(v);
    const LaneMask<W> finite = all_finite(v);
    for (int l = 0; l < W; ++l) {
      const Real want = max_abs(rows[l]);
      EXPECT_TRUE(m.v[l] == want || (std::isnan(m.v[l]) && std::isnan(want))) << "lane " << l << ": " << m.v[l];
      EXPECT_EQ(std::signbit(m.v[l]), std::signbit(want)) << "lane " << l;
      EXPECT_EQ(finite.m[l] != 0, all_finite(rows[l])) << "lane " << l;
    }
  }
  EXPECT_EQ(max_abs(Vec<0, L>()).v[0], 0.0);
}

// On the sphere at polar angle th (from the downward vertical) and azimuth
// ph, moving at speed w along e_phi and 0.5 along e_theta.
PhaseState<SphericalPendulum> pendulum(const SphericalPendulum& sys, Real th, Real ph, Real w) {
  PhaseState<SphericalPendulum> s;
  const Real L = sys.prm.length;
  s.q = L * Vec3(std::sin(th) * std::cos(ph), std::sin(th) * std::sin(ph), -std::cos(th));
  const Vec3 e_th(std::cos(th) * std::cos(ph), std::cos(th) * std::sin(ph), std::sin(th)), e_ph(-std::sin(ph), std::cos(ph), 0);
  s.p = sys.prm.mass * (0.5 * e_th + w * e_ph);
  test::put_on_manifold(sys, s);
  return s;
}

// Double pendula and four-bars whose lanes' configurations differ by up to a
// half turn, so that each lane pivots on its own in a dense Gram matrix.
std::array<PhaseState<DoublePendulum>, W> varied_double_pendula(const DoublePendulum& sys) {
  std::array<PhaseState<DoublePendulum>, W> x;
  for (int l = 0; l < W; ++l) x[l] = test::double_pendulum_state(sys, 0.4 + 0.8 * l, -0.4 + 1.1 * l, 0.5, -1.5 + l);
  return x;
}
std::array<PhaseState<FourBar>, W> varied_four_bars(const FourBar& sys) {
  std::array<PhaseState<FourBar>, W> x;
  for (int l = 0; l < W; ++l) {
    x[l].q = sys.configuration(0.3 + 1.6 * l);
    x[l].p = Vec<4>(0.7 - 0.3 * l, 1.1, -0.2 * l, 0.4);
    test::put_on_manifold(sys, x[l]);
  }
  return x;
}

template <class S>
PhaseState<S> get_lane(const PhaseState<S, L>& g, int l) {
  PhaseState<S> x;
  for (int c = 0; c < S::dof; ++c) {
    x.q[c] = g.q[c].v[l];
    x.p[c] = g.p[c].v[l];
    x.q_prev[c] = g.q_prev[c].v[l];
  }
  return x;
}

// Steps four states alone (Real) and together (lanes) by M, with the force
// carried in both where M carries one; returns the largest difference
// (and in `failures` how many steps failed, in how many lanes). With
// `resync` each step starts alone from the lane's state: where a convergence
// test reads a difference at roundoff (the midpoint rule's fixed-point
// change), the roundoff of another summation order, grown over many steps,
// can cost one iteration more.
template <class M = Rattle, class S>
Real lanes_against_alone(const S& sys, const std::array<PhaseState<S>, W>& x0, Real h, int steps,
                         const NewtonOptions& opt = {}, int* failures = nullptr, bool resync = false) {
  PhaseState<S, L> group;
  for (int l = 0; l < W; ++l) test::put_lane(group, l, x0[l]);
  group.q_prev = group.q;
  ForceCarry<S, L> carry;
  Real worst = 0;
  std::array<PhaseState<S>, W> alone = x0;
  if constexpr (M::two_step) {  // SHAKE's q_{-1}, from (q0, p0) in both
    M::start(sys, group, h);
    for (PhaseState<S>& a : alone) M::start(sys, a, h);
  }
  std::array<ForceCarry<S>, W> carries;
  for (int n = 0; n < steps; ++n) {
    LaneInt<L> it = uniform<LaneInt<L>>(0);
    const LaneStatus<L> st = test::step_with_carry<M>(sys, group, h, opt, it, carry);
    for (int l = 0; l < W; ++l) {
      int it1 = 0;
      const Status s1 = test::step_with_carry<M>(sys, alone[l], h, opt, it1, carries[l]);
      EXPECT_EQ(st.v[l], s1) << M::name << " lane " << l << " step " << n;
      if (failures && s1 != Status::ok) ++*failures;
      EXPECT_EQ(it.v[l], it1) << M::name << " lane " << l << " step " << n << ": Newton iterations";
      const PhaseState<S> y = get_lane(group, l);
      worst = std::max({worst, max_abs(Vec<S::dof>(y.q - alone[l].q)), max_abs(Vec<S::dof>(y.p - alone[l].p)),
                        max_abs(Vec<S::dof>(y.q_prev - alone[l].q_prev))});
      if (resync) alone[l] = y;
    }
  }
  return worst;
}

// The functions a declared system may call: each lane is the C library's
// value of that lane, and the dual numbers' derivatives are the functions'
// derivatives (against central differences).
TEST(Lanes, TheDeclaredFunctionsActLaneByLaneAndDifferentiate) {
  const Real x[W] = {0.3, -0.7, 0.05, 0.9}, y[W] = {1.1, 0.4, -2.0, 0.6};
  L a, b;
  for (int l = 0; l < W; ++l) a.v[l] = x[l], b.v[l] = y[l];
  using F = Real (*)(Real);
  const std::pair<L (*)(const L&), F> unary[] = {
      {&simd::sin<W>, &::sin},   {&simd::cos<W>, &::cos},   {&simd::tan<W>, &::tan},   {&simd::asin<W>, &::asin},
      {&simd::acos<W>, &::acos}, {&simd::atan<W>, &::atan}, {&simd::sinh<W>, &::sinh}, {&simd::cosh<W>, &::cosh},
      {&simd::tanh<W>, &::tanh}, {&simd::exp<W>, &::exp}};
  for (const auto& [lanes, scalar] : unary) {
    const L r = lanes(a);
    for (int l = 0; l < W; ++l) EXPECT_EQ(r.v[l], scalar(x[l]));
  }
  const L logs = simd::log(b * b), powers = simd::pow(b * b, a), angles = simd::atan2(a, b);
  for (int l = 0; l < W; ++l) {
    EXPECT_EQ(logs.v[l], std::log(y[l] * y[l]));
    EXPECT_EQ(powers.v[l], std::pow(y[l] * y[l], x[l]));
    EXPECT_EQ(angles.v[l], std::atan2(x[l], y[l]));
  }

  using D = ad::Dual<Real>;
  const auto check = [](const char* name, D (*f)(const D&), Real at) {
    const Real h = 1e-6, expected = (primal(f(D(at + h))) - primal(f(D(at - h)))) / (2 * h);
    EXPECT_NEAR(f(D(at, 1)).d, expected, 1e-8 * (1 + std::abs(expected))) << name << " at " << at;
  };
  for (const Real at : {0.3, -0.45}) {
    check("tan", [](const D& u) { return tan(u); }, at);
    check("asin", [](const D& u) { return asin(u); }, at);
    check("acos", [](const D& u) { return acos(u); }, at);
    check("atan", [](const D& u) { return atan(u); }, at);
    check("sinh", [](const D& u) { return sinh(u); }, at);
    check("cosh", [](const D& u) { return cosh(u); }, at);
    check("tanh", [](const D& u) { return tanh(u); }, at);
    check("exp", [](const D& u) { return exp(u); }, at);
    check("log", [](const D& u) { return log(u * u); }, at);
    check("pow(u, 2.5)", [](const D& u) { return pow(u * u, 2.5); }, at);
    check("pow(2.5, u)", [](const D& u) { return pow(2.5, u); }, at);
    check("pow(u, u)", [](const D& u) { return pow(u * u, u); }, at);
    check("atan2(u, 0.7)", [](const D& u) { return atan2(u, 0.7); }, at);
    check("atan2(0.7, u)", [](const D& u) { return atan2(0.7, u); }, at);
    check("atan2(u, u^2 + 1)", [](const D& u) { return atan2(u, u * u + 1.0); }, at);
  }
}

// Vector-mode dual numbers (ad::Dual<Real, PassDirections<count>>): a pass
// carries as many directions as the derivative has lanes, and each lane's
// derivative is what a pass of its own direction gives (ad::Dual<Real>),
// through every function and operator; more directions than lanes take
// several passes, the last one partly filled.
TEST(Lanes, ADualPerPassDirectionsDifferentiatesAsOnePassPerDirection) {
  constexpr int n = 2 * cpu_lanes + 1;  // three passes, the last with one direction
  const auto f = [](const auto (&x)[n]) {
    using T = std::remove_cvref_t<decltype(x[0])>;
    T s = pow(x[0] * x[0] + 1.0, x[1]) + atan2(x[n - 1], x[0] - 2.0) + pow(2.5, x[2]) + pow(x[1] * x[1], 1.5);
    for (int i = 0; i + 1 < n; ++i)
      s += sin(x[i]) * exp(x[i + 1]) / (1.0 + x[i] * x[i]) - cos(x[i + 1]) * sqrt(2.0 + x[i]) +
           tan(x[i]) * asin(0.5 * x[i + 1]) - acos(0.5 * x[i]) + atan(x[i + 1]) + sinh(x[i]) * cosh(x[i + 1]) -
           tanh(x[i]) + log(3.0 + x[i]) - x[i] / (x[i + 1] - 3.0);
    return s;
  };
  Real at[n];
  for (int i = 0; i < n; ++i) at[i] = 0.1 + 0.07 * i * (i % 2 ? -1 : 1);
  using Directions = PassDirections<n>;
  using V = ad::Dual<Real, Directions>;
  constexpr int per_pass = lane_count<Directions>;
  ASSERT_EQ(per_pass, cpu_lanes);
  int passes = 0;
  for (int first = 0; first < n; first += per_pass, ++passes) {
    V x[n];
    for (int c = 0; c < n; ++c) x[c] = V(at[c], unit_lane<Directions>(c - first));
    const V r = f(x);
    for (int l = 0; l < per_pass; ++l) {
      if (first + l >= n) {
        EXPECT_EQ(lane(r.d, l), 0) << "lane " << l << " past the last direction";
        continue;
      }
      using D = ad::Dual<Real>;
      D y[n];
      for (int c = 0; c < n; ++c) y[c] = D(at[c], c == first + l ? 1 : 0);
      const D one = f(y);
      EXPECT_NEAR(r.v, one.v, 4e-16 * std::abs(one.v));
      EXPECT_NEAR(lane(r.d, l), one.d, 4e-15 * (1 + std::abs(one.d))) << "direction " << first + l;
    }
  }
  EXPECT_EQ(passes, 3);
  // Fewer directions take the narrowest lanes that hold them; one takes a Real.
  static_assert(std::is_same_v<PassDirections<1>, Real>);
  static_assert(lane_count<PassDirections<3>> == (cpu_lanes < 4 ? cpu_lanes : 4));
  static_assert(lane_count<PassDirections<100>> == cpu_lanes);
}

TEST(LanesRattle, EachLaneOfAChainIsTheTrajectoryAlone) {
  const Chain<8> sys = test::make_chain<8>();
  std::array<PhaseState<Chain<8>>, W> x0;
  for (int l = 0; l < W; ++l)
    x0[l] = test::varied_chain_state(sys, l);
  // Same iterations and outcomes every step; states equal to roundoff
  // (Eigen may sum a Real dot product in another order than a lane's), grown
  // over 300 steps of a chaotic chain: ~2e-12 in p, whose entries are O(10).
  EXPECT_LT(lanes_against_alone(sys, x0, 0.002, 300), 1e-11);
}

TEST(LanesRattle, EachLaneOfASphericalPendulumIsTheTrajectoryAlone) {
  const SphericalPendulum sys;
  std::array<PhaseState<SphericalPendulum>, W> x0;
  for (int l = 0; l < W; ++l) x0[l] = pendulum(sys, 0.3 + 0.4 * l, 0.7 * l, 1.5 - 0.3 * l);
  EXPECT_LT(lanes_against_alone(sys, x0, 0.01, 500), 1e-12);
}

// Dense Gram matrices (DenseMatrix in lanes, core/small_solve.hpp): the
// double pendulum's 2 x 2 and the four-bar's 3 x 3, each lane pivoting on
// its own.
TEST(LanesRattle, EachLaneOfADoublePendulumAndAFourBarIsTheTrajectoryAlone) {
  const DoublePendulum pendula;
  const std::array<PhaseState<DoublePendulum>, W> d0 = varied_double_pendula(pendula);
  EXPECT_LT(lanes_against_alone(pendula, d0, 0.01, 500), 1e-11);
  const FourBar linkage;
  const std::array<PhaseState<FourBar>, W> f0 = varied_four_bars(linkage);
  EXPECT_LT(lanes_against_alone(linkage, f0, 0.005, 500), 1e-11);
}

// The constrained midpoint rule and symplectic Euler A and B are written
// for any scalar too (a chain's tile forms repeat them): in lanes that
// converge after different numbers of iterations, each step from the same
// state (resync).
TEST(LanesMethods, EachLaneIsTheTrajectoryAlone) {
  const Chain<8> chain = test::make_chain<8>();
  std::array<PhaseState<Chain<8>>, W> c0;
  for (int l = 0; l < W; ++l)
    c0[l] = test::varied_chain_state(chain, l);
  EXPECT_LT(lanes_against_alone<ConstrainedMidpoint>(chain, c0, 0.002, 200, {}, nullptr, true), 1e-13);
  EXPECT_LT(lanes_against_alone<SymplecticEulerA>(chain, c0, 0.002, 200, {}, nullptr, true), 1e-13);
  EXPECT_LT(lanes_against_alone<SymplecticEulerB>(chain, c0, 0.002, 200, {}, nullptr, true), 1e-13);
  const SphericalPendulum sys;
  std::array<PhaseState<SphericalPendulum>, W> x0;
  for (int l = 0; l < W; ++l) x0[l] = pendulum(sys, 0.3 + 0.4 * l, 0.7 * l, 1.5 - 0.3 * l);
  EXPECT_LT(lanes_against_alone<ConstrainedMidpoint>(sys, x0, 0.01, 300, {}, nullptr, true), 1e-14);
  // Newton cut short: the faster pendula fail, at other steps than their
  // neighbours.
  std::array<PhaseState<SphericalPendulum>, W> mixed;
  for (int l = 0; l < W; ++l) mixed[l] = pendulum(sys, 0.3 + 0.4 * l, 0.7 * l, 2.0 + 8.0 * l);
  int failures = 0;
  EXPECT_LT(lanes_against_alone<ConstrainedMidpoint>(sys, mixed, 0.05, 30, NewtonOptions{1e-13, 6}, &failures, true),
            1e-14);
  EXPECT_GT(failures, 30) << "the fastest lanes were meant to fail";  // 55 lane-steps here
  EXPECT_LT(failures, 30 * W);
}

// Fisher-Bingham with an anisotropic A, the lanes moving over different
// parts of the sphere: RATTLE and SHAKE. SHAKE's momentum is a difference of
// positions over h, so its roundoff grows faster than RATTLE's: lanes and
// alone differ by 1e-16 after one step, 7e-14 after 100 and 1.5e-11 after
// 500 (RATTLE: 3e-15 and 4e-14), with the same iterations every step.
TEST(LanesRattle, EachLaneOfAFisherBinghamIsTheTrajectoryAlone) {
  Mat<3, 3> a;
  a << 1.5, 0.8, -0.3, 0.8, -0.5, 0.4, -0.3, 0.4, 0;
  const FisherBingham sys = test::fisher_bingham(Vec3(0.2, -0.5, 1), 3, a);
  std::array<PhaseState<FisherBingham>, W> x0;
  for (int l = 0; l < W; ++l) {
    const Real th = 0.3 + 0.6 * l, ph = 0.9 * l;
    x0[l].q = Vec3(std::sin(th) * std::cos(ph), std::sin(th) * std::sin(ph), std::cos(th));
    x0[l].p = Vec3(1.0 - 0.4 * l, 0.5 * l, 0.7);
    test::put_on_manifold(sys, x0[l]);
  }
  EXPECT_LT(lanes_against_alone(sys, x0, 0.02, 500), 1e-12);
  EXPECT_LT(lanes_against_alone<Shake>(sys, x0, 0.02, 500), 1e-10);
}

// SHAKE carries q_{n-1} in lanes too (advance_lanes loads and stores it, and
// accept_step moves it lane by lane): the pendulum, and the dense Gram
// matrices of the double pendulum and the four-bar; then Newton cut short,
// where the faster pendula fail at other steps than their neighbours.
TEST(LanesShake, EachLaneIsTheTrajectoryAlone) {
  const SphericalPendulum sys;
  std::array<PhaseState<SphericalPendulum>, W> x0;
  for (int l = 0; l < W; ++l) x0[l] = pendulum(sys, 0.3 + 0.4 * l, 0.7 * l, 1.5 - 0.3 * l);
  EXPECT_LT(lanes_against_alone<Shake>(sys, x0, 0.01, 500), 1e-12);
  const DoublePendulum pendula;
  const std::array<PhaseState<DoublePendulum>, W> d0 = varied_double_pendula(pendula);
  EXPECT_LT(lanes_against_alone<Shake>(pendula, d0, 0.01, 500), 1e-11);
  const FourBar linkage;
  const std::array<PhaseState<FourBar>, W> f0 = varied_four_bars(linkage);
  EXPECT_LT(lanes_against_alone<Shake>(linkage, f0, 0.005, 500), 1e-11);
  std::array<PhaseState<SphericalPendulum>, W> mixed;
  for (int l = 0; l < W; ++l) mixed[l] = pendulum(sys, 0.3 + 0.4 * l, 0.7 * l, 2.0 + 8.0 * l);
  int failures = 0;
  EXPECT_LT(lanes_against_alone<Shake>(sys, mixed, 0.05, 30, NewtonOptions{1e-13, 6}, &failures, true), 1e-13);
  EXPECT_GT(failures, 0) << "the fastest lanes were meant to fail";
  EXPECT_LT(failures, 30 * W);
}

// A composition in lanes: each lane takes the substeps its trajectory takes
// alone, with the same iterations and outcome. Alone, a failed step leaves
// the state part-way (the ensemble loop replays it); in lanes the failed
// lane is put back to the step's start, bit for bit, and the other lanes go
// on. Returns the largest difference of the lanes that have not failed.
// `part_way` counts the failures after a good substep, whose lane the step
// had moved before putting it back.
template <class M, class S>
Real composition_lanes_against_alone(const M& method, const S& sys, const std::array<PhaseState<S>, W>& x0, Real h,
                                     int steps, const NewtonOptions& opt = {}, int* failures = nullptr,
                                     int* part_way = nullptr) {
  PhaseState<S, L> group;
  for (int l = 0; l < W; ++l) test::put_lane(group, l, x0[l]);
  group.q_prev = group.q;
  std::array<PhaseState<S>, W> alone = x0;
  bool failed[W] = {};
  Real worst = 0;
  for (int n = 0; n < steps; ++n) {
    const PhaseState<S, L> start = group;
    LaneInt<L> it = uniform<LaneInt<L>>(0);
    const LaneStatus<L> st = method.step(sys, group, h, opt, it);
    for (int l = 0; l < W; ++l) {
      if (failed[l]) continue;
      int it1 = 0;
      const Status s1 = method.step(sys, alone[l], h, opt, it1);
      EXPECT_EQ(st.v[l], s1) << "lane " << l << " step " << n;
      EXPECT_EQ(it.v[l], it1) << "lane " << l << " step " << n << ": Newton iterations";
      const PhaseState<S> y = get_lane(group, l);
      if (s1 != Status::ok) {
        const PhaseState<S> y0 = get_lane(start, l);
        EXPECT_EQ(y.q, y0.q) << "lane " << l << " failed at step " << n << ": not put back to the step's start";
        EXPECT_EQ(y.p, y0.p) << "lane " << l << " failed at step " << n;
        failed[l] = true;
        if (failures) ++*failures;
        if (part_way && alone[l].q != y0.q) ++*part_way;  // alone, the step stopped part-way
        continue;
      }
      worst = std::max({worst, max_abs(Vec<S::dof>(y.q - alone[l].q)), max_abs(Vec<S::dof>(y.p - alone[l].p))});
    }
  }
  return worst;
}

TEST(LanesComposition, EachLaneIsTheTrajectoryAloneAndAFailedLaneKeepsTheStepsStart) {
  Composition<Rattle> kahan_li8;
  kahan_li8.prm.scheme = CompositionScheme::kahan_li8;
  const DoublePendulum pendula;
  const std::array<PhaseState<DoublePendulum>, W> d0 = varied_double_pendula(pendula);
  EXPECT_LT(composition_lanes_against_alone(kahan_li8, pendula, d0, 0.02, 200), 1e-11);
  Composition<SymplecticEulerPair> pair;  // A then B, each half a substep (5.10)
  pair.prm.scheme = CompositionScheme::suzuki;
  const FourBar linkage;
  const std::array<PhaseState<FourBar>, W> f0 = varied_four_bars(linkage);
  EXPECT_LT(composition_lanes_against_alone(pair, linkage, f0, 0.005, 200), 1e-11);
  pair.prm.form = CompositionForm::extrinsic;  // RATTLE substeps
  EXPECT_LT(composition_lanes_against_alone(pair, linkage, f0, 0.005, 200), 1e-11);
  // From near the top of the sphere the pendula fall and speed up until a
  // step predicts a point no projection reaches: for the triple jump its
  // middle substep of -1.70 dt first, after a good one of 1.35 dt. One lane
  // stays slow and never fails.
  Composition<Rattle> triple_jump;
  const SphericalPendulum sys;
  std::array<PhaseState<SphericalPendulum>, W> falling;
  for (int l = 0; l < W; ++l) falling[l] = pendulum(sys, l == 0 ? 0.3 : 2.8, 0.7 * l, l == 0 ? 1.0 : 10.5 + 0.4 * l);
  int failures = 0, part_way = 0;
  EXPECT_LT(composition_lanes_against_alone(triple_jump, sys, falling, 0.05, 40, NewtonOptions{1e-13, 50}, &failures,
                                            &part_way),
            1e-12);
  EXPECT_EQ(failures, W - 1) << "the falling lanes were meant to fail";
  EXPECT_GE(part_way, 1) << "a failure after a good substep was meant to test the put-back";
}

// The lanes of a group are independent: replacing one lane's trajectory by
// one that fails (too fast for Newton to converge in 3 iterations) changes
// no bit of the others, and the failing lane keeps its last good state.
TEST(LanesRattle, AFailingLaneLeavesTheOthersBitForBit) {
  const SphericalPendulum sys;
  const NewtonOptions opt{1e-13, 3};
  std::array<PhaseState<SphericalPendulum>, W> calm, mixed;
  for (int l = 0; l < W; ++l) calm[l] = pendulum(sys, 0.3 + 0.4 * l, 0.7 * l, 1.0);
  mixed = calm;
  mixed[2] = pendulum(sys, 1.0, 0.2, 60.0);
  PhaseState<SphericalPendulum, L> a, b;
  for (int l = 0; l < W; ++l) {
    test::put_lane(a, l, calm[l]);
    test::put_lane(b, l, mixed[l]);
  }
  a.q_prev = a.q;
  b.q_prev = b.q;
  bool failed = false;
  for (int n = 0; n < 50; ++n) {
    LaneInt<L> ia = uniform<LaneInt<L>>(0), ib = uniform<LaneInt<L>>(0);
    const LaneStatus<L> sa = Rattle::step(sys, a, 0.05, opt, ia);
    const PhaseState<SphericalPendulum> before = get_lane(b, 2);
    const LaneStatus<L> sb = Rattle::step(sys, b, 0.05, opt, ib);
    for (int l : {0, 1, 3}) {
      ASSERT_EQ(sa.v[l], Status::ok);
      ASSERT_EQ(sb.v[l], Status::ok);
      EXPECT_EQ(ia.v[l], ib.v[l]);
      const PhaseState<SphericalPendulum> ya = get_lane(a, l), yb = get_lane(b, l);
      ASSERT_EQ(ya.q, yb.q) << "lane " << l << " step " << n;
      ASSERT_EQ(ya.p, yb.p) << "lane " << l << " step " << n;
    }
    if (sb.v[2] != Status::ok) {
      EXPECT_EQ(sb.v[2], Status::newton_not_converged);
      EXPECT_EQ(get_lane(b, 2).q, before.q) << "a failed lane keeps its last good state";
      EXPECT_EQ(get_lane(b, 2).p, before.p);
      failed = true;
      break;
    }
  }
  EXPECT_TRUE(failed) << "the fast lane was meant to fail";
}

}  // namespace
}  // namespace tether

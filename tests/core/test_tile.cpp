// Step code in tiles (core/tile.hpp): a chain's RATTLE (and a composition of
// it) with one bead per lane must be the one-thread step, bit for bit where
// both run on the same scalar, with the same Newton iterations and outcomes,
// failures included.
// What is tested here is the source a GPU runs (tile::Thread differs only in
// its primitives: shifts, below, select, larger_abs, the maximum, the logical
// and, the Thomas solve, and each_lane's one-lane access, which only the gpu
// test CudaTile runs).
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "holonomic_cases.hpp"
#include "tether/core/tile.hpp"
#include "tether/ensemble/advance.hpp"
#include "tether/methods/composition.hpp"
#include "tether/methods/rattle.hpp"
#include "tether/methods/shake.hpp"
#include "tether/systems/chain.hpp"

namespace tether {
namespace {

constexpr int W = 4;
using L = Lanes<W>;

// A one-thread state's beads in tile form and back: q = (r_0, ..., r_{N-1}),
// bead b on lane b (the cpu backend's tile::Emulated).
template <class S, class T>
void to_tile(const Vec<S::dof, T>& q, typename S::template Beads<tile::Emulated<T, S::tile_lanes>>& r) {
  for (int b = 0; b < S::tile_lanes; ++b)
    for (int k = 0; k < 3; ++k) r.c[k].v[b] = q[3 * b + k];
}
template <class S, class T>
void from_tile(const typename S::template Beads<tile::Emulated<T, S::tile_lanes>>& r, Vec<S::dof, T>& q) {
  for (int b = 0; b < S::tile_lanes; ++b)
    for (int k = 0; k < 3; ++k) q[3 * b + k] = r.c[k].v[b];
}

// M's tile step on a one-thread state and carry (T = Real or Lanes<W>), to
// set beside M's one-thread step.
template <class S, class M, class T>
LaneStatus<T> step_as_tile(const S& sys, const M& method, PhaseState<S, T>& s, Real h, const NewtonOptions& opt,
                           LaneInt<T>& iterations, ForceCarry<S, T>& carry) {
  using X = tile::Emulated<T, S::tile_lanes>;
  static_assert(S::dof == 3 * S::tile_lanes, "a lane per bead in R^3");
  TileStateFor<S, M, X> ts;
  TileForceCarry<S, X> tc;
  to_tile<S>(s.q, ts.q);
  to_tile<S>(s.p, ts.p);
  if constexpr (M::two_step) to_tile<S>(s.q_prev, ts.q_prev);
  tc.valid = carry.valid;
  if (carry.valid) to_tile<S>(carry.force, tc.force);
  const LaneStatus<T> st = method.tile_step(sys, ts, h, opt, iterations, tc);
  from_tile<S>(ts.q, s.q);
  from_tile<S>(ts.p, s.p);
  if constexpr (M::two_step) from_tile<S>(ts.q_prev, s.q_prev);
  carry.valid = tc.valid;
  if (tc.valid) from_tile<S>(tc.force, carry.force);
  return st;
}

TEST(Tile, ShiftsBringZeroFromBeyondTheEndsAndBelowMasks) {
  tile::Emulated<Real, 8> x;
  for (int l = 0; l < 8; ++l) x.v[l] = 10 + l;
  const auto n2 = tile::from_next<2>(x), p1 = tile::from_previous<1>(x), b5 = tile::below(5, x);
  for (int l = 0; l < 8; ++l) {
    EXPECT_EQ(n2.v[l], l + 2 < 8 ? 12.0 + l : 0.0);
    EXPECT_EQ(p1.v[l], l >= 1 ? 9.0 + l : 0.0);
    EXPECT_EQ(b5.v[l], l < 5 ? 10.0 + l : 0.0);
  }
  x.v[6] = -30;
  EXPECT_EQ(tile::max_abs(x), 30.0);
  EXPECT_TRUE(tile::all_finite(x));
  x.v[3] = INFINITY;
  EXPECT_FALSE(tile::all_finite(x));
}

TEST(Tile, TridiagonalSolveIsTheThomasSolveAndLeavesZeroBeyondK) {
  constexpr int K = 6;
  tile::Emulated<Real, 8> lower, diag, upper, rhs, x;
  TridiagonalMatrix<K> m;
  Vec<K> b, y;
  for (int i = 0; i < 8; ++i) {
    lower.v[i] = i < K ? std::sin(1.0 + i) : 7;  // rows past K are not read
    diag.v[i] = i < K ? 3 + std::cos(2.0 * i) : 7;
    upper.v[i] = i < K ? std::sin(0.5 * i - 1) : 7;
    rhs.v[i] = i < K ? 1.0 / (1 + i) : 7;
    if (i < K) {
      m.lower[i] = lower.v[i];
      m.diag[i] = diag.v[i];
      m.upper[i] = upper.v[i];
      b[i] = rhs.v[i];
    }
  }
  ASSERT_TRUE(m.solve(b, y));
  ASSERT_TRUE(tile::solve_tridiagonal<K>(lower, diag, upper, rhs, x));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(x.v[i], i < K ? y[i] : 0.0);
  diag.v[0] = 0;  // a vanishing first pivot
  EXPECT_FALSE(tile::solve_tridiagonal<K>(lower, diag, upper, rhs, x));
}

// Whether this unit's compiler fuses a * b + c (-ffp-contract=fast with FMA
// instructions, e.g. TETHER_CPU_ARCH=native): then the tile form, written
// with other expressions than Eigen's, fuses other products, and the two
// agree to roundoff instead of to the bit. 1 + 2^-29 + 2^-60 = a * a rounds
// to 1 + 2^-29, so a * a + c is 0 unfused and 2^-60 fused.
bool fuses_multiply_add() {
  volatile Real va = 1 + std::ldexp(1.0, -30), vc = -(1 + std::ldexp(1.0, -29));
  const Real a = va, c = vc;
  return a * a + c != 0;
}

// W chains, each with its own bond and dihedral angles, one per lane.
template <int N>
PhaseState<Chain<N>, L> chains_in_lanes(const Chain<N>& sys) {
  PhaseState<Chain<N>, L> a;
  for (int l = 0; l < W; ++l) {
    test::put_lane(a, l, test::varied_chain_state(sys, l));
  }
  a.q_prev = a.q;
  return a;
}

// One lane's outcome of a step in both forms. Where both run the same
// arithmetic (bitwise): the same status and Newton iterations. Where the
// compiler fuses multiply-adds, a convergence test read at roundoff (the
// midpoint rule's fixed-point change) can take one iteration more in either
// form, and with it, at the iteration limit, another status.
void expect_same_outcome(bool bitwise, Status sa, Status sb, int ia, int ib) {
  if (bitwise || ia == ib) ASSERT_EQ(sa, sb);
  if (bitwise)
    ASSERT_EQ(ia, ib) << "Newton iterations";
  else
    ASSERT_LE(std::abs(ia - ib), 1) << "Newton iterations";
}

// W chains stepped in lockstep by M's one-thread step and by its tile form:
// every outcome and every iteration count the same, step after step, and
// every bit of every state and carried force (to roundoff where the compiler
// fuses multiply-adds: ~1e-12 in p, O(10), over 300 steps of a chaotic
// chain, as in test_lanes.cpp).
template <class M, int N>
void tile_against_one_thread(const Chain<N>& sys, Real h, int steps, const NewtonOptions& opt, bool expect_failure) {
  const bool bitwise = !fuses_multiply_add();
  using S = Chain<N>;
  PhaseState<S, L> a = chains_in_lanes(sys);
  if constexpr (M::two_step) M::start(sys, a, h);  // SHAKE's q_{n-1}
  PhaseState<S, L> b = a;
  ForceCarry<S, L> ca, cb;
  bool failed = false;
  Real worst = 0;
  for (int n = 0; n < steps; ++n) {
    LaneInt<L> ia = uniform<LaneInt<L>>(0), ib = uniform<LaneInt<L>>(0);
    const LaneStatus<L> sa = test::step_with_carry<M>(sys, a, h, opt, ia, ca);
    const LaneStatus<L> sb = step_as_tile(sys, M{}, b, h, opt, ib, cb);
    for (int l = 0; l < W; ++l) {
      expect_same_outcome(bitwise, sa.v[l], sb.v[l], ia.v[l], ib.v[l]);
      ASSERT_FALSE(::testing::Test::HasFatalFailure()) << M::name << " lane " << l << " step " << n;
      failed = failed || sa.v[l] != Status::ok;
    }
    for (int c = 0; c < S::dof; ++c)
      for (int l = 0; l < W; ++l) {
        if (!bitwise) {
          worst = std::max({worst, std::fabs(a.q[c].v[l] - b.q[c].v[l]), std::fabs(a.p[c].v[l] - b.p[c].v[l])});
          continue;
        }
        ASSERT_EQ(a.q[c].v[l], b.q[c].v[l]) << M::name << " q[" << c << "] lane " << l << " step " << n;
        ASSERT_EQ(a.p[c].v[l], b.p[c].v[l]) << M::name << " p[" << c << "] lane " << l << " step " << n;
        if (M::two_step)
          ASSERT_EQ(a.q_prev[c].v[l], b.q_prev[c].v[l]) << "q_prev[" << c << "] lane " << l << " step " << n;
        if (carries_force<M>)
          ASSERT_EQ(ca.force[c].v[l], cb.force[c].v[l]) << "carried force[" << c << "] lane " << l << " step " << n;
      }
    if (!bitwise) b = a, cb = ca;  // each step from the same state
  }
  EXPECT_EQ(failed, expect_failure) << M::name;
  EXPECT_LT(worst, 1e-11) << M::name;
}

TEST(TileRattle, AChainInTilesIsTheOneThreadStepBitForBit) {
  tile_against_one_thread<Rattle>(test::make_chain<4>(), 0.002, 300, {}, false);
  tile_against_one_thread<Rattle>(test::make_chain<8>(), 0.002, 300, {}, false);
  tile_against_one_thread<Rattle>(test::make_chain<16>(), 0.002, 300, {}, false);
  Chain<16> bend_only;  // the torsion branch skipped
  bend_only.prm.bend_stiffness = 20;
  tile_against_one_thread<Rattle>(bend_only, 0.002, 300, {}, false);
}

// Steps too long for Newton to converge in 3 iterations, from step 4 to 15
// in the four lanes: the same lanes fail at the same steps with the same
// status, keep the same last state, and their neighbours run on.
TEST(TileRattle, FailuresAreTheOneThreadStepsFailures) {
  tile_against_one_thread<Rattle>(test::make_chain<8>(), 0.1, 40, NewtonOptions{1e-13, 3}, true);
}

// The other methods with a tile form: SHAKE (its state keeps q_{n-1}), the
// constrained midpoint rule (its fixed point and Newton in one loop) and
// symplectic Euler A and B (A's tile step takes its start force from the
// carry when it has one).
TEST(TileMethods, EachMethodInTilesIsItsOneThreadStepBitForBit) {
  tile_against_one_thread<Shake>(test::make_chain<8>(), 0.002, 300, {}, false);
  tile_against_one_thread<Shake>(test::make_chain<16>(), 0.002, 200, {}, false);
  tile_against_one_thread<ConstrainedMidpoint>(test::make_chain<4>(), 0.002, 300, {}, false);
  tile_against_one_thread<ConstrainedMidpoint>(test::make_chain<16>(), 0.002, 200, {}, false);
  tile_against_one_thread<SymplecticEulerA>(test::make_chain<8>(), 0.002, 300, {}, false);
  tile_against_one_thread<SymplecticEulerB>(test::make_chain<16>(), 0.002, 200, {}, false);
}

TEST(TileMethods, FailuresAreTheOneThreadStepsFailures) {
  tile_against_one_thread<Shake>(test::make_chain<8>(), 0.1, 40, NewtonOptions{1e-13, 3}, true);
  tile_against_one_thread<ConstrainedMidpoint>(test::make_chain<8>(), 0.1, 40, NewtonOptions{1e-13, 3}, true);
  tile_against_one_thread<SymplecticEulerB>(test::make_chain<8>(), 0.1, 40, NewtonOptions{1e-13, 3}, true);
}

// With T = Real Eigen may sum a dot product in another order than the tile's
// three-term sum: the same iterations, states equal to roundoff.
TEST(TileRattle, OneTrajectoryInATileAgreesWithTheOneThreadStep) {
  const Chain<16> sys = test::make_chain<16>();
  PhaseState<Chain<16>> a = test::chain_state(sys), b = a;
  ForceCarry<Chain<16>> ca, cb;
  const NewtonOptions opt;
  Real worst = 0;
  for (int n = 0; n < 300; ++n) {
    int ia = 0, ib = 0;
    ASSERT_EQ(Rattle::step(sys, a, 0.002, opt, ia, &ca), Status::ok);
    ASSERT_EQ(step_as_tile(sys, Rattle{}, b, 0.002, opt, ib, cb), Status::ok);
    ASSERT_EQ(ia, ib) << "step " << n;
    worst = std::max({worst, max_abs(Vec<48>(a.q - b.q)), max_abs(Vec<48>(a.p - b.p))});
  }
  EXPECT_LT(worst, 1e-11);
}

// A chain's composition in tiles (Composition<Base>::tile_step) against the
// one-thread base steps composed by hand, substep by substep, in lanes (the
// symplectic Euler pair: A then B on half substeps, intrinsic; RATTLE,
// extrinsic): each lane alone takes the scheme's substeps in order, counts
// their iterations up to its first failure, which is its outcome, and a
// failed step leaves it at the step's start (the last good state the
// ensemble keeps). A lane is compared up to the step it first fails at.
template <class Base, int N>
void composition_against_one_thread(const Chain<N>& sys, CompositionScheme scheme, Real h, int steps,
                                    const NewtonOptions& opt, bool expect_failure,
                                    CompositionForm form = CompositionForm::intrinsic) {
  const bool bitwise = !fuses_multiply_add();
  using S = Chain<N>;
  Composition<Base> method;
  method.prm.scheme = scheme;
  method.prm.form = form;
  PhaseState<S, L> a = chains_in_lanes(sys), b = a;
  ForceCarry<S, L> ca, cb;
  bool live[W] = {true, true, true, true};
  int failures = 0;
  Real worst = 0;
  for (int n = 0; n < steps; ++n) {
    const PhaseState<S, L> start = a, b_start = b;
    LaneInt<L> ia = uniform<LaneInt<L>>(0), ib = uniform<LaneInt<L>>(0);
    LaneStatus<L> sa = uniform<LaneStatus<L>>(Status::ok);
    const auto substep = [&](auto sub, Real hi) {
      LaneInt<L> it = uniform<LaneInt<L>>(0);
      const LaneStatus<L> st = test::step_with_carry<decltype(sub)>(sys, a, hi, opt, it, ca);
      for (int l = 0; l < W; ++l)
        if (sa.v[l] == Status::ok) ia.v[l] += it.v[l], sa.v[l] = st.v[l];
    };
    for (int i = 0; i < composition_stages(scheme); ++i) {
      const Real hi = composition_coefficient(scheme, i) * h;
      if constexpr (std::is_same_v<Base, SymplecticEulerPair>) {
        if (form == CompositionForm::extrinsic) {
          substep(Rattle{}, hi);
        } else {
          substep(SymplecticEulerA{}, 0.5 * hi);
          substep(SymplecticEulerB{}, 0.5 * hi);
        }
      } else {
        substep(Base{}, hi);
      }
    }
    for (int l = 0; l < W; ++l)
      if (sa.v[l] != Status::ok)
        for (int c = 0; c < S::dof; ++c) a.q[c].v[l] = start.q[c].v[l], a.p[c].v[l] = start.p[c].v[l];
    const LaneStatus<L> sb = step_as_tile(sys, method, b, h, opt, ib, cb);
    for (int l = 0; l < W; ++l) {
      if (!live[l]) continue;
      expect_same_outcome(bitwise, sa.v[l], sb.v[l], ia.v[l], ib.v[l]);
      ASSERT_FALSE(::testing::Test::HasFatalFailure()) << "lane " << l << " step " << n;
      for (int c = 0; c < S::dof; ++c) {
        if (!bitwise) {
          worst = std::max({worst, std::fabs(a.q[c].v[l] - b.q[c].v[l]), std::fabs(a.p[c].v[l] - b.p[c].v[l])});
          continue;
        }
        ASSERT_EQ(a.q[c].v[l], b.q[c].v[l]) << "q[" << c << "] lane " << l << " step " << n;
        ASSERT_EQ(a.p[c].v[l], b.p[c].v[l]) << "p[" << c << "] lane " << l << " step " << n;
      }
      if (sa.v[l] != Status::ok) {
        live[l] = false;
        ++failures;
        if (sb.v[l] != Status::ok)
          for (int c = 0; c < S::dof; ++c)  // the step's start, to the bit in any build
            ASSERT_EQ(b.q[c].v[l], b_start.q[c].v[l]) << "lane " << l << " failed at step " << n << ": q[" << c << "]";
      }
    }
    if (!bitwise) b = a, cb = ca;  // each step from the same state
  }
  EXPECT_EQ(failures > 0, expect_failure);
  EXPECT_LT(worst, 1e-11);
}

TEST(TileComposition, AChainsCompositionInTilesIsTheOneThreadRattleComposed) {
  composition_against_one_thread<Rattle>(test::make_chain<4>(), CompositionScheme::triple_jump, 0.004, 150, {}, false);
  composition_against_one_thread<Rattle>(test::make_chain<8>(), CompositionScheme::yoshida6, 0.004, 100, {}, false);
  composition_against_one_thread<Rattle>(test::make_chain<16>(), CompositionScheme::kahan_li8, 0.004, 60, {}, false);
}

TEST(TileComposition, TheOtherBasesComposedInTilesAreTheirOneThreadStepsComposed) {
  composition_against_one_thread<ConstrainedMidpoint>(test::make_chain<4>(), CompositionScheme::triple_jump, 0.004,
                                                      150, {}, false);
  composition_against_one_thread<ConstrainedMidpoint>(test::make_chain<16>(), CompositionScheme::suzuki, 0.004, 40,
                                                      {}, false);
  composition_against_one_thread<SymplecticEulerPair>(test::make_chain<8>(), CompositionScheme::yoshida6, 0.004, 100,
                                                      {}, false);
  composition_against_one_thread<SymplecticEulerPair>(test::make_chain<16>(), CompositionScheme::triple_jump, 0.004,
                                                      60, {}, false, CompositionForm::extrinsic);
}

// Substeps too long for Newton in 3 iterations: every lane fails, at steps
// 7-11 in its third substep (of -0.66 dt, after two that converged), and is
// left at that step's start while the others run on.
TEST(TileComposition, AFailedStepLeavesTheLaneAtItsStart) {
  composition_against_one_thread<Rattle>(test::make_chain<8>(), CompositionScheme::suzuki, 0.14, 40,
                                         NewtonOptions{1e-13, 3}, true);
  composition_against_one_thread<SymplecticEulerPair>(test::make_chain<8>(), CompositionScheme::suzuki, 0.14, 40,
                                                      NewtonOptions{1e-13, 3}, true);
  composition_against_one_thread<ConstrainedMidpoint>(test::make_chain<8>(), CompositionScheme::suzuki, 0.14, 40,
                                                      NewtonOptions{1e-13, 3}, true);
}

// The tile form on one trajectory (T = Real) against the one-thread
// composition itself: the same iterations, states equal to roundoff.
TEST(TileComposition, OneTrajectoryInATileAgreesWithTheOneThreadComposition) {
  const Chain<16> sys = test::make_chain<16>();
  Composition<Rattle> method;
  method.prm.scheme = CompositionScheme::kahan_li8;
  PhaseState<Chain<16>> a = test::chain_state(sys), b = a;
  ForceCarry<Chain<16>> cb;
  const NewtonOptions opt;
  Real worst = 0;
  for (int n = 0; n < 100; ++n) {
    int ia = 0, ib = 0;
    ASSERT_EQ(method.step(sys, a, 0.004, opt, ia), Status::ok);
    ASSERT_EQ(step_as_tile(sys, method, b, 0.004, opt, ib, cb), Status::ok);
    ASSERT_EQ(ia, ib) << "step " << n;
    worst = std::max({worst, max_abs(Vec<48>(a.q - b.q)), max_abs(Vec<48>(a.p - b.p))});
  }
  EXPECT_LT(worst, 1e-11);
}

}  // namespace
}  // namespace tether

#pragma once
// Composition methods to higher order, BMS24 §5.2, eqs. (5.7)-(5.10).
#include "tether/core/families.hpp"
#include <type_traits>

#include "tether/methods/constrained_midpoint.hpp"
#include "tether/methods/rattle.hpp"
#include "tether/methods/symplectic_euler_a.hpp"
#include "tether/methods/symplectic_euler_b.hpp"

namespace tether {

// Symmetric coefficient sets gamma_1..gamma_s for a symmetric base method of
// order 2 (HLW06 §V.3):
// sum gamma = 1 and sum gamma^3 = 0 (order 4), and the higher conditions for
// orders 6 and 8.
enum class CompositionScheme : int {
  triple_jump,  // s = 3, order 4 (Yos90, Suz90)
  suzuki,       // s = 5, order 4, Suzuki's fractal (Suz90)
  yoshida6,     // s = 7, order 6, Yos90 solution A
  kahan_li6,    // s = 9, order 6, KL97
  kahan_li8,    // s = 17, order 8, KL97
};

TETHER_HD inline int composition_stages(CompositionScheme s) {
  switch (s) {
    case CompositionScheme::triple_jump: return 3;
    case CompositionScheme::suzuki: return 5;
    case CompositionScheme::yoshida6: return 7;
    case CompositionScheme::kahan_li6: return 9;
    case CompositionScheme::kahan_li8: return 17;
  }
  return 0;
}

TETHER_HD inline int composition_order(CompositionScheme s) {
  switch (s) {
    case CompositionScheme::triple_jump:
    case CompositionScheme::suzuki: return 4;
    case CompositionScheme::yoshida6:
    case CompositionScheme::kahan_li6: return 6;
    case CompositionScheme::kahan_li8: return 8;
  }
  return 0;
}

// gamma_{i+1}, i = 0..s-1; every set is symmetric, gamma_i = gamma_{s+1-i}.
// Each value is returned from a switch, not read from an array: on a GPU
// thread a table indexed by a runtime i is copied to local memory at every
// call (it was the 136-byte stack frame of every composition kernel).
TETHER_HD inline Real composition_coefficient(CompositionScheme s, int i) {
  const int n = composition_stages(s);
  const int j = i < n - 1 - i ? i : n - 1 - i;  // index into the first half
  switch (s) {
    case CompositionScheme::triple_jump: {
      const Real g = 1 / (2 - cbrt(Real(2)));
      return j == 0 ? g : 1 - 2 * g;
    }
    case CompositionScheme::suzuki: {
      const Real g = 1 / (4 - cbrt(Real(4)));
      return j < 2 ? g : 1 - 4 * g;
    }
    case CompositionScheme::yoshida6: {
      // w3, w2, w1 of solution A; the middle one makes the sum exactly 1.
      const Real w3 = 0.784513610477560, w2 = 0.235573213359357, w1 = -1.17767998417887;
      switch (j) {
        case 0: return w3;
        case 1: return w2;
        case 2: return w1;
        default: return 1 - 2 * (w3 + w2 + w1);
      }
    }
    case CompositionScheme::kahan_li6:
      switch (j) {
        case 0: return 0.39216144400731413928;
        case 1: return 0.33259913678935943860;
        case 2: return -0.70624617255763935981;
        case 3: return 0.08221359629355080023;
        default: return 0.79854399093482996340;
      }
    case CompositionScheme::kahan_li8:
      switch (j) {
        case 0: return 0.13020248308889008088;
        case 1: return 0.56116298177510838456;
        case 2: return -0.38947496264484728641;
        case 3: return 0.15884190655515560090;
        case 4: return -0.39590389413323757734;
        case 5: return 0.18453964097831570709;
        case 6: return 0.25837438768632204729;
        case 7: return 0.29501172360931029887;
        default: return -0.60550853383003451170;
      }
  }
  return 0;
}

// How substeps of the symplectic Euler pair are joined (BMS24 §5.2).
enum class CompositionForm : int {
  // (5.10): every substep A(alpha h), B(beta h) is a full constrained step,
  // each junction a point of T*N.
  intrinsic,
  // (5.9): A(alpha h) and its adjoint B(beta h) are composed in T*Q only.
  // As in Example 5.1, with Lambda = -lambda~ the inner junction is the
  // unconstrained drift, and with alpha = beta = gamma/2 the pair is exactly
  // RATTLE with step gamma h, eqs. (5.16)-(5.18).
  extrinsic,
};

// The base "symplectic Euler A with its adjoint B": one symmetric step of
// size h made of two halves, A(h/2) then B(h/2).
struct SymplecticEulerPair {
  static constexpr const char* name = "symplectic_euler";
};

// Composition (5.7)/(5.8) of a symmetric order-2 base method with the
// symmetric coefficients of `scheme`:
//   Phi_h = Phi_{gamma_s h} o ... o Phi_{gamma_1 h}.
// For the bases rattle and constrained_midpoint the extrinsic (5.7) and
// intrinsic (5.8) forms give the same step: each substep's position solve
// carries a multiplier at its start point, G(q_i)^T lambda, which absorbs
// any normal component of the momentum handed over at q_i, so whether
// (q_i, p_i) is also required to lie in T*N changes no configuration. For
// the symplectic Euler pair, (5.9) and (5.10) differ (CompositionForm).
template <class Base>
struct Composition {
  static constexpr const char* name = "composition";
  static constexpr const char* base_name = Base::name;
  static constexpr bool two_step = false;
  static constexpr const char* citation = "BMS24 §5.2, eqs. (5.7)-(5.10)";
  static constexpr const char* description = "symmetric composition of a symmetric order-2 base to order 4, 6 or 8 by scheme";
  static constexpr bool symmetric = true;
  static constexpr bool symplectic = true;
  template <class S>
  static constexpr bool applies_to = HolonomicSystem<S>;
  static constexpr Variant variant{"base", Base::name};

  static constexpr int order = 4;  // the lowest scheme's; scheme_order() gives the configured one

  struct Parameters {
    CompositionScheme scheme = CompositionScheme::triple_jump;
    CompositionForm form = CompositionForm::intrinsic;  // only the symplectic Euler pair has two

    template <class V>
    void describe(V& v) {
      v.choice("scheme", scheme,
               {{"triple_jump", CompositionScheme::triple_jump},
                {"suzuki", CompositionScheme::suzuki},
                {"yoshida6", CompositionScheme::yoshida6},
                {"kahan_li6", CompositionScheme::kahan_li6},
                {"kahan_li8", CompositionScheme::kahan_li8}},
               "coefficients: triple_jump and suzuki (order 4), yoshida6 and kahan_li6 (6), kahan_li8 (8)", Required::yes);
      // For rattle and constrained_midpoint the extrinsic (5.7) and intrinsic
      // (5.8) compositions are the same method (see below): no form to choose.
      if constexpr (is_pair)
        v.choice("form", form, {{"intrinsic", CompositionForm::intrinsic}, {"extrinsic", CompositionForm::extrinsic}},
                 "intrinsic (5.10): every substep on T*N; extrinsic (5.9): substeps joined in T*Q");
    }
  };
  Parameters prm;

  TETHER_HD int scheme_order() const { return composition_order(prm.scheme); }

  // Calls substep(base_method, h_i) for every base step in order, stopping
  // at the first failure (St = Status), or once every lane has failed (St =
  // LaneStatus<T>: substep keeps a failed lane's outcome). The fast steps and
  // the reference backend all go through here, so they compose the very same
  // substeps.
  template <class St = Status, class F>
  TETHER_HD St for_each_substep(Real h, F&& substep) const {
    const int s = composition_stages(prm.scheme);
    St st = uniform<St>(Status::ok);
    for (int i = 0; i < s; ++i) {
      const Real hi = composition_coefficient(prm.scheme, i) * h;
      if constexpr (is_pair) {
        if (prm.form == CompositionForm::extrinsic) {
          st = substep(Rattle{}, hi);
        } else {
          st = substep(SymplecticEulerA{}, Real(0.5) * hi);
          if (any(is_ok(st))) st = substep(SymplecticEulerB{}, Real(0.5) * hi);
        }
      } else {
        st = substep(Base{}, hi);
      }
      if (none(is_ok(st))) return st;
    }
    return st;
  }

  template <class S>
  TETHER_HD static void start(const S&, PhaseState<S>&, Real) {}

  // The substeps move the state in place. On failure it is left where the
  // failed substep found it, after the substeps before: keeping the step's
  // start for that case cost a second state in every thread (the spills of
  // chain4's composition kernels), and the callers need none (the ensemble
  // loop replays the launch, advance.hpp; HMC keeps the chain's state). The
  // tile and lanes steps below keep it.
  static constexpr bool keeps_state_on_failure = false;
  template <class S>
  TETHER_HD Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations) const {
    return for_each_substep(h, [&](auto base, Real hi) { return decltype(base)::step(sys, s, hi, opt, iterations); });
  }

  // The same substeps in tile form (a chain, a lane per bead:
  // methods/projection_tile.hpp), a substep's end force carried to the next
  // one's start where both have one (RATTLE's; symplectic Euler B's to A's).
  // Unlike step, a failed step leaves the state as it was: in a tile the
  // step's start costs each lane six numbers, and the ensemble loop needs no
  // replay (advance.hpp). A lane that has failed (T = Lanes: a trajectory of
  // the cpu's lockstep group) counts no later substep's iterations and keeps
  // its first failure, as the one-thread step that stops there.
  static constexpr bool is_pair = std::is_same<Base, SymplecticEulerPair>::value;
  static constexpr bool runs_in_tile = [] {
    if constexpr (is_pair)
      return SymplecticEulerA::runs_in_tile && SymplecticEulerB::runs_in_tile && Rattle::runs_in_tile;
    else
      return Base::runs_in_tile;
  }();
  template <class S, class X>
  TETHER_HD LaneStatus<typename X::Scalar> tile_step(const S& sys, TileState<S, X>& s, Real h, const NewtonOptions& opt,
                                                     LaneInt<typename X::Scalar>& iterations,
                                                     TileForceCarry<S, X>& carry) const {
    using T = typename X::Scalar;
    const TileState<S, X> start = s;
    LaneStatus<T> status = uniform<LaneStatus<T>>(Status::ok);
    status = for_each_substep<LaneStatus<T>>(h, [&](auto base, Real hi) {
      using Sub = decltype(base);
      if constexpr (lane_count<T> == 1) {
        return Sub::tile_step(sys, s, hi, opt, iterations, carry);
      } else {
        LaneInt<T> it = uniform<LaneInt<T>>(0);
        const Mask<T> live = is_ok(status);
        status = first_failure(status, Sub::tile_step(sys, s, hi, opt, it, carry));
        add_where(live, iterations, it);
        return status;
      }
    });
    if constexpr (lane_count<T> == 1) {
      if (status != Status::ok) {
        s = start;
        carry.valid = false;  // its force is of a substep's start, not of the step's
      }
    } else {  // a failed lane's carry is dropped with it (advance_lanes)
      s.q = tile::select(is_ok(status), s.q, start.q);
      s.p = tile::select(is_ok(status), s.p, start.p);
    }
    return status;
  }

  // The one-thread step in lanes (the cpu's lockstep group of W
  // trajectories, core/lanes.hpp), for systems whose step functions take any
  // scalar. As in the tile step, a failed lane is put back to the step's
  // start (W x 2 dof numbers on the host's stack), so advance_lanes replays
  // nothing, and counts no later substep's iterations.
  static constexpr bool runs_in_lanes = [] {
    if constexpr (is_pair)
      return SymplecticEulerA::runs_in_lanes && SymplecticEulerB::runs_in_lanes && Rattle::runs_in_lanes;
    else
      return Base::runs_in_lanes;
  }();
  template <class S, int W>
  LaneStatus<Lanes<W>> step(const S& sys, PhaseState<S, Lanes<W>>& s, Real h, const NewtonOptions& opt,
                            LaneInt<Lanes<W>>& iterations) const {
    using T = Lanes<W>;
    const PhaseState<S, T> start = s;
    LaneStatus<T> status = uniform<LaneStatus<T>>(Status::ok);
    status = for_each_substep<LaneStatus<T>>(h, [&](auto base, Real hi) {
      LaneInt<T> it = uniform<LaneInt<T>>(0);
      const Mask<T> live = is_ok(status);
      status = first_failure(status, decltype(base)::step(sys, s, hi, opt, it));
      add_where(live, iterations, it);
      return status;
    });
    const Mask<T> failed = !is_ok(status);
    assign_where(failed, s.q, start.q);
    assign_where(failed, s.p, start.p);
    return status;
  }
};

}  // namespace tether

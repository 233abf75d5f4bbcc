#pragma once
// Constrained Hamiltonian Monte Carlo on T*N, one chain per thread: the
// transition every backend runs (a cpu iteration, a GPU thread), written once
// (and once more on tile values for chains in tiles: hmc_tile.hpp).
//
// Generalised HMC on a submanifold with RATTLE and the reverse check, LRS19
// (after ZHG18; docs/references.md): on N = {g(q) = 0} with mass metric M,
// one transition from q in N is
//   1. p ~ N(0, kT M) projected M^-1-orthogonally onto T*_q N (a partial
//      refresh p <- cos(a) p + sin(a) xi keeps part of the last momentum:
//      generalised HMC, Hor91);
//   2. L steps of a symmetric symplectic method Psi_h from (q, p) to (q', p');
//   3. the reversibility check: L steps from (q', -p') must return to q
//      (within a tolerance), else the move is rejected: where Newton finds
//      another root backwards, Psi is not an involution after the flip and
//      accepting would bias the sampler (ZHG18 first showed it; LRS19);
//   4. Metropolis on H = p.M^-1 p / 2 + V(q): accept with probability
//      min(1, exp(-(H' - H) / kT)); a Newton failure at any step is a
//      rejection with its own reason, never a crash or a NaN;
//   5. momentum reversal: accepted, (q', p'); rejected, (q, -p) (what a
//      partial refresh keeps; a full refresh forgets it).
// The chain samples exp(-H/kT) on T*N, whose q-marginal is
// exp(-V(q)/kT) sigma_N(dq), sigma_N the surface measure that M induces on N.
//
// `sample.algorithm` "dynamic" replaces steps 2-5 by dynamic integration
// time (dynamic_transition below): the trajectory doubles until it turns
// back, and the next state is drawn from it (Bet17, after HG14).
//
// Step-size warm-up: dual averaging, HG14 §3.2.1 eq. (6) (their Algorithm 5), per chain.
// Metric warm-up (`sample.metric` diag or dense): Stan's windows, the chain
// then on V_M with M estimated (sampling/metric.hpp), and after each window
// a step size found by trial steps (reasonable_step_size), as Stan's.
//
// Randomness: the draws of iteration k of chain c are a pure function of
// (seed, c, k) (Philox, counter block k + 1; block 0 is the initial state's
// stream), so chains are reproducible across backends, threads and batches.
#include <cstdint>
#include <limits>

#include "tether/core/families.hpp"
#include "tether/core/random.hpp"
#include "tether/ensemble/view.hpp"
#include "tether/methods/projection.hpp"
#include "tether/sampling/metric.hpp"
#include "tether/sampling/outcome.hpp"

namespace tether {

// The methods a chain can run: symmetric (so that the reversibility check can
// pass) and symplectic on T*N (so that the proposal preserves volume), one
// step (a two-step method's state is not (q, p)), on a holonomic system whose
// flow p -> -p reverses (LRS19).
template <class M, class S>
concept SamplerMethodFor = HolonomicSystem<S> && MethodFor<M, S> && M::symmetric && M::symplectic &&
                           !M::two_step && reversed_by_momentum_flip<S>();

// Whether m, with its parameters, is symmetric: a method whose symmetry
// depends on them (theta_retraction at theta != 1/2) says so.
template <class M>
bool symmetric_with_parameters(const M& m) {
  if constexpr (requires { m.symmetric_with_parameters(); }) return m.symmetric_with_parameters();
  else return M::symmetric;
}

struct HmcControl {
  bool dynamic = false;           // dynamic integration time (dynamic_transition), else L steps
  int steps = 10;                 // L, the method's steps per proposal (static)
  int max_depth = 10;             // the most doublings of a dynamic trajectory: 2^max_depth - 1 steps
  Real max_energy_error = 1000;   // (H - H0) / kT beyond which a dynamic trajectory diverged (Stan's)
  Real step_jitter = 0;           // h drawn uniformly in h (1 +- step_jitter)
  Real steps_jitter = 0;          // L drawn uniformly in L (1 +- steps_jitter), at least 1
  Real temperature = 1;           // kT
  MetricKind metric = MetricKind::mass;  // the momentum's and trajectory's M (sampling/metric.hpp)
  Real refresh_cos = 0;           // cos(a): 0 is a full refresh, near 1 keeps most of p
  Real reversibility_tolerance = 1e-8;  // |q_back - q|_inf / length scale
  NewtonOptions newton;
  std::uint64_t seed = 0;
  // Each stage of the transition can be switched off, only to show in the
  // tests that a sampler without it is wrong (the config cannot do it).
  bool project_momentum = true;
  bool check_reversibility = true;
  bool metropolis = true;
  bool multinomial = true;        // dynamic: draw the next state by its weight exp(-H/kT), else uniformly
  bool check_subtrees = true;     // dynamic: the criterion on every subtree, not only the whole trajectory
};

// What one transition reports.
struct HmcDraw {
  Real acceptance = 0;  // min(1, exp(-dH/kT)); 0 when a solve failed or the check rejected
  Real energy = 0;      // H of the state the chain is in after the transition
  Real step_size = 0;   // h used (after jitter)
  int steps = 0;        // L used (after jitter); dynamic: the steps the trajectory took
  int tree_depth = 0;   // dynamic: the doublings kept (Stan's treedepth__); static: 0
  HmcOutcome outcome = HmcOutcome::accepted;
};

// A momentum p ~ N(0, kT M), M the system's (or the metric's) mass: n
// normals from `rng`, scaled by kT^1/2 M^1/2. Not yet projected onto T*_q N.
template <class S>
TETHER_HD Vec<S::dof> thermal_momentum(const S& sys, Real temperature, CounterRng& rng) {
  Vec<S::dof> xi;
  for (int c = 0; c < S::dof; ++c) xi[c] = rng.normal();
  return sqrt(temperature) * sys.sqrt_mass_times(xi);
}

// One step of the stepper from s. On the host a method that can keeps its
// end force in `carry` for the next step that starts at s.q (ForceCarry: one
// gradient a step instead of two, the same states up to where fused
// multiply-adds fall), which for a metric's V_M is most of a step. A GPU
// thread does not (a tree's carries are several S::dof registers): the run
// engine's GPU threads carry theirs, and what that gains on a GPU is still to
// be measured here.
template <class S, class Stepper>
TETHER_HD Status hmc_step(const S& sys, const Stepper& stepper, PhaseState<S>& s, Real h, const NewtonOptions& opt,
                          int& iterations, [[maybe_unused]] ForceCarry<S>& carry) {
#if !defined(__CUDA_ARCH__)
  if constexpr (carries_force<Stepper>) return stepper.step(sys, s, h, opt, iterations, &carry);
#endif
  return stepper.step(sys, s, h, opt, iterations);
}

// L steps of the stepper from s; false (s undefined) when a step fails.
// `carry` holds grad V at s.q, or nothing; after the steps, at their end.
template <class S, class Stepper>
TETHER_HD bool hmc_integrate(const S& sys, const Stepper& stepper, PhaseState<S>& s, Real h, int steps,
                             const NewtonOptions& opt, ForceCarry<S>& carry) {
  for (int k = 0; k < steps; ++k) {
    int iterations = 0;
    if (hmc_step(sys, stepper, s, h, opt, iterations, carry) != Status::ok) return false;
  }
  return true;
}

// Where a chain waits while its proposal is integrated: in memory, so that
// a thread's registers hold one state, the integrating one. The chain's
// state (q, and the refreshed p that a rejection reverses) and the forward
// pass's end (the proposal, while the backward pass checks it) are stored
// here and read back through volatile loads, which the compiler cannot answer
// from the registers it stored them from; held in registers, the two states
// spilled chain4's kernels (0.7-1.6 KB per thread). Component c at [c * stride].
struct ChainSlot {
  Real *q, *p;                    // the chain's state
  Real *proposal_q, *proposal_p;  // the proposal's
  std::int64_t stride;
  Real* tree = nullptr;  // a dynamic trajectory's vectors (DynamicTree), vector k at tree + k dof stride

  TETHER_HD Real* tree_vector(int k, int dof) const { return tree + std::int64_t(k) * dof * stride; }

  template <int N>
  TETHER_HD void put(Real* a, const Vec<N>& x) const {
    for (int c = 0; c < N; ++c) a[c * stride] = x[c];
  }
  template <int N>
  TETHER_HD Vec<N> get(const Real* a) const {
    const volatile Real* from = a;
    Vec<N> x;
    for (int c = 0; c < N; ++c) x[c] = from[c * stride];
    return x;
  }
};

// One transition of chain `chain` at iteration `iteration` from its state in
// `slot` (q on N; p the last momentum, used only by a partial refresh), with
// base step size h; the state after it is left in the slot.
template <class S, class Stepper>
TETHER_HD HmcDraw hmc_transition(const S& sys, const Stepper& stepper, const HmcControl& ctl, Real h,
                                 std::uint64_t chain, std::uint64_t iteration, const ChainSlot& slot) {
  constexpr int n = S::dof;
  CounterRng rng(ctl.seed, chain, iteration + 1);
  HmcDraw d;
  d.step_size = h * (1 + ctl.step_jitter * (2 * rng.uniform() - 1));
  const int spread = static_cast<int>(ctl.steps_jitter * ctl.steps);
  const int extra = static_cast<int>(floor((2 * spread + 1) * rng.uniform())) - spread;
  d.steps = ctl.steps + extra > 1 ? ctl.steps + extra : 1;

  // 1. Momentum: xi ~ N(0, kT M), onto T*_q N.
  PhaseState<S> x;
  x.q = slot.get<n>(slot.q);
  const Vec<n> fresh = thermal_momentum(sys, ctl.temperature, rng);
  const Real keep = ctl.refresh_cos, mix = sqrt(1 - keep * keep);
  const Vec<n> last = slot.get<n>(slot.p);
  x.p = keep * last + mix * fresh;
  const Real u = rng.uniform();  // drawn here so that every outcome consumes the same stream
  if (ctl.project_momentum && project_momentum(sys, x.q, x.p) != Status::ok) {
    d.outcome = HmcOutcome::newton;
    d.energy = total_energy(sys, x.q, last);
    return d;
  }
  slot.put<n>(slot.p, x.p);
  const Real energy0 = total_energy(sys, x.q, x.p);
  x.q_prev = x.q;

  // 2. L steps forwards; 3. the same L steps back from (q', -p') must return
  // to q. Both passes go through one call of hmc_integrate, so a kernel holds
  // one copy of the step, not two.
  Real energy1 = 0;
  bool ok = true;
  HmcOutcome why = HmcOutcome::newton;
  const int passes = ctl.check_reversibility ? 2 : 1;
  ForceCarry<S> force;  // the backward pass starts where the forward one ended, at the same q
  for (int pass = 0; ok && pass < passes; ++pass) {
    ok = hmc_integrate(sys, stepper, x, d.step_size, d.steps, ctl.newton, force);
    if (ok && pass == 0) {
      energy1 = total_energy(sys, x.q, x.p);
      ok = is_finite(energy1);
      slot.put<n>(slot.proposal_q, x.q);
      slot.put<n>(slot.proposal_p, x.p);
      x.p = -x.p;
    }
  }
  if (ok && passes == 2 &&
      !(max_abs(Vec<n>(x.q - slot.get<n>(slot.q))) <= ctl.reversibility_tolerance * sys.length_scale())) {
    ok = false;
    why = HmcOutcome::reversibility;
  }

  // 4. Metropolis on H; 5. momentum reversal on rejection.
  if (ok) {
    const Real dh = (energy1 - energy0) / ctl.temperature;
    d.acceptance = dh <= 0 || !ctl.metropolis ? Real(1) : exp(-dh);
    if (u < d.acceptance) {
      slot.put<n>(slot.q, slot.get<n>(slot.proposal_q));
      slot.put<n>(slot.p, slot.get<n>(slot.proposal_p));
      d.energy = energy1;
      return d;
    }
    why = HmcOutcome::metropolis;
  }
  d.outcome = why;
  slot.put<n>(slot.p, Vec<n>(-slot.get<n>(slot.p)));
  d.energy = energy0;
  return d;
}

// ---------------------------------------------------------------------------
// Dynamic integration time: multinomial HMC with the generalised no-U-turn
// criterion, Bet17 App. A (after HG14 Algorithm 3, Bet13), on T*N as the
// static transition is: from (q, p0), p0 drawn and projected as in step 1,
//   1. the trajectory doubles, each time in a direction d = +-1 drawn
//      uniformly: a new subtree of 2^j steps of Psi_h continues from the
//      trajectory's end in that direction (backwards in time: Psi_h from
//      (q, -p), its states' momenta flipped back);
//   2. every step is checked for reversibility as the static transition's
//      trajectory is (one step back from (q', -p') must return to q, LRS19,
//      ZHG18): where Newton finds another root backwards, the step is not an
//      involution and the subtree is dropped;
//   3. each state z of the trajectory weighs w(z) = exp(-(H(z) - H0)/kT); the
//      subtree's candidate is drawn among its states with probability
//      proportional to w (uniform progressive sampling, state by state), and
//      replaces the trajectory's with probability min(1, W_sub / W_old)
//      (biased progressive sampling, App. A.3.2);
//   4. growth stops when the trajectory turns back (the criterion below on the
//      whole trajectory, after merging), when the new subtree or any subtree
//      of it turns back, a step fails or diverges (these drop the subtree), or
//      at max_depth doublings.
// The generalised criterion (Bet17 App. A.4.2): a trajectory from state a to
// state b whose momenta sum to rho turns back when M^-1 p_a . rho <= 0 or
// M^-1 p_b . rho <= 0. The momenta lie in T*N (each state's projected p), so
// M^-1 p is a velocity tangent to N: the criterion is the manifold's own.
// Subtrees are checked iteratively (as NumPyro and BlackJAX do): after leaf n
// of a subtree, the subtrees that leaf closes, found from n's bits, against
// checkpoints of (p, running sum) kept at their first leaves (one per level).

// The vectors a chain keeps while its dynamic trajectory grows, each of
// S::dof components (ChainSlot::tree).
struct DynamicTree {
  enum : int {
    left_q, left_p, right_q, right_p,  // the trajectory's ends, momenta forwards in time
    sub_q, sub_p,                      // the new subtree's candidate
    rho, sub_rho,                      // sums of momenta: the trajectory's, the subtree's so far
    from_q,                            // the state a step starts from, for its reversibility check
    checkpoints                        // then max_depth each of: a subtree's first momentum, the
                                       // running sum there, the momentum of the leaf before it
  };
  static constexpr int vectors(int max_depth) { return checkpoints + 3 * max_depth; }
};

// The generalised no-U-turn criterion (above): true when the trajectory
// from the state with momentum p_a to the one with p_b, momenta summing to
// rho, turns back.
template <class S>
TETHER_HD bool turns_back(const S& sys, const Vec<S::dof>& p_a, const Vec<S::dof>& p_b, const Vec<S::dof>& rho) {
  return !(sys.inverse_mass_times(p_a).dot(rho) > 0) || !(sys.inverse_mass_times(p_b).dot(rho) > 0);
}

// A trajectory merged from a half A and a half B grown on from it, each of
// two or more states (A's ends: a_first away from B, a_last beside it; B's:
// b_first beside A, b_last away): besides the whole, Stan's extra checks
// (Mici's do_extra_subtree_checks), on A with B's first state and on B with
// A's last, which catch the U-turns the whole misses at resonant step sizes
// (on Gaussian targets).
template <class S>
TETHER_HD bool merge_turns_back(const S& sys, const Vec<S::dof>& a_first, const Vec<S::dof>& a_last,
                                const Vec<S::dof>& a_rho, const Vec<S::dof>& b_first, const Vec<S::dof>& b_last,
                                const Vec<S::dof>& b_rho) {
  return turns_back(sys, a_first, b_first, Vec<S::dof>(a_rho + b_first)) ||
         turns_back(sys, a_last, b_last, Vec<S::dof>(b_rho + a_last));
}

// log(exp(a) + exp(b)), a = -inf allowed.
TETHER_HD inline Real log_add_exp(Real a, Real b) {
  const Real hi = a > b ? a : b, lo = a > b ? b : a;
  return hi + log1p(exp(lo - hi));
}

// Leaf n of a subtree closes the subtrees whose first leaves hold
// checkpoints lo .. hi (lo > hi: none); an even leaf opens checkpoint hi.
TETHER_HD inline void closed_subtrees(int n, int& lo, int& hi) {
  hi = 0;
  for (int m = n >> 1; m != 0; m >>= 1) hi += m & 1;  // set bits above the lowest
  int trailing = 0;
  for (int m = n; (m & 1) != 0; m >>= 1) ++trailing;  // subtrees ending at leaf n
  lo = hi - trailing + 1;
}

// One dynamic transition of the chain in `slot` (hmc_transition's stream
// and momentum, then the trajectory above); d.steps: the steps taken, a
// failed one included; d.acceptance: their mean min(1, exp(-(H - H0)/kT)),
// 0 for a failed or irreversible step (what dual averaging adapts to, as
// Stan's accept_stat__, where a divergent step counts about 0); d.tree_depth:
// the subtrees merged (Stan's treedepth__: a dropped one is not counted);
// d.outcome: why growth stopped.
template <class S, class Stepper>
TETHER_HD HmcDraw dynamic_transition(const S& sys, const Stepper& stepper, const HmcControl& ctl, Real h,
                                     std::uint64_t chain, std::uint64_t iteration, const ChainSlot& slot) {
  constexpr int n = S::dof;
  using V = Vec<n>;
  using T = DynamicTree;
  CounterRng rng(ctl.seed, chain, iteration + 1);
  HmcDraw d;
  d.step_size = h * (1 + ctl.step_jitter * (2 * rng.uniform() - 1));
  rng.uniform();  // the static transition's L jitter: the momentum below is its momentum
  d.steps = 0;

  PhaseState<S> x;
  x.q = slot.get<n>(slot.q);
  x.p = thermal_momentum(sys, ctl.temperature, rng);
  if (ctl.project_momentum && project_momentum(sys, x.q, x.p) != Status::ok) {
    d.outcome = HmcOutcome::newton;
    d.energy = total_energy(sys, x.q, slot.get<n>(slot.p));
    return d;
  }
  const Real energy0 = total_energy(sys, x.q, x.p);
  auto vec = [&](int k) { return slot.tree_vector(k, n); };
  auto put = [&](int k, const V& y) { slot.put<n>(vec(k), y); };
  auto get = [&](int k) { return slot.get<n>(vec(k)); };
  const int ckpt_p = T::checkpoints, ckpt_rho = ckpt_p + ctl.max_depth, ckpt_prev = ckpt_rho + ctl.max_depth;
  put(T::left_q, x.q), put(T::left_p, x.p), put(T::right_q, x.q), put(T::right_p, x.p), put(T::rho, x.p);
  slot.put<n>(slot.proposal_q, x.q);
  slot.put<n>(slot.proposal_p, x.p);
  Real proposal_energy = energy0, log_weight = 0, accept_sum = 0;
  d.outcome = HmcOutcome::max_depth;

  for (int depth = 0; depth < ctl.max_depth; ++depth) {
    const Real dir = rng.uniform() < Real(0.5) ? Real(-1) : Real(1);
    const int end_q = dir > 0 ? T::right_q : T::left_q, end_p = dir > 0 ? T::right_p : T::left_p;
    const int far_p = dir > 0 ? T::left_p : T::right_p;
    x.q = get(end_q);
    x.p = dir * get(end_p);  // integrating backwards in time: forwards from the flipped momentum
    x.q_prev = x.q;
    const int leaves = 1 << depth;
    ForceCarry<S> at_end;  // grad V at the growing end, x.q: each step's end is the next one's start
    Real sub_log_weight = -INFINITY, sub_energy = 0;
    bool dropped = false;
    for (int leaf = 0; leaf < leaves && !dropped; ++leaf) {
      int lo = 0, hi = 0;
      closed_subtrees(leaf, lo, hi);
      // An even leaf opens checkpoint hi: the momentum before it is the end's (leaf 0: the trajectory's).
      if (leaf % 2 == 0) put(ckpt_prev + hi, get(end_p));
      // One step, then its reversibility check from (q', -p').
      put(T::from_q, x.q);
      int iterations = 0;
      ++d.steps;
      if (hmc_step(sys, stepper, x, d.step_size, ctl.newton, iterations, at_end) != Status::ok) {
        d.outcome = HmcOutcome::newton;
        dropped = true;
        break;
      }
      const V forward_p = dir * x.p;
      put(end_q, x.q), put(end_p, forward_p);
      if (ctl.check_reversibility) {
        x.p = -x.p;
        x.q_prev = x.q;
        ForceCarry<S> at_check = at_end;  // the check starts where the step ended
        const bool back = hmc_step(sys, stepper, x, d.step_size, ctl.newton, iterations, at_check) == Status::ok &&
                          max_abs(V(x.q - get(T::from_q))) <= ctl.reversibility_tolerance * sys.length_scale();
        if (!back) {
          d.outcome = HmcOutcome::reversibility;
          dropped = true;
          break;
        }
        x.q = get(end_q);
        x.p = dir * forward_p;
      }
      x.q_prev = x.q;
      const Real energy = total_energy(sys, x.q, forward_p);
      const Real excess = (energy - energy0) / ctl.temperature;
      accept_sum += excess <= 0 ? Real(1) : excess > 0 ? exp(-excess) : Real(0);  // 0 for a NaN energy
      if (!(excess <= ctl.max_energy_error)) {
        d.outcome = HmcOutcome::divergence;
        dropped = true;
        break;
      }
      // Uniform progressive sampling within the subtree.
      const Real w = ctl.multinomial ? -excess : Real(0);
      const Real sum = log_add_exp(sub_log_weight, w);
      if (rng.uniform() < exp(w - sum)) {
        put(T::sub_q, x.q), put(T::sub_p, forward_p);
        sub_energy = energy;
      }
      sub_log_weight = sum;
      // The subtrees this leaf closes, each with Stan's extra checks when it
      // is a merge of two halves of two or more states (merge_turns_back).
      const V running = (leaf == 0 ? V(V::Zero()) : get(T::sub_rho)) + forward_p;
      put(T::sub_rho, running);
      if (leaf % 2 == 0) put(ckpt_p + hi, forward_p), put(ckpt_rho + hi, running);
      for (int k = hi; ctl.check_subtrees && k >= lo && !dropped; --k) {
        const V p_k = get(ckpt_p + k), before_k = get(ckpt_rho + k) - p_k;
        bool turned = turns_back(sys, p_k, forward_p, V(running - before_k));
        if (!turned && k < hi) {  // halves: from checkpoint k, and from checkpoint k + 1 to this leaf
          const V p_mid = get(ckpt_p + k + 1), before_mid = get(ckpt_rho + k + 1) - p_mid;
          turned = merge_turns_back(sys, p_k, get(ckpt_prev + k + 1), V(before_mid - before_k), p_mid, forward_p,
                                    V(running - before_mid));
        }
        if (turned) {
          d.outcome = HmcOutcome::u_turn;
          dropped = true;
        }
      }
    }
    if (dropped) break;

    // Biased progressive sampling between the trajectory and the new subtree, then the merge.
    const Real take = sub_log_weight >= log_weight ? Real(1) : exp(sub_log_weight - log_weight);
    if (rng.uniform() < take) {
      slot.put<n>(slot.proposal_q, get(T::sub_q));
      slot.put<n>(slot.proposal_p, get(T::sub_p));
      proposal_energy = sub_energy;
    }
    log_weight = log_add_exp(log_weight, sub_log_weight);
    d.tree_depth = depth + 1;
    const V old_rho = get(T::rho), sub_rho = get(T::sub_rho), rho = old_rho + sub_rho;
    put(T::rho, rho);
    // The whole trajectory, and with check_subtrees Stan's extra checks
    // (the old trajectory's inner end and the subtree's first state are checkpoint 0's).
    if (turns_back(sys, get(far_p), get(end_p), rho) ||
        (ctl.check_subtrees && depth > 0 &&
         merge_turns_back(sys, get(far_p), get(ckpt_prev), old_rho, get(ckpt_p), get(end_p), sub_rho))) {
      d.outcome = HmcOutcome::u_turn;
      break;
    }
  }

  d.acceptance = d.steps > 0 ? accept_sum / Real(d.steps) : Real(0);
  slot.put<n>(slot.q, slot.get<n>(slot.proposal_q));
  slot.put<n>(slot.p, slot.get<n>(slot.proposal_p));
  d.energy = proposal_energy;
  return d;
}

// A step size for a new metric, as Stan finds one after each metric window
// (base_hmc::init_stepsize: HG14 Algorithm 4, with Stan's threshold 0.8 on
// exp(Delta) where HG14 take 0.5): from
// h, one step of Psi_h with a fresh momentum from the chain's q, and
// Delta = (H0 - H1)/kT; then, on the side of log 0.8 where that Delta fell,
// one step after another, each with a fresh momentum, h doubling (above) or
// halving (below) until a step's Delta crosses it; that h is kept. A failed
// step or solve counts as Delta = -inf (too large a step). At most 64
// doublings or halvings. The chain does not move; its momenta come from
// block 2^31 of iteration k's substream, which no transition reaches.
template <class S, class Stepper>
TETHER_HD Real reasonable_step_size(const S& sys, const Stepper& stepper, const HmcControl& ctl, Real h,
                                    std::uint64_t chain, std::uint64_t iteration, const ChainSlot& slot) {
  constexpr int n = S::dof;
  CounterRng rng(ctl.seed, chain, iteration + 1, std::uint32_t(1) << 31);
  const Real threshold = log(Real(0.8));
  int direction = 0;
  for (int trial = 0; trial <= 64; ++trial) {
    PhaseState<S> x;
    x.q = slot.get<n>(slot.q);
    x.p = thermal_momentum(sys, ctl.temperature, rng);
    Real delta = -std::numeric_limits<Real>::infinity();
    if (project_momentum(sys, x.q, x.p) == Status::ok) {
      const Real energy0 = total_energy(sys, x.q, x.p);
      x.q_prev = x.q;
      int iterations = 0;
      ForceCarry<S> force;
      if (hmc_step(sys, stepper, x, h, ctl.newton, iterations, force) == Status::ok) {
        const Real energy1 = total_energy(sys, x.q, x.p);
        if (is_finite(energy1)) delta = (energy0 - energy1) / ctl.temperature;
      }
    }
    if (direction == 0) {
      direction = delta > threshold ? 1 : -1;
      continue;
    }
    if (direction == 1 ? !(delta > threshold) : !(delta < threshold)) break;
    if (trial < 64) h = direction == 1 ? 2 * h : h / 2;
  }
  return h;
}

// Step-size adaptation by dual averaging, HG14 §3.2.1 eq. (6), with the
// constants of their Algorithm 5: gamma = 0.05, t0 = 10, kappa = 0.75,
// mu = log(10 h0). After the m-th warm-up transition with acceptance alpha,
//   Hbar_m = (1 - 1/(m + t0)) Hbar_(m-1) + (delta - alpha)/(m + t0),
//   log h_m = mu - sqrt(m)/gamma Hbar_m,
//   log hbar_m = m^-kappa log h_m + (1 - m^-kappa) log hbar_(m-1);
// sampling then uses hbar at the end of warm-up.
struct DualAveraging {
  Real log_h_bar = 0;  // log hbar_m
  Real h_bar = 0;      // Hbar_m
  TETHER_HD void update(Real mu, Real delta, std::int64_t m, Real alpha, Real& h) {
    const Real t0 = 10, gamma = Real(0.05), kappa = Real(0.75);
    const Real w = Real(1) / (Real(m) + t0);
    h_bar = (1 - w) * h_bar + w * (delta - alpha);
    const Real log_h = mu - sqrt(Real(m)) / gamma * h_bar;
    const Real eta = pow(Real(m), -kappa);
    log_h_bar = eta * log_h + (1 - eta) * log_h_bar;
    h = exp(log_h);
  }
};

// A batch of chains in structure-of-arrays storage (component c of chain i at
// [c * count + i], as EnsembleView), with room for `draw_count` draws each:
// component c of draw d of chain i at [(d * dof + c) * count + i].
struct SampleView {
  std::int64_t count = 0;
  std::int64_t first_chain = 0;  // global id of chain 0 of the batch (its random stream)
  Real* q = nullptr;
  Real* p = nullptr;
  Real* proposal_q = nullptr;  // each chain's proposal while it is checked (ChainSlot)
  Real* proposal_p = nullptr;
  Real* step_size = nullptr;  // per chain: adapted during warm-up, then fixed
  Real* log_h_bar = nullptr;  // dual averaging's state (DualAveraging)
  Real* h_bar = nullptr;
  std::int64_t draw_count = 0;
  Real* draw_q = nullptr;
  Real* draw_potential = nullptr;
  Real* draw_acceptance = nullptr;
  Real* draw_energy = nullptr;
  Real* draw_step_size = nullptr;
  std::int32_t* draw_steps = nullptr;
  std::uint8_t* draw_outcome = nullptr;
  std::uint8_t* draw_tree_depth = nullptr;
  Real* tree = nullptr;  // dynamic: DynamicTree::vectors(max_depth) x dof per chain (ChainSlot::tree)
  Real* metric = nullptr;  // a metric other than the mass: MetricLayout::size per chain
};

// Which iterations a call runs: [first, first + iterations) of the chain's
// warmup + draws x thin; warm-up iterations adapt the step size, every
// thin-th iteration after them is stored, draw index (k - warmup) / thin -
// first_draw in the view.
struct SamplePlan {
  std::int64_t first = 0, iterations = 0;
  std::int64_t warmup = 0, thin = 1, first_draw = 0;
  Real mu = 0;                    // dual averaging's log(10 h0)
  Real target_acceptance = Real(0.8);
  MetricWindows windows;          // where a diag or dense metric is estimated
};

// One transition of either algorithm.
template <class S, class Stepper>
TETHER_HD HmcDraw transition(const S& sys, const Stepper& stepper, const HmcControl& ctl, Real h, std::uint64_t chain,
                             std::uint64_t iteration, const ChainSlot& slot) {
  return ctl.dynamic ? dynamic_transition(sys, stepper, ctl, h, chain, iteration, slot)
                     : hmc_transition(sys, stepper, ctl, h, chain, iteration, slot);
}

template <class S, class Stepper>
TETHER_HD TETHER_ONE_COPY void run_chain(const S& sys, const Stepper& stepper, const HmcControl& ctl,
                                         const SamplePlan& plan, const SampleView& v, std::int64_t i) {
  constexpr int n = S::dof;
  const ChainSlot slot{v.q + i, v.p + i, v.proposal_q + i, v.proposal_p + i, v.count, v.tree + i};
  Real h = v.step_size[i];
  DualAveraging da{v.log_h_bar[i], v.h_bar[i]};
  const std::uint64_t chain = static_cast<std::uint64_t>(v.first_chain + i);
  const MetricLayout layout = MetricLayout::of(ctl.metric, n);
  Real* const metric = layout.size > 0 ? v.metric + i : nullptr;
  const bool adapts = ctl.metric == MetricKind::diag || ctl.metric == MetricKind::dense;
  for (std::int64_t k = plan.first; k < plan.first + plan.iterations; ++k) {
    const std::uint64_t iteration = static_cast<std::uint64_t>(k);
    HmcDraw d;
    if constexpr (takes_metric<Stepper>) {
      if (metric != nullptr)
        d = transition(MetricSystem<S>{sys, ChainMetric{ctl.metric, metric + layout.values * v.count, v.count},
                                       ctl.temperature},
                       stepper, ctl, h, chain, iteration, slot);
      else
        d = transition(sys, stepper, ctl, h, chain, iteration, slot);
    } else {
      d = transition(sys, stepper, ctl, h, chain, iteration, slot);
    }
    if (k < plan.warmup) {
      const Real mu = adapts ? metric[layout.mu * v.count] : plan.mu;
      da.update(mu, plan.target_acceptance, k + 1 - (adapts ? plan.windows.restart_before(k) : 0), d.acceptance, h);
      std::int64_t start = 0, end = 0;
      if (adapts && plan.windows.window_of(k, start, end)) {
        metric_add_state(ctl.metric, layout, metric, v.count, slot.get<n>(slot.q), k - start + 1);
        if (k == end) {  // a new Sigma: a step size for it, and step-size adaptation restarts there (Stan's)
          if (!metric_end_window<n>(ctl.metric, layout, metric, v.count, end - start + 1, sys.length_scale()))
            metric[layout.fallbacks * v.count] += 1;
          if constexpr (takes_metric<Stepper>)
            h = reasonable_step_size(MetricSystem<S>{sys, ChainMetric{ctl.metric, metric + layout.values * v.count, v.count},
                                                     ctl.temperature},
                                     stepper, ctl, h, chain, iteration, slot);
          metric[layout.mu * v.count] = log(10 * h);
          da = DualAveraging{};
        }
      }
      if (k + 1 == plan.warmup) h = exp(da.log_h_bar);
      continue;
    }
    if ((k - plan.warmup) % plan.thin != 0) continue;
    const std::int64_t j = (k - plan.warmup) / plan.thin - plan.first_draw;
    const Vec<n> q = slot.get<n>(slot.q);
    for (int c = 0; c < n; ++c) v.draw_q[(j * n + c) * v.count + i] = q[c];
    v.draw_potential[j * v.count + i] = sys.potential(q);
    v.draw_acceptance[j * v.count + i] = d.acceptance;
    v.draw_energy[j * v.count + i] = d.energy;
    v.draw_step_size[j * v.count + i] = d.step_size;
    v.draw_steps[j * v.count + i] = d.steps;
    v.draw_outcome[j * v.count + i] = static_cast<std::uint8_t>(d.outcome);
    v.draw_tree_depth[j * v.count + i] = static_cast<std::uint8_t>(d.tree_depth);
  }
  v.step_size[i] = h;
  v.log_h_bar[i] = da.log_h_bar;
  v.h_bar[i] = da.h_bar;
}

}  // namespace tether

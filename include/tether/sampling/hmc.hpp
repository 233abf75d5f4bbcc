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
// Step-size warm-up: dual averaging, HG14 §3.2.1 eq. (6) (their Algorithm 5), per chain.
//
// Randomness: the draws of iteration k of chain c are a pure function of
// (seed, c, k) (Philox, counter block k + 1; block 0 is the initial state's
// stream), so chains are reproducible across backends, threads and batches.
#include <cstdint>

#include "tether/core/families.hpp"
#include "tether/core/random.hpp"
#include "tether/ensemble/view.hpp"
#include "tether/methods/projection.hpp"

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

// Why a proposal was not taken (0: it was). Stored per draw.
enum class HmcOutcome : std::uint8_t {
  accepted = 0,
  metropolis = 1,     // rejected by the Metropolis test
  newton = 2,         // a step's solve failed (forwards or backwards)
  reversibility = 3,  // the backward integration did not return to q
};
constexpr int hmc_outcome_count = 4;

inline const char* hmc_outcome_name(HmcOutcome o) {
  switch (o) {
    case HmcOutcome::accepted: return "accepted";
    case HmcOutcome::metropolis: return "metropolis";
    case HmcOutcome::newton: return "newton";
    case HmcOutcome::reversibility: return "reversibility";
  }
  return "unknown";
}

struct HmcControl {
  int steps = 10;                 // L, the method's steps per proposal
  Real step_jitter = 0;           // h drawn uniformly in h (1 +- step_jitter)
  Real steps_jitter = 0;          // L drawn uniformly in L (1 +- steps_jitter), at least 1
  Real temperature = 1;           // kT
  Real refresh_cos = 0;           // cos(a): 0 is a full refresh, near 1 keeps most of p
  Real reversibility_tolerance = 1e-8;  // |q_back - q|_inf / length scale
  NewtonOptions newton;
  std::uint64_t seed = 0;
  // Each stage of the transition can be switched off, only to show in the
  // tests that a sampler without it is wrong (the config cannot do it).
  bool project_momentum = true;
  bool check_reversibility = true;
  bool metropolis = true;
};

// What one transition reports.
struct HmcDraw {
  Real acceptance = 0;  // min(1, exp(-dH/kT)); 0 when a solve failed or the check rejected
  Real energy = 0;      // H of the state the chain is in after the transition
  Real step_size = 0;   // h used (after jitter)
  int steps = 0;        // L used (after jitter)
  HmcOutcome outcome = HmcOutcome::accepted;
};

// L steps of the stepper from s; false (s undefined) when a step fails.
template <class S, class Stepper>
TETHER_HD bool hmc_integrate(const S& sys, const Stepper& stepper, PhaseState<S>& s, Real h, int steps,
                             const NewtonOptions& opt) {
  for (int k = 0; k < steps; ++k) {
    int iterations = 0;
    if (stepper.step(sys, s, h, opt, iterations) != Status::ok) return false;
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
  Vec<n> xi;
  for (int c = 0; c < n; ++c) xi[c] = rng.normal();
  Vec<n> fresh = sqrt(ctl.temperature) * sys.sqrt_mass_times(xi);
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
  for (int pass = 0; ok && pass < passes; ++pass) {
    ok = hmc_integrate(sys, stepper, x, d.step_size, d.steps, ctl.newton);
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
};

template <class S, class Stepper>
TETHER_HD TETHER_ONE_COPY void run_chain(const S& sys, const Stepper& stepper, const HmcControl& ctl,
                                         const SamplePlan& plan, const SampleView& v, std::int64_t i) {
  constexpr int n = S::dof;
  const ChainSlot slot{v.q + i, v.p + i, v.proposal_q + i, v.proposal_p + i, v.count};
  Real h = v.step_size[i];
  DualAveraging da{v.log_h_bar[i], v.h_bar[i]};
  const std::uint64_t chain = static_cast<std::uint64_t>(v.first_chain + i);
  for (std::int64_t k = plan.first; k < plan.first + plan.iterations; ++k) {
    const HmcDraw d = hmc_transition(sys, stepper, ctl, h, chain, static_cast<std::uint64_t>(k), slot);
    if (k < plan.warmup) {
      da.update(plan.mu, plan.target_acceptance, k + 1, d.acceptance, h);
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
  }
  v.step_size[i] = h;
  v.log_h_bar[i] = da.log_h_bar;
  v.h_bar[i] = da.h_bar;
}

}  // namespace tether

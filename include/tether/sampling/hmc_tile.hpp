#pragma once
// hmc_transition and run_chain (hmc.hpp) for pairs that step in tiles (a
// chain's RATTLE and its compositions: methods/projection_tile.hpp), a lane
// per bead: line for line the same transition, on tile values X
// (tile::Thread<L> on a GPU, tile::Emulated<Real, L> on the cpu, one chain a
// tile). What differs from the one-thread transition is where a number is
// made, not which:
//   - bead b draws its own momentum normals, 3b .. 3b + 2 of the transition's
//     stream, from their counter blocks (CounterRng's block start), so the
//     momenta are the one-thread transition's to the bit;
//   - the energies are sums over the tile (tile::sum, chain.hpp's
//     tile_potential), in another order than the one-thread loops: a
//     chain's draws agree with the one-thread sampler's to roundoff, and
//     the cpu's with a GPU's as the two forms' arithmetic does.
// The chain's slot (its state and its proposal) is read and written bead by
// bead, each lane its own three components.
#include "tether/methods/projection_tile.hpp"
#include "tether/sampling/hmc.hpp"

namespace tether {

// A bead's three components of a slot's vector: component 3b + k at [(3b + k) stride].
template <class X>
TETHER_HD tile::Triple<X> load_beads(const Real* a, std::int64_t stride) {
  tile::Triple<X> r;
  const volatile Real* from = a;  // as ChainSlot::get: the value stored, not a register's copy
  for (int l = 0; l < tile::lanes_held<X>; ++l) {
    const int b = tile::lane_id<X>(l);
    tile::set_lane(r, l, tile::Triple<Real>{{from[3 * b * stride], from[(3 * b + 1) * stride], from[(3 * b + 2) * stride]}});
  }
  return r;
}
template <class X>
TETHER_HD void store_beads(Real* a, std::int64_t stride, const tile::Triple<X>& x) {
  for (int l = 0; l < tile::lanes_held<X>; ++l) {
    const int b = tile::lane_id<X>(l);
    const tile::Triple<Real> y = tile::lane_of(x, l);
    for (int k = 0; k < 3; ++k) a[(3 * b + k) * stride] = y.c[k];
  }
}

// Normals 3b .. 3b + 2 of the momentum draw of hmc_transition's stream: the
// normals follow two uniforms (block 0), a pair of them per block.
TETHER_HD inline tile::Triple<Real> bead_normals(std::uint64_t seed, std::uint64_t chain, std::uint64_t iteration,
                                                 int bead) {
  const int j = 3 * bead;
  CounterRng rng(seed, chain, iteration + 1, std::uint32_t(1 + j / 2));
  if (j % 2 != 0) rng.normal();  // normal j is the second of its pair
  tile::Triple<Real> x;
  for (int k = 0; k < 3; ++k) x.c[k] = rng.normal();
  return x;
}

// H = p.M^-1 p / 2 + V(q), summed over the tile.
template <class S, class X>
TETHER_HD Real tile_total_energy(const S& sys, const typename S::template Beads<X>& q,
                                 const typename S::template Beads<X>& p) {
  return Real(0.5) * tile::sum(dot(p, p / sys.prm.mass)) + sys.tile_potential(q);
}

// hmc_integrate.
template <class S, class M, class X>
TETHER_HD bool tile_hmc_integrate(const S& sys, const M& method, TileState<S, X>& s, Real h, int steps,
                                  const NewtonOptions& opt) {
  TileForceCarry<S, X> carry;  // the force at this pass's start is computed, then carried
  for (int k = 0; k < steps; ++k) {
    int iterations = 0;
    if (method.tile_step(sys, s, h, opt, iterations, carry) != Status::ok) return false;
  }
  return true;
}

// hmc_transition.
template <class S, class M, class X>
TETHER_HD HmcDraw tile_hmc_transition(const S& sys, const M& method, const HmcControl& ctl, Real h,
                                      std::uint64_t chain, std::uint64_t iteration, const ChainSlot& slot) {
  using B = typename S::template Beads<X>;
  constexpr int n = S::dof;
  CounterRng rng(ctl.seed, chain, iteration + 1);
  HmcDraw d;
  d.step_size = h * (1 + ctl.step_jitter * (2 * rng.uniform() - 1));
  const int spread = static_cast<int>(ctl.steps_jitter * ctl.steps);
  const int extra = static_cast<int>(floor((2 * spread + 1) * rng.uniform())) - spread;
  d.steps = ctl.steps + extra > 1 ? ctl.steps + extra : 1;

  // 1. Momentum: xi ~ N(0, kT M), onto T*_q N.
  TileState<S, X> x;
  x.q = load_beads<X>(slot.q, slot.stride);
  B xi;
  for (int l = 0; l < tile::lanes_held<X>; ++l)
    tile::set_lane(xi, l, bead_normals(ctl.seed, chain, iteration, tile::lane_id<X>(l)));
  const B fresh = sqrt(ctl.temperature) * (sqrt(sys.prm.mass) * xi);  // sys.sqrt_mass_times
  const Real keep = ctl.refresh_cos, mix = sqrt(1 - keep * keep);
  const B last = load_beads<X>(slot.p, slot.stride);
  x.p = keep * last + mix * fresh;
  // The uniform after the n normals: the first of the next block.
  const Real u = CounterRng(ctl.seed, chain, iteration + 1, std::uint32_t(1 + (n + 1) / 2)).uniform();
  if (ctl.project_momentum && tile_project_momentum<S, X>(sys, x.q, x.p) != Status::ok) {
    d.outcome = HmcOutcome::newton;
    d.energy = tile_total_energy<S, X>(sys, x.q, last);
    return d;
  }
  store_beads(slot.p, slot.stride, x.p);
  const Real energy0 = tile_total_energy<S, X>(sys, x.q, x.p);

  // 2. L steps forwards; 3. the same L steps back from (q', -p').
  Real energy1 = 0;
  bool ok = true;
  HmcOutcome why = HmcOutcome::newton;
  const int passes = ctl.check_reversibility ? 2 : 1;
  for (int pass = 0; ok && pass < passes; ++pass) {
    ok = tile_hmc_integrate(sys, method, x, d.step_size, d.steps, ctl.newton);
    if (ok && pass == 0) {
      energy1 = tile_total_energy<S, X>(sys, x.q, x.p);
      ok = is_finite(energy1);
      store_beads(slot.proposal_q, slot.stride, x.q);
      store_beads(slot.proposal_p, slot.stride, x.p);
      x.p = -x.p;
    }
  }
  if (ok && passes == 2 &&
      !(max_abs(B(x.q - load_beads<X>(slot.q, slot.stride))) <= ctl.reversibility_tolerance * sys.length_scale())) {
    ok = false;
    why = HmcOutcome::reversibility;
  }

  // 4. Metropolis on H; 5. momentum reversal on rejection.
  if (ok) {
    const Real dh = (energy1 - energy0) / ctl.temperature;
    d.acceptance = dh <= 0 || !ctl.metropolis ? Real(1) : exp(-dh);
    if (u < d.acceptance) {
      store_beads(slot.q, slot.stride, load_beads<X>(slot.proposal_q, slot.stride));
      store_beads(slot.p, slot.stride, load_beads<X>(slot.proposal_p, slot.stride));
      d.energy = energy1;
      return d;
    }
    why = HmcOutcome::metropolis;
  }
  d.outcome = why;
  store_beads(slot.p, slot.stride, B(-load_beads<X>(slot.p, slot.stride)));
  d.energy = energy0;
  return d;
}

// run_chain, lane 0 writing the chain's numbers (every lane holds them).
template <class S, class M, class X>
TETHER_HD TETHER_ONE_COPY void tile_run_chain(const S& sys, const M& method, const HmcControl& ctl,
                                              const SamplePlan& plan, const SampleView& v, std::int64_t i) {
  const ChainSlot slot{v.q + i, v.p + i, v.proposal_q + i, v.proposal_p + i, v.count};
  const bool first_lane = tile::lane_id<X>(0) == 0;
  Real h = v.step_size[i];
  DualAveraging da{v.log_h_bar[i], v.h_bar[i]};
  const std::uint64_t chain = static_cast<std::uint64_t>(v.first_chain + i);
  for (std::int64_t k = plan.first; k < plan.first + plan.iterations; ++k) {
    const HmcDraw d = tile_hmc_transition<S, M, X>(sys, method, ctl, h, chain, static_cast<std::uint64_t>(k), slot);
    if (k < plan.warmup) {
      da.update(plan.mu, plan.target_acceptance, k + 1, d.acceptance, h);
      if (k + 1 == plan.warmup) h = exp(da.log_h_bar);
      continue;
    }
    if ((k - plan.warmup) % plan.thin != 0) continue;
    const std::int64_t j = (k - plan.warmup) / plan.thin - plan.first_draw;
    const typename S::template Beads<X> q = load_beads<X>(slot.q, slot.stride);
    store_beads(v.draw_q + j * S::dof * v.count + i, v.count, q);
    const Real potential = sys.tile_potential(q);
    if (!first_lane) continue;
    v.draw_potential[j * v.count + i] = potential;
    v.draw_acceptance[j * v.count + i] = d.acceptance;
    v.draw_energy[j * v.count + i] = d.energy;
    v.draw_step_size[j * v.count + i] = d.step_size;
    v.draw_steps[j * v.count + i] = d.steps;
    v.draw_outcome[j * v.count + i] = static_cast<std::uint8_t>(d.outcome);
    v.draw_tree_depth[j * v.count + i] = 0;
  }
  if (!first_lane) return;
  v.step_size[i] = h;
  v.log_h_bar[i] = da.log_h_bar;
  v.h_bar[i] = da.h_bar;
}

}  // namespace tether

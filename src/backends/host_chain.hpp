#pragma once
// The chains of the host backends: cpu (all cores, the step code the GPU
// runs, in a tile where the pair steps in tiles, as a GPU does) and reference
// (serial, each step solved from the method's residual: ReferenceStepper).
// Both run host_chain, the step chosen at run time, so that a pair's sampler
// (its transitions, trees and metric adaptation) is compiled once for the two
// backends: as two types it was a quarter of RATTLE's generated unit twice.
// The canonical start replays `tether sample`'s RATTLE chain through the same
// function (engine/initial_state.hpp), which engine/check_system.cpp compiles
// once per system for both (engine/initial_state_extern.hpp).
#include <memory>

#include "backends/chain_runner.hpp"
#include "backends/reference/reference_backend.hpp"
#include "tether/sampling/hmc_tile.hpp"

namespace tether {

// A host chain's step: the method's own, or with `reference` the reference backend's.
template <class M>
struct HostChainStepper {
  M method;
  bool reference = false;
  // hmc_step hands the method's own step a carry for its end force; a
  // reference step leaves it as it is, empty.
  static constexpr bool carries_force = tether::carries_force<M>;

  template <class S>
  Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations,
              [[maybe_unused]] ForceCarry<S>* carry = nullptr) const {
    if (reference) return ReferenceStepper<M>{method}.step(sys, s, h, opt, iterations);
    if constexpr (tether::carries_force<M>) return method.step(sys, s, h, opt, iterations, carry);
    else return method.step(sys, s, h, opt, iterations);
  }
};

// Chain i of the batch v: in a tile (T = Real, one chain at a time) where the
// pair steps in tiles and the chain has the mass for metric and a static
// trajectory, else in one thread (a dynamic trajectory or another metric
// have no tile form yet, and the reference step has none).
template <class S, class M>
void host_chain(const S& sys, const HostChainStepper<M>& stepper, const HmcControl& ctl, const SamplePlan& plan,
                const SampleView& v, std::int64_t i) {
  if constexpr (SamplerMethodFor<M, S>) {
    if constexpr (runs_in_tile<S, M>)
      if (!stepper.reference && !ctl.dynamic && ctl.metric == MetricKind::mass)
        return tile_run_chain<S, M, tile::Emulated<Real, S::tile_lanes>>(sys, stepper.method, ctl, plan, v, i);
    run_chain(sys, stepper, ctl, plan, v, i);
  } else {
    throw std::logic_error(std::string(M::name) + " cannot run a Monte Carlo chain on " + S::name);
  }
}

template <class S, class M>
class HostChainRunner final : public ChainRunner {
 public:
  // cpu: the method's step on all cores; reference: the reference step, serially.
  HostChainRunner(const S& sys, const M& method, const HmcControl& ctl, bool reference)
      : sys_(sys), stepper_{method, reference}, ctl_(ctl) {}
  void run(HostChains& h, const SamplePlan& plan) override {
    const SampleView v = h.view();
#pragma omp parallel for schedule(dynamic, 16) if (!stepper_.reference && v.count > 1)
    for (std::int64_t i = 0; i < v.count; ++i) host_chain(sys_, stepper_, ctl_, plan, v, i);
  }
  double work_per_call() const override { return stepper_.reference ? 2e3 : 5e6; }

 private:
  S sys_;
  HostChainStepper<M> stepper_;
  HmcControl ctl_;
};

}  // namespace tether

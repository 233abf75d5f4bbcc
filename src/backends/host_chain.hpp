#pragma once
// The chains of the host backends: cpu (all cores, the step code the GPU
// runs, in a tile where the pair steps in tiles, as a GPU does) and reference
// (serial, each step solved from the method's residual: ReferenceStepper).
// Both run host_chain, the step chosen at run time, and its one-thread chain
// calls the step through a pointer (ChainStep): the sampler's transitions,
// trees and metric adaptation are compiled once per system, for every method
// and both backends, not once per pair and backend. The canonical start
// replays `tether sample`'s RATTLE chain through the same functions
// (engine/initial_state.hpp).
#include <stdexcept>
#include <string>

#include "backends/chain_runner.hpp"
#include "backends/reference/reference_backend.hpp"
#include "tether/sampling/hmc_tile.hpp"

namespace tether {

// A host chain's step: the method's own, or with `reference` the reference backend's.
template <class M>
struct HostChainStepper {
  M method;
  bool reference = false;

  // The carry goes to a method that keeps its end force; a reference step
  // leaves it as it is, empty.
  template <class S>
  Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations,
              [[maybe_unused]] ForceCarry<S>* carry = nullptr) const {
    if (reference) return ReferenceStepper<M>{method}.step(sys, s, h, opt, iterations);
    if constexpr (tether::carries_force<M>) return method.step(sys, s, h, opt, iterations, carry);
    else return method.step(sys, s, h, opt, iterations);
  }
};

// A host chain's step through a pointer to a HostChainStepper: run_chain with
// it (its transitions, trees and metric adaptation) depends on the system
// alone, so it is compiled once per system (host_chain_of_system) for every
// method that samples on it, not once per pair. A call per step costs nothing
// measurable beside a step's solves. Every step is handed the carry; a method
// that keeps no end force leaves it empty.
template <class S>
struct ChainStep {
  using Plain = Status (*)(const void*, const S&, PhaseState<S>&, Real, const NewtonOptions&, int&, ForceCarry<S>*);
  using Metric = Status (*)(const void*, const MetricSystem<S>&, PhaseState<MetricSystem<S>>&, Real,
                            const NewtonOptions&, int&, ForceCarry<MetricSystem<S>>*);
  const void* stepper;
  Plain plain;
  Metric metric;  // null for a method that takes no metric (the config refuses one)
  static constexpr bool carries_force = true;
  static constexpr bool takes_metric = true;
  // (A step without a carry is hmc_step's GPU branch, never taken here.)

  Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations,
              ForceCarry<S>* carry = nullptr) const {
    return plain(stepper, sys, s, h, opt, iterations, carry);
  }
  Status step(const MetricSystem<S>& sys, PhaseState<MetricSystem<S>>& s, Real h, const NewtonOptions& opt,
              int& iterations, ForceCarry<MetricSystem<S>>* carry = nullptr) const {
    return metric(stepper, sys, s, h, opt, iterations, carry);
  }
};

// HostChainStepper<M>'s step on system Sys, as ChainStep calls it.
template <class M, class Sys>
Status step_through(const void* stepper, const Sys& sys, PhaseState<Sys>& s, Real h, const NewtonOptions& opt,
                    int& iterations, ForceCarry<Sys>* carry) {
  return static_cast<const HostChainStepper<M>*>(stepper)->step(sys, s, h, opt, iterations, carry);
}

// The one-thread chain of every method on S (engine/check_system.cpp
// compiles it for the registry's systems, declared extern elsewhere:
// engine/initial_state_extern.hpp).
template <class S>
void host_chain_of_system(const S& sys, const ChainStep<S>& step, const HmcControl& ctl, const SamplePlan& plan,
                          const SampleView& v, std::int64_t i) {
  if constexpr (SamplerMethodFor<Rattle, S>) {  // every system any method samples on
    if (ctl.metric != MetricKind::mass && step.metric == nullptr)
      throw std::logic_error("this method cannot run a chain with a metric");
    run_chain(sys, step, ctl, plan, v, i);
  } else {
    throw std::logic_error(std::string(S::name) + " has no Monte Carlo chain");
  }
}

// Chain i of the batch v: in a tile (T = Real, one chain at a time) where the
// pair steps in tiles and the chain has the mass for metric and a static
// trajectory, else in one thread (a dynamic trajectory or another metric
// have no tile form yet, and the reference step has none).
template <class S, class M>
void host_chain(const S& sys, const HostChainStepper<M>& stepper, const HmcControl& ctl, const SamplePlan& plan,
                const SampleView& v, std::int64_t i) {
  if constexpr (SamplerMethodFor<M, S>) {
    static_assert(SamplerMethodFor<Rattle, S>, "host_chain_of_system<S> runs every method that samples on S");
    if constexpr (runs_in_tile<S, M>)
      if (!stepper.reference && !ctl.dynamic && ctl.metric == MetricKind::mass)
        return tile_run_chain<S, M, tile::Emulated<Real, S::tile_lanes>>(sys, stepper.method, ctl, plan, v, i);
    typename ChainStep<S>::Metric metric = nullptr;
    if constexpr (takes_metric<HostChainStepper<M>>) metric = &step_through<M, MetricSystem<S>>;
    host_chain_of_system(sys, ChainStep<S>{&stepper, &step_through<M, S>, metric}, ctl, plan, v, i);
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

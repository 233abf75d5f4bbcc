#pragma once
// Declarations of a system's initial-state functions (engine/initial_state.hpp
// defines them). They depend on the system alone and are compiled once per
// system, in engine/check_system.cpp; the generated method units include only
// this header, so that they do not depend on what the definitions use (the
// RATTLE projection and the HMC chain of a canonical start): editing rattle.hpp
// rebuilds the units that step RATTLE, not every method's.
#include <cstdint>
#include <string>

#include "tether/methods/projection.hpp"  // PhaseState
#include "tether/engine/config.hpp"

namespace tether {

// Trajectory id's state at t = 0 on T*N, one pure function of (config, id):
// the same ensemble whatever the batch size, thread count or backend.
// `moved` receives how far an explicit state was projected (max-norm over q and p).
template <class S>
Status initial_state(const S& sys, const RunConfig& c, std::int64_t id, PhaseState<S>& s, Real& moved);

// Dimension checks on explicit states, and for holonomic systems their
// distance from T*N, as ConfigErrors.
template <class S>
void check_initial_states(const S& sys, const RunConfig& c);

// A temperature kT whose momenta N(0, kT M) have finite energies, as a ConfigError at `path`.
template <class S>
void check_temperature(const S& sys, Real kT, const std::string& path);

// A host backend's chain (backends/host_chain.hpp): the one-thread chain of
// every method on a system, and RATTLE's, which the canonical start runs too,
// compiled with the initial states and not again in the generated units.
struct Rattle;
struct HmcControl;
struct SamplePlan;
struct SampleView;
template <class M>
struct HostChainStepper;
template <class S>
struct ChainStep;
template <class S, class M>
void host_chain(const S& sys, const HostChainStepper<M>& stepper, const HmcControl& ctl, const SamplePlan& plan,
                const SampleView& v, std::int64_t i);
template <class S>
void host_chain_of_system(const S& sys, const ChainStep<S>& step, const HmcControl& ctl, const SamplePlan& plan,
                          const SampleView& v, std::int64_t i);

}  // namespace tether

// Instantiated once per system (engine/check_system.cpp, EXTERN empty) and
// declared extern in every generated method unit (EXTERN = extern), instead
// of compiled again for each method that pairs with the system (the chains:
// again for each method that samples on it).
#define TETHER_INITIAL_STATES(EXTERN, I)                                                               \
  EXTERN template ::tether::Status tether::initial_state<::tether::SystemAt<I>>(                       \
      const ::tether::SystemAt<I>&, const ::tether::RunConfig&, std::int64_t,                         \
      ::tether::PhaseState<::tether::SystemAt<I>>&, ::tether::Real&);                                 \
  EXTERN template void tether::check_initial_states<::tether::SystemAt<I>>(                          \
      const ::tether::SystemAt<I>&, const ::tether::RunConfig&);                                      \
  EXTERN template void tether::check_temperature<::tether::SystemAt<I>>(                             \
      const ::tether::SystemAt<I>&, ::tether::Real, const std::string&);                              \
  EXTERN template void tether::host_chain<::tether::SystemAt<I>, ::tether::Rattle>(                  \
      const ::tether::SystemAt<I>&, const ::tether::HostChainStepper<::tether::Rattle>&,               \
      const ::tether::HmcControl&, const ::tether::SamplePlan&, const ::tether::SampleView&, std::int64_t); \
  EXTERN template void tether::host_chain_of_system<::tether::SystemAt<I>>(                           \
      const ::tether::SystemAt<I>&, const ::tether::ChainStep<::tether::SystemAt<I>>&,                 \
      const ::tether::HmcControl&, const ::tether::SamplePlan&, const ::tether::SampleView&, std::int64_t);

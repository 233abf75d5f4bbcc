#pragma once
// The definitions behind engine/pair_entry.hpp: the configured system and
// method objects, and the backend, for one (system, method) pair. Included
// only by the generated per-method units, after their method's header.
#include <memory>
#include <stdexcept>
#include <string>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/reference/reference_backend.hpp"
#include "engine/compiled_step.hpp"
#include "engine/initial_state_extern.hpp"
#include "engine/runner.hpp"
#include "engine/sample_ensemble.hpp"
#include "engine/shoot_ensemble.hpp"
#include "engine/pair_entry.hpp"
#include "registry/parameter_io.hpp"
#include "tether/system_list.hpp"
#ifdef TETHER_HAVE_CUDA
#include "backends/cuda/cuda_backend.hpp"
#endif

namespace tether {

template <class S, class M>
std::unique_ptr<Backend> make_backend(const std::string& name, const S& sys, const M& method, const StepControl& ctl) {
  if (name == "cpu") return std::make_unique<CpuBackend<S, M>>(sys, method, ctl);
  if (name == "reference") return std::make_unique<ReferenceBackend<S, M>>(sys, method, ctl);
#ifdef TETHER_HAVE_CUDA
  if (name == "cuda") return make_cuda_backend<S, M>(sys, method, ctl);
#endif
  throw ConfigError("backend", "backend \"" + name + "\" is not available in this build");
}

[[noreturn]] inline void unpaired(const std::string& method, const std::string& system) {
  throw std::logic_error(method + " does not pair with " + system);
}

template <class S, class M>
RunResult run_pair(const RunConfig& c, const RunOptions& opt, const std::string& backend) {
  if constexpr (!MethodFor<M, S>) {
    unpaired(M::name, S::name);
  } else {
    // run() has checked the initial states (check_config) before it came here.
    const S sys = configured<S>(c.system_parameters, "system.parameters");
    const M method = configured<M>(c.method_config, "method");
    auto be = make_backend<S, M>(backend, sys, method, StepControl{c.dt, c.newton});
    RunResult r = run_ensemble<S, M>(sys, method, c, *be, opt);
    r.system = c.system_name;
    r.method = c.method_name;
    r.stages = c.stages;
    r.family = is_lagrangian<S> ? "lagrangian" : (is_nonholonomic<S> ? "nonholonomic" : "holonomic");
    r.backend = backend;
    return r;
  }
}

template <class S, class M>
ShootResult shoot_pair(const ShootConfig& c, const ShootOptions& opt, const std::string& backend) {
  if constexpr (!MethodFor<M, S>) {
    unpaired(M::name, S::name);
  } else if constexpr (!Index1System<S>) {
    throw ConfigError("system.name", "shooting applies to the index-1 systems only");
  } else {
    const S sys = configured<S>(c.run.system_parameters, "system.parameters");
    configured<M>(c.run.method_config, "method");  // validated; a shot needs the method's type alone
    return shoot_ensemble<S, M>(sys, c, backend, opt);
  }
}

template <class S, class M>
SampleResult sample_pair(const SampleConfig& c, const SampleOptions& opt, const std::string& backend) {
  if constexpr (!MethodFor<M, S>) {
    unpaired(M::name, S::name);
  } else if constexpr (!HolonomicSystem<S>) {
    throw ConfigError("system.name", "sampling applies to the holonomic systems only");
  } else {
    const S sys = configured<S>(c.run.system_parameters, "system.parameters");
    check_temperature(sys, c.sample.temperature, "sample.temperature");
    check_initial_states(sys, c.run);
    const M method = configured<M>(c.run.method_config, "method");
    if constexpr (!SamplerMethodFor<M, S>) {
      throw ConfigError("method.name", std::string(M::name) + " cannot run a Monte Carlo chain");
    } else {
      if (!symmetric_with_parameters(method))
        throw ConfigError("method", describe_method(c.run) + " is not symmetric with these parameters, so no "
                                    "proposal would pass the reversibility check");
      if (opt.check_only) return SampleResult{};
      SampleResult r = sample_ensemble<S, M>(sys, method, c, backend, opt);
      r.system = c.run.system_name;
      r.method = describe_method(c.run);
      r.backend = backend;
      return r;
    }
  }
}

}  // namespace tether

// For system I (registry index) with method tether::M: each generated unit
// names its methods tether::Method<j> and expands this for each of them with
// every system (TETHER_FOR_EACH_SYSTEM_WITH). Its CompiledStep is empty
// unless the pair shoots.
#define TETHER_INSTANTIATE_PAIR(I, M)                                                                    \
  static_assert(I < ::tether::Systems::size, "CMake counted more systems than tether/system_list.hpp lists"); \
  TETHER_INITIAL_STATES(extern, I)                                                                       \
  template ::tether::RunResult tether::run_pair<::tether::SystemAt<I>, ::tether::M>(                     \
      const ::tether::RunConfig&, const ::tether::RunOptions&, const std::string&);                      \
  template ::tether::ShootResult tether::shoot_pair<::tether::SystemAt<I>, ::tether::M>(                 \
      const ::tether::ShootConfig&, const ::tether::ShootOptions&, const std::string&);                  \
  template ::tether::SampleResult tether::sample_pair<::tether::SystemAt<I>, ::tether::M>(               \
      const ::tether::SampleConfig&, const ::tether::SampleOptions&, const std::string&);                \
  template struct tether::CompiledStep<::tether::SystemAt<I>, ::tether::M>;

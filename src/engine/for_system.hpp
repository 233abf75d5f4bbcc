#pragma once
// The definitions behind engine/system_entry.hpp: the configured system and
// method objects, and the backend, for one system S and whichever of its
// methods the config names. Included only by the generated per-system units.
#include <memory>
#include <stdexcept>
#include <string>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/reference/reference_backend.hpp"
#include "engine/initial_state.hpp"
#include "engine/runner.hpp"
#include "engine/sample_ensemble.hpp"
#include "engine/shoot_ensemble.hpp"
#include "engine/system_entry.hpp"
#include "registry/parameter_io.hpp"
#include "tether/registry.hpp"
#ifdef TETHER_HAVE_CUDA
#include "backends/cuda/cuda_backend.hpp"
#endif

namespace tether {

// A system or method with the parameters of its (validated) config object.
template <class T>
T configured(const nlohmann::json& object, const std::string& path) {
  T t{};
  const Node node(object, path);
  ReadParameters read(node);
  t.prm.describe(read);
  return t;
}

// fn(method): the configured method, one of those that pair with S.
template <class R, class S, int I = 0, class Fn>
R with_method(const RunConfig& c, Fn&& fn) {
  if constexpr (I == Methods::size) {
    throw std::logic_error(c.method_name + " does not pair with " + S::name);
  } else {
    if constexpr (MethodFor<MethodAt<I>, S>)
      if (c.method == I) return fn(configured<MethodAt<I>>(c.method_config, "method"));
    return with_method<R, S, I + 1>(c, std::forward<Fn>(fn));
  }
}

template <class S, class M>
std::unique_ptr<Backend> make_backend(const std::string& name, const S& sys, const M& method, const StepControl& ctl) {
  if (name == "cpu") return std::make_unique<CpuBackend<S, M>>(sys, method, ctl);
  if (name == "reference") return std::make_unique<ReferenceBackend<S, M>>(sys, method, ctl);
#ifdef TETHER_HAVE_CUDA
  if (name == "cuda") return make_cuda_backend<S>(sys, method, ctl);
#endif
  throw ConfigError("backend", "backend \"" + name + "\" is not available in this build");
}

template <class S>
void check_system(const RunConfig& c) {
  check_initial_states(configured<S>(c.system_parameters, "system.parameters"), c);
}

template <class S>
RunResult run_system(const RunConfig& c, const RunOptions& opt, const std::string& backend) {
  const S sys = configured<S>(c.system_parameters, "system.parameters");
  check_initial_states(sys, c);
  return with_method<RunResult, S>(c, [&](const auto& method) {
    using M = std::decay_t<decltype(method)>;
    auto be = make_backend<S, M>(backend, sys, method, StepControl{c.dt, c.newton});
    RunResult r = run_ensemble<S, M>(sys, method, c, *be, opt);
    r.system = c.system_name;
    r.method = c.method_name;
    r.stages = c.stages;
    r.family = is_lagrangian<S> ? "lagrangian" : (is_nonholonomic<S> ? "nonholonomic" : "holonomic");
    r.backend = backend;
    return r;
  });
}

template <class S>
ShootResult shoot_system(const ShootConfig& c, const ShootOptions& opt, const std::string& backend) {
  if constexpr (!Index1System<S>) {
    throw ConfigError("system.name", "shooting applies to the index-1 systems only");
  } else {
    const S sys = configured<S>(c.run.system_parameters, "system.parameters");
    return with_method<ShootResult, S>(c.run, [&](const auto& method) {
      return shoot_ensemble<S, std::decay_t<decltype(method)>>(sys, c, backend, opt);
    });
  }
}

template <class S>
SampleResult sample_system(const SampleConfig& c, const SampleOptions& opt, const std::string& backend) {
  if constexpr (!HolonomicSystem<S>) {
    throw ConfigError("system.name", "sampling applies to the holonomic systems only");
  } else {
    const S sys = configured<S>(c.run.system_parameters, "system.parameters");
    check_initial_states(sys, c.run);
    return with_method<SampleResult, S>(c.run, [&](const auto& method) -> SampleResult {
      using M = std::decay_t<decltype(method)>;
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
    });
  }
}

}  // namespace tether

#define TETHER_INSTANTIATE_SYSTEM(I)                                                                         \
  static_assert(I < ::tether::Systems::size, "CMake generated more units than tether/registry.hpp lists"); \
  template void tether::check_system<::tether::SystemAt<I>>(const ::tether::RunConfig&);                   \
  template ::tether::RunResult tether::run_system<::tether::SystemAt<I>>(                                  \
      const ::tether::RunConfig&, const ::tether::RunOptions&, const std::string&);                         \
  template ::tether::ShootResult tether::shoot_system<::tether::SystemAt<I>>(                              \
      const ::tether::ShootConfig&, const ::tether::ShootOptions&, const std::string&);                     \
  template ::tether::SampleResult tether::sample_system<::tether::SystemAt<I>>(                            \
      const ::tether::SampleConfig&, const ::tether::SampleOptions&, const std::string&);

#pragma once
// From a parsed config to the compiled (system, method) pair: with_system
// hands the configured system object to fn, with_method the method, only
// among the system's own family (the registry's lists).
#include <algorithm>
#include <type_traits>
#include <variant>

#include "config/config.hpp"
#include "engine/registry.hpp"

namespace tether {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

template <class Fn>
auto with_system(const RunConfig& c, Fn&& fn) {
  return std::visit(Overloaded{[&](const ChainSpec& spec) {
#define TETHER_DISPATCH_CHAIN(N)   \
  if (spec.beads == N) {           \
    Chain<N> s;                    \
    s.prm = spec.parameters;       \
    return fn(s);                  \
  }
                                 TETHER_FOR_EACH_CHAIN_SIZE(TETHER_DISPATCH_CHAIN)
#undef TETHER_DISPATCH_CHAIN
                                 throw ConfigError("system.parameters.beads", "no chain of this size is built");
                               },
                               [&](const RigidChainSpec& spec) {
#define TETHER_DISPATCH_RIGID_CHAIN(N) \
  if (spec.links == N) {               \
    RigidChain<N> s;                   \
    const auto& p = spec.parameters;   \
    std::copy(p.inertia, p.inertia + 3, s.prm.inertia); \
    s.prm.mass = p.mass;               \
    s.prm.length = p.length;           \
    s.prm.gravity = p.gravity;         \
    return fn(s);                      \
  }
                                 TETHER_FOR_EACH_RIGID_CHAIN_SIZE(TETHER_DISPATCH_RIGID_CHAIN)
#undef TETHER_DISPATCH_RIGID_CHAIN
                                 throw ConfigError("system.parameters.links", "no rigid chain of this size is built");
                               },
                               [&](const auto& sys) { return fn(sys); }},
                    c.system);
}

// Whether the configured method is M: its name, and the compile-time choice
// among its instantiations (stages, composition base).
template <class M>
bool method_matches(const RunConfig& c) {
  if (c.method_name != M::name) return false;
  if constexpr (requires { M::stages; }) return c.stages == M::stages;
  if constexpr (requires { M::base_name; }) return c.method.base == M::base_name;
  if constexpr (requires { M::retraction; }) return c.method.retraction == M::retraction;
  if constexpr (requires { typename M::Retraction; }) return c.method.retraction == M::Retraction::name;
  return true;
}

CompositionScheme composition_scheme(const std::string& name);
// The standard layer, bias and solver of `variational`; a ConfigError names a bad tableau.
Variational::Parameters variational_parameters(const MethodSpec& spec);
CompositionForm composition_form(const std::string& name);

// The method object with its runtime parameters from the config.
template <class M>
M make_method(const RunConfig& c) {
  M m{};
  if constexpr (requires { M::base_name; }) {
    m.prm.scheme = composition_scheme(c.method.scheme);
    m.prm.form = composition_form(c.method.form);
  } else if constexpr (std::is_same_v<M, ThetaRetraction>) {
    m.prm.theta = c.method.theta;
  } else if constexpr (std::is_same_v<M, Newmark>) {
    m.prm.gamma = c.method.gamma;
    m.prm.beta = c.method.beta;
  } else if constexpr (std::is_same_v<M, Variational>) {
    m.prm = variational_parameters(c.method);
  }
  return m;
}

// Only methods of the system's own family are instantiated with it.
template <class S, class Fn>
auto with_method(const RunConfig& c, Fn&& fn) {
#define TETHER_DISPATCH_METHOD(S_, M) \
  if (method_matches<M>(c)) return fn(make_method<M>(c));
  if constexpr (is_lagrangian<S>) {
    TETHER_FOR_EACH_LAGRANGIAN_METHOD(TETHER_DISPATCH_METHOD, void)
  } else if constexpr (is_nonholonomic<S> && holonomic_count<S> > 0) {
    TETHER_FOR_EACH_MIXED_METHOD(TETHER_DISPATCH_METHOD, void)
  } else if constexpr (is_nonholonomic<S>) {
    TETHER_FOR_EACH_NONHOLONOMIC_METHOD(TETHER_DISPATCH_METHOD, void)
  } else {
    TETHER_FOR_EACH_HOLONOMIC_METHOD(TETHER_DISPATCH_METHOD, void)
    if constexpr (requires { S::bodies; }) {
      TETHER_FOR_EACH_RIGID_METHOD(TETHER_DISPATCH_METHOD, void)
    }
    if constexpr (S::constraint_count == 0) {
      TETHER_FOR_EACH_UNCONSTRAINED_METHOD(TETHER_DISPATCH_METHOD, void)
    }
    if constexpr (std::is_same_v<S, SphericalPendulum>) {
      TETHER_FOR_EACH_SPHERE_METHOD(TETHER_DISPATCH_METHOD, void)
    }
  }
#undef TETHER_DISPATCH_METHOD
  throw ConfigError("method.name", "\"" + c.method_name + "\" does not apply to " + c.system_name);
}

}  // namespace tether

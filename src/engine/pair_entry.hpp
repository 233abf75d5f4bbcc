#pragma once
// The engine's entry points for one (system S, method M) pair and for one
// system. The pair's are defined in engine/for_pair.hpp and instantiated in
// the unit CMake generates for M's header from tether/registry.hpp
// (host_<method header>.cpp), for every system: those units compile in
// parallel, every pair is compiled once, and each includes its own method
// header alone. A system's initial-state check is in engine/check_system.cpp.
// engine.cpp dispatches to them by the config's registry indices.
#include <string>

#include "tether/core/families.hpp"
#include "tether/engine/run.hpp"
#include "tether/engine/sample.hpp"
#include "tether/engine/shooting.hpp"

namespace tether {

// Explicit states' dimensions and distance from the constraint manifold, for
// the config's system (check_system.cpp).
void check_system(const RunConfig& c);

// For a pair the registry does not allow, these throw std::logic_error (the
// config parser refuses such a pair before).
template <class S, class M>
RunResult run_pair(const RunConfig& c, const RunOptions& opt, const std::string& backend);
template <class S, class M>
ShootResult shoot_pair(const ShootConfig& c, const ShootOptions& opt, const std::string& backend);
template <class S, class M>
SampleResult sample_pair(const SampleConfig& c, const SampleOptions& opt, const std::string& backend);

// A pair's entry points, which engine.cpp calls: the built-in pairs' by
// registry indices, a declared system's from the library compiled for it
// (src/expr/compiled_pair.hpp). Null where the pair does not exist.
struct PairEntry {
  RunResult (*run)(const RunConfig&, const RunOptions&, const std::string&) = nullptr;
  ShootResult (*shoot)(const ShootConfig&, const ShootOptions&, const std::string&) = nullptr;
  SampleResult (*sample)(const SampleConfig&, const SampleOptions&, const std::string&) = nullptr;
};

template <class S, class M>
constexpr PairEntry pair_entry() {
  if constexpr (MethodFor<M, S>)
    return {&run_pair<S, M>, &shoot_pair<S, M>, &sample_pair<S, M>};
  else
    return {};
}

}  // namespace tether

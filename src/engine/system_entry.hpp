#pragma once
// The engine's entry points for one registered system S. Defined in
// engine/for_system.hpp and instantiated for each system in a unit CMake
// generates from tether/registry.hpp (host_system_<I>.cpp), so those units
// compile in parallel and every (system, method) pair is compiled once.
#include <string>

#include "tether/engine/run.hpp"
#include "tether/engine/sample.hpp"
#include "tether/engine/shooting.hpp"

namespace tether {

// Explicit states' dimensions and distance from the constraint manifold.
template <class S>
void check_system(const RunConfig& c);
template <class S>
RunResult run_system(const RunConfig& c, const RunOptions& opt, const std::string& backend);
template <class S>
ShootResult shoot_system(const ShootConfig& c, const ShootOptions& opt, const std::string& backend);
template <class S>
SampleResult sample_system(const SampleConfig& c, const SampleOptions& opt, const std::string& backend);

}  // namespace tether

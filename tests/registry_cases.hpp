#pragma once
// The registry's (system, method) pairs as test parameters: the one case
// list of the property suite (test_properties) and the cuda agreement suite
// (test_cuda). Built by registry_cases from each system's example config in
// configs/ and each method's declared defaults.
#include <cctype>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "tether/engine.hpp"

#ifndef TETHER_SOURCE_DIR
#error "TETHER_SOURCE_DIR must name the source tree (tests/CMakeLists.txt sets it)"
#endif

namespace tether {

inline void PrintTo(const RegistryCase& c, std::ostream* os) { *os << c.system_label << " / " << c.method_label; }

namespace test {

// configs/ of the source tree, or $TETHER_CONFIGS where the tests run away
// from the tree they were built in (scripts/gpu-check.sh).
inline std::string configs_dir() {
  const char* env = std::getenv("TETHER_CONFIGS");
  return env && *env ? std::string(env) : std::string(TETHER_SOURCE_DIR "/configs");
}

inline const std::vector<RegistryCase>& all_registry_cases() {
  static const std::vector<RegistryCase> cases = registry_cases(configs_dir());
  return cases;
}

// "chain16_gauss_legendre_2": a gtest parameter name.
inline std::string case_name(const RegistryCase& c) {
  std::string s = c.system_label + "_" + c.method_label;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

// The case's config with `steps` steps of its example's dt and, unless the
// example lists explicit states, `size` trajectories.
inline nlohmann::json case_config(const RegistryCase& c, std::int64_t steps, std::int64_t size,
                                  const std::string& backend) {
  nlohmann::json j = c.config;
  j["method"]["steps"] = steps;
  if (!c.explicit_states) j["ensemble"]["size"] = size;
  j["backend"] = backend;
  return j;
}

}  // namespace test
}  // namespace tether

#pragma once
// Every (system, method) pair the registry allows, each as a runnable config:
// the one case list of the property tests and the benchmark. A system's
// parameters, step size and initial ensemble come from its example config;
// a method's from its declaration (variant, defaults; a required choice takes
// its first option).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tether {

struct RegistryCase {
  int system = 0, method = 0;         // registry indices
  std::string system_label;           // chain16, rigid_chain2, kepler, ...
  std::string method_label;           // rattle, gauss_legendre_2, composition_rattle, ...
  std::string example;                // the example config it was built from
  nlohmann::json config;              // system, method (name, variant, parameters, dt, steps), ensemble
  bool explicit_states = false;       // ensemble.initial lists states: the size is theirs
};

// The example config of system `name` in `configs_dir`: <name>.json when it
// exists, else the first run config (by file name) whose system.name is
// `name`. Throws ConfigError naming the system when there is none.
std::string example_config_path(const std::string& configs_dir, const std::string& name);

// One case per allowed pair, in registry order (systems, then their methods).
// Throws ConfigError when an example is missing or a required method
// parameter has no choice to take.
std::vector<RegistryCase> registry_cases(const std::string& configs_dir);

}  // namespace tether

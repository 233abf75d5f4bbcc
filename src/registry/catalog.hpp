#pragma once
// The choice of a registry instantiation from a config's "system" and
// "method" objects, validated; the only host code that knows which systems
// and methods exist is catalog.cpp, behind this and tether/engine/catalog.hpp.
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "config/json_node.hpp"
#include "tether/engine/catalog.hpp"

namespace tether {

// The system a config's "system" object names (system.name, and for names
// with several instantiations the variant key in system.parameters), its
// parameters validated. Throws ConfigError naming the JSON path.
int choose_system(const Node& system);

// The method a config's "method" object names, among those that pair with
// `system`; `common` are the keys every method object may have (name, dt,
// ...). Its parameters are validated and their values written to
// `parameters`, in declaration order. Throws ConfigError.
int choose_method(const Node& method, const SystemInfo& system, const std::set<std::string>& common,
                  nlohmann::ordered_json& parameters);

}  // namespace tether

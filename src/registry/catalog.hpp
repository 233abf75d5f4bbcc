#pragma once
// The choice of a registry instantiation from a config's "system" and
// "method" objects, validated; the only host code that knows which systems
// and methods exist is catalog.cpp, behind this and tether/engine/catalog.hpp.
#include <memory>
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

struct DeclaredSystem;

// A built-in system at a size this build has no instantiation of (a chain of
// 5 or 32 beads, a rigid chain of 3 links), its parameters validated as the
// instantiated sizes read them: a system compiled when first used, as a
// declared one is (expr/compiled_pair.hpp). Null where the config names
// another system, or a size the build has. A size out of the range the
// system takes is a ConfigError at its path.
std::shared_ptr<const DeclaredSystem> resized_system(const Node& system);

// "3 to 64": the sizes of a system `resized_system` compiles on demand ("" for
// a system that has no size).
std::string sizes_compiled_at_first_use(const std::string& system_name);

// Whether this build compiled method's pairs into the engine (CMake's
// TETHER_METHOD_HEADERS; every method in a full build). Where it did not, the
// config reader takes the system as compiled_at_first_use gives it.
bool method_compiled_in(int method);

// Built-in system `system` (registry index) as a system compiled when first
// used, its own type with every method (expr/compiled_pair.hpp).
std::shared_ptr<const DeclaredSystem> compiled_at_first_use(int system);

// The method a config's "method" object names, among those that pair with
// `system`; `common` are the keys every method object may have (name, dt,
// ...). Its parameters are validated and their values written to
// `parameters`, in declaration order. Throws ConfigError.
int choose_method(const Node& method, const SystemInfo& system, const std::set<std::string>& common,
                  nlohmann::ordered_json& parameters);

}  // namespace tether

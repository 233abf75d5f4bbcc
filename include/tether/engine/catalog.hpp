#pragma once
// The registry (tether/registry.hpp) at run time: each system's and method's
// name, family, description, citation and parameter schema, built once from
// the type lists. `tether list`, the property tests and the benchmark read it.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tether/core/family.hpp"

namespace tether {

// The compile-time choice among instantiations sharing a name (core/parameters.hpp).
struct VariantInfo {
  std::string key;       // empty: the only instantiation of its name
  nlohmann::json value;  // a count or a name
  bool is_default = false;

  std::string text() const { return value.is_string() ? value.get<std::string>() : value.dump(); }
  std::string label() const { return key + " " + text(); }  // "stages 2", "base rattle"
};

struct SystemInfo {
  std::string name, description, citation;
  Family family = Family::holonomic;
  int dof = 0;
  bool reversed_by_momentum_flip = true;  // (q, p) -> (q, -p) reverses the flow
  bool samples_configurations = true;     // holonomic: draws its own q on N (thermal and canonical starts)
  VariantInfo variant;
  nlohmann::ordered_json parameters;  // schema: name, type, default, bounds, meaning
  std::vector<int> methods;           // indices of the methods that pair with it
};

struct MethodInfo {
  std::string name, description, citation;
  int order = 0;  // with the default parameters
  bool symmetric = false, symplectic = false, two_step = false;
  bool takes_metric = false;  // samples with a sample.metric other than the mass (tether/sampling/metric.hpp)
  VariantInfo variant;
  nlohmann::ordered_json parameters;
};

const std::vector<SystemInfo>& system_infos();
const std::vector<MethodInfo>& method_infos();

// What `tether sample` can run, at run time (the concept SamplerMethodFor of
// tether/sampling/hmc.hpp at compile time): a holonomic system that p -> -p
// reverses, with a symmetric, symplectic, one-step method.
inline bool can_sample(const SystemInfo& s) { return s.family == Family::holonomic && s.reversed_by_momentum_flip; }
inline bool can_sample(const MethodInfo& m) { return m.symmetric && m.symplectic && !m.two_step; }

// Names, each once, in registry order.
std::vector<std::string> unique_system_names();
std::vector<std::string> unique_method_names();

// Every parameter of system `system` as a config with `given` would set it:
// the given value, else the default; with the variant's key. Two configs with
// equal values describe the same system (draws.nc keeps them, so that a run
// starting from a sample's draws can check it is of the same system).
nlohmann::json system_parameter_values(const SystemInfo& system, const nlohmann::json& given);

// The registry entry of a system declared as expressions
// (src/expr/declared_system.hpp), holonomic or index-1 (nonholonomic): its
// methods are those that pair with any system of its family that has
// nothing more than a declaration gives (no sphere, no rigid bodies);
// parameters are real numbers.
SystemInfo declared_system_info(const std::string& name, Family family, int dof,
                                const nlohmann::ordered_json& parameters);

// "composition (base rattle, scheme kahan_li8)": a method with its variant and parameters.
std::string describe_method(int method, const nlohmann::ordered_json& parameters);

// Everything above as one document (`tether list --json`).
nlohmann::ordered_json catalog_json();

}  // namespace tether

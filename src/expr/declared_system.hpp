#pragma once
// A system its user declares in a config instead of writing C++. Holonomic:
// named coordinates, a constant mass, the potential V(q) and the constraints
// g(q) as expressions over them and named parameters, with intermediate
// definitions. Index-1 sub-Riemannian: an orthonormal frame X_i(q) and V(q),
// H = 1/2 sum <p, X_i(q)>^2 + V (LJM12 §6.2). GiNaC (a Debian package) parses
// the expressions and differentiates them exactly; the result is the C++
// source of a system type with the interface of the built-in ones
// (core/families.hpp: HolonomicSystem, or Index1System as systems/heisenberg.hpp,
// whose derivatives the methods take with dual numbers), which
// expr/compiled_pair.hpp compiles when the system is first used.
//
// Expressions are data, never code: every expression is first read by a
// lexer that admits only the grammar's tokens (numbers, the declared names,
// the functions below, + - * / ^ ( ) ,) and says where the first other one
// is; names are identifiers that become C++ names only with a prefix, and the
// source is printed from the parsed expressions, never copied from the text.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/json_node.hpp"
#include "tether/core/types.hpp"
#include "tether/engine/catalog.hpp"

namespace tether {

// The functions an expression may call, each of one argument but pow and atan2.
const std::vector<std::string>& declared_functions();

struct DeclaredSystem {
  std::string name;                      // [a-z][a-z0-9_]*: the system's name in outputs
  std::vector<std::string> coordinates;  // q_0 .. q_{n-1}'s names
  std::vector<Real> mass;                // the diagonal of M, one per coordinate (> 0)
  std::vector<std::pair<std::string, Real>> parameters;  // names and default values, in name order
  int frame_size = 0;  // the frame's vector fields; 0: a holonomic system
  Real length_scale = 1, energy_scale = 1;
  SystemInfo info;  // as the registry lists it (declared_system_info)
  // The C++ source of the system type (a struct named `type_name` in
  // namespace tether), exact first derivatives included: potential,
  // potential_gradient, constraints, constraint_jacobian_times,
  // constraint_transpose_times, gram, mass_times, inverse_mass_times,
  // sqrt_mass_times, length_scale, energy_scale, and its Parameters.
  std::string source(const std::string& type_name) const;
  std::string print_source(const std::string& type_name) const;  // source() before it is kept

  // Evaluations at q with the default parameters (tests; checks of initial states).
  Real potential_at(const std::vector<Real>& q) const;
  std::vector<Real> gradient_at(const std::vector<Real>& q) const;
  std::vector<Real> constraints_at(const std::vector<Real>& q) const;
  std::vector<std::vector<Real>> jacobian_at(const std::vector<Real>& q) const;  // dg_i/dq_j
  std::vector<std::vector<Real>> frame_at(const std::vector<Real>& q) const;     // X_i's components

  struct Symbolic;  // the GiNaC expressions (declared_system.cpp)
  std::shared_ptr<const Symbolic> symbolic;

  // Or, instead of expressions, a built-in system's template at a size this
  // build did not instantiate (registry/catalog.hpp, resized_system): its
  // type ("Chain<5>") and header, which source() names.
  std::string builtin_type, builtin_header;
};

// system.declare of a config at `path`: {"name", "coordinates" (or "dof"),
// "mass" (a number or one per coordinate; default 1), "parameters" {name:
// value}, "definitions" {name: expression}, "potential" (default 0),
// "constraints" [expressions], "length_scale" and "energy_scale" (numbers or
// expressions of the parameters; default 1)}. Every error is a ConfigError at
// the JSON path, with the character position in the expression where one is
// at fault.
DeclaredSystem parse_declared_system(const nlohmann::json& j, const std::string& path);

// system.declare, for the config parser.
std::shared_ptr<const DeclaredSystem> declare_system(const Node& declare);

// system.parameters of a declared system: only its declared names, each a number.
void read_declared_parameters(const DeclaredSystem& d, const Node& parameters);

}  // namespace tether

#pragma once
// JSON config -> typed run description. Every error names the JSON path.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "tether/core/newton.hpp"
#include "tether/systems/chain.hpp"
#include "tether/systems/double_pendulum.hpp"
#include "tether/systems/heisenberg.hpp"
#include "tether/systems/heisenberg_vakonomic.hpp"
#include "tether/systems/martinet.hpp"
#include "tether/systems/parallel_parking.hpp"
#include "tether/systems/sphere_contact.hpp"
#include "tether/systems/spherical_pendulum.hpp"

namespace tether {

// A bad input: `path` is the JSON path (e.g. "method.dt"), or the file.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string path, const std::string& message)
      : std::runtime_error("config error at " + path + ": " + message), path_(std::move(path)) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct ChainSpec {
  int beads = 4;
  ChainParameters parameters;
};
// The configured system itself (its parameters set), or for chains the bead
// count that picks the instantiation.
using SystemSpec = std::variant<SphericalPendulum, DoublePendulum, ChainSpec, Heisenberg, HeisenbergVakonomic, Martinet,
                                MartinetLagrangian, ParallelParking, SphereContact>;

struct ExplicitState {
  std::vector<Real> q, p;
};

struct InitialSpec {
  enum class Kind { thermal, around, states } kind = Kind::thermal;
  Real temperature = 0;                                // thermal
  ExplicitState center;                                // around
  Real position_spread = 0, momentum_spread = 0;       // around
  std::vector<ExplicitState> states;                   // states
  bool project = false;                                // states: project onto T*N instead of rejecting
  Real tolerance = 1e-10;                              // states: allowed |g| and |G M^-1 p| without projection
};

struct RunConfig {
  std::string system_name;
  SystemSpec system;
  std::string method_name;
  int stages = 0;  // gauss_legendre only: 1, 2 or 3
  Real dt = 0;
  std::int64_t steps = 0;
  NewtonOptions newton;
  std::int64_t size = 0;
  std::uint64_t seed = 0;
  std::int64_t batch_size = 1 << 20;
  InitialSpec initial;
  std::int64_t output_every = 0;
  bool write_final_states = true;
  std::string backend = "auto";  // auto | cpu | reference | cuda
  std::string precision = "double";
};

// Names the build knows, for validation messages and `tether list`.
const std::vector<std::string>& system_names();
const std::vector<std::string>& method_names();
bool is_nonholonomic_system(const std::string& system_name);
bool is_mixed_system(const std::string& system_name);  // nonholonomic with holonomic constraints too
const std::vector<std::string>& methods_for_system(const std::string& system_name);
// Method names of one family, for messages and `tether list`.
const std::vector<std::string>& holonomic_method_names();
const std::vector<std::string>& nonholonomic_method_names();
const std::vector<std::string>& mixed_method_names();
const std::vector<int>& chain_sizes();
const std::vector<std::string>& backend_names();

// Parses and validates everything that does not need the system's equations
// (explicit states are checked against the constraint manifold later, by the
// engine, still as ConfigErrors).
RunConfig parse_config(const std::string& json_text, const std::string& source);
RunConfig load_config_file(const std::string& path);

}  // namespace tether

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
#include "tether/systems/kepler.hpp"
#include "tether/systems/magnetic_sphere.hpp"
#include "tether/systems/rigid_body.hpp"
#include "tether/systems/rigid_chain.hpp"
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
struct RigidChainSpec {
  int links = 2;
  RigidChain<1>::Parameters parameters;  // the same for every link count
};
// The configured system itself (its parameters set), or for chains the bead
// (link) count that picks the instantiation.
using SystemSpec = std::variant<SphericalPendulum, DoublePendulum, ChainSpec, Kepler, RigidBody, RigidChainSpec,
                                MagneticSphere, Heisenberg, HeisenbergVakonomic, Martinet, MartinetLagrangian,
                                ParallelParking, SphereContact>;

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

// Parameters of the methods that have them (method.* in the config).
struct MethodSpec {
  std::string base;        // composition: rattle | constrained_midpoint | symplectic_euler
  std::string scheme;      // composition: triple_jump | suzuki | yoshida6 | kahan_li6 | kahan_li8
  std::string form;        // composition over symplectic_euler: intrinsic | extrinsic
  std::string retraction;  // lie_rattle, lie_lobatto: exp | cayley; sphere_retraction: projection | exp
  Real theta = 0.5;                 // theta_retraction
  Real gamma = 0.5, beta = 0.25;    // newmark
  // variational: the standard layer's explicit Runge-Kutta tableau (by name,
  // or given as a, b, c), the bias alpha+ and the stage-4 solver.
  std::string layer;                        // rk4 | heun | kutta3 | explicit
  std::vector<std::vector<Real>> layer_a;   // explicit: s x s, strictly lower triangular
  std::vector<Real> layer_b, layer_c;
  Real alpha_plus = 0.5;
  std::string solver;                       // fixed_point | newton
};

struct RunConfig {
  std::string system_name;
  SystemSpec system;
  std::string method_name;
  int stages = 0;  // gauss_legendre only: 1, 2 or 3
  MethodSpec method;
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

// `tether shoot` (issue 4): boundary-value problems q(0) = q0, q(T) = q1 for
// every target q1, solved for the initial covector p0.
struct ShootSpec {
  std::vector<Real> q0;
  Real time = 0;  // T = method.steps x method.dt
  std::string targets_kind;  // list | grid | random
  std::vector<std::vector<Real>> targets;
  // Guesses tried for every target, in this order: the explicit list, the
  // rule p0 = (q1 - q0) / T when `toward` is set, then random normal ones.
  std::vector<std::vector<Real>> guesses;
  bool toward = false;
  std::int64_t random_guesses = 0;
  Real guess_scale = 1;
  std::uint64_t guess_seed = 0;
  Real tolerance = 1e-10;  // on |q(T) - q1|
  int max_iterations = 50;
  bool line_search = true;
  int max_backtracks = 30;
  int continuation_rounds = 0;  // 0: off
  int continuation_substeps = 8;
  std::int64_t geodesic_every = 0;    // write solved geodesics sampled every this many steps (0: none)
  std::int64_t geodesic_targets = 0;  // for the first this many targets
  std::int64_t guesses_per_target() const { return std::int64_t(guesses.size()) + (toward ? 1 : 0) + random_guesses; }
};

struct ShootConfig {
  RunConfig run;  // system, method (dt = T / steps), backend, batch size; no ensemble
  ShootSpec shoot;
};

// Names the build knows, for validation messages and `tether list`.
const std::vector<std::string>& system_names();
const std::vector<std::string>& method_names();
bool is_nonholonomic_system(const std::string& system_name);
bool is_mixed_system(const std::string& system_name);  // nonholonomic with holonomic constraints too
bool is_lagrangian_system(const std::string& system_name);  // m(q), a(q), constraints: the variational method
const std::vector<std::string>& methods_for_system(const std::string& system_name);
// Method names of one family, for messages and `tether list`.
const std::vector<std::string>& holonomic_method_names();
const std::vector<std::string>& nonholonomic_method_names();
const std::vector<std::string>& mixed_method_names();
const std::vector<int>& chain_sizes();
const std::vector<int>& rigid_chain_sizes();
const std::vector<std::string>& backend_names();

// Parses and validates everything that does not need the system's equations
// (explicit states are checked against the constraint manifold later, by the
// engine, still as ConfigErrors).
// "composition (base rattle, scheme kahan_li8)": the method with its parameters, for messages and summaries.
std::string describe_method(const RunConfig& c);

// Dimension of q for a configured system.
int system_dof(const SystemSpec& system);

RunConfig parse_config(const std::string& json_text, const std::string& source);
RunConfig load_config_file(const std::string& path);

ShootConfig parse_shoot_config(const std::string& json_text, const std::string& source);
ShootConfig load_shoot_config_file(const std::string& path);
// Whether a config file is a shooting config (it has a top-level "shoot"),
// so that `tether validate` checks each kind by its own rules.
bool is_shoot_config_file(const std::string& path);

}  // namespace tether

#include "config/config.hpp"

#include "engine/registry.hpp"
#include "tether/core/random.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <type_traits>

namespace tether {

using nlohmann::json;

const std::vector<std::string>& system_names() {
#define TETHER_SYSTEM_NAME(S) S::name,
  static const std::vector<std::string> v{"spherical_pendulum", "double_pendulum", "chain", "kepler", "rigid_body",
                                          "rigid_chain", "magnetic_sphere",
                                          TETHER_FOR_EACH_NONHOLONOMIC_SYSTEM(TETHER_SYSTEM_NAME)
                                              TETHER_FOR_EACH_MIXED_SYSTEM(TETHER_SYSTEM_NAME)};
#undef TETHER_SYSTEM_NAME
  return v;
}
bool is_nonholonomic_system(const std::string& name) {
  for (const char* other : {"spherical_pendulum", "double_pendulum", "chain", "kepler", "rigid_body", "rigid_chain",
                            "magnetic_sphere"})
    if (name == other) return false;
  return true;
}
bool is_lagrangian_system(const std::string& name) { return name == MagneticSphere::name; }
bool is_mixed_system(const std::string& name) {
#define TETHER_MIXED_NAME(S) if (name == S::name) return true;
  TETHER_FOR_EACH_MIXED_SYSTEM(TETHER_MIXED_NAME)
#undef TETHER_MIXED_NAME
  return false;
}

namespace {
// Each name once, in registry order (gauss_legendre covers three instantiations).
std::vector<std::string> unique_names(std::initializer_list<const char*> names) {
  std::vector<std::string> v;
  for (const char* n : names)
    if (std::find(v.begin(), v.end(), n) == v.end()) v.push_back(n);
  return v;
}
}  // namespace

#define TETHER_METHOD_NAME(S, M) M::name,
const std::vector<std::string>& holonomic_method_names() {
  static const std::vector<std::string> v = unique_names({TETHER_FOR_EACH_HOLONOMIC_METHOD(TETHER_METHOD_NAME, void)});
  return v;
}
const std::vector<std::string>& nonholonomic_method_names() {
  static const std::vector<std::string> v =
      unique_names({TETHER_FOR_EACH_NONHOLONOMIC_METHOD(TETHER_METHOD_NAME, void)});
  return v;
}
const std::vector<std::string>& mixed_method_names() {
  static const std::vector<std::string> v = unique_names({TETHER_FOR_EACH_MIXED_METHOD(TETHER_METHOD_NAME, void)});
  return v;
}
const std::vector<std::string>& method_names() {
  static const std::vector<std::string> v = [] {
    std::vector<std::string> all = holonomic_method_names();
    for (const char* system : {"rigid_body", "kepler", "spherical_pendulum", "magnetic_sphere"})
      for (const auto& n : methods_for_system(system))
        if (std::find(all.begin(), all.end(), n) == all.end()) all.push_back(n);
    for (const auto* family : {&nonholonomic_method_names(), &mixed_method_names()})
      for (const auto& n : *family) all.push_back(n);
    return all;
  }();
  return v;
}
// The holonomic methods every holonomic system takes, then those that need
// more structure: rigid bodies, no constraints at all, or a sphere.
const std::vector<std::string>& methods_for_system(const std::string& name) {
  if (is_mixed_system(name)) return mixed_method_names();
  if (is_lagrangian_system(name)) {
    static const std::vector<std::string> v = unique_names({TETHER_FOR_EACH_LAGRANGIAN_METHOD(TETHER_METHOD_NAME, void)});
    return v;
  }
  if (is_nonholonomic_system(name)) return nonholonomic_method_names();
  auto with = [](std::initializer_list<const char*> extra) {
    std::vector<std::string> v = holonomic_method_names();
    for (const auto& n : unique_names(extra)) v.push_back(n);
    return v;
  };
  static const std::vector<std::string> rigid = with({TETHER_FOR_EACH_RIGID_METHOD(TETHER_METHOD_NAME, void)});
  static const std::vector<std::string> unconstrained =
      with({TETHER_FOR_EACH_UNCONSTRAINED_METHOD(TETHER_METHOD_NAME, void)});
  static const std::vector<std::string> sphere = with({TETHER_FOR_EACH_SPHERE_METHOD(TETHER_METHOD_NAME, void)});
  if (name == "rigid_body" || name == "rigid_chain") return rigid;
  if (name == "kepler") return unconstrained;
  if (name == "spherical_pendulum") return sphere;
  return holonomic_method_names();
}
#undef TETHER_METHOD_NAME
const std::vector<int>& rigid_chain_sizes() {
#define TETHER_CHAIN_SIZE(N) N,
  static const std::vector<int> v{TETHER_FOR_EACH_RIGID_CHAIN_SIZE(TETHER_CHAIN_SIZE)};
#undef TETHER_CHAIN_SIZE
  return v;
}
const std::vector<int>& chain_sizes() {
#define TETHER_CHAIN_SIZE(N) N,
  static const std::vector<int> v{TETHER_FOR_EACH_CHAIN_SIZE(TETHER_CHAIN_SIZE)};
#undef TETHER_CHAIN_SIZE
  return v;
}
const std::vector<std::string>& backend_names() {
  static const std::vector<std::string> v{"auto", "cpu", "reference", "cuda"};
  return v;
}

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string show(const json& j) {
  std::string s = j.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

// A JSON object together with its path, so every error can say where it is.
class Node {
 public:
  Node(const json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) throw ConfigError(path_.empty() ? "(top level)" : path_, "must be an object, got " + show(j_));
  }

  std::string at(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  bool has(const std::string& key) const { return j_.contains(key); }
  const json& raw(const std::string& key) const { return j_.at(key); }

  Node object(const std::string& key) const {
    if (!has(key)) throw ConfigError(at(key), "is missing");
    return Node(j_.at(key), at(key));
  }
  Node object_or_empty(const std::string& key) const {
    static const json empty = json::object();
    return has(key) ? Node(j_.at(key), at(key)) : Node(empty, at(key));
  }

  std::string string(const std::string& key, const std::vector<std::string>& allowed,
                     const std::string* fallback = nullptr) const {
    if (!has(key)) {
      if (fallback) return *fallback;
      throw ConfigError(at(key), "is missing (one of: " + join(allowed) + ")");
    }
    const json& v = j_.at(key);
    if (!v.is_string()) throw ConfigError(at(key), "must be a string, got " + show(v));
    const std::string s = v.get<std::string>();
    if (std::find(allowed.begin(), allowed.end(), s) == allowed.end())
      throw ConfigError(at(key), "unknown value " + show(v) + " (one of: " + join(allowed) + ")");
    return s;
  }

  Real number(const std::string& key, std::optional<Real> fallback = std::nullopt) const {
    if (!has(key)) {
      if (fallback) return *fallback;
      throw ConfigError(at(key), "is missing");
    }
    return as_number(j_.at(key), at(key));
  }
  Real positive(const std::string& key, std::optional<Real> fallback = std::nullopt) const {
    const Real x = number(key, fallback);
    if (!(x > 0)) throw ConfigError(at(key), "must be positive, got " + show(j_.contains(key) ? j_.at(key) : json(x)));
    return x;
  }
  Real non_negative(const std::string& key, std::optional<Real> fallback = std::nullopt) const {
    const Real x = number(key, fallback);
    if (!(x >= 0)) throw ConfigError(at(key), "must be >= 0, got " + show(j_.at(key)));
    return x;
  }
  std::int64_t integer(const std::string& key, std::int64_t lo, std::int64_t hi,
                       std::optional<std::int64_t> fallback = std::nullopt) const {
    if (!has(key)) {
      if (fallback) return *fallback;
      throw ConfigError(at(key), "is missing");
    }
    const json& v = j_.at(key);
    const bool integral_float = v.is_number_float() && v.get<double>() == std::floor(v.get<double>());
    if (!v.is_number_integer() && !integral_float) throw ConfigError(at(key), "must be an integer, got " + show(v));
    if (integral_float && !(std::fabs(v.get<double>()) < 9e15))
      throw ConfigError(at(key), "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + show(v));
    const std::int64_t x = v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT64_MAX)
                               ? INT64_MAX
                               : (v.is_number_integer() ? v.get<std::int64_t>() : std::int64_t(v.get<double>()));
    if (x < lo || x > hi)
      throw ConfigError(at(key), "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + show(v));
    return x;
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_boolean()) throw ConfigError(at(key), "must be true or false, got " + show(j_.at(key)));
    return j_.at(key).get<bool>();
  }
  std::vector<Real> numbers(const std::string& key) const {
    if (!has(key)) throw ConfigError(at(key), "is missing");
    const json& v = j_.at(key);
    if (!v.is_array()) throw ConfigError(at(key), "must be an array of numbers, got " + show(v));
    std::vector<Real> out;
    for (std::size_t i = 0; i < v.size(); ++i) out.push_back(as_number(v[i], at(key) + "[" + std::to_string(i) + "]"));
    return out;
  }

  // Typos must not pass silently as defaults.
  void only(const std::set<std::string>& known) const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (known.count(it.key())) continue;
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      const std::string quoted = json(it.key()).dump();  // escapes control characters
      throw ConfigError(at(quoted.substr(1, quoted.size() - 2)),
                        list.empty() ? "unknown key (nothing is expected here)"
                                     : "unknown key (expected one of: " + list + ")");
    }
  }

  static Real as_number(const json& v, const std::string& path) {
    if (!v.is_number()) throw ConfigError(path, "must be a number, got " + show(v));
    const Real x = v.get<Real>();
    if (!std::isfinite(x)) throw ConfigError(path, "must be finite, got " + show(v));
    return x;
  }

 private:
  const json& j_;
  std::string path_;
};

SystemSpec parse_system(const Node& sys, const std::string& name) {
  const Node prm = sys.object_or_empty("parameters");
  if (name == "spherical_pendulum") {
    prm.only({"mass", "length", "gravity"});
    SphericalPendulum s;
    auto& p = s.prm;
    p.mass = prm.positive("mass", p.mass);
    p.length = prm.positive("length", p.length);
    p.gravity = prm.number("gravity", p.gravity);
    return s;
  }
  if (name == "double_pendulum") {
    prm.only({"mass1", "mass2", "length1", "length2", "gravity"});
    DoublePendulum s;
    auto& p = s.prm;
    p.mass1 = prm.positive("mass1", p.mass1);
    p.mass2 = prm.positive("mass2", p.mass2);
    p.length1 = prm.positive("length1", p.length1);
    p.length2 = prm.positive("length2", p.length2);
    p.gravity = prm.number("gravity", p.gravity);
    return s;
  }
  if (name == "kepler") {
    prm.only({"mass", "mu"});
    Kepler s;
    s.prm.mass = prm.positive("mass", s.prm.mass);
    s.prm.mu = prm.positive("mu", s.prm.mu);
    return s;
  }
  if (name == "rigid_body" || name == "rigid_chain") {
    prm.only(name == "rigid_body" ? std::set<std::string>{"inertia", "mass", "gravity"}
                                  : std::set<std::string>{"links", "inertia", "mass", "length", "gravity"});
    RigidChainSpec chain;
    RigidBody body;
    Real* inertia = name == "rigid_body" ? body.prm.inertia : chain.parameters.inertia;
    if (prm.has("inertia")) {
      const auto in = prm.numbers("inertia");
      if (in.size() != 3)
        throw ConfigError(prm.at("inertia"), "must list the 3 principal moments of inertia, got " +
                                                 std::to_string(in.size()));
      std::copy(in.begin(), in.end(), inertia);
    }
    // J = tr(I)/2 - I, the mass matrix of R, is positive definite iff each
    // moment is below the sum of the other two.
    for (int a = 0; a < 3; ++a)
      if (!(inertia[a] > 0) || !(inertia[a] < inertia[(a + 1) % 3] + inertia[(a + 2) % 3]))
        throw ConfigError(prm.at("inertia"), "principal moments must be positive and each below the sum of the "
                                             "other two (strict triangle inequality), so that J = tr(I)/2 - I > 0");
    if (name == "rigid_body") {
      body.prm.mass = prm.positive("mass", body.prm.mass);
      body.prm.gravity = prm.number("gravity", body.prm.gravity);
      return body;
    }
    chain.links = static_cast<int>(prm.integer("links", 1, 1 << 20, chain.links));
    const auto& sizes = rigid_chain_sizes();
    if (std::find(sizes.begin(), sizes.end(), chain.links) == sizes.end())
      throw ConfigError(prm.at("links"), "this build has rigid chains of 1 or 2 links, got " + std::to_string(chain.links));
    chain.parameters.mass = prm.positive("mass", chain.parameters.mass);
    chain.parameters.length = prm.positive("length", chain.parameters.length);
    chain.parameters.gravity = prm.number("gravity", chain.parameters.gravity);
    return chain;
  }
  if (name == "magnetic_sphere") {
    prm.only({"mass", "kappa", "field", "gravity"});
    MagneticSphere s;
    s.prm.mass = prm.positive("mass", s.prm.mass);
    s.prm.kappa = prm.number("kappa", s.prm.kappa);
    if (!(s.prm.kappa > -1)) throw ConfigError(prm.at("kappa"), "must be > -1 (the mass (1 + kappa z^2) must stay positive)");
    s.prm.field = prm.number("field", s.prm.field);
    s.prm.gravity = prm.number("gravity", s.prm.gravity);
    return s;
  }
  if (name == "heisenberg" || name == "heisenberg_vakonomic") {
    prm.only({});
    if (name == "heisenberg") return Heisenberg{};
    return HeisenbergVakonomic{};
  }
  if (name == "martinet" || name == "martinet_lagrangian") {
    prm.only({"beta"});
    MartinetParameters p;
    p.beta = prm.number("beta", p.beta);
    if (name == "martinet") return Martinet{p};
    return MartinetLagrangian{p};
  }
  if (name == "sphere_contact") {
    prm.only({});
    return SphereContact{};
  }
  if (name == "parallel_parking") {
    prm.only({"length", "alpha", "beta", "potential"});
    ParallelParking s;
    auto& p = s.prm;
    p.length = prm.positive("length", p.length);
    p.alpha = prm.positive("alpha", p.alpha);
    p.beta = prm.positive("beta", p.beta);
    static const std::string none = "none";
    p.bowl = prm.string("potential", {"none", "bowl"}, &none) == "bowl";
    return s;
  }
  prm.only({"beads", "mass", "bond_length", "bend_stiffness", "bend_angle_degrees", "torsion"});
  ChainSpec c;
  c.beads = static_cast<int>(prm.integer("beads", 1, 1 << 20));
  const auto& sizes = chain_sizes();
  if (std::find(sizes.begin(), sizes.end(), c.beads) == sizes.end()) {
    std::string list;
    for (int s : sizes) list += (list.empty() ? "" : ", ") + std::to_string(s);
    throw ConfigError(prm.at("beads"), "this build has chains of " + list + " beads, got " + std::to_string(c.beads));
  }
  ChainParameters& p = c.parameters;
  p.mass = prm.positive("mass", p.mass);
  p.bond_length = prm.positive("bond_length", p.bond_length);
  p.bend_stiffness = prm.non_negative("bend_stiffness", p.bend_stiffness);
  const Real deg = prm.number("bend_angle_degrees", p.bend_angle * 180 / M_PI);
  if (!(deg > 0 && deg <= 180)) throw ConfigError(prm.at("bend_angle_degrees"), "must be in (0, 180]");
  p.bend_angle = deg * M_PI / 180;
  if (prm.has("torsion")) {
    const auto t = prm.numbers("torsion");
    if (t.size() != 6)
      throw ConfigError(prm.at("torsion"), "must list the 6 Ryckaert-Bellemans coefficients c0..c5, got " +
                                               std::to_string(t.size()));
    std::copy(t.begin(), t.end(), p.torsion);
    p.has_torsion = std::any_of(t.begin(), t.end(), [](Real x) { return x != 0; });
  }
  return c;
}

ExplicitState parse_state(const Node& s) {
  s.only({"q", "p"});
  return ExplicitState{s.numbers("q"), s.numbers("p")};
}

// The family decides what applies: index-1 systems take any (q, p), so no
// thermal sampler, and without holonomic constraints nothing to project.
InitialSpec parse_initial(const Node& ini, const std::string& system_name) {
  const bool nonholonomic = is_nonholonomic_system(system_name), mixed = is_mixed_system(system_name);
  if (nonholonomic && !mixed)
    for (const char* key : {"project", "tolerance"})
      if (ini.has(key))
        throw ConfigError(ini.at(key), std::string("does not apply to ") + system_name +
                                           ": every (q, p) is a valid state of an index-1 system");
  InitialSpec spec;
  if (ini.has("states")) {
    ini.only({"states", "project", "tolerance"});
    spec.kind = InitialSpec::Kind::states;
    const json& arr = ini.raw("states");
    if (!arr.is_array() || arr.empty())
      throw ConfigError(ini.at("states"), "must be a non-empty array of {\"q\": [...], \"p\": [...]}");
    for (std::size_t i = 0; i < arr.size(); ++i)
      spec.states.push_back(parse_state(Node(arr[i], ini.at("states") + "[" + std::to_string(i) + "]")));
    spec.project = ini.boolean("project", false);
    spec.tolerance = ini.positive("tolerance", spec.tolerance);
    return spec;
  }
  static const std::vector<std::string> samplers{"thermal", "around"};
  const std::string sampler = ini.string("sampler", samplers);
  if (sampler == "thermal" && nonholonomic)
    throw ConfigError(ini.at("sampler"), "\"thermal\" applies to holonomic systems; for " + system_name +
                                             " use \"around\" or explicit states");
  if (sampler == "thermal") {
    ini.only({"sampler", "temperature"});
    spec.kind = InitialSpec::Kind::thermal;
    spec.temperature = ini.non_negative("temperature");
  } else {
    ini.only({"sampler", "q", "p", "position_spread", "momentum_spread"});
    spec.kind = InitialSpec::Kind::around;
    spec.center = ExplicitState{ini.numbers("q"), ini.numbers("p")};
    spec.position_spread = ini.non_negative("position_spread", 0.0);
    spec.momentum_spread = ini.non_negative("momentum_spread", 0.0);
  }
  return spec;
}

json parse_json(const std::string& text, const std::string& source) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // parse errors, and number overflow (out_of_range)
    throw ConfigError(source, std::string("is not valid JSON: ") + e.what());
  }
}

// A key that only some methods take.
void only_for(const Node& m, const std::string& key, bool applies, const std::string& which) {
  if (m.has(key) && !applies) throw ConfigError(m.at(key), "applies only to " + which);
}

// The parameters of methods that have them; each key is refused elsewhere.
void parse_method_parameters(const Node& m, RunConfig& c) {
  const bool composition = c.method_name == "composition";
  only_for(m, "base", composition, "composition");
  only_for(m, "scheme", composition, "composition");
  only_for(m, "form", composition, "composition");
  if (composition) {
    c.method.base = m.string("base", {"rattle", "constrained_midpoint", "symplectic_euler"});
    c.method.scheme = m.string("scheme", {"triple_jump", "suzuki", "yoshida6", "kahan_li6", "kahan_li8"});
    if (m.has("form") && c.method.base != "symplectic_euler")
      throw ConfigError(m.at("form"), "applies only to base symplectic_euler: for rattle and constrained_midpoint "
                                      "the extrinsic (5.7) and intrinsic (5.8) compositions are the same method");
    static const std::string intrinsic = "intrinsic";
    c.method.form = c.method.base == "symplectic_euler" ? m.string("form", {"intrinsic", "extrinsic"}, &intrinsic) : "";
  }
  const bool lie = c.method_name == "lie_rattle" || c.method_name == "lie_lobatto";
  const bool sphere = c.method_name == "sphere_retraction";
  only_for(m, "retraction", lie || sphere, "lie_rattle, lie_lobatto and sphere_retraction");
  if (lie) c.method.retraction = m.string("retraction", {"exp", "cayley"});
  if (sphere) c.method.retraction = m.string("retraction", {"projection", "exp"});
  only_for(m, "theta", c.method_name == "theta_retraction", "theta_retraction");
  if (c.method_name == "theta_retraction") {
    c.method.theta = m.number("theta", c.method.theta);
    if (!(c.method.theta >= 0 && c.method.theta <= 1)) throw ConfigError(m.at("theta"), "must be in [0, 1]");
  }
  only_for(m, "gamma", c.method_name == "newmark", "newmark");
  only_for(m, "beta", c.method_name == "newmark", "newmark");
  if (c.method_name == "newmark") {
    c.method.gamma = m.non_negative("gamma", c.method.gamma);
    c.method.beta = m.non_negative("beta", c.method.beta);
  }
  const bool variational = c.method_name == "variational";
  for (const char* key : {"layer", "alpha_plus", "solver"}) only_for(m, key, variational, "variational");
  if (variational) {
    static const std::string rk4 = "rk4", fixed = "fixed_point";
    const json* layer = m.has("layer") ? &m.raw("layer") : nullptr;
    if (layer && layer->is_object()) {  // an explicit tableau {a, b, c}
      const Node t(*layer, m.at("layer"));
      t.only({"a", "b", "c"});
      c.method.layer = "explicit";
      c.method.layer_b = t.numbers("b");
      c.method.layer_c = t.numbers("c");
      const json& a = t.raw("a");
      if (!a.is_array()) throw ConfigError(t.at("a"), "must be an array of rows");
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (!a[i].is_array()) throw ConfigError(t.at("a") + "[" + std::to_string(i) + "]", "must be an array of numbers");
        std::vector<Real> row;
        for (std::size_t j = 0; j < a[i].size(); ++j)
          row.push_back(Node::as_number(a[i][j], t.at("a") + "[" + std::to_string(i) + "][" + std::to_string(j) + "]"));
        c.method.layer_a.push_back(row);
      }
    } else {
      c.method.layer = m.string("layer", {"rk4", "heun", "kutta3"}, &rk4);
    }
    c.method.alpha_plus = m.number("alpha_plus", c.method.alpha_plus);
    c.method.solver = m.string("solver", {"fixed_point", "newton"}, &fixed);
  }
}

// method.name (checked against the system's family), stages, newton.
void parse_method(const Node& m, RunConfig& c) {
  c.method_name = m.string("name", method_names());
  const bool nonholonomic = is_nonholonomic_system(c.system_name);
  const bool mixed = is_mixed_system(c.system_name);
  const auto& family = methods_for_system(c.system_name);
  if (std::find(family.begin(), family.end(), c.method_name) == family.end())
    throw ConfigError(m.at("name"), "\"" + c.method_name + "\" does not apply to " + c.system_name + ", a " +
                                        (mixed ? "holonomic + nonholonomic"
                                               : (nonholonomic ? "nonholonomic" : "holonomic")) +
                                        " system (its methods: " + join(family) + ")");
  if (c.method_name == "gauss_legendre") {
    if (!m.has("stages")) throw ConfigError(m.at("stages"), "is missing (1, 2 or 3: orders 2, 4, 6)");
    c.stages = static_cast<int>(m.integer("stages", 1, 3));
  } else if (m.has("stages")) {
    throw ConfigError(m.at("stages"), "applies only to gauss_legendre");
  }
  parse_method_parameters(m, c);
  const Node nw = m.object_or_empty("newton");
  nw.only({"tolerance", "max_iterations"});
  c.newton.tolerance = nw.positive("tolerance", c.newton.tolerance);
  c.newton.max_iterations = static_cast<int>(nw.integer("max_iterations", 1, 1000, c.newton.max_iterations));
}

}  // namespace

std::string describe_method(const RunConfig& c) {
  std::vector<std::string> parts;
  if (c.stages > 0) parts.push_back(std::to_string(c.stages) + " stages");
  if (!c.method.base.empty()) parts.push_back("base " + c.method.base);
  if (!c.method.scheme.empty()) parts.push_back("scheme " + c.method.scheme);
  if (!c.method.form.empty()) parts.push_back(c.method.form);
  if (!c.method.retraction.empty()) parts.push_back("retraction " + c.method.retraction);
  auto number = [](const char* key, Real x) {
    std::ostringstream s;
    s << key << " " << x;
    return s.str();
  };
  if (c.method_name == "theta_retraction") parts.push_back(number("theta", c.method.theta));
  if (c.method_name == "newmark") parts.push_back(number("gamma", c.method.gamma) + ", " + number("beta", c.method.beta));
  if (c.method_name == "variational")
    parts.push_back("layer " + c.method.layer + ", " + number("alpha_plus", c.method.alpha_plus) + ", " + c.method.solver);
  return parts.empty() ? c.method_name : c.method_name + " (" + join(parts) + ")";
}

RunConfig parse_config(const std::string& text, const std::string& source) {
  const json j = parse_json(text, source);
  const Node top(j, "");
  top.only({"system", "method", "ensemble", "output", "backend", "precision"});
  RunConfig c;

  const Node sys = top.object("system");
  sys.only({"name", "parameters"});
  c.system_name = sys.string("name", system_names());
  c.system = parse_system(sys, c.system_name);

  const Node m = top.object("method");
  m.only({"name", "stages", "dt", "steps", "newton", "base", "scheme", "form", "retraction", "theta", "gamma", "beta",
          "layer", "alpha_plus", "solver"});
  parse_method(m, c);
  c.dt = m.positive("dt");
  c.steps = m.integer("steps", 0, std::int64_t(1) << 40);

  const Node ens = top.object("ensemble");
  ens.only({"size", "seed", "batch_size", "initial"});
  c.initial = parse_initial(ens.object("initial"), c.system_name);
  if (c.initial.kind == InitialSpec::Kind::states) {
    const auto n = static_cast<std::int64_t>(c.initial.states.size());
    c.size = ens.integer("size", 1, INT64_MAX, n);
    if (c.size != n)
      throw ConfigError(ens.at("size"), "is " + std::to_string(c.size) + " but ensemble.initial.states lists " +
                                            std::to_string(n) + " states");
  } else {
    c.size = ens.integer("size", 1, std::int64_t(1) << 34);
  }
  c.seed = static_cast<std::uint64_t>(ens.integer("seed", 0, INT64_MAX, 0));
  c.batch_size = ens.integer("batch_size", 1, std::int64_t(1) << 30, c.batch_size);

  const Node out = top.object_or_empty("output");
  out.only({"every", "final_states"});
  c.output_every = out.integer("every", 1, INT64_MAX, std::max<std::int64_t>(1, c.steps / 100));
  c.output_every = std::min(c.output_every, std::max<std::int64_t>(1, c.steps));  // one interval at most the run
  c.write_final_states = out.boolean("final_states", true);

  static const std::string dbl = "double";
  if (top.has("backend")) c.backend = top.string("backend", backend_names());
  c.precision = top.has("precision") ? top.string("precision", {"double"}) : dbl;
  return c;
}

namespace {

std::string read_config_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw ConfigError(path, "is a folder, not a config file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path, "cannot be read (missing or no permission)");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw ConfigError(path, "cannot be read");
  return ss.str();
}

}  // namespace

int system_dof(const SystemSpec& spec) {
  return std::visit(
      [](const auto& s) {
        if constexpr (std::is_same_v<std::decay_t<decltype(s)>, ChainSpec>)
          return 3 * s.beads;  // Chain<N>::dof
        else if constexpr (std::is_same_v<std::decay_t<decltype(s)>, RigidChainSpec>)
          return 12 * s.links;  // RigidChain<B>::dof
        else
          return std::decay_t<decltype(s)>::dof;
      },
      spec);
}

namespace {

// A point of R^dof at `path`.
std::vector<Real> point(const json& v, const std::string& path, int dof, const std::string& what) {
  if (!v.is_array()) throw ConfigError(path, "must be an array of " + std::to_string(dof) + " numbers (" + what + ")");
  if (int(v.size()) != dof)
    throw ConfigError(path, "has " + std::to_string(v.size()) + " numbers, expected " + std::to_string(dof) + " (" +
                                what + ")");
  std::vector<Real> x;
  for (std::size_t i = 0; i < v.size(); ++i) x.push_back(Node::as_number(v[i], path + "[" + std::to_string(i) + "]"));
  return x;
}

std::vector<Real> point_at(const Node& node, const std::string& key, int dof, const std::string& what) {
  if (!node.has(key)) throw ConfigError(node.at(key), "is missing (" + what + ")");
  return point(node.raw(key), node.at(key), dof, what);
}

std::vector<std::vector<Real>> points(const Node& node, const std::string& key, int dof, const std::string& what) {
  if (!node.has(key)) throw ConfigError(node.at(key), "is missing");
  const json& arr = node.raw(key);
  if (!arr.is_array() || arr.empty()) throw ConfigError(node.at(key), "must be a non-empty array of points (" + what + ")");
  std::vector<std::vector<Real>> out;
  for (std::size_t i = 0; i < arr.size(); ++i)
    out.push_back(point(arr[i], node.at(key) + "[" + std::to_string(i) + "]", dof, what));
  return out;
}

constexpr std::int64_t max_shots = std::int64_t(1) << 31;

void parse_targets(const Node& t, int dof, ShootSpec& s) {
  const int kinds = int(t.has("list")) + int(t.has("grid")) + int(t.has("random"));
  if (kinds != 1)
    throw ConfigError(t.at(kinds == 0 ? "list" : (t.has("random") ? "random" : "grid")),
                      kinds == 0 ? "is missing: give the targets as one of \"list\", \"grid\" or \"random\""
                                 : "give only one of \"list\", \"grid\" or \"random\"");
  t.only({"list", "grid", "random"});
  const std::string what = "a configuration q of the system";
  if (t.has("list")) {
    s.targets_kind = "list";
    s.targets = points(t, "list", dof, what);
    return;
  }
  const bool grid = t.has("grid");
  const Node g = t.object(grid ? "grid" : "random");
  g.only(grid ? std::set<std::string>{"min", "max", "count"} : std::set<std::string>{"min", "max", "count", "seed"});
  const std::vector<Real> lo = point_at(g, "min", dof, what), hi = point_at(g, "max", dof, what);
  for (int c = 0; c < dof; ++c)
    if (!(hi[c] >= lo[c]))
      throw ConfigError(g.at("max") + "[" + std::to_string(c) + "]", "must be >= min[" + std::to_string(c) + "]");
  if (grid) {
    s.targets_kind = "grid";
    if (!g.has("count")) throw ConfigError(g.at("count"), "is missing (points per coordinate)");
    const json& cnt = g.raw("count");
    if (!cnt.is_array() || int(cnt.size()) != dof)
      throw ConfigError(g.at("count"), "must be an array of " + std::to_string(dof) + " point counts, one per coordinate");
    std::vector<std::int64_t> counts;
    std::int64_t total = 1;
    for (int c = 0; c < dof; ++c) {
      const std::string path = g.at("count") + "[" + std::to_string(c) + "]";
      if (!cnt[c].is_number_integer() || cnt[c].get<std::int64_t>() < 1)
        throw ConfigError(path, "must be an integer >= 1, got " + show(cnt[c]));
      counts.push_back(cnt[c].get<std::int64_t>());
      if (counts.back() > 1 && hi[c] == lo[c])
        throw ConfigError(path, "is " + std::to_string(counts.back()) + " but min and max are equal");
      if (counts.back() > max_shots / total)
        throw ConfigError(g.at("count"), "gives more than " + std::to_string(max_shots) + " targets");
      total *= counts.back();
    }
    // Row-major order: the last coordinate varies fastest.
    for (std::int64_t i = 0; i < total; ++i) {
      std::vector<Real> q(dof);
      std::int64_t rest = i;
      for (int c = dof - 1; c >= 0; --c) {
        const std::int64_t j = rest % counts[c];
        rest /= counts[c];
        q[c] = counts[c] == 1 ? lo[c] : lo[c] + (hi[c] - lo[c]) * Real(j) / Real(counts[c] - 1);
      }
      s.targets.push_back(q);
    }
    return;
  }
  s.targets_kind = "random";
  const std::int64_t count = g.integer("count", 1, max_shots);
  const auto seed = static_cast<std::uint64_t>(g.integer("seed", 0, INT64_MAX, 0));
  for (std::int64_t i = 0; i < count; ++i) {
    CounterRng rng(seed, static_cast<std::uint64_t>(i));
    std::vector<Real> q(dof);
    for (int c = 0; c < dof; ++c) q[c] = lo[c] + (hi[c] - lo[c]) * rng.uniform();
    s.targets.push_back(q);
  }
}

void parse_guesses(const Node& g, int dof, ShootSpec& s) {
  g.only({"list", "toward", "random"});
  if (g.has("list")) s.guesses = points(g, "list", dof, "a covector p0 of the system");
  s.toward = g.boolean("toward", false);
  if (g.has("random")) {
    const Node r = g.object("random");
    r.only({"count", "scale", "seed"});
    s.random_guesses = r.integer("count", 1, 1 << 20);
    s.guess_scale = r.positive("scale", s.guess_scale);
    s.guess_seed = static_cast<std::uint64_t>(r.integer("seed", 0, INT64_MAX, 0));
  }
  if (s.guesses_per_target() == 0)
    throw ConfigError(g.at("list"), "no initial guesses: give a \"list\" of covectors, \"toward\": true, "
                                    "or \"random\": {\"count\": N, \"scale\": s}");
}

}  // namespace

RunConfig load_config_file(const std::string& path) { return parse_config(read_config_file(path), path); }

ShootConfig parse_shoot_config(const std::string& text, const std::string& source) {
  const json j = parse_json(text, source);
  const Node top(j, "");
  top.only({"system", "method", "shoot", "output", "backend", "precision"});
  ShootConfig cfg;
  RunConfig& c = cfg.run;
  ShootSpec& s = cfg.shoot;

  const Node sys = top.object("system");
  sys.only({"name", "parameters"});
  c.system_name = sys.string("name", system_names());
  if (!is_nonholonomic_system(c.system_name) || is_mixed_system(c.system_name)) {
    std::string allowed;
#define TETHER_SHOOT_NAME(S) allowed += (allowed.empty() ? "" : ", ") + std::string(S::name);
    TETHER_FOR_EACH_NONHOLONOMIC_SYSTEM(TETHER_SHOOT_NAME)
#undef TETHER_SHOOT_NAME
    throw ConfigError(sys.at("name"), "shooting applies to the index-1 (nonholonomic) systems, whose every (q0, p0) "
                                      "starts a geodesic: " + allowed + "; got \"" + c.system_name + "\"");
  }
  c.system = parse_system(sys, c.system_name);
  const int dof = system_dof(c.system);

  const Node sh = top.object("shoot");
  sh.only({"q0", "time", "targets", "guesses", "newton", "continuation"});
  s.q0 = point_at(sh, "q0", dof, "the start configuration q0");
  s.time = sh.positive("time");

  const Node m = top.object("method");
  m.only({"name", "stages", "dt", "steps", "newton"});
  parse_method(m, c);
  if (m.has("dt") == m.has("steps"))
    throw ConfigError(m.at("steps"), "give exactly one of \"steps\" (dt = shoot.time / steps) and \"dt\"");
  if (m.has("steps")) {
    c.steps = m.integer("steps", 1, 1 << 30);
    c.dt = s.time / Real(c.steps);
  } else {
    c.dt = m.positive("dt");
    const Real steps = std::round(s.time / c.dt);
    if (!(steps >= 1 && steps <= Real(1 << 30)) || std::fabs(steps * c.dt - s.time) > 1e-9 * s.time)
      throw ConfigError(m.at("dt"), "must divide shoot.time = " + show(json(s.time)) + " into whole steps, got " +
                                        show(json(c.dt)));
    c.steps = std::int64_t(steps);
    c.dt = s.time / steps;
  }

  parse_targets(sh.object("targets"), dof, s);
  parse_guesses(sh.object("guesses"), dof, s);
  if (std::int64_t(s.targets.size()) > max_shots / s.guesses_per_target())
    throw ConfigError(sh.at("guesses"), "targets x guesses exceeds " + std::to_string(max_shots) + " shots");

  const Node nw = sh.object_or_empty("newton");
  nw.only({"tolerance", "max_iterations", "line_search", "max_backtracks"});
  s.tolerance = nw.positive("tolerance", s.tolerance);
  s.max_iterations = static_cast<int>(nw.integer("max_iterations", 1, 10000, s.max_iterations));
  s.line_search = nw.boolean("line_search", s.line_search);
  s.max_backtracks = static_cast<int>(nw.integer("max_backtracks", 0, 60, s.max_backtracks));

  if (sh.has("continuation")) {
    const Node ct = sh.object("continuation");
    ct.only({"rounds", "substeps"});
    s.continuation_rounds = static_cast<int>(ct.integer("rounds", 1, 1000, 3));
    s.continuation_substeps = static_cast<int>(ct.integer("substeps", 1, 10000, s.continuation_substeps));
  }

  const Node out = top.object_or_empty("output");
  out.only({"geodesics"});
  if (out.has("geodesics")) {
    const Node g = out.object("geodesics");
    g.only({"every", "targets"});
    s.geodesic_every = g.integer("every", 1, INT64_MAX);
    s.geodesic_every = std::min<std::int64_t>(s.geodesic_every, c.steps);
    s.geodesic_targets = g.integer("targets", 1, INT64_MAX, std::int64_t(s.targets.size()));
  }

  static const std::string dbl = "double";
  if (top.has("backend")) c.backend = top.string("backend", backend_names());
  c.precision = top.has("precision") ? top.string("precision", {"double"}) : dbl;
  c.size = std::int64_t(s.targets.size());
  return cfg;
}

ShootConfig load_shoot_config_file(const std::string& path) {
  return parse_shoot_config(read_config_file(path), path);
}

bool is_shoot_config_file(const std::string& path) {
  try {
    const json j = json::parse(read_config_file(path));
    return j.is_object() && j.contains("shoot");
  } catch (const std::exception&) {
    return false;  // the run parser reports what is wrong
  }
}

}  // namespace tether

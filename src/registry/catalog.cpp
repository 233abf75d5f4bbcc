#include "registry/catalog.hpp"

#include <algorithm>
#include <climits>
#include <sstream>

#include "compiled_pairs.hpp"
#include "expr/declared_interface.hpp"
#include "expr/declared_system.hpp"
#include "registry/parameter_io.hpp"
#include "tether/registry.hpp"
#include "tether/sampling/metric.hpp"

namespace tether {

namespace {

template <class T>
VariantInfo variant_info() {
  VariantInfo v;
  if constexpr (HasVariant<T>) {
    v.key = T::variant.key;
    v.value = T::variant.text ? nlohmann::json(T::variant.text) : nlohmann::json(T::variant.number);
    v.is_default = T::variant.is_default;
  }
  return v;
}

template <class T>
nlohmann::ordered_json schema() {
  typename T::Parameters p;
  ListParameters list;
  p.describe(list);
  return list.out;
}

// Reads and validates a parameter object into T's Parameters, returning the
// values (keys in declaration order).
template <class T>
nlohmann::ordered_json read_values(const Node& node) {
  typename T::Parameters p;
  ReadParameters read(node);
  p.describe(read);
  WriteParameters write;
  p.describe(write);
  return write.out;
}

using ReadFn = nlohmann::ordered_json (*)(const Node&);

struct Tables {
  std::vector<SystemInfo> systems;
  std::vector<MethodInfo> methods;
  std::vector<ReadFn> read_system, read_method;

  Tables() {
    for_each_type(Methods{}, [&](auto m, int) {
      using M = typename decltype(m)::type;
      MethodInfo info{M::name,       M::description, M::citation,       M::order,          M::symmetric,
                      M::symplectic, M::two_step,    takes_metric<M>, variant_info<M>(), schema<M>()};
      methods.push_back(std::move(info));
      read_method.push_back(&read_values<M>);
    });
    for_each_type(Systems{}, [&](auto s, int) {
      using S = typename decltype(s)::type;
      SystemInfo info{S::name,   S::description,    S::citation, family_of<S>(), S::dof,
                      reversed_by_momentum_flip<S>(), !HolonomicSystem<S> || SamplesConfigurations<S>,
                      variant_info<S>(), schema<S>(), {}};
      info.methods = methods_of<S>();
      systems.push_back(std::move(info));
      read_system.push_back(&read_values<S>);
    });
  }

  template <class S>
  static std::vector<int> methods_of() {
    std::vector<int> v;
    for_each_type(Methods{}, [&](auto m, int j) {
      if constexpr (MethodFor<typename decltype(m)::type, S>) v.push_back(j);
    });
    return v;
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

// "1, 2 or 3"
std::string or_list(const std::vector<std::string>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : (i + 1 == v.size() ? " or " : ", ")) + v[i];
  return s;
}

// Among the candidate instantiations of one name, the one the variant key
// picks; `what` names them in messages ("rigid chains").
template <class Info>
int choose_variant(const std::vector<Info>& all, const std::vector<int>& candidates, const Node& node,
                   const std::string& what) {
  if (candidates.size() == 1 && all[std::size_t(candidates[0])].variant.key.empty()) return candidates[0];
  const std::string key = all[std::size_t(candidates[0])].variant.key;
  std::vector<std::string> values;
  for (int c : candidates) values.push_back(all[std::size_t(c)].variant.text());
  if (!node.has(key)) {
    for (int c : candidates)
      if (all[std::size_t(c)].variant.is_default) return c;
  }
  if (all[std::size_t(candidates[0])].variant.value.is_string()) {
    const std::string chosen = node.string(key, values);
    for (int c : candidates)
      if (all[std::size_t(c)].variant.text() == chosen) return c;
  }
  if (!node.has(key)) throw ConfigError(node.at(key), "is missing (one of: " + join(values) + ")");
  const std::int64_t n = node.integer(key, INT_MIN, INT_MAX);
  for (int c : candidates)
    if (all[std::size_t(c)].variant.value == n) return c;
  throw ConfigError(node.at(key), "this build has " + what + " of " + or_list(values) + " " + key + ", got " +
                                      std::to_string(n));
}

std::vector<std::string> keys_of(const nlohmann::ordered_json& schema) {
  std::vector<std::string> keys;
  for (const auto& e : schema) keys.push_back(e["name"].get<std::string>());
  return keys;
}

// Whether a method declares a parameter of this key.
bool declares(const MethodInfo& m, const std::string& key) {
  for (const auto& e : m.parameters)
    if (e["name"] == key) return true;
  return false;
}

void add_once(std::vector<std::string>& v, const std::string& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

}  // namespace

const std::vector<SystemInfo>& system_infos() { return tables().systems; }
const std::vector<MethodInfo>& method_infos() { return tables().methods; }

std::vector<std::string> unique_system_names() {
  std::vector<std::string> v;
  for (const auto& s : system_infos())
    if (std::find(v.begin(), v.end(), s.name) == v.end()) v.push_back(s.name);
  return v;
}
std::vector<std::string> unique_method_names() {
  std::vector<std::string> v;
  for (const auto& m : method_infos())
    if (std::find(v.begin(), v.end(), m.name) == v.end()) v.push_back(m.name);
  return v;
}

nlohmann::json system_parameter_values(const SystemInfo& info, const nlohmann::json& given) {
  nlohmann::json values = nlohmann::json::object();
  if (!info.variant.key.empty()) values[info.variant.key] = info.variant.value;
  for (const auto& p : info.parameters) {
    const std::string name = p.at("name").get<std::string>();
    values[name] = given.contains(name) ? given.at(name) : p.value("default", nlohmann::json());
  }
  return values;
}

SystemInfo declared_system_info(const std::string& name, Family family, int dof,
                                const nlohmann::ordered_json& parameters) {
  static const std::vector<int> holonomic = Tables::methods_of<DeclaredInterface>();
  static const std::vector<int> index1 = Tables::methods_of<DeclaredFrameInterface>();
  SystemInfo info;
  info.name = name;
  info.description = "a system declared in the config";
  info.citation = "declared by its user";
  info.family = family;
  info.dof = dof;
  info.reversed_by_momentum_flip = true;  // H even in p: p^T M^-1 p / 2 + V, or 1/2 sum <p, X_i>^2 + V
  info.samples_configurations = family != Family::holonomic;  // none of its own; index-1 systems need none
  info.parameters = parameters;
  info.methods = family == Family::holonomic ? holonomic : index1;
  return info;
}

namespace {

// The built-in systems whose size is a template argument, and the sizes any
// build compiles on demand: (name, size key, smallest, largest, header,
// template, coordinates per unit of size).
struct Resizable {
  const char *name, *key;
  int smallest, largest;
  const char *header, *type;
  int dof_per_unit;
};
constexpr Resizable resizable[] = {
    {"chain", "beads", 3, 64, "tether/systems/chain.hpp", "Chain", 3},
    {"rigid_chain", "links", 1, 8, "tether/systems/rigid_chain.hpp", "RigidChain", 12},
};

}  // namespace

std::string sizes_compiled_at_first_use(const std::string& name) {
  for (const Resizable& r : resizable)
    if (name == r.name) return std::to_string(r.smallest) + " to " + std::to_string(r.largest);
  return "";
}

bool method_compiled_in(int method) { return method_compiled[std::size_t(method)]; }

std::shared_ptr<const DeclaredSystem> compiled_at_first_use(int system) {
  auto d = std::make_shared<DeclaredSystem>();
  d->info = system_infos().at(std::size_t(system));
  d->name = d->info.name;
  d->builtin_type = system_types[std::size_t(system)];
  d->builtin_header = system_headers[std::size_t(system)];
  return d;
}

std::shared_ptr<const DeclaredSystem> resized_system(const Node& sys) {
  if (!sys.has("name") || !sys.raw("name").is_string()) return nullptr;
  const std::string name = sys.raw("name").get<std::string>();
  for (const Resizable& r : resizable) {
    if (name != r.name) continue;
    const Node prm = sys.object_or_empty("parameters");
    if (!prm.has(r.key)) return nullptr;  // the default size
    const std::int64_t n = prm.integer(r.key, r.smallest, r.largest);
    const auto& all = system_infos();
    int like = -1;  // an instantiated size: its parameters, methods and family are every size's
    for (std::size_t i = 0; i < all.size(); ++i)
      if (all[i].name == name) {
        if (all[i].variant.value == n) return nullptr;
        if (like < 0) like = int(i);
      }
    sys.only({"name", "parameters"});
    std::set<std::string> allowed = {r.key};
    for (const auto& k : keys_of(all[std::size_t(like)].parameters)) allowed.insert(k);
    prm.only(allowed);
    tables().read_system[std::size_t(like)](prm);
    auto d = std::make_shared<DeclaredSystem>();
    d->name = name;
    d->info = all[std::size_t(like)];
    d->info.dof = r.dof_per_unit * int(n);
    d->info.variant.value = n;
    d->builtin_type = std::string(r.type) + "<" + std::to_string(n) + ">";
    d->builtin_header = r.header;
    return d;
  }
  return nullptr;
}

int choose_system(const Node& sys) {
  sys.only({"name", "parameters"});
  const std::string name = sys.string("name", unique_system_names());
  const auto& all = system_infos();
  std::vector<int> candidates;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i].name == name) candidates.push_back(int(i));
  const Node prm = sys.object_or_empty("parameters");
  std::string plural = name + "s";
  std::replace(plural.begin(), plural.end(), '_', ' ');
  const int index = choose_variant(all, candidates, prm, plural);
  std::set<std::string> allowed;
  for (const auto& k : keys_of(all[std::size_t(index)].parameters)) allowed.insert(k);
  if (!all[std::size_t(index)].variant.key.empty()) allowed.insert(all[std::size_t(index)].variant.key);
  prm.only(allowed);
  tables().read_system[std::size_t(index)](prm);
  return index;
}

int choose_method(const Node& m, const SystemInfo& sys, const std::set<std::string>& common,
                  nlohmann::ordered_json& parameters) {
  const std::string name = m.string("name", unique_method_names());
  const auto& all = method_infos();
  std::vector<int> candidates;
  std::vector<std::string> own;  // the system's method names
  for (int j : sys.methods) {
    if (all[std::size_t(j)].name == name) candidates.push_back(j);
    add_once(own, all[std::size_t(j)].name);
  }
  if (candidates.empty())
    throw ConfigError(m.at("name"), "\"" + name + "\" does not apply to " + sys.name + ", a " +
                                        family_name(sys.family) + " system (its methods: " + join(own) + ")");

  // A key of another method is named as such; a key of another variant of
  // this method, once the variant is chosen.
  std::set<std::string> allowed = common;
  const std::string& variant_key = all[std::size_t(candidates[0])].variant.key;
  if (!variant_key.empty()) allowed.insert(variant_key);
  for (const auto& [key, value] : m.json().items()) {
    if (allowed.count(key) ||
        std::any_of(candidates.begin(), candidates.end(), [&](int c) { return declares(all[std::size_t(c)], key); }))
      continue;
    std::vector<std::string> owners;
    for (const auto& other : all)
      if (declares(other, key) || other.variant.key == key) add_once(owners, other.name == name ? other.variant.label() : other.name);
    if (!owners.empty()) throw ConfigError(m.at(key), "applies only to " + join(owners));
  }

  const int index = choose_variant(all, candidates, m, name + " methods");
  for (const auto& k : keys_of(all[std::size_t(index)].parameters)) allowed.insert(k);
  for (const auto& [key, value] : m.json().items()) {
    if (allowed.count(key)) continue;
    std::vector<std::string> owners;
    for (int c : candidates)
      if (c != index && declares(all[std::size_t(c)], key)) owners.push_back(all[std::size_t(c)].variant.label());
    if (!owners.empty()) throw ConfigError(m.at(key), "applies only to " + join(owners));
  }
  m.only(allowed);
  parameters = tables().read_method[std::size_t(index)](m);
  return index;
}

std::string describe_method(int method, const nlohmann::ordered_json& parameters) {
  const MethodInfo& info = method_infos()[std::size_t(method)];
  std::vector<std::string> parts;
  if (!info.variant.key.empty()) parts.push_back(info.variant.label());
  for (const auto& [key, value] : parameters.items()) {
    std::ostringstream s;
    s << key << " ";
    if (value.is_number()) s << value.get<double>();
    else if (value.is_string()) s << value.get<std::string>();
    else s << "explicit";  // a tableau given as {a, b, c}
    parts.push_back(s.str());
  }
  return parts.empty() ? info.name : info.name + " (" + join(parts) + ")";
}

nlohmann::ordered_json catalog_json() {
  nlohmann::ordered_json j;
  auto variant = [](const VariantInfo& v) {
    nlohmann::ordered_json x;
    if (v.key.empty()) return x;
    x["key"] = v.key;
    x["value"] = v.value;
    x["default"] = v.is_default;
    return x;
  };
  j["systems"] = nlohmann::ordered_json::array();
  for (const auto& s : system_infos()) {
    nlohmann::ordered_json e;
    e["name"] = s.name;
    if (!s.variant.key.empty()) e["variant"] = variant(s.variant);
    if (const std::string sizes = sizes_compiled_at_first_use(s.name); !sizes.empty())
      e["sizes_compiled_at_first_use"] = sizes;
    e["family"] = family_name(s.family);
    e["dof"] = s.dof;
    e["reversed_by_momentum_flip"] = s.reversed_by_momentum_flip;
    e["description"] = s.description;
    e["citation"] = s.citation;
    e["parameters"] = s.parameters;
    e["methods"] = nlohmann::ordered_json::array();
    for (int m : s.methods) {
      const MethodInfo& mi = method_infos()[std::size_t(m)];
      e["methods"].push_back(mi.variant.key.empty() ? mi.name : mi.name + " " + mi.variant.label());
    }
    j["systems"].push_back(e);
  }
  // What a config may declare (system.declare; README, "Your own system").
  nlohmann::ordered_json declared;
  declared["functions"] = declared_functions();
  for (const Family family : {Family::holonomic, Family::nonholonomic}) {
    nlohmann::ordered_json methods = nlohmann::ordered_json::array();
    for (int m : declared_system_info("", family, 0, {}).methods) {
      const MethodInfo& mi = method_infos()[std::size_t(m)];
      methods.push_back(mi.variant.key.empty() ? mi.name : mi.name + " " + mi.variant.label());
    }
    declared[family_name(family)] = {{"methods", methods}};
  }
  j["declared"] = declared;
  j["methods"] = nlohmann::ordered_json::array();
  for (const auto& m : method_infos()) {
    nlohmann::ordered_json e;
    e["name"] = m.name;
    if (!m.variant.key.empty()) e["variant"] = variant(m.variant);
    e["order"] = m.order;
    e["symmetric"] = m.symmetric;
    e["symplectic"] = m.symplectic;
    e["two_step"] = m.two_step;
    e["description"] = m.description;
    e["citation"] = m.citation;
    e["parameters"] = m.parameters;
    j["methods"].push_back(e);
  }
  return j;
}

}  // namespace tether

#pragma once
// The visitors that read a Parameters::describe declaration
// (tether/core/parameters.hpp): one reads a config into the fields,
// validating each; one writes the fields as JSON (summary.json); one lists
// the schema (`tether list`). A declaration is written once; these are the
// only places that interpret it.
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "config/json_node.hpp"
#include "tether/core/parameters.hpp"

namespace tether {

std::string bound_number(double x);

// "must be positive", "must be in [0, 1]", ...; empty when any value is allowed.
std::string range_text(const Range& r);

template <class T>
using Options = std::initializer_list<std::pair<const char*, T>>;

// An explicit Runge-Kutta tableau's fields (stages, a, b, c), copied alone
// from a named one so that the other parameters keep their values.
template <class P>
constexpr int tableau_capacity = int(std::extent_v<decltype(P::b)>);

template <class P>
void copy_tableau(const P& from, P& to) {
  to.stages = from.stages;
  for (int i = 0; i < tableau_capacity<P>; ++i) {
    to.b[i] = from.b[i];
    to.c[i] = from.c[i];
    for (int j = 0; j < tableau_capacity<P>; ++j) to.a[i][j] = from.a[i][j];
  }
}
template <class P>
bool same_tableau(const P& x, const P& y) {
  if (x.stages != y.stages) return false;
  for (int i = 0; i < tableau_capacity<P>; ++i) {
    if (x.b[i] != y.b[i] || x.c[i] != y.c[i]) return false;
    for (int j = 0; j < tableau_capacity<P>; ++j)
      if (x.a[i][j] != y.a[i][j]) return false;
  }
  return true;
}

// Reads the declared keys of a JSON object into the fields; an absent key
// keeps the field's default. Every error names its JSON path; unknown keys
// are the caller's to refuse (src/registry/catalog.cpp).
class ReadParameters {
 public:
  explicit ReadParameters(const Node& node) : node_(node) {}

  void real(const char* key, Real& x, const Range& r, const char*);
  // Given in degrees, kept in radians.
  void degrees(const char* key, Real& radians, const Range& r, const char*);
  template <int N>
  void reals(const char* key, Real (&x)[N], const char* meaning) {
    if (!node_.has(key)) return;
    const std::vector<Real> v = node_.numbers(key);
    if (int(v.size()) != N)
      throw ConfigError(node_.at(key), "must list the " + std::to_string(N) + " " + meaning + ", got " +
                                           std::to_string(v.size()));
    for (int i = 0; i < N; ++i) x[i] = v[std::size_t(i)];
  }
  template <class T>
  void choice(const char* key, T& x, Options<T> options, const char*, Required required = Required::no) {
    std::vector<std::string> names;
    for (const auto& o : options) names.push_back(o.first);
    if (!node_.has(key) && required == Required::no) return;
    const std::string name = node_.string(key, names);  // "is missing" / "unknown value" with the list
    for (const auto& o : options)
      if (name == o.first) x = o.second;
  }
  // A named tableau, or an explicit one {a, b, c}.
  template <class P>
  void tableau(const char* key, P& p, Options<P> named, const char*) {
    if (node_.has(key) && node_.raw(key).is_object()) return explicit_tableau(Node(node_.raw(key), node_.at(key)), p);
    std::vector<std::string> names;
    for (const auto& o : named) names.push_back(o.first);
    if (!node_.has(key)) return;
    const std::string name = node_.string(key, names);
    for (const auto& o : named)
      if (name == o.first) copy_tableau(o.second, p);
  }
  // A check across fields (called after them): problem is what is wrong, or nullptr.
  void check(const char* problem, const char* key);

 private:
  nlohmann::json value_or(const char* key, Real x) const;

  template <class P>
  static void explicit_tableau(const Node& t, P& p) {
    t.only({"a", "b", "c"});
    const std::vector<Real> b = t.numbers("b"), c = t.numbers("c");
    const std::size_t s = b.size(), max = std::size_t(tableau_capacity<P>);
    if (s < 1 || s > max)
      throw ConfigError(t.at("b"), "must have 1 to " + std::to_string(max) + " weights, got " + std::to_string(s));
    if (!t.has("a")) throw ConfigError(t.at("a"), "is missing");
    const nlohmann::json& a = t.raw("a");
    if (!a.is_array()) throw ConfigError(t.at("a"), "must be an array of rows");
    if (c.size() != s || a.size() != s)
      throw ConfigError(t.path(), "a (rows), b and c must all have the same length, the number of stages");
    p.stages = int(s);
    for (std::size_t i = 0; i < max; ++i) {
      p.b[i] = i < s ? b[i] : 0;
      p.c[i] = i < s ? c[i] : 0;
      for (std::size_t j = 0; j < max; ++j) p.a[i][j] = 0;
    }
    for (std::size_t i = 0; i < s; ++i) {
      const std::string row = t.at("a") + "[" + std::to_string(i) + "]";
      if (!a[i].is_array()) throw ConfigError(row, "must be an array of numbers");
      if (a[i].size() != s) throw ConfigError(row, "must have " + std::to_string(s) + " entries");
      for (std::size_t j = 0; j < s; ++j) p.a[i][j] = Node::as_number(a[i][j], row + "[" + std::to_string(j) + "]");
    }
  }

  const Node& node_;
};

// Writes the fields' values under their keys, in declaration order.
class WriteParameters {
 public:
  nlohmann::ordered_json out = nlohmann::ordered_json::object();

  void real(const char* key, const Real& x, const Range&, const char*) { out[key] = x; }
  void degrees(const char* key, const Real& radians, const Range&, const char*) { out[key] = radians * 180 / M_PI; }
  template <int N>
  void reals(const char* key, const Real (&x)[N], const char*) {
    out[key] = nlohmann::ordered_json::array();
    for (int i = 0; i < N; ++i) out[key].push_back(x[i]);
  }
  template <class T>
  void choice(const char* key, const T& x, Options<T> options, const char*, Required = Required::no) {
    for (const auto& o : options)
      if (o.second == x) out[key] = o.first;
  }
  template <class P>
  void tableau(const char* key, const P& p, Options<P> named, const char*) {
    for (const auto& o : named)
      if (same_tableau(o.second, p)) {
        out[key] = o.first;
        return;
      }
    nlohmann::ordered_json t;
    for (int i = 0; i < p.stages; ++i) {
      nlohmann::ordered_json row = nlohmann::ordered_json::array();
      for (int j = 0; j < p.stages; ++j) row.push_back(p.a[i][j]);
      t["a"].push_back(row);
      t["b"].push_back(p.b[i]);
      t["c"].push_back(p.c[i]);
    }
    out[key] = t;
  }
  void check(const char*, const char*) {}
};

// The schema: one entry per key, with its type, default, bounds and meaning.
class ListParameters {
 public:
  nlohmann::ordered_json out = nlohmann::ordered_json::array();

  void real(const char* key, const Real& x, const Range& r, const char* meaning) {
    add(key, "number", x, range_text(r), meaning);
  }
  void degrees(const char* key, const Real& radians, const Range& r, const char* meaning) {
    add(key, "angle in degrees", radians * 180 / M_PI, range_text(r), meaning);
  }
  template <int N>
  void reals(const char* key, const Real (&x)[N], const char* meaning) {
    nlohmann::ordered_json d = nlohmann::ordered_json::array();
    for (int i = 0; i < N; ++i) d.push_back(x[i]);
    add(key, std::to_string(N) + " numbers", d, "", meaning);
  }
  template <class T>
  void choice(const char* key, const T& x, Options<T> options, const char* meaning, Required required = Required::no) {
    std::vector<std::string> names;
    nlohmann::ordered_json d;  // null when required
    for (const auto& o : options) {
      names.push_back(o.first);
      if (o.second == x && required == Required::no) d = o.first;
    }
    add(key, "one of: " + join(names), d, required == Required::yes ? "required" : "", meaning);
    out.back()["choices"] = names;
  }
  template <class P>
  void tableau(const char* key, const P& p, Options<P> named, const char* meaning) {
    std::vector<std::string> names;
    nlohmann::ordered_json d;
    for (const auto& o : named) {
      names.push_back(o.first);
      if (same_tableau(o.second, p)) d = o.first;
    }
    add(key, "one of: " + join(names) + ", or an explicit tableau {a, b, c}", d, "", meaning);
    out.back()["choices"] = names;
  }
  void check(const char*, const char*) {}

 private:
  void add(const char* key, const std::string& type, nlohmann::ordered_json d, const std::string& bounds,
           const char* meaning) {
    nlohmann::ordered_json e;
    e["name"] = key;
    e["type"] = type;
    e["default"] = std::move(d);
    if (!bounds.empty()) e["bounds"] = bounds;
    e["meaning"] = meaning;
    out.push_back(std::move(e));
  }
};

// A system or method with the parameters of its (validated) config object.
template <class T>
T configured(const nlohmann::json& object, const std::string& path) {
  T t{};
  const Node node(object, path);
  ReadParameters read(node);
  t.prm.describe(read);
  return t;
}

}  // namespace tether

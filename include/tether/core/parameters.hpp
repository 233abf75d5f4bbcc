#pragma once
// How a system or a method declares its runtime parameters, once, beside its
// code. Its Parameters struct has a member
//
//   template <class V> void describe(V& v) {
//     v.real("mass", mass, Range::positive(), "bob mass");
//     ...
//   }
//
// naming each field with its config key, bounds and meaning. The host-side
// visitors (src/registry/parameter_io.hpp) walk it to parse and validate a
// config, to list the schema (`tether list`), and to write summary.json; the
// device never calls it. The visitor calls a parameter may make:
//   real(key, Real&, Range, meaning)                a number within bounds
//   degrees(key, Real& radians, Range, meaning)     an angle given in degrees
//   reals(key, Real (&)[N], meaning)                exactly N numbers
//   choice(key, T&, {{"name", value}, ...}, meaning[, required])
//   tableau(key, ExplicitTableau&, {{"name", tableau}, ...}, meaning)
//   check(problem, key)                             a check across fields, after them:
//                                                   problem is what is wrong, or nullptr
#include <limits>

namespace tether {

// The allowed values of a real parameter.
struct Range {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;
  const char* why = nullptr;  // said after a violation, in parentheses

  static constexpr Range any() { return {}; }
  static constexpr Range positive() { return {0, std::numeric_limits<double>::infinity(), true, false}; }
  static constexpr Range non_negative() { return {0, std::numeric_limits<double>::infinity(), false, false}; }
  static constexpr Range closed(double a, double b) { return {a, b, false, false}; }
  static constexpr Range left_open(double a, double b) { return {a, b, true, false}; }
  static constexpr Range above(double a, const char* why) {
    return {a, std::numeric_limits<double>::infinity(), true, false, why};
  }
  constexpr bool contains(double x) const {
    return (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
  }
};

enum class Required { no, yes };

// The compile-time choice among the instantiations that share one name: its
// config key and this instantiation's value, a count (gauss_legendre's
// "stages", chain's "beads") or a name (composition's "base"). At most one
// instantiation of a name is the default, taken when the key is absent.
struct Variant {
  const char* key = nullptr;
  int number = 0;
  const char* text = nullptr;
  bool is_default = false;

  constexpr Variant() = default;
  constexpr Variant(const char* k, int n, bool d = false) : key(k), number(n), is_default(d) {}
  constexpr Variant(const char* k, const char* t, bool d = false) : key(k), text(t), is_default(d) {}
};

// The declaration of a system or method without runtime parameters.
struct NoParameters {
  template <class V>
  void describe(V&) {}
};

}  // namespace tether

#pragma once
// A JSON object with its path in the config, so that every error can say
// where it is (e.g. "method.dt"). Shared by the config parser and the
// registry's parameter reader.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tether/engine/config_error.hpp"
#include "tether/core/types.hpp"

namespace tether {

inline std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

inline std::string show(const nlohmann::json& j) {
  std::string s = j.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

// A JSON object together with its path, so every error can say where it is.
class Node {
 public:
  Node(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) throw ConfigError(path_.empty() ? "(top level)" : path_, "must be an object, got " + show(j_));
  }

  std::string at(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  bool has(const std::string& key) const { return j_.contains(key); }
  const std::string& path() const { return path_; }
  const nlohmann::json& json() const { return j_; }
  const nlohmann::json& raw(const std::string& key) const { return j_.at(key); }

  Node object(const std::string& key) const {
    if (!has(key)) throw ConfigError(at(key), "is missing");
    return Node(j_.at(key), at(key));
  }
  Node object_or_empty(const std::string& key) const {
    static const nlohmann::json empty = nlohmann::json::object();
    return has(key) ? Node(j_.at(key), at(key)) : Node(empty, at(key));
  }

  std::string string(const std::string& key, const std::vector<std::string>& allowed,
                     const std::string* fallback = nullptr) const {
    if (!has(key)) {
      if (fallback) return *fallback;
      throw ConfigError(at(key), "is missing (one of: " + join(allowed) + ")");
    }
    const nlohmann::json& v = j_.at(key);
    if (!v.is_string()) throw ConfigError(at(key), "must be a string, got " + show(v));
    const std::string s = v.get<std::string>();
    if (std::find(allowed.begin(), allowed.end(), s) == allowed.end())
      throw ConfigError(at(key), "unknown value " + show(v) + " (one of: " + join(allowed) + ")");
    return s;
  }

  // A non-empty string of the user's choosing (a file name).
  std::string text(const std::string& key) const {
    if (!has(key)) throw ConfigError(at(key), "is missing");
    const nlohmann::json& v = j_.at(key);
    if (!v.is_string() || v.get_ref<const std::string&>().empty())
      throw ConfigError(at(key), "must be a non-empty string, got " + show(v));
    return v.get<std::string>();
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
    if (!(x > 0)) throw ConfigError(at(key), "must be positive, got " + show(j_.contains(key) ? j_.at(key) : nlohmann::json(x)));
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
    const nlohmann::json& v = j_.at(key);
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
    const nlohmann::json& v = j_.at(key);
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
      const std::string quoted = nlohmann::json(it.key()).dump();  // escapes control characters
      throw ConfigError(at(quoted.substr(1, quoted.size() - 2)),
                        list.empty() ? "unknown key (nothing is expected here)"
                                     : "unknown key (expected one of: " + list + ")");
    }
  }

  static Real as_number(const nlohmann::json& v, const std::string& path) {
    if (!v.is_number()) throw ConfigError(path, "must be a number, got " + show(v));
    const Real x = v.get<Real>();
    if (!std::isfinite(x)) throw ConfigError(path, "must be finite, got " + show(v));
    return x;
  }

 private:
  const nlohmann::json& j_;
  std::string path_;
};

}  // namespace tether

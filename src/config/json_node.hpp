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

std::string join(const std::vector<std::string>& v);

// A value or key as an error message echoes it: JSON-quoted (so a newline
// cannot split the error line) and cut to 60 characters.
std::string show(const nlohmann::json& j);
std::string show_key(const std::string& key);

// The one way a config text becomes JSON: shape checked first, then parsed;
// every failure a ConfigError naming where.
nlohmann::json parse_config_json(const std::string& text, const std::string& source);

// A JSON object together with its path, so every error can say where it is.
class Node {
 public:
  Node(const nlohmann::json& j, std::string path);

  std::string at(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  bool has(const std::string& key) const { return j_.contains(key); }
  const std::string& path() const { return path_; }
  const nlohmann::json& json() const { return j_; }
  const nlohmann::json& raw(const std::string& key) const { return j_.at(key); }

  Node object(const std::string& key) const;
  Node object_or_empty(const std::string& key) const;

  std::string string(const std::string& key, const std::vector<std::string>& allowed,
                     const std::string* fallback = nullptr) const;

  // A non-empty string of the user's choosing (a file name).
  std::string text(const std::string& key) const;

  Real number(const std::string& key, std::optional<Real> fallback = std::nullopt) const;
  Real positive(const std::string& key, std::optional<Real> fallback = std::nullopt) const;
  Real non_negative(const std::string& key, std::optional<Real> fallback = std::nullopt) const;
  std::int64_t integer(const std::string& key, std::int64_t lo, std::int64_t hi,
                       std::optional<std::int64_t> fallback = std::nullopt) const;
  bool boolean(const std::string& key, bool fallback) const;
  std::vector<Real> numbers(const std::string& key) const;

  // Typos must not pass silently as defaults.
  void only(const std::set<std::string>& known) const;

  static Real as_number(const nlohmann::json& v, const std::string& path);

 private:
  const nlohmann::json& j_;
  std::string path_;
};

}  // namespace tether

#pragma once
// The tokens of a declared system's expressions, read alike by the lexer
// that checks a text before GiNaC sees it (expr/declared_system.cpp) and by
// the reader that writes out repeated structure (expr/repeated.cpp): one set
// of rules and one wording of what is wrong, with 1-based positions.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "expr/declared_system.hpp"
#include "tether/engine/config_error.hpp"

namespace tether::lexer {

// Parentheses (and a repeated structure's brackets) nest at most this deep:
// GiNaC's parser, and the reader of repeated structure, descend once per level.
constexpr int max_nesting = 200;

inline bool starts_name(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
inline bool in_name(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
inline bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)); }
inline bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)); }
inline std::string at(std::size_t i) { return " at position " + std::to_string(i + 1); }

inline bool is_function(const std::string& name) {
  return std::find(declared_functions().begin(), declared_functions().end(), name) != declared_functions().end();
}

// Whether a number starts at text[i], and where it ends: digits and points,
// then an exponent where one follows (e, E, a sign, digits).
inline bool starts_number(const std::string& text, std::size_t i, std::size_t end) {
  return is_digit(text[i]) || (text[i] == '.' && i + 1 < end && is_digit(text[i + 1]));
}
inline std::size_t number_end(const std::string& text, std::size_t i, std::size_t end) {
  while (i < end && (is_digit(text[i]) || text[i] == '.')) ++i;
  if (i < end && (text[i] == 'e' || text[i] == 'E')) {
    std::size_t j = i + 1;
    if (j < end && (text[j] == '+' || text[j] == '-')) ++j;
    if (j < end && is_digit(text[j])) {
      i = j;
      while (i < end && is_digit(text[i])) ++i;
    }
  }
  return i;
}

[[noreturn]] inline void unknown_function(const std::string& path, const std::string& name, std::size_t start) {
  std::string list;
  for (const auto& f : declared_functions()) list += (list.empty() ? "" : ", ") + f;
  throw ConfigError(path, "unknown function \"" + name.substr(0, 40) + "\"" + at(start) + " (functions: " + list +
                              ", and sum over ranges)");
}

// A character as a message shows it: a JSON string, control characters escaped.
inline std::string quoted(char c) {
  return nlohmann::json(std::string(1, c)).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

[[noreturn]] inline void unexpected_character(const std::string& path, char c, std::size_t i) {
  throw ConfigError(path, "unexpected character " + quoted(c) + at(i));
}

[[noreturn]] inline void too_deep(const std::string& path, std::size_t i) {
  throw ConfigError(path, "nests parentheses more than " + std::to_string(max_nesting) + " deep" + at(i));
}

}  // namespace tether::lexer

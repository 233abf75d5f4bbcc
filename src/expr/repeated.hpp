#pragma once
// Repeated structure in a declaration, written once (README, "Your own
// system"): named integer `sizes`; array items given `{"for": "i = 1..N-1",
// "each": item or [items]}`, repeated for each value of the index (several
// ranges, "i = 1..N, j = i+2..N", nest); definitions with an indexed name,
// `"b[i]": {"for": ..., "each": expression}`; indexed names in expressions,
// x[i+1] (an index is integer arithmetic, + - * and parentheses, of the
// ranges' indices and the sizes); and sums, sum(i = 1..N-1, expression).
// expand_repeated writes out the plain declaration that parse_declared_system
// reads, in which x[3] is the name x__3 and r[1,2] is r__1_2 (so no declared
// name may hold "__"); every text it rewrites it first reads token by token,
// with the lexer's rules and messages (positions in the text as written).
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tether/engine/config_error.hpp"

namespace tether {

struct ExpandedDeclaration {
  nlohmann::json declaration;  // plain: no sizes, ranges, indices or sums
  // Where each item of the plain declaration was written: its JSON path
  // there -> the path as written and the indices' values ("i = 3").
  std::map<std::string, std::pair<std::string, std::string>> origins;

  // `e`, thrown while reading the plain declaration, at the path as written,
  // with the indices' values and indexed names (x[3]) in its message.
  ConfigError as_written(const ConfigError& e) const;
};

// The declaration `j` at `path` written out. Errors are ConfigErrors at the
// JSON path as written, with the position in the text.
ExpandedDeclaration expand_repeated(const nlohmann::json& j, const std::string& path);

}  // namespace tether

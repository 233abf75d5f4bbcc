// libFuzzer target: reading a config (src/config) and a declared system
// (src/expr), from the text of an expression to the generated source.
// Whatever the input, reading ends in a config or in one ConfigError: any
// other exception, a crash, a sanitizer's report or a run past the time
// limit is a defect. Built and run by scripts/fuzz.sh (clang,
// -fsanitize=fuzzer,address,undefined).
//
// An input that starts with '{' and names "method" is a whole config, read
// as `run`, `shoot` and `sample` read theirs; one that starts with '{'
// otherwise is a declaration (JSON: repeated structure, sizes, names); any
// other is up to three expressions, one per line, put in a pendulum's
// declaration: its potential, its constraint and a definition `w` that
// both may use.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "expr/declared_system.hpp"
#include "tether/engine/config.hpp"
#include "tether/engine/config_error.hpp"
#include "tether/engine/sample.hpp"

namespace {

nlohmann::json declaration(const std::string& input) {
  if (!input.empty() && input[0] == '{') return nlohmann::json::parse(input, nullptr, false);
  std::string lines[3] = {"m * g * z", "(x^2 + y^2 + z^2 - L^2) / (2 * L)", "x * y"};
  std::size_t from = 0;
  for (int k = 0; k < 3 && from <= input.size(); ++k) {
    const std::size_t end = std::min(input.find('\n', from), input.size());
    lines[k] = input.substr(from, end - from);
    from = end + 1;
  }
  nlohmann::json j = {{"name", "fuzzed"},
                      {"coordinates", {"x", "y", "z"}},
                      {"parameters", {{"m", 1.5}, {"g", 9.81}, {"L", 0.7}}},
                      {"definitions", {{"w", lines[2]}}},
                      {"potential", lines[0]},
                      {"constraints", {lines[1]}}};
  return j;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  if (!input.empty() && input[0] == '{' && input.find("\"method\"") != std::string::npos) {
    for (const auto& read : {+[](const std::string& t) { (void)tether::parse_config(t, "fuzz"); },
                             +[](const std::string& t) { (void)tether::parse_shoot_config(t, "fuzz"); },
                             +[](const std::string& t) { (void)tether::parse_sample_config(t, "fuzz"); }}) {
      try {
        read(input);
      } catch (const tether::ConfigError&) {
      }
    }
    return 0;
  }
  const nlohmann::json j = declaration(input);
  if (j.is_discarded()) return 0;
  try {
    const tether::DeclaredSystem d = tether::parse_declared_system(j, "system.declare");
    (void)d.source("Fuzzed");
  } catch (const tether::ConfigError&) {
  }
  return 0;
}

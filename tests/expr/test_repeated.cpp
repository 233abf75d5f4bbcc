// Repeated structure in a declaration (src/expr/repeated.hpp): what it writes
// out, against declarations written out by hand; the system it declares,
// against the values its formulas give; and its bad inputs, named at the
// JSON path and position as written.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "expr/bad_declarations.hpp"
#include "expr/declared_system.hpp"
#include "expr/repeated.hpp"
#include "tether/engine/config_error.hpp"

namespace tether::test {
namespace {

using nlohmann::json;

// Three beads in a plane held at distance b in a row, with springs to rest
// positions along x: each form of repetition once.
json three_beads() {
  return json::parse(R"json({
    "name": "beads",
    "sizes": {"N": 3},
    "coordinates": [{"for": "i = 1..N", "each": ["x[i]", "y[i]"]}],
    "mass": [{"for": "i = 1..N", "each": [1, 2]}],
    "parameters": {"b": 1.5, "k": 2},
    "definitions": {"d[i]": {"for": "i = 1..N-1", "each": "x[i+1] - x[i]"}, "rest": "b * (N - 1)"},
    "potential": "k / 2 * sum(i = 1..N, (x[i] - b * (i - 1))^2 + y[i]^2) + 0 * rest",
    "constraints": ["y[1]", {"for": "i = 1..N-1", "each": "(d[i]^2 + (y[i+1] - y[i])^2 - b^2) / (2 * b)"}],
    "length_scale": "b",
    "energy_scale": "N * k * b^2"
  })json");
}

TEST(RepeatedDeclaration, IsWrittenOutAsTheDeclarationByHand) {
  const json by_hand = json::parse(R"json({
    "name": "beads",
    "coordinates": ["x__1", "y__1", "x__2", "y__2", "x__3", "y__3"],
    "mass": [1, 2, 1, 2, 1, 2],
    "parameters": {"b": 1.5, "k": 2},
    "definitions": {"d__1": "x__2 - x__1", "d__2": "x__3 - x__2", "rest": "b * (3 - 1)"},
    "potential": "k / 2 * (((x__1 - b * (1 - 1))^2 + y__1^2) + ((x__2 - b * (2 - 1))^2 + y__2^2) + ((x__3 - b * (3 - 1))^2 + y__3^2)) + 0 * rest",
    "constraints": ["y__1", "(d__1^2 + (y__2 - y__1)^2 - b^2) / (2 * b)", "(d__2^2 + (y__3 - y__2)^2 - b^2) / (2 * b)"],
    "length_scale": "b",
    "energy_scale": "3 * k * b^2"
  })json");
  const ExpandedDeclaration e = expand_repeated(three_beads(), "system.declare");
  EXPECT_EQ(e.declaration, by_hand) << e.declaration.dump(2);
  // Each item written out knows where it was written.
  EXPECT_EQ(e.origins.at("system.declare.constraints[2]"),
            std::make_pair(std::string("system.declare.constraints[1].each"), std::string("i = 2")));
  EXPECT_EQ(e.origins.at("system.declare.coordinates[3]"),
            std::make_pair(std::string("system.declare.coordinates[0].each[1]"), std::string("i = 2")));
  EXPECT_EQ(e.origins.at("system.declare.definitions.d__1"),
            std::make_pair(std::string("system.declare.definitions.d[i].each"), std::string("i = 1")));
  // A declaration without repetition is left as it is.
  const json plain = json::parse(R"({"name": "pendulum", "coordinates": ["x", "y"], "parameters": {"g": 9.81},
                                     "potential": "g * y", "constraints": ["x^2 + y^2 - 1"]})");
  EXPECT_EQ(expand_repeated(plain, "system.declare").declaration, plain);
}

TEST(RepeatedDeclaration, RangesNestAndNamesTakeSeveralIndices) {
  const json j = json::parse(R"json({
    "name": "pairs", "sizes": {"N": 3},
    "coordinates": [{"for": "i = 1..N", "each": "x[i]"}, "s"],
    "definitions": {"r[i,j]": {"for": "i = 1..N, j = i+1..N", "each": "x[j] - x[i]"}},
    "potential": "sum(i = 1..N, j = i+1..N, r[i,j]^2) + sum(i = N..1, x[i]) + sum(i = 1..2, j = 1..i, s * i * j)",
    "constraints": [{"for": "i = 0..-1", "each": "x[i]"}, "s - x[2*N - 3 - (1)]"]
  })json");
  const json e = expand_repeated(j, "system.declare").declaration;
  EXPECT_EQ(e["coordinates"], json::parse(R"(["x__1", "x__2", "x__3", "s"])"));
  EXPECT_EQ(e["definitions"], json::parse(R"({"r__1_2": "x__2 - x__1", "r__1_3": "x__3 - x__1", "r__2_3": "x__3 - x__2"})"));
  EXPECT_EQ(e["potential"], "((r__1_2^2) + (r__1_3^2) + (r__2_3^2)) + 0 + ((s * 1 * 1) + (s * 2 * 1) + (s * 2 * 2))");
  EXPECT_EQ(e["constraints"], json::parse(R"(["s - x__2"])"));  // an empty range repeats nothing
}

// A chain of N beads in a plane, declared once, against the same formulas
// evaluated here: V = k/2 sum_i (|r_{i+1} - r_i| - b)^2 + sum_{i<j} c / |r_j - r_i|^2,
// bonds |r_{i+1} - r_i|^2 = b^2.
TEST(RepeatedDeclaration, TheSystemDeclaredIsTheOneItsFormulasGive) {
  const int n = 6;
  const json j = json::parse(R"json({
    "name": "ring_free_chain", "sizes": {"N": 6},
    "coordinates": [{"for": "i = 1..N", "each": ["x[i]", "y[i]"]}],
    "parameters": {"k": 3, "b": 1.2, "c": 0.5},
    "definitions": {"r2[i,j]": {"for": "i = 1..N, j = i+1..N", "each": "(x[j] - x[i])^2 + (y[j] - y[i])^2"}},
    "potential": "k / 2 * sum(i = 1..N-1, (sqrt(r2[i,i+1]) - b)^2) + sum(i = 1..N, j = i+1..N, c / r2[i,j])",
    "constraints": [{"for": "i = 1..N-1", "each": "r2[i,i+1] - b^2"}]
  })json");
  const DeclaredSystem d = parse_declared_system(j, "system.declare");
  ASSERT_EQ(d.coordinates.size(), std::size_t(2 * n));
  const Real k = 3, b = 1.2, c = 0.5;
  std::mt19937_64 rng(5);
  std::normal_distribution<Real> normal;
  for (int trial = 0; trial < 10; ++trial) {
    std::vector<Real> q(2 * n);
    for (Real& x : q) x = 3 * normal(rng);
    const auto r2 = [&](int i, int m) {  // 0-based beads
      return std::pow(q[2 * m] - q[2 * i], 2) + std::pow(q[2 * m + 1] - q[2 * i + 1], 2);
    };
    Real v = 0;
    for (int i = 0; i + 1 < n; ++i) v += k / 2 * std::pow(std::sqrt(r2(i, i + 1)) - b, 2);
    for (int i = 0; i < n; ++i)
      for (int m = i + 1; m < n; ++m) v += c / r2(i, m);
    EXPECT_NEAR(d.potential_at(q), v, 1e-12 * std::abs(v));
    const std::vector<Real> g = d.constraints_at(q);
    ASSERT_EQ(g.size(), std::size_t(n - 1));
    for (int i = 0; i + 1 < n; ++i) EXPECT_NEAR(g[i], r2(i, i + 1) - b * b, 1e-12 * (1 + r2(i, i + 1)));
    // The gradient against central differences of the potential.
    const std::vector<Real> grad = d.gradient_at(q);
    for (int i = 0; i < 2 * n; ++i) {
      std::vector<Real> up = q, down = q;
      const Real h = 1e-6;
      up[i] += h, down[i] -= h;
      EXPECT_NEAR(grad[i], (d.potential_at(up) - d.potential_at(down)) / (2 * h), 1e-6 * (1 + std::abs(grad[i])));
    }
  }
}

// Each bad repetition is one ConfigError at the path as written, with the
// position in the text and the indices where they matter; nothing a range or
// an index says is read but whole numbers, indices and sizes.
TEST(RepeatedDeclaration, BadRepetitionsNameThePathAsWrittenAndThePosition) {
  const std::vector<BadDeclaration> cases = {
      {"an index past the last", [](json& j) { j["constraints"][1]["each"] = "x[i+2] - x[i]"; },
       "system.declare.constraints[1].each", "names x[4] at position 1 (i = 2), which is not declared (x runs from x[1] to x[3])"},
      {"an unknown size", [](json& j) { j["constraints"][1]["for"] = "i = 1..M"; }, "system.declare.constraints[1].for",
       "has \"M\" in an index, which is neither a range's index nor a size at position 8"},
      {"a range without =", [](json& j) { j["constraints"][1]["for"] = "i in 1..N"; }, "system.declare.constraints[1].for",
       "expects \"=\" at position 3"},
      {"a range without ..", [](json& j) { j["constraints"][1]["for"] = "i = 1:N"; }, "system.declare.constraints[1].for",
       "expects \"..\""},
      {"code in a range", [](json& j) { j["constraints"][1]["for"] = "i = 1..N; system(1)"; },
       "system.declare.constraints[1].for", "unexpected \";\" in an index at position 9"},
      {"code in an index", [](json& j) { j["potential"] = "x[system(1)]"; }, "system.declare.potential",
       "has \"system\" in an index"},
      {"an index named as a parameter", [](json& j) { j["constraints"][1]["for"] = "k = 1..N-1"; },
       "system.declare.constraints[1].for", "uses \"k\" as an index, which is also a declared name"},
      {"an index named as a parameter, in a coordinate's range",
       [](json& j) { j["coordinates"][0] = {{"for", "b = 1..N"}, {"each", {"x[b]", "y[b]"}}}; },
       "system.declare.coordinates[0].for", "uses \"b\" as an index, which is also a declared name"},
      {"an index named as a size", [](json& j) { j["potential"] = "sum(N = 1..3, x[N])"; }, "system.declare.potential",
       "uses \"N\" as an index, which is a size's name"},
      {"too many ranges", [](json& j) { j["constraints"][1]["for"] = "a = 1..1, b1 = 1..1, c = 1..1, d1 = 1..1, e = 1..1, f = 1..1, g = 1..1, h = 1..1, i = 1..N-1"; },
       "system.declare.constraints[1].for", "has more than 8 ranges"},
      {"an index bound twice", [](json& j) { j["potential"] = "sum(i = 1..3, i = 1..2, x[i])"; },
       "system.declare.potential", "binds \"i\" at position 15 inside a range of the same index"},
      {"a plain name indexed", [](json& j) { j["potential"] = "k * rest[1]"; }, "system.declare.potential",
       "indexes \"rest\" at position 5, which is not declared with an index"},
      {"an indexed name without its index", [](json& j) { j["potential"] = "k * x"; }, "system.declare.potential",
       "uses \"x\" at position 5 without its index"},
      {"an unknown symbol after an index", [](json& j) { j["potential"] = "x[1] * kk"; }, "system.declare.potential",
       "unknown symbol \"kk\" at position 8"},
      {"a character outside the grammar after an index", [](json& j) { j["potential"] = "x[1] ; 1"; },
       "system.declare.potential", "unexpected character \";\" at position 6"},
      {"a bracket not closed", [](json& j) { j["potential"] = "x[1 + y[2]"; }, "system.declare.potential",
       "has a \"[\" that is not closed at position 2"},
      {"an index nested too deep", [](json& j) { j["potential"] = std::string("x[") + std::string(5000, '(') + "1" + std::string(5000, ')') + "]"; },
       "system.declare.potential", "nests parentheses more than 200 deep at position 202"},
      {"sums nested too deep",
       [](json& j) {
         std::string e = "x[1]";
         for (int k = 0; k < 300; ++k) e = "sum(i = 1..1, " + e + ")";
         j["potential"] = e;
       },
       "system.declare.potential", "nests parentheses more than 200 deep"},
      {"a long run of signs in an index is read as one", [](json& j) { j["potential"] = std::string("x[") + std::string(49999, '-') + "1]"; },
       "system.declare.potential", "names x[-1] at position 1"},
      {"a sum without a range", [](json& j) { j["potential"] = "1 + sum(x[1])"; }, "system.declare.potential",
       "has a sum at position 5 that is not sum(i = first..last, expression)"},
      {"a name declared with and without an index",
       [](json& j) { j["coordinates"] = {"x", {{"for", "i = 1..N"}, {"each", "x[i]"}}}; },
       "system.declare.coordinates[1].each", "declares \"x\" both with and without an index"},
      {"a name declared twice", [](json& j) { j["coordinates"][1] = "x[3]"; }, "system.declare.coordinates[1]",
       "declares x[3] twice"},
      {"a negative index", [](json& j) { j["coordinates"][1] = "z[1-2]"; }, "system.declare.coordinates[1]",
       "indices are whole numbers from 0"},
      {"a negative size", [](json& j) { j["sizes"]["N"] = -1; }, "system.declare.sizes.N", "a whole number from 0"},
      {"a size that is not whole", [](json& j) { j["sizes"]["N"] = 2.5; }, "system.declare.sizes.N", "a whole number"},
      {"sizes that are not an object", [](json& j) { j["sizes"] = 3; }, "system.declare.sizes", "must be an object"},
      {"a size named as a parameter", [](json& j) { j["sizes"]["k"] = 2; }, "system.declare.sizes.k",
       "is also a declared name"},
      {"a parameter name with __", [](json& j) { j["parameters"]["x__1"] = 1; }, "system.declare.parameters.x__1",
       "holds \"__\""},
      {"a repeated item's unknown key", [](json& j) { j["constraints"][1]["eachh"] = 1; },
       "system.declare.constraints[1].eachh", "unknown key"},
      {"a repeated item without each", [](json& j) { j["constraints"][1].erase("each"); },
       "system.declare.constraints[1].each", "is missing"},
      {"a repeated definition without an index", [](json& j) { j["definitions"]["e"] = {{"for", "i = 1..2"}, {"each", "x[i]"}}; },
       "system.declare.definitions.e", "its name needs the index, such as e[i]"},
      {"too much written out", [](json& j) { j["potential"] = "sum(i = 1..10000000, x[1])"; }, "system.declare.potential",
       "writes out more than 100000 items and terms"},
      // Errors found in the declaration written out are said where it was written.
      {"a definition through itself", [](json& j) { j["definitions"]["d[i]"]["each"] = "d[i] + x[i]"; },
       "system.declare.definitions.d[i].each", "refers to itself through the definitions (where i = 1)"},
      {"an empty expression repeated", [](json& j) { j["constraints"][1]["each"] = " "; },
       "system.declare.constraints[1].each", "is empty (where i = 1)"},
      {"a syntax error repeated", [](json& j) { j["constraints"][1]["each"] = "x[i+1] * * 2"; },
       "system.declare.constraints[1].each", "expects a number, a name or \"(\" at position 8: \"* 2\" (where i = 1)"},
      {"too many constraints, written out",
       [](json& j) { j["constraints"][1] = {{"for", "i = 1..N-1"}, {"each", {"x[i]", "y[i+1]", "x[i+1]"}}}; },
       "system.declare.constraints", "holds 7 constraints for 6 coordinates"},
  };
  expect_refused(three_beads(), cases);
}

}  // namespace
}  // namespace tether::test

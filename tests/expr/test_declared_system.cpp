// Systems declared as expressions (src/expr/declared_system.hpp): the
// declaration's values and exact derivatives, its bad inputs (named by JSON
// path and position, code never admitted), and the generated C++ type,
// compiled here as tether will compile it when a system is first used.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "declared_toolchain.hpp"
#include "expr/bad_declarations.hpp"
#include "expr/compiled_pair.hpp"
#include "expr/declared_pendulum.hpp"
#include "expr/declared_system.hpp"
#include "registry/catalog.hpp"
#include "support.hpp"
#include "tether/engine/catalog.hpp"
#include "tether/core/small_solve.hpp"
#include "tether/engine/config_error.hpp"
#include "tether/systems/spherical_pendulum.hpp"

namespace tether::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json pendulum() { return declared_pendulum_declaration(); }

SphericalPendulum builtin_pendulum() {
  SphericalPendulum s;
  s.prm.mass = 1.5, s.prm.gravity = 9.81, s.prm.length = 0.7;
  return s;
}

TEST(DeclaredSystem, ThePendulumDeclaredIsTheBuiltInOne) {
  const DeclaredSystem d = parse_declared_system(pendulum(), "system.declare");
  const SphericalPendulum s = builtin_pendulum();
  EXPECT_EQ(d.coordinates.size(), 3u);
  EXPECT_EQ(d.constraints_at({0.1, 0.2, 0.3}).size(), 1u);
  EXPECT_DOUBLE_EQ(d.length_scale, 0.7);
  EXPECT_DOUBLE_EQ(d.energy_scale, s.energy_scale());
  std::mt19937_64 rng(3);
  std::normal_distribution<Real> normal;
  for (int k = 0; k < 20; ++k) {
    const Vec<3> q(normal(rng), normal(rng), normal(rng));
    const std::vector<Real> qv = {q[0], q[1], q[2]};
    EXPECT_NEAR(d.potential_at(qv), s.potential(q), 1e-14 * (1 + std::abs(s.potential(q))));
    const Vec<3> grad = s.potential_gradient(q);
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(d.gradient_at(qv)[i], grad[i], 1e-13);
    EXPECT_NEAR(d.constraints_at(qv)[0], s.constraints(q)[0], 1e-13);
    for (int i = 0; i < 3; ++i) {
      const Vec<3> e = Vec<3>::Unit(i);
      EXPECT_NEAR(d.jacobian_at(qv)[0][i], s.constraint_jacobian_times(q, e)[0], 1e-13);
    }
  }
}

// Exact derivatives of a set of expressions that uses every function of the
// grammar, definitions within definitions and parameters, against central
// differences of the values.
TEST(DeclaredSystem, DerivativesAreTheExpressionsExactDerivatives) {
  const json j = json::parse(R"json({
    "name": "everything",
    "coordinates": ["a", "b", "c", "d"],
    "parameters": {"k": 2.5, "w": 0.3},
    "definitions": {"s": "sin(w*a) + cosh(b)/3", "t": "s^2 + atan2(b, 1 + c^2)"},
    "potential": "k*(a - b)^2/2 + t*exp(-d^2) + sqrt(1 + a^2 + b^2)*log(2 + cos(d)) + tanh(a)^3 + pow(b, 3)/(1 + c^2) + asin(w*c/(1+c^2)) + acos(w*d/(1+d^2)) + atan(a*b) + sinh(c/4) + tan(w*d)",
    "constraints": ["a^2 + b^2 + c^2 + d^2 - 4", "a*b - c + t/10"]})json");
  const DeclaredSystem d = parse_declared_system(j, "system.declare");
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<Real> u(-1, 1);
  const Real h = 1e-6;
  for (int trial = 0; trial < 10; ++trial) {
    std::vector<Real> q = {u(rng), u(rng), u(rng), u(rng)};
    const std::vector<Real> grad = d.gradient_at(q);
    const auto jac = d.jacobian_at(q);
    for (std::size_t i = 0; i < 4; ++i) {
      std::vector<Real> up = q, down = q;
      up[i] += h, down[i] -= h;
      const Real dv = (d.potential_at(up) - d.potential_at(down)) / (2 * h);
      EXPECT_NEAR(grad[i], dv, 1e-7 * (1 + std::abs(dv))) << "dV/dq" << i;
      for (std::size_t r = 0; r < 2; ++r) {
        const Real dg = (d.constraints_at(up)[r] - d.constraints_at(down)[r]) / (2 * h);
        EXPECT_NEAR(jac[r][i], dg, 1e-7 * (1 + std::abs(dg))) << "dg" << r << "/dq" << i;
      }
    }
  }
  // The test would see a wrong derivative: the gradient is not the values' own.
  std::vector<Real> q = {0.3, -0.2, 0.5, 0.1}, up = q, down = q;
  up[0] += h, down[0] -= h;
  EXPECT_GT(std::abs(d.gradient_at(q)[1] - (d.potential_at(up) - d.potential_at(down)) / (2 * h)), 1e-3);
}

// The Gram matrix's type follows from which constraints share a coordinate:
// a chain's bonds (each touching the next) are tridiagonal; a triangle of
// distances (every pair shares an atom) is dense, pivoted. Both solve in
// lanes (their types say so: small_solve.hpp).
TEST(DeclaredSystem, TheGramMatrixIsTridiagonalWhereTheConstraintsAreAChain) {
  json chain = json::parse(R"json({"name": "rod", "dof": 12, "constraints": [
    "(q3-q0)^2 + (q4-q1)^2 + (q5-q2)^2 - 1", "(q6-q3)^2 + (q7-q4)^2 + (q8-q5)^2 - 1",
    "(q9-q6)^2 + (q10-q7)^2 + (q11-q8)^2 - 1"]})json");
  const std::string rod = parse_declared_system(chain, "system.declare").source("UserSystem");
  EXPECT_NE(rod.find("using Gram = TridiagonalMatrix<3>;"), std::string::npos);
  EXPECT_NE(rod.find("runs_in_lanes = Gram::solves_in_lanes;"), std::string::npos);
  chain["constraints"].push_back("(q9-q0)^2 + (q10-q1)^2 + (q11-q2)^2 - 4");  // closes the loop: bonds 0 and 3 share q0
  const std::string loop = parse_declared_system(chain, "system.declare").source("UserSystem");
  EXPECT_NE(loop.find("using Gram = DenseMatrix<4>;"), std::string::npos);
  EXPECT_NE(loop.find("runs_in_lanes = Gram::solves_in_lanes;"), std::string::npos);
  static_assert(TridiagonalMatrix<3>::solves_in_lanes && DenseMatrix<4>::solves_in_lanes &&
                !DenseMatrix<kLanesLU + 1>::solves_in_lanes);
}

// Every bad declaration is one ConfigError naming the JSON path and, in an
// expression, the position; text that tries to be code never gets further.
TEST(DeclaredSystem, BadDeclarationsNameThePathAndPosition) {
  const std::vector<BadDeclaration> cases = {
      {"unknown symbol", [](json& j) { j["potential"] = "m * g * zz"; }, "system.declare.potential",
       "unknown symbol \"zz\" at position 9"},
      {"unknown function", [](json& j) { j["potential"] = "m * gamma(z)"; }, "system.declare.potential",
       "unknown function \"gamma\" at position 5"},
      {"abs is not in the grammar", [](json& j) { j["potential"] = "abs(z)"; }, "system.declare.potential",
       "unknown function \"abs\" at position 1"},
      {"a statement", [](json& j) { j["potential"] = "z; system(\"rm -rf /\")"; }, "system.declare.potential",
       "unexpected character \";\" at position 2"},
      {"a string", [](json& j) { j["constraints"][0] = "x\"); exit(1); (\""; }, "system.declare.constraints[0]",
       "unexpected character \"\\\"\" at position 2"},
      {"a preprocessor line", [](json& j) { j["definitions"]["r2"] = "#include <cstdlib>"; },
       "system.declare.definitions.r2", "unexpected character \"#\" at position 1"},
      {"braces", [](json& j) { j["potential"] = "z}; int f() {return 0"; }, "system.declare.potential",
       "unexpected character \"}\" at position 2"},
      {"unbalanced", [](json& j) { j["potential"] = "(z + 1"; }, "system.declare.potential", "a \"(\" is not closed"},
      {"closing first", [](json& j) { j["potential"] = "z) + (1"; }, "system.declare.potential",
       "a \")\" without its \"(\" at position 2"},
      // GiNaC's parser descends once per parenthesis and per sign: deep enough, it overflowed the stack.
      {"parentheses nested too deep", [](json& j) { j["potential"] = std::string(30000, '(') + "z" + std::string(30000, ')'); },
       "system.declare.potential", "nests parentheses more than 200 deep at position 201"},
      {"a run of signs", [](json& j) { j["potential"] = std::string(50000, '-') + "z"; }, "system.declare.potential",
       "has more than 8 signs in a row at position 9"},
      {"syntax", [](json& j) { j["potential"] = "z * * 2"; }, "system.declare.potential",
       "expects a number, a name or \"(\" at position 5: \"* 2\""},
      {"empty", [](json& j) { j["potential"] = "  "; }, "system.declare.potential", "is empty"},
      {"a parameter without a value", [](json& j) { j["parameters"]["g"] = "9.81"; }, "system.declare.parameters.g",
       "must be a finite number"},
      {"a parameter name that is code", [](json& j) { j["parameters"]["a;b"] = 1; },
       "system.declare.parameters.a;b", "must be a name"},
      {"a name that is code", [](json& j) { j["name"] = "p\"; int x; \""; }, "system.declare.name",
       "must be lower-case letters"},
      {"a coordinate twice", [](json& j) { j["coordinates"] = {"x", "y", "x"}; }, "system.declare.coordinates[2]",
       "is given twice"},
      {"a coordinate named as a function", [](json& j) { j["coordinates"] = {"x", "y", "sin"}; },
       "system.declare.coordinates[2]", "is a function's name"},
      {"as many constraints as coordinates", [](json& j) { j["constraints"] = {"x", "y", "z"}; },
       "system.declare.constraints", "holds 3 constraints for 3 coordinates"},
      {"no constraint", [](json& j) { j["constraints"] = json::array(); }, "system.declare.constraints",
       "at least one expression"},
      {"a definition through itself", [](json& j) { j["definitions"] = {{"a", "b + 1"}, {"b", "2 * a"}}; },
       "system.declare.definitions.a", "refers to itself"},
      {"a wrong mass", [](json& j) { j["mass"] = {1, 2}; }, "system.declare.mass", "an array of 3"},
      {"a frame and constraints", [](json& j) { j["frame"] = {{1, 0, 0}}; }, "system.declare.constraints",
       "does not apply to a system declared by its frame"},
      {"a frame field of the wrong size",
       [](json& j) {
         for (const char* k : {"constraints", "mass", "length_scale", "energy_scale"}) j.erase(k);
         j["frame"] = {{1, 0, 0}, {0, 1}};
       },
       "system.declare.frame[1]", "an array of 3 components"},
      {"a frame that names an unknown symbol",
       [](json& j) {
         for (const char* k : {"constraints", "mass", "length_scale", "energy_scale"}) j.erase(k);
         j["frame"] = {{"cos(w)", 0, 0}};
       },
       "system.declare.frame[0][0]", "unknown symbol \"w\""},
      {"a parameter named as a function", [](json& j) { j["parameters"]["sin"] = 1; }, "system.declare.parameters.sin",
       "a function's name"},
      {"a definition named as a function", [](json& j) { j["definitions"]["exp"] = "x"; },
       "system.declare.definitions.exp", "a function's name"},
      {"a negative mass", [](json& j) { j["mass"] = -1; }, "system.declare.mass", "must be positive"},
      {"a scale of the coordinates", [](json& j) { j["length_scale"] = "x"; }, "system.declare.length_scale",
       "unknown symbol \"x\" at position 1"},
      {"a scale that is not positive", [](json& j) { j["energy_scale"] = "-m"; }, "system.declare.energy_scale",
       "must be positive at the parameters' defaults"},
      {"an unknown key", [](json& j) { j["potentail"] = "z"; }, "system.declare.potentail", "unknown key"},
      {"both dof and coordinates", [](json& j) { j["dof"] = 3; }, "system.declare.coordinates", "not both"},
  };
  expect_refused(pendulum(), cases);
}

// "d7": a name and its number. (Written std::string + ...: "d" + std::string
// draws GCC 12's false -Wstringop-overflow.)
std::string named(const char* prefix, int k) { return std::string(prefix) + std::to_string(k); }

// Signs and powers read as written mathematics (and SymPy) read them:
// GiNaC's own parser read 2*-x+y as 2*(-x+y) and x^-2*y as x^(-2*y).
TEST(DeclaredSystem, SignsAndPowersReadAsWrittenMathematics) {
  const std::vector<std::pair<std::string, std::function<Real(Real, Real, Real)>>> cases = {
      {"2*-x+y", [](Real x, Real y, Real) { return 2 * -x + y; }},
      {"x^-2*y", [](Real x, Real y, Real) { return std::pow(x, -2) * y; }},
      {"-x^2", [](Real x, Real, Real) { return -(x * x); }},
      {"- - x", [](Real x, Real, Real) { return x; }},
      {"x/y/z", [](Real x, Real y, Real z) { return x / y / z; }},
      {"x - y - z + 1", [](Real x, Real y, Real z) { return x - y - z + 1; }},
      {"(x^2)^3 - x^(2^3) + pow(y, -1.5)", [](Real x, Real y, Real) { return -std::pow(x, 8) + std::pow(x, 6) + std::pow(y, -1.5); }},
      {"2^10*x + 3e-1*y + .5*z", [](Real x, Real y, Real z) { return 1024 * x + 0.3 * y + 0.5 * z; }},
      {"sin (x) * atan2(y, z)", [](Real x, Real y, Real z) { return std::sin(x) * std::atan2(y, z); }},
      // Pi, as GiNaC writes acos(-1) and atan(1), prints as its double.
      {"acos(-1)*x + 4*atan(1)*y", [](Real x, Real y, Real) { return M_PI * x + M_PI * y; }},
  };
  for (const auto& [text, expected] : cases) {
    json j = pendulum();
    j["potential"] = text;
    const DeclaredSystem d = parse_declared_system(j, "system.declare");
    for (const std::vector<Real>& q : {std::vector<Real>{0.7, 1.3, 0.4}, std::vector<Real>{-1.1, 0.6, 2.1}})
      EXPECT_NEAR(d.potential_at(q), expected(q[0], q[1], q[2]), 1e-12 * (1 + std::abs(expected(q[0], q[1], q[2]))))
          << text;
  }
}

// What made the reader crash, or GiNaC compute or walk for minutes, is
// refused at once at its path (and position): each case took from 9 s (an
// exact 2^(10^9)) to hours (definitions written in a tree 3^30 large), or
// crashed (sin() with no argument).
TEST(DeclaredSystem, ExpressionsThatWouldCrashOrNeverEndAreRefusedAtOnce) {
  // d1 = d0*d0 + d0*y + sin(d0), ...: each written in three times.
  json tree = json::object();
  tree["d0"] = "x + x*y";
  for (int k = 1; k < 30; ++k) {
    const std::string d = named("d", k - 1);
    tree[named("d", k)] = d + "*" + d + " + " + d + "*y + sin(" + d + ")";
  }
  json deep = json::object();  // s299 = sin(sin(... sin(x)))
  deep["s0"] = "x";
  for (int k = 1; k < 300; ++k) deep[named("s", k)] = std::string("sin(") + named("s", k - 1) + ")";
  json squares = json::object();  // c40 = 3^(2^40) z^(2^40), exactly
  squares["c0"] = "3*z";
  for (int k = 1; k <= 40; ++k) squares[named("c", k)] = named("c", k - 1) + "^2";
  const std::vector<BadDeclaration> cases = {
      {"a function without its argument", [](json& j) { j["potential"] = "m * sin()"; }, "system.declare.potential",
       "expects a number, a name or \"(\" at position 9: \")\""},
      {"too few arguments", [](json& j) { j["potential"] = "atan2(z)"; }, "system.declare.potential",
       "atan2 takes 2 arguments, given 1 at position 1"},
      {"too many arguments", [](json& j) { j["potential"] = "z + sin(z, 2)"; }, "system.declare.potential",
       "sin takes 1 argument, given 2 at position 5"},
      {"a power of a power", [](json& j) { j["potential"] = "z^2^3"; }, "system.declare.potential",
       "has a power of a power, a^b^c: write (a^b)^c or a^(b^c) at position 4"},
      {"a signed power of a power", [](json& j) { j["potential"] = "z^-z^2"; }, "system.declare.potential",
       "has a power of a power"},
      {"two operands in a row", [](json& j) { j["potential"] = "m g"; }, "system.declare.potential",
       "expects an operator or the end at position 3: \"g\""},
      {"cut short", [](json& j) { j["potential"] = "m * g + "; }, "system.declare.potential",
       "at the end: the expression is cut short"},
      {"two points in a number", [](json& j) { j["potential"] = "1.2.3 * z"; }, "system.declare.potential",
       "is not a number at position 1"},
      {"a number beyond a double", [](json& j) { j["potential"] = "z * 1e99999999999999999999"; }, "system.declare.potential",
       "is a number beyond a double's range (1.8e308) at position 5"},
      {"a division by zero", [](json& j) { j["potential"] = "m / (z - z)"; }, "system.declare.potential",
       "divides by zero at position 3: \"/ (z - z)\""},
      {"zero to the power zero", [](json& j) { j["potential"] = "z + 0e38^0"; }, "system.declare.potential",
       "raises 0 to a power of 0 or below at position 9"},
      {"log(0)", [](json& j) { j["potential"] = "z + log(0)"; }, "system.declare.potential",
       "cannot be evaluated"},
      {"not real", [](json& j) { j["potential"] = "z * log(-1)"; }, "system.declare.potential",
       "has a value that is not real"},
      // Found by scripts/fuzz.sh: GiNaC threw out of the derivative, unnamed.
      {"no derivative", [](json& j) { j["potential"] = "m*000^z"; }, "system.declare.potential",
       "has no derivative (division by zero)"},
      {"no derivative of a constraint", [](json& j) { j["constraints"] = {"x - 0^z"}; }, "system.declare.constraints[0]",
       "has no derivative (division by zero)"},
      {"no value written in", [](json& j) {
         j["definitions"]["w"] = "x - x";
         j["constraints"] = {"z - 1/w"};
       }, "system.declare.constraints[0]", "has no value with its definitions written in (division by zero)"},
      {"an exact power of a billion", [](json& j) { j["potential"] = "2^1000000000 * z"; }, "system.declare.potential",
       "raises to a constant power beyond 1024 in magnitude at position 3"},
      {"a billion made first", [](json& j) { j["potential"] = "(3*z)^(1000*1000*1000)"; }, "system.declare.potential",
       "raises to a constant power beyond 1024"},
      {"through pow", [](json& j) { j["potential"] = "pow(2, 5000) * z"; }, "system.declare.potential",
       "raises to a constant power beyond 1024 in magnitude at position 1"},
      {"a power of an exact power", [](json& j) { j["potential"] = "((10^1000)^1000) * z"; }, "system.declare.potential",
       "makes an exact number of more than 65536 bits at position 11"},
      {"a constraint written out as a huge tree", [&](json& j) {
         j["definitions"] = tree;
         j["constraints"] = {"d29 - 1"};
       }, "system.declare.constraints[0]", "has more than 20000 operations with its definitions written in"},
      {"a constraint written out deep", [&](json& j) {
         j["definitions"] = deep;
         j["constraints"] = {"s299 - 0.5"};
       }, "system.declare.constraints[0]", "nests more than 200 operations deep with its definitions written in"},
      {"a constraint making a huge exact number", [&](json& j) {
         j["definitions"] = squares;
         j["constraints"] = {"c40 - 1"};
       }, "system.declare.constraints[0]", "makes an exact number of more than 65536 bits with its definitions written in"},
  };
  expect_refused(pendulum(), cases);

  // V runs through its definitions as a program: the same definitions are
  // no trouble there, and nothing is written in.
  json j = pendulum();
  j["definitions"] = tree;
  j["definitions"]["r2"] = "x^2 + y^2 + z^2";
  j["potential"] = "d29";
  const DeclaredSystem d = parse_declared_system(j, "system.declare");
  EXPECT_TRUE(std::isfinite(d.potential_at({0.01, 0.02, 0.03})));
}

// Many definitions, each using the one before (a long chain written out):
// read in time linear in their number. Reading 50000 took minutes when the
// parser copied every name for each expression and V's users were summed
// one by one. (dV/dz sums all 10000: 0.24 MB of C++, within what one
// expression may print.)
TEST(DeclaredSystem, ThousandsOfChainedDefinitionsAreRead) {
  json j = pendulum();
  const int count = 10000;
  j["definitions"]["e0"] = "z";
  for (int k = 1; k < count; ++k)
    j["definitions"][named("e", k)] = named("e", k - 1) + " + z / " + std::to_string(count);
  j["potential"] = std::string("m * g * ") + named("e", count - 1);
  const DeclaredSystem d = parse_declared_system(j, "system.declare");
  EXPECT_NEAR(d.potential_at({0.1, 0.2, 0.3}), 1.5 * 9.81 * 0.3 * (1 + Real(count - 1) / count), 1e-9);
  EXPECT_NEAR(d.gradient_at({0.1, 0.2, 0.3})[2], 1.5 * 9.81 * (1 + Real(count - 1) / count), 1e-9);
}

// The generated type is a HolonomicSystem of tether's, compiled here with
// the compiler, flags and headers tether compiles it with, equals the
// built-in pendulum, and pairs with the methods the registry lists for
// declared systems (expr/declared_interface.hpp).
TEST(DeclaredSystem, TheGeneratedTypeCompilesAndIsTheBuiltInSystem) {
  const DeclaredSystem d = parse_declared_system(pendulum(), "system.declare");
  const fs::path dir = fs::temp_directory_path() / ("tether_declared_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "declared.hpp") << d.source("MyPendulum");
  const DeclaredSystem frame = parse_declared_system(
      json::parse(R"json({"name": "my_heisenberg", "coordinates": ["x", "y", "z"],
                          "frame": [[1, 0, "-y/2"], [0, 1, "x/2"]]})json"),
      "system.declare");
  std::ofstream(dir / "frame.hpp") << frame.source("MyHeisenberg");
  std::ofstream(dir / "main.cpp") << R"src(#include "declared.hpp"
#include <cstdio>
#include <random>
#include "expr/declared_interface.hpp"
#include "tether/registry.hpp"
using namespace tether;
static_assert(HolonomicSystem<MyPendulum>, "the generated type is a holonomic system");
template <class... M>
constexpr bool same_methods(TypeList<M...>) {
  return ((MethodFor<M, MyPendulum> == MethodFor<M, DeclaredInterface>) && ...);
}
static_assert(same_methods(Methods{}), "a declared type pairs with the methods DeclaredInterface pairs with");
#include "frame.hpp"
static_assert(Index1System<MyHeisenberg>, "a declared frame is an index-1 system");
template <class... M>
constexpr bool same_frame_methods(TypeList<M...>) {
  return ((MethodFor<M, MyHeisenberg> == MethodFor<M, DeclaredFrameInterface>) && ...);
}
static_assert(same_frame_methods(Methods{}), "a declared frame pairs with the methods DeclaredFrameInterface pairs with");
int main() {
  MyPendulum d;
  SphericalPendulum s;
  s.prm.mass = 1.5, s.prm.gravity = 9.81, s.prm.length = 0.7;
  std::mt19937_64 rng(5);
  std::normal_distribution<Real> n;
  Real worst = 0;
  for (int k = 0; k < 100; ++k) {
    const Vec<3> q(n(rng), n(rng), n(rng)), v(n(rng), n(rng), n(rng)), w(n(rng), n(rng), n(rng));
    const Vec<1> l(n(rng));
    worst = std::max(worst, std::abs(d.potential(q) - s.potential(q)));
    worst = std::max(worst, (d.potential_gradient(q) - s.potential_gradient(q)).cwiseAbs().maxCoeff());
    worst = std::max(worst, std::abs(d.constraints(q)[0] - s.constraints(q)[0]));
    worst = std::max(worst, std::abs(d.constraint_jacobian_times(q, v)[0] - s.constraint_jacobian_times(q, v)[0]));
    worst = std::max(worst, (d.constraint_transpose_times(q, l) - s.constraint_transpose_times(q, l)).cwiseAbs().maxCoeff());
    worst = std::max(worst, std::abs(d.gram(q, w).a(0, 0) - s.gram(q, w).a(0, 0)));
    worst = std::max(worst, (d.mass_times(v) - s.mass_times(v)).cwiseAbs().maxCoeff());
    worst = std::max(worst, (d.inverse_mass_times(v) - s.inverse_mass_times(v)).cwiseAbs().maxCoeff());
  }
  worst = std::max(worst, std::abs(d.length_scale() - s.length_scale()));
  worst = std::max(worst, std::abs(d.energy_scale() - s.energy_scale()));
  std::printf("%.3g\n", worst);
  return worst < 1e-12 ? 0 : 1;
}
)src";
  // (A stream, not operator+: GCC 12 misreads string concatenations here, PR 105329.)
  std::ostringstream cmd;
  cmd << declared_toolchain::compiler;
  for (const std::string& f : declared_compile_flags(fs::canonical("/proc/self/exe").string()))
    if (f != "-shared") cmd << " '" << f << "'";
  cmd << " " << (dir / "main.cpp").string() << " -o " << (dir / "main").string() << " >"
      << (dir / "compile.log").string() << " 2>&1 && " << (dir / "main").string() << " >" << (dir / "run.log").string()
      << " 2>&1";
  const int rc = std::system(cmd.str().c_str());
  std::stringstream log;
  log << std::ifstream(dir / "compile.log").rdbuf() << std::ifstream(dir / "run.log").rdbuf();
  EXPECT_TRUE(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << log.str() << "\n" << d.source("MyPendulum");
  fs::remove_all(dir);
}

// Each kind of declared type, with a method of its family, compiled as one
// engine's CUDA kernels the way this build compiles its own (to PTX alone,
// cicc at -O0, in a compile-check build): a chain's tridiagonal Gram matrix
// (RATTLE, the sampler's chains), a triangle's dense one (SHAKE, a run), a
// frame's dual numbers (Gauss-Legendre, shooting). Skipped in a build
// without CUDA; a GPU machine runs such pairs (scripts/gpu-check.sh).
TEST(DeclaredSystem, EachKindOfDeclaredTypeCompilesAsCudaKernels) {
  if (*declared_toolchain::cuda_compiler == 0) GTEST_SKIP() << "a build without CUDA";
  const auto method = [](const std::string& name) {
    for (std::size_t m = 0; m < method_infos().size(); ++m)
      if (method_infos()[m].name == name) return int(m);
    throw std::logic_error("no method " + name);
  };
  struct Case {
    json declaration;
    std::string method;
    PairEngine engine;
  };
  const std::vector<Case> cases = {
      {json::parse(R"json({"name": "rod", "sizes": {"N": 4}, "coordinates": [{"for": "i = 1..N", "each": ["x[i]", "y[i]", "z[i]"]}],
                          "potential": "z[N]", "constraints": [{"for": "i = 1..N-1",
                          "each": "(x[i+1]-x[i])^2 + (y[i+1]-y[i])^2 + (z[i+1]-z[i])^2 - 1"}]})json"),
       "rattle", PairEngine::sample},
      {json::parse(R"json({"name": "triangle", "dof": 9, "constraints": ["(q3-q0)^2 + (q4-q1)^2 + (q5-q2)^2 - 1",
                          "(q6-q0)^2 + (q7-q1)^2 + (q8-q2)^2 - 1", "(q6-q3)^2 + (q7-q4)^2 + (q8-q5)^2 - 1"]})json"),
       "shake", PairEngine::run},
      {json::parse(R"json({"name": "my_heisenberg", "coordinates": ["x", "y", "z"],
                          "frame": [[1, 0, "-y/2"], [0, 1, "x/2"]], "potential": "z^2"})json"),
       "gauss_legendre", PairEngine::shoot},
  };
  const fs::path dir = fs::temp_directory_path() / ("tether_declared_cuda_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& [declaration, name, engine] : cases) {
    const DeclaredSystem d = parse_declared_system(declaration, "system.declare");
    const fs::path unit = dir / (d.name + ".cu"), log = dir / (d.name + ".log");
    std::ofstream(unit) << declared_pair_cuda_source(d, method(name), engine);
    std::ostringstream cmd;
    cmd << declared_toolchain::cuda_compiler;
    for (const std::string& f : declared_cuda_compile_flags(fs::canonical("/proc/self/exe").string())) cmd << " '" << f << "'";
    cmd << " -ptx " << unit.string() << " -o " << (dir / (d.name + ".ptx")).string() << " >" << log.string() << " 2>&1";
    const int rc = std::system(cmd.str().c_str());
    std::stringstream messages;
    messages << std::ifstream(log).rdbuf();
    EXPECT_TRUE(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << d.name << " with " << name << ":\n" << messages.str();
    std::stringstream ptx;
    ptx << std::ifstream(dir / (d.name + ".ptx")).rdbuf();
    EXPECT_NE(ptx.str().find(".entry"), std::string::npos) << d.name << ": no kernel";
    EXPECT_NE(ptx.str().find("UserSystem"), std::string::npos) << d.name << ": no kernel of the declared type";
  }
  fs::remove_all(dir);
}

// A build with some methods alone (TETHER_METHOD_HEADERS) reads a config of
// another as the built-in system compiled at first use with it: here, in a
// build that has the pair, that pair compiled so runs as the build's own, bit
// for bit, from the same thermal starts (this binary exports the engine's
// symbols, as the tether command does). Every method is in this build.
TEST(DeclaredSystem, ABuiltInPairCompiledAtFirstUseRunsAsTheBuildsOwn) {
  for (int m = 0; m < int(method_infos().size()); ++m) EXPECT_TRUE(method_compiled_in(m)) << method_infos()[m].name;
  ::setenv("TETHER_CACHE_DIR", TETHER_TEST_CACHE, 1);
  const std::string config = R"json({"system": {"name": "chain", "parameters": {"beads": 8}},
      "method": {"name": "shake", "dt": 0.002, "steps": 60},
      "ensemble": {"size": 40, "seed": 3, "initial": {"sampler": "thermal", "temperature": 0.5}},
      "output": {"every": 20}, "backend": "cpu"})json";
  const RunConfig built = parse_config(config, "test");
  ASSERT_GE(built.system, 0);
  ASSERT_FALSE(built.declared);
  RunConfig first_use = built;
  first_use.declared = compiled_at_first_use(built.system);
  first_use.system = -1;
  EXPECT_EQ(first_use.declared->builtin_type, "Chain<8>");
  MemorySink a, b;
  RunOptions opt;
  opt.final_states = &a;
  const RunResult ra = run(built, opt);
  opt.final_states = &b;
  const RunResult rb = run(first_use, opt);
  ASSERT_EQ(a.rows.size(), 40u);
  ASSERT_EQ(b.rows.size(), a.rows.size());
  for (std::size_t i = 0; i < a.rows.size(); ++i) {
    EXPECT_EQ(a.rows[i].id, b.rows[i].id);
    EXPECT_EQ(a.rows[i].q, b.rows[i].q) << "trajectory " << i;
    EXPECT_EQ(a.rows[i].p, b.rows[i].p) << "trajectory " << i;
  }
  EXPECT_EQ(ra.max_relative_energy_error, rb.max_relative_energy_error);
  EXPECT_EQ(ra.system, rb.system);
}

// An installed tether compiles against the headers installed beside it
// (bin/../share/tether/compile, or compile/ beside the Python module), not
// against the source tree; a binary with none beside it, against the build
// folder's. (tests/consumer/check.cmake runs an installed one.)
TEST(DeclaredSystem, APairCompilesAgainstTheHeadersInstalledBesideTheBinary) {
  const fs::path dir = fs::temp_directory_path() / ("tether_installed_tree_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const fs::path root = dir / "share" / "tether" / "compile";
  fs::create_directories(root / "src" / "engine");
  fs::create_directories(root / "generated");
  fs::create_directories(dir / "bin");
  std::ofstream(root / "src" / "engine" / "for_pair.hpp") << "#pragma once\n";
  std::ofstream(root / "generated" / "declared_toolchain.hpp") << "#pragma once\n";
  const fs::path real = fs::canonical(root);
  std::vector<std::string> installed = declared_compile_flags((dir / "bin" / "tether").string());
  ASSERT_GE(installed.size(), 4u);
  EXPECT_EQ(installed[0], "-I" + (real / "src").string());
  EXPECT_EQ(installed[1], "-I" + (real / "include").string());
  EXPECT_EQ(installed[2], "-I" + (real / "generated").string());
  EXPECT_NE(installed[3], "-I" + (real / "third_party").string());
  // The Eigen and nlohmann/json installed with it come before the build machine's.
  fs::create_directories(root / "third_party");
  installed = declared_compile_flags((dir / "bin" / "tether").string());
  ASSERT_GE(installed.size(), 4u);
  EXPECT_EQ(installed[3], "-I" + (real / "third_party").string());
  const std::vector<std::string> built = declared_compile_flags((dir / "bin" / "elsewhere" / "tether").string());
  ASSERT_GE(built.size(), 3u);
  EXPECT_EQ(built[0], "-I" + (fs::path(declared_toolchain::source_dir) / "src").string());
  EXPECT_EQ(built[2], "-I" + (fs::path(declared_toolchain::build_dir) / "generated").string());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tether::test

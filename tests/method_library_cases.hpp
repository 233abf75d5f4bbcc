// Every (system, method) pair of the method library, with an initial
// ensemble it runs from: shared by the cpu-vs-reference tests
// (test_method_library) and the cuda-vs-cpu tests (test_cuda).
#pragma once
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace tether::test::library {

using nlohmann::json;

struct Case {
  std::string name;
  json system, method, initial;
};

inline void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

inline json thermal(double t) { return {{"sampler", "thermal"}, {"temperature", t}}; }
inline const json kepler_orbit = {{"sampler", "around"}, {"q", {1.0, 0.0}}, {"p", {0.0, 1.2}},
                                  {"position_spread", 0.02}, {"momentum_spread", 0.02}};

inline std::vector<Case> cases() {
  const json rigid = {{"name", "rigid_body"}, {"parameters", {{"inertia", {1.0, 1.5, 2.0}}, {"gravity", 1.0}}}};
  const json top = {{"name", "rigid_chain"}, {"parameters", {{"links", 1}}}};
  const json chain2 = {{"name", "rigid_chain"}, {"parameters", {{"links", 2}}}};
  std::vector<Case> v;
  for (const auto& [label, sys] : {std::pair{"rigid_body", rigid}, std::pair{"top", top}, std::pair{"rigid_chain2", chain2}}) {
    v.push_back({std::string(label) + "_rattle", sys, {{"name", "rattle"}}, thermal(1.0)});
    v.push_back({std::string(label) + "_null_space", sys, {{"name", "null_space_rattle"}}, thermal(1.0)});
    for (const char* tau : {"exp", "cayley"}) {
      v.push_back({std::string(label) + "_lie_rattle_" + tau, sys, {{"name", "lie_rattle"}, {"retraction", tau}}, thermal(1.0)});
      v.push_back({std::string(label) + "_lie_lobatto_" + tau, sys, {{"name", "lie_lobatto"}, {"retraction", tau}}, thermal(1.0)});
    }
  }
  // Compositions: each base once (rattle here, constrained_midpoint and the
  // intrinsic Euler pair on the double pendulum, the extrinsic pair on Kepler).
  v.push_back({"rigid_body_composition", rigid, {{"name", "composition"}, {"base", "rattle"}, {"scheme", "suzuki"}}, thermal(1.0)});
  const json pendulum2 = {{"name", "double_pendulum"}};
  v.push_back({"double_pendulum_midpoint_yoshida6", pendulum2,
               {{"name", "composition"}, {"base", "constrained_midpoint"}, {"scheme", "yoshida6"}}, thermal(1.0)});
  v.push_back({"double_pendulum_euler_intrinsic_triple_jump", pendulum2,
               {{"name", "composition"}, {"base", "symplectic_euler"}, {"form", "intrinsic"}, {"scheme", "triple_jump"}},
               thermal(1.0)});
  const json kepler = {{"name", "kepler"}};
  for (double theta : {0.0, 0.3, 0.5, 1.0})
    v.push_back({"kepler_theta_" + std::to_string(int(theta * 10)), kepler, {{"name", "theta_retraction"}, {"theta", theta}}, kepler_orbit});
  v.push_back({"kepler_newmark_trapezoidal", kepler, {{"name", "newmark"}, {"gamma", 0.5}, {"beta", 0.25}}, kepler_orbit});
  v.push_back({"kepler_newmark_damped", kepler, {{"name", "newmark"}, {"gamma", 0.6}, {"beta", 0.3}}, kepler_orbit});
  v.push_back({"kepler_rattle", kepler, {{"name", "rattle"}}, kepler_orbit});
  v.push_back({"kepler_composition", kepler, {{"name", "composition"}, {"base", "symplectic_euler"}, {"form", "extrinsic"}, {"scheme", "kahan_li6"}}, kepler_orbit});
  for (const char* r : {"projection", "exp"})
    v.push_back({std::string("sphere_") + r, {{"name", "spherical_pendulum"}}, {{"name", "sphere_retraction"}, {"retraction", r}}, thermal(0.5)});
  const json magnetic = {{"name", "magnetic_sphere"}, {"parameters", {{"field", 1.5}, {"gravity", 2.0}}}};
  v.push_back({"variational_rk4", magnetic, {{"name", "variational"}}, thermal(1.0)});
  v.push_back({"variational_heun_newton", magnetic, {{"name", "variational"}, {"layer", "heun"}, {"alpha_plus", 1.0}, {"solver", "newton"}}, thermal(1.0)});
  v.push_back({"variational_explicit_midpoint", magnetic,
               {{"name", "variational"}, {"layer", {{"a", {{0.0, 0.0}, {0.5, 0.0}}}, {"b", {0.0, 1.0}}, {"c", {0.0, 0.5}}}}},
               thermal(1.0)});
  return v;
}

}  // namespace tether::test::library

#pragma once
// The spherical pendulum as its user would declare it (system.declare), for
// the tests that hold it against the built-in spherical_pendulum.
#include <nlohmann/json.hpp>

namespace tether::test {

inline nlohmann::json declared_pendulum_declaration() {
  return nlohmann::json::parse(R"json({
    "name": "my_pendulum",
    "coordinates": ["x", "y", "z"],
    "mass": 1.5,
    "parameters": {"m": 1.5, "g": 9.81, "L": 0.7},
    "definitions": {"r2": "x^2 + y^2 + z^2"},
    "potential": "m * g * z",
    "constraints": ["(r2 - L^2) / (2 * L)"],
    "length_scale": "L",
    "energy_scale": "m * g * L"})json");
}

}  // namespace tether::test

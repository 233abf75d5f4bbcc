#pragma once
// What the shooting tests share: readable statuses, a control, generic start
// states (away from symmetric configurations) and the methods that shoot.
#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "nonholonomic_cases.hpp"
#include "tether/methods/gauss_legendre.hpp"
#include "tether/methods/stormer_verlet.hpp"
#include "tether/methods/symplectic_euler.hpp"
#include "tether/shooting/shoot.hpp"

namespace tether {

// Readable statuses in gtest failure messages (found by ADL).
inline void PrintTo(Status s, std::ostream* os) { *os << status_name(s); }
inline void PrintTo(ShotStatus s, std::ostream* os) { *os << shot_status_name(s); }

namespace test {

inline constexpr Real kPi = 3.14159265358979323846;

inline ShootControl control(Real dt, int steps, Real tolerance = 1e-10) {
  ShootControl c;
  c.dt = dt;
  c.steps = steps;
  c.tolerance = tolerance;
  return c;
}

inline const Vec3 kQ3(0.2, -0.1, 0.05), kP3(0.7, 0.4, 1.3);
inline const Vec3 kMartinetQ(0.1, 0.2, 0.0), kMartinetP(0.5, 0.3, 0.8);
inline const Vec<4> kParkingQ(0.5, 0.2, 0.1, 0.3), kParkingP(0.6, -0.4, 0.5, 0.8);  // inside the bowl

template <class M>
struct MethodLabel;
template <int S>
struct MethodLabel<GaussLegendre<S>> {
  static std::string name() { return "GL" + std::to_string(S); }
};
template <>
struct MethodLabel<SymplecticEuler> {
  static std::string name() { return "SymplecticEuler"; }
};
template <>
struct MethodLabel<StormerVerlet> {
  static std::string name() { return "StormerVerlet"; }
};
struct MethodName {
  template <class M>
  static std::string GetName(int) {
    return MethodLabel<M>::name();
  }
};

using AllMethods = ::testing::Types<GaussLegendre<1>, GaussLegendre<2>, GaussLegendre<3>, SymplecticEuler, StormerVerlet>;

}  // namespace test
}  // namespace tether

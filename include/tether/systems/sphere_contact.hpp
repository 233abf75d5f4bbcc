#pragma once
// Holonomic + nonholonomic together (MMVW13 Prop 6): the standard contact
// sub-Riemannian structure of the 3-sphere. q in R^4 = C^2 with L = 1/2 |qdot|^2,
// the holonomic constraint h(q) = (|q|^2 - 1)/2 = 0 and the nonholonomic one
// <i q, qdot> = 0, g(q) = i q = (-q1, q0, -q3, q2): velocities orthogonal to
// the Hopf fibres. Horizontal great circles cos t q0 + sin t v0 are geodesics
// (the tests' oracle). Integrated by rattle_midpoint (Prop 7).
#include "tether/core/parameters.hpp"
#include "tether/systems/generalized_hamiltonian.hpp"

namespace tether {

struct SphereContact {
  static constexpr const char* name = "sphere_contact";
  static constexpr const char* description = "S^3 in R^4 with <iq, qdot> = 0: holonomic and nonholonomic constraints";
  static constexpr const char* citation = "MMVW13 Prop 6";
  static constexpr Form form = Form::lagrangian;
  static constexpr int dof = 4;
  static constexpr int multiplier_count = 1;
  static constexpr int holonomic_count = 1;
  using Parameters = NoParameters;
  Parameters prm;

  template <class T>
  TETHER_HD void constraint_rows(const Arr<T, 4>& q, T (&g)[1][4]) const {
    g[0][0] = -q[1], g[0][1] = q[0], g[0][2] = -q[3], g[0][3] = q[2];
  }
  template <class T>
  TETHER_HD void inverse_mass_times(const Arr<T, 4>&, const Arr<T, 4>& w, Arr<T, 4>& v) const {
    v = w;
  }
  template <class T>
  TETHER_HD T potential(const Arr<T, 4>&) const {
    return T(0);
  }
  template <class T>
  TETHER_HD void holonomic_constraints(const Arr<T, 4>& q, T (&h)[1]) const {
    h[0] = Real(0.5) * (q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3] - Real(1));
  }
};

}  // namespace tether

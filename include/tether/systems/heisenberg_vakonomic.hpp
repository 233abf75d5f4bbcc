#pragma once
// The Heisenberg problem of MMVW13 §6: L = 1/2 |qdot|^2 in R^3 with the
// nonholonomic constraint g(q) . qdot = 0, g(q) = (-y, x, 1) (Form::lagrangian).
// Then qdot = p + lambda g (eq. (6.1)) and lambda~ = -g.p / g.g.
#include "tether/core/parameters.hpp"
#include "tether/systems/generalized_hamiltonian.hpp"

namespace tether {

struct HeisenbergVakonomic {
  static constexpr const char* name = "heisenberg_vakonomic";
  static constexpr const char* description = "Heisenberg problem with L = |qdot|^2/2 and g = (-y, x, 1)";
  static constexpr const char* citation = "MMVW13 §6";
  static constexpr Form form = Form::lagrangian;
  static constexpr int dof = 3;
  static constexpr int multiplier_count = 1;
  using Parameters = NoParameters;
  Parameters prm;

  template <class T>
  TETHER_HD void constraint_rows(const Arr<T, 3>& q, T (&g)[1][3]) const {
    g[0][0] = -q[1], g[0][1] = q[0], g[0][2] = T(1);
  }
  template <class T>
  TETHER_HD void inverse_mass_times(const Arr<T, 3>&, const Arr<T, 3>& w, Arr<T, 3>& v) const {
    v = w;
  }
  template <class T>
  TETHER_HD T potential(const Arr<T, 3>&) const {
    return T(0);
  }
};

}  // namespace tether

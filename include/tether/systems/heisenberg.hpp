#pragma once
// Heisenberg group with its standard left-invariant sub-Riemannian structure
// (the canonical form of LJM12 §6.2): orthonormal frame
// X = d/dx - (y/2) d/dz, Y = d/dy + (x/2) d/dz, H = 1/2 (<p, X>^2 + <p, Y>^2).
// Its geodesics are known in closed form (tests use them as the oracle).
#include "tether/core/parameters.hpp"
#include "tether/systems/generalized_hamiltonian.hpp"

namespace tether {

struct Heisenberg {
  static constexpr const char* name = "heisenberg";
  static constexpr const char* description = "Heisenberg group, canonical H of its orthonormal frame; closed-form geodesics";
  static constexpr const char* citation = "LJM12 §6.2";
  static constexpr Form form = Form::canonical;
  static constexpr int dof = 3;
  static constexpr int multiplier_count = 0;
  static constexpr int frame_size = 2;
  using Parameters = NoParameters;
  Parameters prm;

  template <class T>
  TETHER_HD void frame(const Arr<T, 3>& q, T (&x)[2][3]) const {
    x[0][0] = T(1), x[0][1] = T(0), x[0][2] = Real(-0.5) * q[1];
    x[1][0] = T(0), x[1][1] = T(1), x[1][2] = Real(0.5) * q[0];
  }
  template <class T>
  TETHER_HD T potential(const Arr<T, 3>&) const {
    return T(0);
  }
};

}  // namespace tether

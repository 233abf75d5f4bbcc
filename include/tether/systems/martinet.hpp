#pragma once
// The Martinet sub-Riemannian structure in both forms the engine accepts;
// they have the same geodesics (a test checks it).
#include "tether/core/parameters.hpp"
#include "tether/systems/generalized_hamiltonian.hpp"

namespace tether {

struct MartinetParameters {
  Real beta = 0;  // LJM12 eq. (42); 1 + beta x must stay positive

  template <class V>
  void describe(V& v) {
    v.real("beta", beta, Range::any(), "the metric's 1 / (1 + beta x)^2 on d/dy; 1 + beta x must stay positive");
  }
};

// LJM12 eq. (42): H = 1/2 ((p_x + p_z y^2/2)^2 + p_y^2 / (1 + beta x)^2),
// i.e. the orthonormal frame X1 = d/dx + (y^2/2) d/dz, X2 = d/dy / (1 + beta x).
struct Martinet {
  static constexpr const char* name = "martinet";
  static constexpr const char* description = "Martinet sub-Riemannian structure in canonical form";
  static constexpr const char* citation = "LJM12 eq. (42)";
  static constexpr Form form = Form::canonical;
  static constexpr int dof = 3;
  static constexpr int multiplier_count = 0;
  static constexpr int frame_size = 2;
  using Parameters = MartinetParameters;
  Parameters prm;

  template <class T>
  TETHER_HD void frame(const Arr<T, 3>& q, T (&x)[2][3]) const {
    x[0][0] = T(1), x[0][1] = T(0), x[0][2] = Real(0.5) * q[1] * q[1];
    x[1][0] = T(0), x[1][1] = Real(1) / (Real(1) + prm.beta * q[0]), x[1][2] = T(0);
  }
  template <class T>
  TETHER_HD T potential(const Arr<T, 3>&) const {
    return T(0);
  }
};

// The same structure as a Lagrangian problem (MMVW13 Prop 1/2): the
// constraint zdot = (y^2/2) xdot, g(q) = (y^2/2, 0, -1), and the metric in
// which X1, X2 above and X3 = d/dz are orthonormal, M(q)^-1 = sum_i X_i X_i^T.
// On the distribution this is the Martinet metric; the X3 direction only makes
// M invertible. Then H = 1/2 ((p_x + p_z y^2/2)^2 + p_y^2/(1 + beta x)^2
// + (p_z - lambda)^2), so lambda~ = p_z and H(q, p, lambda~) is eq. (42).
struct MartinetLagrangian {
  static constexpr const char* name = "martinet_lagrangian";
  static constexpr const char* description = "the Martinet structure as a Lagrangian with zdot = (y^2/2) xdot";
  static constexpr const char* citation = "MMVW13 Props 1-2 with LJM12 eq. (42)";
  static constexpr Form form = Form::lagrangian;
  static constexpr int dof = 3;
  static constexpr int multiplier_count = 1;
  using Parameters = MartinetParameters;
  Parameters prm;

  template <class T>
  TETHER_HD void constraint_rows(const Arr<T, 3>& q, T (&g)[1][3]) const {
    g[0][0] = Real(0.5) * q[1] * q[1], g[0][1] = T(0), g[0][2] = T(-1);
  }
  template <class T>
  TETHER_HD void inverse_mass_times(const Arr<T, 3>& q, const Arr<T, 3>& w, Arr<T, 3>& v) const {
    const T c = Real(0.5) * q[1] * q[1];
    const T s = Real(1) / (Real(1) + prm.beta * q[0]);
    const T u1 = w[0] + c * w[2];  // <X1, w>
    v[0] = u1;
    v[1] = s * s * w[1];
    v[2] = c * u1 + w[2];
  }
  template <class T>
  TETHER_HD T potential(const Arr<T, 3>&) const {
    return T(0);
  }
};

}  // namespace tether

#pragma once
// Gauss-Legendre Runge-Kutta with s = 1 (implicit midpoint), 2, 3 stages:
// orders 2, 4, 6, symplectic (seed 001 Props 3-4 and Corollary 5 apply it to
// index-1 constrained Hamiltonians; here on a canonical H(q, p)). All stage
// values Z_i = z0 + h sum_j a_ij X_H(Z_j) are solved together by Newton with
// the exact Jacobian I - h (A kron D X_H(Z_j)), a fixed-size 2ns x 2ns LU.

#include "tether/core/polished_newton.hpp"
#include "tether/systems/sub_riemannian.hpp"

namespace tether {

template <int S>
struct GaussLegendreTableau;

template <>
struct GaussLegendreTableau<1> {
  TETHER_HD static Real a(int, int) { return Real(0.5); }
  TETHER_HD static Real b(int) { return 1; }
  TETHER_HD static Real c(int) { return Real(0.5); }
};

template <>
struct GaussLegendreTableau<2> {
  TETHER_HD static Real a(int i, int j) {
    const Real r = Real(0.28867513459481288225457439025098);  // sqrt(3)/6
    const Real t[2][2] = {{Real(0.25), Real(0.25) - r}, {Real(0.25) + r, Real(0.25)}};
    return t[i][j];
  }
  TETHER_HD static Real b(int) { return Real(0.5); }
  TETHER_HD static Real c(int i) { return i == 0 ? Real(0.5) - Real(0.28867513459481288225457439025098)
                                                 : Real(0.5) + Real(0.28867513459481288225457439025098); }
};

template <>
struct GaussLegendreTableau<3> {
  TETHER_HD static Real a(int i, int j) {
    const Real r = Real(3.8729833462074168851792653997824);  // sqrt(15)
    const Real t[3][3] = {{Real(5) / 36, Real(2) / 9 - r / 15, Real(5) / 36 - r / 30},
                          {Real(5) / 36 + r / 24, Real(2) / 9, Real(5) / 36 - r / 24},
                          {Real(5) / 36 + r / 30, Real(2) / 9 + r / 15, Real(5) / 36}};
    return t[i][j];
  }
  TETHER_HD static Real b(int i) { return i == 1 ? Real(4) / 9 : Real(5) / 18; }
  TETHER_HD static Real c(int i) {
    const Real r = Real(0.38729833462074168851792653997824);  // sqrt(15)/10
    return i == 0 ? Real(0.5) - r : (i == 1 ? Real(0.5) : Real(0.5) + r);
  }
};

template <int Stages>
struct GaussLegendre {
  static constexpr int stages = Stages;
  static constexpr int order = 2 * Stages;
  using Tableau = GaussLegendreTableau<Stages>;

  // One step z0 -> z1 on a canonical sub-Riemannian system.
  template <class Sys>
  TETHER_HD static Status step(const Sys& sys, PhaseVec<Sys>& z, Real h, const NewtonOptions& opt, int& iterations) {
    constexpr int m = 2 * Sys::dof, K = m * Stages;
    const PhaseVec<Sys> f0 = hamiltonian_vector_field(sys, z);
    Vec<K> Z;
    for (int i = 0; i < Stages; ++i) Z.template segment<m>(i * m) = z + h * Tableau::c(i) * f0;
    const Status st = polished_newton<K>(Z, opt, iterations, [&](const Vec<K>& x, Vec<K>& residual, Mat<K, K>& jac) {
      jac.setIdentity();
      for (int i = 0; i < Stages; ++i) residual.template segment<m>(i * m) = x.template segment<m>(i * m) - z;
      for (int j = 0; j < Stages; ++j) {
        const PhaseVec<Sys> zj = x.template segment<m>(j * m);
        const PhaseVec<Sys> fj = hamiltonian_vector_field(sys, zj);
        const Mat<m, m> dfj = hamiltonian_vector_field_jacobian(sys, zj);
        for (int i = 0; i < Stages; ++i) {
          residual.template segment<m>(i * m) -= h * Tableau::a(i, j) * fj;
          jac.template block<m, m>(i * m, j * m) -= h * Tableau::a(i, j) * dfj;
        }
      }
    });
    if (st != Status::ok) return st;
    PhaseVec<Sys> z1 = z;
    for (int i = 0; i < Stages; ++i)
      z1 += h * Tableau::b(i) * hamiltonian_vector_field(sys, PhaseVec<Sys>(Z.template segment<m>(i * m)));
    z = z1;
    return Status::ok;
  }
};

}  // namespace tether

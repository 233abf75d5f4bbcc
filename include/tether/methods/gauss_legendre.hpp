#pragma once
// Gauss-Legendre Runge-Kutta with s = 1 (implicit midpoint), 2, 3 stages,
// orders 2, 4, 6, applied to the index-1 generalized Hamiltonian system
// J z' = grad H(z), z = (q, p, lambda): MMVW13 eqs. (2.2)-(2.4) with Props
// 3-4 and Corollary 5. All stage unknowns Z_i = (Q_i, P_i, Lambda_i) are solved
// together by Newton with the exact Jacobian (Hess H from dual numbers), a
// fixed-size s(2n+k) LU:
//   Q_i = q0 + h sum_j a_ij H_p(Z_j),  P_i = p0 - h sum_j a_ij H_q(Z_j),
//   0 = H_lambda(Z_i);   q1 = q0 + h sum_j b_j H_p(Z_j),  p1 = p0 - h sum_j b_j H_q(Z_j).
// The endpoint multipliers solve H_lambda(q1, p1, lambda1) = 0, so the
// original constraints hold at every step; they are recovered on demand.
#include "tether/core/families.hpp"
#include "tether/methods/index1_stages.hpp"

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
  static constexpr const char* name = "gauss_legendre";
  static constexpr int stages = Stages;
  static constexpr int order = 2 * Stages;
  static constexpr bool two_step = false;
  static constexpr const char* citation = "MMVW13 eqs. (2.2)-(2.4), Props 3-4, Corollary 5";
  static constexpr const char* description = "Gauss-Legendre Runge-Kutta on the index-1 system, order 2 x stages";
  static constexpr bool symmetric = true;
  static constexpr bool symplectic = true;
  template <class S>
  static constexpr bool applies_to = Index1System<S>;
  static constexpr Variant variant{"stages", Stages};
  using Parameters = NoParameters;
  Parameters prm;
  using Tableau = GaussLegendreTableau<Stages>;

  template <class S>
  TETHER_HD static void start(const S&, PhaseState<S>&, Real) {}

  // What a step leaves for the next one: its chord matrix F_Z (the next
  // step's stages are O(h) away), refactored only when the chord stops
  // contracting. A step with a tangent factors F_Z at its converged stages
  // anyway, and leaves that one, so it factors once instead of twice.
  template <class S>
  using Carry = Chord<Parts<S>::m * Stages>;

  // With a tangent (columns d(q, p) in some directions), it is carried along:
  // the derivative of this very map, dZ = F_Z^-1 (dq0, dp0, 0 per stage) at
  // the converged stages, then eq. (2.3) differentiated.
  template <class S, int C = 0>
  TETHER_HD static Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations,
                               Tangent<S, C>* tangent = nullptr, Carry<S>* carry = nullptr) {
    using P = Parts<S>;
    constexpr int n = P::n, k = P::k, m = P::m, K = m * Stages;
    Vec<k> lambda0;
    Status st = solve_multipliers(sys, s.q, s.p, opt, lambda0, iterations);
    if (st != Status::ok) return st;
    const ZVec<S> g0 = hamiltonian_gradient(sys, pack<S>(s.q, s.p, lambda0));
    Vec<K> Z;
    for (int i = 0; i < Stages; ++i)
      Z.template segment<m>(i * m) =
          pack<S>(s.q + h * Tableau::c(i) * P::p(g0), s.p - h * Tableau::c(i) * P::q(g0), lambda0);
    st = polished_newton<K>(Z, opt, iterations, [&](const Vec<K>& x, Vec<K>& r, Mat<K, K>* jac) {
      if (jac) *jac = stage_jacobian_start<S>();
      for (int i = 0; i < Stages; ++i) {
        r.template segment<n>(i * m) = P::q(x.template segment<m>(i * m)) - s.q;
        r.template segment<n>(i * m + n) = P::p(x.template segment<m>(i * m)) - s.p;
      }
      for (int j = 0; j < Stages; ++j) {
        ZVec<S> g;
        ZMat<S> hs;
        hamiltonian_derivatives(sys, ZVec<S>(x.template segment<m>(j * m)), g, hs, jac != nullptr);
        for (int i = 0; i < Stages; ++i) {
          const Real ha = h * Tableau::a(i, j);
          r.template segment<n>(i * m) -= ha * P::p(g);
          r.template segment<n>(i * m + n) += ha * P::q(g);
        }
        if constexpr (k > 0) r.template segment<k>(j * m + 2 * n) = P::lambda(g);
        if (jac) add_stage_columns<S>(*jac, j, hs, h);
      }
    }, carry);
    if (st != Status::ok) return st;
    Vec<n> q1 = s.q, p1 = s.p;
    for (int j = 0; j < Stages; ++j) {
      const ZVec<S> g = hamiltonian_gradient(sys, ZVec<S>(Z.template segment<m>(j * m)));
      q1 += h * Tableau::b(j) * P::p(g);
      p1 -= h * Tableau::b(j) * P::q(g);
    }
    if (!all_finite(q1) || !all_finite(p1)) return Status::non_finite;
    if constexpr (C > 0)
      if (tangent && (st = propagate_tangent<S, C>(sys, Z, h, *tangent, carry)) != Status::ok) return st;
    s.q = q1;
    s.p = p1;
    return Status::ok;
  }

  // The Jacobian F_Z of eqs. (2.2), (2.4) in Z = (Z_1, ..., Z_s): start from
  // the identity in every stage's (Q, P) rows, then add the columns of each
  // stage j from Hess H(Z_j).
  template <class S>
  using StageMat = Mat<Parts<S>::m * Stages, Parts<S>::m * Stages>;

  template <class S>
  TETHER_HD static StageMat<S> stage_jacobian_start() {
    constexpr int n = Parts<S>::n, m = Parts<S>::m;
    StageMat<S> jac = StageMat<S>::Zero();
    for (int i = 0; i < Stages; ++i) jac.template block<2 * n, 2 * n>(i * m, i * m).setIdentity();
    return jac;
  }

  template <class S>
  TETHER_HD static void add_stage_columns(StageMat<S>& jac, int j, const ZMat<S>& hs, Real h) {
    using P = Parts<S>;
    constexpr int n = P::n, m = P::m;
    for (int i = 0; i < Stages; ++i) {
      const Real ha = h * Tableau::a(i, j);
      jac.template block<n, m>(i * m, j * m) -= ha * hs.template middleRows<n>(n);
      jac.template block<n, m>(i * m + n, j * m) += ha * hs.template topRows<n>();
    }
    if constexpr (P::k > 0) jac.template block<P::k, m>(j * m + 2 * n, j * m) = hs.template bottomRows<P::k>();
  }

  template <class S, int C>
  TETHER_HD static Status propagate_tangent(const S& sys, const Vec<Parts<S>::m * Stages>& Z, Real h,
                                            Tangent<S, C>& tangent, Carry<S>* carry) {
    using P = Parts<S>;
    constexpr int n = P::n, m = P::m, K = m * Stages;
    ZMat<S> hs[Stages];
    Mat<K, K> jac = stage_jacobian_start<S>();
    Mat<K, C> rhs = Mat<K, C>::Zero(), dZ;
    for (int j = 0; j < Stages; ++j) {
      ZVec<S> g;
      hamiltonian_derivatives(sys, ZVec<S>(Z.template segment<m>(j * m)), g, hs[j]);
      rhs.template middleRows<2 * n>(j * m) = tangent;
      add_stage_columns<S>(jac, j, hs[j], h);
    }
    DenseLU<K> own;
    DenseLU<K>& lu = carry ? carry->lu : own;
    if (carry) carry->valid = false;
    if (!solve_columns<K, C>(lu, jac, rhs, dZ)) return Status::singular_matrix;
    if (carry) carry->valid = true;
    for (int j = 0; j < Stages; ++j) {
      const Mat<m, C> dg = hs[j] * dZ.template middleRows<m>(j * m);
      tangent.template topRows<n>() += h * Tableau::b(j) * dg.template middleRows<n>(n);
      tangent.template bottomRows<n>() -= h * Tableau::b(j) * dg.template topRows<n>();
    }
    return Status::ok;
  }

  // Reference form: unknowns x = (Z_1, ..., Z_s), eqs. (2.2) and (2.4) as written.
  template <class S>
  static Eigen::VectorXd reference_guess(const S& sys, const PhaseState<S>& s0, Real) {
    const Vec<S::multiplier_count> lambda = multipliers_of(sys, s0);
    Eigen::VectorXd x(Parts<S>::m * Stages);
    for (int i = 0; i < Stages; ++i) x.segment(i * Parts<S>::m, Parts<S>::m) = pack<S>(s0.q, s0.p, lambda);
    return x;
  }

  template <class S>
  static Eigen::VectorXd residual(const S& sys, const PhaseState<S>& s0, Real h, const Eigen::VectorXd& x) {
    using P = Parts<S>;
    constexpr int n = P::n, m = P::m;
    ZVec<S> g[Stages];  // grad H at each stage, once
    for (int j = 0; j < Stages; ++j) g[j] = hamiltonian_gradient(sys, ZVec<S>(x.segment(j * m, m)));
    Eigen::VectorXd r(m * Stages);
    for (int i = 0; i < Stages; ++i) {
      const Eigen::VectorXd zi = x.segment(i * m, m);
      Eigen::VectorXd q_rate = Eigen::VectorXd::Zero(n), p_rate = Eigen::VectorXd::Zero(n);
      for (int j = 0; j < Stages; ++j) {
        q_rate += Tableau::a(i, j) * g[j].template segment<n>(n);
        p_rate -= Tableau::a(i, j) * g[j].template head<n>();
      }
      r.segment(i * m, n) = zi.head(n) - s0.q - h * q_rate;
      r.segment(i * m + n, n) = zi.segment(n, n) - s0.p - h * p_rate;
      if constexpr (P::k > 0) r.template segment<P::k>(i * m + 2 * n) = g[i].template tail<P::k>();
    }
    return r;
  }

  // Eq. (2.3): the new point from the solved stages.
  template <class S>
  static void reference_finish(const S& sys, const PhaseState<S>& s0, Real h, const Eigen::VectorXd& x,
                               PhaseState<S>& s1) {
    constexpr int n = S::dof, m = Parts<S>::m;
    s1 = s0;
    for (int j = 0; j < Stages; ++j) {
      const ZVec<S> g = hamiltonian_gradient(sys, ZVec<S>(x.segment(j * m, m)));
      s1.q += h * Tableau::b(j) * g.template segment<n>(n);
      s1.p -= h * Tableau::b(j) * g.template head<n>();
    }
  }
};

}  // namespace tether

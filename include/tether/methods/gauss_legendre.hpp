#pragma once
// Gauss-Legendre Runge-Kutta with s = 1 (implicit midpoint), 2, 3 stages,
// orders 2, 4, 6, applied to the index-1 generalized Hamiltonian system
// J z' = grad H(z), z = (q, p, lambda): MMVW13 eqs. (2.2)-(2.4) with Props
// 3-4 and Corollary 5. All stage unknowns Z_i = (Q_i, P_i, Lambda_i) are solved
// together by Newton: for an ensemble's step with every stage's Hess H frozen
// at the stages' mean, factored in the eigenbasis of A (TransformedStageLU:
// m x m LUs, m = 2n+k); for shooting, where the tangent map needs the exact
// stage Jacobian, with that Jacobian as one fixed-size s(2n+k) LU:
//   Q_i = q0 + h sum_j a_ij H_p(Z_j),  P_i = p0 - h sum_j a_ij H_q(Z_j),
//   0 = H_lambda(Z_i);   q1 = q0 + h sum_j b_j H_p(Z_j),  p1 = p0 - h sum_j b_j H_q(Z_j).
// The endpoint multipliers solve H_lambda(q1, p1, lambda1) = 0, so the
// original constraints hold at every step; they are recovered on demand.
#include <type_traits>

#include "tether/core/families.hpp"
#include "tether/methods/index1_stages.hpp"

namespace tether {

template <int S>
struct GaussLegendreTableau;

// The eigenbasis of the inverse Gauss-Legendre matrix (HW96 §IV.8):
// T^-1 A^-1 T is block diagonal, with the real eigenvalue gamma (s odd) on
// the first column of T and a complex pair alpha +- i beta as the block
// [[alpha, beta], [-beta, alpha]] on the next two, the real and imaginary
// parts of an eigenvector of alpha + i beta. s = 2 in closed form (A^-1
// has eigenvalues 3 +- i sqrt 3); s = 3 computed in 40-digit arithmetic,
// checked in tests/methods/test_nonholonomic.cpp.
template <int S>
struct GaussLegendreEigen;

template <>
struct GaussLegendreEigen<1> {
  static constexpr bool has_real = true, has_pair = false;
  static constexpr Real gamma = 2, alpha = 0, beta = 0;
  TETHER_HD static Real t(int, int) { return 1; }
  TETHER_HD static Real t_inverse(int, int) { return 1; }
  TETHER_HD static Real t_inverse_a_inverse(int, int) { return 2; }
};

template <>
struct GaussLegendreEigen<2> {
  static constexpr bool has_real = false, has_pair = true;
  static constexpr Real r3 = Real(1.7320508075688772935274463415059);  // sqrt 3
  static constexpr Real gamma = 0, alpha = 3, beta = r3;
  TETHER_HD static Real t(int i, int j) { return i == 0 ? (j == 0 ? Real(0) : r3 - 2) : (j == 0 ? Real(1) : Real(0)); }
  TETHER_HD static Real t_inverse(int i, int j) {
    return i == 0 ? (j == 0 ? Real(0) : Real(1)) : (j == 0 ? -(2 + r3) : Real(0));
  }
  TETHER_HD static Real t_inverse_a_inverse(int i, int j) {
    return i == 0 ? (j == 0 ? -(3 + 2 * r3) : Real(3)) : (j == 0 ? -(6 + 3 * r3) : -r3);
  }
};

template <>
struct GaussLegendreEigen<3> {
  static constexpr bool has_real = true, has_pair = true;
  static constexpr Real gamma = Real(4.6443707092521711858), alpha = Real(3.6778146453739144071),
                        beta = Real(3.5087619195674433219);
  TETHER_HD static Real t(int i, int j) {
    const Real m[3][3] = {{Real(0.072151852055200170321), Real(-0.082241230573630670649), Real(0.060120738619308501731)},
                          {Real(0.11883257874127780707), Real(0.053065090742061395046), Real(-0.31620505113229157322)},
                          {Real(1), Real(1), Real(0)}};
    return m[i][j];
  }
  TETHER_HD static Real t_inverse(int i, int j) {
    const Real m[3][3] = {{Real(5.9916980849378007756), Real(1.1392142951557354446), Real(0.43231211378385838557)},
                          {Real(-5.9916980849378007756), Real(-1.1392142951557354446), Real(0.56768788621614161443)},
                          {Real(1.2462132735862314108), Real(-2.9255596461923136626), Real(0.25773520127343249235)}};
    return m[i][j];
  }
  TETHER_HD static Real t_inverse_a_inverse(int i, int j) {
    const Real m[3][3] = {{Real(27.82766708436744962), Real(5.2909335039826553118), Real(2.0078177185126437013)},
                          {Real(-17.663689289424227107), Real(-14.454911298925877825), Real(2.9921822814873562987)},
                          {Real(25.606783502829742561), Real(-6.7624343756117083289), Real(-1.043979339483109825)}};
    return m[i][j];
  }
};

// The simplified Newton matrix of the s-stage Gauss-Legendre equations
// (2.2), (2.4) with every stage's Hess H replaced by one, that is the
// derivative D of (f, c) = (H_p, -H_q, H_lambda) by (q, p, lambda) by one,
//   [I - h A (x) D_f ; I (x) D_c],
// factored in the eigenbasis of A (HW96 §IV.8): multiplying its (q, p) rows
// by (h A)^-1 and changing the unknowns to (T^-1 (x) I) dZ leaves one m x m
// block per real eigenvalue, [gamma/h E - D_f ; D_c], and one complex m x m
// block per pair, [(alpha + i beta)/h E - D_f ; D_c] (E: the (q, p) rows of
// the identity). The factors hold s m^2 numbers instead of s^2 m^2, and take
// 2x (s = 2) and 5x (s = 3) fewer flops to make: an ensemble's step needs
// only the states, not the tangent.
template <int Stages, int n, int m>
struct TransformedStageLU {
  using Eigen_ = GaussLegendreEigen<Stages>;
  static constexpr int n2 = 2 * n, K = Stages * m;
  using Jacobian = Mat<m, m>;  // Hess H at the stages' mean, in (q, p, lambda)
  struct None {};
  std::conditional_t<Eigen_::has_real, DenseLU<m>, None> real;
  std::conditional_t<Eigen_::has_pair, ComplexLU<m>, None> pair;
  Real h = 0;  // the step: set by the owner before the first factor_in_place

  // Hess H is built in the block that is factored last (a GPU thread's memory
  // is short), and the other block made from it first.
  TETHER_HD Mat<m, m>& jacobian_storage() {
    if constexpr (Eigen_::has_pair)
      return pair.re;
    else
      return real.lu;
  }

  // Hess H -> [-D_f ; D_c] in place: D_f = (Hess H rows p, -(rows q)), D_c =
  // rows lambda. Rows q and p trade places, the new q rows negated.
  TETHER_HD static void minus_d_f_and_d_c(Mat<m, m>& a) {
    for (int i = 0; i < n; ++i)
      for (int c = 0; c < m; ++c) {
        const Real q_row = a(i, c);
        a(i, c) = -a(n + i, c);
        a(n + i, c) = q_row;
      }
  }

  // Factors the blocks from the Hessian in jacobian_storage().
  TETHER_HD bool factor_in_place() {
    Mat<m, m>& hessian = jacobian_storage();
    if constexpr (Eigen_::has_real) {
      if constexpr (Eigen_::has_pair) real.lu = hessian;
      minus_d_f_and_d_c(real.lu);
      for (int i = 0; i < n2; ++i) real.lu(i, i) += Eigen_::gamma / h;
      if (!real.factor_in_place()) return false;
    }
    if constexpr (Eigen_::has_pair) {
      minus_d_f_and_d_c(pair.re);
      pair.im.setZero();
      for (int i = 0; i < n2; ++i) pair.re(i, i) += Eigen_::alpha / h, pair.im(i, i) = Eigen_::beta / h;
      if (!pair.factor_in_place()) return false;
    }
    return true;
  }

  // x = M^-1 rhs, M the simplified matrix above; false when not finite.
  TETHER_HD bool solve(const Vec<K>& rhs, Vec<K>& x) const {
    Vec<m> w[Stages];  // (T^-1 (x) I) x, block by block
    for (int l = 0; l < Stages; ++l) {
      w[l].setZero();
      for (int i = 0; i < Stages; ++i) {
        w[l].template head<n2>() += (Eigen_::t_inverse_a_inverse(l, i) / h) * rhs.template segment<n2>(i * m);
        w[l].template tail<m - n2>() += Eigen_::t_inverse(l, i) * rhs.template segment<m - n2>(i * m + n2);
      }
    }
    int l = 0;
    if constexpr (Eigen_::has_real) {
      Vec<m> y;
      if (!real.solve(w[0], y)) return false;
      w[0] = y;
      l = 1;
    }
    if constexpr (Eigen_::has_pair) {
      // (alpha + i beta) on (W_l, W_(l+1)) as [[alpha, beta], [-beta, alpha]]: U = W_l - i W_(l+1).
      Vec<m> ur, ui;
      if (!pair.solve(w[l], Vec<m>(-w[l + 1]), ur, ui)) return false;
      w[l] = ur;
      w[l + 1] = -ui;
    }
    for (int j = 0; j < Stages; ++j) {
      Vec<m> xj = Vec<m>::Zero();
      for (int c = 0; c < Stages; ++c) xj += Eigen_::t(j, c) * w[c];
      x.template segment<m>(j * m) = xj;
    }
    return all_finite(x);
  }
};

// a, b, c: the Butcher tableau; d = b^T A^-1, the weights of HW96 §IV.8's
// y1 = y0 + sum_i d_i (Y_i - y0) (exact values, checked in
// tests/methods/test_nonholonomic.cpp).
template <>
struct GaussLegendreTableau<1> {
  TETHER_HD static Real a(int, int) { return Real(0.5); }
  TETHER_HD static Real b(int) { return 1; }
  TETHER_HD static Real c(int) { return Real(0.5); }
  TETHER_HD static Real d(int) { return 2; }
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
  TETHER_HD static Real d(int i) {
    const Real r3 = Real(1.7320508075688772935274463415059);  // sqrt 3
    return i == 0 ? -r3 : r3;
  }
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
  TETHER_HD static Real d(int i) { return i == 1 ? Real(-4) / 3 : Real(5) / 3; }
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

  // What a step of a shot leaves for the next one: its chord matrix F_Z (the
  // next step's stages are O(h) away), refactored only when the chord stops
  // contracting. A step with a tangent factors F_Z at its converged stages
  // anyway, and leaves that one, so it factors once instead of twice. A
  // shot's steps (C > 0) must be given it: it is the only copy of F_Z they
  // hold, so that a GPU thread keeps one (s m)^2 LU per shot, not one per
  // call site.
  template <class S>
  using Carry = Chord<Parts<S>::m * Stages>;
  template <class S>
  using Transformed = TransformedStageLU<Stages, Parts<S>::n, Parts<S>::m>;

  // An ensemble's step (no tangent type, C = 0) solves two or three stages
  // by the simplified Newton of TransformedStageLU, its D at the stages'
  // mean. A shot's steps (every one of them has a tangent type, integrated
  // or not, and a carry), and one stage (where F_Z is already one m x m
  // block), use the chord on the exact F_Z. Both stop at the roundoff floor
  // of the same equations. Decided at compile time, so that a kernel holds
  // one of the two.
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
    if constexpr (C > 0 || Stages == 1) {
      auto exact = [&](const Vec<K>& x, Vec<K>& r, Mat<K, K>* jac) { stage_residual(sys, s, h, x, r, jac); };
      if constexpr (C > 0)
        st = polished_newton<K>(Z, opt, iterations, exact, *carry);
      else
        st = polished_newton<K>(Z, opt, iterations, exact);
    } else {
      Chord<K, Transformed<S>> simplified;
      simplified.lu.h = h;
      st = polished_newton<K, Transformed<S>>(Z, opt, iterations, [&](const Vec<K>& x, Vec<K>& r,
                                                                      typename Transformed<S>::Jacobian* hessian) {
        stage_residual(sys, s, h, x, r, static_cast<StageMat<S>*>(nullptr));
        if (hessian) {
          ZVec<S> mean = x.template segment<m>(0);
          for (int j = 1; j < Stages; ++j) mean += x.template segment<m>(j * m);
          ZVec<S> g;
          hamiltonian_derivatives(sys, ZVec<S>(mean / Real(Stages)), g, *hessian, true);
        }
      }, simplified);
    }
    if (st != Status::ok) return st;
    Vec<n> q1 = s.q, p1 = s.p;
    for (int j = 0; j < Stages; ++j) {
      const ZVec<S> g = hamiltonian_gradient(sys, ZVec<S>(Z.template segment<m>(j * m)));
      q1 += h * Tableau::b(j) * P::p(g);
      p1 -= h * Tableau::b(j) * P::q(g);
    }
    if (!all_finite(q1) || !all_finite(p1)) return Status::non_finite;
    if constexpr (C > 0)
      if (tangent && (st = propagate_tangent<S, C>(sys, Z, h, *tangent, *carry)) != Status::ok) return st;
    s.q = q1;
    s.p = p1;
    return Status::ok;
  }

  // The residual of eqs. (2.2), (2.4) at the stages x, and (jac not null)
  // its Jacobian F_Z there.
  template <class S>
  TETHER_HD static void stage_residual(const S& sys, const PhaseState<S>& s, Real h, const Vec<Parts<S>::m * Stages>& x,
                                       Vec<Parts<S>::m * Stages>& r, Mat<Parts<S>::m * Stages, Parts<S>::m * Stages>* jac) {
    using P = Parts<S>;
    constexpr int n = P::n, k = P::k, m = P::m;
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

  // The tangent through the step: dZ = F_Z^-1 (dq0, dp0, 0 per stage), then
  // eq. (2.3) differentiated, d(q1, p1) = d(q0, p0) + h sum_j b_j (J Hess H(Z_j) dZ_j)
  // on the (q, p) rows. The stage rows of F_Z dZ say that
  // (dQ_i - dq0, dP_i - dp0) = h sum_j a_ij (the same terms), so that sum is
  // sum_i d_i (dQ_i - dq0, dP_i - dp0) with d = b^T A^-1 (HW96 §IV.8): no
  // Hess H is kept past the solve (s m^2 numbers fewer in a GPU thread).
  // Column by column, so that a GPU thread holds one K-vector of dZ, not
  // K x C (the same arithmetic as for the whole block).
  template <class S, int C>
  TETHER_HD static Status propagate_tangent(const S& sys, const Vec<Parts<S>::m * Stages>& Z, Real h,
                                            Tangent<S, C>& tangent, Carry<S>& carry) {
    using P = Parts<S>;
    constexpr int n = P::n, m = P::m, K = m * Stages;
    DenseLU<K>& lu = carry.lu;
    carry.valid = false;
    lu.lu = stage_jacobian_start<S>();  // F_Z, built where it is factored
    for (int j = 0; j < Stages; ++j) {
      ZVec<S> g;
      ZMat<S> hs;
      hamiltonian_derivatives(sys, ZVec<S>(Z.template segment<m>(j * m)), g, hs);
      add_stage_columns<S>(lu.lu, j, hs, h);
    }
    if (!lu.factor_in_place()) return Status::singular_matrix;
    TETHER_DEVICE_ROLLED
    for (int c = 0; c < C; ++c) {
      const Vec<2 * n> t = tangent.col(c);
      Vec<K> dz = Vec<K>::Zero();  // the right-hand side, then dZ's column
      for (int j = 0; j < Stages; ++j) dz.template segment<2 * n>(j * m) = t;
      if (!lu.solve(dz, dz)) return Status::singular_matrix;
      for (int i = 0; i < Stages; ++i) dz.template segment<2 * n>(i * m) -= t;
      Vec<2 * n> next = t;
      for (int i = 0; i < Stages; ++i) next += Tableau::d(i) * dz.template segment<2 * n>(i * m);
      tangent.col(c) = next;
    }
    carry.valid = true;
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

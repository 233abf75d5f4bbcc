#pragma once
// A variational integrator built over any explicit Runge-Kutta "standard
// layer" (PCSZ09, Patrick-Cuell-Spiteri-Zhang), for the "lagrangian" system
// family (systems/magnetic_sphere.hpp documents the interface).
//
// Standard layer R_t: one step of size t of the tableau on the constrained
// Euler-Lagrange equations with the action, PCSZ09 §2 and eq. (4.2),
//   q' = v,  v' = A(q, v),  S' = L(q, v),
// giving the segment ends d^-(w) = R^q_{h alpha-}(w), d^+(w) = R^q_{h alpha+}(w)
// and the discrete Lagrangian L_h(w) = R^S_{h alpha+}(w) - R^S_{h alpha-}(w)
// for w = (q, v); the ends are projected onto N by P along
// iota(q, theta) = q + Dg(q)^T theta (eq. (3.2)).
//
// The state between steps is a node q of the discrete curve with its discrete
// momentum p (the discrete Legendre transform; ~ dL/dv to the layer's order):
// in the paper's Stage 4 the node is qbar = d^+(w1) = d^-(w2) and its momentum
// is the multiplier mu, so one step solves (S4.5)-(S4.7) for w2 given
// (qbar, mu) = (q, p) and returns the next node q2+ = P d^+(w2) (S4.8) with
// its momentum lambda+. This map is symplectic on T*N and conserves the
// canonical Noether momenta of symmetries that L, g and the tableau respect.
// The momentum is returned in the representative with G(q) v = 0,
// v = m(q)^-1 (p - a(q)) (the paper's representative lambda Dg^T = 0, eq. (S4.5b),
// differs from it by G(q)^T c, which pairs to zero with T N).
#include "tether/core/families.hpp"
#include <limits>

#include <Eigen/Dense>

#include "tether/core/dual.hpp"
#include "tether/core/lanes.hpp"
#include "tether/core/newton.hpp"
#include "tether/core/small_solve.hpp"
#include "tether/core/status.hpp"
#include "tether/methods/projection.hpp"

namespace tether {

namespace variational_detail {

// Gaussian elimination with partial pivoting on a scalar-generic K x K
// system (Real or dual numbers; pivots chosen on the plain values).
template <class T, int K>
TETHER_HD bool solve_in_place(T (&a)[K][K], T (&b)[K]) {
  for (int c = 0; c < K; ++c) {
    int piv = c;
    Real best = fabs(ad::primal(a[c][c]));
    for (int r = c + 1; r < K; ++r) {
      const Real v = fabs(ad::primal(a[r][c]));
      if (v > best) { best = v; piv = r; }
    }
    if (!(best > 0)) return false;
    if (piv != c) {
      for (int j = 0; j < K; ++j) { const T t = a[c][j]; a[c][j] = a[piv][j]; a[piv][j] = t; }
      const T t = b[c]; b[c] = b[piv]; b[piv] = t;
    }
    for (int r = c + 1; r < K; ++r) {
      const T f = a[r][c] / a[c][c];
      for (int j = c + 1; j < K; ++j) a[r][j] = a[r][j] - f * a[c][j];
      b[r] = b[r] - f * b[c];
    }
  }
  for (int r = K - 1; r >= 0; --r) {
    T s = b[r];
    for (int j = r + 1; j < K; ++j) s = s - a[r][j] * b[j];
    b[r] = s / a[r][r];
  }
  return true;
}

// The vector field of the standard layer at y = (q, v, S): (v, A(q, v), L(q, v)),
// A from the linear multiplier problem PCSZ09 eq. (4.2) with matrix (4.3).
template <class Sys, class T>
TETHER_HD bool euler_lagrange_field(const Sys& sys, const T (&y)[2 * Sys::dof + 1], T (&f)[2 * Sys::dof + 1]) {
  constexpr int n = Sys::dof, k = Sys::constraint_count;
  T q[n], v[n];
  for (int i = 0; i < n; ++i) { q[i] = y[i]; v[i] = y[n + i]; }
  T m[n][n], dm[n][n][n], a[n], da[n][n], dV[n], G[k][n];
  sys.mass_matrix(q, m);
  sys.mass_matrix_derivative(q, dm);
  sys.magnetic_potential(q, a);
  sys.magnetic_potential_jacobian(q, da);
  sys.potential_gradient(q, dV);
  sys.constraint_jacobian(q, G);
  T mat[n + k][n + k], rhs[n + k];
  for (int i = 0; i < n; ++i) {
    // -Gamma_ikl v^k v^l - b_ij v^j - dV/dq^i
    T r = -dV[i];
    for (int kk = 0; kk < n; ++kk)
      for (int l = 0; l < n; ++l) r = r - (dm[kk][i][l] - Real(0.5) * dm[i][kk][l]) * v[kk] * v[l];
    for (int j = 0; j < n; ++j) r = r - (da[i][j] - da[j][i]) * v[j];
    rhs[i] = r;
    for (int j = 0; j < n; ++j) mat[i][j] = m[i][j];
    for (int c = 0; c < k; ++c) mat[i][n + c] = -G[c][i];
  }
  for (int c = 0; c < k; ++c) {
    T H[n][n];
    sys.constraint_hessian(q, c, H);
    T r = T(0);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) r = r + H[i][j] * v[i] * v[j];
    rhs[n + c] = r;
    for (int j = 0; j < n; ++j) mat[n + c][j] = -G[c][j];
    for (int j = 0; j < k; ++j) mat[n + c][n + j] = T(0);
  }
  if (!solve_in_place<T, n + k>(mat, rhs)) return false;
  T lag = -sys.potential(q);
  for (int i = 0; i < n; ++i) {
    T mv = T(0);
    for (int j = 0; j < n; ++j) mv = mv + m[i][j] * v[j];
    lag = lag + (Real(0.5) * mv + a[i]) * v[i];
  }
  for (int i = 0; i < n; ++i) { f[i] = v[i]; f[n + i] = rhs[i]; }
  f[2 * n] = lag;
  return true;
}

}  // namespace variational_detail

// The segment of the standard layer through w = (q, v) (PCSZ09 §2 item 3):
// unprojected ends d^-, d^+, discrete Lagrangian L_h and their derivatives
// in q and v (rows of the ends' Jacobians are end components).
template <int n>
struct VariationalSegment {
  Vec<n> minus, plus;
  Mat<n, n> minus_q, minus_v, plus_q, plus_v;
  Real action;
  Vec<n> action_q, action_v;
};

// PCSZ09 §§2-4: the symplectic layer over an explicit Runge-Kutta standard
// layer, Stage-4 equations (S4.5)-(S4.8), solved by the fixed-point iteration
// with approximates (§4.2-4.4) or by Newton.
struct Variational {
  static constexpr const char* name = "variational";
  static constexpr bool own_unknowns = true;  // the reference solves its own unknowns (reference_guess etc.)
  static constexpr int order = 4;  // of the default tableau; see Parameters::layer_order()
  static constexpr bool two_step = false;
  static constexpr const char* citation = "PCSZ09 §§2-4, Stage-4 eqs. (S4.5)-(S4.8), (3.2), (4.2), (4.4), (4.7)-(4.9)";
  static constexpr const char* description = "variational integrator over an explicit Runge-Kutta layer, same order as the layer";
  static constexpr bool symmetric = true;
  static constexpr bool symplectic = true;
  template <class S>
  static constexpr bool applies_to = LagrangianSystem<S>;
  static constexpr int max_stages = 6;

  enum class Solver { fixed_point, newton };

  struct Parameters {
    // Explicit tableau of the standard layer (only a[i][j], j < i, is read;
    // the system is autonomous, so c is only checked: c_i = sum_j a_ij).
    int stages = 4;
    Real a[max_stages][max_stages] = {{0}, {0.5}, {0, 0.5}, {0, 0, 1}};
    Real b[max_stages] = {Real(1) / 6, Real(1) / 3, Real(1) / 3, Real(1) / 6};
    Real c[max_stages] = {0, 0.5, 0.5, 1};
    // The bias (alpha-, alpha+) with alpha+ - alpha- = 1, 0 <= alpha+ <= 1:
    // alpha+ = 1/2 is the self-adjoint (time-symmetric) choice, alpha+ = 1
    // puts w at the start of its segment.
    Real alpha_plus = 0.5;
    Solver solver = Solver::fixed_point;
    // Fixed-point iteration: converged (after one polishing update) when the
    // update of positions (q2, the constraint displacement Dg^T theta, h v2)
    // and of momenta (lambda+, the constraint forces Dg^T nu) falls below
    // tolerance x their scale. The Newton solver uses NewtonOptions instead.
    Real tolerance = 1e-14;
    int max_iterations = 200;

    TETHER_HD Real alpha_minus() const { return alpha_plus - 1; }

    TETHER_HD static Parameters classical_rk4() { return Parameters(); }
    TETHER_HD static Parameters heun() {  // order 2
      Parameters p;
      p.stages = 2;
      for (int i = 0; i < max_stages; ++i) {
        p.b[i] = p.c[i] = 0;
        for (int j = 0; j < max_stages; ++j) p.a[i][j] = 0;
      }
      p.a[1][0] = 1;
      p.b[0] = p.b[1] = Real(0.5);
      p.c[1] = 1;
      return p;
    }
    TETHER_HD static Parameters kutta3() {  // Kutta's third-order method
      Parameters p = heun();
      p.stages = 3;
      p.a[1][0] = Real(0.5);
      p.a[2][0] = -1;
      p.a[2][1] = 2;
      p.b[0] = Real(1) / 6;
      p.b[1] = Real(2) / 3;
      p.b[2] = Real(1) / 6;
      p.c[1] = Real(0.5);
      p.c[2] = 1;
      return p;
    }

    // The classical order of the tableau, checked up to 4.
    TETHER_HD int layer_order() const {
      Real cc[max_stages];
      for (int i = 0; i < stages; ++i) {
        cc[i] = 0;
        for (int j = 0; j < i; ++j) cc[i] += a[i][j];
      }
      Real s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int i = 0; i < stages; ++i) {
        Real ac = 0, ac2 = 0, aac = 0;
        for (int j = 0; j < i; ++j) {
          ac += a[i][j] * cc[j];
          ac2 += a[i][j] * cc[j] * cc[j];
          for (int l = 0; l < j; ++l) aac += a[i][j] * a[j][l] * cc[l];
        }
        s[0] += b[i];
        s[1] += b[i] * cc[i];
        s[2] += b[i] * cc[i] * cc[i];
        s[3] += b[i] * ac;
        s[4] += b[i] * cc[i] * cc[i] * cc[i];
        s[5] += b[i] * cc[i] * ac;
        s[6] += b[i] * ac2;
        s[7] += b[i] * aac;
      }
      const Real want[8] = {1, Real(1) / 2, Real(1) / 3, Real(1) / 6, Real(1) / 4, Real(1) / 8, Real(1) / 12,
                            Real(1) / 24};
      const int last[4] = {0, 1, 3, 7};  // conditions of order r: indices up to last[r - 1]
      int r = 0;
      for (int o = 1; o <= 4; ++o) {
        for (int i = 0; i <= last[o - 1]; ++i)
          if (fabs(s[i] - want[i]) > Real(1e-12)) return r;
        r = o;
      }
      return r;
    }

    template <class V>
    void describe(V& v) {
      v.tableau("layer", *this, {{"rk4", classical_rk4()}, {"heun", heun()}, {"kutta3", kutta3()}},
                "the standard layer: rk4, heun, kutta3, or an explicit tableau {a, b, c}");
      v.real("alpha_plus", alpha_plus, Range::any(), "the bias alpha+ in [0, 1]; 1/2 is time-symmetric");
      v.choice("solver", solver, {{"fixed_point", Solver::fixed_point}, {"newton", Solver::newton}},
               "the Stage-4 solver: fixed-point iteration with approximates, or Newton");
      v.check(check(), "");
    }

    // nullptr when usable, else what is wrong (for config validation).
    const char* check() const {
      if (stages < 1 || stages > max_stages) return "stages must be in 1..6";
      for (int i = 0; i < stages; ++i) {
        Real row = 0;
        for (int j = 0; j < i; ++j) row += a[i][j];
        for (int j = i; j < max_stages; ++j)
          if (a[i][j] != 0) return "the tableau must be explicit (a strictly lower triangular)";
        if (fabs(row - c[i]) > Real(1e-12)) return "c_i must equal the row sums of a";
      }
      if (layer_order() < 1) return "the tableau is not consistent (sum b != 1)";
      if (!(alpha_plus >= 0 && alpha_plus <= 1)) return "alpha_plus must be in [0, 1]";
      if (!(tolerance > 0)) return "tolerance must be positive";
      if (max_iterations < 1) return "max_iterations must be positive";
      return nullptr;
    }
  };
  Parameters prm;

  // ---- standard layer ----

  // One step of size t of the tableau from (q, v, S = 0): the end position and action.
  template <class Sys, class T>
  TETHER_HD bool standard_layer(const Sys& sys, const T (&q)[Sys::dof], const T (&v)[Sys::dof], Real t,
                                T (&q_end)[Sys::dof], T& action) const {
    constexpr int n = Sys::dof, m = 2 * n + 1;
    if (t == 0) {
      for (int i = 0; i < n; ++i) q_end[i] = q[i];
      action = T(0);
      return true;
    }
    T y0[m], k[max_stages][m];
    for (int i = 0; i < n; ++i) { y0[i] = q[i]; y0[n + i] = v[i]; }
    y0[2 * n] = T(0);
    for (int s = 0; s < prm.stages; ++s) {
      T y[m];
      for (int i = 0; i < m; ++i) {
        T acc = y0[i];
        for (int j = 0; j < s; ++j)
          if (prm.a[s][j] != 0) acc = acc + (t * prm.a[s][j]) * k[j][i];
        y[i] = acc;
      }
      if (!variational_detail::euler_lagrange_field(sys, y, k[s])) return false;
    }
    for (int i = 0; i < n; ++i) {
      T acc = y0[i];
      for (int s = 0; s < prm.stages; ++s) acc = acc + (t * prm.b[s]) * k[s][i];
      q_end[i] = acc;
    }
    T acc = T(0);
    for (int s = 0; s < prm.stages; ++s) acc = acc + (t * prm.b[s]) * k[s][2 * n];
    action = acc;
    return true;
  }

  // The segment through w = (q, v); derivatives by forward-mode dual
  // numbers, as many of the 2n directions of (q, v) per pass as PassDirections holds.
  template <class Sys>
  TETHER_HD bool segment(const Sys& sys, const Vec<Sys::dof>& q, const Vec<Sys::dof>& v, Real h,
                         VariationalSegment<Sys::dof>& seg, bool derivatives = true) const {
    constexpr int n = Sys::dof;
    const Real tm = h * prm.alpha_minus(), tp = h * prm.alpha_plus;
    if (!derivatives) {
      Real qa[n], va[n], em[n], ep[n], sm, sp;
      for (int i = 0; i < n; ++i) { qa[i] = q[i]; va[i] = v[i]; }
      if (!standard_layer(sys, qa, va, tm, em, sm) || !standard_layer(sys, qa, va, tp, ep, sp)) return false;
      for (int i = 0; i < n; ++i) { seg.minus[i] = em[i]; seg.plus[i] = ep[i]; }
      seg.action = sp - sm;
      return all_finite(seg.minus) && all_finite(seg.plus) && is_finite(seg.action);
    }
    using Directions = PassDirections<2 * n>;
    using D = ad::Dual<Real, Directions>;
    constexpr int per_pass = lane_count<Directions>;
    for (int first = 0; first < 2 * n; first += per_pass) {
      D qd[n], vd[n], em[n], ep[n], sm, sp;
      for (int i = 0; i < n; ++i) {
        qd[i] = D(q[i], unit_lane<Directions>(i - first));
        vd[i] = D(v[i], unit_lane<Directions>(n + i - first));
      }
      if (!standard_layer(sys, qd, vd, tm, em, sm) || !standard_layer(sys, qd, vd, tp, ep, sp)) return false;
      for (int l = 0; l < per_pass && first + l < 2 * n; ++l) {
        const int dir = first + l;
        for (int i = 0; i < n; ++i) {
          if (dir < n) {
            seg.minus_q(i, dir) = lane(em[i].d, l);
            seg.plus_q(i, dir) = lane(ep[i].d, l);
          } else {
            seg.minus_v(i, dir - n) = lane(em[i].d, l);
            seg.plus_v(i, dir - n) = lane(ep[i].d, l);
          }
        }
        if (dir < n)
          seg.action_q[dir] = lane(sp.d, l) - lane(sm.d, l);
        else
          seg.action_v[dir - n] = lane(sp.d, l) - lane(sm.d, l);
      }
      if (first == 0) {
        for (int i = 0; i < n; ++i) { seg.minus[i] = em[i].v; seg.plus[i] = ep[i].v; }
        seg.action = sp.v - sm.v;
      }
    }
    return all_finite(seg.minus) && all_finite(seg.plus) && is_finite(seg.action) && all_finite(seg.action_q) &&
           all_finite(seg.action_v);
  }

  // ---- projection P along iota(q, theta) = q + Dg(q)^T theta, PCSZ09 eq. (3.2) ----

  template <class Sys>
  using KMat = Mat<Sys::dof + Sys::constraint_count, Sys::dof + Sys::constraint_count>;

  // [[1 + D^2(theta.g)(q), Dg(q)^T], [Dg(q), 0]]: the Jacobian of iota's
  // equations (4.6), which also gives DP^T by eq. (4.7).
  template <class Sys>
  TETHER_HD static KMat<Sys> iota_matrix(const Sys& sys, const Vec<Sys::dof>& q, const Vec<Sys::constraint_count>& theta) {
    constexpr int n = Sys::dof, k = Sys::constraint_count;
    KMat<Sys> K = KMat<Sys>::Zero();
    Mat<n, n> top = Mat<n, n>::Identity();
    for (int c = 0; c < k; ++c) top += theta[c] * sys.constraint_hessian(q, c);
    const Mat<k, n> G = sys.constraint_jacobian(q);
    K.template topLeftCorner<n, n>() = top;
    K.template topRightCorner<n, k>() = G.transpose();
    K.template bottomLeftCorner<k, n>() = G;
    return K;
  }

  // Solves q_hat = q + Dg(q)^T theta, g(q) = 0 for (q, theta) by Newton from
  // the given guess; one polishing update after the update falls below 1e-7.
  template <class Sys>
  TETHER_HD static Status project(const Sys& sys, const Vec<Sys::dof>& q_hat, Vec<Sys::dof>& q,
                                  Vec<Sys::constraint_count>& theta, const NewtonOptions& opt) {
    constexpr int n = Sys::dof, k = Sys::constraint_count;
    bool polish = false;
    for (int it = 0; it <= opt.max_iterations; ++it) {
      Vec<n + k> r, d;
      r.template head<n>() = q + sys.constraint_jacobian(q).transpose() * theta - q_hat;
      r.template tail<k>() = sys.constraints(q);
      DenseMatrix<n + k> K;
      K.a = iota_matrix(sys, q, theta);
      if (!K.solve(-r, d)) return Status::singular_matrix;
      q += d.template head<n>();
      theta += d.template tail<k>();
      if (!all_finite(q) || !all_finite(theta)) return Status::non_finite;
      if (polish) {
        return max_abs(sys.constraints(q)) <= constraint_tolerance(sys, opt, q) ? Status::ok
                                                                                : Status::newton_not_converged;
      }
      polish = max_abs(d) <= Real(1e-7) * (1 + max_abs(q_hat));
    }
    return Status::newton_not_converged;
  }

  // DP(q_hat)^T cov via eq. (4.7), K = iota_matrix at the projected (q, theta).
  template <class Sys>
  TETHER_HD static bool projected_covector(const KMat<Sys>& K, const Vec<Sys::dof>& cov, Vec<Sys::dof>& out) {
    constexpr int n = Sys::dof, k = Sys::constraint_count;
    Vec<n + k> rhs = Vec<n + k>::Zero(), x;
    rhs.template head<n>() = cov;
    DenseMatrix<n + k> m;
    m.a = K;
    if (!m.solve(rhs, x)) return false;
    out = x.template head<n>();
    return true;
  }

  // ---- T*N helpers ----

  // v = m(q)^-1 (p - a(q)).
  template <class Sys>
  TETHER_HD static bool velocity_of(const Sys& sys, const Vec<Sys::dof>& q, const Vec<Sys::dof>& p, Vec<Sys::dof>& v) {
    DenseMatrix<Sys::dof> m;
    m.a = sys.mass_matrix(q);
    return m.solve(Vec<Sys::dof>(p - sys.magnetic_potential(q)), v);
  }

  // p + G(q)^T c with G(q) m(q)^-1 (p + G^T c - a(q)) = 0: the representative
  // of the covector p|TN that the engine's T*N uses.
  template <class Sys>
  TETHER_HD static bool cotangent_representative(const Sys& sys, const Vec<Sys::dof>& q, Vec<Sys::dof>& p) {
    constexpr int n = Sys::dof, k = Sys::constraint_count;
    DenseLU<n> lu;
    if (!lu.factor(sys.mass_matrix(q))) return false;
    const Mat<k, n> G = sys.constraint_jacobian(q);
    Mat<n, k> MiGt;
    for (int c = 0; c < k; ++c) {
      Vec<n> col;
      if (!lu.solve(Vec<n>(G.row(c).transpose()), col)) return false;
      MiGt.col(c) = col;
    }
    Vec<n> v;
    if (!lu.solve(Vec<n>(p - sys.magnetic_potential(q)), v)) return false;
    DenseMatrix<k> gram;
    gram.a = G * MiGt;
    Vec<k> c;
    if (!gram.solve(Vec<k>(-(G * v)), c)) return false;
    p += G.transpose() * c;
    return all_finite(p);
  }

  // ---- Stage 4 ----

  // Unknowns of (S4.5)-(S4.7) for given (qbar, mu): w2 = (q2, v2), lambda+,
  // nu1+, nu2+, theta+; plus the projected end q2+ = P d^+(w2) with its theta.
  template <class Sys>
  struct Unknowns {
    Vec<Sys::dof> q2, v2, lambda, q_plus;
    Vec<Sys::constraint_count> nu1, nu2, theta, theta_plus;
  };

  template <class Sys>
  static constexpr int packed_size = 3 * Sys::dof + 3 * Sys::constraint_count;

  template <class Sys>
  TETHER_HD static Vec<packed_size<Sys>> pack(const Unknowns<Sys>& u) {
    constexpr int n = Sys::dof, k = Sys::constraint_count;
    Vec<packed_size<Sys>> x;
    x.template segment<n>(0) = u.q2;
    x.template segment<n>(n) = u.v2;
    x.template segment<n>(2 * n) = u.lambda;
    x.template segment<k>(3 * n) = u.nu1;
    x.template segment<k>(3 * n + k) = u.nu2;
    x.template segment<k>(3 * n + 2 * k) = u.theta;
    return x;
  }
  template <class Sys>
  TETHER_HD static void unpack(const Vec<packed_size<Sys>>& x, Unknowns<Sys>& u) {
    constexpr int n = Sys::dof, k = Sys::constraint_count;
    u.q2 = x.template segment<n>(0);
    u.v2 = x.template segment<n>(n);
    u.lambda = x.template segment<n>(2 * n);
    u.nu1 = x.template segment<k>(3 * n);
    u.nu2 = x.template segment<k>(3 * n + k);
    u.theta = x.template segment<k>(3 * n + 2 * k);
  }

  // The explicit predictor: v from the Legendre transform at qbar, q2 placed
  // so that d^-(w2) ~ qbar, lambda+ ~ mu.
  template <class Sys>
  TETHER_HD static bool initial_guess(const Sys& sys, const Vec<Sys::dof>& qbar, const Vec<Sys::dof>& mu, Real h,
                                      Real alpha_minus, Unknowns<Sys>& u) {
    constexpr int k = Sys::constraint_count;
    Vec<Sys::dof> p = mu;
    if (!cotangent_representative(sys, qbar, p) || !velocity_of(sys, qbar, p, u.v2)) return false;
    u.q2 = qbar - h * alpha_minus * u.v2;
    u.q_plus = qbar + h * u.v2;
    u.lambda = p;
    u.nu1 = u.nu2 = u.theta = u.theta_plus = Vec<k>::Zero();
    return true;
  }

  // Residuals of (S4.5a), (S4.5b), (S4.6a) (negated), (S4.6b), (S4.7a),
  // (S4.7b) at u, with (S4.8) and the hatted multipliers (S4.5c), (S4.6c)
  // eliminated exactly by (4.7). The segment through (u.q2, u.v2) is formed
  // into seg and u.q_plus / u.theta_plus updated by projecting its end (they
  // also serve as the guess of the projection); with segment_known, seg and
  // u.q_plus / u.theta_plus are taken as already belonging to (u.q2, u.v2):
  // the residual's other unknowns do not move the segment, its dearest part.
  template <class Sys>
  TETHER_HD Status stage4_residual(const Sys& sys, const Vec<Sys::dof>& qbar, const Vec<Sys::dof>& mu, Real h,
                                   Unknowns<Sys>& u, const NewtonOptions& opt, Vec<packed_size<Sys>>& r,
                                   VariationalSegment<Sys::dof>& seg, bool segment_known = false) const {
    constexpr int n = Sys::dof, k = Sys::constraint_count;
    if (!segment_known) {
      if (!segment(sys, u.q2, u.v2, h, seg)) return Status::non_finite;
      const Status st = project(sys, seg.plus, u.q_plus, u.theta_plus, opt);
      if (st != Status::ok) return st;
    }
    Vec<n> lambda_hat, mu_hat;
    if (!projected_covector<Sys>(iota_matrix(sys, u.q_plus, u.theta_plus), u.lambda, lambda_hat) ||
        !projected_covector<Sys>(iota_matrix(sys, qbar, u.theta), mu, mu_hat))
      return Status::singular_matrix;
    const Mat<k, n> G2 = sys.constraint_jacobian(u.q2);
    Mat<n, n> nu2_hess = Mat<n, n>::Zero();
    for (int c = 0; c < k; ++c) nu2_hess += u.nu2[c] * sys.constraint_hessian(u.q2, c);
    r.template segment<n>(0) = seg.plus_q.transpose() * lambda_hat - seg.minus_q.transpose() * mu_hat +
                               G2.transpose() * u.nu1 + nu2_hess * u.v2 - seg.action_q;
    r.template segment<k>(n) = sys.constraint_jacobian(u.q_plus) * u.lambda;
    r.template segment<n>(n + k) = seg.plus_v.transpose() * lambda_hat - seg.minus_v.transpose() * mu_hat +
                                   G2.transpose() * u.nu2 - seg.action_v;
    r.template segment<k>(2 * n + k) = G2 * u.v2;
    r.template segment<n>(2 * n + 2 * k) = seg.minus - qbar - sys.constraint_jacobian(qbar).transpose() * u.theta;
    r.template segment<k>(3 * n + 2 * k) = sys.constraints(u.q2);
    return all_finite(r) ? Status::ok : Status::non_finite;
  }

  // Solves the Stage-4 equations for u (initialised by initial_guess).
  // Convergence is judged on positions (q2, h v2, Dg^T theta) and momenta
  // (lambda+, constraint forces Dg^T nu1, Dg^T nu2 / h), never on raw multipliers.
  template <class Sys>
  TETHER_HD Status solve_stage4(const Sys& sys, const Vec<Sys::dof>& qbar, const Vec<Sys::dof>& mu, Real h,
                                const NewtonOptions& opt, int& iterations, Unknowns<Sys>& u) const {
    constexpr int n = Sys::dof, k = Sys::constraint_count, N = packed_size<Sys>;
    const Real am = prm.alpha_minus(), ap = prm.alpha_plus;
    const Mat<k, n> G0 = sys.constraint_jacobian(qbar);
    const Mat<n, n> M0 = sys.mass_matrix(qbar);
    const Real q_scale = sys.length_scale() + max_abs(qbar);
    const Real p_floor = sqrt(max_abs(Vec<n>(M0.diagonal())) * sys.energy_scale());
    // Approximate saddle matrices of (4.8) and (S4.6a'), factored once.
    DenseLU<n + k> unit_saddle, mass_saddle;
    {
      KMat<Sys> A = KMat<Sys>::Zero();
      A.template topLeftCorner<n, n>().setIdentity();
      A.template topRightCorner<n, k>() = G0.transpose();
      A.template bottomLeftCorner<k, n>() = G0;
      if (!unit_saddle.factor(A)) return Status::singular_matrix;
      A.template topLeftCorner<n, n>() = -h * M0;
      if (!mass_saddle.factor(A)) return Status::singular_matrix;
    }
    auto update_size = [&](const Vec<N>& dx) {
      Unknowns<Sys> d;
      unpack<Sys>(dx, d);
      const Real dq = fmax(fmax(max_abs(d.q2), fabs(h) * max_abs(d.v2)), max_abs(Vec<n>(G0.transpose() * d.theta)));
      const Real dp = fmax(fmax(max_abs(d.lambda), max_abs(Vec<n>(G0.transpose() * d.nu1))),
                           max_abs(Vec<n>(G0.transpose() * d.nu2)) / fabs(h));
      const Real p_scale = max_abs(u.lambda) + max_abs(mu) + p_floor;
      return fmax(dq / q_scale, dp / p_scale);
    };
    const bool newton = prm.solver == Solver::newton;
    const Real tol = newton ? opt.tolerance : prm.tolerance;
    const int max_it = newton ? opt.max_iterations : prm.max_iterations;
    Real last = 0;
    bool polishing = false;
    for (int it = 0;; ++it) {
      if (it >= max_it) return Status::newton_not_converged;
      Vec<N> x = pack(u), r, dx;
      VariationalSegment<n> seg;
      Status st = stage4_residual(sys, qbar, mu, h, u, opt, r, seg);
      if (st != Status::ok) return st;
      if (newton) {
        // Jacobian by forward differences from the residual just formed. Only
        // the first 2n unknowns (q2, v2) move the segment (2n dual-number
        // passes through the layer each); the columns of lambda, nu1, nu2,
        // theta reuse it. The O(sqrt(eps)) error in J only slows the final
        // contraction, which the polishing update below absorbs.
        Mat<N, N> J;
        for (int j = 0; j < N; ++j) {
          const Real e = Real(1.5e-8) * (1 + fabs(x[j]));
          Vec<N> rp, xp = x;
          Unknowns<Sys> up = u;
          xp[j] += e;
          unpack<Sys>(xp, up);
          const bool moves_segment = j < 2 * n;
          VariationalSegment<n> seg_j;
          VariationalSegment<n>& seg_used = moves_segment ? seg_j : seg;  // read only when reused
          if ((st = stage4_residual(sys, qbar, mu, h, up, opt, rp, seg_used, !moves_segment)) != Status::ok) return st;
          J.col(j) = (rp - r) / e;
        }
        DenseMatrix<N> m;
        m.a = J;
        if (!m.solve(-r, dx)) return Status::singular_matrix;
      } else {
        // PCSZ09 §4.4: (S4.5a',b') for lambda+, nu1+; then (S4.6a',b') for
        // v2, nu2+; then (S4.7a',b') for q2, theta+ — the affine
        // approximates (4.9) with G0, M0 at qbar, applied to the update form
        // of iteration (4.4). The linear parts follow (4.9) term by term:
        // D_v d^+- ~ h alpha+- (the printed (S4.6a') drops these factors) and
        // d^-(w2) ~ q2 + h alpha- v2 (the printed (S4.7a') has alpha+).
        Vec<n + k> rhs, sol;
        rhs.template head<n>() = -r.template segment<n>(0);
        rhs.template tail<k>() = -r.template segment<k>(n);
        if (!unit_saddle.solve(rhs, sol)) return Status::singular_matrix;
        Unknowns<Sys> d;
        d.lambda = sol.template head<n>();
        d.nu1 = sol.template tail<k>();
        rhs.template head<n>() = -r.template segment<n>(n + k) - h * ap * d.lambda;
        rhs.template tail<k>() = -r.template segment<k>(2 * n + k);
        if (!mass_saddle.solve(rhs, sol)) return Status::singular_matrix;
        d.v2 = sol.template head<n>();
        d.nu2 = sol.template tail<k>();
        rhs.template head<n>() = -r.template segment<n>(2 * n + 2 * k) - h * am * d.v2;
        rhs.template tail<k>() = -r.template segment<k>(3 * n + 2 * k);
        if (!unit_saddle.solve(rhs, sol)) return Status::singular_matrix;
        d.q2 = sol.template head<n>();
        d.theta = -sol.template tail<k>();  // the unknown of (4.8) here is -theta
        dx = pack(d);
      }
      x += dx;
      if (!all_finite(x)) return Status::non_finite;
      unpack<Sys>(x, u);
      ++iterations;
      if (polishing) return Status::ok;
      const Real size = update_size(dx);
      // One more (polishing) update once converged: stopping at the first
      // small update would leave an error of the same sign every step, which
      // the Noether momentum accumulates.
      if (size <= tol) polishing = true;
      // Roundoff floor: tiny updates that no longer contract.
      if (it > 0 && size <= Real(64) * Real(2.220446049250313e-16) && size >= Real(0.5) * last) return Status::ok;
      last = size;
    }
  }

  template <class Sys>
  TETHER_HD void start(const Sys&, PhaseState<Sys>&, Real) const {}

  // One step (q, p) -> (q2+, lambda+); on failure the state is left as it was.
  template <class Sys>
  TETHER_HD Status step(const Sys& sys, PhaseState<Sys>& s, Real h, const NewtonOptions& opt, int& iterations) const {
    Unknowns<Sys> u;
    if (!initial_guess(sys, s.q, s.p, h, prm.alpha_minus(), u)) return Status::singular_matrix;
    Status st = solve_stage4(sys, s.q, s.p, h, opt, iterations, u);
    if (st != Status::ok) return st;
    // (S4.8) at the converged w2.
    VariationalSegment<Sys::dof> seg;
    if (!segment(sys, u.q2, u.v2, h, seg, false)) return Status::non_finite;
    if ((st = project(sys, seg.plus, u.q_plus, u.theta_plus, opt)) != Status::ok) return st;
    Vec<Sys::dof> p = u.lambda;
    if (!cotangent_representative(sys, u.q_plus, p)) return Status::singular_matrix;
    return accept_step(s, u.q_plus, p);
  }

  // ---- reference form (host only) ----
  // Unknowns x = (q2, v2, lambda+, lambda^+, mu^2, q2+ | nu1+, nu2+, theta+,
  // theta2+, z_lambda, z_mu): 6n + 6k, the Stage-4 equations for given
  // (qbar, mu) = (q0, p0) as written, (S4.5c), (S4.6c) in the form (4.7) and
  // (S4.8) as q^ = q2+ + Dg(q2+)^T theta2+, g(q2+) = 0.
  template <class Sys>
  static constexpr int reference_size = 6 * Sys::dof + 6 * Sys::constraint_count;

  template <class Sys>
  Eigen::VectorXd reference_pack(const Sys& sys, const PhaseState<Sys>& s0, Real h, const Unknowns<Sys>& u) const {
    constexpr int n = Sys::dof, k = Sys::constraint_count;
    Eigen::VectorXd x(reference_size<Sys>);
    Vec<n + k> lh, mh, rhs = Vec<n + k>::Zero();
    DenseMatrix<n + k> K;
    K.a = iota_matrix(sys, u.q_plus, u.theta_plus);
    rhs.template head<n>() = u.lambda;
    K.solve(rhs, lh);
    K.a = iota_matrix(sys, s0.q, u.theta);
    rhs.template head<n>() = s0.p;
    K.solve(rhs, mh);
    (void)h;
    x << u.q2, u.v2, u.lambda, lh.template head<n>(), mh.template head<n>(), u.q_plus, u.nu1, u.nu2, u.theta,
        u.theta_plus, lh.template tail<k>(), mh.template tail<k>();
    return x;
  }

  template <class Sys>
  Eigen::VectorXd reference_guess(const Sys& sys, const PhaseState<Sys>& s0, Real h) const {
    Unknowns<Sys> u;
    initial_guess(sys, s0.q, s0.p, h, prm.alpha_minus(), u);
    return reference_pack(sys, s0, h, u);
  }

  template <class Sys>
  Eigen::VectorXd residual(const Sys& sys, const PhaseState<Sys>& s0, Real h, const Eigen::VectorXd& x) const {
    constexpr int n = Sys::dof, k = Sys::constraint_count;
    const Vec<n> q2 = x.segment<n>(0), v2 = x.segment<n>(n), lambda = x.segment<n>(2 * n),
                 lambda_hat = x.segment<n>(3 * n), mu_hat = x.segment<n>(4 * n), q_plus = x.segment<n>(5 * n);
    const Vec<k> nu1 = x.segment<k>(6 * n), nu2 = x.segment<k>(6 * n + k), theta = x.segment<k>(6 * n + 2 * k),
                 theta_plus = x.segment<k>(6 * n + 3 * k), z_lambda = x.segment<k>(6 * n + 4 * k),
                 z_mu = x.segment<k>(6 * n + 5 * k);
    const Vec<n>& qbar = s0.q;
    const Vec<n>& mu = s0.p;
    VariationalSegment<n> seg;
    Eigen::VectorXd r(reference_size<Sys>);
    if (!segment(sys, q2, v2, h, seg)) {
      r.setConstant(std::numeric_limits<Real>::quiet_NaN());
      return r;
    }
    const Mat<k, n> G2 = sys.constraint_jacobian(q2), Gp = sys.constraint_jacobian(q_plus),
                    Gbar = sys.constraint_jacobian(qbar);
    Mat<n, n> nu2_hess = Mat<n, n>::Zero();
    for (int c = 0; c < k; ++c) nu2_hess += nu2[c] * sys.constraint_hessian(q2, c);
    Vec<n + k> zl, zm;
    zl << lambda_hat, z_lambda;
    zm << mu_hat, z_mu;
    Vec<n + k> c_lambda = iota_matrix(sys, q_plus, theta_plus) * zl, c_mu = iota_matrix(sys, qbar, theta) * zm;
    c_lambda.template head<n>() -= lambda;
    c_mu.template head<n>() -= mu;
    r << seg.plus_q.transpose() * lambda_hat - seg.minus_q.transpose() * mu_hat + G2.transpose() * nu1 +
             nu2_hess * v2 - seg.action_q,                                           // (S4.5a)
        Gp * lambda,                                                                 // (S4.5b)
        c_lambda,                                                                    // (S4.5c) as (4.7)
        seg.plus_v.transpose() * lambda_hat - seg.minus_v.transpose() * mu_hat + G2.transpose() * nu2 -
            seg.action_v,                                                            // (S4.6a)
        G2 * v2,                                                                     // (S4.6b)
        c_mu,                                                                        // (S4.6c) as (4.7)
        seg.minus - qbar - Gbar.transpose() * theta,                                 // (S4.7a)
        sys.constraints(q2),                                                         // (S4.7b)
        seg.plus - q_plus - Gp.transpose() * theta_plus, sys.constraints(q_plus);   // (S4.8)
    return r;
  }

  // The next state from solved unknowns: (q2+, lambda+) in the engine's
  // representative of the momentum.
  template <class Sys>
  void reference_finish(const Sys& sys, const PhaseState<Sys>& s0, Real, const Eigen::VectorXd& x,
                        PhaseState<Sys>& s1) const {
    constexpr int n = Sys::dof;
    s1 = s0;
    s1.q_prev = s0.q;
    s1.q = x.segment<n>(5 * n);
    Vec<n> p = x.segment<n>(2 * n);
    cotangent_representative(sys, s1.q, p);
    s1.p = p;
  }
};

}  // namespace tether

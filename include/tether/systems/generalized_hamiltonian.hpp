#pragma once
// The nonholonomic family: index-1 generalized Hamiltonian systems
// J z' = grad H(z), z = (q, p, lambda), J = [[0, -I, 0], [I, 0, 0], [0, 0, 0]]
// (MMVW13 eq. (1.3)). Every state (q, p) is admissible: the constraint
// H_lambda = 0 fixes lambda = lambda~(q, p) (MMVW13 Prop 4), so the engine
// stores only (q, p) and recovers lambda when it needs it.
//
// A system comes in one of two forms, and the engine forms H itself:
//  - Form::lagrangian (MMVW13 Prop 1): L = 1/2 qdot^T M(q) qdot - V(q) with
//    constraints g_i(q) . qdot = 0. The system gives the rows g_i(q), the
//    product M(q)^-1 w and V; then p = M qdot - sum lambda_i g_i and
//    H = 1/2 w^T M^-1 w + V with w = p + sum lambda_i g_i (Prop 1 takes M
//    constant; Prop 2 allows M(q), whose Legendre transform is invertible).
//  - Form::canonical (LJM12 §6.2, eq. (42)): H = 1/2 sum_i <p, X_i(q)>^2 + V(q)
//    for an orthonormal frame X_i of the distribution; no multipliers.
// Each writes these once, templated on the scalar T, and the derivatives that
// the methods and Newton need come from dual numbers.
#include "tether/core/dual.hpp"
#include "tether/core/lanes.hpp"
#include "tether/core/newton.hpp"
#include "tether/core/polished_newton.hpp"

namespace tether {

enum class Form { lagrangian, canonical };

// A fixed-size array that may be empty (canonical systems have no multipliers).
template <class T, int N>
struct Arr {
  T v[N > 0 ? N : 1];
  TETHER_HD T& operator[](int i) { return v[i]; }
  TETHER_HD const T& operator[](int i) const { return v[i]; }
};

// Systems of this family declare `static constexpr Form form`.
template <class S, class = void>
struct is_nonholonomic_t {
  static constexpr bool value = false;
};
template <class S>
struct is_nonholonomic_t<S, decltype(void(S::form))> {
  static constexpr bool value = true;
};
template <class S>
constexpr bool is_nonholonomic = is_nonholonomic_t<S>::value;

// Constrained Lagrangians with configuration-dependent mass and a magnetic
// term (PCSZ09), integrated by the variational method: systems declare
// `static constexpr bool lagrangian = true` and give energy(q, p),
// constraints(q) and velocity_constraints(q, p).
template <class S, class = void>
struct is_lagrangian_t {
  static constexpr bool value = false;
};
template <class S>
struct is_lagrangian_t<S, decltype(void(S::lagrangian))> {
  static constexpr bool value = S::lagrangian;
};
template <class S>
constexpr bool is_lagrangian = is_lagrangian_t<S>::value;

// Holonomic constraints h(q) = 0 as well (MMVW13 Prop 6): a Form::lagrangian
// system may declare `holonomic_count` and give h(q), templated on T. Only
// rattle_midpoint (Prop 7) integrates those; the Runge-Kutta methods do not.
template <class S, class = void>
struct holonomic_count_t {
  static constexpr int value = 0;
};
template <class S>
struct holonomic_count_t<S, decltype(void(S::holonomic_count))> {
  static constexpr int value = S::holonomic_count;
};
template <class S>
constexpr int holonomic_count = holonomic_count_t<S>::value;

// Sizes of z = (q, p, lambda).
template <class S>
struct Sizes {
  static constexpr int n = S::dof;
  static constexpr int k = S::multiplier_count;
  static constexpr int m = 2 * n + k;
};

template <class S>
using ZVec = Vec<Sizes<S>::m>;
template <class S>
using ZMat = Mat<Sizes<S>::m, Sizes<S>::m>;

// H(q, p, lambda) for either form, at any scalar type.
template <class S, class T>
TETHER_HD T generalized_hamiltonian(const S& sys, const Arr<T, S::dof>& q, const Arr<T, S::dof>& p,
                                    const Arr<T, S::multiplier_count>& lambda) {
  constexpr int n = S::dof;
  T h = sys.potential(q);
  if constexpr (S::form == Form::canonical) {
    T frame[S::frame_size][n];
    sys.frame(q, frame);
    for (int i = 0; i < S::frame_size; ++i) {
      T u = p[0] * frame[i][0];
      for (int j = 1; j < n; ++j) u += p[j] * frame[i][j];
      h += Real(0.5) * u * u;
    }
  } else {
    T rows[S::multiplier_count][n];
    sys.constraint_rows(q, rows);
    Arr<T, n> w = p, v;
    for (int i = 0; i < S::multiplier_count; ++i)
      for (int j = 0; j < n; ++j) w[j] += lambda[i] * rows[i][j];
    sys.inverse_mass_times(q, w, v);
    for (int j = 0; j < n; ++j) h += Real(0.5) * w[j] * v[j];
  }
  return h;
}

// H as a function of the packed z = (q, p, lambda).
template <class S>
struct PackedHamiltonian {
  const S& sys;
  template <class T>
  TETHER_HD T operator()(const T (&z)[Sizes<S>::m]) const {
    constexpr int n = S::dof;
    Arr<T, n> q, p;
    Arr<T, S::multiplier_count> lambda;
    for (int j = 0; j < n; ++j) {
      q[j] = z[j];
      p[j] = z[n + j];
    }
    for (int i = 0; i < S::multiplier_count; ++i) lambda[i] = z[2 * n + i];
    return generalized_hamiltonian(sys, q, p, lambda);
  }
};

template <class S>
TETHER_HD Arr<Real, S::dof> to_arr(const Vec<S::dof>& q) {
  Arr<Real, S::dof> a;
  for (int j = 0; j < S::dof; ++j) a[j] = q[j];
  return a;
}

template <class S>
TETHER_HD ZVec<S> pack(const Vec<S::dof>& q, const Vec<S::dof>& p, const Vec<S::multiplier_count>& lambda) {
  constexpr int n = S::dof;
  ZVec<S> z;
  z.template head<n>() = q;
  z.template segment<n>(n) = p;
  if constexpr (S::multiplier_count > 0) z.template tail<S::multiplier_count>() = lambda;
  return z;
}

template <class S>
TETHER_HD Real hamiltonian_value(const S& sys, const ZVec<S>& z) {
  Real zz[Sizes<S>::m];
  for (int i = 0; i < Sizes<S>::m; ++i) zz[i] = z[i];
  return PackedHamiltonian<S>{sys}(zz);
}

// Both forms are quadratic in y = (p, lambda) with no linear term:
// H = 1/2 y^T A(q) y + V(q), where A = sum_i X_i X_i^T (canonical) or
// A = B^T M^-1 B with w = B y = p + G^T lambda (lagrangian; M^-1 w is linear
// in w). So every derivative of H comes from the map y -> H_y = A(q) y and V:
//   H_y = A y,  H_yy = A,  H_yq = d_q (A y),
//   H_q = 1/2 y . d_q (A y) + V_q,  H_qq = 1/2 y . d_qq (A y) + V_qq,
// with dual numbers in q only (n passes for a gradient, n(n+1)/2 for a
// Hessian, against 2n+k and (2n+k)(2n+k+1)/2 passes of H in all of z).
// KineticMap holds what A needs at one q (frame or constraint rows, at scalar T).
template <class S, class T>
struct KineticMap {
  static constexpr int n = S::dof, k = S::multiplier_count, r = n + k;
  static constexpr int row_count() {
    if constexpr (S::form == Form::canonical)
      return S::frame_size;
    else
      return k;
  }
  const S& sys;
  const Arr<T, n>& q;
  T rows[row_count() > 0 ? row_count() : 1][n];

  TETHER_HD KineticMap(const S& system, const Arr<T, n>& at) : sys(system), q(at) {
    if constexpr (S::form == Form::canonical)
      sys.frame(q, rows);
    else if constexpr (k > 0)
      sys.constraint_rows(q, rows);
  }

  // f = H_y = A(q) y.
  TETHER_HD void apply(const Real (&y)[r], T (&f)[r]) const {
    if constexpr (S::form == Form::canonical) {
      for (int j = 0; j < n; ++j) f[j] = T(0);
      for (int i = 0; i < S::frame_size; ++i) {
        T u = y[0] * rows[i][0];
        for (int j = 1; j < n; ++j) u += y[j] * rows[i][j];
        for (int j = 0; j < n; ++j) f[j] += u * rows[i][j];
      }
    } else {
      Arr<T, n> w, v;
      for (int j = 0; j < n; ++j) {
        w[j] = T(y[j]);
        for (int i = 0; i < k; ++i) w[j] += y[n + i] * rows[i][j];
      }
      sys.inverse_mass_times(q, w, v);
      for (int j = 0; j < n; ++j) f[j] = v[j];
      for (int i = 0; i < k; ++i) {
        T c = rows[i][0] * v[0];
        for (int j = 1; j < n; ++j) c += rows[i][j] * v[j];
        f[n + i] = c;
      }
    }
  }

  // Column j of H_yy = A(q): A applied to the unit vector e_j.
  TETHER_HD void column(int j, T (&f)[r]) const {
    Real e[r];
    for (int i = 0; i < r; ++i) e[i] = i == j ? 1 : 0;
    apply(e, f);
  }
};

// grad H = (H_q, H_p, H_lambda): H_q by dual numbers, as many coordinates
// q_a per pass as PassDirections holds (core/lanes.hpp).
template <class S>
TETHER_HD ZVec<S> hamiltonian_gradient(const S& sys, const ZVec<S>& z) {
  constexpr int n = S::dof;
  using Directions = PassDirections<n>;
  using D = ad::Dual<Real, Directions>;
  constexpr int r = KineticMap<S, D>::r, per_pass = lane_count<Directions>;
  Real y[r];
  for (int i = 0; i < r; ++i) y[i] = z[n + i];
  ZVec<S> grad;
  for (int first = 0; first < n; first += per_pass) {
    Arr<D, n> q;
    for (int c = 0; c < n; ++c) q[c] = D(z[c], unit_lane<Directions>(c - first));
    D f[r];
    KineticMap<S, D>(sys, q).apply(y, f);
    Directions ga = sys.potential(q).d;
    for (int i = 0; i < r; ++i) ga += Real(0.5) * y[i] * f[i].d;
    for (int l = 0; l < per_pass && first + l < n; ++l) grad[first + l] = lane(ga, l);
    if (first == 0)
      for (int i = 0; i < r; ++i) grad[n + i] = f[i].v;
  }
  return grad;
}

// grad H and Hess H: H_yy from A's columns at q, the rest from one
// hyper-dual pass per pair a <= b of coordinates.
template <class S>
TETHER_HD void hamiltonian_derivatives(const S& sys, const ZVec<S>& z, ZVec<S>& grad, ZMat<S>& hess) {
  using D = ad::Dual<Real>;
  using HD = ad::Dual<D>;
  constexpr int n = S::dof, r = KineticMap<S, HD>::r;
  Real y[r];
  for (int i = 0; i < r; ++i) y[i] = z[n + i];
  {
    const Arr<Real, n> q = to_arr<S>(Vec<n>(z.template head<n>()));
    const KineticMap<S, Real> a(sys, q);
    for (int j = 0; j < r; ++j) {
      Real col[r];
      a.column(j, col);
      for (int i = 0; i < r; ++i) hess(n + i, n + j) = col[i];
    }
  }
  for (int a = 0; a < n; ++a)
    for (int b = a; b < n; ++b) {
      Arr<HD, n> q;
      for (int c = 0; c < n; ++c) q[c] = HD(D(z[c], c == b ? 1 : 0), D(c == a ? 1 : 0, 0));
      HD f[r];
      KineticMap<S, HD>(sys, q).apply(y, f);
      const HD v = sys.potential(q);
      Real hab = v.d.d;
      for (int i = 0; i < r; ++i) hab += Real(0.5) * y[i] * f[i].d.d;
      hess(a, b) = hess(b, a) = hab;
      if (a != b) continue;
      Real ga = v.d.v;
      for (int i = 0; i < r; ++i) {
        ga += Real(0.5) * y[i] * f[i].d.v;
        hess(n + i, a) = hess(a, n + i) = f[i].d.v;
      }
      grad[a] = ga;
      if (a == 0)
        for (int i = 0; i < r; ++i) grad[n + i] = f[i].v.v;
    }
}

// grad H, and Hess H only when asked for (a Newton iteration that reuses its
// factored Jacobian needs only the gradient, at a fraction of the cost).
template <class S>
TETHER_HD void hamiltonian_derivatives(const S& sys, const ZVec<S>& z, ZVec<S>& grad, ZMat<S>& hess, bool want_hessian) {
  if (want_hessian)
    hamiltonian_derivatives(sys, z, grad, hess);
  else
    grad = hamiltonian_gradient(sys, z);
}

// lambda~(q, p): the root of H_lambda(q, p, lambda) = 0, by Newton from
// lambda = 0 with H_lambda_lambda (for Form::lagrangian that is G M^-1 G^T
// and H_lambda is linear in lambda, so one update plus the polishing one).
template <class S>
TETHER_HD Status solve_multipliers(const S& sys, const Vec<S::dof>& q, const Vec<S::dof>& p, const NewtonOptions& opt,
                                   Vec<S::multiplier_count>& lambda, int& iterations) {
  constexpr int k = S::multiplier_count;
  lambda.setZero();
  if constexpr (k == 0) {
    return Status::ok;
  } else {
    // H is quadratic in y = (p, lambda): H_lambda_lambda is A(q)'s last k x k
    // block, made by the kinetic map at q alone (no Hessian by dual numbers,
    // no (2n+k)-square matrix to take it from).
    constexpr int n = S::dof;
    return polished_newton<k>(lambda, opt, iterations, [&](const Vec<k>& x, Vec<k>& r, Mat<k, k>* jac) {
      r = hamiltonian_gradient(sys, pack<S>(q, p, x)).template tail<k>();
      if (jac) {
        const Arr<Real, n> at = to_arr<S>(q);
        const KineticMap<S, Real> a(sys, at);
        for (int j = 0; j < k; ++j) {
          Real col[n + k];
          a.column(n + j, col);
          for (int i = 0; i < k; ++i) (*jac)(i, j) = col[n + i];
        }
      }
    });
  }
}

// The energy H(q, p, lambda~(q, p)) and the potential part V(q), for the
// observers (relative energy error is taken against |H - V| + |V|).
template <class S>
TETHER_HD Status energy_parts(const S& sys, const Vec<S::dof>& q, const Vec<S::dof>& p, Real& energy, Real& potential,
                              Vec<S::multiplier_count>& lambda) {
  NewtonOptions opt;
  int it = 0;
  const Status st = solve_multipliers(sys, q, p, opt, lambda, it);
  energy = hamiltonian_value(sys, pack<S>(q, p, lambda));
  potential = sys.potential(to_arr<S>(q));
  return st;
}

// h(q) and its Jacobian Dh(q) (l x n, by dual numbers).
template <class S>
TETHER_HD Vec<holonomic_count<S>> holonomic_values(const S& sys, const Vec<S::dof>& q) {
  constexpr int l = holonomic_count<S>;
  Real h[l];
  sys.holonomic_constraints(to_arr<S>(q), h);
  Vec<l> v;
  for (int i = 0; i < l; ++i) v[i] = h[i];
  return v;
}

template <class S>
TETHER_HD Mat<holonomic_count<S>, S::dof> holonomic_jacobian(const S& sys, const Vec<S::dof>& q) {
  constexpr int n = S::dof, l = holonomic_count<S>;
  using D = ad::Dual<Real>;
  Mat<l, n> jac;
  for (int j = 0; j < n; ++j) {
    Arr<D, n> qa;
    for (int c = 0; c < n; ++c) qa[c] = D(q[c], c == j ? 1 : 0);
    D h[l];
    sys.holonomic_constraints(qa, h);
    for (int i = 0; i < l; ++i) jac(i, j) = h[i].d;
  }
  return jac;
}

// max_i |g_i(q) . qdot| with qdot = H_p (MMVW13 eq. (1.8)): the original
// nonholonomic constraints, which Corollary 5 says hold at every step (and
// |Dh(q) qdot| when there are holonomic constraints). Zero for canonical
// systems, whose velocities lie in the distribution by construction.
template <class S>
TETHER_HD Real velocity_constraint_residual(const S& sys, const Vec<S::dof>& q, const Vec<S::dof>& p,
                                            const Vec<S::multiplier_count>& lambda) {
  constexpr int n = S::dof;
  if constexpr (S::form == Form::canonical) {
    return 0;
  } else {
    const ZVec<S> grad = hamiltonian_gradient(sys, pack<S>(q, p, lambda));
    Real rows[S::multiplier_count][n];
    sys.constraint_rows(to_arr<S>(q), rows);
    Real worst = 0;
    for (int i = 0; i < S::multiplier_count; ++i) {
      Real r = 0;
      for (int j = 0; j < n; ++j) r += rows[i][j] * grad[n + j];
      worst = fmax(worst, fabs(r));
    }
    // With holonomic constraints, also the secondary ones Dh(q) qdot = 0.
    if constexpr (holonomic_count<S> > 0)
      worst = fmax(worst, max_abs(Vec<holonomic_count<S>>(holonomic_jacobian(sys, q) * grad.template segment<n>(n))));
    return worst;
  }
}

}  // namespace tether

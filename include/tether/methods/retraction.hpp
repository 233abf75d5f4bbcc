#pragma once
// Symplectic integrators from the cotangent lift of an extended retraction
// map on a vector space Q (BM21, §3.2 and Prop. 5.1), for unconstrained
// systems (constraint_count = 0) with H = p.M^-1 p / 2 + V(q), and the
// implicit position solve they share with Newmark (newmark.hpp).
#include "tether/core/families.hpp"
#include <type_traits>
#include <utility>

#include "tether/core/polished_newton.hpp"
#include "tether/methods/projection.hpp"
#include "tether/methods/residual.hpp"

namespace tether {

// Whether a system provides Hess V (q) -> Mat<n, n>.
template <class S, class = void>
struct has_potential_hessian : std::false_type {};
template <class S>
struct has_potential_hessian<
    S, std::void_t<decltype(std::declval<const S&>().potential_hessian(std::declval<const Vec<S::dof>&>()))>>
    : std::true_type {};

// Hess V(q): the system's own when it has one, otherwise central differences
// of grad V (Newton then converges linearly with a ~1e-10 contraction, to the
// same root, since it stops on the equations, not on the Jacobian).
template <class S>
TETHER_HD Mat<S::dof, S::dof> potential_hessian_of(const S& sys, const Vec<S::dof>& q) {
  constexpr int n = S::dof;
  if constexpr (has_potential_hessian<S>::value) {
    return sys.potential_hessian(q);
  } else {
    Mat<n, n> k;
    for (int j = 0; j < n; ++j) {
      const Real d = Real(6e-6) * (1 + fabs(q[j]));
      Vec<n> a = q, b = q;
      a[j] += d;
      b[j] -= d;
      k.col(j) = (sys.potential_gradient(a) - sys.potential_gradient(b)) / (2 * d);
    }
    return Real(0.5) * (k + k.transpose());
  }
}

// Solves y + c M^-1 grad V(y) = b for y (y holds the initial guess): the one
// implicit equation of the theta-lifted methods and of Newmark. Newton with
// Jacobian I + c M^-1 Hess V (core/polished_newton.hpp); c = 0 is explicit.
template <class S>
TETHER_HD Status solve_gradient_shift(const S& sys, const Vec<S::dof>& b, Real c, const NewtonOptions& opt,
                                      Vec<S::dof>& y, int& iterations) {
  constexpr int n = S::dof;
  if (c == 0) {
    y = b;
    return all_finite(y) ? Status::ok : Status::non_finite;
  }
  return polished_newton<n>(y, opt, iterations, [&](const Vec<n>& x, Vec<n>& r, Mat<n, n>* jac) {
    r = x + c * sys.inverse_mass_times(sys.potential_gradient(x)) - b;
    if (jac) {
      const Mat<n, n> k = potential_hessian_of(sys, x);
      jac->setIdentity();
      for (int j = 0; j < n; ++j) jac->col(j) += c * sys.inverse_mass_times(Vec<n>(k.col(j)));
    }
  });
}

// Prop. 5.1 with the cotangent lift of the theta map, BM21 Example 2.5(3), eqs. (3.2), (5.1)-(5.2).
//
// Derivation. R_d(q, v) = (q - theta v, q + (1 - theta) v) has
//   R_d^-1(q0, q1) = (qb, q1 - q0),  qb = (1 - theta) q0 + theta q1,
//   D R_d = [[I, -theta I], [I, (1 - theta) I]],
// so (-p0, p1) D R_d = (p1 - p0, theta p0 + (1 - theta) p1), and by (3.2),
// with alpha_Q^-1 (q, v, p_q, p_v) = (q, p_v, v, p_q),
//   (R_d^T*)^-1 (q0, p0; q1, p1) = (qb, pb; q1 - q0, p1 - p0),
//   pb = theta p0 + (1 - theta) p1.
// (theta = 1/2 is (3.4); theta = 1 is Example 5.3's (q1, p0; q1 - q0, p1 - p0).)
// Eq. (5.2), h X_H(qb, pb) = (q1 - q0, p1 - p0), is then
//   q1 - q0 = h H_p(qb, pb) = h M^-1 pb,   p1 - p0 = -h H_q(qb, pb) = -h grad V(qb):
// theta = 1/2 the implicit midpoint rule (Example 5.2), theta = 1 Example 5.3
// (drift then kick, = symplectic Euler B), theta = 0 its adjoint (kick then
// drift, = symplectic Euler A). Symplectic for every theta (Prop. 5.1);
// order 2 at theta = 1/2 (symmetric), 1 otherwise.
//
// Fast solve: eliminating q1, p1 leaves n equations in qb,
//   qb + theta (1 - theta) h^2 M^-1 grad V(qb) = q0 + theta h M^-1 p0,
// then p1 = p0 - h grad V(qb), q1 = q0 + h M^-1 (p0 - (1 - theta) h grad V(qb)).
// Explicit for theta in {0, 1}.
struct ThetaRetraction {
  static constexpr const char* name = "theta_retraction";
  static constexpr int order = 2;  // at the default theta = 1/2; see effective_order()
  static constexpr bool two_step = false;
  static constexpr const char* citation = "BM21 Prop. 5.1 with Example 2.5(3), eqs. (3.2), (5.2); Examples 5.2, 5.3";
  static constexpr const char* description = "theta-method discretization map lifted to T*Q: symplectic, order 2 at theta = 1/2";
  static constexpr bool symmetric = true;
  static constexpr bool symplectic = true;
  template <class S>
  static constexpr bool applies_to = UnconstrainedSystem<S>;

  struct Parameters {
    Real theta = 0.5;

    template <class V>
    void describe(V& v) {
      v.real("theta", theta, Range::closed(0, 1), "where the force is taken: 0 and 1 are order 1, 1/2 is order 2");
    }
  };
  Parameters prm;

  TETHER_HD int effective_order() const { return prm.theta == Real(0.5) ? 2 : 1; }
  bool symmetric_with_parameters() const { return prm.theta == Real(0.5); }  // the adjoint is theta -> 1 - theta

  template <class S>
  TETHER_HD void start(const S&, PhaseState<S>&, Real) const {}

  template <class S>
  TETHER_HD Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations) const {
    static_assert(S::constraint_count == 0, "theta_retraction needs an unconstrained system (Q a vector space)");
    constexpr int n = S::dof;
    const Real th = prm.theta;
    const Vec<n> g0 = sys.potential_gradient(s.q);
    const Vec<n> b = s.q + th * h * sys.inverse_mass_times(s.p);
    // Predictor: the same equation with the force frozen at q0 (error O(h^3)).
    Vec<n> qb = b - th * (1 - th) * h * h * sys.inverse_mass_times(g0);
    const Status st = solve_gradient_shift(sys, b, th * (1 - th) * h * h, opt, qb, iterations);
    if (st != Status::ok) return st;
    const Vec<n> gb = sys.potential_gradient(qb);
    const Vec<n> p1 = s.p - h * gb;
    const Vec<n> q1 = s.q + h * sys.inverse_mass_times(Vec<n>(s.p - (1 - th) * h * gb));
    return accept_step(s, q1, p1);
  }

  // Unknowns (q1, p1) (ResidualLayout with k = 0): eq. (5.2) as derived above,
  // the first row in momentum units.
  template <class S>
  Eigen::VectorXd residual(const S& sys, const PhaseState<S>& s0, Real h, const Eigen::VectorXd& x) const {
    using L = ResidualLayout<S>;
    constexpr int n = S::dof;
    const Real th = prm.theta;
    const Vec<n> q1 = L::q1(x), p1 = L::p1(x);
    const Vec<n> qb = (1 - th) * s0.q + th * q1, pb = th * s0.p + (1 - th) * p1;
    Eigen::VectorXd r(L::size);
    r << sys.mass_times(Vec<n>(q1 - s0.q)) / h - pb, p1 - s0.p + h * sys.potential_gradient(qb);
    return r;
  }
};

}  // namespace tether

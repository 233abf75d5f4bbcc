#pragma once
#include "tether/core/families.hpp"
#include "tether/core/small_solve.hpp"
#include "tether/methods/projection.hpp"
#include "tether/methods/residual.hpp"

namespace tether {

// Discrete null-space RATTLE, BMS24 §4.2 eqs. (4.7)-(4.9) and Example 5.3
// (second form): RATTLE's equations (5.16)-(5.18) contracted with a basis
// T(q) of the tangent space (G(q) T(q) = 0), which removes every multiplier:
//   T(q0)^T [M (q1 - q0)/h + h/2 grad V(q0) - p0] = 0,   g(q1) = 0,
//   p1 = M T(q1) eta,  T(q1)^T [M (q1 - q0)/h - h/2 grad V(q1) - p1] = 0.
// For a rigid body T = (R hat(e_i), unit translations), the pairing of
// Example 5.3 (up to its factor 1/2); for a chain, the nodal basis of its
// system header. Same discrete solution as Rattle (range G^T = ker T^T on
// N), so order 2, symmetric, symplectic.
// Systems: those with tangent_dim, tangent_basis_times and
// tangent_basis_transpose_times (rigid_body, rigid_chain<B>).
struct NullSpaceRattle {
  static constexpr const char* name = "null_space_rattle";
  static constexpr int order = 2;
  static constexpr bool two_step = false;
  static constexpr const char* citation = "BMS24 §4.2 eqs. (4.7)-(4.9), Example 5.3";
  static constexpr const char* description = "discrete null-space RATTLE: momenta in a tangent basis of the rigid bodies";
  static constexpr bool symmetric = true;
  static constexpr bool symplectic = true;
  template <class S>
  static constexpr bool applies_to = RigidBodySystem<S>;
  using Parameters = NoParameters;
  Parameters prm;

  template <class S>
  TETHER_HD static void start(const S&, PhaseState<S>&, Real) {}

  template <class S>
  TETHER_HD static Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations) {
    constexpr int n = S::dof, k = S::constraint_count, d = S::tangent_dim;
    static_assert(d + k == n, "the tangent basis must complement the constraints");
    using V = Vec<n>;
    // Position stage: Newton on q1 for the n equations [T(q0)^T (M (q1 - q0)/h - target); g(q1)].
    // The first block is linear in q1 with the constant rows (M T(q0) e_j)^T / h;
    // the unconstrained RATTLE prediction satisfies it, and Newton keeps it.
    const V kicked = s.p - Real(0.5) * h * sys.potential_gradient(s.q);
    const Vec<d> target = sys.tangent_basis_transpose_times(s.q, kicked);
    Mat<n, n> jac;
    for (int j = 0; j < d; ++j) {
      Vec<d> e = Vec<d>::Zero();
      e[j] = 1;
      jac.row(j) = sys.mass_times(sys.tangent_basis_times(s.q, e)).transpose() / h;
    }
    V q1 = s.q + h * sys.inverse_mass_times(kicked);
    for (int it = 0;; ++it) {
      const Vec<k> g = sys.constraints(q1);
      if (!all_finite(g) || !all_finite(q1)) return Status::non_finite;
      if (max_abs(g) <= constraint_tolerance(sys, opt, q1)) break;
      if (it >= opt.max_iterations) return Status::newton_not_converged;
      Vec<n> r;
      r.template head<d>() = sys.tangent_basis_transpose_times(s.q, V(sys.mass_times(q1 - s.q) / h)) - target;
      r.template tail<k>() = g;
      for (int i = 0; i < k; ++i) {
        Vec<k> e = Vec<k>::Zero();
        e[i] = 1;
        jac.row(d + i) = sys.constraint_transpose_times(q1, e).transpose();
      }
      DenseLU<n> lu;
      Vec<n> dq;
      if (!lu.factor(jac) || !lu.solve(Vec<n>(-r), dq)) return Status::singular_matrix;
      q1 += dq;
      ++iterations;
    }
    // Momentum stage: p1 = M T(q1) eta with (T^T M T) eta = T^T w, a d x d
    // SPD solve (diag(I, m) blocks for a free body).
    const V w = sys.mass_times(q1 - s.q) / h - Real(0.5) * h * sys.potential_gradient(q1);
    DenseMatrix<d> reduced_mass;
    for (int j = 0; j < d; ++j) {
      Vec<d> e = Vec<d>::Zero();
      e[j] = 1;
      reduced_mass.a.col(j) = sys.tangent_basis_transpose_times(q1, sys.mass_times(sys.tangent_basis_times(q1, e)));
    }
    Vec<d> eta;
    if (!reduced_mass.solve(sys.tangent_basis_transpose_times(q1, w), eta)) return Status::singular_matrix;
    const V p1 = sys.mass_times(sys.tangent_basis_times(q1, eta));
    return accept_step(s, q1, p1);
  }

  // The multiplier-free equations above as they stand, in the standard
  // layout x = (q1, p1, lambda, lambda~): this method has no multipliers, so
  // their rows are lambda = 0 and lambda~ = 0. Momentum rows: T(q1)^T (p1 - w)
  // = 0 and the tangency G(q1) M^-1 p1 = 0 (equivalent to p1 in M range T(q1)).
  template <class S>
  static Eigen::VectorXd residual(const S& sys, const PhaseState<S>& s0, Real h, const Eigen::VectorXd& x) {
    using L = ResidualLayout<S>;
    const Vec<S::dof> q1 = L::q1(x), p1 = L::p1(x);
    const Vec<S::dof> v = sys.mass_times(q1 - s0.q) / h;
    const Vec<S::dof> start = v + h / 2 * sys.potential_gradient(s0.q) - s0.p;
    const Vec<S::dof> end = v - h / 2 * sys.potential_gradient(q1) - p1;
    Eigen::VectorXd r(L::size);
    r << sys.tangent_basis_transpose_times(s0.q, start), sys.constraints(q1),
        sys.tangent_basis_transpose_times(q1, end), sys.constraint_jacobian_times(q1, sys.inverse_mass_times(p1)),
        L::lambda(x), L::lambda_end(x);
    return r;
  }
};

}  // namespace tether

#pragma once
// Lie-group RATTLE and the constrained Lobatto IIIA-IIIB pair on
// G = (SO(3) x R^3)^B with a retraction tau (BMS24 §6.2), for the rigid-body
// systems of the holonomic family (rigid_body, rigid_chain<B>): anything with
// `bodies` and `joint_count` in the layout of rigid_common.hpp.
//
// The state stays the ambient one (R, x; P, p_x). A step left-trivializes it,
//   alpha_i = <P, R hat(e_i)>_F (so(3)* = R^3),  alpha_x = p_x,
// moves on the group, and writes back P1 = R1 hat(I^-1 alpha1) J, so every
// observer sees an ordinary holonomic state. R^T R = Id holds because R1 is a
// product of rotations: it is not a constraint here and nothing projects it.
// The joints phi (joint_count of them) are the constraints, with multipliers.
//
// Notation (per body, left-trivialized): xi = (omega, v) with omega the body
// angular velocity, I = diag(principal moments) on omega and m on v; the
// Lagrangian 1/2 omega.I omega + 1/2 m|v|^2 - V gives dL/dxi = I xi and
// L*_g(dL/dg) = -f, f_i = dV(g)[g e_i] (f = (<grad_R V, R hat(e_i)>_F, grad_x V)).
// Phi(g) w = D phi(g)[(R hat(omega), v)] is the left-trivialized joint
// Jacobian. On R^3 tau is addition, so the translations follow RATTLE.
//
// Every implicit stage has the form
//   dR_inv(h/2 omega)^T I omega = m + C nu   (per body, with v = (m + C nu)_x / mass),
//   phi(endpoint(omega)) = 0,
// solved as SHAKE solves RATTLE: Newton on the multipliers nu alone (joint_count
// unknowns, Jacobian by forward-mode dual numbers through the stage), each
// body's 3 x 3 equation for omega solved inside by its own Newton and
// differentiated by the implicit function theorem.
#include "tether/core/families.hpp"
#include <Eigen/Dense>

#include "tether/core/dual.hpp"
#include "tether/core/lanes.hpp"
#include "tether/core/so3.hpp"
#include "tether/methods/projection.hpp"
#include "tether/methods/residual.hpp"
#include "tether/systems/rigid_common.hpp"

namespace tether {
namespace lie {

using so3::M3;
using so3::V3;

template <class S>
using Alg = Vec<6 * S::bodies>;  // body b: (omega, v) or (alpha, alpha_x) at 6b

// The left trivialization of an ambient covector F at q: per body
// (<F_R, R hat(e_i)>_F, F_x). Adjoint of ambient_velocity.
template <class S>
TETHER_HD Alg<S> trivialize(const Vec<S::dof>& q, const Vec<S::dof>& f) {
  Alg<S> a;
  for (int b = 0; b < S::bodies; ++b) {
    a.template segment<3>(6 * b) = rigid::tangent_pairing(rigid::matrix_block(q, b), rigid::matrix_block(f, b));
    a.template segment<3>(6 * b + 3) = rigid::vector_block(f, b);
  }
  return a;
}

// The left-trivialized momenta alpha of an ambient state: per body
// (<P, R^-T hat(e_i)>_F, p_x). On SO(3) R^-T = R and this is the pairing
// <P, R hat(e_i)>_F; off it (R carries a roundoff defect R^T R - Id that
// random-walks at ~1e-14) it is the exact inverse of ambient_momentum, so a
// step reads back the alpha it wrote: with R^T instead, the defect would bias
// alpha by ~1e-14 relative every step and the conserved R alpha would drift
// linearly (2e-10 relative over 1e4 steps, measured).
template <class S>
TETHER_HD Alg<S> body_momenta(const Vec<S::dof>& q, const Vec<S::dof>& p) {
  Alg<S> a;
  for (int b = 0; b < S::bodies; ++b) {
    so3::M3<Real> r_inv;
    if (!so3::invert(so3::from_eigen(Mat<3, 3>(rigid::matrix_block(q, b))), r_inv)) {
      a.setConstant(Real(NAN));  // not a rotation at all: let the step report non_finite
      return a;
    }
    const Mat<3, 3> m = so3::to_eigen(r_inv).transpose();  // R^-T, so tangent_pairing forms R^-1 P
    a.template segment<3>(6 * b) = rigid::tangent_pairing(m, rigid::matrix_block(p, b));
    a.template segment<3>(6 * b + 3) = rigid::vector_block(p, b);
  }
  return a;
}

// (R hat(omega), v) per body: the ambient velocity of a left-trivialized one.
template <class S>
TETHER_HD Vec<S::dof> ambient_velocity(const Vec<S::dof>& q, const Alg<S>& w) {
  Vec<S::dof> v;
  for (int b = 0; b < S::bodies; ++b) {
    rigid::set_matrix_block(v, b, Mat<3, 3>(rigid::matrix_block(q, b) * rigid::hat(w.template segment<3>(6 * b))));
    rigid::set_vector_block(v, b, Vec3(w.template segment<3>(6 * b + 3)));
  }
  return v;
}

template <class S>
TETHER_HD Alg<S> inverse_inertia_times(const S& sys, const Alg<S>& a) {
  Alg<S> w;
  for (int b = 0; b < S::bodies; ++b) {
    w.template segment<3>(6 * b) = a.template segment<3>(6 * b).cwiseQuotient(sys.principal_inertia(b));
    w.template segment<3>(6 * b + 3) = a.template segment<3>(6 * b + 3) / sys.body_mass(b);
  }
  return w;
}

// The ambient momentum (P = R hat(I^-1 alpha) J, p_x = alpha_x) of alpha at q.
template <class S>
TETHER_HD Vec<S::dof> ambient_momentum(const S& sys, const Vec<S::dof>& q, const Alg<S>& alpha) {
  Vec<S::dof> p;
  for (int b = 0; b < S::bodies; ++b) {
    rigid::set_matrix_block(p, b,
                            rigid::momentum_from_body_momentum(
                                rigid::matrix_block(q, b), alpha.template segment<3>(6 * b), sys.principal_inertia(b)));
    rigid::set_vector_block(p, b, Vec3(alpha.template segment<3>(6 * b + 3)));
  }
  return p;
}

// Phi(q)^T as a 6B x k matrix (columns: trivialized D phi^T e_j).
template <class S>
TETHER_HD Mat<6 * S::bodies, S::joint_count> joint_transpose(const S& sys, const Vec<S::dof>& q) {
  constexpr int k = S::joint_count;
  Mat<6 * S::bodies, k> t;
  for (int j = 0; j < k; ++j) {
    Vec<k> e = Vec<k>::Zero();
    e[j] = 1;
    t.col(j) = trivialize<S>(q, sys.joint_transpose_times(q, e));
  }
  return t;
}

// (g, alpha) in Leg(TN): alpha <- alpha + Phi^T nu with Phi I^-1 alpha = 0,
// the I^-1-orthogonal projection onto the annihilator's complement (linear in nu).
template <class S>
TETHER_HD Status project_tangent(const S& sys, const Vec<S::dof>& q, Alg<S>& alpha) {
  constexpr int k = S::joint_count;
  if constexpr (k > 0) {
    const Mat<6 * S::bodies, k> phi_t = joint_transpose(sys, q);
    DenseMatrix<k> gram;
    for (int j = 0; j < k; ++j)
      gram.a.col(j) =
          sys.joint_jacobian_times(q, ambient_velocity<S>(q, inverse_inertia_times(sys, Alg<S>(phi_t.col(j)))));
    const Vec<k> rhs = -sys.joint_jacobian_times(q, ambient_velocity<S>(q, inverse_inertia_times(sys, alpha)));
    Vec<k> nu;
    if (!gram.solve(rhs, nu)) return Status::singular_matrix;
    alpha += phi_t * nu;
  }
  return all_finite(alpha) ? Status::ok : Status::non_finite;
}

// dR_inv(sigma omega)^T I omega: the body momentum that a step of angular
// velocity omega over sigma carries at its start (sigma > 0) or end (sigma < 0).
template <class Tau, class T>
TETHER_HD V3<T> body_momentum(const V3<T>& omega, Real sigma, const Vec3& inertia) {
  V3<T> x, l;
  for (int i = 0; i < 3; ++i) x[i] = sigma * omega[i], l[i] = inertia[i] * omega[i];
  return so3::mul_transpose(Tau::dR_inv_t(x), l);
}

// Newton for body_momentum(omega, sigma) = m, from omega as given (warm)
// or from I^-1 m; also returns the inverse Jacobian at the solution (for the
// implicit-function derivative).
template <class Tau>
TETHER_HD Status solve_body_velocity(const V3<Real>& m, Real sigma, const Vec3& inertia, const NewtonOptions& opt,
                                     bool warm, V3<Real>& omega, M3<Real>& jac_inv, int& iterations) {
  using Directions = PassDirections<3>;
  using D = ad::Dual<Real, Directions>;
  constexpr int per_pass = lane_count<Directions>;
  if (!warm)
    for (int i = 0; i < 3; ++i) omega[i] = m[i] / inertia[i];
  Real last = 0;
  for (int it = 0;; ++it) {
    if (it >= opt.max_iterations) return Status::newton_not_converged;
    M3<Real> jac;
    V3<Real> r;
    for (int first = 0; first < 3; first += per_pass) {
      V3<D> w;
      for (int i = 0; i < 3; ++i) w[i] = D(omega[i], unit_lane<Directions>(i - first));
      const V3<D> f = body_momentum<Tau>(w, sigma, inertia);
      for (int i = 0; i < 3; ++i) {
        for (int l = 0; l < per_pass && first + l < 3; ++l) jac(i, first + l) = lane(f[i].d, l);
        r[i] = f[i].v - m[i];
      }
    }
    if (!so3::invert(jac, jac_inv)) return Status::singular_matrix;
    const V3<Real> d = so3::mul(jac_inv, r);
    Real size = 0, scale = 0;
    for (int i = 0; i < 3; ++i) {
      omega[i] -= d[i];
      size = fmax(size, fabs(d[i]));
      scale = fmax(scale, fabs(omega[i]));
    }
    ++iterations;
    if (!is_finite(size) || !is_finite(scale)) return Status::non_finite;
    // Converged, or at the roundoff floor (a full Newton update that stopped shrinking).
    if (size <= opt.tolerance * scale || (it > 0 && size >= Real(0.5) * last && size <= Real(1e-8) * scale))
      return Status::ok;
    last = size;
  }
}

// Per body, the solved stage velocities and inverse Jacobians of one pass,
// reused by the derivative passes and as the next outer iteration's start.
struct BodyStage {
  V3<Real> omega, omega_bar;
  M3<Real> jac_inv, jac_inv_bar;
  bool solved = false;
};

// Solution of body_momentum(omega, sigma) = m as a function of m of scalar T:
// the solved value, plus one Newton correction from there, which for dual
// numbers carries d omega = jac^-1 dm (implicit function theorem).
template <class Tau, class T>
TETHER_HD V3<T> implicit_velocity(const V3<T>& m, const V3<Real>& omega, const M3<Real>& jac_inv, Real sigma,
                                  const Vec3& inertia) {
  const V3<Real> f = body_momentum<Tau>(omega, sigma, inertia);
  V3<T> r;
  for (int i = 0; i < 3; ++i) r[i] = m[i] - f[i];
  const V3<T> d = so3::mul(jac_inv, r);
  V3<T> w;
  for (int i = 0; i < 3; ++i) w[i] = omega[i] + d[i];
  return w;
}

// The endpoint of a stage from the (generalized) momenta m (6B entries of T):
//   composed = false: g1 = g0 tau(h/2 omega),                        x1 = x0 + h/2 v
//   composed = true:  g1 = g0 tau(h/2 omega) tau(h/2 omega_bar),     x1 = x0 + h v,
// where dR_inv(h/2 omega)^T I omega = m, dR_inv(h/2 omega_bar)^T I omega_bar
// = dR_inv(-h/2 omega)^T I omega (BMS24 eq. (6.10)), v = m_x / mass.
// With solve = true the body equations are solved by Newton (T = Real) and
// `stage` filled; otherwise `stage` is reused and only derivatives flow.
template <class Tau, bool composed, class S, class T>
TETHER_HD Status stage_endpoint(const S& sys, const Vec<S::dof>& q0, const T* m, Real h, const NewtonOptions& opt,
                                bool solve, BodyStage* stage, T* q1, int& iterations) {
  const Real half = Real(0.5) * h;
  for (int b = 0; b < S::bodies; ++b) {
    const Vec3 inertia = sys.principal_inertia(b);
    const Real mass = sys.body_mass(b);
    V3<T> mr;
    for (int i = 0; i < 3; ++i) mr[i] = m[6 * b + i];
    if (solve) {
      V3<Real> mp;
      for (int i = 0; i < 3; ++i) mp[i] = ad::primal(mr[i]);
      const Status st = solve_body_velocity<Tau>(mp, half, inertia, opt, stage[b].solved, stage[b].omega,
                                                 stage[b].jac_inv, iterations);
      if (st != Status::ok) return st;
    }
    const V3<T> omega = implicit_velocity<Tau>(mr, stage[b].omega, stage[b].jac_inv, half, inertia);
    V3<T> x;
    for (int i = 0; i < 3; ++i) x[i] = half * omega[i];
    M3<T> R = so3::mul(so3::from_eigen(Mat<3, 3>(rigid::matrix_block(q0, b))), Tau::map_t(x));
    if constexpr (composed) {
      const V3<T> mu = body_momentum<Tau>(omega, -half, inertia);
      if (solve) {
        V3<Real> mp;
        for (int i = 0; i < 3; ++i) mp[i] = ad::primal(mu[i]);
        const Status st = solve_body_velocity<Tau>(mp, half, inertia, opt, stage[b].solved, stage[b].omega_bar,
                                                   stage[b].jac_inv_bar, iterations);
        if (st != Status::ok) return st;
      }
      const V3<T> omega_bar = implicit_velocity<Tau>(mu, stage[b].omega_bar, stage[b].jac_inv_bar, half, inertia);
      for (int i = 0; i < 3; ++i) x[i] = half * omega_bar[i];
      R = so3::mul(R, Tau::map_t(x));
    }
    if (solve) stage[b].solved = true;
    const Real drift = composed ? h : half;
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 3; ++c) q1[12 * b + 3 * r + c] = R(r, c);
      q1[12 * b + 9 + r] = q0[12 * b + 9 + r] + drift * (m[6 * b + 3 + r] / mass);
    }
  }
  return Status::ok;
}

// One implicit stage: the multipliers nu with phi(endpoint(base + C nu)) = 0,
// by Newton on nu with the Jacobian D phi(q1) dq1/dnu (dual numbers through
// the stage). Returns the endpoint q1 and the last stage velocities
// (omega or omega_bar, and v) in `velocity`.
template <class Tau, bool composed, class S>
TETHER_HD Status solve_stage(const S& sys, const Vec<S::dof>& q0, const Alg<S>& base,
                             const Mat<6 * S::bodies, S::joint_count>& C, Real h, const NewtonOptions& opt,
                             Vec<S::dof>& q1, Alg<S>& velocity, int& iterations) {
  constexpr int n = S::dof, k = S::joint_count, m = 6 * S::bodies;
  BodyStage stage[S::bodies];
  Vec<k> nu = Vec<k>::Zero();
  for (int it = 0;; ++it) {
    Alg<S> mom = base;
    if constexpr (k > 0) mom += C * nu;
    Real mr[m], qr[n];
    for (int i = 0; i < m; ++i) mr[i] = mom[i];
    Status st = stage_endpoint<Tau, composed>(sys, q0, mr, h, opt, true, stage, qr, iterations);
    if (st != Status::ok) return st;
    for (int i = 0; i < n; ++i) q1[i] = qr[i];
    if (!all_finite(q1)) return Status::non_finite;
    bool done = true;
    if constexpr (k > 0) {
      const Vec<k> g = sys.joint_constraints(q1);
      if (!all_finite(g)) return Status::non_finite;
      done = max_abs(g) <= constraint_tolerance(sys, opt, q1);
      if (!done) {
        if (it >= opt.max_iterations) return Status::newton_not_converged;
        using Directions = PassDirections<k>;
        using D = ad::Dual<Real, Directions>;
        constexpr int per_pass = lane_count<Directions>;
        DenseMatrix<k> jac;
        for (int first = 0; first < k; first += per_pass) {
          D md[m], qd[n];
          for (int i = 0; i < m; ++i)
            md[i] = D(mom[i], lanes_of<Directions>(k - first, [&](int l) { return C(i, first + l); }));
          stage_endpoint<Tau, composed>(sys, q0, md, h, opt, false, stage, qd, iterations);
          for (int l = 0; l < per_pass && first + l < k; ++l) {
            Vec<n> dq;
            for (int i = 0; i < n; ++i) dq[i] = lane(qd[i].d, l);
            jac.a.col(first + l) = sys.joint_jacobian_times(q1, dq);
          }
        }
        Vec<k> step;
        if (!jac.solve(Vec<k>(-g), step)) return Status::singular_matrix;
        nu += step;
        ++iterations;
      }
    }
    if (done) {
      for (int b = 0; b < S::bodies; ++b) {
        const V3<Real> w = composed ? stage[b].omega_bar : stage[b].omega;
        for (int i = 0; i < 3; ++i) {
          velocity[6 * b + i] = w[i];
          velocity[6 * b + 3 + i] = mom[6 * b + 3 + i] / sys.body_mass(b);
        }
      }
      return Status::ok;
    }
  }
}

// The momentum a stage of velocities `velocity` (omega, v) carries at its
// end: dR_inv(-h/2 omega)^T I omega, m v.
template <class Tau, class S>
TETHER_HD Alg<S> end_momentum(const S& sys, const Alg<S>& velocity, Real h) {
  Alg<S> a;
  for (int b = 0; b < S::bodies; ++b) {
    const V3<Real> w = so3::from_eigen(Vec3(velocity.template segment<3>(6 * b)));
    a.template segment<3>(6 * b) = so3::to_eigen(body_momentum<Tau>(w, Real(-0.5) * h, sys.principal_inertia(b)));
    a.template segment<3>(6 * b + 3) = sys.body_mass(b) * velocity.template segment<3>(6 * b + 3);
  }
  return a;
}

// ---- host-only pieces of the reference residuals ---------------------------

// d/de tau(x + e e_i), by dual numbers through the map alone.
template <class Tau>
Mat<3, 3> map_derivative(const Vec3& x, int i) {
  using D = ad::Dual<Real>;
  V3<D> y;
  for (int j = 0; j < 3; ++j) y[j] = D(x[j], j == i ? 1 : 0);
  const M3<D> t = Tau::map_t(y);
  Mat<3, 3> d;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) d(r, c) = t(r, c).d;
  return d;
}

// The trivialized differentials from their definitions (BMS24 eqs.
// (A.5)-(A.6)): D tau(x)[e_i] = tau(x) hat(d^L_i) = hat(d^R_i) tau(x).
template <class Tau>
Mat<3, 3> left_differential(const Vec3& x) {
  const Mat<3, 3> t = Tau::map(x);
  Mat<3, 3> d;
  for (int i = 0; i < 3; ++i) d.col(i) = vee(Mat<3, 3>(t.transpose() * map_derivative<Tau>(x, i)));
  return d;
}
template <class Tau>
Mat<3, 3> right_differential(const Vec3& x) {
  const Mat<3, 3> t = Tau::map(x);
  Mat<3, 3> d;
  for (int i = 0; i < 3; ++i) d.col(i) = vee(Mat<3, 3>(map_derivative<Tau>(x, i) * t.transpose()));
  return d;
}

// g tau(s xi) (composed with tau(s xi2) when given), translations x + s (v [+ v2]).
template <class Tau, class S>
Vec<S::dof> retract(const Vec<S::dof>& q, const Alg<S>& xi, Real s) {
  Vec<S::dof> q1;
  for (int b = 0; b < S::bodies; ++b) {
    rigid::set_matrix_block(q1, b,
                            Mat<3, 3>(rigid::matrix_block(q, b) * Tau::map(Vec3(s * xi.template segment<3>(6 * b)))));
    rigid::set_vector_block(q1, b, Vec3(rigid::vector_block(q, b) + s * xi.template segment<3>(6 * b + 3)));
  }
  return q1;
}

template <class S>
Alg<S> inertia_times(const S& sys, const Alg<S>& w) {
  Alg<S> a;
  for (int b = 0; b < S::bodies; ++b) {
    a.template segment<3>(6 * b) = w.template segment<3>(6 * b).cwiseProduct(sys.principal_inertia(b));
    a.template segment<3>(6 * b + 3) = sys.body_mass(b) * w.template segment<3>(6 * b + 3);
  }
  return a;
}

// Apply, per body, the rotation block map(x_b) (3 x 3, of s xi_b) transposed
// or inverted-transposed to a: the dual maps (d tau)^* and (d tau^-1)^*.
template <class S, class F>
Alg<S> per_body(const Alg<S>& a, F&& block) {
  Alg<S> r = a;
  for (int b = 0; b < S::bodies; ++b) r.template segment<3>(6 * b) = block(b) * a.template segment<3>(6 * b);
  return r;
}

// ((T_{s xi} tau)^* o L*_{gs}) (D phi(gq)^T lambda) for the rotations (the
// covector D phi(gq)^T lambda at gq paired with gs D tau(s xi_b)[e_i]), and
// D phi^T lambda itself on the translations: BMS24 eqs. (6.6)-(6.7).
template <class Tau, class S>
Alg<S> pulled_back_constraint_force(const S& sys, const Vec<S::dof>& gs, const Vec<S::dof>& gq, const Alg<S>& xi,
                                    Real s, const Vec<S::joint_count>& lambda) {
  const Vec<S::dof> f = sys.joint_transpose_times(gq, lambda);
  Alg<S> a;
  for (int b = 0; b < S::bodies; ++b) {
    const Mat<3, 3> F = rigid::matrix_block(f, b), Rs = rigid::matrix_block(gs, b);
    for (int i = 0; i < 3; ++i)
      a[6 * b + i] =
          (F.cwiseProduct(Mat<3, 3>(Rs * map_derivative<Tau>(Vec3(s * xi.template segment<3>(6 * b)), i)))).sum();
    a.template segment<3>(6 * b + 3) = rigid::vector_block(f, b);
  }
  return a;
}

}  // namespace lie

// Lie-group RATTLE, BMS24 eqs. (6.8)-(6.10) on (SO(3) x R^3)^B:
//   g1 = g0 tau(h/2 xi) tau(h/2 xibar),
//   alpha0 = dR_inv(h/2 xi)^T I xi + h/2 f(g0) - h/2 Phi(g0)^T lambda,
//   alpha1 = dR_inv(-h/2 xibar)^T I xibar - h/2 f(g1) + h/2 Phi(g1)^T Lambda~,
//   dR_inv(-h/2 xi)^T I xi = dR_inv(h/2 xibar)^T I xibar   (d^L tau_x^-1 = d^R tau_{-x}^-1),
//   phi(g1) = 0,  Phi(g1) I^-1 alpha1 = 0.
// On the translations it is RATTLE. Order 2, symmetric, symplectic;
// equivariant, so the spatial angular momentum R alpha of a free body is kept.
template <class Tau>
struct LieRattle {
  static constexpr const char* name = "lie_rattle";
  static constexpr int order = 2;
  static constexpr bool two_step = false;
  static constexpr bool own_unknowns = true;
  static constexpr const char* citation = "BMS24 eqs. (6.8)-(6.10)";
  static constexpr const char* description = "Lie-group RATTLE on SO(3) with the retraction tau (exp or Cayley), translations by RATTLE";
  static constexpr bool symmetric = true;
  static constexpr bool symplectic = true;
  template <class S>
  static constexpr bool applies_to = RigidBodySystem<S>;
  static constexpr Variant variant{"retraction", Tau::name};
  using Parameters = NoParameters;
  Parameters prm;
  using Retraction = Tau;

  template <class S>
  TETHER_HD static void start(const S&, PhaseState<S>&, Real) {}

  template <class S>
  TETHER_HD static Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations) {
    using A = lie::Alg<S>;
    constexpr int k = S::joint_count;
    const A alpha0 = lie::body_momenta<S>(s.q, s.p);
    const A base = alpha0 - Real(0.5) * h * lie::trivialize<S>(s.q, sys.potential_gradient(s.q));
    Mat<6 * S::bodies, k> C;
    if constexpr (k > 0) C = Real(0.5) * h * lie::joint_transpose(sys, s.q);
    Vec<S::dof> q1;
    A xibar;
    Status st = lie::solve_stage<Tau, true>(sys, s.q, base, C, h, opt, q1, xibar, iterations);
    if (st != Status::ok) return st;
    A alpha1 =
        lie::end_momentum<Tau>(sys, xibar, h) - Real(0.5) * h * lie::trivialize<S>(q1, sys.potential_gradient(q1));
    if ((st = lie::project_tangent(sys, q1, alpha1)) != Status::ok) return st;
    const Vec<S::dof> p1 = lie::ambient_momentum(sys, q1, alpha1);
    return accept_step(s, q1, p1);
  }

  // Reference form: x = (xi, xibar, alpha1 (6B each), lambda, Lambda~ (k each)),
  // eqs. (6.8)-(6.10) as written, with the trivialized differentials taken
  // from derivatives of tau itself (not from dR_inv).
  template <class S>
  static Eigen::VectorXd reference_guess(const S& sys, const PhaseState<S>& s0, Real) {
    constexpr int m = 6 * S::bodies, k = S::joint_count;
    const lie::Alg<S> alpha0 = lie::body_momenta<S>(s0.q, s0.p), xi = lie::inverse_inertia_times(sys, alpha0);
    Eigen::VectorXd x = Eigen::VectorXd::Zero(3 * m + 2 * k);
    x << xi, xi, alpha0, Eigen::VectorXd::Zero(2 * k);
    return x;
  }

  template <class S>
  static Eigen::VectorXd residual(const S& sys, const PhaseState<S>& s0, Real h, const Eigen::VectorXd& x) {
    using A = lie::Alg<S>;
    constexpr int m = 6 * S::bodies, k = S::joint_count;
    const A xi = x.segment<m>(0), xibar = x.segment<m>(m), alpha1 = x.segment<m>(2 * m);
    const Vec<k> lambda = x.segment<k>(3 * m), lambda_end = x.segment<k>(3 * m + k);
    const Vec<S::dof> q1 = lie::retract<Tau, S>(lie::retract<Tau, S>(s0.q, xi, h / 2), xibar, h / 2);
    const A alpha0 = lie::body_momenta<S>(s0.q, s0.p);
    const A f0 = lie::trivialize<S>(s0.q, sys.potential_gradient(s0.q));
    const A f1 = lie::trivialize<S>(q1, sys.potential_gradient(q1));
    const A c0 = lie::trivialize<S>(s0.q, sys.joint_transpose_times(s0.q, lambda));
    const A c1 = lie::trivialize<S>(q1, sys.joint_transpose_times(q1, lambda_end));
    const A Ixi = lie::inertia_times(sys, xi), Ixibar = lie::inertia_times(sys, xibar);
    auto dR_inv_T = [&](const A& w, Real s) {
      return [&w, s](int b) -> Mat<3, 3> {
        return lie::right_differential<Tau>(Vec3(s * w.template segment<3>(6 * b))).inverse().transpose();
      };
    };
    auto dL_inv_T = [&](const A& w, Real s) {
      return [&w, s](int b) -> Mat<3, 3> {
        return lie::left_differential<Tau>(Vec3(s * w.template segment<3>(6 * b))).inverse().transpose();
      };
    };
    Eigen::VectorXd r(3 * m + 2 * k);
    r.segment<m>(0) = lie::per_body<S>(Ixi, dR_inv_T(xi, h / 2)) + h / 2 * f0 - h / 2 * c0 - alpha0;  // (6.8)
    r.segment<m>(m) =
        lie::per_body<S>(Ixi, dL_inv_T(xi, h / 2)) - lie::per_body<S>(Ixibar, dL_inv_T(xibar, -h / 2));  // (6.10)
    r.segment<m>(2 * m) =
        alpha1 - (lie::per_body<S>(Ixibar, dR_inv_T(xibar, -h / 2)) - h / 2 * f1 + h / 2 * c1);  // (6.9)
    if constexpr (k > 0) {
      r.segment<k>(3 * m) = sys.joint_constraints(q1);
      r.segment<k>(3 * m + k) =
          sys.joint_jacobian_times(q1, lie::ambient_velocity<S>(q1, lie::inverse_inertia_times(sys, alpha1)));
    }
    return r;
  }

  template <class S>
  static void reference_finish(const S& sys, const PhaseState<S>& s0, Real h, const Eigen::VectorXd& x,
                               PhaseState<S>& s1) {
    using A = lie::Alg<S>;
    constexpr int m = 6 * S::bodies;
    const A xi = x.segment<m>(0), xibar = x.segment<m>(m), alpha1 = x.segment<m>(2 * m);
    s1.q_prev = s0.q;
    s1.q = lie::retract<Tau, S>(lie::retract<Tau, S>(s0.q, xi, h / 2), xibar, h / 2);
    s1.p = lie::ambient_momentum(sys, s1.q, alpha1);
  }
};

// Constrained Lobatto IIIA-IIIB pair on a Lie group, BMS24 eqs. (6.4)-(6.7):
// the Lie symplectic Euler A half step then the B half step, with the
// midpoint (g_1/2, alpha_1/2) in Leg(TN) as well:
//   g_1/2 = g0 tau(h/2 xi),  g1 = g_1/2 tau(h/2 xibar),
//   alpha0 = dR_inv(h/2 xi)^T I xi + h/2 f(g0) - h/2 Phi(g0)^T lambda,                       (6.4)
//   alpha1 = dR_inv(-h/2 xibar)^T I xibar - h/2 f(g1) + h/2 Phi(g1)^T Lambda~,               (6.5)
//   alpha_1/2 = dR_inv(-h/2 xi)^T I xi + h/2 Phi(g_1/2)^T lambda~,                           (6.6)
//   alpha_1/2 = dR_inv(h/2 xibar)^T I xibar - h/2 Phi(g_1/2)^T Lambda,                       (6.7)
//   phi = 0 and Phi I^-1 alpha = 0 at g_1/2 and g1.
// ((6.6)-(6.7) as printed carry (d^L tau)^* on both sides; the forms above
// follow on applying (d^L tau^-1)^*.) Order 2, symmetric, symplectic.
template <class Tau>
struct LieLobatto {
  static constexpr const char* name = "lie_lobatto";
  static constexpr int order = 2;
  static constexpr bool two_step = false;
  static constexpr bool own_unknowns = true;
  static constexpr const char* citation = "BMS24 eqs. (6.4)-(6.7)";
  static constexpr const char* description = "Lie-group Lobatto IIIA-IIIB pair on SO(3) with the retraction tau (exp or Cayley)";
  static constexpr bool symmetric = true;
  static constexpr bool symplectic = true;
  template <class S>
  static constexpr bool applies_to = RigidBodySystem<S>;
  static constexpr Variant variant{"retraction", Tau::name};
  using Parameters = NoParameters;
  Parameters prm;
  using Retraction = Tau;

  template <class S>
  TETHER_HD static void start(const S&, PhaseState<S>&, Real) {}

  template <class S>
  TETHER_HD static Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations) {
    using A = lie::Alg<S>;
    constexpr int k = S::joint_count;
    const Real half = Real(0.5) * h;
    // Symplectic Euler A over h/2: xi and lambda from (6.4) with phi(g_1/2) = 0.
    const A alpha0 = lie::body_momenta<S>(s.q, s.p);
    Mat<6 * S::bodies, k> C;
    if constexpr (k > 0) C = half * lie::joint_transpose(sys, s.q);
    Vec<S::dof> q_half;
    A xi;
    Status st =
        lie::solve_stage<Tau, false>(sys, s.q, A(alpha0 - half * lie::trivialize<S>(s.q, sys.potential_gradient(s.q))),
                                     C, h, opt, q_half, xi, iterations);
    if (st != Status::ok) return st;
    A alpha_half = lie::end_momentum<Tau>(sys, xi, h);  // (6.6), lambda~ by the projection
    if ((st = lie::project_tangent(sys, q_half, alpha_half)) != Status::ok) return st;
    // Symplectic Euler B over h/2: xibar and Lambda from (6.7) with phi(g1) = 0.
    if constexpr (k > 0) C = half * lie::joint_transpose(sys, q_half);
    Vec<S::dof> q1;
    A xibar;
    if ((st = lie::solve_stage<Tau, false>(sys, q_half, alpha_half, C, h, opt, q1, xibar, iterations)) != Status::ok)
      return st;
    A alpha1 = lie::end_momentum<Tau>(sys, xibar, h) - half * lie::trivialize<S>(q1, sys.potential_gradient(q1));
    if ((st = lie::project_tangent(sys, q1, alpha1)) != Status::ok) return st;  // (6.5), Lambda~
    const Vec<S::dof> p1 = lie::ambient_momentum(sys, q1, alpha1);
    return accept_step(s, q1, p1);
  }

  // Reference form: x = (xi, xibar, alpha_1/2, alpha1 (6B each), lambda,
  // lambda~, Lambda, Lambda~ (k each)), eqs. (6.4)-(6.7) as printed, with
  // (d^L tau)^* and (T tau)^* o L* from derivatives of tau itself.
  template <class S>
  static Eigen::VectorXd reference_guess(const S& sys, const PhaseState<S>& s0, Real) {
    constexpr int m = 6 * S::bodies, k = S::joint_count;
    const lie::Alg<S> alpha0 = lie::body_momenta<S>(s0.q, s0.p), xi = lie::inverse_inertia_times(sys, alpha0);
    Eigen::VectorXd x(4 * m + 4 * k);
    x << xi, xi, alpha0, alpha0, Eigen::VectorXd::Zero(4 * k);
    return x;
  }

  template <class S>
  static Eigen::VectorXd residual(const S& sys, const PhaseState<S>& s0, Real h, const Eigen::VectorXd& x) {
    using A = lie::Alg<S>;
    constexpr int m = 6 * S::bodies, k = S::joint_count;
    const A xi = x.segment<m>(0), xibar = x.segment<m>(m), alpha_half = x.segment<m>(2 * m),
            alpha1 = x.segment<m>(3 * m);
    const Vec<k> lambda = x.segment<k>(4 * m), lambda_t = x.segment<k>(4 * m + k), Lambda = x.segment<k>(4 * m + 2 * k),
                 Lambda_t = x.segment<k>(4 * m + 3 * k);
    const Vec<S::dof> q_half = lie::retract<Tau, S>(s0.q, xi, h / 2);
    const Vec<S::dof> q1 = lie::retract<Tau, S>(q_half, xibar, h / 2);
    const A alpha0 = lie::body_momenta<S>(s0.q, s0.p);
    const A f0 = lie::trivialize<S>(s0.q, sys.potential_gradient(s0.q));
    const A f1 = lie::trivialize<S>(q1, sys.potential_gradient(q1));
    const A c0 = lie::trivialize<S>(s0.q, sys.joint_transpose_times(s0.q, lambda));
    const A c1 = lie::trivialize<S>(q1, sys.joint_transpose_times(q1, Lambda_t));
    const A Ixi = lie::inertia_times(sys, xi), Ixibar = lie::inertia_times(sys, xibar);
    auto dR_inv_T = [&](const A& w, Real s) {
      return [&w, s](int b) -> Mat<3, 3> {
        return lie::right_differential<Tau>(Vec3(s * w.template segment<3>(6 * b))).inverse().transpose();
      };
    };
    auto dL_T = [&](const A& w, Real s) {
      return [&w, s](int b) -> Mat<3, 3> {
        return lie::left_differential<Tau>(Vec3(s * w.template segment<3>(6 * b))).transpose();
      };
    };
    // ((T tau)^* o L*_{g}) (D phi(g_1/2)^T .): paired with g0 D tau(h/2 xi) in (6.6), g1 D tau(-h/2 xibar) in (6.7).
    const A w_a = lie::pulled_back_constraint_force<Tau, S>(sys, s0.q, q_half, xi, h / 2, lambda_t);
    const A w_b = lie::pulled_back_constraint_force<Tau, S>(sys, q1, q_half, xibar, -h / 2, Lambda);
    Eigen::VectorXd r(4 * m + 4 * k);
    r.segment<m>(0) = lie::per_body<S>(Ixi, dR_inv_T(xi, h / 2)) + h / 2 * f0 - h / 2 * c0 - alpha0;           // (6.4)
    r.segment<m>(m) = alpha1 - (lie::per_body<S>(Ixibar, dR_inv_T(xibar, -h / 2)) - h / 2 * f1 + h / 2 * c1);  // (6.5)
    r.segment<m>(2 * m) = lie::per_body<S>(alpha_half, dL_T(xi, h / 2)) - Ixi - h / 2 * w_a;                   // (6.6)
    r.segment<m>(3 * m) = lie::per_body<S>(alpha_half, dL_T(xibar, -h / 2)) - Ixibar + h / 2 * w_b;            // (6.7)
    if constexpr (k > 0) {
      r.segment<k>(4 * m) = sys.joint_constraints(q_half);
      r.segment<k>(4 * m + k) = sys.joint_jacobian_times(
          q_half, lie::ambient_velocity<S>(q_half, lie::inverse_inertia_times(sys, alpha_half)));
      r.segment<k>(4 * m + 2 * k) = sys.joint_constraints(q1);
      r.segment<k>(4 * m + 3 * k) =
          sys.joint_jacobian_times(q1, lie::ambient_velocity<S>(q1, lie::inverse_inertia_times(sys, alpha1)));
    }
    return r;
  }

  template <class S>
  static void reference_finish(const S& sys, const PhaseState<S>& s0, Real h, const Eigen::VectorXd& x,
                               PhaseState<S>& s1) {
    using A = lie::Alg<S>;
    constexpr int m = 6 * S::bodies;
    const A xi = x.segment<m>(0), xibar = x.segment<m>(m), alpha1 = x.segment<m>(3 * m);
    s1.q_prev = s0.q;
    s1.q = lie::retract<Tau, S>(lie::retract<Tau, S>(s0.q, xi, h / 2), xibar, h / 2);
    s1.p = lie::ambient_momentum(sys, s1.q, alpha1);
  }
};

}  // namespace tether

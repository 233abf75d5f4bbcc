// The variational integrator over a Runge-Kutta standard layer (PCSZ09) on
// the magnetic sphere: derivatives, order, symplecticity on T*N, discrete
// Noether momentum, constraints, solver agreement, symmetry, residual.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include <Eigen/Dense>

#include "tether/methods/variational.hpp"
#include "tether/systems/magnetic_sphere.hpp"
#include "order_fit.hpp"

namespace tether {
namespace {

using Sys = MagneticSphere;
using State = PhaseState<Sys>;

Sys make_system() {
  Sys s;
  s.prm.mass = 1.0;
  s.prm.kappa = 0.5;
  s.prm.field = 1.5;
  s.prm.gravity = 2.0;
  return s;
}

// A state on T*N away from the symmetry axis and from the equator.
State initial_state(const Sys& sys) {
  State s;
  s.q = Vec<3>(0.3, 0.5, -0.81).normalized();
  Vec<3> v(0.7, -0.4, 0.9);
  v -= s.q * s.q.dot(v);
  s.p = sys.momentum(s.q, v);
  s.q_prev = s.q;
  return s;
}

// Independent Euler-Lagrange acceleration for m(q) = mu(q) I, written out by
// hand from L = 1/2 mu |v|^2 + (b/2)(e_z x q).v - m g z on |q| = 1:
//   mu A = -(grad mu . v) v + 1/2 grad mu |v|^2 - b e_z x v - grad V + lambda q,  q.A = -|v|^2.
Vec<3> acceleration(const Sys& sys, const Vec<3>& q, const Vec<3>& v) {
  const Real mu = sys.prm.mass * (1 + sys.prm.kappa * q[2] * q[2]);
  const Vec<3> grad_mu(0, 0, 2 * sys.prm.mass * sys.prm.kappa * q[2]);
  const Vec<3> ez_cross_v(-v[1], v[0], 0);
  const Vec<3> F = -grad_mu.dot(v) * v + 0.5 * grad_mu * v.squaredNorm() - sys.prm.field * ez_cross_v -
                   Vec<3>(0, 0, sys.prm.mass * sys.prm.gravity);
  const Real lambda = (-mu * v.squaredNorm() - q.dot(F)) / q.squaredNorm();
  return (F + lambda * q) / mu;
}

// Reference solution: classical RK4 on (q, v) with a fine step, then p = mu v + a.
State reference_flow(const Sys& sys, const State& s0, Real T, int steps) {
  Vec<3> q = s0.q, v = sys.velocity(s0.q, s0.p);
  const Real h = T / steps;
  for (int i = 0; i < steps; ++i) {
    const Vec<3> k1q = v, k1v = acceleration(sys, q, v);
    const Vec<3> k2q = v + h / 2 * k1v, k2v = acceleration(sys, q + h / 2 * k1q, v + h / 2 * k1v);
    const Vec<3> k3q = v + h / 2 * k2v, k3v = acceleration(sys, q + h / 2 * k2q, v + h / 2 * k2v);
    const Vec<3> k4q = v + h * k3v, k4v = acceleration(sys, q + h * k3q, v + h * k3v);
    q += h / 6 * (k1q + 2 * k2q + 2 * k3q + k4q);
    v += h / 6 * (k1v + 2 * k2v + 2 * k3v + k4v);
  }
  State s;
  s.q = q;
  s.p = sys.momentum(q, v);
  return s;
}

Status advance(const Variational& m, const Sys& sys, State& s, Real h, int steps, int& iterations,
               const NewtonOptions& opt = NewtonOptions{}) {
  for (int i = 0; i < steps; ++i) {
    const Status st = m.step(sys, s, h, opt, iterations);
    if (st != Status::ok) return st;
  }
  return Status::ok;
}

Real state_distance(const State& a, const State& b) {
  return std::max((a.q - b.q).cwiseAbs().maxCoeff(), (a.p - b.p).cwiseAbs().maxCoeff());
}

// ---------------------------------------------------------------- system

TEST(MagneticSphere, DerivativesMatchFiniteDifferences) {
  const Sys sys = make_system();
  const Vec<3> q(0.4, -0.7, 0.55);
  const Real e = 1e-6;
  for (int k = 0; k < 3; ++k) {
    const Vec<3> dq = e * Vec<3>::Unit(k);
    const Mat<3, 3> dm = (sys.mass_matrix(Vec<3>(q + dq)) - sys.mass_matrix(Vec<3>(q - dq))) / (2 * e);
    EXPECT_LT((dm - sys.mass_matrix_derivative(q, k)).cwiseAbs().maxCoeff(), 1e-9) << k;
    const Vec<3> da = (sys.magnetic_potential(Vec<3>(q + dq)) - sys.magnetic_potential(Vec<3>(q - dq))) / (2 * e);
    EXPECT_LT((da - sys.magnetic_potential_jacobian(q).col(k)).cwiseAbs().maxCoeff(), 1e-9) << k;
    const Real dv = (sys.potential(Vec<3>(q + dq)) - sys.potential(Vec<3>(q - dq))) / (2 * e);
    EXPECT_NEAR(dv, sys.potential_gradient(q)[k], 1e-8) << k;
    const Real dg = (sys.constraints(Vec<3>(q + dq))[0] - sys.constraints(Vec<3>(q - dq))[0]) / (2 * e);
    EXPECT_NEAR(dg, sys.constraint_jacobian(q)(0, k), 1e-9) << k;
    const Vec<3> dG = (sys.constraint_jacobian(Vec<3>(q + dq)) - sys.constraint_jacobian(Vec<3>(q - dq))).transpose() /
                      (2 * e);
    EXPECT_LT((dG - sys.constraint_hessian(q, 0).col(k)).cwiseAbs().maxCoeff(), 1e-9) << k;
  }
  // The Legendre transform and the energy: p = dL/dv, E = v.dL/dv - L.
  const Vec<3> v(0.3, 0.2, -0.1);
  Vec<3> dldv;
  for (int k = 0; k < 3; ++k)
    dldv[k] = (sys.lagrangian_value(q, Vec<3>(v + e * Vec<3>::Unit(k))) -
               sys.lagrangian_value(q, Vec<3>(v - e * Vec<3>::Unit(k)))) / (2 * e);
  EXPECT_LT((dldv - sys.momentum(q, v)).cwiseAbs().maxCoeff(), 1e-9);
  EXPECT_NEAR(sys.energy(q, sys.momentum(q, v)), v.dot(dldv) - sys.lagrangian_value(q, v), 1e-9);
}

// The standard layer's vector field (eq. (4.2), generic code over the
// system's kernels) against the hand-written sphere formula.
TEST(MagneticSphere, EulerLagrangeFieldMatchesHandFormula) {
  const Sys sys = make_system();
  const State s = initial_state(sys);
  const Vec<3> v = sys.velocity(s.q, s.p);
  Real y[7], f[7];
  for (int i = 0; i < 3; ++i) { y[i] = s.q[i]; y[3 + i] = v[i]; }
  y[6] = 0;
  ASSERT_TRUE(variational_detail::euler_lagrange_field(sys, y, f));
  const Vec<3> A = acceleration(sys, s.q, v);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(f[i], v[i], 1e-15);
    EXPECT_NEAR(f[3 + i], A[i], 1e-13);
  }
  EXPECT_NEAR(f[6], sys.lagrangian_value(s.q, v), 1e-14);
}

// The dual-number derivatives of the segment (ends and discrete Lagrangian)
// against central differences of its values.
TEST(Variational, SegmentDerivativesMatchFiniteDifferences) {
  const Sys sys = make_system();
  const State s = initial_state(sys);
  const Vec<3> v = sys.velocity(s.q, s.p);
  const Variational m{};
  const Real h = 0.1, e = 1e-6;
  VariationalSegment<3> seg, sp, sm;
  ASSERT_TRUE(m.segment(sys, s.q, v, h, seg));
  for (int j = 0; j < 6; ++j) {
    Vec<3> qp = s.q, qm = s.q, vp = v, vm = v;
    if (j < 3) { qp[j] += e; qm[j] -= e; } else { vp[j - 3] += e; vm[j - 3] -= e; }
    ASSERT_TRUE(m.segment(sys, qp, vp, h, sp, false));
    ASSERT_TRUE(m.segment(sys, qm, vm, h, sm, false));
    const Vec<3> dminus = (sp.minus - sm.minus) / (2 * e), dplus = (sp.plus - sm.plus) / (2 * e);
    const Real daction = (sp.action - sm.action) / (2 * e);
    const Vec<3> cm = j < 3 ? Vec<3>(seg.minus_q.col(j)) : Vec<3>(seg.minus_v.col(j - 3));
    const Vec<3> cp = j < 3 ? Vec<3>(seg.plus_q.col(j)) : Vec<3>(seg.plus_v.col(j - 3));
    const Real ca = j < 3 ? seg.action_q[j] : seg.action_v[j - 3];
    EXPECT_LT((dminus - cm).cwiseAbs().maxCoeff(), 1e-8) << j;
    EXPECT_LT((dplus - cp).cwiseAbs().maxCoeff(), 1e-8) << j;
    EXPECT_NEAR(daction, ca, 1e-8) << j;
  }
  // The discrete Lagrangian approximates the action h L to O(h^2) at least.
  EXPECT_NEAR(seg.action, h * sys.lagrangian_value(s.q, v), 0.05 * h * h);
}

TEST(Variational, ParametersValidateAndReportTheirOrder) {
  EXPECT_EQ(Variational::Parameters::classical_rk4().layer_order(), 4);
  EXPECT_EQ(Variational::Parameters::heun().layer_order(), 2);
  EXPECT_EQ(Variational::Parameters::kutta3().layer_order(), 3);
  EXPECT_EQ(Variational::Parameters().check(), nullptr);
  Variational::Parameters bad;
  bad.b[0] = 0.5;
  EXPECT_NE(bad.check(), nullptr);
  bad = Variational::Parameters();
  bad.a[1][1] = 0.1;
  EXPECT_NE(bad.check(), nullptr);
  bad = Variational::Parameters();
  bad.alpha_plus = 1.5;
  EXPECT_NE(bad.check(), nullptr);
}

// ---------------------------------------------------------------- order

struct OrderCase {
  const char* label;
  Variational::Parameters prm;
  Real alpha_plus;
  Real expected;
};

TEST(Variational, ObservedOrderEqualsTheStandardLayers) {
  const Sys sys = make_system();
  const State s0 = initial_state(sys);
  const Real T = 1.0;
  const State exact = reference_flow(sys, s0, T, 20000);
  const OrderCase cases[] = {
      {"rk4, self-adjoint bias", Variational::Parameters::classical_rk4(), 0.5, 4},
      {"rk4, alpha+ = 1", Variational::Parameters::classical_rk4(), 1.0, 4},
      {"heun, self-adjoint bias", Variational::Parameters::heun(), 0.5, 2},
      {"heun, alpha+ = 1", Variational::Parameters::heun(), 1.0, 2},
      {"kutta3, alpha+ = 1", Variational::Parameters::kutta3(), 1.0, 3},
      {"kutta3, alpha+ = 0", Variational::Parameters::kutta3(), 0.0, 3},
  };
  for (const OrderCase& c : cases) {
    Variational m{};
    m.prm = c.prm;
    m.prm.alpha_plus = c.alpha_plus;
    std::vector<Real> hs, errors;
    for (int steps : {10, 20, 40, 80}) {
      State s = s0;
      int it = 0;
      ASSERT_EQ(advance(m, sys, s, T / steps, steps, it), Status::ok) << c.label;
      hs.push_back(T / steps);
      errors.push_back(state_distance(s, exact));
    }
    const Real order = test::fitted_order(hs, errors);
    std::printf("  %-24s errors %.2e %.2e %.2e %.2e  order %.3f\n", c.label, errors[0], errors[1], errors[2],
                errors[3], order);
    EXPECT_NEAR(order, c.expected, 0.25) << c.label;
  }
}

// ---------------------------------------------------------------- structure

// omega((dq, dp), (eq, ep)) = dq.ep - dp.eq; on the tangent space of
// T*N = {g = 0, G v = 0} it is the canonical form of T*N.
Real omega(const Vec<6>& a, const Vec<6>& b) {
  return a.head<3>().dot(b.tail<3>()) - a.tail<3>().dot(b.head<3>());
}

State projected(const Sys& sys, const State& s, const Vec<6>& d) {
  State r = s;
  r.q += d.head<3>();
  r.p += d.tail<3>();
  EXPECT_EQ(sys.project_to_phase_space(r.q, r.p), Status::ok);
  return r;
}

Vec<6> as_vec(const State& s) {
  Vec<6> r;
  r << s.q, s.p;
  return r;
}

// Largest |omega(D Phi a, D Phi b) - omega(a, b)| over pairs of tangent
// vectors of T*N, with D Phi from central differences of projected
// perturbations (the projection's O(eps^2) error cancels).
template <class Map>
Real symplecticity_defect(const Sys& sys, const State& s0, const Map& map, Real& scale) {
  const Real eps = 1e-5;
  const Vec<6> dirs[4] = {(Vec<6>() << 1, 0, 0, 0.3, -0.2, 0).finished(),
                          (Vec<6>() << 0, 1, 0.2, 0, 0.5, -0.1).finished(),
                          (Vec<6>() << 0.1, -0.3, 0, 1, 0, 0.4).finished(),
                          (Vec<6>() << 0, 0.2, 0.1, -0.2, 1, 1).finished()};
  Vec<6> in[4], out[4];
  for (int i = 0; i < 4; ++i) {
    const State a = projected(sys, s0, eps * dirs[i]), b = projected(sys, s0, -eps * dirs[i]);
    in[i] = (as_vec(a) - as_vec(b)) / (2 * eps);
    out[i] = (as_vec(map(a)) - as_vec(map(b))) / (2 * eps);
  }
  Real defect = 0;
  scale = 0;
  for (int i = 0; i < 4; ++i)
    for (int j = i + 1; j < 4; ++j) {
      defect = std::max(defect, std::abs(omega(out[i], out[j]) - omega(in[i], in[j])));
      scale = std::max(scale, std::abs(omega(in[i], in[j])));
    }
  return defect;
}

TEST(Variational, SymplecticOnTheConstraintManifold) {
  const Sys sys = make_system();
  const State s0 = initial_state(sys);
  const Real h = 0.1;
  for (Real alpha_plus : {0.5, 1.0}) {
    Variational m{};
    m.prm.alpha_plus = alpha_plus;
    auto map = [&](State s) {
      int it = 0;
      EXPECT_EQ(advance(m, sys, s, h, 3, it), Status::ok);
      return s;
    };
    Real scale;
    const Real defect = symplecticity_defect(sys, s0, map, scale);
    std::printf("  alpha+ = %.1f: symplecticity defect %.2e (form scale %.2e)\n", alpha_plus, defect, scale);
    EXPECT_GT(scale, 0.1);
    EXPECT_LT(defect, 1e-8);
  }
  // Control: the standard layer alone (RK4 on (q, v), mapped to (q, p) and
  // projected) is not symplectic, and this test sees it.
  auto rk4 = [&](State s) {
    State r = reference_flow(sys, s, 0.3, 3);
    EXPECT_EQ(sys.project_to_phase_space(r.q, r.p), Status::ok);
    return r;
  };
  Real scale;
  const Real control = symplecticity_defect(sys, s0, rk4, scale);
  std::printf("  projected RK4 control: defect %.2e\n", control);
  EXPECT_GT(control, 1e-6);
}

TEST(Variational, ConservesNoetherMomentumAndConstraints) {
  const Sys sys = make_system();
  const State s0 = initial_state(sys);
  const Real J0 = Sys::vertical_momentum(s0.q, s0.p), E0 = sys.energy(s0.q, s0.p);
  const Real p_scale = s0.p.norm();
  for (Real alpha_plus : {0.5, 1.0}) {
    Variational m{};
    m.prm.alpha_plus = alpha_plus;
    State s = s0;
    int it = 0;
    Real worst_J = 0, worst_g = 0, worst_gv = 0, worst_E = 0;
    for (int i = 0; i < 1000; ++i) {
      ASSERT_EQ(m.step(sys, s, 0.05, NewtonOptions{}, it), Status::ok) << i;
      worst_J = std::max(worst_J, std::abs(Sys::vertical_momentum(s.q, s.p) - J0));
      worst_g = std::max(worst_g, std::abs(sys.constraints(s.q)[0]));
      worst_gv = std::max(worst_gv, std::abs(sys.velocity_constraints(s.q, s.p)[0]));
      worst_E = std::max(worst_E, std::abs(sys.energy(s.q, s.p) - E0));
    }
    std::printf("  alpha+ = %.1f, 1000 steps h = 0.05: |dJ| %.2e (J0 %.3f), |g| %.2e, |Gv| %.2e, |dE|/E_scale %.2e, "
                "%.1f iterations/step\n",
                alpha_plus, worst_J, J0, worst_g, worst_gv, worst_E / sys.energy_scale(), it / 1000.0);
    EXPECT_LT(worst_J, 1e-12 * std::max(std::abs(J0), p_scale));
    EXPECT_LT(worst_g, 1e-12);
    EXPECT_LT(worst_gv, 1e-12);
    // Bounded energy error of a symplectic order-4 method (no drift).
    EXPECT_LT(worst_E / sys.energy_scale(), 1e-5);
  }
}

TEST(Variational, FixedPointAndNewtonAgree) {
  const Sys sys = make_system();
  const State s0 = initial_state(sys);
  for (Real alpha_plus : {0.5, 1.0}) {
    Variational fp{}, nt{};
    fp.prm.alpha_plus = nt.prm.alpha_plus = alpha_plus;
    nt.prm.solver = Variational::Solver::newton;
    State a = s0, b = s0;
    int ia = 0, ib = 0;
    ASSERT_EQ(advance(fp, sys, a, 0.1, 10, ia), Status::ok);
    ASSERT_EQ(advance(nt, sys, b, 0.1, 10, ib), Status::ok);
    std::printf("  alpha+ = %.1f: |fixed point - newton| %.2e after 10 steps; iterations %d vs %d\n", alpha_plus,
                state_distance(a, b), ia, ib);
    EXPECT_LT(state_distance(a, b), 1e-12);
    EXPECT_GT(ia, 0);
    EXPECT_GT(ib, 0);
  }
}

TEST(Variational, SelfAdjointBiasIsSymmetric) {
  const Sys sys = make_system();
  const State s0 = initial_state(sys);
  const Real h = 0.1;
  Real back[2];
  int idx = 0;
  for (Real alpha_plus : {0.5, 1.0}) {
    Variational m{};
    m.prm.alpha_plus = alpha_plus;
    State s = s0;
    int it = 0;
    ASSERT_EQ(m.step(sys, s, h, NewtonOptions{}, it), Status::ok);
    ASSERT_EQ(m.step(sys, s, -h, NewtonOptions{}, it), Status::ok);
    back[idx++] = state_distance(s, s0);
  }
  std::printf("  step h then -h: |back - start| %.2e (alpha+ = 1/2), %.2e (alpha+ = 1)\n", back[0], back[1]);
  EXPECT_LT(back[0], 1e-12);
  EXPECT_GT(back[1], 1e-7);
}

// ---------------------------------------------------------------- reference form

Eigen::VectorXd dense_newton(const Variational& m, const Sys& sys, const State& s0, Real h, Eigen::VectorXd x) {
  for (int it = 0; it < 30; ++it) {
    const Eigen::VectorXd r = m.residual(sys, s0, h, x);
    Eigen::MatrixXd J(r.size(), x.size());
    for (int j = 0; j < x.size(); ++j) {
      const Real e = 1e-6 * (1 + std::abs(x[j]));
      Eigen::VectorXd xp = x, xm = x;
      xp[j] += e;
      xm[j] -= e;
      J.col(j) = (m.residual(sys, s0, h, xp) - m.residual(sys, s0, h, xm)) / (2 * e);
    }
    const Eigen::VectorXd dx = J.fullPivLu().solve(-r);
    x += dx;
    if (dx.cwiseAbs().maxCoeff() < 1e-15 * (1 + x.cwiseAbs().maxCoeff())) break;
  }
  return x;
}

TEST(Variational, ResidualVanishesAtTheFastStepAndReferenceAgrees) {
  const Sys sys = make_system();
  const State s0 = initial_state(sys);
  const Real h = 0.1;
  for (Real alpha_plus : {0.5, 1.0}) {
    Variational m{};
    m.prm.alpha_plus = alpha_plus;
    const NewtonOptions opt{};
    Variational::Unknowns<Sys> u;
    ASSERT_TRUE(Variational::initial_guess(sys, s0.q, s0.p, h, m.prm.alpha_minus(), u));
    // The predictor is not a solution.
    EXPECT_GT(m.residual(sys, s0, h, m.reference_pack(sys, s0, h, u)).cwiseAbs().maxCoeff(), 1e-4);
    int it = 0;
    ASSERT_EQ(m.solve_stage4(sys, s0.q, s0.p, h, opt, it, u), Status::ok);
    VariationalSegment<3> seg;
    ASSERT_TRUE(m.segment(sys, u.q2, u.v2, h, seg, false));
    ASSERT_EQ(Variational::project(sys, seg.plus, u.q_plus, u.theta_plus, opt), Status::ok);
    const Eigen::VectorXd at_fast = m.residual(sys, s0, h, m.reference_pack(sys, s0, h, u));
    EXPECT_EQ(at_fast.size(), (Variational::reference_size<Sys>));
    EXPECT_LT(at_fast.cwiseAbs().maxCoeff(), 1e-12);

    // The generic dense Newton on the paper's equations, from the predictor.
    const Eigen::VectorXd x = dense_newton(m, sys, s0, h, m.reference_guess(sys, s0, h));
    EXPECT_LT(m.residual(sys, s0, h, x).cwiseAbs().maxCoeff(), 1e-12);
    State ref;
    m.reference_finish(sys, s0, h, x, ref);
    State fast = s0;
    int it2 = 0;
    ASSERT_EQ(m.step(sys, fast, h, opt, it2), Status::ok);
    std::printf("  alpha+ = %.1f: |R(fast)| %.2e, |reference - fast| %.2e\n", alpha_plus,
                at_fast.cwiseAbs().maxCoeff(), state_distance(ref, fast));
    EXPECT_LT(state_distance(ref, fast), 1e-12);
  }
}

TEST(Variational, FailureIsReportedAndLeavesTheStateUntouched) {
  const Sys sys = make_system();
  const State s0 = initial_state(sys);
  Variational m{};
  m.prm.max_iterations = 3;  // cannot converge to 1e-14 in 3 iterations
  State s = s0;
  int it = 0;
  EXPECT_NE(m.step(sys, s, 0.1, NewtonOptions{}, it), Status::ok);
  EXPECT_EQ(state_distance(s, s0), 0.0);
  // A step so large that the iteration diverges.
  Variational big{};
  s = s0;
  const Status st = big.step(sys, s, 50.0, NewtonOptions{}, it);
  EXPECT_NE(st, Status::ok);
  EXPECT_TRUE(all_finite(s.q) && all_finite(s.p));
  EXPECT_EQ(state_distance(s, s0), 0.0);
}

TEST(MagneticSphere, RandomStatesLieOnThePhaseSpace) {
  const Sys sys = make_system();
  struct Lcg {
    unsigned long long x = 12345;
    Real uniform() { x = x * 6364136223846793005ULL + 1442695040888963407ULL; return ((x >> 11) + 0.5) / 9007199254740992.0; }
    Real normal() { return std::sqrt(-2 * std::log(uniform())) * std::cos(6.283185307179586 * uniform()); }
  } rng;
  for (int i = 0; i < 20; ++i) {
    const Vec<3> q = sys.random_configuration(rng);
    const Vec<3> p = sys.random_momentum(rng, q, 1.3);
    EXPECT_LT(std::abs(sys.constraints(q)[0]), 1e-15);
    EXPECT_LT(std::abs(sys.velocity_constraints(q, p)[0]), 1e-14);
    Vec<3> q2 = 1.1 * q + Vec<3>(0.01, 0, 0), p2 = p + Vec<3>(0.3, 0.1, -0.2);
    ASSERT_EQ(sys.project_to_phase_space(q2, p2), Status::ok);
    EXPECT_LT(std::abs(sys.constraints(q2)[0]), 1e-15);
    EXPECT_LT(std::abs(sys.velocity_constraints(q2, p2)[0]), 1e-14);
  }
}

}  // namespace
}  // namespace tether

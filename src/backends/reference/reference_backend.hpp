#pragma once
// reference: deliberately independent of the fast path. Each step solves the
// method's discrete equations exactly as written (M::residual; unknowns
// x = (q1, p1, lambda, lambda~) for holonomic methods, the stage values and
// multipliers for index-1 ones) with a generic dense Newton: dynamic-size
// Eigen, central finite-difference Jacobian, pivoted LU. Serial.
#include <Eigen/Dense>

#include "backends/backend.hpp"
#include "tether/methods/residual.hpp"
#include "tether/methods/index1_stages.hpp"

namespace tether {

// Central finite-difference Jacobian of a residual at x.
template <class Residual>
Eigen::MatrixXd residual_jacobian(const Residual& residual, const Eigen::VectorXd& x) {
  const Eigen::Index n = x.size();
  Eigen::MatrixXd jac(n, n);
  Eigen::VectorXd xp = x, xm = x;
  for (Eigen::Index j = 0; j < n; ++j) {
    const Real d = 6e-6 * std::max<Real>(1, std::abs(x[j]));
    xp[j] = x[j] + d;
    xm[j] = x[j] - d;
    jac.col(j) = (residual(xp) - residual(xm)) / (2 * d);
    xp[j] = xm[j] = x[j];
  }
  return jac;
}

// Eigen's pivoted LU of a dynamic-size matrix, compiled once
// (dynamic_lu.cpp) rather than in every unit that instantiates a reference
// step: its dense kernels took a third of a small unit's code.
class DynamicLU {
 public:
  explicit DynamicLU(const Eigen::MatrixXd& a) { compute(a); }
  void compute(const Eigen::MatrixXd& a);
  Eigen::VectorXd solve(const Eigen::VectorXd& b) const;

 private:
  Eigen::PartialPivLU<Eigen::MatrixXd> lu_;
};

// Solves residual(x) = 0 from the guess in x. Newton with the Jacobian
// refreshed only when contraction slows (a chord iteration in between): the
// root is the same, at a fraction of the Jacobian evaluations.
template <class Residual>
Status reference_newton(const Residual& residual, Eigen::VectorXd& x, const NewtonOptions& opt, int& iterations) {
  DynamicLU lu(residual_jacobian(residual, x));
  // Multipliers may enter a residual scaled by h, so their roundoff floor is
  // ~eps/h: an absolute step test would never pass. Instead, once the update
  // is small, one more (polishing) iteration reaches that floor.
  bool polishing = false;
  Real last = 0;
  for (int it = 0; it < opt.max_iterations; ++it) {
    const Eigen::VectorXd r = residual(x);
    if (!r.allFinite()) return Status::non_finite;
    const Eigen::VectorXd dx = lu.solve(r);
    if (!dx.allFinite()) return Status::singular_matrix;
    x -= dx;
    ++iterations;
    if (polishing) return x.allFinite() ? Status::ok : Status::non_finite;
    const Real size = dx.lpNorm<Eigen::Infinity>();
    polishing = size <= 1e-9 * (1 + x.lpNorm<Eigen::Infinity>());
    if (!polishing && it > 0 && size > Real(0.1) * last) lu.compute(residual_jacobian(residual, x));
    last = size;
  }
  return x.allFinite() ? Status::newton_not_converged : Status::non_finite;
}

// One step of a holonomic method: its residual in x = (q1, p1, lambda,
// lambda~); on success s holds the new state.
template <class S, class M>
Status reference_step(const S& sys, const M& m, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations) {
  using L = ResidualLayout<S>;
  Eigen::VectorXd x = L::pack(s.q + h * sys.inverse_mass_times(s.p), s.p);
  const Status st = reference_newton([&](const Eigen::VectorXd& y) { return m.residual(sys, s, h, y); }, x, opt,
                                     iterations);
  if (st != Status::ok) return st;
  const Vec<S::dof> q1 = L::q1(x), p1 = L::p1(x);
  if (max_abs(sys.constraints(q1)) > constraint_tolerance(sys, opt, q1)) return Status::newton_not_converged;
  s.q_prev = s.q;
  s.q = q1;
  s.p = p1;
  return Status::ok;
}

// One step of a method on an index-1 system: its own unknowns (stage values
// and multipliers), guess, residual and end-of-step formula.
template <class S, class M>
Status reference_step_own_unknowns(const S& sys, const M& m, PhaseState<S>& s, Real h, const NewtonOptions& opt,
                                   int& iterations) {
  Eigen::VectorXd x = m.reference_guess(sys, s, h);
  const Status st = reference_newton([&](const Eigen::VectorXd& y) { return m.residual(sys, s, h, y); }, x, opt,
                                     iterations);
  if (st != Status::ok) return st;
  PhaseState<S> next;
  m.reference_finish(sys, s, h, x, next);
  if (!all_finite(next.q) || !all_finite(next.p)) return Status::non_finite;
  s = next;
  return Status::ok;
}

// For shooting: the state from the reference step; a tangent, when asked
// for, from the method's own tangent map at the same start state. The
// Jacobian only steers Newton: the covector found is a root of the
// reference flow's endpoint map.
template <class M>
struct ReferenceFlow {
  static constexpr int order = M::order;
  template <class S>
  using Carry = typename M::template Carry<S>;
  template <class S, int C>
  static Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations,
                     Tangent<S, C>* tangent, Carry<S>* carry = nullptr) {
    if (tangent) {
      PhaseState<S> copy = s;
      const Status st = M::step(sys, copy, h, opt, iterations, tangent, carry);
      if (st != Status::ok) return st;
    }
    return reference_step_own_unknowns<S, M>(sys, M{}, s, h, opt, iterations);
  }
};

template <class M>
struct ReferenceStepper {
  M method;
  template <class S>
  Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations) const {
    if constexpr (requires { M::base_name; })  // a composition: each base substep solved from its own residual
      return method.for_each_substep(h, [&](auto base, Real hi) {  // in place, as the method's own step
        return reference_step<S, decltype(base)>(sys, base, s, hi, opt, iterations);
      });
    else if constexpr (is_nonholonomic<S> || own_unknowns<M>)
      return reference_step_own_unknowns<S, M>(sys, method, s, h, opt, iterations);
    else
      return reference_step<S, M>(sys, method, s, h, opt, iterations);
  }
};

template <class S, class M>
class ReferenceBackend final : public Backend {
 public:
  ReferenceBackend(const S& sys, const M& method, const StepControl& ctl) : sys_(sys), stepper_{method}, ctl_(ctl) {}

  void load(HostEnsemble& batch) override { view_ = batch.view(); }

  void advance(int nsteps, std::int64_t steps_before) override {
    for (std::int64_t i = 0; i < view_.count; ++i) {
      advance_trajectory<S, M, ReferenceStepper<M>>(sys_, stepper_, ctl_, view_, i, nsteps, steps_before);
      if constexpr (!keeps_state_on_failure<M>)
        advance_trajectory<S, M, ReferenceStepper<M>>(sys_, stepper_, ctl_, view_, i, nsteps, steps_before, true);
    }
  }

  Observation observe(std::int64_t step, std::vector<Real>& chunk_sums) override {
    for (std::int64_t i = 0; i < view_.count; ++i) observe_trajectory<S>(sys_, view_, i, step);
    return reduce_observations(view_, chunk_sums);
  }

  void store(HostEnsemble&) override {}
  double first_launch_work() const override { return 2e3; }

 private:
  S sys_;
  ReferenceStepper<M> stepper_;
  StepControl ctl_;
  EnsembleView view_;
};

}  // namespace tether

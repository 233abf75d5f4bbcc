#pragma once
// reference: deliberately independent of the fast path. Each step solves the
// method's discrete equations exactly as written (M::residual, unknowns
// x = (q1, p1, lambda, lambda~)) with a generic dense Newton: dynamic-size
// Eigen, central finite-difference Jacobian, pivoted LU. Serial.
#include <Eigen/Dense>

#include "engine/backend.hpp"
#include "tether/methods/residual.hpp"

namespace tether {

// Central finite-difference Jacobian of the method's residual at x.
template <class S, class M>
Eigen::MatrixXd residual_jacobian(const S& sys, const PhaseState<S>& s, Real h, const Eigen::VectorXd& x) {
  const Eigen::Index n = x.size();
  Eigen::MatrixXd jac(n, n);
  Eigen::VectorXd xp = x, xm = x;
  for (Eigen::Index j = 0; j < n; ++j) {
    const Real d = 6e-6 * std::max<Real>(1, std::abs(x[j]));
    xp[j] = x[j] + d;
    xm[j] = x[j] - d;
    jac.col(j) = (M::residual(sys, s, h, xp) - M::residual(sys, s, h, xm)) / (2 * d);
    xp[j] = xm[j] = x[j];
  }
  return jac;
}

// Solves one step; on success s holds the new state. Newton with the
// Jacobian refreshed only when contraction slows (a chord iteration in
// between): the root is the same, at a fraction of the Jacobian evaluations.
template <class S, class M>
Status reference_step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations) {
  using L = ResidualLayout<S>;
  Eigen::VectorXd x = L::pack(s.q + h * sys.inverse_mass_times(s.p), s.p);
  Eigen::PartialPivLU<Eigen::MatrixXd> lu(residual_jacobian<S, M>(sys, s, h, x));
  // The multipliers enter the residual scaled by h, so their roundoff floor is
  // ~eps/h: an absolute step test would never pass. Instead, once the update
  // is small, one more (polishing) iteration reaches that floor.
  bool polishing = false, converged = false;
  Real last = 0;
  for (int it = 0; it < opt.max_iterations; ++it) {
    const Eigen::VectorXd r = M::residual(sys, s, h, x);
    if (!r.allFinite()) return Status::non_finite;
    const Eigen::VectorXd dx = lu.solve(r);
    if (!dx.allFinite()) return Status::singular_matrix;
    x -= dx;
    ++iterations;
    if (polishing) {
      converged = true;
      break;
    }
    const Real size = dx.lpNorm<Eigen::Infinity>();
    polishing = size <= 1e-9 * (1 + x.lpNorm<Eigen::Infinity>());
    if (!polishing && it > 0 && size > Real(0.1) * last) lu.compute(residual_jacobian<S, M>(sys, s, h, x));
    last = size;
  }
  const Vec<S::dof> q1 = L::q1(x), p1 = L::p1(x);
  if (!all_finite(q1) || !all_finite(p1)) return Status::non_finite;
  if (!converged) return Status::newton_not_converged;
  if (max_abs(sys.constraints(q1)) > constraint_tolerance(sys, opt, q1)) return Status::newton_not_converged;
  s.q_prev = s.q;
  s.q = q1;
  s.p = p1;
  return Status::ok;
}

template <class M>
struct ReferenceStepper {
  template <class S>
  static Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations) {
    return reference_step<S, M>(sys, s, h, opt, iterations);
  }
};

template <class S, class M>
class ReferenceBackend final : public Backend<S, M> {
 public:
  ReferenceBackend(const S& sys, const StepControl& ctl) : sys_(sys), ctl_(ctl) {}

  void load(HostEnsemble& batch) override { view_ = batch.view(); }

  void advance(int nsteps, std::int64_t steps_before) override {
    for (std::int64_t i = 0; i < view_.count; ++i)
      advance_trajectory<S, M, ReferenceStepper<M>>(sys_, ctl_, view_, i, nsteps, steps_before);
  }

  Observation observe(std::vector<Real>& chunk_sums) override {
    for (std::int64_t i = 0; i < view_.count; ++i) observe_trajectory<S, M>(sys_, view_, i);
    return reduce_observations(view_, chunk_sums);
  }

  void store(HostEnsemble&) override {}
  double work_per_call() const override { return 2e3; }

 private:
  S sys_;
  StepControl ctl_;
  EnsembleView view_;
};

}  // namespace tether

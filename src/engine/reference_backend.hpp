#pragma once
// reference: deliberately independent of the fast path. Each step solves the
// method's discrete equations exactly as written (M::residual, unknowns
// x = (q1, p1, lambda, lambda~)) with a generic dense Newton: dynamic-size
// Eigen, central finite-difference Jacobian, pivoted LU. Serial.
#include <Eigen/Dense>

#include "engine/backend.hpp"
#include "tether/methods/residual.hpp"

namespace tether {

// Solves one step; on success s holds the new state.
template <class S, class M>
Status reference_step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt, int& iterations) {
  using L = ResidualLayout<S>;
  Eigen::VectorXd x = L::pack(s.q + h * sys.inverse_mass_times(s.p), s.p);
  Eigen::MatrixXd jac(L::size, L::size);
  for (int it = 0; it < opt.max_iterations; ++it) {
    const Eigen::VectorXd r = M::residual(sys, s, h, x);
    if (!r.allFinite()) return Status::non_finite;
    for (int j = 0; j < L::size; ++j) {
      const Real d = 6e-6 * std::max<Real>(1, std::abs(x[j]));
      Eigen::VectorXd xp = x, xm = x;
      xp[j] += d;
      xm[j] -= d;
      jac.col(j) = (M::residual(sys, s, h, xp) - M::residual(sys, s, h, xm)) / (2 * d);
    }
    Eigen::PartialPivLU<Eigen::MatrixXd> lu(jac);
    if (!(std::abs(lu.determinant()) > 0)) return Status::singular_matrix;
    const Eigen::VectorXd dx = lu.solve(r);
    x -= dx;
    ++iterations;
    if (dx.lpNorm<Eigen::Infinity>() <= 1e-14 * (1 + x.lpNorm<Eigen::Infinity>())) break;
  }
  const Vec<S::dof> q1 = L::q1(x), p1 = L::p1(x);
  if (!all_finite(q1) || !all_finite(p1)) return Status::non_finite;
  if (max_abs(sys.constraints(q1)) > opt.tolerance) return Status::newton_not_converged;
  s.q_prev = s.q;
  s.q = q1;
  s.p = p1;
  return Status::ok;
}

template <class S, class M>
class ReferenceBackend final : public Backend<S, M> {
 public:
  ReferenceBackend(const S& sys, const StepControl& ctl) : sys_(sys), ctl_(ctl) {}

  void load(HostEnsemble& batch) override { view_ = batch.view(); }

  void advance(int nsteps, std::int64_t steps_before) override {
    const EnsembleView& v = view_;
    for (std::int64_t i = 0; i < v.count; ++i) {
      if (v.status[i] != 0) continue;
      PhaseState<S> s;
      load_state<S, M>(v, i, s);
      for (int n = 0; n < nsteps; ++n) {
        int it = 0;
        const Status st = reference_step<S, M>(sys_, s, ctl_.dt, ctl_.newton, it);
        v.iterations_sum[i] += it;
        v.iterations_max[i] = std::max(v.iterations_max[i], it);
        if (st != Status::ok) {
          v.status[i] = static_cast<std::uint8_t>(st);
          v.failed_step[i] = steps_before + n + 1;
          break;
        }
      }
      store_state<S, M>(v, i, s);
    }
  }

  Observation observe() override {
    for (std::int64_t i = 0; i < view_.count; ++i) observe_trajectory<S, M>(sys_, view_, i);
    return reduce_observations(view_);
  }

  void store(HostEnsemble&) override {}

 private:
  S sys_;
  StepControl ctl_;
  EnsembleView view_;
};

}  // namespace tether

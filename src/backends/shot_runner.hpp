#pragma once
// Backends for shooting: each runs shoot_trajectory over a batch of shots.
// cpu: all cores, the very code the GPU runs; reference: serial, its flow
// from the reference step (reference_backend.hpp); cuda: one thread per shot.
#include <memory>
#include <vector>

#include "tether/shooting/shoot.hpp"

namespace tether {

// Host structure-of-arrays storage of a batch of shots (see ShotView).
struct HostShots {
  std::int64_t count = 0;
  int dof = 0;
  std::vector<Real> q0, target, guess, from, p0, residual, energy, length, conjugate_time, pT, error_estimate;
  std::vector<std::uint8_t> status;
  std::vector<std::int32_t> iterations;

  HostShots(std::int64_t n, int dof_, bool continuation)
      : count(n), dof(dof_), q0(std::size_t(dof_)), target(std::size_t(n) * dof_), guess(std::size_t(n) * dof_),
        from(continuation ? std::size_t(n) * dof_ : 0), p0(std::size_t(n) * dof_), residual(n), energy(n), length(n),
        conjugate_time(n), pT(std::size_t(n) * dof_), error_estimate(n), status(n), iterations(n) {}

  ShotView view() {
    ShotView v;
    v.count = count;
    v.q0 = q0.data();
    v.target = target.data();
    v.guess = guess.data();
    v.from = from.empty() ? nullptr : from.data();
    v.p0 = p0.data();
    v.status = status.data();
    v.iterations = iterations.data();
    v.residual = residual.data();
    v.energy = energy.data();
    v.length = length.data();
    v.conjugate_time = conjugate_time.data();
    v.pT = pT.data();
    v.error_estimate = error_estimate.data();
    return v;
  }
};

class ShotRunner {
 public:
  virtual ~ShotRunner() = default;
  virtual void run(HostShots& shots) = 0;
};

template <class S, class Flow>
class HostShotRunner final : public ShotRunner {
 public:
  HostShotRunner(const S& sys, const ShootControl& ctl, bool parallel) : sys_(sys), ctl_(ctl), parallel_(parallel) {}
  void run(HostShots& h) override {
    if (shooting_kind(ctl_) == Shooting::multiple)
      run_all<Shooting::multiple>(h.view());
    else
      run_all<Shooting::single>(h.view());
  }

 private:
  template <Shooting kind>
  void run_all(const ShotView& v) const {
    // A shot is thousands of steps: worth a thread from two shots on.
#pragma omp parallel for schedule(dynamic, 1) if (parallel_ && v.count > 1)
    for (std::int64_t i = 0; i < v.count; ++i) shoot_trajectory<S, Flow, kind>(sys_, ctl_, v, i);
  }

  S sys_;
  ShootControl ctl_;
  bool parallel_;
};

}  // namespace tether

#pragma once
// `tether shoot` for one (system, method): its shot runners on a backend,
// handed to the host loop (solve_targets, shooting.cpp), and the solved
// geodesics sampled by the backend's own flow.
#include <algorithm>
#include <functional>
#include <memory>
#include <string>

#include "backends/reference/reference_backend.hpp"
#include "backends/shot_runner.hpp"
#include "tether/engine/shooting.hpp"
#ifdef TETHER_HAVE_CUDA
#include "backends/cuda/cuda_backend.hpp"
#endif

namespace tether {

// A backend's shot runner at the step count of a ShootControl, for the
// (system, method) being shot.
using ShotRunnerFactory = std::function<std::unique_ptr<ShotRunner>(const ShootControl&)>;
// The ShootControl of `tether shoot` at `steps` steps (shooting.cpp).
ShootControl shoot_control(const ShootConfig& cfg, std::int64_t steps);
// Every target's kept shot, over the passes shoot.accuracy asks for, with
// checkpoints and a team as `opt` says (shooting.cpp): the host loop, the
// same for every system and method. `backend`: the one resolved (cuda takes
// its shots in one batch); `order`: the method's.
ShootResult solve_targets(const ShootConfig& cfg, const std::string& backend, int dof, int order,
                          const ShotRunnerFactory& make_runner, const ShootOptions& opt);

template <class S, class M>
std::unique_ptr<ShotRunner> make_shot_runner(const std::string& backend, const S& sys, const ShootControl& ctl) {
  if (backend == "cpu") return std::make_unique<HostShotRunner<S, MethodFlow<M>>>(sys, ctl, true);
  if (backend == "reference") return std::make_unique<HostShotRunner<S, ReferenceFlow<M>>>(sys, ctl, false);
#ifdef TETHER_HAVE_CUDA
  if (backend == "cuda") return make_cuda_shot_runner<S, M>(sys, ctl);
#endif
  throw ConfigError("backend", "backend \"" + backend + "\" is not available in this build");
}

template <class S, class M>
ShootResult shoot_ensemble(const S& sys, const ShootConfig& cfg, const std::string& backend, const ShootOptions& opt) {
  constexpr int n = S::dof;
  const ShootSpec& sp = cfg.shoot;
  ShootResult r = solve_targets(
      cfg, backend, n, M::order, [&](const ShootControl& ctl) { return make_shot_runner<S, M>(backend, sys, ctl); },
      opt);
  if (r.stopped || opt.team_rank != 0) return r;  // (one process of a team writes the output)
  const ShootControl ctl = shoot_control(cfg, r.steps);
  const std::int64_t targets = std::int64_t(r.targets.size());

  // The solved geodesics of the first targets, sampled for plotting, by the backend's own flow.
  if (sp.geodesic_every > 0) {
    const std::int64_t last = std::min(targets, sp.geodesic_targets);
    for (std::int64_t t = 0; t < last; ++t) {
      const TargetResult& k = r.targets[std::size_t(t)];
      if (k.status != ShotStatus::converged) continue;
      Geodesic g;
      g.target = t;
      const Vec<n> q0 = Eigen::Map<const Vec<n>>(sp.q0.data()), p0 = Eigen::Map<const Vec<n>>(k.p0.data());
      const Status st = backend == "reference"
                            ? sample_geodesic<S, ReferenceFlow<M>>(sys, ctl, q0, p0, sp.geodesic_every, g)
                            : sample_geodesic<S, MethodFlow<M>>(sys, ctl, q0, p0, sp.geodesic_every, g);
      if (st == Status::ok) r.geodesics.push_back(std::move(g));
    }
  }
  return r;
}

}  // namespace tether

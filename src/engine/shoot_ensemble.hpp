#pragma once
// The host loop of `tether shoot` for one (system, method): every target
// from every guess in batches on a backend's shot runner, the kept shot of
// each target, then continuation rounds for the targets left.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "backends/reference/reference_backend.hpp"
#include "backends/shot_runner.hpp"
#include "tether/engine/shooting.hpp"
#ifdef TETHER_HAVE_CUDA
#include "backends/cuda/cuda_backend.hpp"
#endif

namespace tether {

// Guess j of target t: the explicit list, then (q1 - q0) / T, then random normal.
std::vector<Real> shot_guess(const ShootSpec& s, std::int64_t t, std::int64_t j);
// One shot's outcome, merged into its target's kept result; true when it
// replaced the kept converged shot or converged where none had.
bool merge_shot(const HostShots& h, std::int64_t i, TargetResult& kept, int round);

template <class S, class M>
std::unique_ptr<ShotRunner> make_shot_runner(const std::string& backend, const S& sys, const ShootControl& ctl) {
  if (backend == "cpu") return std::make_unique<HostShotRunner<S, MethodFlow<M>>>(sys, ctl, true);
  if (backend == "reference") return std::make_unique<HostShotRunner<S, ReferenceFlow<M>>>(sys, ctl, false);
#ifdef TETHER_HAVE_CUDA
  if (backend == "cuda") return make_cuda_shot_runner<S>(sys, M{}, ctl);
#endif
  throw ConfigError("backend", "backend \"" + backend + "\" is not available in this build");
}

template <class S, class M>
ShootResult shoot_ensemble(const S& sys, const ShootConfig& cfg, const std::string& backend, const ShootOptions& opt) {
  constexpr int n = S::dof;
  using clock = std::chrono::steady_clock;
  const ShootSpec& sp = cfg.shoot;
  ShootControl ctl;
  ctl.dt = cfg.run.dt;
  ctl.steps = static_cast<std::int32_t>(cfg.run.steps);
  ctl.step_newton = cfg.run.newton;
  ctl.tolerance = sp.tolerance;
  ctl.max_iterations = sp.max_iterations;
  ctl.line_search = sp.line_search;
  ctl.max_backtracks = sp.max_backtracks;
  ctl.substeps = sp.continuation_substeps;
  ctl.conjugate_search_steps = static_cast<std::int32_t>(std::min<Real>(
      Real(std::numeric_limits<std::int32_t>::max()), std::ceil(Real(ctl.steps) * (1 + sp.cut_locus_margin))));
  auto runner = make_shot_runner<S, M>(backend, sys, ctl);

  ShootResult r;
  const auto targets = std::int64_t(sp.targets.size());
  r.targets.resize(std::size_t(targets));
  for (std::int64_t t = 0; t < targets; ++t) {
    r.targets[std::size_t(t)].target = sp.targets[std::size_t(t)];
    r.targets[std::size_t(t)].p0.assign(n, std::numeric_limits<Real>::quiet_NaN());
    r.targets[std::size_t(t)].pT.assign(n, std::numeric_limits<Real>::quiet_NaN());
    r.targets[std::size_t(t)].residual = std::numeric_limits<Real>::quiet_NaN();
  }
  double shooting = 0;
  auto run_batch = [&](HostShots& h) {
    std::copy(sp.q0.begin(), sp.q0.end(), h.q0.begin());
    const auto start = clock::now();
    runner->run(h);
    shooting += std::chrono::duration<double>(clock::now() - start).count();
    r.shots += h.count;
    for (std::int64_t i = 0; i < h.count; ++i) r.shooting_iterations += std::uint64_t(h.iterations[std::size_t(i)]);
  };

  // Round 0: every target from every guess, in batches.
  const std::int64_t per = sp.guesses_per_target(), total = targets * per;
  const std::int64_t batch = std::max<std::int64_t>(1, std::min<std::int64_t>(cfg.run.batch_size, total));
  for (std::int64_t first = 0; first < total; first += batch) {
    HostShots h(std::min(batch, total - first), n, false);
    for (std::int64_t i = 0; i < h.count; ++i) {
      const std::int64_t t = (first + i) / per, j = (first + i) % per;
      const std::vector<Real> g = shot_guess(sp, t, j);
      for (int c = 0; c < n; ++c) {
        h.target[std::size_t(c * h.count + i)] = sp.targets[std::size_t(t)][std::size_t(c)];
        h.guess[std::size_t(c * h.count + i)] = g[std::size_t(c)];
      }
    }
    run_batch(h);
    for (std::int64_t i = 0; i < h.count; ++i) merge_shot(h, i, r.targets[std::size_t((first + i) / per)], 0);
    if (opt.progress) opt.progress(double(first + h.count), double(total));
  }

  // Continuation: each target left starts from its nearest solved target's
  // covector and walks its target there in substeps. Left are the targets not
  // converged and those whose geodesic crossed a conjugate point before T (not
  // minimising: a shorter one exists); seeds are the solved targets whose
  // geodesics did not. Rounds repeat while they solve or shorten something.
  const Real before_end = ctl.dt * (Real(ctl.steps) - Real(0.5));
  for (int round = 1; round <= sp.continuation_rounds; ++round) {
    std::vector<std::int64_t> solved, left;
    for (std::int64_t t = 0; t < targets; ++t) {
      const TargetResult& k = r.targets[std::size_t(t)];
      const bool converged = k.status == ShotStatus::converged;
      const bool minimising = converged && !(k.conjugate_time < before_end);
      (minimising ? solved : left).push_back(t);
    }
    if (solved.empty() || left.empty()) break;
    r.continuation_rounds_run = round;
    HostShots h(std::int64_t(left.size()), n, true);
#pragma omp parallel for schedule(static) if (left.size() > 64)
    for (std::int64_t i = 0; i < h.count; ++i) {
      const auto& q1 = sp.targets[std::size_t(left[std::size_t(i)])];
      std::int64_t nearest = solved.front();
      Real best = std::numeric_limits<Real>::infinity();
      for (std::int64_t s : solved) {
        Real d = 0;
        for (int c = 0; c < n; ++c) d += std::pow(sp.targets[std::size_t(s)][std::size_t(c)] - q1[std::size_t(c)], 2);
        if (d < best) best = d, nearest = s;
      }
      for (int c = 0; c < n; ++c) {
        h.target[std::size_t(c * h.count + i)] = q1[std::size_t(c)];
        h.from[std::size_t(c * h.count + i)] = sp.targets[std::size_t(nearest)][std::size_t(c)];
        h.guess[std::size_t(c * h.count + i)] = r.targets[std::size_t(nearest)].p0[std::size_t(c)];
      }
    }
    run_batch(h);
    bool progress = false;
    for (std::int64_t i = 0; i < h.count; ++i) {
      TargetResult& kept = r.targets[std::size_t(left[std::size_t(i)])];
      progress = merge_shot(h, i, kept, round) || progress;
    }
    if (!progress) break;
  }
  r.shooting_seconds = shooting;
  for (TargetResult& k : r.targets) {
    const Real stretch = 1 + sp.cut_locus_margin;
    k.near_cut_locus = k.status == ShotStatus::converged &&
                       (k.conjugate_time <= stretch * sp.time || k.second_length <= stretch * k.length);
  }

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

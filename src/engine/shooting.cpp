#include "engine/shooting.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "engine/dispatch.hpp"
#include "engine/engine.hpp"
#include "engine/reference_backend.hpp"
#include "engine/shot_runner.hpp"
#include "tether/core/random.hpp"

namespace tether {

namespace {

constexpr Real nan_value = std::numeric_limits<Real>::quiet_NaN();

// Whether a shot replaces the kept one: it converged and the kept one did
// not, or both converged and it is shorter, or neither did and its residual
// is smaller.
bool better(ShotStatus status, Real length, Real residual, const TargetResult& kept) {
  const bool conv = status == ShotStatus::converged, kept_conv = kept.status == ShotStatus::converged;
  if (kept.attempts == 0) return true;
  if (conv != kept_conv) return conv;
  if (conv) return length < kept.length;
  return residual < kept.residual || (std::isnan(kept.residual) && !std::isnan(residual));
}

// Guess j of target t: the explicit list, then (q1 - q0) / T, then random normal.
std::vector<Real> guess_of(const ShootSpec& s, std::int64_t t, std::int64_t j) {
  const std::size_t n = s.q0.size();
  if (j < std::int64_t(s.guesses.size())) return s.guesses[std::size_t(j)];
  j -= std::int64_t(s.guesses.size());
  std::vector<Real> p(n);
  if (s.toward && j-- == 0) {
    for (std::size_t c = 0; c < n; ++c) p[c] = (s.targets[std::size_t(t)][c] - s.q0[c]) / s.time;
    return p;
  }
  CounterRng rng(s.guess_seed, std::uint64_t(t) * std::uint64_t(s.random_guesses) + std::uint64_t(j));
  for (auto& x : p) x = s.guess_scale * rng.normal();
  return p;
}

// One shot's outcome, merged into its target's kept result; true when it
// replaced the kept converged shot or converged where none had.
bool merge(const HostShots& h, std::int64_t i, TargetResult& kept, int round) {
  const int n = h.dof;
  const auto status = static_cast<ShotStatus>(h.status[std::size_t(i)]);
  if (status == ShotStatus::converged) ++kept.converged_attempts;
  const bool replaced = better(status, h.length[std::size_t(i)], h.residual[std::size_t(i)], kept);
  if (replaced) {
    kept.status = status;
    kept.iterations = h.iterations[std::size_t(i)];
    kept.residual = h.residual[std::size_t(i)];
    kept.energy = h.energy[std::size_t(i)];
    kept.length = h.length[std::size_t(i)];
    kept.conjugate_time = h.conjugate_time[std::size_t(i)];
    kept.round = round;
    for (int c = 0; c < n; ++c) kept.p0[std::size_t(c)] = h.p0[std::size_t(c * h.count + i)];
  }
  ++kept.attempts;
  return replaced && status == ShotStatus::converged;
}

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
ShootResult shoot_with(const S& sys, const ShootConfig& cfg, const std::string& backend, const ShootOptions& opt) {
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
  auto runner = make_shot_runner<S, M>(backend, sys, ctl);

  ShootResult r;
  const auto targets = std::int64_t(sp.targets.size());
  r.targets.resize(std::size_t(targets));
  for (std::int64_t t = 0; t < targets; ++t) {
    r.targets[std::size_t(t)].target = sp.targets[std::size_t(t)];
    r.targets[std::size_t(t)].p0.assign(n, nan_value);
    r.targets[std::size_t(t)].residual = nan_value;
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
      const std::vector<Real> g = guess_of(sp, t, j);
      for (int c = 0; c < n; ++c) {
        h.target[std::size_t(c * h.count + i)] = sp.targets[std::size_t(t)][std::size_t(c)];
        h.guess[std::size_t(c * h.count + i)] = g[std::size_t(c)];
      }
    }
    run_batch(h);
    for (std::int64_t i = 0; i < h.count; ++i) merge(h, i, r.targets[std::size_t((first + i) / per)], 0);
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
      progress = merge(h, i, kept, round) || progress;
    }
    if (!progress) break;
  }
  r.shooting_seconds = shooting;

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

}  // namespace

ShootResult shoot(const ShootConfig& cfg, const ShootOptions& opt) {
  const auto start = std::chrono::steady_clock::now();
  const std::string backend = resolve_backend(cfg.run.backend);
  ShootResult r = with_system(cfg.run, [&](const auto& sys) {
    using S = std::decay_t<decltype(sys)>;
    if constexpr (!is_nonholonomic<S> || holonomic_count<S> > 0) {
      throw ConfigError("system.name", "shooting applies to the index-1 systems only");
      return ShootResult{};
    } else {
      return with_method<S>(cfg.run, [&](auto method) { return shoot_with<S, decltype(method)>(sys, cfg, backend, opt); });
    }
  });
  r.system = cfg.run.system_name;
  r.method = cfg.run.method_name;
  r.stages = cfg.run.stages;
  r.backend = backend;
  r.steps = cfg.run.steps;
  r.dt = cfg.run.dt;
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace tether

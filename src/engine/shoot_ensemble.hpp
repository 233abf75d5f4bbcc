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

// One pass of `tether shoot` at the step count of ctl: every target from
// every guess in batches, or from its seed's covector alone where `seeds`
// holds a converged shot of it (a pass at a finer step count); then the
// continuation rounds. Adds its shots, iterations and time to r.
template <class S, class M>
std::vector<TargetResult> shoot_pass(const S& sys, const ShootConfig& cfg, const std::string& backend,
                                     const ShootControl& ctl, const std::vector<TargetResult>* seeds,
                                     const ShootOptions& opt, ShootResult& r) {
  constexpr int n = S::dof;
  using clock = std::chrono::steady_clock;
  const ShootSpec& sp = cfg.shoot;
  auto runner = make_shot_runner<S, M>(backend, sys, ctl);
  const auto targets = std::int64_t(sp.targets.size());
  std::vector<TargetResult> kept(static_cast<std::size_t>(targets));
  for (std::int64_t t = 0; t < targets; ++t) {
    TargetResult& k = kept[std::size_t(t)];
    k.target = sp.targets[std::size_t(t)];
    k.p0.assign(n, std::numeric_limits<Real>::quiet_NaN());
    k.pT.assign(n, std::numeric_limits<Real>::quiet_NaN());
    k.residual = std::numeric_limits<Real>::quiet_NaN();
  }
  auto run_batch = [&](HostShots& h) {
    std::copy(sp.q0.begin(), sp.q0.end(), h.q0.begin());
    const auto start = clock::now();
    runner->run(h);
    r.shooting_seconds += std::chrono::duration<double>(clock::now() - start).count();
    r.shots += h.count;
    for (std::int64_t i = 0; i < h.count; ++i) r.shooting_iterations += std::uint64_t(h.iterations[std::size_t(i)]);
  };
  auto seeded = [&](std::int64_t t) {
    return seeds && (*seeds)[std::size_t(t)].status == ShotStatus::converged;
  };

  // Round 0: the shots (target, guess j), j = -1 for a seed's covector.
  const std::int64_t per = sp.guesses_per_target();
  std::vector<std::pair<std::int64_t, std::int64_t>> shots;
  shots.reserve(std::size_t(targets * (seeds ? 1 : per)));
  for (std::int64_t t = 0; t < targets; ++t) {
    if (seeded(t)) {
      shots.emplace_back(t, -1);
      kept[std::size_t(t)].second_length = (*seeds)[std::size_t(t)].second_length;  // the guesses ran before
    } else {
      for (std::int64_t j = 0; j < per; ++j) shots.emplace_back(t, j);
    }
  }
  const auto total = std::int64_t(shots.size());
  // On the host backends, batches of about a second each (the first a probe
  // of 64 shots, each next one sized by the rate the last one measured), so
  // that progress, and a caller's interruption, come often; a GPU takes them
  // all at once (up to batch_size). Batches change no result: each shot is
  // merged in shot order.
  const std::int64_t most = std::max<std::int64_t>(1, std::min<std::int64_t>(cfg.run.batch_size, total));
  std::int64_t batch = backend == "cuda" ? most : std::min<std::int64_t>(most, 64);
  for (std::int64_t first = 0, count = 0; first < total; first += count) {
    count = std::min(batch, total - first);
    HostShots h(count, n, false);
    for (std::int64_t i = 0; i < h.count; ++i) {
      const auto [t, j] = shots[std::size_t(first + i)];
      const std::vector<Real> g = j < 0 ? (*seeds)[std::size_t(t)].p0 : shot_guess(sp, t, j);
      for (int c = 0; c < n; ++c) {
        h.target[std::size_t(c * h.count + i)] = sp.targets[std::size_t(t)][std::size_t(c)];
        h.guess[std::size_t(c * h.count + i)] = g[std::size_t(c)];
      }
    }
    const auto start = clock::now();
    run_batch(h);
    const double seconds = std::chrono::duration<double>(clock::now() - start).count();
    if (backend != "cuda")
      batch = std::clamp<std::int64_t>(seconds > 1e-3 ? std::int64_t(double(count) / seconds) : 10 * count, 1, most);
    for (std::int64_t i = 0; i < h.count; ++i)
      merge_shot(h, i, kept[std::size_t(shots[std::size_t(first + i)].first)], 0);
    if (opt.progress) opt.progress(double(first + h.count), double(total));
  }
  for (std::int64_t t = 0; t < targets; ++t)
    if (seeded(t)) {  // attempts over all passes
      kept[std::size_t(t)].attempts += (*seeds)[std::size_t(t)].attempts;
      kept[std::size_t(t)].converged_attempts += (*seeds)[std::size_t(t)].converged_attempts;
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
      const TargetResult& k = kept[std::size_t(t)];
      const bool converged = k.status == ShotStatus::converged;
      const bool minimising = converged && !(k.conjugate_time < before_end);
      (minimising ? solved : left).push_back(t);
    }
    if (solved.empty() || left.empty()) break;
    r.continuation_rounds_run = std::max(r.continuation_rounds_run, round);
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
        h.guess[std::size_t(c * h.count + i)] = kept[std::size_t(nearest)].p0[std::size_t(c)];
      }
    }
    run_batch(h);
    if (opt.progress) opt.progress(double(total), double(total));  // (where a caller may stop the run)
    bool progress = false;
    for (std::int64_t i = 0; i < h.count; ++i)
      progress = merge_shot(h, i, kept[std::size_t(left[std::size_t(i)])], round) || progress;
    if (!progress) break;
  }
  return kept;
}

// The step count a pass at `steps` with largest error estimate `worst` calls
// for to reach `accuracy` (Richardson, order p): aim at half of it, at least
// one step more, at most 64 times as many in one go; a multiple of `nodes`.
inline std::int64_t steps_for_accuracy(std::int64_t steps, Real worst, Real accuracy, int order, int nodes) {
  const Real factor = std::pow(worst / (accuracy / 2), Real(1) / Real(order));
  const Real wanted = std::ceil(Real(steps) * std::min<Real>(factor, 64));
  const auto most = Real(ShootSpec::max_steps);
  const std::int64_t next = std::max<std::int64_t>(steps + 1, std::int64_t(std::min<Real>(wanted, most)));
  return (next + nodes - 1) / nodes * nodes;
}

template <class S, class M>
ShootResult shoot_ensemble(const S& sys, const ShootConfig& cfg, const std::string& backend, const ShootOptions& opt) {
  constexpr int n = S::dof;
  const ShootSpec& sp = cfg.shoot;
  ShootControl ctl;
  ctl.step_newton = cfg.run.newton;
  ctl.tolerance = sp.tolerance;
  ctl.max_iterations = sp.max_iterations;
  ctl.line_search = sp.line_search;
  ctl.max_backtracks = sp.max_backtracks;
  ctl.substeps = sp.continuation_substeps;
  ctl.estimate_error = sp.accuracy > 0;
  ctl.nodes = sp.nodes;
  auto at_steps = [&](std::int64_t steps) {
    ctl.steps = static_cast<std::int32_t>(steps);
    ctl.dt = sp.time / Real(steps);
    ctl.conjugate_search_steps = static_cast<std::int32_t>(std::min<Real>(
        Real(std::numeric_limits<std::int32_t>::max()), std::ceil(Real(steps) * (1 + sp.cut_locus_margin))));
  };
  at_steps(cfg.run.steps);

  ShootResult r;
  r.targets = shoot_pass<S, M>(sys, cfg, backend, ctl, nullptr, opt, r);
  r.passes = 1;
  // shoot.accuracy: passes at finer step counts, each seeded by the last,
  // until every converged target's estimate is within the accuracy.
  // A pass that does not halve the worst estimate has left the asymptotic
  // regime (roundoff, or a target the method does not resolve): stop there.
  if (sp.accuracy > 0) {
    for (Real last_worst = std::numeric_limits<Real>::infinity();;) {
      Real worst = 0;
      for (const TargetResult& k : r.targets)
        if (k.status == ShotStatus::converged && std::isfinite(k.error_estimate))
          worst = std::max(worst, k.error_estimate);
      r.accuracy_reached = worst <= sp.accuracy;
      if (r.accuracy_reached || ctl.steps >= ShootSpec::max_steps || !(worst < last_worst / 2)) break;
      last_worst = worst;
      at_steps(steps_for_accuracy(ctl.steps, worst, sp.accuracy, M::order, sp.nodes));
      r.targets = shoot_pass<S, M>(sys, cfg, backend, ctl, &r.targets, opt, r);
      ++r.passes;
    }
  }
  r.steps = ctl.steps;
  r.dt = ctl.dt;
  for (TargetResult& k : r.targets) {
    const Real stretch = 1 + sp.cut_locus_margin;
    k.near_cut_locus = k.status == ShotStatus::converged &&
                       (k.conjugate_time <= stretch * sp.time || k.second_length <= stretch * k.length);
  }
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

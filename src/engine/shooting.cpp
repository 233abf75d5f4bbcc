// The host loop of `tether shoot`, the same for every system and method:
// every target from every guess in batches on a backend's shot runner, the
// kept shot of each target, continuation rounds for the targets left, and
// passes at finer step counts for shoot.accuracy; checkpoints between
// batches, and a team of processes sharing each phase's shots.
#include "engine/shoot_ensemble.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "engine/checkpoint_blob.hpp"
#include "tether/engine/config_error.hpp"
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

// Whether converged shot i and the kept converged shot are different
// geodesics: their p0 differ by more than 1e-3 of the larger |p0|. The same
// geodesic found from two guesses differs by the Newton tolerance times the
// condition of dq(T)/dp0, far less even near a conjugate point; two minimisers
// of a cut point differ by O(|p0|) (a rotation, for Heisenberg).
bool distinct_geodesics(const HostShots& h, std::int64_t i, const TargetResult& kept) {
  Real diff = 0, a = 0, b = 0;
  for (int c = 0; c < h.dof; ++c) {
    const Real x = h.p0[std::size_t(c * h.count + i)], y = kept.p0[std::size_t(c)];
    diff += (x - y) * (x - y);
    a += x * x;
    b += y * y;
  }
  return std::sqrt(diff) > 1e-3 * std::sqrt(std::max(a, b));
}
}  // namespace

std::vector<Real> shot_guess(const ShootSpec& s, std::int64_t t, std::int64_t j) {
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
bool merge_shot(const HostShots& h, std::int64_t i, TargetResult& kept, int round) {
  const int n = h.dof;
  const auto status = static_cast<ShotStatus>(h.status[std::size_t(i)]);
  if (status == ShotStatus::converged) ++kept.converged_attempts;
  // Of two distinct converged geodesics the longer one is a candidate for the second shortest.
  if (status == ShotStatus::converged && kept.status == ShotStatus::converged && kept.attempts > 0 &&
      distinct_geodesics(h, i, kept))
    kept.second_length = std::min(kept.second_length, std::max(kept.length, h.length[std::size_t(i)]));
  const bool replaced = better(status, h.length[std::size_t(i)], h.residual[std::size_t(i)], kept);
  if (replaced) {
    kept.status = status;
    kept.iterations = h.iterations[std::size_t(i)];
    kept.residual = h.residual[std::size_t(i)];
    kept.energy = h.energy[std::size_t(i)];
    kept.length = h.length[std::size_t(i)];
    kept.conjugate_time = h.conjugate_time[std::size_t(i)];
    kept.error_estimate = h.error_estimate[std::size_t(i)];
    kept.round = round;
    for (int c = 0; c < n; ++c) {
      kept.p0[std::size_t(c)] = h.p0[std::size_t(c * h.count + i)];
      kept.pT[std::size_t(c)] = h.pT[std::size_t(c * h.count + i)];
    }
  }
  ++kept.attempts;
  return replaced && status == ShotStatus::converged;
}


ShootControl shoot_control(const ShootConfig& cfg, std::int64_t steps) {
  const ShootSpec& sp = cfg.shoot;
  ShootControl ctl;
  ctl.step_newton = cfg.run.newton;
  ctl.tolerance = sp.tolerance;
  ctl.max_iterations = sp.max_iterations;
  ctl.line_search = sp.line_search;
  ctl.max_backtracks = sp.max_backtracks;
  ctl.stall_iterations = sp.stall_iterations;
  ctl.substeps = sp.continuation_substeps;
  ctl.estimate_error = sp.accuracy > 0;
  ctl.nodes = sp.nodes;
  ctl.steps = static_cast<std::int32_t>(steps);
  ctl.dt = sp.time / Real(steps);
  ctl.conjugate_search_steps = static_cast<std::int32_t>(std::min<Real>(
      Real(std::numeric_limits<std::int32_t>::max()), std::ceil(Real(steps) * (1 + sp.cut_locus_margin))));
  return ctl;
}

namespace {

// The step count a pass at `steps` with largest error estimate `worst` calls
// for to reach `accuracy` (Richardson, order p): aim at half of it, at least
// one step more, at most 64 times as many in one go; a multiple of `nodes`.
std::int64_t steps_for_accuracy(std::int64_t steps, Real worst, Real accuracy, int order, int nodes) {
  const Real factor = std::pow(worst / (accuracy / 2), Real(1) / Real(order));
  const Real wanted = std::ceil(Real(steps) * std::min<Real>(factor, 64));
  const auto most = Real(ShootSpec::max_steps);
  const std::int64_t next = std::max<std::int64_t>(steps + 1, std::int64_t(std::min<Real>(wanted, most)));
  return (next + nodes - 1) / nodes * nodes;
}

// A kept result as bytes (its target is the config's), and back.
void save_target(BlobWriter& w, const TargetResult& k) {
  w.put(k.status), w.put(k.iterations), w.put(k.residual), w.put(k.energy), w.put(k.length);
  w.put(k.conjugate_time), w.put(k.error_estimate), w.put(k.second_length), w.put(k.near_cut_locus);
  w.put(k.attempts), w.put(k.converged_attempts), w.put(k.round), w.put(k.p0), w.put(k.pT);
}
void load_target(BlobReader& b, TargetResult& k) {
  b.get(k.status), b.get(k.iterations), b.get(k.residual), b.get(k.energy), b.get(k.length);
  b.get(k.conjugate_time), b.get(k.error_estimate), b.get(k.second_length), b.get(k.near_cut_locus);
  b.get(k.attempts), b.get(k.converged_attempts), b.get(k.round), b.get(k.p0), b.get(k.pT);
}

// Where a shoot is, for a checkpoint: its pass (the step count, the passes
// before it and their last worst estimate, the targets it is seeded by: none
// in the first), the round within the pass (0: the guesses, r: continuation
// round r next) and in round 0 the next shot; every target's kept result;
// the counts so far. A team's checkpoint also holds every member's next shot
// in round 0 (its own list of shots): it resumes with as many members.
struct ShootProgress {
  std::int64_t steps = 0, next_shot = 0;
  int passes = 0, round = 0;
  Real last_worst = std::numeric_limits<Real>::infinity();
  std::vector<TargetResult> seeds, kept;
  ShootResult counts;  // shots, shooting_iterations, shooting_seconds, continuation_rounds_run
  std::vector<std::int64_t> team_next_shots;  // empty: written by one process

  void save(BlobWriter& w) const {
    w.put(steps), w.put(next_shot), w.put(passes), w.put(round), w.put(last_worst);
    w.put(counts.shots), w.put(counts.shooting_iterations), w.put(counts.shooting_seconds);
    w.put(counts.continuation_rounds_run);
    w.put(std::uint64_t(seeds.size()));
    for (const auto& k : seeds) save_target(w, k);
    w.put(std::uint64_t(kept.size()));
    for (const auto& k : kept) save_target(w, k);
    w.put(team_next_shots);
  }
  // False when the bytes do not fit a shoot of `targets` targets of `dof` coordinates.
  bool load(BlobReader& b, const ShootSpec& sp, int dof) {
    b.get(steps), b.get(next_shot), b.get(passes), b.get(round), b.get(last_worst);
    b.get(counts.shots), b.get(counts.shooting_iterations), b.get(counts.shooting_seconds);
    b.get(counts.continuation_rounds_run);
    const std::size_t targets = sp.targets.size();
    for (auto* list : {&seeds, &kept}) {
      std::uint64_t n = 0;
      b.get(n);
      if (n != targets && !(list == &seeds && n == 0)) return false;
      list->resize(std::size_t(n));
      for (std::size_t t = 0; t < n; ++t) {
        TargetResult& k = (*list)[t];
        load_target(b, k);
        k.target = sp.targets[t];
        if (k.p0.size() != std::size_t(dof) || k.pT.size() != std::size_t(dof)) return false;
      }
    }
    b.get(team_next_shots);
    b.expect_end();
    return steps >= 1 && steps <= ShootSpec::max_steps && next_shot >= 0 && round >= 0 &&
           round <= sp.continuation_rounds + 1 && (passes == 0) == seeds.empty();
  }
};

// [lo, hi) of n items for member k of a team of `size` (all of them alone).
std::pair<std::int64_t, std::int64_t> slice_of(std::int64_t n, int k, int size) {
  return {n * k / size, n * (k + 1) / size};
}

class TargetSolver {
 public:
  TargetSolver(const ShootConfig& cfg, const std::string& backend, int dof, int order,
               const ShotRunnerFactory& make_runner, const ShootOptions& opt)
      : cfg_(cfg), sp_(cfg.shoot), gpu_(backend == "cuda"), dof_(dof), order_(order), make_runner_(make_runner),
        opt_(opt) {}

  ShootResult solve() {
    const bool resumed = opt_.resume != nullptr;
    if (resumed) {
      BlobReader b(*opt_.resume);
      if (!at_.load(b, sp_, dof_))
        throw std::runtime_error("the checkpoint does not fit this shoot (its targets or passes differ)");
      const auto writers = std::max<std::size_t>(1, at_.team_next_shots.size());
      if (writers != std::size_t(opt_.team_size))
        throw ConfigError("--resume", "the checkpoint was written by " +
                                 (writers == 1 ? std::string("one process") : "a team of " + std::to_string(writers)) +
                                 ": resume it with as many (mpirun -np " + std::to_string(writers) + "), not " +
                                 std::to_string(opt_.team_size));
      if (opt_.team_size > 1) at_.next_shot = at_.team_next_shots[std::size_t(opt_.team_rank)];
      last_checkpoint_ = at_.counts.shots;
    } else {
      at_.steps = cfg_.run.steps;
    }
    bool fresh_pass = !resumed;
    // shoot.accuracy: passes at finer step counts, each seeded by the last,
    // until every converged target's estimate is within the accuracy. A pass
    // that does not halve the worst estimate has left the asymptotic regime
    // (roundoff, or a target the method does not resolve): stop there.
    for (;;) {
      if (!run_pass(fresh_pass)) {
        ShootResult r = at_.counts;
        r.stopped = true;
        return r;
      }
      fresh_pass = true;
      ++at_.passes;
      if (sp_.accuracy <= 0) break;
      Real worst = 0;
      for (const TargetResult& k : at_.kept)
        if (k.status == ShotStatus::converged && std::isfinite(k.error_estimate)) worst = std::max(worst, k.error_estimate);
      accuracy_reached_ = worst <= sp_.accuracy;
      if (accuracy_reached_ || at_.steps >= ShootSpec::max_steps || !(worst < at_.last_worst / 2)) break;
      at_.last_worst = worst;
      at_.steps = steps_for_accuracy(at_.steps, worst, sp_.accuracy, order_, sp_.nodes);
      at_.seeds = std::move(at_.kept);
      at_.kept.clear();
    }
    ShootResult r = at_.counts;
    r.targets = std::move(at_.kept);
    r.passes = at_.passes;
    r.accuracy_reached = accuracy_reached_;
    r.steps = at_.steps;
    r.dt = sp_.time / Real(at_.steps);
    const Real stretch = 1 + sp_.cut_locus_margin;
    for (TargetResult& k : r.targets)
      k.near_cut_locus = k.status == ShotStatus::converged &&
                         (k.conjugate_time <= stretch * sp_.time || k.second_length <= stretch * k.length);
    return r;
  }

 private:
  using clock = std::chrono::steady_clock;

  bool seeded(std::int64_t t) const {
    return !at_.seeds.empty() && at_.seeds[std::size_t(t)].status == ShotStatus::converged;
  }

  // One pass at at_.steps: every target from every guess in batches, or from
  // its seed's covector alone where the last pass converged it; then the
  // continuation rounds. False when stopped (a checkpoint is written).
  bool run_pass(bool fresh) {
    const ShootControl ctl = shoot_control(cfg_, at_.steps);
    auto runner = make_runner_(ctl);
    const auto targets = std::int64_t(sp_.targets.size());
    if (fresh) {
      at_.kept.assign(std::size_t(targets), TargetResult{});
      for (std::int64_t t = 0; t < targets; ++t) {
        TargetResult& k = at_.kept[std::size_t(t)];
        k.target = sp_.targets[std::size_t(t)];
        k.p0.assign(std::size_t(dof_), std::numeric_limits<Real>::quiet_NaN());
        k.pT.assign(std::size_t(dof_), std::numeric_limits<Real>::quiet_NaN());
        k.residual = std::numeric_limits<Real>::quiet_NaN();
        if (seeded(t)) k.second_length = at_.seeds[std::size_t(t)].second_length;  // the guesses ran before
      }
      at_.round = 0;
      at_.next_shot = 0;
    }
    const auto run_batch = [&](HostShots& h) {
      std::copy(sp_.q0.begin(), sp_.q0.end(), h.q0.begin());
      const auto start = clock::now();
      runner->run(h);
      at_.counts.shooting_seconds += std::chrono::duration<double>(clock::now() - start).count();
    };
    const auto count = [&](const HostShots& h) {
      pending_shots_ += h.count;
      for (std::int64_t i = 0; i < h.count; ++i) pending_iterations_ += std::uint64_t(h.iterations[std::size_t(i)]);
    };

    // Round 0: the shots (target, guess j) of this process's targets, j = -1 for a seed's covector.
    const auto [lo, hi] = slice_of(targets, opt_.team_rank, opt_.team_size);
    if (at_.round == 0) {
      const std::int64_t per = sp_.guesses_per_target();
      std::vector<std::pair<std::int64_t, std::int64_t>> list;
      for (std::int64_t t = lo; t < hi; ++t) {
        if (seeded(t))
          list.emplace_back(t, -1);
        else
          for (std::int64_t j = 0; j < per; ++j) list.emplace_back(t, j);
      }
      const auto total = std::int64_t(list.size());
      // On the host backends, batches of about a second each (the first a
      // probe of 64 shots, each next one sized by the rate the last one
      // measured), so that progress, checkpoints and a stop come often; a GPU
      // takes them all at once (up to batch_size). Batches change no result:
      // each shot is merged in shot order.
      const std::int64_t most = std::max<std::int64_t>(1, std::min<std::int64_t>(cfg_.run.batch_size, total));
      std::int64_t batch = gpu_ ? most : std::min<std::int64_t>(most, 64);
      // Shots [first, first + n) of the list, merged into their targets' kept results.
      const auto run_shots = [&](std::int64_t first, std::int64_t n) {
        HostShots h(n, dof_, false);
        for (std::int64_t i = 0; i < n; ++i) {
          const auto [t, j] = list[std::size_t(first + i)];
          const std::vector<Real> g = j < 0 ? at_.seeds[std::size_t(t)].p0 : shot_guess(sp_, t, j);
          for (int c = 0; c < dof_; ++c) {
            h.target[std::size_t(c * n + i)] = sp_.targets[std::size_t(t)][std::size_t(c)];
            h.guess[std::size_t(c * n + i)] = g[std::size_t(c)];
          }
        }
        const auto start = clock::now();
        run_batch(h);
        const double seconds = std::chrono::duration<double>(clock::now() - start).count();
        if (!gpu_) batch = std::clamp<std::int64_t>(seconds > 1e-3 ? std::int64_t(double(n) / seconds) : 10 * n, 1, most);
        count(h);
        for (std::int64_t i = 0; i < n; ++i) merge_shot(h, i, at_.kept[std::size_t(list[std::size_t(first + i)].first)], 0);
        at_.next_shot = first + n;
        if (opt_.progress) opt_.progress(double(at_.next_shot), double(total));
      };
      for (;;) {
        const std::int64_t first = at_.next_shot, n = std::min(batch, total - first);
        if (n > 0) run_shots(first, n);
        // An exchange after every batch (in a team an empty one once a
        // member's shots are done), with the targets of its shots, so that
        // all members hold every kept result at each boundary: they stop,
        // take a checkpoint and leave round 0 together.
        std::vector<std::int64_t> touched;  // in shot order, each once
        for (std::int64_t i = first; i < first + n; ++i)
          if (touched.empty() || touched.back() != list[std::size_t(i)].first) touched.push_back(list[std::size_t(i)].first);
        const TeamView v = exchange(touched, at_.next_shot >= total);
        if (v.all_done) break;
        if (!boundary(v)) return false;
      }
      for (std::int64_t t = 0; t < targets; ++t)
        if (seeded(t)) {  // attempts over all passes
          at_.kept[std::size_t(t)].attempts += at_.seeds[std::size_t(t)].attempts;
          at_.kept[std::size_t(t)].converged_attempts += at_.seeds[std::size_t(t)].converged_attempts;
        }
      at_.round = 1;
    }

    // Continuation: each target left starts from its nearest solved target's
    // covector and walks its target there in substeps. Left are the targets
    // not converged and those whose geodesic crossed a conjugate point before
    // T (not minimising: a shorter one exists); seeds are the solved targets
    // whose geodesics did not. Rounds repeat while they solve or shorten something.
    const Real before_end = ctl.dt * (Real(ctl.steps) - Real(0.5));
    for (; at_.round <= sp_.continuation_rounds; ++at_.round) {
      const int round = at_.round;
      std::vector<std::int64_t> solved, left;
      for (std::int64_t t = 0; t < targets; ++t) {
        const TargetResult& k = at_.kept[std::size_t(t)];
        const bool converged = k.status == ShotStatus::converged;
        const bool minimising = converged && !(k.conjugate_time < before_end);
        (minimising ? solved : left).push_back(t);
      }
      if (solved.empty() || left.empty()) break;
      if (!boundary()) return false;
      at_.counts.continuation_rounds_run = std::max(at_.counts.continuation_rounds_run, round);
      const auto [first, end] = slice_of(std::int64_t(left.size()), opt_.team_rank, opt_.team_size);
      HostShots h(end - first, dof_, true);
#pragma omp parallel for schedule(static) if (h.count > 64)
      for (std::int64_t i = 0; i < h.count; ++i) {
        const auto& q1 = sp_.targets[std::size_t(left[std::size_t(first + i)])];
        std::int64_t nearest = solved.front();
        Real best = std::numeric_limits<Real>::infinity();
        for (std::int64_t s : solved) {
          Real d = 0;
          for (int c = 0; c < dof_; ++c) d += std::pow(sp_.targets[std::size_t(s)][std::size_t(c)] - q1[std::size_t(c)], 2);
          if (d < best) best = d, nearest = s;
        }
        for (int c = 0; c < dof_; ++c) {
          h.target[std::size_t(c * h.count + i)] = q1[std::size_t(c)];
          h.from[std::size_t(c * h.count + i)] = sp_.targets[std::size_t(nearest)][std::size_t(c)];
          h.guess[std::size_t(c * h.count + i)] = at_.kept[std::size_t(nearest)].p0[std::size_t(c)];
        }
      }
      if (h.count > 0) run_batch(h);
      count(h);
      const double round0 = double(std::max<std::int64_t>(1, at_.next_shot));  // the shots of round 0
      if (opt_.progress) opt_.progress(round0, round0);  // (where a caller may stop the run)
      for (std::int64_t i = 0; i < h.count; ++i) merge_shot(h, i, at_.kept[std::size_t(left[std::size_t(first + i)])], round);
      exchange(std::vector<std::int64_t>(left.begin() + first, left.begin() + end));
      // Progress: a left target converged in this round, or replaced its kept converged shot.
      bool progress = false;
      for (std::int64_t t : left) {
        const TargetResult& k = at_.kept[std::size_t(t)];
        progress = progress || (k.round == round && k.status == ShotStatus::converged);
      }
      if (!progress) break;
    }
    exchange({});  // (settles the counts where no round ran after round 0's exchange)
    return true;
  }

  // What the members of a team told each other in an exchange (one process: itself).
  struct TeamView {
    bool all_done = true;                   // every member is through its shots of round 0
    bool any_stop = false;                  // a member was asked to stop
    std::vector<std::int64_t> next_shots;  // each member's next shot in round 0
  };

  // Between two batches or before a continuation round: true to go on;
  // false after a stop's checkpoint. A team's members all come here at the
  // same points, after the same exchange, so they take each checkpoint
  // (member 0 writes it) and stop together.
  bool boundary() { return boundary(exchange({})); }
  bool boundary(const TeamView& v) {
    if (!opt_.checkpoint) return true;
    if (!v.any_stop && !(opt_.checkpoint_every > 0 && at_.counts.shots - last_checkpoint_ >= opt_.checkpoint_every))
      return true;
    if (opt_.team_rank == 0) {
      at_.team_next_shots = opt_.team_size > 1 ? v.next_shots : std::vector<std::int64_t>{};
      BlobWriter w;
      at_.save(w);
      opt_.checkpoint(w.bytes());
    }
    last_checkpoint_ = at_.counts.shots;
    return !v.any_stop;
  }

  // After a batch or a phase: the kept results of the targets `mine` this
  // process shot, to every process of a team (through all_gather), and the
  // counts of every process's shots since the last exchange added to the
  // result's; with them whether this process is `done` with round 0, its
  // next shot there, and whether it was asked to stop.
  TeamView exchange(const std::vector<std::int64_t>& mine, bool done = true) {
    const bool stop = opt_.stop != nullptr && *opt_.stop != 0;
    if (opt_.team_size <= 1) {
      at_.counts.shots += pending_shots_;
      at_.counts.shooting_iterations += pending_iterations_;
      pending_shots_ = 0;
      pending_iterations_ = 0;
      return {done, stop, {at_.next_shot}};
    }
    BlobWriter w;
    w.put(pending_shots_), w.put(pending_iterations_), w.put(at_.next_shot), w.put(std::uint8_t(done)),
        w.put(std::uint8_t(stop)), w.put(std::uint64_t(mine.size()));
    for (std::int64_t t : mine) w.put(t), save_target(w, at_.kept[std::size_t(t)]);
    pending_shots_ = 0;
    pending_iterations_ = 0;
    TeamView v;
    for (const std::string& bytes : opt_.all_gather(w.bytes())) {  // integer sums: exact in any order
      BlobReader b(bytes, "a team member's exchange");
      std::int64_t shots = 0, next_shot = 0;
      std::uint64_t iterations = 0, n = 0;
      std::uint8_t member_done = 0, member_stop = 0;
      b.get(shots), b.get(iterations), b.get(next_shot), b.get(member_done), b.get(member_stop), b.get(n);
      at_.counts.shots += shots;
      at_.counts.shooting_iterations += iterations;
      v.all_done = v.all_done && member_done != 0;
      v.any_stop = v.any_stop || member_stop != 0;
      v.next_shots.push_back(next_shot);
      for (std::uint64_t i = 0; i < n; ++i) {
        std::int64_t t = -1;
        b.get(t);
        if (t < 0 || t >= std::int64_t(at_.kept.size())) throw std::runtime_error("a team member sent a target out of range");
        load_target(b, at_.kept[std::size_t(t)]);
      }
      b.expect_end();
    }
    return v;
  }

  const ShootConfig& cfg_;
  const ShootSpec& sp_;
  bool gpu_;  // the backend is cuda: one batch of everything (up to batch_size)
  int dof_, order_;
  const ShotRunnerFactory& make_runner_;
  const ShootOptions& opt_;
  ShootProgress at_;
  bool accuracy_reached_ = false;
  std::int64_t last_checkpoint_ = 0;
  // This process's shots and their iterations since the last exchange.
  std::int64_t pending_shots_ = 0;
  std::uint64_t pending_iterations_ = 0;
};

}  // namespace

ShootResult solve_targets(const ShootConfig& cfg, const std::string& backend, int dof, int order,
                          const ShotRunnerFactory& make_runner, const ShootOptions& opt) {
  return TargetSolver(cfg, backend, dof, order, make_runner, opt).solve();
}

}  // namespace tether

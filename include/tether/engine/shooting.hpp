#pragma once
// `tether shoot`: every target's boundary-value problem, on a
// backend, one shot (target x initial guess) per thread; the best shot of
// each target kept; optional continuation rounds for the targets left.
#include <csignal>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tether/engine/config.hpp"
#include "tether/shooting/shoot.hpp"

namespace tether {

// The kept shot of one target: the shortest converged one, else the one with
// the smallest residual. Every target has a row, converged or not.
struct TargetResult {
  std::vector<Real> target, p0, pT;  // pT: p(T), NaN where not converged
  ShotStatus status = ShotStatus::integration_failed;
  int iterations = 0;
  Real residual = 0, energy = 0, length = 0;  // NaN where not converged
  Real conjugate_time = 0;  // first conjugate time up to (1 + cut locus margin) T; NaN where none or not converged
  Real error_estimate = 0;  // relative error of q(T) (shoot.accuracy); NaN where not estimated
  // The shortest converged geodesic distinct from the kept one (another p0), infinity where none was found.
  Real second_length = std::numeric_limits<Real>::infinity();
  // Converged, and a conjugate point comes by (1 + margin) T or a distinct
  // geodesic is at most (1 + margin) times as long: the distance may not be
  // smooth here, and p(T) not its gradient.
  bool near_cut_locus = false;
  int attempts = 0, converged_attempts = 0;
  int round = 0;  // 0: from the initial guesses; r: continuation round r
  // Converged, and its geodesic meets a conjugate point by T (shots.csv's conjugate_point).
  bool conjugate_point(Real T) const { return status == ShotStatus::converged && conjugate_time <= T; }
};

struct Geodesic {
  std::int64_t target = 0;
  std::vector<Real> times;
  std::vector<std::vector<Real>> q;
};

struct ShootResult {
  std::string system, method, backend;
  int stages = 0;
  std::int64_t steps = 0;
  Real dt = 0;
  std::vector<TargetResult> targets;
  std::vector<Geodesic> geodesics;
  std::int64_t shots = 0;                 // Newton solves run (targets x guesses + continuation)
  std::uint64_t shooting_iterations = 0;  // over all shots
  int continuation_rounds_run = 0;
  int passes = 0;                 // step counts tried (shoot.accuracy), the last one `steps`
  bool accuracy_reached = false;  // every converged target's error estimate within shoot.accuracy
  Real wall_seconds = 0, shooting_seconds = 0;
  bool stopped = false;  // by ShootOptions::stop: partial, a checkpoint holds the rest
  Real time() const { return dt * Real(steps); }  // T
};

struct ShootOptions {
  // Shots done / planned in the initial round: after each batch (about a
  // second apart on the host backends), and after each continuation round.
  std::function<void(double done, double total)> progress;
  // Checkpoints, as for a run (RunOptions): the shoot's whole state between
  // two batches of shots or before a continuation round, handed to
  // `checkpoint` once `checkpoint_every` shots have run since the last one
  // (0: never) and when *stop turns non-zero, after which shoot() returns
  // with ShootResult::stopped. `resume`: bytes a checkpoint of the same
  // config gave; the result is then that of a shoot never stopped.
  std::function<void(const std::string& bytes)> checkpoint;
  std::int64_t checkpoint_every = 0;
  const std::string* resume = nullptr;
  const volatile std::sig_atomic_t* stop = nullptr;
  // Processes that solve one config together (mpirun): each phase's shots
  // (a pass's guesses, a continuation round) are cut into team_size slices
  // by target and this process runs slice team_rank; then `all_gather`
  // (this process's bytes in, every process's out in rank order) hands each
  // one every target's outcome. Every process ends with the whole result.
  // In a team, every member sets `checkpoint` (or none) and `stop`: members
  // exchange after every batch, so a stop asked of any one stops all at the
  // same boundary, and only member 0's `checkpoint` is called. A team's
  // checkpoint resumes with as many members, each given the same bytes.
  int team_rank = 0, team_size = 1;
  std::function<std::vector<std::string>(const std::string& mine)> all_gather;
};

ShootResult shoot(const ShootConfig& config, const ShootOptions& options);
// The config's backend, "auto" resolved by its number of first-pass shots (resolve_backend).
std::string resolve_shoot_backend(const ShootConfig& config);

// Flow-generic host pieces, shared with the tests.
// Positions q(t_k) at every `every`-th step (and the last) of the geodesic from (q0, p0).
template <class S, class Flow>
Status sample_geodesic(const S& sys, const ShootControl& ctl, const Vec<S::dof>& q0, const Vec<S::dof>& p0,
                       std::int64_t every, Geodesic& out) {
  PhaseState<S> s;
  s.q = q0;
  s.p = p0;
  auto keep = [&](std::int64_t k) {
    out.times.push_back(ctl.dt * Real(k));
    out.q.emplace_back(s.q.data(), s.q.data() + S::dof);
  };
  keep(0);
  ShotCarry<S, Flow> carry;
  for (std::int64_t k = 1; k <= ctl.steps; ++k) {
    int it = 0;
    restart(carry);
    const Status st =
        Flow::step(sys, s, ctl.dt, ctl.step_newton, it, static_cast<Tangent<S, S::dof>*>(nullptr), &carry);
    if (st != Status::ok) return st;
    if (k % every == 0 || k == ctl.steps) keep(k);
  }
  return Status::ok;
}

}  // namespace tether

#include "engine/shoot_ensemble.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

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


}  // namespace tether

#pragma once
// Structure-of-arrays storage of a batch of trajectories, as raw pointers so
// the same view works on host memory (cpu, reference) and device memory
// (cuda). Component c of trajectory i lives at [c * count + i]: coalesced on
// the GPU when thread i reads its state.
#include <cstdint>

#include "tether/core/status.hpp"
#include "tether/core/types.hpp"
#include "tether/methods/projection.hpp"

namespace tether {

struct EnsembleView {
  std::int64_t count = 0;
  Real* q = nullptr;
  Real* p = nullptr;
  Real* q_prev = nullptr;  // two-step methods only
  Real* energy0 = nullptr;
  Real* energy_scale = nullptr;  // K0 + |V0| + E_sys: the scale of relative energy errors
  std::uint8_t* status = nullptr;
  std::int64_t* failed_step = nullptr;
  std::uint64_t* iterations_sum = nullptr;
  std::int32_t* iterations_max = nullptr;
  // Last observation of each trajectory (written by observe_trajectory).
  Real* energy_error = nullptr;
  Real* constraint_violation = nullptr;
  Real* velocity_violation = nullptr;
};

// q and p of trajectory i, with q_prev = q: unread by one-step methods, but
// copied whole (compositions), so never indeterminate.
template <class S>
TETHER_HD void load_phase(const EnsembleView& v, std::int64_t i, PhaseState<S>& s) {
  for (int c = 0; c < S::dof; ++c) {
    s.q[c] = v.q[c * v.count + i];
    s.p[c] = v.p[c * v.count + i];
  }
  s.q_prev = s.q;
}

// The state method M steps: with q_prev when M is a two-step method.
template <class S, class M>
TETHER_HD void load_state(const EnsembleView& v, std::int64_t i, PhaseState<S>& s) {
  load_phase<S>(v, i, s);
  if constexpr (M::two_step)
    for (int c = 0; c < S::dof; ++c) s.q_prev[c] = v.q_prev[c * v.count + i];
}

template <class S, class M>
TETHER_HD void store_state(const EnsembleView& v, std::int64_t i, const PhaseState<S>& s) {
  for (int c = 0; c < S::dof; ++c) {
    v.q[c * v.count + i] = s.q[c];
    v.p[c * v.count + i] = s.p[c];
  }
  if constexpr (M::two_step)
    for (int c = 0; c < S::dof; ++c) v.q_prev[c * v.count + i] = s.q_prev[c];
}

template <class S>
TETHER_HD Real total_energy(const S& sys, const Vec<S::dof>& q, const Vec<S::dof>& p) {
  return Real(0.5) * p.dot(sys.inverse_mass_times(p)) + sys.potential(q);
}

}  // namespace tether

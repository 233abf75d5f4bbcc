#pragma once
// Why a Monte Carlo transition ended as it did (sampling/hmc.hpp): stored
// per draw, counted in a sample's summary.
#include <cstdint>

namespace tether {

// Why a static proposal was not taken (0: it was); why a dynamic trajectory
// stopped growing (4-6, or a failed solve or check).
enum class HmcOutcome : std::uint8_t {
  accepted = 0,
  metropolis = 1,     // rejected by the Metropolis test
  newton = 2,         // a step's solve failed (forwards or backwards)
  reversibility = 3,  // the backward integration did not return to q
  // Why a dynamic trajectory stopped growing (a failed solve or check, as
  // above, also stops it): the no-U-turn criterion, the maximum depth, or an
  // energy error beyond HmcControl::max_energy_error (a divergence).
  u_turn = 4,
  max_depth = 5,
  divergence = 6,
};
constexpr int hmc_outcome_count = 7;

// What ArviZ's and Stan's `diverging` flags: a trajectory that blew up (a
// failed solve, or a dynamic one's energy error beyond its bound).
constexpr bool is_divergent(HmcOutcome o) { return o == HmcOutcome::newton || o == HmcOutcome::divergence; }

inline const char* hmc_outcome_name(HmcOutcome o) {
  switch (o) {
    case HmcOutcome::accepted: return "accepted";
    case HmcOutcome::metropolis: return "metropolis";
    case HmcOutcome::newton: return "newton";
    case HmcOutcome::reversibility: return "reversibility";
    case HmcOutcome::u_turn: return "u_turn";
    case HmcOutcome::max_depth: return "max_depth";
    case HmcOutcome::divergence: return "divergence";
  }
  return "unknown";
}

}  // namespace tether

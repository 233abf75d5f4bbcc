#pragma once
#include <cstdint>

namespace tether {

// Per-trajectory outcome. A trajectory that fails stops at its last good state
// and is reported with its id, the step and this reason.
enum class Status : std::uint8_t {
  ok = 0,
  newton_not_converged = 1,
  singular_matrix = 2,
  non_finite = 3,
};
constexpr int status_count = 4;

inline const char* status_name(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::newton_not_converged: return "newton_not_converged";
    case Status::singular_matrix: return "singular_matrix";
    case Status::non_finite: return "non_finite";
  }
  return "unknown";
}

}  // namespace tether

#pragma once
#include "tether/core/types.hpp"

namespace tether {

// Per-trajectory Newton controls, from the config's method.newton.
// tolerance is relative: the constraint residual |g(q)|, which every system
// scales to length units, must fall below tolerance x the system's length
// scale (rod or bond length).
struct NewtonOptions {
  Real tolerance = 1e-13;
  int max_iterations = 50;
};

}  // namespace tether

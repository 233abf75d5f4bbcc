#pragma once
#include "tether/core/types.hpp"

namespace tether {

// Per-trajectory Newton controls, from the config's method.newton.
// tolerance is absolute on the constraint residual |g(q)|, which every system
// scales to length units.
struct NewtonOptions {
  Real tolerance = 1e-13;
  int max_iterations = 50;
};

// The tolerance attainable at coordinates of size q_scale: constraint values
// are computed from differences of positions (bond vectors), whose roundoff
// grows like eps |q|, so far from the origin the configured tolerance gives
// way to that floor instead of failing.
TETHER_HD inline Real attainable_tolerance(const NewtonOptions& opt, Real q_scale) {
  const Real floor = Real(16) * Real(2.220446049250313e-16) * q_scale;
  return opt.tolerance > floor ? opt.tolerance : floor;
}

}  // namespace tether

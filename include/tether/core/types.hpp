#pragma once
#include <Eigen/Core>

#include "tether/core/hd.hpp"

namespace tether {

using Real = double;

// Fixed-size types only: they live in registers inside a GPU thread.
template <int N>
using Vec = Eigen::Matrix<Real, N, 1>;
template <int R, int C>
using Mat = Eigen::Matrix<Real, R, C>;
using Vec3 = Vec<3>;

// (x - x) is 0 for every finite x and NaN for inf/NaN; works on host and device
// without <cmath> overloads that nvcc may not accept in device code.
TETHER_HD inline bool is_finite(Real x) { return (x - x) == Real(0); }

template <int N>
TETHER_HD bool all_finite(const Vec<N>& v) {
  for (int i = 0; i < N; ++i)
    if (!is_finite(v[i])) return false;
  return true;
}

template <int N>
TETHER_HD Real max_abs(const Vec<N>& v) {
  Real m = 0;
  for (int i = 0; i < N; ++i) {
    const Real a = v[i] < 0 ? -v[i] : v[i];
    if (!(a <= m)) m = a;  // also propagates NaN
  }
  return m;
}

}  // namespace tether

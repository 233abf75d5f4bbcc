#pragma once
#include <Eigen/Core>
#include <type_traits>

#include "tether/core/hd.hpp"

namespace tether {

// The step code's scalar. bench/count_flops.cpp compiles the step code with a
// scalar that counts the operations done to it (TETHER_REAL); all else is double.
#ifdef TETHER_REAL
using Real = TETHER_REAL;
#else
using Real = double;
#endif

// Fixed-size types only: they live in registers inside a GPU thread. The
// scalar is Real but for step code run in lanes (core/lanes.hpp).
template <int N, class T = Real>
using Vec = Eigen::Matrix<T, N, 1>;
template <int R, int C, class T = Real>
using Mat = Eigen::Matrix<T, R, C>;
using Vec3 = Vec<3>;

// A parameter that takes part in no deduction (its scalar comes from another
// one), so that an Eigen expression converts to it.
template <class X>
using Id = std::type_identity_t<X>;

// Whether x is neither inf nor NaN. A GPU thread tests its exponent bits (two
// integer instructions, no FP64 ones); the host computes (x - x), 0 for every
// finite x and NaN otherwise, which vectorises in lanes.
TETHER_HD inline bool is_finite(Real x) {
#if defined(__CUDA_ARCH__)
  return (__double2hiint(x) & 0x7ff00000) != 0x7ff00000;
#else
  return (x - x) == Real(0);
#endif
}

template <int N>
TETHER_HD bool all_finite(const Vec<N>& v) {
  for (int i = 0; i < N; ++i)
    if (!is_finite(v[i])) return false;
  return true;
}

template <int N>
TETHER_HD Real max_abs(const Vec<N>& v) {
  if constexpr (N == 0) {
    return 0;
  } else {
    Real m = fabs(v[0]);  // fabs: a sign bit cleared, not a compare and a negation
    for (int i = 1; i < N; ++i) {
      const Real a = fabs(v[i]);
      if (!(a <= m)) m = a;  // a NaN wins over what came before it (callers check finiteness first)
    }
    return m;
  }
}

}  // namespace tether

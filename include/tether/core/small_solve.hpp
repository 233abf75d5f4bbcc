#pragma once
// Small fixed-size linear solves used inside a step (register resident).
// Closed-form / hand-rolled so that nothing here depends on which Eigen
// decompositions happen to be device-safe.
#include <type_traits>

#include "tether/core/lanes.hpp"
#include "tether/core/types.hpp"

namespace tether {

// LU factors of a dense K x K matrix with partial pivoting, kept so that one
// factorization serves several right-hand sides (chord Newton iterations).
// The loops run down columns (Eigen's storage order), so the compiler can
// vectorise them on the host, and the pivots' reciprocals are kept so that a
// solve multiplies instead of dividing (a division is a long serial latency
// on a CPU and dozens of instructions on a GPU).
template <int K>
struct DenseLU {
  Mat<K, K> lu;
  Real inverse_pivot[K];
  int perm[K];

  // Returns false when a pivot vanishes.
  TETHER_HD bool factor(const Mat<K, K>& a) {
    lu = a;
    for (int c = 0; c < K; ++c) {
      int piv = c;
      Real best = lu(c, c) < 0 ? -lu(c, c) : lu(c, c);
      for (int r = c + 1; r < K; ++r) {
        const Real v = lu(r, c) < 0 ? -lu(r, c) : lu(r, c);
        if (v > best) { best = v; piv = r; }
      }
      if (!(best > 0)) return false;
      perm[c] = piv;
      if (piv != c)
        for (int j = 0; j < K; ++j) { const Real t = lu(c, j); lu(c, j) = lu(piv, j); lu(piv, j) = t; }
      const Real inv = 1 / lu(c, c);
      inverse_pivot[c] = inv;
      for (int r = c + 1; r < K; ++r) lu(r, c) *= inv;
      for (int j = c + 1; j < K; ++j) {
        const Real u = lu(c, j);
        for (int r = c + 1; r < K; ++r) lu(r, j) -= lu(r, c) * u;
      }
    }
    return true;
  }

  // det A of the factored matrix (each row swap flips the sign).
  TETHER_HD Real determinant() const {
    Real d = 1;
    for (int c = 0; c < K; ++c) d *= perm[c] != c ? -lu(c, c) : lu(c, c);
    return d;
  }

  // Returns false when the result is not finite.
  TETHER_HD bool solve(const Vec<K>& rhs, Vec<K>& x) const {
    // Rows were swapped whole (multipliers included), so P A = L U with every
    // swap applied first.
    x = rhs;
    if constexpr (K > 1)  // (K = 1 never swaps; GCC cannot see that perm[0] = 0)
      for (int c = 0; c < K; ++c)
        if (perm[c] != c) { const Real t = x[c]; x[c] = x[perm[c]]; x[perm[c]] = t; }
    TETHER_UNROLL
    for (int c = 0; c < K; ++c) {
      TETHER_UNROLL
      for (int r = c + 1; r < K; ++r) x[r] -= lu(r, c) * x[c];
    }
    TETHER_UNROLL
    for (int c = K - 1; c >= 0; --c) {
      x[c] *= inverse_pivot[c];
      TETHER_UNROLL
      for (int r = 0; r < c; ++r) x[r] -= lu(r, c) * x[c];
    }
    return all_finite(x);
  }
};

// Dense K x K matrix, solved by LU with partial pivoting. K = 1 runs in
// lanes too (a pivot search is a branch per lane, so K > 1 is Real only).
template <int K, class T = Real>
struct DenseMatrix {
  static_assert(K == 1 || std::is_same_v<T, Real>, "a pivoted LU runs one trajectory at a time");
  Mat<K, K, T> a;

  // Returns false when a pivot vanishes or the result is not finite.
  TETHER_HD Mask<T> solve(const Vec<K, T>& rhs, Vec<K, T>& x) const {
    if constexpr (K == 1) {
      x[0] = rhs[0] / a(0, 0);
      return is_finite(x[0]);
    } else {
      DenseLU<K> f;
      return f.factor(a) && f.solve(rhs, x);
    }
  }
};

// Tridiagonal K x K matrix (a bead chain's constraint Gram matrix), solved in
// O(K) by the Thomas algorithm. lower[i] = A(i, i-1), upper[i] = A(i, i+1).
// No pivoting: the chain Gram matrices are diagonally dominant.
template <int K, class T = Real>
struct TridiagonalMatrix {
  Vec<K, T> lower, diag, upper;

  // False (per lane) when a pivot vanishes or the result is not finite. One
  // trajectory stops at a zero pivot; in lanes it runs on to a non-finite x.
  TETHER_HD Mask<T> solve(const Vec<K, T>& rhs, Vec<K, T>& x) const {
    constexpr bool one = lane_count<T> == 1;
    Vec<K, T> c, d;
    T den = diag[0];
    if constexpr (one)
      if (den == 0) return false;
    c[0] = upper[0] / den;
    d[0] = rhs[0] / den;
    for (int i = 1; i < K; ++i) {
      den = diag[i] - lower[i] * c[i - 1];
      if constexpr (one)
        if (den == 0) return false;
      c[i] = upper[i] / den;
      d[i] = (rhs[i] - lower[i] * d[i - 1]) / den;
    }
    x[K - 1] = d[K - 1];
    for (int i = K - 2; i >= 0; --i) x[i] = d[i] - c[i] * x[i + 1];
    return all_finite(x);
  }
};

}  // namespace tether

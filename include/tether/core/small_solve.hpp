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
// LU factors up to this size swap rows by selects, every loop unrolled and
// every index known at compile time, so that a GPU thread can keep them in
// registers; larger ones swap rows by a run-time index, in local memory on a
// GPU. The same arithmetic either way, on every backend. At 4 the four-bar's
// and the double pendulum's kernels lose their stack frames and nothing
// spills; at 6 or 8 the rigid bodies', the Gauss-Legendre and the shooting
// kernels traded their local arrays for more spills than they had
// (bench/README.md, "Small LUs in registers").
constexpr int kRegisterLU = 4;

template <int K>
struct DenseLU {
  using Jacobian = Mat<K, K>;  // what polished_newton's fill builds in jacobian_storage()
  Mat<K, K> lu;
  Real inverse_pivot[K];
  int perm[K];

  // Where a Jacobian is built to be factored by factor_in_place: one copy, not two.
  TETHER_HD Mat<K, K>& jacobian_storage() { return lu; }

  // Returns false when a pivot vanishes.
  TETHER_HD bool factor(const Mat<K, K>& a) {
    lu = a;
    return factor_in_place();
  }
  // Factors the matrix already in `lu` (built there, it needs no copy).
  TETHER_HD bool factor_in_place() {
    if constexpr (K <= kRegisterLU)
      return factor_unrolled();
    else
      return factor_looped();
  }

  TETHER_HD bool factor_looped() {
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

  // factor_looped with the row swap as a select on each row below the pivot.
  TETHER_HD bool factor_unrolled() {
    TETHER_UNROLL_FULL
    for (int c = 0; c < K; ++c) {
      int piv = c;
      Real best = lu(c, c) < 0 ? -lu(c, c) : lu(c, c);
      TETHER_UNROLL_FULL
      for (int r = c + 1; r < K; ++r) {
        const Real v = lu(r, c) < 0 ? -lu(r, c) : lu(r, c);
        if (v > best) { best = v; piv = r; }
      }
      if (!(best > 0)) return false;
      perm[c] = piv;
      TETHER_UNROLL_FULL
      for (int r = c + 1; r < K; ++r) {
        TETHER_UNROLL_FULL
        for (int j = 0; j < K; ++j) {
          const Real t = lu(c, j), u = lu(r, j);
          lu(c, j) = r == piv ? u : t;
          lu(r, j) = r == piv ? t : u;
        }
      }
      const Real inv = 1 / lu(c, c);
      inverse_pivot[c] = inv;
      TETHER_UNROLL_FULL
      for (int r = c + 1; r < K; ++r) lu(r, c) *= inv;
      TETHER_UNROLL_FULL
      for (int j = c + 1; j < K; ++j) {
        const Real u = lu(c, j);
        TETHER_UNROLL_FULL
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
    if constexpr (K <= kRegisterLU) {  // the swaps as selects, as in factor_unrolled
      TETHER_UNROLL_FULL
      for (int c = 0; c < K; ++c) {
        TETHER_UNROLL_FULL
        for (int r = c + 1; r < K; ++r) {
          const Real t = x[c], u = x[r];
          x[c] = perm[c] == r ? u : t;
          x[r] = perm[c] == r ? t : u;
        }
      }
    } else {
      for (int c = 0; c < K; ++c)
        if (perm[c] != c) { const Real t = x[c]; x[c] = x[perm[c]]; x[perm[c]] = t; }
    }
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

// LU factors, with partial pivoting, of a complex K x K matrix held as its
// real and imaginary parts (complex arithmetic spelled out, so that the
// same code runs on a GPU thread and on the host). The pivot is the entry of
// largest |re| + |im|.
template <int K>
struct ComplexLU {
  Mat<K, K> re, im;
  Real inverse_pivot_re[K], inverse_pivot_im[K];
  int perm[K];

  // Returns false when a pivot vanishes.
  TETHER_HD bool factor(const Mat<K, K>& a_re, const Mat<K, K>& a_im) {
    re = a_re;
    im = a_im;
    return factor_in_place();
  }
  // Factors the matrix already in (re, im).
  TETHER_HD bool factor_in_place() {
    for (int c = 0; c < K; ++c) {
      int piv = c;
      Real best = fabs(re(c, c)) + fabs(im(c, c));
      for (int r = c + 1; r < K; ++r) {
        const Real v = fabs(re(r, c)) + fabs(im(r, c));
        if (v > best) { best = v; piv = r; }
      }
      if (!(best > 0)) return false;
      perm[c] = piv;
      if (piv != c)
        for (int j = 0; j < K; ++j) {
          Real t = re(c, j);
          re(c, j) = re(piv, j), re(piv, j) = t;
          t = im(c, j);
          im(c, j) = im(piv, j), im(piv, j) = t;
        }
      const Real d = re(c, c) * re(c, c) + im(c, c) * im(c, c);
      const Real ir = re(c, c) / d, ii = -im(c, c) / d;  // 1 / pivot
      inverse_pivot_re[c] = ir, inverse_pivot_im[c] = ii;
      for (int r = c + 1; r < K; ++r) {
        const Real lr = re(r, c) * ir - im(r, c) * ii, li = re(r, c) * ii + im(r, c) * ir;
        re(r, c) = lr, im(r, c) = li;
      }
      for (int j = c + 1; j < K; ++j) {
        const Real ur = re(c, j), ui = im(c, j);
        for (int r = c + 1; r < K; ++r) {
          re(r, j) -= re(r, c) * ur - im(r, c) * ui;
          im(r, j) -= re(r, c) * ui + im(r, c) * ur;
        }
      }
    }
    return true;
  }

  // Solves A (x_re + i x_im) = b_re + i b_im; false when the result is not finite.
  TETHER_HD bool solve(const Vec<K>& b_re, const Vec<K>& b_im, Vec<K>& x_re, Vec<K>& x_im) const {
    x_re = b_re;
    x_im = b_im;
    for (int c = 0; c < K; ++c)
      if (perm[c] != c) {
        Real t = x_re[c];
        x_re[c] = x_re[perm[c]], x_re[perm[c]] = t;
        t = x_im[c];
        x_im[c] = x_im[perm[c]], x_im[perm[c]] = t;
      }
    for (int c = 0; c < K; ++c)
      for (int r = c + 1; r < K; ++r) {
        x_re[r] -= re(r, c) * x_re[c] - im(r, c) * x_im[c];
        x_im[r] -= re(r, c) * x_im[c] + im(r, c) * x_re[c];
      }
    for (int c = K - 1; c >= 0; --c) {
      const Real xr = x_re[c] * inverse_pivot_re[c] - x_im[c] * inverse_pivot_im[c];
      const Real xi = x_re[c] * inverse_pivot_im[c] + x_im[c] * inverse_pivot_re[c];
      x_re[c] = xr, x_im[c] = xi;
      for (int r = 0; r < c; ++r) {
        x_re[r] -= re(r, c) * xr - im(r, c) * xi;
        x_im[r] -= re(r, c) * xi + im(r, c) * xr;
      }
    }
    return all_finite(x_re) && all_finite(x_im);
  }
};

// Dense K x K matrices up to this size are solved in lanes too (a system's
// Gram matrix: a rigid molecule's distances, a linkage's loop), every lane
// with its own pivots; larger ones one trajectory at a time.
constexpr int kLanesLU = 8;

// Dense K x K matrix, solved by LU with partial pivoting.
template <int K, class T = Real>
struct DenseMatrix {
  static constexpr bool solves_in_lanes = K <= kLanesLU;
  static_assert(solves_in_lanes || std::is_same_v<T, Real>, "a large pivoted LU runs one trajectory at a time");
  Mat<K, K, T> a;

  // False (per lane) when a pivot vanishes or the result is not finite.
  TETHER_HD Mask<T> solve(const Vec<K, T>& rhs, Vec<K, T>& x) const {
    if constexpr (K == 1) {
      x[0] = rhs[0] / a(0, 0);
      return is_finite(x[0]);
    } else if constexpr (lane_count<T> > 1) {
      return solve_in_lanes(rhs, x);
    } else {
      DenseLU<K> f;
      return f.factor(a) && f.solve(rhs, x);
    }
  }

  // DenseLU's factor_unrolled and solve, lane by lane: the arithmetic of one
  // trajectory's solve in each lane, its pivot rows kept as masks
  // (`pivot[c][r]`: the lanes whose pivot for column c is row r > c) and
  // its row swaps done as selects. A lane whose pivot vanishes runs on to a
  // non-finite x; it is refused all the same.
  Mask<T> solve_in_lanes(const Vec<K, T>& rhs, Vec<K, T>& x) const {
    Mat<K, K, T> lu = a;
    Mask<T> pivot[K][K];
    T inverse_pivot[K];
    Mask<T> ok(true);
    for (int c = 0; c < K; ++c) {
      T best = fabs(lu(c, c));
      for (int r = c + 1; r < K; ++r) {
        const T v = fabs(lu(r, c));
        const Mask<T> larger = best < v;  // the first largest, as DenseLU's `v > best`
        best = select(larger, v, best);
        for (int earlier = c + 1; earlier < r; ++earlier) pivot[c][earlier] = pivot[c][earlier] & !larger;
        pivot[c][r] = larger;
      }
      ok = ok & (T(Real(0)) < best);
      for (int r = c + 1; r < K; ++r)
        for (int j = 0; j < K; ++j) {
          const T t = lu(c, j), u = lu(r, j);
          lu(c, j) = select(pivot[c][r], u, t);
          lu(r, j) = select(pivot[c][r], t, u);
        }
      const T inv = Real(1) / lu(c, c);
      inverse_pivot[c] = inv;
      for (int r = c + 1; r < K; ++r) lu(r, c) *= inv;
      for (int j = c + 1; j < K; ++j) {
        const T u = lu(c, j);
        for (int r = c + 1; r < K; ++r) lu(r, j) -= lu(r, c) * u;
      }
    }
    x = rhs;
    for (int c = 0; c < K; ++c)
      for (int r = c + 1; r < K; ++r) {
        const T t = x[c], u = x[r];
        x[c] = select(pivot[c][r], u, t);
        x[r] = select(pivot[c][r], t, u);
      }
    for (int c = 0; c < K; ++c)
      for (int r = c + 1; r < K; ++r) x[r] -= lu(r, c) * x[c];
    for (int c = K - 1; c >= 0; --c) {
      x[c] *= inverse_pivot[c];
      for (int r = 0; r < c; ++r) x[r] -= lu(r, c) * x[c];
    }
    return ok & all_finite(x);
  }
};

// Cholesky factor A = L L^T of a symmetric positive definite K x K matrix
// (a sampler's metric, a Gram matrix's log-determinant): the lower triangle
// of A is read, L is kept in `l` (its strict upper triangle zero).
template <int K>
struct Cholesky {
  Mat<K, K> l;

  // False when A is not positive definite (or not finite).
  TETHER_HD bool factor(const Mat<K, K>& a) {
    l.setZero();
    for (int c = 0; c < K; ++c) {
      Real d = a(c, c);
      for (int j = 0; j < c; ++j) d -= l(c, j) * l(c, j);
      if (!(d > 0) || !is_finite(d)) return false;
      l(c, c) = sqrt(d);
      for (int r = c + 1; r < K; ++r) {
        Real s = a(r, c);
        for (int j = 0; j < c; ++j) s -= l(r, j) * l(c, j);
        l(r, c) = s / l(c, c);
      }
    }
    return true;
  }
  TETHER_HD Real log_det() const {
    Real s = 0;
    for (int c = 0; c < K; ++c) s += log(l(c, c));
    return 2 * s;
  }
  // A^-1 b.
  TETHER_HD Vec<K> solve(const Vec<K>& b) const {
    Vec<K> y;
    for (int r = 0; r < K; ++r) {
      Real s = b[r];
      for (int j = 0; j < r; ++j) s -= l(r, j) * y[j];
      y[r] = s / l(r, r);
    }
    for (int r = K - 1; r >= 0; --r) {
      Real s = y[r];
      for (int j = r + 1; j < K; ++j) s -= l(j, r) * y[j];
      y[r] = s / l(r, r);
    }
    return y;
  }
};

// Tridiagonal K x K matrix (a bead chain's constraint Gram matrix), solved in
// O(K) by the Thomas algorithm. lower[i] = A(i, i-1), upper[i] = A(i, i+1).
// No pivoting: the chain Gram matrices are diagonally dominant.
template <int K, class T = Real>
struct TridiagonalMatrix {
  static constexpr bool solves_in_lanes = true;
  Vec<K, T> lower, diag, upper;

  // False (per lane) when a pivot vanishes or the result is not finite. One
  // trajectory stops at a zero pivot; in lanes it runs on to a non-finite x.
  TETHER_HD Mask<T> solve(const Vec<K, T>& rhs, Vec<K, T>& x) const {
    constexpr bool one = lane_count<T> == 1;
    Vec<K, T> c, d;
    // One division per row, its reciprocal used twice (a division costs a
    // GPU thread about ten dependent FMAs, a vector unit many cycles).
    T den = diag[0];
    if constexpr (one)
      if (den == 0) return false;
    T inverse = Real(1) / den;
    c[0] = upper[0] * inverse;
    d[0] = rhs[0] * inverse;
    for (int i = 1; i < K; ++i) {
      den = diag[i] - lower[i] * c[i - 1];
      if constexpr (one)
        if (den == 0) return false;
      inverse = Real(1) / den;
      c[i] = upper[i] * inverse;
      d[i] = (rhs[i] - lower[i] * d[i - 1]) * inverse;
    }
    x[K - 1] = d[K - 1];
    for (int i = K - 2; i >= 0; --i) x[i] = d[i] - c[i] * x[i + 1];
    return all_finite(x);
  }
};

}  // namespace tether

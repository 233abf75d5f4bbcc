#pragma once
// A tile: L lanes cooperating on one trajectory, one lane per bead of a
// chain, so that a GPU thread holds one bead's state instead of the whole
// chain's (chain16's RATTLE held 4.9 KB of stack per thread). The word is
// CUDA's: a cooperative-groups thread_block_tile<L>, L consecutive threads of
// a warp. Step code written once against a tile value X runs with
//   tile::Thread<L>      on a GPU: this thread's lane; neighbours are reached
//                        by the tile's shuffles (cooperative groups);
//   tile::Emulated<T, L> on the cpu backend: all L lanes in one object, with
//                        T = Real or Lanes<W> (W tiles in lockstep, one per
//                        trajectory, core/lanes.hpp).
// The same source either way: what CI tests on the cpu is what a GPU runs.
// Only the primitives below differ, and each does the same arithmetic in the
// same order on both (a tile reduction here is a maximum or a logical and,
// exact in any order; the tridiagonal solve is the Thomas algorithm of
// TridiagonalMatrix::solve, each lane running its recursion on broadcast rows).
//
// Lanes outside the tile's live range hold values that are masked by the
// caller (below); shifts bring 0 from beyond the tile's ends.
#include <array>

#include "tether/core/lanes.hpp"
#include "tether/core/small_solve.hpp"
#include "tether/core/types.hpp"
#if defined(__CUDACC__)
#include <cooperative_groups.h>
#endif

namespace tether {
namespace tile {

template <class T, int L>
struct Emulated {
  static_assert(L >= 2 && L <= 32 && (L & (L - 1)) == 0, "a tile is a power of two of at most a warp's lanes");
  using Scalar = T;
  static constexpr int lanes = L;
  T v[L];
  Emulated() = default;
  template <class U, class = std::enable_if_t<std::is_convertible_v<U, T>>>
  TETHER_LANE_OP TETHER_HD Emulated(const U& x) {  // the same in every lane
    const T y(x);
    TETHER_UNROLL_FULL for (int l = 0; l < L; ++l) v[l] = y;
  }
};

#define TETHER_TILE_OP(op)                                                                   \
  template <class T, int L>                                                                 \
  TETHER_LANE_OP TETHER_HD Emulated<T, L> operator op(const Emulated<T, L>& a, const Emulated<T, L>& b) {  \
    Emulated<T, L> r;                                                                       \
    TETHER_UNROLL_FULL for (int l = 0; l < L; ++l) r.v[l] = a.v[l] op b.v[l];               \
    return r;                                                                               \
  }                                                                                         \
  template <class T, int L>                                                                 \
  TETHER_LANE_OP TETHER_HD Emulated<T, L> operator op(const Emulated<T, L>& a, const Id<T>& b) {           \
    Emulated<T, L> r;                                                                       \
    TETHER_UNROLL_FULL for (int l = 0; l < L; ++l) r.v[l] = a.v[l] op b;                    \
    return r;                                                                               \
  }                                                                                         \
  template <class T, int L>                                                                 \
  TETHER_LANE_OP TETHER_HD Emulated<T, L> operator op(const Id<T>& a, const Emulated<T, L>& b) {           \
    Emulated<T, L> r;                                                                       \
    TETHER_UNROLL_FULL for (int l = 0; l < L; ++l) r.v[l] = a op b.v[l];                    \
    return r;                                                                               \
  }                                                                                         \
  template <class T, int L, class Y>                                                        \
  TETHER_LANE_OP TETHER_HD Emulated<T, L>& operator op##=(Emulated<T, L>& a, const Y& b) {                 \
    return a = a op b;                                                                      \
  }
TETHER_TILE_OP(+)
TETHER_TILE_OP(-)
TETHER_TILE_OP(*)
TETHER_TILE_OP(/)
#undef TETHER_TILE_OP

template <class T, int L>
TETHER_LANE_OP TETHER_HD Emulated<T, L> operator-(const Emulated<T, L>& a) {
  Emulated<T, L> r;
  TETHER_UNROLL_FULL for (int l = 0; l < L; ++l) r.v[l] = -a.v[l];
  return r;
}
template <class T, int L>
TETHER_LANE_OP TETHER_HD Emulated<T, L> sqrt(const Emulated<T, L>& a) {
  Emulated<T, L> r;
  using std::sqrt;
  TETHER_UNROLL_FULL for (int l = 0; l < L; ++l) r.v[l] = sqrt(a.v[l]);
  return r;
}

// x on the lanes below k, 0 on the rest (a chain's bonds live on lanes
// 0 .. N-2, its bond angles on 0 .. N-3).
template <class T, int L>
TETHER_LANE_OP TETHER_HD Emulated<T, L> below(int k, const Emulated<T, L>& x) {
  Emulated<T, L> r;
  TETHER_UNROLL_FULL for (int l = 0; l < L; ++l) r.v[l] = l < k ? x.v[l] : T(Real(0));
  return r;
}
// Lane l receives lane l + k's value (from_next) or lane l - k's (from_previous); 0 beyond the ends.
template <int k, class T, int L>
TETHER_LANE_OP TETHER_HD Emulated<T, L> from_next(const Emulated<T, L>& x) {
  Emulated<T, L> r;
  TETHER_UNROLL_FULL for (int l = 0; l < L; ++l) r.v[l] = l + k < L ? x.v[l + k] : T(Real(0));
  return r;
}
template <int k, class T, int L>
TETHER_LANE_OP TETHER_HD Emulated<T, L> from_previous(const Emulated<T, L>& x) {
  Emulated<T, L> r;
  TETHER_UNROLL_FULL for (int l = 0; l < L; ++l) r.v[l] = l >= k ? x.v[l - k] : T(Real(0));
  return r;
}
// Lane by lane, the larger of |a| and |b|.
template <class T, int L>
TETHER_LANE_OP TETHER_HD Emulated<T, L> larger_abs(const Emulated<T, L>& a, const Emulated<T, L>& b) {
  Emulated<T, L> r;
  using std::fabs;
  using tether::select;
  TETHER_UNROLL_FULL for (int l = 0; l < L; ++l) {
    const T x = fabs(a.v[l]), y = fabs(b.v[l]);
    r.v[l] = select(y <= x, x, y);
  }
  return r;
}
// Per trajectory (mask of T): a where m is set, else b, in every lane.
template <class T, int L>
TETHER_LANE_OP TETHER_HD Emulated<T, L> select(const Mask<T>& m, const Emulated<T, L>& a, const Emulated<T, L>& b) {
  Emulated<T, L> r;
  using tether::select;
  TETHER_UNROLL_FULL for (int l = 0; l < L; ++l) r.v[l] = select(m, a.v[l], b.v[l]);
  return r;
}
// The largest |x| over the tile's lanes, as max_abs orders it (callers check
// finiteness first, so the order of a NaN does not arise).
template <class T, int L>
TETHER_HD T max_abs(const Emulated<T, L>& x) {
  Vec<L, T> all;
  TETHER_UNROLL_FULL for (int l = 0; l < L; ++l) all[l] = x.v[l];
  return tether::max_abs(all);
}
// Per trajectory: every lane's x finite.
template <class T, int L>
TETHER_HD Mask<T> all_finite(const Emulated<T, L>& x) {
  Vec<L, T> all;
  TETHER_UNROLL_FULL for (int l = 0; l < L; ++l) all[l] = x.v[l];
  return tether::all_finite(all);
}

// The sum over the tile's lanes, by the butterfly of a GPU's shuffles
// (lane l adds lane l ^ k's partial sum, k = L/2, ..., 1): the same bits in
// every lane and on both forms.
template <int L>
TETHER_HD Real sum(const Emulated<Real, L>& x) {
  Real s[L];
  TETHER_UNROLL_FULL for (int l = 0; l < L; ++l) s[l] = x.v[l];
  TETHER_UNROLL_FULL for (int k = L / 2; k > 0; k /= 2) {
    Real t[L];
    TETHER_UNROLL_FULL for (int l = 0; l < L; ++l) t[l] = s[l] + s[l ^ k];
    TETHER_UNROLL_FULL for (int l = 0; l < L; ++l) s[l] = t[l];
  }
  return s[0];
}

// The tridiagonal system with rows on lanes 0 .. K-1 (lower[i] = A(i, i-1),
// upper[i] = A(i, i+1)) solved as TridiagonalMatrix<K, T>::solve does; x is
// 0 on lanes K and up. False (per trajectory) where a pivot vanishes or x is
// not finite.
template <int K, class T, int L>
TETHER_HD Mask<T> solve_tridiagonal(const Emulated<T, L>& lower, const Emulated<T, L>& diag,
                                    const Emulated<T, L>& upper, const Emulated<T, L>& rhs, Emulated<T, L>& x) {
  static_assert(K <= L);
  TridiagonalMatrix<K, T> m;
  Vec<K, T> b, y = Vec<K, T>::Constant(T(Real(0)));  // y as it is where a pivot vanishes
  TETHER_UNROLL_FULL for (int i = 0; i < K; ++i) {
    m.lower[i] = lower.v[i];
    m.diag[i] = diag.v[i];
    m.upper[i] = upper.v[i];
    b[i] = rhs.v[i];
  }
  const Mask<T> solved = m.solve(b, y);
  TETHER_UNROLL_FULL for (int l = 0; l < L; ++l) x.v[l] = l < K ? y[l] : T(Real(0));
  return solved;
}

#if defined(__CUDACC__)
// This thread's lane of a tile of L consecutive threads of a warp.
template <int L>
struct Thread {
  static_assert(L >= 2 && L <= 32 && (L & (L - 1)) == 0, "a tile is a power of two of at most a warp's lanes");
  using Scalar = Real;
  static constexpr int lanes = L;
  Real v;
  Thread() = default;
  __device__ Thread(Real x) : v(x) {}
  // The tile this thread belongs to: its shuffles name no thread of another tile.
  __device__ static cooperative_groups::thread_block_tile<L> group() {
    return cooperative_groups::tiled_partition<L>(cooperative_groups::this_thread_block());
  }
  __device__ static int lane() { return int(group().thread_rank()); }
};

#define TETHER_TILE_OP(op)                                                                                   \
  template <int L>                                                                                          \
  __device__ Thread<L> operator op(const Thread<L>& a, const Thread<L>& b) { return Thread<L>(a.v op b.v); } \
  template <int L>                                                                                          \
  __device__ Thread<L> operator op(const Thread<L>& a, Real b) { return Thread<L>(a.v op b); }               \
  template <int L>                                                                                          \
  __device__ Thread<L> operator op(Real a, const Thread<L>& b) { return Thread<L>(a op b.v); }               \
  template <int L, class Y>                                                                                 \
  __device__ Thread<L>& operator op##=(Thread<L>& a, const Y& b) { return a = a op b; }
TETHER_TILE_OP(+)
TETHER_TILE_OP(-)
TETHER_TILE_OP(*)
TETHER_TILE_OP(/)
#undef TETHER_TILE_OP

template <int L>
__device__ Thread<L> operator-(const Thread<L>& a) {
  return Thread<L>(-a.v);
}
template <int L>
__device__ Thread<L> sqrt(const Thread<L>& a) {
  return Thread<L>(::sqrt(a.v));
}
template <int L>
__device__ Thread<L> below(int k, const Thread<L>& x) {
  return Thread<L>(Thread<L>::lane() < k ? x.v : Real(0));
}
template <int k, int L>
__device__ Thread<L> from_next(const Thread<L>& x) {
  const Real y = Thread<L>::group().shfl_down(x.v, k);
  return Thread<L>(Thread<L>::lane() + k < L ? y : Real(0));
}
template <int k, int L>
__device__ Thread<L> from_previous(const Thread<L>& x) {
  const Real y = Thread<L>::group().shfl_up(x.v, k);
  return Thread<L>(Thread<L>::lane() >= k ? y : Real(0));
}
template <int L>
__device__ Thread<L> select(bool m, const Thread<L>& a, const Thread<L>& b) {
  return m ? a : b;
}
template <int L>
__device__ Thread<L> larger_abs(const Thread<L>& a, const Thread<L>& b) {
  const Real x = fabs(a.v), y = fabs(b.v);
  return Thread<L>(y <= x ? x : y);
}
template <int L>
__device__ Real max_abs(const Thread<L>& x) {
  Real m = fabs(x.v);
  for (int k = L / 2; k > 0; k /= 2) {
    const Real o = Thread<L>::group().shfl_xor(m, k);
    m = o <= m ? m : o;
  }
  return m;
}
template <int L>
__device__ bool all_finite(const Thread<L>& x) {
  return Thread<L>::group().all(is_finite(x.v)) != 0;
}
template <int L>
__device__ Real sum(const Thread<L>& x) {
  Real s = x.v;
  for (int k = L / 2; k > 0; k /= 2) s = s + Thread<L>::group().shfl_xor(s, k);
  return s;
}
// Every lane runs the Thomas recursion on the rows broadcast from their
// lanes (the arithmetic of TridiagonalMatrix::solve) and keeps its own entry.
template <int K, int L>
__device__ bool solve_tridiagonal(const Thread<L>& lower, const Thread<L>& diag, const Thread<L>& upper,
                                  const Thread<L>& rhs, Thread<L>& x) {
  static_assert(K <= L);
  const auto tile = Thread<L>::group();
  const int me = Thread<L>::lane();
  Real c = 0, d = 0, my_c = 0, my_d = 0;
  for (int i = 0; i < K; ++i) {
    const Real a = tile.shfl(lower.v, i), b = tile.shfl(diag.v, i);
    const Real u = tile.shfl(upper.v, i), r = tile.shfl(rhs.v, i);
    const Real den = i == 0 ? b : b - a * c;
    if (den == 0) return false;  // the same in every lane
    const Real inverse = Real(1) / den;  // as TridiagonalMatrix::solve
    c = u * inverse;
    d = i == 0 ? r * inverse : (r - a * d) * inverse;
    if (me == i) {
      my_c = c;
      my_d = d;
    }
  }
  Real next = d;  // x[K-1] = d[K-1]
  Real mine = me == K - 1 ? next : Real(0);
  for (int i = K - 2; i >= 0; --i) {
    next = tile.shfl(my_d, i) - tile.shfl(my_c, i) * next;
    if (me == i) mine = next;
  }
  x = Thread<L>(mine);
  return all_finite(x);
}
#endif

// A 3-vector per lane (a bead's position, a bond), with the arithmetic of
// Eigen's Vec3 on the same numbers: dot(a, b) = a0 b0 + (a1 b1 + a2 b2), as
// Eigen's unrolled reduction sums three terms of a scalar it does not
// vectorise (Lanes<W>, and Real on a GPU; on the host Real's is (a0 b0 + a1 b1) + a2 b2).
template <class X>
struct Triple {
  X c[3];
};
template <class X>
TETHER_LANE_OP TETHER_HD Triple<X> operator+(const Triple<X>& a, const Triple<X>& b) {
  return {{a.c[0] + b.c[0], a.c[1] + b.c[1], a.c[2] + b.c[2]}};
}
template <class X>
TETHER_LANE_OP TETHER_HD Triple<X> operator-(const Triple<X>& a, const Triple<X>& b) {
  return {{a.c[0] - b.c[0], a.c[1] - b.c[1], a.c[2] - b.c[2]}};
}
template <class X>
TETHER_LANE_OP TETHER_HD Triple<X> operator-(const Triple<X>& a) {
  return {{-a.c[0], -a.c[1], -a.c[2]}};
}
template <class X, class Y>
TETHER_LANE_OP TETHER_HD Triple<X> operator*(const Y& s, const Triple<X>& a) {
  return {{s * a.c[0], s * a.c[1], s * a.c[2]}};
}
template <class X, class Y>
TETHER_LANE_OP TETHER_HD Triple<X> operator*(const Triple<X>& a, const Y& s) {
  return {{a.c[0] * s, a.c[1] * s, a.c[2] * s}};
}
template <class X, class Y>
TETHER_LANE_OP TETHER_HD Triple<X> operator/(const Triple<X>& a, const Y& s) {
  return {{a.c[0] / s, a.c[1] / s, a.c[2] / s}};
}
template <class X>
TETHER_LANE_OP TETHER_HD X dot(const Triple<X>& a, const Triple<X>& b) {
  return a.c[0] * b.c[0] + (a.c[1] * b.c[1] + a.c[2] * b.c[2]);
}
template <class X>
TETHER_LANE_OP TETHER_HD X norm(const Triple<X>& a) {
  using std::sqrt;  // X = Real inside each_lane
  return sqrt(dot(a, a));
}
template <class X>
TETHER_LANE_OP TETHER_HD Triple<X> cross(const Triple<X>& a, const Triple<X>& b) {  // Eigen's cross, term for term
  return {{a.c[1] * b.c[2] - a.c[2] * b.c[1], a.c[2] * b.c[0] - a.c[0] * b.c[2], a.c[0] * b.c[1] - a.c[1] * b.c[0]}};
}
template <class X>
TETHER_LANE_OP TETHER_HD Triple<X> below(int k, const Triple<X>& a) {
  return {{below(k, a.c[0]), below(k, a.c[1]), below(k, a.c[2])}};
}
template <int k, class X>
TETHER_LANE_OP TETHER_HD Triple<X> from_next(const Triple<X>& a) {
  return {{from_next<k>(a.c[0]), from_next<k>(a.c[1]), from_next<k>(a.c[2])}};
}
template <int k, class X>
TETHER_LANE_OP TETHER_HD Triple<X> from_previous(const Triple<X>& a) {
  return {{from_previous<k>(a.c[0]), from_previous<k>(a.c[1]), from_previous<k>(a.c[2])}};
}
template <class M, class X>
TETHER_LANE_OP TETHER_HD Triple<X> select(const M& m, const Triple<X>& a, const Triple<X>& b) {
  return {{select(m, a.c[0], b.c[0]), select(m, a.c[1], b.c[1]), select(m, a.c[2], b.c[2])}};
}
template <class X>
TETHER_HD typename X::Scalar max_abs(const Triple<X>& a) {
  // The three components' largest |.| in each lane, then over the tile: exact in any order.
  return max_abs(larger_abs(larger_abs(a.c[0], a.c[1]), a.c[2]));
}
template <class X>
TETHER_HD Mask<typename X::Scalar> all_finite(const Triple<X>& a) {
  return Mask<typename X::Scalar>(all_finite(a.c[0]) & all_finite(a.c[1]) & all_finite(a.c[2]));
}

// --- each_lane: a formula applied lane by lane. f is written for one lane's
// numbers (T, Triple<T>) and returns one lane's (T, Triple<T>, or a std::array
// of Triple<T>); each_lane<X> gives them back as tile values. The same
// arithmetic as writing the formula on tile values, but on the cpu each
// intermediate stays in registers, where a line of Emulated arithmetic
// materialises it across all the lanes (chain16's RATTLE: 0.87x of the
// one-thread step with the bend and torsion forces on tile values).
template <class T, int L>
TETHER_LANE_OP const T& lane_of(const Emulated<T, L>& x, int l) {
  return x.v[l];
}
template <class T, int L>
TETHER_LANE_OP Triple<T> lane_of(const Triple<Emulated<T, L>>& x, int l) {
  return {{x.c[0].v[l], x.c[1].v[l], x.c[2].v[l]}};
}
template <class T, int L>
TETHER_LANE_OP void set_lane(Emulated<T, L>& x, int l, const T& y) {
  x.v[l] = y;
}
#if defined(__CUDACC__)
template <int L>
__device__ Real lane_of(const Thread<L>& x, int) {
  return x.v;
}
template <int L>
__device__ Triple<Real> lane_of(const Triple<Thread<L>>& x, int) {
  return {{x.c[0].v, x.c[1].v, x.c[2].v}};
}
template <int L>
__device__ void set_lane(Thread<L>& x, int, Real y) {
  x.v = y;
}
#endif
template <class X, class Y>
TETHER_LANE_OP TETHER_HD void set_lane(Triple<X>& x, int l, const Triple<Y>& y) {
  for (int k = 0; k < 3; ++k) set_lane(x.c[k], l, y.c[k]);
}
template <class X, class Y, std::size_t n>
TETHER_LANE_OP TETHER_HD void set_lane(std::array<X, n>& x, int l, const std::array<Y, n>& y) {
  for (std::size_t k = 0; k < n; ++k) set_lane(x[k], l, y[k]);
}

// The tile value holding one lane's result R in every lane.
template <class R, class X>
struct SpreadOf {
  using type = X;
};
template <class R, class X>
struct SpreadOf<Triple<R>, X> {
  using type = Triple<X>;
};
template <class R, std::size_t n, class X>
struct SpreadOf<std::array<R, n>, X> {
  using type = std::array<typename SpreadOf<R, X>::type, n>;
};

// Lanes held by one object of X: all of them for Emulated, this thread's for
// Thread; lane_id<X>(l) is the tile lane of the l-th of them.
template <class X>
constexpr int lanes_held = X::lanes;
template <class X>
struct LaneIds {
  TETHER_HD static int of(int l) { return l; }
};
#if defined(__CUDACC__)
template <int L>
constexpr int lanes_held<Thread<L>> = 1;
template <int L>
struct LaneIds<Thread<L>> {
  __device__ static int of(int) { return Thread<L>::lane(); }
};
#endif
template <class X>
TETHER_LANE_OP TETHER_HD int lane_id(int l) {
  return LaneIds<X>::of(l);
}

template <class X, class F, class... A>
TETHER_LANE_OP TETHER_HD auto each_lane(const F& f, const A&... a) {
  using R = decltype(f(lane_of(a, 0)...));
  typename SpreadOf<R, X>::type out;
  TETHER_UNROLL_FULL for (int l = 0; l < lanes_held<X>; ++l) set_lane(out, l, f(lane_of(a, l)...));
  return out;
}

}  // namespace tile
}  // namespace tether

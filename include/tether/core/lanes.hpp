#pragma once
// Several trajectories in lockstep on one CPU core: a scalar type whose every
// operation acts on W independent lanes, so that the step code, written once
// for a scalar T, runs W trajectories per instruction stream on the cpu
// backend (in the vector units, and with W independent dependency chains
// where one trajectory's Newton solve is a serial chain of latencies) while
// a GPU thread runs it with T = Real. The same source either way.
//
// Control flow that depends on values (Newton's convergence test, a failed
// solve) is written with masks: Mask<T> is bool for Real and one flag per
// lane for Lanes<W>; select(m, a, b) picks per lane; any/all reduce. A lane
// that has converged is frozen by select, so its arithmetic is the very
// sequence a lone trajectory would run (the number of iterations, the
// updates), whatever its neighbours do.
#include <Eigen/Core>
#include <cmath>
#include <type_traits>

#include "tether/core/hd.hpp"
#include "tether/core/status.hpp"
#include "tether/core/types.hpp"

namespace tether {
// The lane types and their arithmetic live in tether::simd, so that sqrt and
// fabs on a Real in namespace tether keep resolving to the C library while
// argument-dependent lookup finds these for lanes (as core/dual.hpp does).
namespace simd {

// GCC/Clang vector types: one operation is one instruction on W doubles
// where the instruction set has them (two or four where it has narrower
// ones). Host code only: a GPU thread runs the step code with Real.
template <int W>
struct Lanes {
  static_assert(W == 2 || W == 4 || W == 8, "a power of two that fills whole vector registers");
  typedef Real Vector __attribute__((vector_size(W * sizeof(Real))));
  Vector v;
  Lanes() = default;
  Lanes(Real x) : v(Vector{} + x) {}  // a constant: the same in every lane
  static Lanes of(Vector x) {
    Lanes r;
    r.v = x;
    return r;
  }
};

// A lane's flag is all ones or zero (what vector comparisons give); the
// operations below read any non-zero as set.
template <int W>
struct LaneMask {
  typedef long long Vector __attribute__((vector_size(W * sizeof(long long))));
  Vector m;
  LaneMask() = default;
  LaneMask(bool b) : m(Vector{} - (long long)b) {}
  static LaneMask of(Vector x) {
    LaneMask r;
    r.m = x;
    return r;
  }
};

#define TETHER_LANES_OP(op)                                                                                   \
  template <int W>                                                                                            \
  Lanes<W> operator op(const Lanes<W>& a, const Lanes<W>& b) {                                                \
    return Lanes<W>::of(a.v op b.v);                                                                          \
  }                                                                                                           \
  template <int W>                                                                                            \
  Lanes<W> operator op(const Lanes<W>& a, Real b) {                                                           \
    return Lanes<W>::of(a.v op b);                                                                            \
  }                                                                                                           \
  template <int W>                                                                                            \
  Lanes<W> operator op(Real a, const Lanes<W>& b) {                                                           \
    return Lanes<W>::of(a op b.v);                                                                            \
  }                                                                                                           \
  template <int W>                                                                                            \
  Lanes<W>& operator op##=(Lanes<W>& a, const Lanes<W>& b) {                                                  \
    a.v = a.v op b.v;                                                                                         \
    return a;                                                                                                 \
  }
TETHER_LANES_OP(+)
TETHER_LANES_OP(-)
TETHER_LANES_OP(*)
TETHER_LANES_OP(/)
#undef TETHER_LANES_OP

template <int W>
Lanes<W> operator-(const Lanes<W>& a) {
  return Lanes<W>::of(-a.v);
}

#define TETHER_LANES_CMP(op)                                     \
  template <int W>                                               \
  LaneMask<W> operator op(const Lanes<W>& a, const Lanes<W>& b) { \
    return LaneMask<W>::of(a.v op b.v);                          \
  }
TETHER_LANES_CMP(<)
TETHER_LANES_CMP(<=)
TETHER_LANES_CMP(==)
#undef TETHER_LANES_CMP

template <int W>
LaneMask<W> operator&(const LaneMask<W>& a, const LaneMask<W>& b) {
  return LaneMask<W>::of((a.m != 0) & (b.m != 0));
}
template <int W>
LaneMask<W> operator!(const LaneMask<W>& a) {
  return LaneMask<W>::of(a.m == 0);
}

// One vector instruction where math errno is off (declared systems' units):
// inlined, or it is a call (through the PLT in a shared library) per use.
template <int W>
TETHER_LANE_OP Lanes<W> sqrt(const Lanes<W>& a) {
  Lanes<W> r;
  for (int l = 0; l < W; ++l) r.v[l] = __builtin_sqrt(a.v[l]);
  return r;
}
template <int W>
TETHER_LANE_OP Lanes<W> fabs(const Lanes<W>& a) {
  Lanes<W> r;
  for (int l = 0; l < W; ++l) r.v[l] = __builtin_fabs(a.v[l]);
  return r;
}
template <int W>
TETHER_LANE_OP Lanes<W> abs(const Lanes<W>& a) {
  return fabs(a);
}
// The functions a declared system's expressions may call
// (src/expr/declared_system.hpp), lane by lane.
#define TETHER_LANES_FUNCTION(f)                                     \
  template <int W>                                                   \
  Lanes<W> f(const Lanes<W>& a) {                                    \
    Lanes<W> r;                                                      \
    for (int l = 0; l < W; ++l) r.v[l] = __builtin_##f(a.v[l]);      \
    return r;                                                        \
  }
TETHER_LANES_FUNCTION(sin)
TETHER_LANES_FUNCTION(cos)
TETHER_LANES_FUNCTION(tan)
TETHER_LANES_FUNCTION(asin)
TETHER_LANES_FUNCTION(acos)
TETHER_LANES_FUNCTION(atan)
TETHER_LANES_FUNCTION(sinh)
TETHER_LANES_FUNCTION(cosh)
TETHER_LANES_FUNCTION(tanh)
TETHER_LANES_FUNCTION(exp)
TETHER_LANES_FUNCTION(log)
#undef TETHER_LANES_FUNCTION
#define TETHER_LANES_FUNCTION2(f)                                               \
  template <int W>                                                              \
  Lanes<W> f(const Lanes<W>& a, const Lanes<W>& b) {                            \
    Lanes<W> r;                                                                 \
    for (int l = 0; l < W; ++l) r.v[l] = __builtin_##f(a.v[l], b.v[l]);         \
    return r;                                                                   \
  }                                                                             \
  template <int W>                                                              \
  Lanes<W> f(const Lanes<W>& a, Real b) {                                       \
    return f(a, Lanes<W>(b));                                                   \
  }                                                                             \
  template <int W>                                                              \
  Lanes<W> f(Real a, const Lanes<W>& b) {                                       \
    return f(Lanes<W>(a), b);                                                   \
  }
TETHER_LANES_FUNCTION2(pow)
TETHER_LANES_FUNCTION2(atan2)
#undef TETHER_LANES_FUNCTION2

}  // namespace simd
using simd::LaneMask;
using simd::Lanes;

// --- What the step code is written against: one spelling for Real and lanes.

template <int W>
struct LaneInts {  // an iteration count per lane
  int v[W];
};
template <int W>
struct LaneStatuses {  // a step's outcome per lane
  Status v[W];
};

template <class T>
struct LaneTraits {  // T = Real: one lane
  static constexpr int width = 1;
  using Mask = bool;
  using Int = int;
  using StatusT = Status;
};
template <int W>
struct LaneTraits<Lanes<W>> {
  static constexpr int width = W;
  using Mask = LaneMask<W>;
  using Int = LaneInts<W>;
  using StatusT = LaneStatuses<W>;
};

template <class T>
using Mask = typename LaneTraits<T>::Mask;
template <class T>
using LaneInt = typename LaneTraits<T>::Int;
template <class T>
using LaneStatus = typename LaneTraits<T>::StatusT;
template <class T>
constexpr int lane_count = LaneTraits<T>::width;

// Lanes per group on this build's host: as many doubles as one of its vector
// registers holds (a wider Lanes is split into several registers by the
// compiler, through memory: measured slower).
#if defined(__AVX512F__)
constexpr int cpu_lanes = 8;
#elif defined(__AVX__)
constexpr int cpu_lanes = 4;
#else
constexpr int cpu_lanes = 2;
#endif

// Lane l of x (a Real is its own lane 0).
TETHER_HD inline Real lane(Real x, int) { return x; }
template <int W>
Real lane(const Lanes<W>& x, int l) {
  return x.v[l];
}
// Lane l holds f(l) for l < count, and 0 beyond (a Real: f(0)).
template <class T, class F>
TETHER_HD T lanes_of(int count, const F& f) {
  if constexpr (lane_count<T> == 1) {
    return T(count > 0 ? f(0) : 0);
  } else {
    T r(Real(0));
    for (int l = 0; l < lane_count<T> && l < count; ++l) r.v[l] = f(l);
    return r;
  }
}
// 1 in lane l and 0 in the others (none when l is out of range): the seed of
// a pass's direction l.
template <class T>
TETHER_HD T unit_lane(int l) {
  return lanes_of<T>(lane_count<T>, [&](int j) { return Real(j == l); });
}

// The derivative part of a forward-mode dual number that carries `count`
// directions per pass (ad::Dual<Real, PassDirections<count>>, "vector mode"):
// on the host the narrowest lanes that hold them, at most cpu_lanes (more
// take several passes), so that the value is computed once for all of them
// where a pass per direction computes it each time; on a GPU thread, and
// for one direction, Real: one direction per pass (lanes of doubles per
// value would take the registers the step needs).
constexpr int pass_width(int count) {
  if (!std::is_same_v<Real, double>) return 1;  // a counting Real (bench/count_flops.cpp) counts a GPU thread's passes
  const int w = count <= 1 ? 1 : count <= 2 ? 2 : count <= 4 ? 4 : 8;
  return w < cpu_lanes ? w : cpu_lanes;
}
template <int width>
struct PassDirectionsOf {
  using type = Lanes<width>;
};
template <>
struct PassDirectionsOf<1> {
  using type = Real;
};
#if defined(__CUDA_ARCH__)
template <int count>
using PassDirections = Real;
#else
template <int count>
using PassDirections = typename PassDirectionsOf<pass_width(count)>::type;
#endif

// The same value in every lane.
template <class L, class V>
TETHER_HD L uniform(const V& value) {
  if constexpr (requires { L::v; }) {
    L r;
    for (auto& x : r.v) x = value;
    return r;
  } else {
    return L(value);
  }
}

TETHER_HD inline bool any(bool m) { return m; }
TETHER_HD inline bool none(bool m) { return !m; }
template <int W>
bool any(const LaneMask<W>& a) {
  bool r = false;
  for (int l = 0; l < W; ++l) r = r || a.m[l] != 0;
  return r;
}
template <int W>
bool none(const LaneMask<W>& a) {
  return !any(a);
}

TETHER_HD inline Real select(bool m, Real a, Real b) { return m ? a : b; }
template <int W>
Lanes<W> select(const LaneMask<W>& m, const Lanes<W>& a, const Lanes<W>& b) {
  return Lanes<W>::of(m.m != 0 ? a.v : b.v);
}
// x = select(m, value, x) coordinate by coordinate, in place: a vector's
// select assigned to x is a whole temporary copied over x (in lanes W * N
// doubles, a call of memcpy).
template <int N, class T>
TETHER_HD void assign_where(const Mask<T>& m, Vec<N, T>& x, const Id<Vec<N, T>>& value) {
  for (int i = 0; i < N; ++i) x[i] = select(m, value[i], x[i]);
}

// The lanes whose outcome is ok.
TETHER_HD inline bool is_ok(Status s) { return s == Status::ok; }
template <int W>
LaneMask<W> is_ok(const LaneStatuses<W>& s) {
  LaneMask<W> r;
  for (int l = 0; l < W; ++l) r.m[l] = s.v[l] == Status::ok ? -1 : 0;
  return r;
}

// Per lane, the first of two outcomes that is not ok (a step's stages in order).
TETHER_HD inline Status first_failure(Status a, Status b) { return a != Status::ok ? a : b; }
template <int W>
TETHER_HD LaneStatuses<W> first_failure(LaneStatuses<W> a, const LaneStatuses<W>& b) {
  for (int l = 0; l < W; ++l)
    if (a.v[l] == Status::ok) a.v[l] = b.v[l];
  return a;
}

// Sets what a mask selects: per lane for lanes, the value itself for Real.
template <class V>
TETHER_HD void set_where(bool m, V& x, const V& value) {
  if (m) x = value;
}
template <int W, class L, class V>
void set_where(const LaneMask<W>& m, L& x, const V& value) {
  for (int l = 0; l < W; ++l)
    if (m.m[l]) x.v[l] = value;
}
TETHER_HD inline void add_where(bool m, int& x, int d) {
  if (m) x += d;
}
template <int W>
void add_where(const LaneMask<W>& m, LaneInts<W>& x, int d) {
  for (int l = 0; l < W; ++l) x.v[l] += m.m[l] != 0 ? d : 0;
}
template <int W>
void add_where(const LaneMask<W>& m, LaneInts<W>& x, const LaneInts<W>& d) {
  for (int l = 0; l < W; ++l) x.v[l] += m.m[l] != 0 ? d.v[l] : 0;
}

// The Real helpers of types.hpp, lane by lane.
template <int W>
LaneMask<W> is_finite(const Lanes<W>& x) {
  return LaneMask<W>::of((x.v - x.v) == 0);
}
// By exponent bits (all ones: inf or NaN), or-ed: one integer operation a
// coordinate, where and-ing FP64 tests chains a compare's latency through all.
template <int N, int W>
LaneMask<W> all_finite(const Vec<N, Lanes<W>>& v) {
  using Bits = typename LaneMask<W>::Vector;
  constexpr long long exponent = 0x7ff0000000000000LL;
  Bits bad{};
  for (int i = 0; i < N; ++i) bad |= ((Bits)v[i].v & exponent) == exponent;
  return LaneMask<W>::of(bad == 0);
}
template <int N, int W>
Lanes<W> max_abs(const Vec<N, Lanes<W>>& v) {
  if constexpr (N == 0) {
    return Lanes<W>(Real(0));
  } else {
    Lanes<W> m = fabs(v[0]);
    for (int i = 1; i < N; ++i) {
      const auto a = fabs(v[i]).v;
      m.v = m.v > a ? m.v : a;  // as max_abs on Real (NaN included), lane by lane: one vmaxpd
    }
    return m;
  }
}

}  // namespace tether

namespace Eigen {
template <int W>
struct NumTraits<tether::simd::Lanes<W>> : GenericNumTraits<double> {
  using Real = tether::Lanes<W>;
  using NonInteger = tether::Lanes<W>;
  using Nested = tether::Lanes<W>;
  using Literal = tether::Lanes<W>;
  enum { IsComplex = 0, IsInteger = 0, IsSigned = 1, RequireInitialization = 0, ReadCost = W, AddCost = W, MulCost = W };
};
template <int W, typename Op>
struct ScalarBinaryOpTraits<tether::simd::Lanes<W>, double, Op> {
  using ReturnType = tether::Lanes<W>;
};
template <int W, typename Op>
struct ScalarBinaryOpTraits<double, tether::simd::Lanes<W>, Op> {
  using ReturnType = tether::Lanes<W>;
};
}  // namespace Eigen

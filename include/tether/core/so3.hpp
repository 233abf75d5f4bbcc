#pragma once
// SO(3) algebra for the Lie-group methods: hat/vee between R^3 and so(3), and
// two retractions tau: so(3) -> SO(3) (BM21 Example 2.7) with their
// right-trivialized inverse differentials d^R tau_x^-1, defined by
//   D tau(x)[eta] = hat(d^R tau_x(eta)) tau(x)   (BMS24 eq. (A.6)),
// so d^L tau_x^-1 = d^R tau_{-x}^-1 (tau(-x) = tau(x)^-1).
//
// Everything is written once over a scalar T (Real, or tether::ad::Dual for
// forward-mode derivatives) on the small register types V3/M3 below, since
// Eigen matrices of dual numbers are not device-safe; Real wrappers return
// Eigen fixed-size types.
#include <math.h>

#include "tether/core/dual.hpp"
#include "tether/core/types.hpp"

namespace tether {
namespace so3 {

template <class T>
struct V3 {
  T c[3];
  TETHER_HD T& operator[](int i) { return c[i]; }
  TETHER_HD const T& operator[](int i) const { return c[i]; }
};

template <class T>
struct M3 {
  T a[3][3];
  TETHER_HD T& operator()(int r, int c) { return a[r][c]; }
  TETHER_HD const T& operator()(int r, int c) const { return a[r][c]; }
};

template <class T>
TETHER_HD M3<T> identity() {
  M3<T> m;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) m(r, c) = T(r == c ? 1 : 0);
  return m;
}

template <class T>
TETHER_HD M3<T> hat(const V3<T>& x) {
  M3<T> m;
  m(0, 0) = T(0), m(0, 1) = -x[2], m(0, 2) = x[1];
  m(1, 0) = x[2], m(1, 1) = T(0), m(1, 2) = -x[0];
  m(2, 0) = -x[1], m(2, 1) = x[0], m(2, 2) = T(0);
  return m;
}

// The axial vector of the skew part: vee(hat(x)) = x.
template <class T>
TETHER_HD V3<T> vee(const M3<T>& m) {
  V3<T> x;
  x[0] = Real(0.5) * (m(2, 1) - m(1, 2));
  x[1] = Real(0.5) * (m(0, 2) - m(2, 0));
  x[2] = Real(0.5) * (m(1, 0) - m(0, 1));
  return x;
}

template <class T, class U>
TETHER_HD auto mul(const M3<T>& a, const M3<U>& b) -> M3<decltype(a(0, 0) * b(0, 0))> {
  M3<decltype(a(0, 0) * b(0, 0))> m;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) m(r, c) = a(r, 0) * b(0, c) + a(r, 1) * b(1, c) + a(r, 2) * b(2, c);
  return m;
}

template <class T, class U>
TETHER_HD auto mul(const M3<T>& a, const V3<U>& x) -> V3<decltype(a(0, 0) * x[0])> {
  V3<decltype(a(0, 0) * x[0])> y;
  for (int r = 0; r < 3; ++r) y[r] = a(r, 0) * x[0] + a(r, 1) * x[1] + a(r, 2) * x[2];
  return y;
}

// a^T x
template <class T, class U>
TETHER_HD auto mul_transpose(const M3<T>& a, const V3<U>& x) -> V3<decltype(a(0, 0) * x[0])> {
  V3<decltype(a(0, 0) * x[0])> y;
  for (int c = 0; c < 3; ++c) y[c] = a(0, c) * x[0] + a(1, c) * x[1] + a(2, c) * x[2];
  return y;
}

template <class T>
TETHER_HD M3<T> transpose(const M3<T>& a) {
  M3<T> m;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) m(r, c) = a(c, r);
  return m;
}

template <class T>
TETHER_HD T dot(const V3<T>& a, const V3<T>& b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

template <class T>
TETHER_HD V3<T> cross(const V3<T>& a, const V3<T>& b) {
  V3<T> c;
  c[0] = a[1] * b[2] - a[2] * b[1];
  c[1] = a[2] * b[0] - a[0] * b[2];
  c[2] = a[0] * b[1] - a[1] * b[0];
  return c;
}

// I + a hat(x) + b hat(x)^2 + c x x^T, the common shape of every map here
// (hat(x)^2 = x x^T - |x|^2 I).
template <class T>
TETHER_HD M3<T> rodrigues_form(const V3<T>& x, const T& a, const T& b, const T& c) {
  const T s = dot(x, x);
  M3<T> m;
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 3; ++k) m(r, k) = (b + c) * x[r] * x[k];
  for (int r = 0; r < 3; ++r) m(r, r) = m(r, r) + (T(1) - b * s);
  m(0, 1) = m(0, 1) - a * x[2], m(1, 0) = m(1, 0) + a * x[2];
  m(0, 2) = m(0, 2) + a * x[1], m(2, 0) = m(2, 0) - a * x[1];
  m(1, 2) = m(1, 2) - a * x[0], m(2, 1) = m(2, 1) + a * x[0];
  return m;
}

// The Lie exponential (Rodrigues), exp(x) = I + sin t/t hat(x) + (1 - cos t)/t^2 hat(x)^2,
// and dexp_x^-1 = I - hat(x)/2 + (1 - (t/2) cot(t/2))/t^2 hat(x)^2 (t = |x|),
// singular at t = 2 pi.
struct So3Exp {
  static constexpr const char* name = "exp";

  template <class T>
  TETHER_HD static M3<T> map_t(const V3<T>& x) {
    using ad::primal;
    const T s = dot(x, x);
    T a, b;
    if (primal(s) < Real(1e-2)) {  // series: no cancellation, truncation < 1e-18
      a = Real(1) + s * (Real(-1) / 6 + s * (Real(1) / 120 + s * (Real(-1) / 5040 + s * (Real(1) / 362880))));
      b = Real(0.5) + s * (Real(-1) / 24 + s * (Real(1) / 720 + s * (Real(-1) / 40320 + s * (Real(1) / 3628800))));
    } else {
      const T t = sqrt(s), sh = sin(Real(0.5) * t);
      a = sin(t) / t;
      b = Real(2) * sh * sh / s;  // (1 - cos t)/t^2 without the cancellation
    }
    return rodrigues_form(x, a, b, T(0));
  }

  template <class T>
  TETHER_HD static M3<T> dR_inv_t(const V3<T>& x) {
    using ad::primal;
    const T s = dot(x, x);
    T c;
    if (primal(s) < Real(1e-2))  // series: no cancellation, truncation < 1e-18
      c = Real(1) / 12 +
          s * (Real(1) / 720 + s * (Real(1) / 30240 + s * (Real(1) / 1209600 + s * (Real(1) / 47900160))));
    else {
      const T half = Real(0.5) * sqrt(s);
      c = (Real(1) - half * cos(half) / sin(half)) / s;
    }
    return rodrigues_form(x, T(Real(-0.5)), c, T(0));
  }

  TETHER_HD static Mat<3, 3> map(const Vec3& x);
  TETHER_HD static Mat<3, 3> dR_inv(const Vec3& x);
};

// The Cayley map cay(x) = (I - hat(x)/2)^-1 (I + hat(x)/2)
//   = I + 4/(4 + |x|^2) (hat(x) + hat(x)^2/2),
// and dcay_x^-1 = I - hat(x)/2 + x x^T/4 (BRM09): rational,
// defined on all of R^3.
struct So3Cayley {
  static constexpr const char* name = "cayley";

  template <class T>
  TETHER_HD static M3<T> map_t(const V3<T>& x) {
    const T f = Real(4) / (Real(4) + dot(x, x));
    return rodrigues_form(x, f, Real(0.5) * f, T(0));
  }

  template <class T>
  TETHER_HD static M3<T> dR_inv_t(const V3<T>& x) {
    return rodrigues_form(x, T(Real(-0.5)), T(0), T(Real(0.25)));
  }

  TETHER_HD static Mat<3, 3> map(const Vec3& x);
  TETHER_HD static Mat<3, 3> dR_inv(const Vec3& x);
};

// Conversions between the register types and Eigen's.
TETHER_HD inline V3<Real> from_eigen(const Vec3& x) {
  V3<Real> v;
  v[0] = x[0], v[1] = x[1], v[2] = x[2];
  return v;
}
TETHER_HD inline Vec3 to_eigen(const V3<Real>& x) { return Vec3(x[0], x[1], x[2]); }
TETHER_HD inline M3<Real> from_eigen(const Mat<3, 3>& a) {
  M3<Real> m;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) m(r, c) = a(r, c);
  return m;
}
TETHER_HD inline Mat<3, 3> to_eigen(const M3<Real>& a) {
  Mat<3, 3> m;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) m(r, c) = a(r, c);
  return m;
}

TETHER_HD inline Mat<3, 3> So3Exp::map(const Vec3& x) { return to_eigen(map_t(from_eigen(x))); }
TETHER_HD inline Mat<3, 3> So3Exp::dR_inv(const Vec3& x) { return to_eigen(dR_inv_t(from_eigen(x))); }
TETHER_HD inline Mat<3, 3> So3Cayley::map(const Vec3& x) { return to_eigen(map_t(from_eigen(x))); }
TETHER_HD inline Mat<3, 3> So3Cayley::dR_inv(const Vec3& x) { return to_eigen(dR_inv_t(from_eigen(x))); }

// Inverse of a 3 x 3 matrix by its adjugate; false when singular or not finite.
TETHER_HD inline bool invert(const M3<Real>& a, M3<Real>& inv) {
  M3<Real> adj;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) {
      const int r1 = (c + 1) % 3, r2 = (c + 2) % 3, c1 = (r + 1) % 3, c2 = (r + 2) % 3;
      adj(r, c) = a(r1, c1) * a(r2, c2) - a(r1, c2) * a(r2, c1);
    }
  const Real det = a(0, 0) * adj(0, 0) + a(0, 1) * adj(1, 0) + a(0, 2) * adj(2, 0);
  if (!(det != 0) || !is_finite(det)) return false;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) inv(r, c) = adj(r, c) / det;
  return true;
}

}  // namespace so3

// Eigen-typed hat/vee for callers outside the Lie-group code.
TETHER_HD inline Mat<3, 3> hat(const Vec3& x) { return so3::to_eigen(so3::hat(so3::from_eigen(x))); }
TETHER_HD inline Vec3 vee(const Mat<3, 3>& m) { return so3::to_eigen(so3::vee(so3::from_eigen(m))); }

using So3Exp = so3::So3Exp;
using So3Cayley = so3::So3Cayley;

}  // namespace tether

#pragma once
// Forward-mode dual numbers x = v + d eps (eps^2 = 0), nestable:
// Dual<Dual<Real>> carries the mixed second derivative (a hyper-dual number),
// which is how the Hessians that Newton needs are formed from a Hamiltonian
// written once, templated on its scalar. Hand-written because Eigen's
// AutoDiffScalar is not callable from device code (no EIGEN_DEVICE_FUNC).
// The derivative part may have a type of its own: Dual<Real, Lanes<W>>
// carries W directions with the value computed once (vector mode;
// PassDirections in core/lanes.hpp).
//
// The functions live in tether::ad so that plain sin/cos/sqrt on doubles in
// namespace tether keep resolving to the C library; a system's templated code
// calls them unqualified and argument-dependent lookup picks the right one.
#include <math.h>

#include "tether/core/types.hpp"

namespace tether {
namespace ad {

template <class T, class D = T>
struct Dual {
  T v{};
  D d{};
  TETHER_HD Dual() {}
  TETHER_HD Dual(Real x) : v(x), d(0) {}  // a constant
  TETHER_HD Dual(T value, D derivative) : v(value), d(derivative) {}
};

// The plain value under any nesting depth (for branches on magnitudes).
TETHER_HD inline Real primal(Real x) { return x; }
template <class T, class D>
TETHER_HD Real primal(const Dual<T, D>& x) {
  return primal(x.v);
}

template <class T, class D>
TETHER_HD Dual<T, D> operator-(const Dual<T, D>& a) {
  return {-a.v, -a.d};
}
template <class T, class D>
TETHER_HD Dual<T, D> operator+(const Dual<T, D>& a, const Dual<T, D>& b) {
  return {a.v + b.v, a.d + b.d};
}
template <class T, class D>
TETHER_HD Dual<T, D> operator-(const Dual<T, D>& a, const Dual<T, D>& b) {
  return {a.v - b.v, a.d - b.d};
}
template <class T, class D>
TETHER_HD Dual<T, D> operator*(const Dual<T, D>& a, const Dual<T, D>& b) {
  return {a.v * b.v, a.d * b.v + a.v * b.d};
}
template <class T, class D>
TETHER_HD Dual<T, D> operator/(const Dual<T, D>& a, const Dual<T, D>& b) {
  const T inv = T(1) / b.v;
  const T q = a.v * inv;
  return {q, (a.d - q * b.d) * inv};
}
// Mixed with plain reals (any nesting level converts through Dual(Real)).
template <class T, class D>
TETHER_HD Dual<T, D> operator+(const Dual<T, D>& a, Real b) {
  return {a.v + b, a.d};
}
template <class T, class D>
TETHER_HD Dual<T, D> operator+(Real a, const Dual<T, D>& b) {
  return {a + b.v, b.d};
}
template <class T, class D>
TETHER_HD Dual<T, D> operator-(const Dual<T, D>& a, Real b) {
  return {a.v - b, a.d};
}
template <class T, class D>
TETHER_HD Dual<T, D> operator-(Real a, const Dual<T, D>& b) {
  return {a - b.v, -b.d};
}
template <class T, class D>
TETHER_HD Dual<T, D> operator*(const Dual<T, D>& a, Real b) {
  return {a.v * b, a.d * b};
}
template <class T, class D>
TETHER_HD Dual<T, D> operator*(Real a, const Dual<T, D>& b) {
  return {a * b.v, a * b.d};
}
template <class T, class D>
TETHER_HD Dual<T, D> operator/(const Dual<T, D>& a, Real b) {
  return {a.v / b, a.d / b};
}
template <class T, class D>
TETHER_HD Dual<T, D> operator/(Real a, const Dual<T, D>& b) {
  return Dual<T, D>(a) / b;
}
template <class T, class D>
TETHER_HD Dual<T, D>& operator+=(Dual<T, D>& a, const Dual<T, D>& b) {
  return a = a + b;
}
template <class T, class D>
TETHER_HD Dual<T, D>& operator-=(Dual<T, D>& a, const Dual<T, D>& b) {
  return a = a - b;
}
template <class T, class D>
TETHER_HD Dual<T, D>& operator*=(Dual<T, D>& a, const Dual<T, D>& b) {
  return a = a * b;
}

template <class T, class D>
TETHER_HD Dual<T, D> sin(const Dual<T, D>& a) {
  using ::cos;
  using ::sin;
  return {sin(a.v), cos(a.v) * a.d};
}
template <class T, class D>
TETHER_HD Dual<T, D> cos(const Dual<T, D>& a) {
  using ::cos;
  using ::sin;
  return {cos(a.v), -sin(a.v) * a.d};
}
template <class T, class D>
TETHER_HD Dual<T, D> sqrt(const Dual<T, D>& a) {
  using ::sqrt;
  const T r = sqrt(a.v);
  return {r, a.d / (2 * r)};
}
// The other functions a declared system's expressions may call
// (src/expr/declared_system.hpp), by the chain rule.
template <class T, class D>
TETHER_HD Dual<T, D> tan(const Dual<T, D>& a) {
  using ::tan;
  const T t = tan(a.v);
  return {t, (1 + t * t) * a.d};
}
template <class T, class D>
TETHER_HD Dual<T, D> asin(const Dual<T, D>& a) {
  using ::asin;
  using ::sqrt;
  return {asin(a.v), a.d / sqrt(1 - a.v * a.v)};
}
template <class T, class D>
TETHER_HD Dual<T, D> acos(const Dual<T, D>& a) {
  using ::acos;
  using ::sqrt;
  return {acos(a.v), -a.d / sqrt(1 - a.v * a.v)};
}
template <class T, class D>
TETHER_HD Dual<T, D> atan(const Dual<T, D>& a) {
  using ::atan;
  return {atan(a.v), a.d / (1 + a.v * a.v)};
}
template <class T, class D>
TETHER_HD Dual<T, D> sinh(const Dual<T, D>& a) {
  using ::cosh;
  using ::sinh;
  return {sinh(a.v), cosh(a.v) * a.d};
}
template <class T, class D>
TETHER_HD Dual<T, D> cosh(const Dual<T, D>& a) {
  using ::cosh;
  using ::sinh;
  return {cosh(a.v), sinh(a.v) * a.d};
}
template <class T, class D>
TETHER_HD Dual<T, D> tanh(const Dual<T, D>& a) {
  using ::tanh;
  const T t = tanh(a.v);
  return {t, (1 - t * t) * a.d};
}
template <class T, class D>
TETHER_HD Dual<T, D> exp(const Dual<T, D>& a) {
  using ::exp;
  const T e = exp(a.v);
  return {e, e * a.d};
}
template <class T, class D>
TETHER_HD Dual<T, D> log(const Dual<T, D>& a) {
  using ::log;
  return {log(a.v), a.d / a.v};
}
// a^b = exp(b log a): d = a^b (b' log a + b a' / a); with a constant exponent, b a^(b-1) a'.
template <class T, class D>
TETHER_HD Dual<T, D> pow(const Dual<T, D>& a, Real b) {
  using ::pow;
  return {pow(a.v, b), b * pow(a.v, b - 1) * a.d};
}
template <class T, class D>
TETHER_HD Dual<T, D> pow(Real a, const Dual<T, D>& b) {
  using ::log;
  using ::pow;
  const T r = pow(a, b.v);
  return {r, r * log(a) * b.d};
}
template <class T, class D>
TETHER_HD Dual<T, D> pow(const Dual<T, D>& a, const Dual<T, D>& b) {
  using ::log;
  using ::pow;
  const T r = pow(a.v, b.v);
  return {r, r * (b.d * log(a.v) + b.v * a.d / a.v)};
}
// atan2(y, x): d = (x y' - y x') / (x^2 + y^2).
template <class T, class D>
TETHER_HD Dual<T, D> atan2(const Dual<T, D>& y, const Dual<T, D>& x) {
  using ::atan2;
  return {atan2(y.v, x.v), (x.v * y.d - y.v * x.d) / (x.v * x.v + y.v * y.v)};
}
template <class T, class D>
TETHER_HD Dual<T, D> atan2(const Dual<T, D>& y, Real x) {
  return atan2(y, Dual<T, D>(x));
}
template <class T, class D>
TETHER_HD Dual<T, D> atan2(Real y, const Dual<T, D>& x) {
  return atan2(Dual<T, D>(y), x);
}

}  // namespace ad

// Value, gradient and Hessian of f: R^M -> R at x, f called as f(const T (&z)[M])
// for T = Dual<Dual<Real>>: one hyper-dual pass per pair i <= j.
template <int M, class F>
TETHER_HD void hessian_of(const F& f, const Vec<M>& x, Real& value, Vec<M>& grad, Mat<M, M>& hess) {
  using D = ad::Dual<Real>;
  using H = ad::Dual<D>;
  for (int i = 0; i < M; ++i) {
    for (int j = i; j < M; ++j) {
      H z[M];
      for (int k = 0; k < M; ++k) z[k] = H(D(x[k], k == j ? 1 : 0), D(k == i ? 1 : 0, 0));
      const H r = f(z);
      hess(i, j) = hess(j, i) = r.d.d;
      if (i == j) grad[i] = r.d.v;
      value = r.v.v;
    }
  }
}

// Gradient of f at x, f called with T = Dual<Real>: one pass per component.
template <int M, class F>
TETHER_HD Vec<M> gradient_of(const F& f, const Vec<M>& x) {
  using D = ad::Dual<Real>;
  Vec<M> grad;
  for (int i = 0; i < M; ++i) {
    D z[M];
    for (int k = 0; k < M; ++k) z[k] = D(x[k], k == i ? 1 : 0);
    grad[i] = f(z).d;
  }
  return grad;
}

}  // namespace tether

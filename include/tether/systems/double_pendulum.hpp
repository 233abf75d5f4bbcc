#pragma once
// Planar double pendulum in Cartesian coordinates q = (x1, y1, x2, y2) of the
// two bobs, with the rod lengths as two holonomic constraints and gravity
// along -y.
#include "tether/core/parameters.hpp"
#include <cmath>

#include "tether/core/small_solve.hpp"

namespace tether {

struct DoublePendulum {
  static constexpr const char* name = "double_pendulum";
  static constexpr const char* description = "planar double pendulum in Cartesian coordinates, q in R^4, two rod constraints";
  static constexpr const char* citation = "the classical double pendulum";
  static constexpr int dof = 4;
  static constexpr int constraint_count = 2;
  static constexpr bool runs_in_lanes = true;  // its step functions take any scalar (core/lanes.hpp)
  using Gram = DenseMatrix<2>;

  struct Parameters {
    Real mass1 = 1.0, mass2 = 1.0;
    Real length1 = 1.0, length2 = 1.0;
    Real gravity = 9.81;

    template <class V>
    void describe(V& v) {
      v.real("mass1", mass1, Range::positive(), "mass of the inner bob");
      v.real("mass2", mass2, Range::positive(), "mass of the outer bob");
      v.real("length1", length1, Range::positive(), "length of the inner rod");
      v.real("length2", length2, Range::positive(), "length of the outer rod");
      v.real("gravity", gravity, Range::any(), "gravitational acceleration along -y");
    }
  };
  Parameters prm;

  TETHER_HD Real potential(const Vec<4>& q) const { return prm.gravity * (prm.mass1 * q[1] + prm.mass2 * q[3]); }
  // The step functions take any scalar (Real, or Lanes<W> on the cpu
  // backend) and any Eigen expression of one.
  template <class X>
  using QOf = Vec<4, typename X::Scalar>;
  template <class X>
  TETHER_HD QOf<X> potential_gradient(const Eigen::MatrixBase<X>&) const {
    using T = typename X::Scalar;
    return QOf<X>(T(Real(0)), T(prm.gravity * prm.mass1), T(Real(0)), T(prm.gravity * prm.mass2));
  }

  TETHER_HD Real length_scale() const { return prm.length1 > prm.length2 ? prm.length1 : prm.length2; }

  // Characteristic energy (m1 + m2) |g| (L1 + L2).
  TETHER_HD Real energy_scale() const {
    return (prm.mass1 + prm.mass2) * fabs(prm.gravity) * (prm.length1 + prm.length2);
  }

  TETHER_HD Vec<4> mass_diagonal() const { return Vec<4>(prm.mass1, prm.mass1, prm.mass2, prm.mass2); }
  template <class X>
  TETHER_HD QOf<X> mass_times(const Eigen::MatrixBase<X>& v) const {
    return QOf<X>(v[0] * prm.mass1, v[1] * prm.mass1, v[2] * prm.mass2, v[3] * prm.mass2);
  }
  // Reciprocals of parameters, not divisions by them, here and below: the
  // compiler hoists them out of the step loop, and an FP64 division costs a
  // GPU thread about ten dependent FMAs (bench/README.md, "On an H200").
  template <class X>
  TETHER_HD QOf<X> inverse_mass_times(const Eigen::MatrixBase<X>& p) const {
    const Real i1 = Real(1) / prm.mass1, i2 = Real(1) / prm.mass2;
    return QOf<X>(p[0] * i1, p[1] * i1, p[2] * i2, p[3] * i2);
  }
  TETHER_HD Vec<4> sqrt_mass_times(const Vec<4>& v) const { return v.cwiseProduct(mass_diagonal().cwiseSqrt()); }

  // g1 = (|r1|^2 - L1^2) / (2 L1), g2 = (|r2 - r1|^2 - L2^2) / (2 L2).
  template <class X>
  TETHER_HD Vec<2, typename X::Scalar> constraints(const Eigen::MatrixBase<X>& q) const {
    using T = typename X::Scalar;
    const T dx = q[2] - q[0], dy = q[3] - q[1];
    return Vec<2, T>((q[0] * q[0] + q[1] * q[1] - prm.length1 * prm.length1) * (Real(0.5) / prm.length1),
                     (dx * dx + dy * dy - prm.length2 * prm.length2) * (Real(0.5) / prm.length2));
  }
  // Rows of G: [r1/L1, 0], [-(r2-r1)/L2, (r2-r1)/L2].
  template <class X, class Y>
  TETHER_HD Vec<2, typename X::Scalar> constraint_jacobian_times(const Eigen::MatrixBase<X>& q,
                                                                  const Eigen::MatrixBase<Y>& v) const {
    using T = typename X::Scalar;
    const T dx = q[2] - q[0], dy = q[3] - q[1];
    return Vec<2, T>((q[0] * v[0] + q[1] * v[1]) * (Real(1) / prm.length1),
                     (dx * (v[2] - v[0]) + dy * (v[3] - v[1])) * (Real(1) / prm.length2));
  }
  template <class X, class Y>
  TETHER_HD QOf<X> constraint_transpose_times(const Eigen::MatrixBase<X>& q, const Eigen::MatrixBase<Y>& l) const {
    using T = typename X::Scalar;
    const T a = l[0] * (Real(1) / prm.length1), b = l[1] * (Real(1) / prm.length2);
    const T dx = q[2] - q[0], dy = q[3] - q[1];
    return QOf<X>(a * q[0] - b * dx, a * q[1] - b * dy, b * dx, b * dy);
  }
  template <class X, class Y>
  TETHER_HD DenseMatrix<2, typename X::Scalar> gram(const Eigen::MatrixBase<X>& qa, const Eigen::MatrixBase<Y>& qb) const {
    using T = typename X::Scalar;
    const T ax = qa[2] - qa[0], ay = qa[3] - qa[1], bx = qb[2] - qb[0], by = qb[3] - qb[1];
    const Real l1 = prm.length1, l2 = prm.length2, m1 = prm.mass1, m2 = prm.mass2;
    DenseMatrix<2, T> m;
    const Real c11 = Real(1) / (m1 * l1 * l1), c12 = Real(1) / (m1 * l1 * l2), c22 = (1 / m1 + 1 / m2) / (l2 * l2);
    m.a(0, 0) = (qa[0] * qb[0] + qa[1] * qb[1]) * c11;
    m.a(0, 1) = -(qa[0] * bx + qa[1] * by) * c12;
    m.a(1, 0) = -(ax * qb[0] + ay * qb[1]) * c12;
    m.a(1, 1) = (ax * bx + ay * by) * c22;
    return m;
  }

  // Thermal sampling keeps both rod angles uniform: the Boltzmann weight is
  // not applied to this system's positions (momenta are still thermal).
  template <class Rng>
  TETHER_HD Vec<4> thermal_configuration(Rng& rng, Real) const {
    return random_configuration(rng);
  }

  // Both rod angles uniform on the circle.
  template <class Rng>
  TETHER_HD Vec<4> random_configuration(Rng& rng) const {
    const Real two_pi = Real(6.283185307179586476925286766559);
    const Real t1 = two_pi * rng.uniform(), t2 = two_pi * rng.uniform();
    const Real x1 = prm.length1 * sin(t1), y1 = -prm.length1 * cos(t1);
    return Vec<4>(x1, y1, x1 + prm.length2 * sin(t2), y1 - prm.length2 * cos(t2));
  }
};

}  // namespace tether

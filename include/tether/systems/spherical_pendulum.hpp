#pragma once
// Spherical pendulum: a point mass on a massless rod, q in R^3, |q| = length,
// uniform gravity along -z. The vertical angular momentum q_x p_y - q_y p_x is
// a first integral (rotations about z leave V and g invariant).
#include "tether/core/parameters.hpp"
#include <cmath>

#include "tether/core/random.hpp"
#include "tether/core/small_solve.hpp"

namespace tether {

struct SphericalPendulum {
  static constexpr const char* name = "spherical_pendulum";
  static constexpr const char* description = "point mass on a massless rod, q in R^3 with |q| = length, gravity along -z";
  static constexpr const char* citation = "the classical spherical pendulum";
  static constexpr int dof = 3;               // ambient coordinates q
  static constexpr int constraint_count = 1;  // holonomic constraints g(q) = 0
  static constexpr bool runs_in_lanes = true;  // its step functions take any scalar (core/lanes.hpp)
  using Gram = DenseMatrix<1>;

  struct Parameters {
    Real mass = 1.0;
    Real length = 1.0;
    Real gravity = 9.81;

    template <class V>
    void describe(V& v) {
      v.real("mass", mass, Range::positive(), "mass of the bob");
      v.real("length", length, Range::positive(), "rod length: the radius of the sphere");
      v.real("gravity", gravity, Range::any(), "gravitational acceleration along -z");
    }
  };
  Parameters prm;

  TETHER_HD Real potential(const Vec<3>& q) const { return prm.mass * prm.gravity * q[2]; }
  // The step functions take any scalar (Real, or Lanes<W> on the cpu
  // backend) and any Eigen expression of one.
  template <class X>
  using VecOf = Vec<3, typename X::Scalar>;

  template <class X>
  TETHER_HD VecOf<X> potential_gradient(const Eigen::MatrixBase<X>&) const {
    using T = typename X::Scalar;
    return VecOf<X>(T(Real(0)), T(Real(0)), T(prm.mass * prm.gravity));
  }

  TETHER_HD Real length_scale() const { return prm.length; }
  TETHER_HD Real sphere_radius() const { return prm.length; }

  // Characteristic energy m |g| L: keeps relative energy errors meaningful
  // for states whose energy is near zero.
  TETHER_HD Real energy_scale() const { return prm.mass * fabs(prm.gravity) * prm.length; }

  template <class X>
  TETHER_HD VecOf<X> mass_times(const Eigen::MatrixBase<X>& v) const {
    return prm.mass * v;
  }
  // Reciprocals of parameters, not divisions by them, here and below: the
  // compiler hoists them out of the step loop, and an FP64 division costs a
  // GPU thread about ten dependent FMAs (bench/README.md, "On an H200").
  template <class X>
  TETHER_HD VecOf<X> inverse_mass_times(const Eigen::MatrixBase<X>& p) const {
    return p * (Real(1) / prm.mass);
  }
  TETHER_HD Vec<3> sqrt_mass_times(const Vec<3>& v) const { return sqrt(prm.mass) * v; }

  // g(q) = (|q|^2 - L^2) / (2L): in length units, ~ |q| - L near the sphere.
  template <class X>
  TETHER_HD Vec<1, typename X::Scalar> constraints(const Eigen::MatrixBase<X>& q) const {
    return Vec<1, typename X::Scalar>((q.squaredNorm() - prm.length * prm.length) * (Real(0.5) / prm.length));
  }
  // G(q) = q^T / L.
  template <class X, class Y>
  TETHER_HD Vec<1, typename X::Scalar> constraint_jacobian_times(const Eigen::MatrixBase<X>& q,
                                                                  const Eigen::MatrixBase<Y>& v) const {
    return Vec<1, typename X::Scalar>(q.dot(v) * (Real(1) / prm.length));
  }
  template <class X, class Y>
  TETHER_HD VecOf<X> constraint_transpose_times(const Eigen::MatrixBase<X>& q, const Eigen::MatrixBase<Y>& lambda) const {
    return q * (lambda[0] * (Real(1) / prm.length));
  }
  // G(qa) M^-1 G(qb)^T.
  template <class X, class Y>
  TETHER_HD DenseMatrix<1, typename X::Scalar> gram(const Eigen::MatrixBase<X>& qa, const Eigen::MatrixBase<Y>& qb) const {
    DenseMatrix<1, typename X::Scalar> m;
    m.a(0, 0) = qa.dot(qb) * (Real(1) / (prm.mass * prm.length * prm.length));
    return m;
  }

  // A configuration on the sphere, uniform in direction.
  template <class Rng>
  TETHER_HD Vec<3> random_configuration(Rng& rng) const {
    return prm.length * uniform_direction(rng);
  }

  // A configuration from the Boltzmann distribution exp(-m g z / kT) on the
  // sphere (exact: the area element is uniform in z): s = z + L has density
  // ~ exp(-a s) on [0, 2L], a = m g / kT, sampled by inverting its CDF.
  template <class Rng>
  TETHER_HD Vec<3> thermal_configuration(Rng& rng, Real kT) const {
    const Real L = prm.length, u = rng.uniform();
    const Real phi = Real(6.283185307179586476925286766559) * rng.uniform();
    Real s;
    if (kT <= 0)
      s = prm.gravity > 0 ? Real(0) : (prm.gravity < 0 ? 2 * L : 2 * L * u);
    else {
      const Real a = prm.mass * prm.gravity / kT;
      s = fabs(a * L) < Real(1e-12) ? 2 * L * u : -log1p(u * expm1(-2 * a * L)) / a;
    }
    const Real z = s - L, r = sqrt(fmax(Real(0), L * L - z * z));
    return Vec<3>(r * cos(phi), r * sin(phi), z);
  }

  TETHER_HD static Real vertical_angular_momentum(const Vec<3>& q, const Vec<3>& p) {
    return q[0] * p[1] - q[1] * p[0];
  }
};

}  // namespace tether

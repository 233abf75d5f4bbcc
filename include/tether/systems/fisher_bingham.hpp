#pragma once
// A statistical target on the unit sphere: the Fisher-Bingham density
//   exp(kappa mu.q + q^T A q) sigma(dq) on S^2 = {|q| = 1}
// of directional statistics (Ken82, here with a general symmetric A), sampled by
// `tether sample` at kT = 1 as exp(-V/kT) with
//   V(q) = -kappa mu.q - q^T A q,   M = I,
// so that sigma_N is the round surface measure. Kent's FB5 is the case
// A = beta (g2 g2^T - g3 g3^T) with (mu, g2, g3) orthonormal; von Mises-Fisher
// is A = 0 and Bingham kappa = 0. As a mechanical system it is a unit mass on
// the sphere in a linear plus quadratic potential (with kappa = 0 and A
// diagonal, C. Neumann's integrable problem, Mos80).
#include "tether/core/parameters.hpp"
#include <cmath>

#include "tether/core/random.hpp"
#include "tether/core/small_solve.hpp"

namespace tether {

struct FisherBingham {
  static constexpr const char* name = "fisher_bingham";
  static constexpr const char* description =
      "Fisher-Bingham density exp(kappa mu.q + q^T A q) on the unit sphere S^2 (directional statistics), V = -log "
      "density, M = I";
  static constexpr const char* citation = "Ken82";
  static constexpr int dof = 3;
  static constexpr int constraint_count = 1;
  static constexpr bool runs_in_lanes = true;  // its step functions take any scalar (core/lanes.hpp)
  using Gram = DenseMatrix<1>;

  struct Parameters {
    Real kappa = 2.0;
    Real mean[3] = {0, 0, 1};
    Real bingham[6] = {0, 0, 0, 0, 0, 0};  // A11, A22, A33, A12, A13, A23

    template <class V>
    void describe(V& v) {
      v.real("kappa", kappa, Range::non_negative(), "concentration about the mean direction");
      v.reals("mean", mean, "mean direction mu (normalised; any nonzero vector)");
      v.reals("bingham", bingham, "the symmetric matrix A as A11, A22, A33, A12, A13, A23");
      v.check(mean[0] * mean[0] + mean[1] * mean[1] + mean[2] * mean[2] > 0 ? nullptr : "must not be the zero vector",
              "mean");
    }
  };
  Parameters prm;

  TETHER_HD Vec<3> mean_direction() const {
    const Vec<3> m(prm.mean[0], prm.mean[1], prm.mean[2]);
    return m / m.norm();
  }
  TETHER_HD Mat<3, 3> bingham_matrix() const {
    const Real* b = prm.bingham;
    Mat<3, 3> a;
    a << b[0], b[3], b[4], b[3], b[1], b[5], b[4], b[5], b[2];
    return a;
  }

  TETHER_HD Real potential(const Vec<3>& q) const {
    return -prm.kappa * mean_direction().dot(q) - q.dot(bingham_matrix() * q);
  }
  // The step functions take any scalar (Real, or Lanes<W> on the cpu
  // backend) and any Eigen expression of one.
  template <class X>
  using VecOf = Vec<3, typename X::Scalar>;

  // -kappa mu - 2 A q, A q row by row.
  template <class X>
  TETHER_HD VecOf<X> potential_gradient(const Eigen::MatrixBase<X>& q_in) const {
    const VecOf<X> q = q_in;
    const Vec<3> mu = mean_direction();
    const Mat<3, 3> a = bingham_matrix();
    VecOf<X> g;
    for (int i = 0; i < 3; ++i) g[i] = -prm.kappa * mu[i] - 2 * (a(i, 0) * q[0] + a(i, 1) * q[1] + a(i, 2) * q[2]);
    return g;
  }

  TETHER_HD Real length_scale() const { return 1; }
  TETHER_HD Real sphere_radius() const { return 1; }
  // The spread of V over the sphere, at most kappa + 2 |A|: keeps relative
  // energy errors meaningful (1 for the uniform density).
  TETHER_HD Real energy_scale() const {
    const Real* b = prm.bingham;
    Real a = 0;
    for (int k = 0; k < 6; ++k) a += fabs(b[k]);
    return prm.kappa + 2 * a > 0 ? prm.kappa + 2 * a : Real(1);
  }

  template <class X>
  TETHER_HD VecOf<X> mass_times(const Eigen::MatrixBase<X>& v) const {
    return v;
  }
  template <class X>
  TETHER_HD VecOf<X> inverse_mass_times(const Eigen::MatrixBase<X>& p) const {
    return p;
  }
  TETHER_HD Vec<3> sqrt_mass_times(const Vec<3>& v) const { return v; }

  // g(q) = (|q|^2 - 1) / 2; G(q) = q^T.
  template <class X>
  TETHER_HD Vec<1, typename X::Scalar> constraints(const Eigen::MatrixBase<X>& q) const {
    return Vec<1, typename X::Scalar>((q.squaredNorm() - Real(1)) * Real(0.5));
  }
  template <class X, class Y>
  TETHER_HD Vec<1, typename X::Scalar> constraint_jacobian_times(const Eigen::MatrixBase<X>& q,
                                                                  const Eigen::MatrixBase<Y>& v) const {
    return Vec<1, typename X::Scalar>(q.dot(v));
  }
  template <class X, class Y>
  TETHER_HD VecOf<X> constraint_transpose_times(const Eigen::MatrixBase<X>& q, const Eigen::MatrixBase<Y>& lambda) const {
    return q * lambda[0];
  }
  // G(qa) M^-1 G(qb)^T.
  template <class X, class Y>
  TETHER_HD DenseMatrix<1, typename X::Scalar> gram(const Eigen::MatrixBase<X>& qa, const Eigen::MatrixBase<Y>& qb) const {
    DenseMatrix<1, typename X::Scalar> m;
    m.a(0, 0) = qa.dot(qb);
    return m;
  }

  // Uniform on the sphere.
  template <class Rng>
  TETHER_HD Vec<3> random_configuration(Rng& rng) const {
    return uniform_direction(rng);
  }
  // The `thermal` start: uniform, not weighted by the density (a start for
  // `tether sample`'s warm-up; the canonical starts of `tether run` are exact).
  template <class Rng>
  TETHER_HD Vec<3> thermal_configuration(Rng& rng, Real) const {
    return random_configuration(rng);
  }
};

}  // namespace tether

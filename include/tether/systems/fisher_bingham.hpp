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
  TETHER_HD Vec<3> potential_gradient(const Vec<3>& q) const {
    return -prm.kappa * mean_direction() - 2 * (bingham_matrix() * q);
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

  TETHER_HD Vec<3> mass_times(const Vec<3>& v) const { return v; }
  TETHER_HD Vec<3> inverse_mass_times(const Vec<3>& p) const { return p; }
  TETHER_HD Vec<3> sqrt_mass_times(const Vec<3>& v) const { return v; }

  // g(q) = (|q|^2 - 1) / 2; G(q) = q^T.
  TETHER_HD Vec<1> constraints(const Vec<3>& q) const { return Vec<1>((q.squaredNorm() - 1) / 2); }
  TETHER_HD Vec<1> constraint_jacobian_times(const Vec<3>& q, const Vec<3>& v) const { return Vec<1>(q.dot(v)); }
  TETHER_HD Vec<3> constraint_transpose_times(const Vec<3>& q, const Vec<1>& lambda) const { return q * lambda[0]; }
  TETHER_HD Gram gram(const Vec<3>& qa, const Vec<3>& qb) const {
    Gram m;
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

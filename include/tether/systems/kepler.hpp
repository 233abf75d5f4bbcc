#pragma once
// Planar Kepler problem: one body of mass m about a fixed centre,
// H = |p|^2 / (2m) + V(q),  V(q) = -mu m / |q|,  q, p in R^2.
// The unconstrained member of the holonomic family (constraint_count = 0):
// the constraint functions return empty vectors, so SHAKE/RATTLE-type methods
// reduce to their unconstrained cores (RATTLE = Stormer-Verlet), and the
// retraction-map methods of BM21, which need a vector space Q, apply.
// First integrals: energy, angular momentum q x p, Laplace-Runge-Lenz vector.
#include "tether/core/parameters.hpp"
#include <cmath>

#include "tether/core/types.hpp"

namespace tether {

struct Kepler {
  static constexpr const char* name = "kepler";
  static constexpr const char* description = "planar Kepler problem, q in R^2, no constraints";
  static constexpr const char* citation = "BM21 Examples 5.2, 5.3";
  static constexpr int dof = 2;
  static constexpr int constraint_count = 0;

  // No constraints: the 0 x 0 Gram matrix solves every (empty) system.
  struct Gram {
    TETHER_HD bool solve(const Vec<0>&, Vec<0>&) const { return true; }
  };

  struct Parameters {
    Real mass = 1.0;
    Real mu = 1.0;  // G M of the centre (length^3 / time^2)

    template <class V>
    void describe(V& v) {
      v.real("mass", mass, Range::positive(), "mass of the orbiting body");
      v.real("mu", mu, Range::positive(), "G M of the centre (length^3 / time^2)");
    }
  };
  Parameters prm;

  TETHER_HD Real potential(const Vec<2>& q) const { return -prm.mu * prm.mass / q.norm(); }
  TETHER_HD Vec<2> potential_gradient(const Vec<2>& q) const {
    const Real r2 = q.squaredNorm(), r = sqrt(r2);
    return (prm.mu * prm.mass / (r2 * r)) * q;
  }
  // Hess V = mu m (I / r^3 - 3 q q^T / r^5): the Jacobian the implicit
  // retraction methods (theta, Newmark) need in their Newton solves.
  TETHER_HD Mat<2, 2> potential_hessian(const Vec<2>& q) const {
    const Real r2 = q.squaredNorm(), r = sqrt(r2), c = prm.mu * prm.mass / (r2 * r);
    Mat<2, 2> k = Mat<2, 2>::Identity() * c;
    k -= (3 * c / r2) * (q * q.transpose());
    return k;
  }

  // mu fixes only length^3 / time^2, so the problem has no length of its own:
  // tolerances and sampled rings use unit length (the roundoff floor
  // eps |q| in constraint_tolerance takes over for wide orbits).
  TETHER_HD Real length_scale() const { return 1; }
  // |V| at unit distance.
  TETHER_HD Real energy_scale() const { return fabs(prm.mu) * prm.mass; }

  TETHER_HD Vec<2> mass_times(const Vec<2>& v) const { return prm.mass * v; }
  TETHER_HD Vec<2> inverse_mass_times(const Vec<2>& p) const { return p / prm.mass; }
  TETHER_HD Vec<2> sqrt_mass_times(const Vec<2>& v) const { return sqrt(prm.mass) * v; }

  TETHER_HD Vec<0> constraints(const Vec<2>&) const { return Vec<0>(); }
  TETHER_HD Vec<0> constraint_jacobian_times(const Vec<2>&, const Vec<2>&) const { return Vec<0>(); }
  TETHER_HD Vec<2> constraint_transpose_times(const Vec<2>&, const Vec<0>&) const { return Vec<2>::Zero(); }
  TETHER_HD Gram gram(const Vec<2>&, const Vec<2>&) const { return Gram(); }

  // A point on the unit ring, uniform in angle.
  template <class Rng>
  TETHER_HD Vec<2> random_configuration(Rng& rng) const {
    const Real phi = Real(6.283185307179586476925286766559) * rng.uniform();
    return Vec<2>(cos(phi), sin(phi));
  }

  // The Boltzmann weight exp(mu m / (r kT)) is not normalizable at r -> 0,
  // so thermal positions are the unit ring too; add circular_momentum(q) to
  // the thermal (Maxwell) momenta to sample bound orbits about circular ones
  // (Maxwell momenta about zero start near-radial plunges into the centre).
  template <class Rng>
  TETHER_HD Vec<2> thermal_configuration(Rng& rng, Real) const {
    return random_configuration(rng);
  }

  // The momentum of the counter-clockwise circular orbit through q.
  TETHER_HD Vec<2> circular_momentum(const Vec<2>& q) const {
    const Real r = q.norm();
    return (prm.mass * sqrt(prm.mu / r) / r) * Vec<2>(-q[1], q[0]);
  }

  TETHER_HD static Real angular_momentum(const Vec<2>& q, const Vec<2>& p) { return q[0] * p[1] - q[1] * p[0]; }

  // A = p x L e_z - mu m^2 q / |q| (constant along every Kepler orbit).
  TETHER_HD Vec<2> runge_lenz(const Vec<2>& q, const Vec<2>& p) const {
    const Real l = angular_momentum(q, p);
    return Vec<2>(p[1] * l, -p[0] * l) - (prm.mu * prm.mass * prm.mass / q.norm()) * q;
  }
};

}  // namespace tether

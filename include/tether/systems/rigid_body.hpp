#pragma once
// One free rigid body in ambient coordinates, BMS24 Example 5.3:
// q = (R row-major, x), R^T R = Id imposed by six holonomic constraints,
// p = (P = Rdot J, m xdot); see rigid_common.hpp for the layout.
// Gravity (along -z) acts on the centre only, so the rotation is Euler's
// free top whatever g is: R alpha (spatial angular momentum about the
// centre) and 1/2 alpha.I^-1 alpha are first integrals, as are |alpha| and
// the energy of the body-frame motion.
#include "tether/core/parameters.hpp"
#include <cmath>

#include "tether/systems/rigid_common.hpp"

namespace tether {

struct RigidBody {
  static constexpr const char* name = "rigid_body";
  static constexpr const char* description = "free rigid body in ambient coordinates, R in R^3x3 with R^T R = I, and its centre";
  static constexpr const char* citation = "BMS24 Example 5.3";
  static constexpr int bodies = 1;
  static constexpr int joint_count = 0;
  static constexpr int dof = 12 * bodies;
  static constexpr int constraint_count = 6 * bodies + joint_count;
  // Null-space (tangent) basis dimension: (xi, xdot) in R^3 x R^3.
  static constexpr int tangent_dim = dof - constraint_count;
  using Gram = DenseMatrix<constraint_count>;
  using Q = Vec<dof>;

  struct Parameters {
    // Principal moments about the centre; J > 0 needs the triangle
    // inequality I_a < I_b + I_c.
    Real inertia[3] = {1.0, 1.5, 2.0};
    Real mass = 1.0;
    Real gravity = 0.0;

    template <class V>
    void describe(V& v) {
      v.reals("inertia", inertia, "principal moments of inertia about the centre");
      v.check(rigid::inertia_problem(inertia), "inertia");
      v.real("mass", mass, Range::positive(), "mass of the body");
      v.real("gravity", gravity, Range::any(), "gravitational acceleration along -z on the centre");
    }
  };
  Parameters prm;

  TETHER_HD Vec3 principal_inertia(int) const { return Vec3(prm.inertia[0], prm.inertia[1], prm.inertia[2]); }
  TETHER_HD Real body_mass(int) const { return prm.mass; }
  TETHER_HD Real gravity() const { return prm.gravity; }
  // R^T R = Id is dimensionless: constraints are (R^T R - Id)/2 as they stand.
  TETHER_HD Real orthogonality_scale() const { return 1; }

  TETHER_HD static Mat<3, 3> rotation(const Q& q, int b = 0) { return rigid::matrix_block(q, b); }
  TETHER_HD static Vec3 translation(const Q& q, int b = 0) { return rigid::vector_block(q, b); }
  TETHER_HD static void set_rotation(Q& q, int b, const Mat<3, 3>& R) { rigid::set_matrix_block(q, b, R); }
  TETHER_HD static void set_translation(Q& q, int b, const Vec3& x) { rigid::set_vector_block(q, b, x); }
  // alpha = I xi from (q, p); and back: the ambient P = R hat(xi) J.
  TETHER_HD static Vec3 body_angular_momentum(const Q& q, const Q& p, int b = 0) {
    return rigid::body_angular_momentum(q, p, b);
  }
  TETHER_HD Vec3 body_angular_velocity(const Q& q, const Q& p, int b = 0) const {
    return body_angular_momentum(q, p, b).cwiseQuotient(principal_inertia(b));
  }
  TETHER_HD Mat<3, 3> rotation_momentum(const Mat<3, 3>& R, const Vec3& xi, int b = 0) const {
    return rigid::momentum_from_body_velocity(R, xi, principal_inertia(b));
  }
  // The whole state's momentum from body angular velocity and centre velocity.
  TETHER_HD Q momentum(const Q& q, const Vec3& xi, const Vec3& xdot, int b = 0) const {
    Q p = Q::Zero();
    rigid::set_matrix_block(p, b, rotation_momentum(rotation(q, b), xi, b));
    rigid::set_vector_block(p, b, Vec3(body_mass(b) * xdot));
    return p;
  }
  // Total angular momentum about the origin (R alpha + x cross p_x).
  TETHER_HD static Vec3 angular_momentum(const Q& q, const Q& p) { return rigid::spatial_angular_momentum(q, p); }

  TETHER_HD Real potential(const Q& q) const { return rigid::gravity_potential(*this, q); }
  TETHER_HD Q potential_gradient(const Q&) const { return rigid::gravity_gradient(*this); }

  TETHER_HD Real length_scale() const { return 1; }
  // Rotational energy at unit angular rate, tr(I)/2, plus m |g| r_g with the
  // radius of gyration r_g = sqrt(tr(I)/m) when gravity is on.
  TETHER_HD Real energy_scale() const {
    const Real tr = prm.inertia[0] + prm.inertia[1] + prm.inertia[2];
    return Real(0.5) * tr + prm.mass * fabs(prm.gravity) * sqrt(tr / prm.mass);
  }

  TETHER_HD Q mass_times(const Q& v) const { return v.cwiseProduct(rigid::mass_diagonal(*this)); }
  TETHER_HD Q inverse_mass_times(const Q& p) const { return p.cwiseQuotient(rigid::mass_diagonal(*this)); }
  TETHER_HD Q sqrt_mass_times(const Q& v) const { return v.cwiseProduct(rigid::mass_diagonal(*this).cwiseSqrt()); }

  TETHER_HD Vec<constraint_count> constraints(const Q& q) const { return rigid::constraints(*this, q); }
  TETHER_HD Vec<constraint_count> constraint_jacobian_times(const Q& q, const Q& v) const {
    return rigid::constraint_jacobian_times(*this, q, v);
  }
  TETHER_HD Q constraint_transpose_times(const Q& q, const Vec<constraint_count>& lambda) const {
    return rigid::constraint_transpose_times(*this, q, lambda);
  }
  TETHER_HD Gram gram(const Q& qa, const Q& qb) const { return rigid::gram(*this, qa, qb); }

  TETHER_HD Vec<joint_count> joint_constraints(const Q&) const { return Vec<joint_count>(); }
  TETHER_HD Vec<joint_count> joint_jacobian_times(const Q&, const Q&) const { return Vec<joint_count>(); }
  TETHER_HD Q joint_transpose_times(const Q&, const Vec<joint_count>&) const { return Q::Zero(); }

  // Null-space basis of the constraint Jacobian at q (BMS24 §4.2, Example
  // 5.3): eta = (xi, v) -> (R hat(xi), v), so G(q) T(q) = 0 on N.
  TETHER_HD Q tangent_basis_times(const Q& q, const Vec<tangent_dim>& eta) const {
    Q v = Q::Zero();
    rigid::set_matrix_block(v, 0, Mat<3, 3>(rotation(q) * rigid::hat(eta.head<3>())));
    rigid::set_vector_block(v, 0, Vec3(eta.tail<3>()));
    return v;
  }
  // T(q)^T f: (<F_R, R hat(e_i)>_F, f_x).
  TETHER_HD Vec<tangent_dim> tangent_basis_transpose_times(const Q& q, const Q& f) const {
    Vec<tangent_dim> t;
    t.head<3>() = rigid::tangent_pairing(rotation(q), rigid::matrix_block(f, 0));
    t.tail<3>() = rigid::vector_block(f, 0);
    return t;
  }

  // Haar-uniform attitude, centre at the origin.
  template <class Rng>
  TETHER_HD Q random_configuration(Rng& rng) const {
    Q q = Q::Zero();
    set_rotation(q, 0, rigid::random_rotation(rng));
    return q;
  }
  // The Boltzmann weight does not depend on the attitude, and for the centre
  // under uniform gravity it is not normalizable: the same as random.
  template <class Rng>
  TETHER_HD Q thermal_configuration(Rng& rng, Real) const {
    return random_configuration(rng);
  }
};

}  // namespace tether

#pragma once
// B identical rigid links joined by spherical joints, in ambient coordinates
// (BMS24 Example 5.3 per link; layout in rigid_common.hpp). Link b has its
// joint points at body-frame offsets c_top = (0, 0, L/2) and c_bot = -c_top;
// the top of link 0 is pinned at the origin:
//   x_0 + R_0 c_top = 0,   x_b + R_b c_bot = x_{b+1} + R_{b+1} c_top,
// 3 B joint constraints after the 6 B orthogonality constraints. Uniform
// gravity along -z on the centres. B = 1 is the heavy top (Lagrange's when
// I1 = I2: the body-axis spin alpha_3 is then a first integral), B = 2 a 3-D
// physical double pendulum. The vertical angular momentum (z component of
// sum_b R_b alpha_b + x_b x p_b) is a first integral for every B.
#include "tether/core/parameters.hpp"
#include <cmath>

#include "tether/systems/rigid_common.hpp"

namespace tether {

template <int B>
struct RigidChain {
  static_assert(B >= 1, "a chain needs at least one link");
  static constexpr const char* name = "rigid_chain";
  static constexpr const char* description = "rigid links joined by spherical joints, the first pinned at the origin";
  static constexpr const char* citation = "BMS24 Example 5.3 per link";
  static constexpr Variant variant{"links", B, B == 2};
  static constexpr int bodies = B;
  static constexpr int joint_count = 3 * B;
  static constexpr int dof = 12 * bodies;
  static constexpr int constraint_count = 6 * bodies + joint_count;
  // Null-space (tangent) basis dimension: the body angular velocities xi_b.
  static constexpr int tangent_dim = dof - constraint_count;
  using Gram = DenseMatrix<constraint_count>;
  using Q = Vec<dof>;

  struct Parameters {
    // Principal moments of a link about its centre (default: a solid
    // cylinder-like rod, symmetric about its axis e3).
    Real inertia[3] = {0.1, 0.1, 0.02};
    Real mass = 1.0;
    Real length = 1.0;
    Real gravity = 9.81;

    template <class V>
    void describe(V& v) {
      v.reals("inertia", inertia, "principal moments of inertia of a link about its centre");
      v.check(rigid::inertia_problem(inertia), "inertia");
      v.real("mass", mass, Range::positive(), "mass of a link");
      v.real("length", length, Range::positive(), "length of a link, joint to joint");
      v.real("gravity", gravity, Range::any(), "gravitational acceleration along -z");
    }
  };
  Parameters prm;

  TETHER_HD Vec3 principal_inertia(int) const { return Vec3(prm.inertia[0], prm.inertia[1], prm.inertia[2]); }
  TETHER_HD Real body_mass(int) const { return prm.mass; }
  TETHER_HD Real gravity() const { return prm.gravity; }
  // Orthogonality constraints L/2 (R^T R - Id): length units, like the joints.
  TETHER_HD Real orthogonality_scale() const { return prm.length; }

  TETHER_HD static Mat<3, 3> rotation(const Q& q, int b) { return rigid::matrix_block(q, b); }
  TETHER_HD static Vec3 translation(const Q& q, int b) { return rigid::vector_block(q, b); }
  TETHER_HD static void set_rotation(Q& q, int b, const Mat<3, 3>& R) { rigid::set_matrix_block(q, b, R); }
  TETHER_HD static void set_translation(Q& q, int b, const Vec3& x) { rigid::set_vector_block(q, b, x); }
  TETHER_HD static Vec3 body_angular_momentum(const Q& q, const Q& p, int b) {
    return rigid::body_angular_momentum(q, p, b);
  }
  TETHER_HD Vec3 body_angular_velocity(const Q& q, const Q& p, int b) const {
    return body_angular_momentum(q, p, b).cwiseQuotient(principal_inertia(b));
  }
  TETHER_HD Mat<3, 3> rotation_momentum(const Mat<3, 3>& R, const Vec3& xi, int b) const {
    return rigid::momentum_from_body_velocity(R, xi, principal_inertia(b));
  }
  TETHER_HD static Vec3 angular_momentum(const Q& q, const Q& p) { return rigid::spatial_angular_momentum(q, p); }
  TETHER_HD static Real vertical_angular_momentum(const Q& q, const Q& p) { return angular_momentum(q, p)[2]; }

  TETHER_HD Real potential(const Q& q) const { return rigid::gravity_potential(*this, q); }
  TETHER_HD Q potential_gradient(const Q&) const { return rigid::gravity_gradient(*this); }

  TETHER_HD Real length_scale() const { return prm.length; }
  // Per link m |g| L plus the rotational energy at unit rate tr(I)/2.
  TETHER_HD Real energy_scale() const {
    return B * (prm.mass * fabs(prm.gravity) * prm.length +
                Real(0.5) * (prm.inertia[0] + prm.inertia[1] + prm.inertia[2]));
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

  // R c_top = (L/2) R e3, R c_bot = -(L/2) R e3.
  TETHER_HD Vec3 half_axis(const Q& q, int b) const {
    return Real(0.5) * prm.length * Vec3(q[12 * b + 2], q[12 * b + 5], q[12 * b + 8]);
  }

  // Joint 0: x_0 + R_0 c_top; joint b >= 1: x_{b-1} + R_{b-1} c_bot - x_b - R_b c_top.
  TETHER_HD Vec<joint_count> joint_constraints(const Q& q) const {
    Vec<joint_count> g;
    g.template segment<3>(0) = translation(q, 0) + half_axis(q, 0);
    for (int b = 1; b < B; ++b)
      g.template segment<3>(3 * b) =
          translation(q, b - 1) - half_axis(q, b - 1) - translation(q, b) - half_axis(q, b);
    return g;
  }
  // The joints are linear in q with no constant term (the pivot is the origin): D phi(q) v = phi(v).
  TETHER_HD Vec<joint_count> joint_jacobian_times(const Q&, const Q& v) const { return joint_constraints(v); }
  TETHER_HD Q joint_transpose_times(const Q&, const Vec<joint_count>& lambda) const {
    Q f = Q::Zero();
    const Real half = Real(0.5) * prm.length;
    for (int b = 0; b < B; ++b) {
      const Vec3 l = lambda.template segment<3>(3 * b);
      // Joint b acts on x_b and R_b e3 with sign +1 (b = 0) or -1 (b >= 1), and on link b-1 with +x, -axis.
      const Real sign = b == 0 ? Real(1) : Real(-1);
      for (int r = 0; r < 3; ++r) {
        f[12 * b + 9 + r] += sign * l[r];
        f[12 * b + 3 * r + 2] += sign * half * l[r];
        if (b >= 1) {
          f[12 * (b - 1) + 9 + r] += l[r];
          f[12 * (b - 1) + 3 * r + 2] -= half * l[r];
        }
      }
    }
    return f;
  }

  // Null-space basis at q on N (BMS24 §4.2; the nodal null-space matrix of
  // BL06): body rates xi_b -> (R_b hat(xi_b), v_b) with
  // the centre velocities the joints force, v_b = sum_{a<b} 2 T_a xi_a + T_b xi_b,
  // T_a = R_a hat(c_top) (R hat(xi) c_top = -T xi, and c_bot = -c_top).
  TETHER_HD Q tangent_basis_times(const Q& q, const Vec<tangent_dim>& eta) const {
    Q v;
    Vec3 upstream = Vec3::Zero();  // sum_{a<b} 2 T_a xi_a
    for (int b = 0; b < B; ++b) {
      const Mat<3, 3> R = rotation(q, b);
      const Vec3 xi = eta.template segment<3>(3 * b);
      const Vec3 t = R * rigid::hat(c_top()) * xi;
      rigid::set_matrix_block(v, b, Mat<3, 3>(R * rigid::hat(xi)));
      rigid::set_vector_block(v, b, Vec3(upstream + t));
      upstream += 2 * t;
    }
    return v;
  }
  // T(q)^T f: per link <F_b, R_b hat(e_i)>_F + T_b^T (f_b + 2 sum_{c>b} f_c).
  TETHER_HD Vec<tangent_dim> tangent_basis_transpose_times(const Q& q, const Q& f) const {
    Vec<tangent_dim> t;
    Vec3 downstream = Vec3::Zero();  // sum_{c>b} f_c
    for (int b = B - 1; b >= 0; --b) {
      const Mat<3, 3> R = rotation(q, b);
      const Vec3 fb = rigid::vector_block(f, b);
      t.template segment<3>(3 * b) = rigid::tangent_pairing(R, rigid::matrix_block(f, b)) +
                                     (R * rigid::hat(c_top())).transpose() * (fb + 2 * downstream);
      downstream += fb;
    }
    return t;
  }

  // Links with Haar-uniform attitudes hung from the pivot down.
  template <class Rng>
  TETHER_HD Q random_configuration(Rng& rng) const {
    Mat<3, 3> R[B];
    for (int b = 0; b < B; ++b) R[b] = rigid::random_rotation(rng);
    return assemble(R);
  }

  // B = 1: the exact Boltzmann distribution. The potential -m g (L/2) a_z
  // depends only on the axis a = R e3, uniform on the sphere under Haar
  // measure, so a_z has density ~ exp(beta a_z), beta = m g L / (2 kT), and
  // the turn about a stays uniform. B >= 2: attitudes uniform, the weight not
  // applied (momenta are still thermal).
  template <class Rng>
  TETHER_HD Q thermal_configuration(Rng& rng, Real kT) const {
    if (B != 1) return random_configuration(rng);
    const Real two_pi = Real(6.283185307179586476925286766559);
    const Real u = rng.uniform(), phi = two_pi * rng.uniform(), psi = two_pi * rng.uniform();
    Real az;
    if (kT <= 0) {
      az = prm.gravity > 0 ? Real(1) : (prm.gravity < 0 ? Real(-1) : 2 * u - 1);
    } else {
      // Distance d from the favoured pole has density ~ exp(-|beta| d) on [0, 2].
      const Real beta = prm.mass * prm.gravity * prm.length / (2 * kT);
      const Real a = fabs(beta);
      const Real d = a < Real(1e-12) ? 2 * u : -log1p(u * expm1(-2 * a)) / a;
      az = beta >= 0 ? 1 - d : d - 1;
    }
    const Real r = sqrt(fmax(Real(0), 1 - az * az));
    Mat<3, 3> R[B];
    R[0] = rigid::rotation_with_axis(Vec3(r * cos(phi), r * sin(phi), az), psi);
    return assemble(R);
  }

 private:
  TETHER_HD Vec3 c_top() const { return Vec3(0, 0, Real(0.5) * prm.length); }

  // The configuration with these attitudes whose joints all hold.
  TETHER_HD Q assemble(const Mat<3, 3>* R) const {
    Q q;
    Vec3 joint = Vec3::Zero();  // top joint of link b
    for (int b = 0; b < B; ++b) {
      set_rotation(q, b, R[b]);
      const Vec3 axis = R[b] * c_top();
      set_translation(q, b, Vec3(joint - axis));
      joint -= 2 * axis;
    }
    return q;
  }
};

}  // namespace tether

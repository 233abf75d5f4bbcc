#pragma once
// Shared algebra of the rigid-body systems in ambient coordinates, BMS24
// Example 5.3: body b occupies q[12b .. 12b+12) = (R_b row-major, x_b), and
// its momenta the same slots, P_b = Rdot_b J_b with J_b = tr(I_b)/2 Id - I_b
// and p_x = m_b xdot_b. With I_b = diag(I1, I2, I3), J_b is diagonal too,
// J = diag((I2 + I3 - I1)/2, (I1 + I3 - I2)/2, (I1 + I2 - I3)/2), so the mass
// matrix is diagonal: entry R(r, c) carries J_c, the centre m.
//
// The functions below serve any system S that has
//   bodies, joint_count, dof = 12 bodies, constraint_count = 6 bodies + joint_count,
//   principal_inertia(b), body_mass(b), orthogonality_scale(), gravity(),
//   joint_constraints / joint_jacobian_times / joint_transpose_times.
// They live in tether::rigid so that their short names (hat, ...) cannot
// clash with the SO(3) helpers elsewhere in namespace tether.
#include "tether/core/small_solve.hpp"

namespace tether {
namespace rigid {

// The mass matrix of R, J = tr(I)/2 - I, is positive definite iff each
// principal moment is positive and below the sum of the other two; what is
// wrong with the moments, or nullptr.
inline const char* inertia_problem(const Real (&inertia)[3]) {
  for (int a = 0; a < 3; ++a)
    if (!(inertia[a] > 0) || !(inertia[a] < inertia[(a + 1) % 3] + inertia[(a + 2) % 3]))
      return "principal moments must be positive and each below the sum of the other two (strict triangle "
             "inequality), so that J = tr(I)/2 - I > 0";
  return nullptr;
}

// ---- layout ---------------------------------------------------------------

// R_b (or P_b, or any 3x3 block of a vector in the q/p layout).
template <int N>
TETHER_HD Mat<3, 3> matrix_block(const Vec<N>& v, int b) {
  Mat<3, 3> a;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) a(r, c) = v[12 * b + 3 * r + c];
  return a;
}
template <int N>
TETHER_HD void set_matrix_block(Vec<N>& v, int b, const Mat<3, 3>& a) {
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) v[12 * b + 3 * r + c] = a(r, c);
}
// x_b (or p_x of body b).
template <int N>
TETHER_HD Vec3 vector_block(const Vec<N>& v, int b) {
  return Vec3(v[12 * b + 9], v[12 * b + 10], v[12 * b + 11]);
}
template <int N>
TETHER_HD void set_vector_block(Vec<N>& v, int b, const Vec3& a) {
  v[12 * b + 9] = a[0];
  v[12 * b + 10] = a[1];
  v[12 * b + 11] = a[2];
}

// ---- so(3) ----------------------------------------------------------------

// hat(w) v = w x v; hat(e_i) are the basis e_1, e_2, e_3 of Example 5.3.
TETHER_HD inline Mat<3, 3> hat(const Vec3& w) {
  Mat<3, 3> a;
  a << 0, -w[2], w[1], w[2], 0, -w[0], -w[1], w[0], 0;
  return a;
}
TETHER_HD inline Vec3 cross(const Vec3& a, const Vec3& b) {
  return Vec3(a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]);
}

// (<F, R hat(e_i)>_F)_i with <A, B>_F = tr(A B^T): the contraction of an
// ambient covector F with the tangent basis R hat(e_i) of SO(3) at R. For
// F = P = R hat(xi) J it is the body angular momentum I xi (alpha); the
// normal part R S (S symmetric) of F pairs to zero.
TETHER_HD inline Vec3 tangent_pairing(const Mat<3, 3>& R, const Mat<3, 3>& F) {
  const Mat<3, 3> a = R.transpose() * F;
  return Vec3(a(2, 1) - a(1, 2), a(0, 2) - a(2, 0), a(1, 0) - a(0, 1));
}

// diag(J) from the principal moments: J = tr(I)/2 Id - I.
TETHER_HD inline Vec3 second_moments(const Vec3& inertia) {
  const Real half_trace = Real(0.5) * (inertia[0] + inertia[1] + inertia[2]);
  return Vec3(half_trace - inertia[0], half_trace - inertia[1], half_trace - inertia[2]);
}

// Ambient rotational momentum of body angular velocity xi: P = R hat(xi) J.
TETHER_HD inline Mat<3, 3> momentum_from_body_velocity(const Mat<3, 3>& R, const Vec3& xi, const Vec3& inertia) {
  const Vec3 j = second_moments(inertia);
  Mat<3, 3> a = R * hat(xi);
  for (int c = 0; c < 3; ++c) a.col(c) *= j[c];
  return a;
}
// The same from the body angular momentum alpha = I xi.
TETHER_HD inline Mat<3, 3> momentum_from_body_momentum(const Mat<3, 3>& R, const Vec3& alpha, const Vec3& inertia) {
  return momentum_from_body_velocity(R, alpha.cwiseQuotient(inertia), inertia);
}

// Rotation matrix of a unit quaternion (w, x, y, z).
TETHER_HD inline Mat<3, 3> rotation_from_quaternion(Real w, Real x, Real y, Real z) {
  Mat<3, 3> r;
  r << 1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),  //
      2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),    //
      2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y);
  return r;
}

// A Haar-uniform rotation: a uniform unit quaternion from three uniforms
// (Sho92).
template <class Rng>
TETHER_HD Mat<3, 3> random_rotation(Rng& rng) {
  const Real two_pi = Real(6.283185307179586476925286766559);
  const Real u1 = rng.uniform(), u2 = two_pi * rng.uniform(), u3 = two_pi * rng.uniform();
  const Real a = sqrt(1 - u1), b = sqrt(u1);
  return rotation_from_quaternion(b * cos(u3), a * sin(u2), a * cos(u2), b * sin(u3));
}

// A rotation whose third column is the unit vector a, turned by psi about a.
TETHER_HD inline Mat<3, 3> rotation_with_axis(const Vec3& a, Real psi) {
  // Any unit vector orthogonal to a, from the coordinate axis least aligned with it.
  const Vec3 seed = fabs(a[0]) < Real(0.6) ? Vec3(1, 0, 0) : Vec3(0, 1, 0);
  Vec3 u = seed - seed.dot(a) * a;
  u /= u.norm();
  const Vec3 v = cross(a, u);
  const Real c = cos(psi), s = sin(psi);
  Mat<3, 3> r;
  r.col(0) = c * u + s * v;
  r.col(1) = -s * u + c * v;
  r.col(2) = a;
  return r;
}

// ---- mass matrix ----------------------------------------------------------

template <class S>
TETHER_HD Vec<S::dof> mass_diagonal(const S& sys) {
  Vec<S::dof> d;
  for (int b = 0; b < S::bodies; ++b) {
    const Vec3 j = second_moments(sys.principal_inertia(b));
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) d[12 * b + 3 * r + c] = j[c];
    for (int c = 0; c < 3; ++c) d[12 * b + 9 + c] = sys.body_mass(b);
  }
  return d;
}

// ---- constraints: orthogonality of every body, then the joints -------------

// phi = s/2 (R^T R - Id) in the order (00, 11, 22, 01, 02, 12): the six
// independent components of BMS24 Example 5.3's phi_i, times the system's
// orthogonality scale s (its length, so all constraints are in length units).
template <class S>
TETHER_HD Vec<S::constraint_count> constraints(const S& sys, const Vec<S::dof>& q) {
  constexpr int pair_a[6] = {0, 1, 2, 0, 0, 1}, pair_b[6] = {0, 1, 2, 1, 2, 2};
  const Real s = sys.orthogonality_scale();
  Vec<S::constraint_count> g;
  for (int b = 0; b < S::bodies; ++b) {
    const Mat<3, 3> R = matrix_block(q, b);
    for (int i = 0; i < 6; ++i)
      g[6 * b + i] = Real(0.5) * s * (R.col(pair_a[i]).dot(R.col(pair_b[i])) - (pair_a[i] == pair_b[i] ? 1 : 0));
  }
  const Vec<S::joint_count> joints = sys.joint_constraints(q);
  for (int j = 0; j < S::joint_count; ++j) g[6 * S::bodies + j] = joints[j];
  return g;
}

// D phi(q) v: s/2 (R^T V + V^T R) in the same order.
template <class S>
TETHER_HD Vec<S::constraint_count> constraint_jacobian_times(const S& sys, const Vec<S::dof>& q,
                                                             const Vec<S::dof>& v) {
  constexpr int pair_a[6] = {0, 1, 2, 0, 0, 1}, pair_b[6] = {0, 1, 2, 1, 2, 2};
  const Real s = sys.orthogonality_scale();
  Vec<S::constraint_count> g;
  for (int b = 0; b < S::bodies; ++b) {
    const Mat<3, 3> R = matrix_block(q, b), V = matrix_block(v, b);
    for (int i = 0; i < 6; ++i) {
      const int a = pair_a[i], c = pair_b[i];
      g[6 * b + i] = Real(0.5) * s * (R.col(a).dot(V.col(c)) + V.col(a).dot(R.col(c)));
    }
  }
  const Vec<S::joint_count> joints = sys.joint_jacobian_times(q, v);
  for (int j = 0; j < S::joint_count; ++j) g[6 * S::bodies + j] = joints[j];
  return g;
}

// D phi(q)^T lambda: s R Sym(lambda) per body, Sym with lambda_aa on the
// diagonal and lambda_ab / 2 off it; plus the joints' part.
template <class S>
TETHER_HD Vec<S::dof> constraint_transpose_times(const S& sys, const Vec<S::dof>& q,
                                                 const Vec<S::constraint_count>& lambda) {
  const Real s = sys.orthogonality_scale();
  Vec<S::joint_count> lj;
  for (int j = 0; j < S::joint_count; ++j) lj[j] = lambda[6 * S::bodies + j];
  Vec<S::dof> f = sys.joint_transpose_times(q, lj);
  for (int b = 0; b < S::bodies; ++b) {
    const Real* l = &lambda[6 * b];
    Mat<3, 3> sym;
    sym << l[0], l[3] / 2, l[4] / 2,  //
        l[3] / 2, l[1], l[5] / 2,     //
        l[4] / 2, l[5] / 2, l[2];
    const Mat<3, 3> R = matrix_block(q, b);
    set_matrix_block(f, b, Mat<3, 3>(matrix_block(f, b) + s * R * sym));
  }
  return f;
}

// G(qa) M^-1 G(qb)^T, column by column (k <= 6 B + 3 B, dof = 12 B: cheap).
template <class S>
TETHER_HD typename S::Gram gram(const S& sys, const Vec<S::dof>& qa, const Vec<S::dof>& qb) {
  constexpr int k = S::constraint_count;
  const Vec<S::dof> inv_mass = mass_diagonal(sys).cwiseInverse();
  typename S::Gram m;
  for (int c = 0; c < k; ++c) {
    Vec<k> e = Vec<k>::Zero();
    e[c] = 1;
    const Vec<S::dof> w = constraint_transpose_times(sys, qb, e).cwiseProduct(inv_mass);
    m.a.col(c) = constraint_jacobian_times(sys, qa, w);
  }
  return m;
}

// ---- gravity on the centres ----------------------------------------------

template <class S>
TETHER_HD Real gravity_potential(const S& sys, const Vec<S::dof>& q) {
  Real v = 0;
  for (int b = 0; b < S::bodies; ++b) v += sys.body_mass(b) * sys.gravity() * q[12 * b + 11];
  return v;
}
template <class S>
TETHER_HD Vec<S::dof> gravity_gradient(const S& sys) {
  Vec<S::dof> g = Vec<S::dof>::Zero();
  for (int b = 0; b < S::bodies; ++b) g[12 * b + 11] = sys.body_mass(b) * sys.gravity();
  return g;
}

// ---- first integrals --------------------------------------------------------

// Body angular momentum alpha_b = I_b xi_b of a state (q, p).
template <int N>
TETHER_HD Vec3 body_angular_momentum(const Vec<N>& q, const Vec<N>& p, int b) {
  return tangent_pairing(matrix_block(q, b), matrix_block(p, b));
}

// Total angular momentum about the origin: sum_b R_b alpha_b + x_b x p_b.
template <int N>
TETHER_HD Vec3 spatial_angular_momentum(const Vec<N>& q, const Vec<N>& p) {
  Vec3 m = Vec3::Zero();
  for (int b = 0; b < N / 12; ++b)
    m += matrix_block(q, b) * body_angular_momentum(q, p, b) + cross(vector_block(q, b), vector_block(p, b));
  return m;
}

}  // namespace rigid
}  // namespace tether

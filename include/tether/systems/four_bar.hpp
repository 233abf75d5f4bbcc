#pragma once
// Planar four-bar linkage, a closed kinematic loop, in Cartesian joint
// coordinates q = (B, C) in R^4: the ground pivots A = (0, 0) and
// D = (ground, 0) are fixed; the crank AB, the coupler BC and the rocker CD
// are rods of fixed length, three holonomic constraints on four coordinates,
// so one degree of freedom. Point masses at the moving joints B and C,
// gravity along -y. The default lengths are a Grashof crank-rocker
// (shortest + longest < the other two, the crank beside the ground): the
// crank turns fully and the loop never passes a singular (folded)
// configuration, so G(q) keeps full rank.
#include <cmath>

#include "tether/core/parameters.hpp"
#include "tether/core/small_solve.hpp"

namespace tether {

struct FourBar {
  static constexpr const char* name = "four_bar";
  static constexpr const char* description =
      "planar four-bar linkage (closed loop) in Cartesian joint coordinates, q = (B, C) in R^4, three rod "
      "constraints, one degree of freedom";
  static constexpr const char* citation = "the classical four-bar linkage; BMS24 eqs. (5.16)-(5.18) keep its loop closed";
  static constexpr int dof = 4;
  static constexpr int constraint_count = 3;
  static constexpr bool runs_in_lanes = true;  // its step functions take any scalar (core/lanes.hpp)
  using Gram = DenseMatrix<3>;

  struct Parameters {
    Real crank = 0.4, coupler = 1.0, rocker = 0.8, ground = 1.0;
    Real mass_b = 1.0, mass_c = 1.0;
    Real gravity = 9.81;

    template <class V>
    void describe(V& v) {
      v.real("crank", crank, Range::positive(), "length of AB, A = (0, 0) the fixed pivot");
      v.real("coupler", coupler, Range::positive(), "length of BC");
      v.real("rocker", rocker, Range::positive(), "length of CD, D = (ground, 0) the fixed pivot");
      v.real("ground", ground, Range::positive(), "distance AD between the fixed pivots");
      v.real("mass_b", mass_b, Range::positive(), "point mass at joint B");
      v.real("mass_c", mass_c, Range::positive(), "point mass at joint C");
      v.real("gravity", gravity, Range::any(), "gravitational acceleration along -y");
      v.check(grashof_problem(), "crank");
    }
    // The crank must turn fully without the loop folding: Grashof's condition
    // with the crank the shortest link, strictly.
    const char* grashof_problem() const {
      const Real links[4] = {crank, coupler, rocker, ground};
      Real shortest = links[0], longest = links[0], sum = 0;
      for (Real l : links) {
        shortest = l < shortest ? l : shortest;
        longest = l > longest ? l : longest;
        sum += l;
      }
      if (crank != shortest || !(shortest + longest < sum - shortest - longest))
        return "the lengths must make a Grashof crank-rocker: the crank the shortest link and shortest + longest < "
               "the sum of the other two (strictly), so the crank turns fully and the loop never folds";
      return nullptr;
    }
  };
  Parameters prm;

  // The step functions take any scalar (Real, or Lanes<W> on the cpu
  // backend) and any Eigen expression of one.
  template <class X>
  using QOf = Vec<4, typename X::Scalar>;
  template <class X>
  using PointOf = Vec<2, typename X::Scalar>;
  template <class X>
  TETHER_HD static PointOf<X> joint_b(const Eigen::MatrixBase<X>& q) { return PointOf<X>(q[0], q[1]); }
  template <class X>
  TETHER_HD static PointOf<X> joint_c(const Eigen::MatrixBase<X>& q) { return PointOf<X>(q[2], q[3]); }
  TETHER_HD Vec<2> pivot_d() const { return Vec<2>(prm.ground, 0); }
  // C - D (D's y is 0: C's own y, the same bits as a difference with 0).
  template <class X>
  TETHER_HD PointOf<X> from_d(const Eigen::MatrixBase<X>& q) const { return PointOf<X>(q[2] - prm.ground, q[3]); }

  TETHER_HD Real potential(const Vec<4>& q) const { return prm.gravity * (prm.mass_b * q[1] + prm.mass_c * q[3]); }
  template <class X>
  TETHER_HD QOf<X> potential_gradient(const Eigen::MatrixBase<X>&) const {
    using T = typename X::Scalar;
    return QOf<X>(T(Real(0)), T(prm.gravity * prm.mass_b), T(Real(0)), T(prm.gravity * prm.mass_c));
  }

  TETHER_HD Real length_scale() const {
    const Real a = prm.crank > prm.coupler ? prm.crank : prm.coupler;
    return a > prm.rocker ? a : prm.rocker;
  }
  // Characteristic energy (m_B + m_C) |g| (crank + coupler + rocker).
  TETHER_HD Real energy_scale() const {
    return (prm.mass_b + prm.mass_c) * fabs(prm.gravity) * (prm.crank + prm.coupler + prm.rocker);
  }

  TETHER_HD Vec<4> mass_diagonal() const { return Vec<4>(prm.mass_b, prm.mass_b, prm.mass_c, prm.mass_c); }
  template <class X>
  TETHER_HD QOf<X> mass_times(const Eigen::MatrixBase<X>& v) const {
    return QOf<X>(v[0] * prm.mass_b, v[1] * prm.mass_b, v[2] * prm.mass_c, v[3] * prm.mass_c);
  }
  // Reciprocals of parameters, not divisions by them, here and below: the
  // compiler hoists them out of the step loop, and an FP64 division costs a
  // GPU thread about ten dependent FMAs (bench/README.md, "On an H200").
  template <class X>
  TETHER_HD QOf<X> inverse_mass_times(const Eigen::MatrixBase<X>& p) const {
    const Real ib = Real(1) / prm.mass_b, ic = Real(1) / prm.mass_c;
    return QOf<X>(p[0] * ib, p[1] * ib, p[2] * ic, p[3] * ic);
  }
  TETHER_HD Vec<4> sqrt_mass_times(const Vec<4>& v) const { return v.cwiseProduct(mass_diagonal().cwiseSqrt()); }

  // g = ((|B|^2 - a^2) / 2a, (|C - B|^2 - b^2) / 2b, (|C - D|^2 - c^2) / 2c): length units.
  template <class X>
  TETHER_HD Vec<3, typename X::Scalar> constraints(const Eigen::MatrixBase<X>& q) const {
    using P = PointOf<X>;
    const P b = joint_b(q), bc = joint_c(q) - b, dc = from_d(q);
    return Vec<3, typename X::Scalar>((b.squaredNorm() - prm.crank * prm.crank) * (Real(0.5) / prm.crank),
                                      (bc.squaredNorm() - prm.coupler * prm.coupler) * (Real(0.5) / prm.coupler),
                                      (dc.squaredNorm() - prm.rocker * prm.rocker) * (Real(0.5) / prm.rocker));
  }
  // Rows of G: [B/a, 0], [-(C-B)/b, (C-B)/b], [0, (C-D)/c].
  template <class X, class Y>
  TETHER_HD Vec<3, typename X::Scalar> constraint_jacobian_times(const Eigen::MatrixBase<X>& q,
                                                                  const Eigen::MatrixBase<Y>& v) const {
    using P = PointOf<X>;
    const P b = joint_b(q), bc = joint_c(q) - b, dc = from_d(q);
    const P vb = joint_b(v), vc = joint_c(v);
    return Vec<3, typename X::Scalar>(b.dot(vb) * (Real(1) / prm.crank), bc.dot(vc - vb) * (Real(1) / prm.coupler),
                                      dc.dot(vc) * (Real(1) / prm.rocker));
  }
  template <class X, class Y>
  TETHER_HD QOf<X> constraint_transpose_times(const Eigen::MatrixBase<X>& q, const Eigen::MatrixBase<Y>& l) const {
    using T = typename X::Scalar;
    using P = PointOf<X>;
    const P b = joint_b(q), bc = joint_c(q) - b, dc = from_d(q);
    const T la = l[0] * (Real(1) / prm.crank), lb = l[1] * (Real(1) / prm.coupler),
            lc = l[2] * (Real(1) / prm.rocker);
    const P fb = la * b - lb * bc;
    const P fc = lb * bc + lc * dc;
    return QOf<X>(fb[0], fb[1], fc[0], fc[1]);
  }
  // G(qa) M^-1 G(qb)^T, from the rows above.
  template <class X, class Y>
  TETHER_HD DenseMatrix<3, typename X::Scalar> gram(const Eigen::MatrixBase<X>& qa, const Eigen::MatrixBase<Y>& qb) const {
    using T = typename X::Scalar;
    using P = PointOf<X>;
    const P ba = joint_b(qa), bca = joint_c(qa) - ba, dca = from_d(qa);
    const P bb = joint_b(qb), bcb = joint_c(qb) - bb, dcb = from_d(qb);
    const Real a = prm.crank, b = prm.coupler, c = prm.rocker, mb = prm.mass_b, mc = prm.mass_c;
    DenseMatrix<3, T> m;
    const Real caa = Real(1) / (mb * a * a), cab = Real(1) / (mb * a * b), cbb = (1 / mb + 1 / mc) / (b * b),
               cbc = Real(1) / (mc * b * c), ccc = Real(1) / (mc * c * c);
    m.a(0, 0) = ba.dot(bb) * caa;
    m.a(0, 1) = -ba.dot(bcb) * cab;
    m.a(0, 2) = T(Real(0));
    m.a(1, 0) = -bca.dot(bb) * cab;
    m.a(1, 1) = bca.dot(bcb) * cbb;
    m.a(1, 2) = bca.dot(dcb) * cbc;
    m.a(2, 0) = T(Real(0));
    m.a(2, 1) = dca.dot(bcb) * cbc;
    m.a(2, 2) = dca.dot(dcb) * ccc;
    return m;
  }

  // The configuration at crank angle theta on the assembly branch with C to
  // the left of the ray B -> D (the branch a continuous motion keeps).
  TETHER_HD Vec<4> configuration(Real theta) const {
    const Vec<2> b(prm.crank * cos(theta), prm.crank * sin(theta)), d = pivot_d();
    const Vec<2> bd = d - b;
    const Real e = bd.norm();
    // Circles |C - B| = coupler and |C - D| = rocker meet at B + x u + y n.
    const Real x = (prm.coupler * prm.coupler - prm.rocker * prm.rocker + e * e) / (2 * e);
    const Real y = sqrt(fmax(Real(0), prm.coupler * prm.coupler - x * x));
    const Vec<2> u = bd / e, n(-u[1], u[0]);
    const Vec<2> c = b + x * u + y * n;
    return Vec<4>(b[0], b[1], c[0], c[1]);
  }

  // Thermal sampling keeps the crank angle uniform: the Boltzmann weight is
  // not applied to the positions (momenta are still thermal).
  template <class Rng>
  TETHER_HD Vec<4> thermal_configuration(Rng& rng, Real) const {
    return random_configuration(rng);
  }
  template <class Rng>
  TETHER_HD Vec<4> random_configuration(Rng& rng) const {
    return configuration(Real(6.283185307179586476925286766559) * rng.uniform());
  }
};

}  // namespace tether

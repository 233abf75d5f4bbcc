#pragma once
// Exact solution of Euler's free rigid body in the body frame (Landau &
// Lifshitz, Mechanics, §37), for test oracles. Host only, double precision.
//
//   rigid_oracle::jacobi(u, m)          sn, cn, dn of argument u, parameter m = k^2 in [0, 1]
//   rigid_oracle::complete_k(m)         K(m), the quarter period of sn
//   rigid_oracle::carlson_rf(x, y, z)   Carlson's symmetric integral R_F
//   rigid_oracle::elliptic_f(phi, m)    F(phi | m), any real phi (inverse of the amplitude)
//   rigid_oracle::FreeRigidBody         m(t) = I Omega(t) from m(0) and the principal moments
//
// Body angular momentum m obeys m' = m x Omega, Omega = I^-1 m (Euler's
// equations I1 Omega1' = (I2 - I3) Omega2 Omega3 and cyclic); |m|^2 and
// 2E = m . Omega are conserved. With I_a < I_b < I_c (a, b, c a relabelling
// of the axes) and |m|^2 > 2 E I_b (motion about the axis of largest
// moment), L&L (37.10)-(37.11):
//   Omega_a = A_a cn tau, Omega_b = A_b sn tau, Omega_c = +-A_c dn tau,
//   A_a^2 = (2E I_c - M^2) / (I_a (I_c - I_a)),  A_b^2 = (2E I_c - M^2) / (I_b (I_c - I_b)),
//   A_c^2 = (M^2 - 2E I_a) / (I_c (I_c - I_a)),
//   tau = tau0 + sigma t sqrt((I_c - I_b)(M^2 - 2E I_a) / (I_a I_b I_c)),
//   k^2 = (I_b - I_a)(2E I_c - M^2) / ((I_c - I_b)(M^2 - 2E I_a));
// for |m|^2 < 2 E I_b the same formulas with a and c interchanged (motion
// about the axis of smallest moment). The direction sigma = (parity of
// (a, b, c)) x sign(I_c - I_b) x sign(Omega_c) follows from Euler's equations
// (I_a Omega_a' = parity (I_b - I_c) Omega_b Omega_c), and tau0 = F(phi0 | k^2) with phi0 the amplitude
// atan2(Omega_b/A_b, Omega_a/A_a) of the initial state. A body with two equal
// moments I_a = I_b (symmetric top) precesses: Omega_c is constant and
// (Omega_a, Omega_b) turns at the rate nu = (I_c - I_a)/I_a Omega_c.
// The separatrix |m|^2 = 2 E I_b is not handled.
#include <algorithm>
#include <cmath>

#include "tether/core/types.hpp"

namespace tether {
namespace rigid_oracle {

struct JacobiElliptic {
  double sn, cn, dn;
};

// sn, cn, dn by the descending Gauss (Landen) transformation: the AGM
// sequence a_{n+1} = (a_n + b_n)/2, b_{n+1} = sqrt(a_n b_n) from
// (1, sqrt(1 - m)) reduces the parameter to 0, where the functions are
// circular; the recurrence back up carries c = cn/sn and dn (A&S 16.12).
inline JacobiElliptic jacobi(double u, double m) {
  if (m >= 1) return {std::tanh(u), 1 / std::cosh(u), 1 / std::cosh(u)};
  if (m <= 0) return {std::sin(u), std::cos(u), 1};
  constexpr int max_levels = 40;
  double a_level[max_levels], b_level[max_levels];
  double a = 1, b = std::sqrt(1 - m), mean = 1;
  int levels = 0;
  for (; levels < max_levels; ++levels) {
    a_level[levels] = a;
    b_level[levels] = b;
    mean = 0.5 * (a + b);
    if (std::fabs(a - b) <= 1e-9 * a) break;  // the next level would agree to ~1e-18
    b = std::sqrt(a * b);
    a = mean;
  }
  if (levels == max_levels) levels = max_levels - 1;
  const double v = u * mean;
  double sn = std::sin(v), cn = std::cos(v), dn = 1;
  if (sn != 0) {
    // Ascend the levels back to parameter m: c carries cn/sn of the current
    // level (scaled), dn is rebuilt from it level by level.
    double ratio = cn / sn, c = mean * ratio;
    for (int n = levels; n >= 0; --n) {
      const double an = a_level[n];
      ratio *= c;
      c *= dn;
      dn = (b_level[n] + ratio) / (an + ratio);
      ratio = c / an;
    }
    const double s = 1 / std::sqrt(c * c + 1);
    sn = sn >= 0 ? s : -s;
    cn = c * sn;
  }
  return {sn, cn, dn};
}

// K(m) = pi / (2 AGM(1, sqrt(1 - m))), m in [0, 1).
inline double complete_k(double m) {
  double a = 1, b = std::sqrt(1 - m);
  for (int i = 0; i < 60 && std::fabs(a - b) > 1e-16 * a; ++i) {
    const double t = 0.5 * (a + b);
    b = std::sqrt(a * b);
    a = t;
  }
  return 3.14159265358979323846 / (a + b);
}

// Carlson's R_F(x, y, z) by duplication (Carlson 1995, Numer. Algorithms 10),
// then the fifth-order series in the deviations from the mean.
inline double carlson_rf(double x, double y, double z) {
  for (int i = 0; i < 100; ++i) {
    const double mu = (x + y + z) / 3;
    const double dx = 1 - x / mu, dy = 1 - y / mu, dz = 1 - z / mu;
    if (std::max({std::fabs(dx), std::fabs(dy), std::fabs(dz)}) < 1e-3) {
      const double e2 = dx * dy - dz * dz, e3 = dx * dy * dz;
      return (1 - e2 / 10 + e3 / 14 + e2 * e2 / 24 - 3 * e2 * e3 / 44) / std::sqrt(mu);
    }
    const double sx = std::sqrt(x), sy = std::sqrt(y), sz = std::sqrt(z);
    const double lambda = sx * sy + sy * sz + sz * sx;
    x = 0.25 * (x + lambda);
    y = 0.25 * (y + lambda);
    z = 0.25 * (z + lambda);
  }
  return std::nan("");
}

// F(phi | m) = int_0^phi dtheta / sqrt(1 - m sin^2 theta), any real phi:
// F(phi + n pi) = F(phi) + 2 n K.
inline double elliptic_f(double phi, double m) {
  const double pi = 3.14159265358979323846;
  const double turns = std::round(phi / pi);
  const double p = phi - turns * pi;  // in [-pi/2, pi/2]
  const double s = std::sin(p), c = std::cos(p);
  return s * carlson_rf(c * c, 1 - m * s * s, 1) + 2 * turns * complete_k(m);
}

class FreeRigidBody {
 public:
  // inertia: principal moments (any order, at most two of them equal),
  // m0: body angular momentum at t = 0 (not zero).
  FreeRigidBody(const Vec3& inertia, const Vec3& m0) : inertia_(inertia), omega0_(m0.cwiseQuotient(inertia)) {
    momentum_squared_ = m0.squaredNorm();
    two_energy_ = m0.dot(omega0_);
    int order[3] = {0, 1, 2};
    std::sort(order, order + 3, [&](int i, int j) { return inertia[i] < inertia[j]; });
    const double lo = inertia[order[0]], mid = inertia[order[1]], hi = inertia[order[2]];
    const double same = 1e-12 * hi;
    if (hi - lo <= same) {
      kind_ = Kind::sphere;
      return;
    }
    if (mid - lo <= same || hi - mid <= same) {
      kind_ = Kind::symmetric;
      c_ = mid - lo <= same ? order[2] : order[0];  // the distinct axis
      a_ = (c_ + 1) % 3;                            // (a, b, c) cyclic
      b_ = (c_ + 2) % 3;
      nu_ = (inertia[c_] - inertia[a_]) / inertia[a_] * omega0_[c_];
      return;
    }
    kind_ = Kind::elliptic;
    above_middle_ = momentum_squared_ > two_energy_ * mid;
    a_ = above_middle_ ? order[0] : order[2];
    b_ = order[1];
    c_ = above_middle_ ? order[2] : order[0];
    const double ia = inertia[a_], ib = inertia[b_], ic = inertia[c_];
    const double m2 = momentum_squared_, e2 = two_energy_;
    amp_a_ = std::sqrt(std::max(0.0, (e2 * ic - m2) / (ia * (ic - ia))));
    amp_b_ = std::sqrt(std::max(0.0, (e2 * ic - m2) / (ib * (ic - ib))));
    amp_c_ = std::sqrt(std::max(0.0, (m2 - e2 * ia) / (ic * (ic - ia))));
    rate_ = std::sqrt(std::max(0.0, (ic - ib) * (m2 - e2 * ia) / (ia * ib * ic)));
    parameter_ = std::clamp((ib - ia) * (e2 * ic - m2) / ((ic - ib) * (m2 - e2 * ia)), 0.0, 1.0);
    const bool cyclic = (b_ == (a_ + 1) % 3);
    sign_c_ = omega0_[c_] >= 0 ? 1 : -1;
    sigma_ = (cyclic ? 1 : -1) * (ib < ic ? 1 : -1) * sign_c_;
    const double phi0 = std::atan2(amp_b_ > 0 ? omega0_[b_] / amp_b_ : 0.0, amp_a_ > 0 ? omega0_[a_] / amp_a_ : 1.0);
    tau0_ = elliptic_f(phi0, parameter_);
  }

  // Body angular velocity Omega(t).
  Vec3 body_velocity(double t) const {
    Vec3 w = omega0_;
    switch (kind_) {
      case Kind::sphere: break;
      case Kind::symmetric: {
        const double c = std::cos(nu_ * t), s = std::sin(nu_ * t);
        w[a_] = omega0_[a_] * c - omega0_[b_] * s;
        w[b_] = omega0_[a_] * s + omega0_[b_] * c;
        break;
      }
      case Kind::elliptic: {
        const JacobiElliptic j = jacobi(tau0_ + sigma_ * rate_ * t, parameter_);
        w[a_] = amp_a_ * j.cn;
        w[b_] = amp_b_ * j.sn;
        w[c_] = sign_c_ * amp_c_ * j.dn;
        break;
      }
    }
    return w;
  }
  // Body angular momentum m(t) = I Omega(t).
  Vec3 body_momentum(double t) const { return body_velocity(t).cwiseProduct(inertia_); }

  double energy() const { return 0.5 * two_energy_; }                  // 1/2 m . Omega
  double momentum_squared() const { return momentum_squared_; }         // |m|^2
  bool elliptic() const { return kind_ == Kind::elliptic; }             // three distinct moments
  bool above_middle_axis() const { return above_middle_; }              // |m|^2 > 2 E I_middle
  double parameter() const { return parameter_; }                       // k^2 (elliptic case)
  // Period of the body-frame motion: 4 K(k^2) / rate (elliptic), 2 pi / |nu| (symmetric).
  double period() const {
    if (kind_ == Kind::elliptic) return 4 * complete_k(parameter_) / rate_;
    if (kind_ == Kind::symmetric) return 2 * 3.14159265358979323846 / std::fabs(nu_);
    return 0;
  }

 private:
  enum class Kind { sphere, symmetric, elliptic };
  Vec3 inertia_, omega0_;
  double momentum_squared_ = 0, two_energy_ = 0;
  Kind kind_ = Kind::sphere;
  int a_ = 0, b_ = 1, c_ = 2;
  bool above_middle_ = false;
  double nu_ = 0;
  double amp_a_ = 0, amp_b_ = 0, amp_c_ = 0, rate_ = 0, parameter_ = 0, tau0_ = 0;
  double sign_c_ = 1, sigma_ = 1;
};

}  // namespace rigid_oracle
}  // namespace tether

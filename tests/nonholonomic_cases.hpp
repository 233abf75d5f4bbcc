#pragma once
// Shared by the nonholonomic and the shooting tests: systems with their
// parameters set, and the closed-form Heisenberg geodesic (their oracle).
#include <cmath>
#include <complex>

#include "tether/systems/martinet.hpp"
#include "tether/systems/parallel_parking.hpp"

namespace tether::test {

inline Martinet martinet(Real beta) {
  Martinet m;
  m.prm.beta = beta;
  return m;
}
inline MartinetLagrangian martinet_lagrangian(Real beta) {
  MartinetLagrangian m;
  m.prm.beta = beta;
  return m;
}
inline ParallelParking parking_bowl() {
  ParallelParking s;
  s.prm.potential = ParallelParking::Parameters::Potential::bowl;
  return s;
}

// Heisenberg geodesic (canonical frame, z = (x, y, z, px, py, pz)) from z0 at
// time t. With lambda = p_z (constant), u = p_x - y lambda/2,
// v = p_y + x lambda/2, Hamilton's equations give (u + iv)' = i lambda (u + iv),
// (x + iy)' = u + iv and z' = Im(conj(x + iy)(u + iv)) / 2.
inline Vec<6> heisenberg_exact(const Vec<6>& z0, Real t) {
  using C = std::complex<Real>;
  const Real lambda = z0[5];
  const C w0(z0[0], z0[1]), c0(z0[3] - z0[1] * lambda / 2, z0[4] + z0[0] * lambda / 2);
  const C i(0, 1);
  // (e^{i lambda t} - 1) / (i lambda) and (t - sin(lambda t)/lambda) / lambda, with their lambda -> 0 limits.
  const C e = std::abs(lambda * t) < 1e-8 ? C(t, 0) : (std::exp(i * lambda * t) - 1.0) / (i * lambda);
  const Real s = std::abs(lambda * t) < 1e-4 ? lambda * t * t * t / 6 : (t - std::sin(lambda * t) / lambda) / lambda;
  const C w = w0 + c0 * e, c = c0 * std::exp(i * lambda * t);
  Vec<6> z;
  z[0] = w.real();
  z[1] = w.imag();
  z[2] = z0[2] + 0.5 * (std::imag(std::conj(w0) * c0 * e) + std::norm(c0) * s);
  z[3] = c.real() + z[1] * lambda / 2;
  z[4] = c.imag() - z[0] * lambda / 2;
  z[5] = lambda;
  return z;
}

}  // namespace tether::test

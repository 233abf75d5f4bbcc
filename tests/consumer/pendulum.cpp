// RATTLE on one spherical pendulum, straight from the step library.
#include <cmath>
#include <cstdio>
#include <tether/methods/rattle.hpp>
#include <tether/systems/spherical_pendulum.hpp>

int main() {
  const tether::SphericalPendulum pendulum;  // mass 1, length 1, gravity 9.81
  tether::PhaseState<tether::SphericalPendulum> s;
  s.q = tether::Vec3(1, 0, 0), s.p = tether::Vec3(0, 1, 0), s.q_prev = s.q;
  int iterations = 0;
  for (int n = 0; n < 1000; ++n)
    if (tether::Rattle::step(pendulum, s, 0.01, tether::NewtonOptions{}, iterations) != tether::Status::ok) return 1;
  std::printf("|q| - 1 = %.1e after 1000 steps\n", s.q.norm() - 1);
  return std::abs(s.q.norm() - 1) < 1e-12 ? 0 : 1;
}

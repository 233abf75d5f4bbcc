#pragma once
// The two-wheeled vehicle of MMVW13 §5 ("parallel parking"): q = (x, y,
// theta, phi), front wheel at (x, y), body angle theta, steering angle phi,
// length L. Constraints (5.1) xdot sin phi - ydot cos phi = 0 and (5.3)
// xdot sin theta - ydot cos theta + L thetadot = 0; Lagrangian (5.4)
// L = 1/2 (xdot^2 + ydot^2 + alpha thetadot^2 + beta phidot^2) - V.
// V is none, or the bowl V = -cos r of the paper, read here as r = the
// distance from the origin of the vehicle's midpoint
// (x - L/2 cos theta, y - L/2 sin theta), or its reflection, the hill
// V = cos r: the origin an unstable equilibrium, from which nearby paths
// part exponentially (the case for multiple shooting).
#include "tether/core/parameters.hpp"
#include "tether/systems/generalized_hamiltonian.hpp"

namespace tether {

struct ParallelParking {
  static constexpr const char* name = "parallel_parking";
  static constexpr const char* description = "two-wheeled vehicle, q = (x, y, theta, phi), two nonholonomic constraints";
  static constexpr const char* citation = "MMVW13 §5";
  static constexpr Form form = Form::lagrangian;
  static constexpr int dof = 4;
  static constexpr int multiplier_count = 2;
  struct Parameters {
    enum class Potential { none, bowl, hill };
    Real length = 1, alpha = 1, beta = 1;
    Potential potential = Potential::none;

    template <class V>
    void describe(V& v) {
      v.real("length", length, Range::positive(), "distance L between the wheels");
      v.real("alpha", alpha, Range::positive(), "moment of inertia of the body angle theta");
      v.real("beta", beta, Range::positive(), "moment of inertia of the steering angle phi");
      v.choice("potential", potential,
               {{"none", Potential::none}, {"bowl", Potential::bowl}, {"hill", Potential::hill}},
               "none, the bowl V = -cos r about the origin, or the hill V = cos r");
    }
  };
  Parameters prm;

  template <class T>
  TETHER_HD void constraint_rows(const Arr<T, 4>& q, T (&g)[2][4]) const {
    const T st = sin(q[2]), ct = cos(q[2]), sp = sin(q[3]), cp = cos(q[3]);
    g[0][0] = sp, g[0][1] = -cp, g[0][2] = T(0), g[0][3] = T(0);
    g[1][0] = st, g[1][1] = -ct, g[1][2] = T(prm.length), g[1][3] = T(0);
  }
  template <class T>
  TETHER_HD void inverse_mass_times(const Arr<T, 4>&, const Arr<T, 4>& w, Arr<T, 4>& v) const {
    v[0] = w[0], v[1] = w[1], v[2] = w[2] / prm.alpha, v[3] = w[3] / prm.beta;
  }
  template <class T>
  TETHER_HD T potential(const Arr<T, 4>& q) const {
    if (prm.potential == Parameters::Potential::none) return T(0);
    const T mx = q[0] - Real(0.5) * prm.length * cos(q[2]), my = q[1] - Real(0.5) * prm.length * sin(q[2]);
    const T c = cos_of_sqrt(mx * mx + my * my);
    return prm.potential == Parameters::Potential::bowl ? T(-c) : c;
  }

  // cos(sqrt(s)), smooth at s = 0 where sqrt is not: a Taylor series there
  // (its first omitted term is below 1e-24 for s < 1e-2).
  template <class T>
  TETHER_HD static T cos_of_sqrt(const T& s) {
    if (ad::primal(s) >= Real(1e-2)) return cos(sqrt(s));
    const Real c[] = {1, -1.0 / 2, 1.0 / 24, -1.0 / 720, 1.0 / 40320, -1.0 / 3628800, 1.0 / 479001600};
    T r = T(c[6]);
    for (int i = 5; i >= 0; --i) r = r * s + c[i];
    return r;
  }
};

}  // namespace tether

#pragma once
// Holonomic systems and initial states on T*N shared by the method tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/initial_state.hpp"
#include "tether/ensemble/advance.hpp"
#include "tether/methods/projection.hpp"
#include "tether/systems/chain.hpp"
#include "tether/systems/double_pendulum.hpp"
#include "tether/systems/fisher_bingham.hpp"
#include "tether/systems/spherical_pendulum.hpp"

namespace tether::test {

// ---------------------------------------------------------------------------
// Systems and initial states on T*N.

template <class S>
void put_on_manifold(const S& sys, PhaseState<S>& s) {
  s.q_prev = s.q;
  ASSERT_EQ(project_onto_manifold(sys, NewtonOptions{}, s), Status::ok);
}

// M's one-thread step (T = Real or Lanes<W>), its force carried where M
// carries one.
template <class M, class S, class T>
LaneStatus<T> step_with_carry(const S& sys, PhaseState<S, T>& s, Real h, const NewtonOptions& opt,
                              LaneInt<T>& iterations, ForceCarry<S, T>& carry) {
  if constexpr (carries_force<M>)
    return M::step(sys, s, h, opt, iterations, &carry);
  else
    return M::step(sys, s, h, opt, iterations);
}

// Trajectory x into lane l of a group stepped in lanes (core/lanes.hpp).
template <class S, int W>
void put_lane(PhaseState<S, Lanes<W>>& g, int l, const PhaseState<S>& x) {
  for (int c = 0; c < S::dof; ++c) {
    g.q[c].v[l] = x.q[c];
    g.p[c].v[l] = x.p[c];
  }
}

// 1 rad off the downward vertical, moving both around and across: a
// precessing, non-planar orbit with L_z != 0.
PhaseState<SphericalPendulum> pendulum_state(const SphericalPendulum& sys) {
  const Real th = 1.0, L = sys.prm.length;
  PhaseState<SphericalPendulum> s;
  s.q = L * Vec3(std::sin(th), 0, -std::cos(th));
  // 0.5 along e_theta = (cos th, 0, sin th) plus 2 along e_phi = (0, 1, 0): tangent.
  s.p = sys.prm.mass * (0.5 * Vec3(std::cos(th), 0, std::sin(th)) + 2.0 * Vec3(0, 1, 0));
  put_on_manifold(sys, s);
  return s;
}

// The Fisher-Bingham density exp(kappa mu.q + q^T A q) with mean direction
// `mean` (normalised by the system) and the symmetric A.
inline FisherBingham fisher_bingham(const Vec3& mean, Real kappa, const Mat<3, 3>& a) {
  FisherBingham sys;
  sys.prm.kappa = kappa;
  for (int k = 0; k < 3; ++k) sys.prm.mean[k] = mean[k];
  const Real b[6] = {a(0, 0), a(1, 1), a(2, 2), a(0, 1), a(0, 2), a(1, 2)};
  std::copy(b, b + 6, sys.prm.bingham);
  return sys;
}

// Rod angles (th1, th2) from the downward vertical, angular rates (w1, w2).
PhaseState<DoublePendulum> double_pendulum_state(const DoublePendulum& sys, Real th1, Real th2, Real w1, Real w2) {
  const auto& c = sys.prm;
  const Vec<2> r1(c.length1 * std::sin(th1), -c.length1 * std::cos(th1));
  const Vec<2> r2 = r1 + Vec<2>(c.length2 * std::sin(th2), -c.length2 * std::cos(th2));
  const Vec<2> v1 = c.length1 * w1 * Vec<2>(std::cos(th1), std::sin(th1));
  const Vec<2> v2 = v1 + c.length2 * w2 * Vec<2>(std::cos(th2), std::sin(th2));
  PhaseState<DoublePendulum> s;
  s.q << r1, r2;
  s.p << c.mass1 * v1, c.mass2 * v2;
  put_on_manifold(sys, s);
  return s;
}
PhaseState<DoublePendulum> double_pendulum_state(const DoublePendulum& sys) {
  return double_pendulum_state(sys, 1.0, -0.4, 0.5, -1.5);
}

// Bend and torsion both on; the torsion coefficients are generic (no
// accidental symmetry of the dihedral potential).
template <int N>
Chain<N> make_chain() {
  Chain<N> sys;
  sys.prm.bend_stiffness = 20;
  const Real c[6] = {1.116, 1.462, -1.578, -0.368, 3.156, -3.788};
  std::copy(c, c + 6, sys.prm.torsion);
  sys.prm.has_torsion = true;
  return sys;
}

// A chain conformation from bond angles theta(i) at bead i and dihedrals
// phi(i) about bond i-1 (cos phi = n1.n2 as in Chain::potential, so phi = pi
// is trans), with momenta sin(1.7 j + 0.3); centre of mass at rest at the
// origin (a drifting chain's |q| grows, and with it the roundoff eps |q| / h
// in M (q1 - q0) / h), then projected onto T*N.
template <int N, class Theta, class Phi>
PhaseState<Chain<N>> chain_state(const Chain<N>& sys, Theta theta, Phi phi) {
  const Real L = sys.prm.bond_length;
  Vec3 d[N - 1];
  d[0] = L * Vec3(1, 0, 0);
  for (int i = 1; i < N - 1; ++i) {
    const Vec3 b = d[i - 1].normalized();
    const Vec3 ref = i >= 2 ? d[i - 2] : Vec3(0, 1, 0);
    const Vec3 n = ref.cross(b).normalized(), m = n.cross(b);
    // -b.d_i / L = cos theta; (d_{i-2} x d_{i-1}).(d_{i-1} x d_i) ~ cos phi.
    const Real t = theta(i), f = phi(i);
    d[i] = L * (-std::cos(t) * b + std::sin(t) * (std::cos(f) * m + std::sin(f) * n));
  }
  PhaseState<Chain<N>> s;
  Vec3 r = Vec3::Zero(), centre = Vec3::Zero();
  for (int i = 0; i < N; ++i) {
    for (int c = 0; c < 3; ++c) s.q[3 * i + c] = r[c];
    centre += r / N;
    if (i < N - 1) r += d[i];
  }
  for (int j = 0; j < 3 * N; ++j) s.p[j] = sys.prm.mass * 0.7 * std::sin(1.7 * j + 0.3);
  const Vec3 drift = Chain<N>::linear_momentum(s.p) / N;
  for (int i = 0; i < N; ++i) {
    Chain<N>::add_bead(s.q, i, -centre);
    Chain<N>::add_bead(s.p, i, -drift);
  }
  put_on_manifold(sys, s);
  return s;
}

// Bond angles within 0.15 rad of theta0 and dihedrals within 0.6 rad of
// trans: every bend and torsion force is active, and at this energy no bond
// angle comes near 180 degrees, where the dihedral is undefined.
template <int N>
PhaseState<Chain<N>> chain_state(const Chain<N>& sys) {
  return chain_state(
      sys, [&](int i) { return sys.prm.bend_angle + 0.15 * std::sin(1.3 * i); },
      [](int i) { return Real(3.14159265358979323846) + 0.6 * std::sin(2.1 * i + 0.4); });
}

// The k-th of a family of chains that differ in every bond and dihedral
// angle (one per lane of a batch): each lane's Newton then converges in its
// own number of iterations.
template <int N>
PhaseState<Chain<N>> varied_chain_state(const Chain<N>& sys, int k) {
  return chain_state(
      sys, [&](int i) { return sys.prm.bend_angle + 0.1 * std::sin(1.3 * i + k); },
      [&](int i) { return 3.14159265358979 + 0.5 * std::sin(2.1 * i + 0.7 * k); });
}

}  // namespace tether::test

#pragma once
// Geodesic shooting: for a target q1, find the initial covector p0
// whose trajectory of the discrete flow from q0 reaches q1 at time T = steps dt.
// Written once for every backend: one shot per cpu iteration or GPU thread.
//
// The shooting Jacobian dq(T)/dp0 is the exact derivative of the discrete
// flow: each step carries its tangent map along (the methods' tangent option,
// index1_stages.hpp), started from d(q, p)/dp0 = (0, I). Newton is damped by a
// backtracking line search on |q(T) - q1| (Armijo, c = 1e-4). A hard target
// may instead be reached by continuation from a solved neighbour: the target
// moves from the neighbour's to its own in equal substeps, each solve seeded
// by the last.
//
// Conjugate points: along a solved geodesic, J(t) = dq(t)/dp0 is the Jacobi
// field matrix; the geodesic meets a point conjugate to q0 where det J(t)
// vanishes, and past the first one it is no longer minimising. det J is
// checked after every step against its sign just after t = 0 (taken once it
// exceeds the roundoff of J's entries), up to T and, when asked, a little
// beyond: a conjugate point just after T says the target lies near the cut
// locus, where the distance to it stops being smooth.
//
// The final covector p(T) is what an outer optimisation over targets needs:
// for the exact flow it is the gradient in q1 of the action S(q1) = int (p q' - H) dt
// along the geodesic from q0 (Hamilton-Jacobi), which for a sub-Riemannian
// H = 1/2 |p|^2 is T H = d^2 / (2T), so the length's gradient is p(T) / sqrt(2 H)
// wherever the distance is smooth. The discrete flow is symplectic (MMVW13
// Props. 1-4), so away from conjugate points its p(T) is likewise the
// q1-gradient of a generating function, which approximates S to the method's
// order.
#include <cstdint>

#include "tether/methods/index1_stages.hpp"

namespace tether {

enum class ShotStatus : std::uint8_t {
  converged = 0,
  max_iterations = 1,      // Newton ran out of iterations; residual is the last one
  singular_jacobian = 2,   // dq(T)/dp0 could not be factored (e.g. a conjugate point at T)
  line_search_failed = 3,  // no step along the Newton direction reduced the residual
  integration_failed = 4,  // the flow could not be integrated from the guess (step Newton failed)
  stalled = 5,             // ctl.stall_iterations iterations in a row each cut the residual by less than 10%
};
constexpr int shot_status_count = 6;

inline const char* shot_status_name(ShotStatus s) {
  switch (s) {
    case ShotStatus::converged: return "converged";
    case ShotStatus::max_iterations: return "max_iterations";
    case ShotStatus::singular_jacobian: return "singular_jacobian";
    case ShotStatus::line_search_failed: return "line_search_failed";
    case ShotStatus::integration_failed: return "integration_failed";
    case ShotStatus::stalled: return "stalled";
  }
  return "unknown";
}

struct ShootControl {
  Real dt = 0;
  std::int32_t steps = 0;
  NewtonOptions step_newton;   // each step's implicit equations
  Real tolerance = 1e-10;      // on |q(T) - q1| (Euclidean)
  int max_iterations = 50;     // shooting Newton iterations, over all continuation substeps
  bool line_search = true;
  int max_backtracks = 10;     // halvings of the Newton step (alpha >= 2^-10)
  int stall_iterations = 0;    // slow iterations in a row that stop a shot (0: never; see Progress)
  int substeps = 8;            // continuation substeps (shots that start from a neighbour)
  std::int32_t conjugate_search_steps = 0;  // steps searched for conjugate points, >= steps (0: steps)
  bool estimate_error = false;              // Richardson estimate of q(T)'s error per converged shot
  int nodes = 1;                            // multiple shooting: arcs of steps / nodes steps (1: single shooting)
};

// Multiple shooting keeps at most this many arcs per shot (their states and
// condensed sensitivities live in the shot's own memory: a GPU thread's).
constexpr int kMaxShootingNodes = 16;

// Structure-of-arrays shots, as raw pointers (host or device memory).
// Component c of shot i lives at [c * count + i].
struct ShotView {
  std::int64_t count = 0;
  const Real* q0 = nullptr;      // dof: one start point for all shots
  const Real* target = nullptr;  // dof x count
  const Real* guess = nullptr;   // dof x count
  const Real* from = nullptr;    // dof x count, or null: continuation start targets
  Real* p0 = nullptr;            // dof x count: the solution (or the last iterate)
  std::uint8_t* status = nullptr;
  std::int32_t* iterations = nullptr;
  Real* residual = nullptr;
  // Of converged shots only (else NaN / 0):
  Real* energy = nullptr;          // H(q0, p0, lambda~)
  Real* length = nullptr;          // int sqrt(2 (H - V)) dt, trapezoidal over the steps
  Real* conjugate_time = nullptr;  // first t <= conjugate_search_steps dt with det dq(t)/dp0 = 0, else NaN
  Real* pT = nullptr;              // dof x count: the final covector p(T)
  Real* error_estimate = nullptr;  // |q_h(T) - q(T)| / |q1 - q0| from p0 (ctl.estimate_error), else NaN
};

// Flow::step is the method's step with an optional tangent (the method
// itself; the reference backend supplies its own), and Flow::Carry<S> what
// one step with a tangent leaves for the next of the same integration.
template <class M>
struct MethodFlow {
  static constexpr int order = M::order;
  template <class S>
  using Carry = typename M::template Carry<S>;
  template <class S, int C>
  TETHER_HD TETHER_DEVICE_CALL static Status step(const S& sys, PhaseState<S>& s, Real h, const NewtonOptions& opt,
                                                  int& iterations, Tangent<S, C>* tangent, Carry<S>* carry = nullptr) {
    return M::step(sys, s, h, opt, iterations, tangent, carry);
  }
};

// What a shot's integrations reuse: the flow's carry (a Gauss-Legendre
// step's stage LU, the largest thing a shot holds). One per shot, passed to
// every integration, so that a GPU thread holds one, not one per call site;
// each integration starts it afresh (restart), as a carry from the end of
// another integration is not the next step's.
template <class S, class Flow>
using ShotCarry = typename Flow::template Carry<S>;

template <class Carry>
TETHER_HD void restart(Carry& carry) {
  if constexpr (requires { carry.valid; }) carry.valid = false;
}

// d(q, p)/dp0 at t = 0: (0, I).
template <class S>
TETHER_HD Tangent<S, S::dof> initial_tangent() {
  Tangent<S, S::dof> t;
  t.template topRows<S::dof>().setZero();
  t.template bottomRows<S::dof>().setIdentity();
  return t;
}

// q(T) from (q0, p0), and dq(T)/dp0 when jac is not null. A GPU thread
// calls it (TETHER_DEVICE_CALL) from its six places rather than inlining the
// step loop at each.
template <class S, class Flow>
TETHER_HD TETHER_DEVICE_CALL Status shoot_endpoint(const S& sys, const ShootControl& ctl, ShotCarry<S, Flow>& carry,
                                                   const Vec<S::dof>& q0, const Vec<S::dof>& p0, Vec<S::dof>& qT,
                                                   Mat<S::dof, S::dof>* jac) {
  constexpr int n = S::dof;
  PhaseState<S> s;
  s.q = q0;
  s.p = p0;
  Tangent<S, n> t = initial_tangent<S>();
  restart(carry);
  for (int k = 0; k < ctl.steps; ++k) {
    int it = 0;
    // One call site, so one copy of the step where the host compiler inlines it.
    const Status st = Flow::step(sys, s, ctl.dt, ctl.step_newton, it, jac ? &t : nullptr, &carry);
    if (st != Status::ok) return st;
  }
  qT = s.q;
  if (jac) *jac = t.template topRows<n>();
  return Status::ok;
}

// Whether a line-search trial integrates the tangent along with q(T): only
// the first trial after an iteration that took the whole Newton step. A
// rejected trial's tangent is wasted, and a trial without one costs much
// less (GL3: 0.4 of it; the chord matrix is kept, nothing is factored), so backtracking
// trials, and the first one after a backtrack, go without; an accepted one
// is integrated again with its tangent. Heisenberg GL3 at 16 steps, 3672
// shots from scattered guesses: 59% of trials were rejected, and this cuts
// the shots' time by 28% (bench/README.md).
TETHER_HD inline bool with_tangent(const ShootControl& ctl, int backtrack, bool whole_last) {
  return !ctl.line_search || (backtrack == 0 && whole_last);
}

// Whether a damped Newton solve still gets anywhere (ctl.stall_iterations,
// off by default): an iteration is slow when it cuts the residual by less
// than 10% (MINPACK hybrd's measure of progress, info = 4), and that many
// slow ones in a row stop the shot. Near a fold of the flow (dq(T)/dp0
// almost singular) the Newton step grows without bound and the line search
// accepts ever shorter pieces of it: on the Heisenberg grid at 16 GL3 steps
// such shots ran all 40 iterations at ~10 integrations each, ten times an
// average shot, and a GPU launch lasts as long as its slowest shot. But a
// slow shot may still break out: the car's sideways manoeuvre converges
// after 12 slow iterations in a row. So it is for batches with other
// guesses (and continuation) to fall back on.
struct Progress {
  int slow = 0;
  // After an accepted iteration from residual `before` to `after`: true when
  // the shot has stalled.
  TETHER_HD bool stalled(const ShootControl& ctl, Real before, Real after) {
    slow = after > Real(0.9) * before ? slow + 1 : 0;
    return ctl.stall_iterations > 0 && slow >= ctl.stall_iterations;
  }
};

// Damped Newton for q(T; p) = target from p. On return p is the last accepted
// iterate and residual |q(T; p) - target|.
template <class S, class Flow>
TETHER_HD ShotStatus shoot_newton(const S& sys, const ShootControl& ctl, ShotCarry<S, Flow>& carry,
                                  const Vec<S::dof>& q0, const Vec<S::dof>& target, Vec<S::dof>& p, int& iterations,
                                  Real& residual) {
  constexpr int n = S::dof;
  Vec<n> qT;
  Mat<n, n> jac;
  residual = Real(1) / Real(0);
  if (shoot_endpoint<S, Flow>(sys, ctl, carry, q0, p, qT, &jac) != Status::ok) return ShotStatus::integration_failed;
  Vec<n> r = qT - target;
  residual = r.norm();
  Progress progress;
  for (bool whole = true;;) {
    if (residual <= ctl.tolerance) return ShotStatus::converged;
    if (iterations >= ctl.max_iterations) return ShotStatus::max_iterations;
    DenseLU<n> lu;
    Vec<n> d;
    if (!lu.factor(jac) || !lu.solve(Vec<n>(-r), d)) return ShotStatus::singular_jacobian;
    ++iterations;
    const Real start = residual;
    Real alpha = 1;
    bool accepted = false;
    // jac, factored, is free for the trials' tangents: the accepted trial's
    // is the last one integrated.
    for (int b = 0; b <= ctl.max_backtracks && !accepted; ++b, alpha /= 2) {
      const Vec<n> trial = p + alpha * d;
      const bool tangent = with_tangent(ctl, b, whole);
      if (shoot_endpoint<S, Flow>(sys, ctl, carry, q0, trial, qT, tangent ? &jac : nullptr) == Status::ok) {
        const Real trial_residual = (qT - target).norm();
        // An accepted trial without its tangent is integrated again with it
        // (the residual then from that integration, equal to roundoff).
        if ((!ctl.line_search || trial_residual <= (1 - Real(1e-4) * alpha) * residual) &&
            (tangent || shoot_endpoint<S, Flow>(sys, ctl, carry, q0, trial, qT, &jac) == Status::ok)) {
          p = trial;
          r = qT - target;
          residual = r.norm();
          accepted = true;
          whole = b == 0;
        }
      }
      if (!ctl.line_search) break;
    }
    if (!accepted) return ctl.line_search ? ShotStatus::line_search_failed : ShotStatus::integration_failed;
    if (residual > ctl.tolerance && progress.stalled(ctl, start, residual)) return ShotStatus::stalled;
  }
}

// What shot_report finds along a solved geodesic.
template <int N>
struct ShotReport {
  Real energy = 0, length = 0;  // H(q0, p0, lambda~); int sqrt(2 (H - V)) dt, trapezoidal over the steps
  Real conjugate_time = 0;      // first conjugate time up to ctl.conjugate_search_steps dt, else NaN
  Vec<N> qT, pT;                // q(T), p(T)
};

// Along the solved geodesic from (q0, p0): energy, length and p(T) at T, and
// the first conjugate time (NaN if none), linearly interpolated in det J. The
// search goes on past T to ctl.conjugate_search_steps, and ends quietly where
// a step past T cannot be taken.
template <class S, class Flow>
TETHER_HD Status shot_report(const S& sys, const ShootControl& ctl, ShotCarry<S, Flow>& carry, const Vec<S::dof>& q0,
                             const Vec<S::dof>& p0, ShotReport<S::dof>& out, const Vec<2 * S::dof>* nodes = nullptr) {
  constexpr int n = S::dof;
  Real potential;
  Vec<S::multiplier_count> lambda;
  Status st = energy_parts(sys, q0, p0, out.energy, potential, lambda);
  if (st != Status::ok) return st;
  auto speed = [](Real e, Real v) { return sqrt(e - v > 0 ? 2 * (e - v) : Real(0)); };
  Real last_speed = speed(out.energy, potential), last_det = 0;
  int reference_sign = 0;
  out.length = 0;
  out.conjugate_time = Real(0) / Real(0);
  PhaseState<S> s;
  s.q = q0;
  s.p = p0;
  Tangent<S, n> t = initial_tangent<S>();
  restart(carry);
  const int horizon = ctl.conjugate_search_steps > ctl.steps ? ctl.conjugate_search_steps : ctl.steps;
  const int arc = ctl.steps / ctl.nodes;
  for (int k = 0; k < horizon; ++k) {
    const bool found = out.conjugate_time == out.conjugate_time;
    if (k >= ctl.steps && found) break;
    int it = 0;
    st = Flow::step(sys, s, ctl.dt, ctl.step_newton, it, &t, &carry);
    if (st != Status::ok) return k < ctl.steps ? st : Status::ok;
    // Multiple shooting: each arc starts from its node, as the solve had it
    // (they agree to the tolerance; integrating p0 alone over a long horizon
    // would amplify that). The tangent runs on: across a matched node it is
    // the product of the arcs' tangents, dq(t)/dp0 of the whole solution.
    if (nodes && k + 1 < ctl.steps && (k + 1) % arc == 0) {
      s.q = nodes[(k + 1) / arc].template head<n>();
      s.p = nodes[(k + 1) / arc].template tail<n>();
    }
    if (k < ctl.steps) {
      Real e;
      if ((st = energy_parts(sys, s.q, s.p, e, potential, lambda)) != Status::ok) return st;
      const Real v = speed(e, potential);
      out.length += ctl.dt * (last_speed + v) / 2;
      last_speed = v;
      if (k + 1 == ctl.steps) out.qT = s.q, out.pT = s.p;
    }
    DenseLU<n> lu;
    const Real det = lu.factor(Mat<n, n>(t.template topRows<n>())) ? lu.determinant() : Real(0);
    const int sign = det > 0 ? 1 : (det < 0 ? -1 : 0);
    if (reference_sign == 0) {
      // The sign just after t = 0, once det J stands clear of the roundoff of
      // its entries: near t = 0 det J grows like a high power of t (J is
      // exactly singular after one GL1 step on Heisenberg), and a sign taken
      // from noise would report a conjugate point at t ~ dt.
      Real scale = 0;
      for (int r = 0; r < n; ++r)
        for (int c = 0; c < n; ++c) scale = fmax(scale, fabs(t(r, c)));
      Real noise = 64 * n * Real(2.220446049250313e-16);
      for (int c = 0; c < n; ++c) noise *= scale;
      if (fabs(det) > noise) reference_sign = sign;
    } else if (sign != reference_sign && !found) {
      const Real t1 = ctl.dt * (k + 1);
      out.conjugate_time = sign == 0 ? t1 : t1 - ctl.dt * det / (det - last_det);
    }
    last_det = det;
  }
  return Status::ok;
}

// ---------------------------------------------------------------------------
// Multiple shooting (SB02 §7.3): [0, T] cut into K = ctl.nodes arcs of
// steps / K steps, t_k = k T / K. Unknowns p0 and the node states
// z_k = (q_k, p_k), k = 1..K-1 (nodes[0] is (q0, p0)); equations the matching
// conditions r_k = Phi_k(z_k) - z_(k+1) = 0 (Phi_k: arc k of the discrete flow)
// and r_(K-1) = q(Phi_(K-1)(z_(K-1))) - q1 = 0. Newton's linear system, with
// G_k = dPhi_k/dz_k, is G_k dz_k - dz_(k+1) = -r_k, dz_0 = (0, dp0): it is
// condensed (SB02 §7.3) by carrying dz_k = A_k dp0 + b_k along,
// A_1 = G_0 (0; I), b_1 = r_0, A_(k+1) = G_k A_k, b_(k+1) = G_k b_k + r_k, which
// leaves the n x n system (G_(K-1) A_(K-1))_q dp0 = -(r_(K-1) + (G_(K-1) b_(K-1))_q).
// G_k [A_k | b_k] is the arc's tangent map applied to n + 1 columns, so one
// sweep along the arcs with the methods' tangent option gives all of it.
// The Jacobian is exact, as in single shooting, but each node moves on its
// own: Newton's basin no longer shrinks with the flow's growth over [0, T].
template <class S>
struct ShootingNodes {
  static constexpr int n = S::dof;
  Vec<2 * n> z[kMaxShootingNodes];             // z[0] = (q0, p0)
  Tangent<S, n + 1> ab[kMaxShootingNodes];    // [A_k | b_k] at node k (k >= 1)
  Vec<n> last;                                 // r_(K-1)
  Mat<n, n + 1> end;                           // (G_(K-1) [A_(K-1) | b_(K-1)])_q

  // Node k of a line-search trial, z_k + alpha dz_k (dz null: z_k itself):
  // the one definition the sweep integrates from and an accepted trial keeps.
  TETHER_HD Vec<2 * n> trial_node(int k, const Vec<2 * n>* dz, Real alpha) const {
    return dz ? Vec<2 * n>(z[k] + alpha * dz[k]) : z[k];
  }
};

// One sweep along the arcs from the nodes w.z, or (dz not null) from the
// trial nodes w.z + alpha dz, which a line search tries without storing
// them: the residuals, their norm, and (with_tangent) the condensed
// sensitivities. Status of the first step that failed. Called by a GPU
// thread, as shoot_endpoint is.
template <class S, class Flow>
TETHER_HD TETHER_DEVICE_CALL Status shooting_sweep(const S& sys, const ShootControl& ctl, ShotCarry<S, Flow>& carry,
                                                   const Vec<S::dof>& target, ShootingNodes<S>& w, Real& norm,
                                                   bool with_tangent = true, const Vec<2 * S::dof>* dz = nullptr,
                                                   Real alpha = 0) {
  constexpr int n = S::dof;
  const int arcs = ctl.nodes, arc = ctl.steps / ctl.nodes;
  Real sum = 0;
  Tangent<S, n + 1> t;
  t.setZero();
  t.template bottomLeftCorner<n, n>().setIdentity();  // [A_0 | b_0] = [(0; I) | 0]
  for (int k = 0; k < arcs; ++k) {
    PhaseState<S> s;
    const Vec<2 * n> start = w.trial_node(k, dz, alpha);
    s.q = start.template head<n>();
    s.p = start.template tail<n>();
    restart(carry);
    for (int j = 0; j < arc; ++j) {
      int it = 0;
      const Status st = Flow::step(sys, s, ctl.dt, ctl.step_newton, it, with_tangent ? &t : nullptr, &carry);
      if (st != Status::ok) return st;
    }
    if (k + 1 < arcs) {
      Vec<2 * n> r;
      r << s.q, s.p;
      r -= w.trial_node(k + 1, dz, alpha);
      sum += r.squaredNorm();
      if (with_tangent) {
        t.col(n) += r;
        w.ab[k + 1] = t;
      }
    } else {
      w.last = s.q - target;
      sum += w.last.squaredNorm();
      if (with_tangent) w.end = t.template topRows<n>();
    }
  }
  norm = sqrt(sum);
  return Status::ok;
}

// The Newton direction at the iterate of the last sweep: dz[0] = (0, dp0),
// dz[k] = A_k dp0 + b_k. False when the condensed n x n matrix is singular.
template <class S>
TETHER_HD bool shooting_direction(const ShootControl& ctl, const ShootingNodes<S>& w, Vec<2 * S::dof>* dz) {
  constexpr int n = S::dof;
  DenseLU<n> lu;
  Vec<n> dp;
  const Mat<n, n> m = w.end.template leftCols<n>();
  if (!lu.factor(m) || !lu.solve(Vec<n>(-(w.last + w.end.col(n))), dp)) return false;
  dz[0].setZero();
  dz[0].template tail<n>() = dp;
  for (int k = 1; k < ctl.nodes; ++k) dz[k] = w.ab[k].template leftCols<n>() * dp + w.ab[k].col(n);
  return true;
}

// Damped Newton on the multiple-shooting equations from the nodes in w (p0
// in w.z[0]'s tail); on return w.z holds the last accepted iterate (a trial
// is swept from w.z + alpha dz and taken into w.z once accepted) and
// residual the norm of all its residuals.
template <class S, class Flow>
TETHER_HD ShotStatus multiple_shoot_newton(const S& sys, const ShootControl& ctl, ShotCarry<S, Flow>& carry,
                                           const Vec<S::dof>& target, ShootingNodes<S>& w, int& iterations,
                                           Real& residual) {
  constexpr int n = S::dof;
  const int arcs = ctl.nodes;
  residual = Real(1) / Real(0);
  if (shooting_sweep<S, Flow>(sys, ctl, carry, target, w, residual) != Status::ok)
    return ShotStatus::integration_failed;
  Vec<2 * n> dz[kMaxShootingNodes];
  Progress progress;
  for (bool whole = true;;) {
    if (residual <= ctl.tolerance) return ShotStatus::converged;
    if (iterations >= ctl.max_iterations) return ShotStatus::max_iterations;
    if (!shooting_direction<S>(ctl, w, dz)) return ShotStatus::singular_jacobian;
    ++iterations;
    const Real start = residual;
    Real alpha = 1;
    bool accepted = false;
    for (int b = 0; b <= ctl.max_backtracks && !accepted; ++b, alpha /= 2) {
      Real trial;
      const bool tangent = with_tangent(ctl, b, whole);
      if (shooting_sweep<S, Flow>(sys, ctl, carry, target, w, trial, tangent, dz, alpha) == Status::ok &&
          (!ctl.line_search || trial <= (1 - Real(1e-4) * alpha) * start) &&
          (tangent || shooting_sweep<S, Flow>(sys, ctl, carry, target, w, trial, true, dz, alpha) == Status::ok)) {
        for (int k = 0; k < arcs; ++k) w.z[k] = w.trial_node(k, dz, alpha);
        residual = trial;
        accepted = true;
        whole = b == 0;
      }
      if (!ctl.line_search) break;
    }
    if (!accepted) return ctl.line_search ? ShotStatus::line_search_failed : ShotStatus::integration_failed;
    if (residual > ctl.tolerance && progress.stalled(ctl, start, residual)) return ShotStatus::stalled;
  }
}

// Nodes for a multiple-shooting solve from the covector p0. From a guess
// (along_flow false): on the straight segment from q0 to the target, each
// with p0, so that no node depends on integrating the guess over the whole
// horizon (on the bowl car at T = 16 this solved 14 of 30 targets, nodes on
// the guess's trajectory 4, as single shooting). From a solved neighbour's
// covector (along_flow true): on its trajectory, which is a solution already.
// False when that trajectory cannot be integrated.
template <class S, class Flow>
TETHER_HD bool initial_nodes(const S& sys, const ShootControl& ctl, ShotCarry<S, Flow>& carry, const Vec<S::dof>& q0,
                             const Vec<S::dof>& p0, const Vec<S::dof>& target, bool along_flow, ShootingNodes<S>& w) {
  constexpr int n = S::dof;
  const int arcs = ctl.nodes, arc = ctl.steps / ctl.nodes;
  PhaseState<S> s;
  s.q = q0;
  s.p = p0;
  w.z[0] << q0, p0;
  for (int k = 1; k < arcs; ++k) {
    if (along_flow) {
      for (int j = 0; j < arc; ++j) {
        int it = 0;
        restart(carry);  // the nodes as a step without a carry finds them
        // The tangent type of shoot_endpoint's step, so no third instantiation.
        if (Flow::step(sys, s, ctl.dt, ctl.step_newton, it, static_cast<Tangent<S, n>*>(nullptr), &carry) !=
            Status::ok)
          return false;
      }
      w.z[k] << s.q, s.p;
    } else {
      w.z[k] << Vec<n>(q0 + (Real(k) / Real(arcs)) * (target - q0)), p0;
    }
  }
  return true;
}

// The error of q(T) = qT, the endpoint of ctl.steps steps from (q0, p0), by
// Richardson extrapolation on the step count: a method of order p has
// q_h(T) - q(T) = C h^p + O(h^(p+1)), so q_h(T) - q(T) ~ (q_h - q_(h/2)) / (1 - 2^-p),
// with q_(h/2) from 2 steps x ctl.steps of h/2. Infinity if those cannot be taken.
// Without qT (a multiple-shooting solution, whose arcs restart at the nodes)
// q_h(T) is integrated from p0 here too.
template <class S, class Flow>
TETHER_HD Real endpoint_error(const S& sys, const ShootControl& ctl, ShotCarry<S, Flow>& carry, const Vec<S::dof>& q0,
                              const Vec<S::dof>& p0, const Vec<S::dof>* qT) {
  ShootControl halved = ctl;
  halved.dt = ctl.dt / 2;
  halved.steps = 2 * ctl.steps;
  Vec<S::dof> coarse, fine;
  if (qT) coarse = *qT;
  if ((!qT && shoot_endpoint<S, Flow>(sys, ctl, carry, q0, p0, coarse, nullptr) != Status::ok) ||
      shoot_endpoint<S, Flow>(sys, halved, carry, q0, p0, fine, nullptr) != Status::ok)
    return Real(1) / Real(0);
  return (coarse - fine).norm() / (1 - ldexp(Real(1), -Flow::order));
}

// Solves one shot: single shooting from p, or multiple shooting (ctl.nodes
// > 1) from nodes set up for p, directly or by continuation from `from`
// (a solved neighbour's target, whose covector p is). On return p is the
// last iterate's p0 and w (multiple shooting) its nodes.
template <class S, class Flow>
TETHER_HD ShotStatus solve_shot(const S& sys, const ShootControl& ctl, ShotCarry<S, Flow>& carry, const Vec<S::dof>& q0,
                                const Vec<S::dof>& target, const Vec<S::dof>* from, Vec<S::dof>& p, int& iterations,
                                Real& residual, ShootingNodes<S>* w) {
  constexpr int n = S::dof;
  auto solve = [&](const Vec<n>& aim) {
    if (!w) return shoot_newton<S, Flow>(sys, ctl, carry, q0, aim, p, iterations, residual);
    const ShotStatus st = multiple_shoot_newton<S, Flow>(sys, ctl, carry, aim, *w, iterations, residual);
    p = w->z[0].template tail<n>();
    return st;
  };
  if (w && !initial_nodes<S, Flow>(sys, ctl, carry, q0, p, target, from != nullptr, *w)) {
    residual = Real(1) / Real(0);
    return ShotStatus::integration_failed;
  }
  // One call of solve (a GPU thread's code holds one copy of the Newton
  // loop): a shot from a guess is a continuation of one substep.
  const int substeps = from ? ctl.substeps : 1;
  ShotStatus status = ShotStatus::converged;
  for (int j = 1; j <= substeps && status == ShotStatus::converged; ++j)
    status = solve(j == substeps ? target : Vec<n>(*from + (Real(j) / substeps) * (target - *from)));
  if (from && status != ShotStatus::converged) {  // report the distance to the target itself
    Vec<n> qT;
    Real norm;
    if (w)
      residual =
          shooting_sweep<S, Flow>(sys, ctl, carry, target, *w, norm, false) == Status::ok ? norm : Real(1) / Real(0);
    else
      residual = shoot_endpoint<S, Flow>(sys, ctl, carry, q0, p, qT, nullptr) == Status::ok ? (qT - target).norm()
                                                                                     : Real(1) / Real(0);
  }
  return status;
}

// Single shooting, or multiple shooting (ctl.nodes > 1), fixed at compile
// time: a GPU kernel is compiled per kind, so that a single-shooting thread's
// stack holds no nodes (16 nodes' states and sensitivities: 5-8 KB of a GL3
// shooting kernel's frame).
enum class Shooting { single, multiple };

inline Shooting shooting_kind(const ShootControl& ctl) {
  return ctl.nodes > 1 ? Shooting::multiple : Shooting::single;
}

// One shot: from the guess (or by continuation from view.from), then its
// report. kind must be shooting_kind(ctl).
template <class S, class Flow, Shooting kind>
TETHER_HD void shoot_trajectory(const S& sys, const ShootControl& ctl, const ShotView& v, std::int64_t i) {
  constexpr int n = S::dof;
  Vec<n> q0, target, p, from;
  for (int c = 0; c < n; ++c) {
    q0[c] = v.q0[c];
    target[c] = v.target[c * v.count + i];
    p[c] = v.guess[c * v.count + i];
    if (v.from) from[c] = v.from[c * v.count + i];
  }
  int iterations = 0;
  Real residual = 0;
  ShotStatus status;
  ShotReport<n> report;
  Status reported = Status::ok;
  ShotCarry<S, Flow> carry;
  if constexpr (kind == Shooting::multiple) {
    ShootingNodes<S> w;
    status = solve_shot<S, Flow>(sys, ctl, carry, q0, target, v.from ? &from : nullptr, p, iterations, residual, &w);
    if (status == ShotStatus::converged) reported = shot_report<S, Flow>(sys, ctl, carry, q0, p, report, w.z);
  } else {
    status = solve_shot<S, Flow>(sys, ctl, carry, q0, target, v.from ? &from : nullptr, p, iterations, residual,
                                 static_cast<ShootingNodes<S>*>(nullptr));
    if (status == ShotStatus::converged) reported = shot_report<S, Flow>(sys, ctl, carry, q0, p, report);
  }
  if (reported != Status::ok)
    status = ShotStatus::integration_failed;  // cannot happen for a flow that just converged; never hidden
  // What the report found, of converged shots only.
  const bool ok = status == ShotStatus::converged;
  const Real missing = Real(0) / Real(0);
  Real error = missing;
  if (ok && ctl.estimate_error) {
    const Real scale = (target - q0).norm();
    error = endpoint_error<S, Flow>(sys, ctl, carry, q0, p, kind == Shooting::multiple ? nullptr : &report.qT) /
            (scale > 0 ? scale : Real(1));
  }
  for (int c = 0; c < n; ++c) {
    v.p0[c * v.count + i] = p[c];
    v.pT[c * v.count + i] = ok ? report.pT[c] : missing;
  }
  v.status[i] = static_cast<std::uint8_t>(status);
  v.iterations[i] = iterations;
  v.residual[i] = residual;
  v.energy[i] = ok ? report.energy : missing;
  v.length[i] = ok ? report.length : missing;
  v.conjugate_time[i] = ok ? report.conjugate_time : missing;
  v.error_estimate[i] = error;
}

}  // namespace tether

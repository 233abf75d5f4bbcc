#pragma once
// Initial conditions on T*N, one pure function of (config, trajectory id):
// the same ensemble whatever the batch size, thread count or backend.
#include <cmath>
#include <limits>
#include <string>

#include "backends/host_chain.hpp"
#include "engine/initial_state_extern.hpp"
#include "tether/engine/config.hpp"
#include "tether/core/random.hpp"
#include "tether/methods/projection.hpp"
#include "tether/methods/rattle.hpp"
#include "tether/methods/rattle_midpoint.hpp"
#include "tether/systems/generalized_hamiltonian.hpp"

namespace tether {

template <class S>
Vec<S::dof> to_vec(const std::vector<Real>& v) {
  Vec<S::dof> r;
  for (int c = 0; c < S::dof; ++c) r[c] = v[std::size_t(c)];
  return r;
}

// Moves (q, p) onto T*N: q along M^-1 G(q)^T (the SHAKE projection), then p
// M^-1-orthogonally onto the cotangent space.
template <class S>
Status project_onto_manifold(const S& sys, const NewtonOptions& opt, PhaseState<S>& s) {
  Vec<S::dof> q;
  int iterations = 0;
  const Status st = solve_position_multipliers(sys, s.q, s.q, opt, q, iterations);
  if (st != Status::ok) return st;
  s.q = q;
  return project_momentum(sys, s.q, s.p);
}

// The same for an index-1 system with holonomic constraints: q along
// Dh(q)^T onto h = 0, then p onto T*N by project_cotangent.
template <class S>
Status project_onto_manifold_index1(const S& sys, const NewtonOptions& opt, PhaseState<S>& s) {
  constexpr int n = S::dof, l = holonomic_count<S>;
  const Mat<l, n> dir = holonomic_jacobian(sys, s.q);
  const Vec<n> q_in = s.q;
  Vec<l> mu = Vec<l>::Zero();
  int iterations = 0;
  Status st = polished_newton<l>(mu, opt, iterations, [&](const Vec<l>& x, Vec<l>& r, Mat<l, l>* jac) {
    const Vec<n> q = q_in + dir.transpose() * x;
    r = holonomic_values(sys, q);
    if (jac) *jac = holonomic_jacobian(sys, q) * dir.transpose();
  });
  if (st != Status::ok) return st;
  s.q = q_in + dir.transpose() * mu;
  Vec<S::multiplier_count> lambda;
  st = solve_multipliers(sys, s.q, s.p, opt, lambda, iterations);
  if (st != Status::ok) return st;
  return project_cotangent(sys, s.q, s.p, lambda, opt, iterations);
}

template <class S>
Status project_state(const S& sys, const NewtonOptions& opt, PhaseState<S>& s) {
  if constexpr (is_lagrangian<S>)
    return sys.project_to_phase_space(s.q, s.p);
  else if constexpr (is_nonholonomic<S>)
    return project_onto_manifold_index1(sys, opt, s);
  else
    return project_onto_manifold(sys, opt, s);
}

// Momenta ~ N(0, kT M), projected onto the cotangent space at s.q: exact
// given q (LRS19: the canonical measure's conditional on T*_q N).
template <class S>
Status canonical_momentum(const S& sys, Real kT, CounterRng& rng, PhaseState<S>& s) {
  s.p = thermal_momentum(sys, kT, rng);
  return project_momentum(sys, s.q, s.p);
}

// The one draw of trajectory id's own RATTLE-HMC chain (sampling/hmc.hpp)
// after the warm-up, started from the thermal state: the chain `tether
// sample` runs for chain id with this seed, temperature, dt, L and warm-up,
// and a thermal start. HMC with a full momentum refresh leaves the canonical
// measure on T*N invariant (LRS19), so the chain's (q, p) is the state.
template <class S>
Status canonical_state(const S& sys, const RunConfig& c, std::int64_t id, PhaseState<S>& s) {
  if constexpr (!SamplerMethodFor<Rattle, S> || !SamplesConfigurations<S>) {
    throw std::logic_error(c.system_name + " has no canonical start");  // the config parser refuses it
  } else {
    constexpr int n = S::dof;
    const InitialSpec& ini = c.initial;
    CounterRng rng(c.seed, static_cast<std::uint64_t>(id));
    s.q = sys.thermal_configuration(rng, ini.temperature);
    if (const Status st = canonical_momentum(sys, ini.temperature, rng, s); st != Status::ok) return st;
    HmcControl ctl;
    ctl.steps = ini.steps;
    ctl.temperature = ini.temperature;
    ctl.newton = c.newton;
    ctl.seed = c.seed;
    SamplePlan plan;
    plan.iterations = ini.warmup + 1;
    plan.warmup = ini.warmup;
    plan.mu = std::log(10 * ini.dt);
    plan.target_acceptance = ini.target_acceptance;
    // One chain in SampleView's layout, with room for its one draw.
    Vec<n> q = s.q, p = s.p, proposal_q, proposal_p, draw_q;
    Real h = ini.dt, log_h_bar = 0, h_bar = 0, potential, acceptance, energy, step_size;
    std::int32_t steps;
    std::uint8_t outcome, tree_depth;
    const SampleView v{.count = 1,
                       .first_chain = id,
                       .q = q.data(),
                       .p = p.data(),
                       .proposal_q = proposal_q.data(),
                       .proposal_p = proposal_p.data(),
                       .step_size = &h,
                       .log_h_bar = &log_h_bar,
                       .h_bar = &h_bar,
                       .draw_count = 1,
                       .draw_q = draw_q.data(),
                       .draw_potential = &potential,
                       .draw_acceptance = &acceptance,
                       .draw_energy = &energy,
                       .draw_step_size = &step_size,
                       .draw_steps = &steps,
                       .draw_outcome = &outcome,
                       .draw_tree_depth = &tree_depth};
    host_chain(sys, HostChainStepper<Rattle>{}, ctl, plan, v, 0);  // as tether sample runs chain id
    s.q = q;
    s.p = p;
    return Status::ok;
  }
}

template <class S>
Status initial_state(const S& sys, const RunConfig& c, std::int64_t id, PhaseState<S>& s, Real& moved) {
  const InitialSpec& ini = c.initial;
  moved = 0;
  s.q_prev = Vec<S::dof>::Zero();
  if (ini.kind == InitialSpec::Kind::states) {
    const ExplicitState& e = ini.states[std::size_t(id)];
    s.q = to_vec<S>(e.q);
    s.p = to_vec<S>(e.p);
    if constexpr (is_nonholonomic<S> && holonomic_count<S> == 0) {
      return Status::ok;  // every (q, p) is a state of an index-1 system
    } else {
      if (!ini.project) return Status::ok;
      const PhaseState<S> before = s;
      const Status st = project_state(sys, c.newton, s);
      moved = std::max(max_abs(Vec<S::dof>(s.q - before.q)), max_abs(Vec<S::dof>(s.p - before.p)));
      return st;
    }
  }
  CounterRng rng(c.seed, static_cast<std::uint64_t>(id));
  Vec<S::dof> xi;
  if constexpr (is_lagrangian<S>) {
    if (ini.kind == InitialSpec::Kind::thermal) {  // the system's own sampler of T*N (p = m(q) v + a(q))
      s.q = sys.random_configuration(rng);
      s.p = sys.random_momentum(rng, s.q, ini.temperature);
      return Status::ok;
    }
  } else if constexpr (!is_nonholonomic<S>) {
    if (ini.kind == InitialSpec::Kind::thermal) {
      // Positions: the system's thermal configuration on N (see each system
      // for how far it follows the Boltzmann weight).
      if constexpr (SamplesConfigurations<S>) {
        s.q = sys.thermal_configuration(rng, ini.temperature);
        return canonical_momentum(sys, ini.temperature, rng, s);
      } else {
        throw std::logic_error(c.system_name + " has no thermal start");  // the config parser refuses it
      }
    }
    if (ini.kind == InitialSpec::Kind::canonical) return canonical_state(sys, c, id, s);
    if (ini.kind == InitialSpec::Kind::draws) {
      s.q = Eigen::Map<const Vec<S::dof>>(ini.draw_q.data() + id * S::dof);
      return canonical_momentum(sys, ini.temperature, rng, s);
    }
  }
  // around: a Gaussian cloud about one state, projected onto T*N when there
  // are holonomic constraints (index-1 systems without them take any (q, p);
  // the config refuses thermal for them).
  for (int c2 = 0; c2 < S::dof; ++c2) xi[c2] = rng.normal();
  s.q = to_vec<S>(ini.center.q) + ini.position_spread * xi;
  for (int c2 = 0; c2 < S::dof; ++c2) xi[c2] = rng.normal();
  s.p = to_vec<S>(ini.center.p) + ini.momentum_spread * xi;
  if constexpr (is_nonholonomic<S> && holonomic_count<S> == 0) return Status::ok;
  else return project_state(sys, c.newton, s);
}

inline std::string format_number(Real x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

// An explicit holonomic state must lie on T*N, or, where projection was asked
// for, project onto it: every command refuses it up front otherwise (a run
// would keep it as a trajectory failed at step 0, a sample could not start).
template <class S>
void check_on_manifold(const S& sys, const InitialSpec& ini, const NewtonOptions& newton, const ExplicitState& e,
                       const std::string& path) {
  const Vec<S::dof> q = to_vec<S>(e.q), p = to_vec<S>(e.p);
  if (ini.project) {
    PhaseState<S> s;
    s.q = q, s.p = p, s.q_prev = Vec<S::dof>::Zero();
    const Status st = project_state(sys, newton, s);
    if (st != Status::ok || !s.q.allFinite() || !s.p.allFinite())
      throw ConfigError(path, "cannot be projected onto the constraint manifold (" +
                                  std::string(st == Status::ok ? "non_finite" : status_name(st)) +
                                  " from this state): give a state nearer to it");
    return;
  }
  if constexpr (is_lagrangian<S>) {
    const Real g = max_abs(sys.constraints(q)), v = max_abs(sys.velocity_constraints(q, p));
    if (!(g <= ini.tolerance))
      throw ConfigError(path + ".q", "is off the constraint manifold: |g(q)| = " + format_number(g) + " > tolerance " +
                                         format_number(ini.tolerance) +
                                         " (set " + ini.path + ".project to true to project it)");
    if (!(v <= ini.tolerance))
      throw ConfigError(path + ".p", "violates the hidden constraint: |G(q) v| = " + format_number(v) +
                                         " > tolerance " + format_number(ini.tolerance) +
                                         " (set " + ini.path + ".project to true to project it)");
  } else if constexpr (is_nonholonomic<S>) {
    const Real g = max_abs(holonomic_values(sys, q));
    if (!(g <= ini.tolerance))
      throw ConfigError(path + ".q", "is off the constraint manifold: |h(q)| = " + format_number(g) + " > tolerance " +
                                         format_number(ini.tolerance) +
                                         " (set " + ini.path + ".project to true to project it)");
    Vec<S::multiplier_count> lambda;
    int it = 0;
    solve_multipliers(sys, q, p, NewtonOptions{}, lambda, it);
    const Real v = velocity_constraint_residual(sys, q, p, lambda);
    if (!(v <= ini.tolerance))
      throw ConfigError(path + ".p", "violates the hidden constraint: |Dh(q) qdot| = " + format_number(v) +
                                         " > tolerance " + format_number(ini.tolerance) +
                                         " (set " + ini.path + ".project to true to project it)");
    return;
  } else {
    const Real g = max_abs(sys.constraints(q));
    if (!(g <= ini.tolerance))
      throw ConfigError(path + ".q", "is off the constraint manifold: |g(q)| = " + format_number(g) + " > tolerance " +
                                         format_number(ini.tolerance) +
                                         " (set " + ini.path + ".project to true to project it)");
    const Real v = max_abs(sys.constraint_jacobian_times(q, sys.inverse_mass_times(p)));
    if (!(v <= ini.tolerance))
      throw ConfigError(path + ".p", "violates the hidden constraint: |G(q) M^-1 p| = " + format_number(v) +
                                         " > tolerance " + format_number(ini.tolerance) +
                                         " (set " + ini.path + ".project to true to project it)");
  }
}

// A temperature whose momenta p ~ N(0, kT M) the arithmetic can hold: kT M,
// and the kinetic energy of every component out to 40 standard deviations,
// finite (1e308 would make every energy inf and reject every proposal), and
// kT itself a normal double.
template <class S>
void check_temperature(const S& sys, Real kT, const std::string& path) {
  if constexpr (!is_nonholonomic<S> && !is_lagrangian<S>) {
    Real heaviest = 0;
    for (int i = 0; i < S::dof; ++i)
      heaviest = std::max(heaviest, max_abs(Vec<S::dof>(sys.mass_times(Vec<S::dof>::Unit(i)))));
    const Real bound = std::numeric_limits<Real>::max() / (1600 * Real(S::dof));
    if (!(kT >= std::numeric_limits<Real>::min()) || !(kT <= bound / std::max(heaviest, Real(1e-300))))
      throw ConfigError(path, "is " + format_number(kT) + ": kT times the mass (" + format_number(heaviest) +
                                  ") must stay below " + format_number(bound) +
                                  " (and kT above 2.2e-308) for the momenta's energies to be finite doubles");
  }
}

template <class S>
void check_initial_states(const S& sys, const RunConfig& c) {
  const InitialSpec& ini = c.initial;
  if (ini.kind == InitialSpec::Kind::thermal || ini.kind == InitialSpec::Kind::canonical)
    check_temperature(sys, ini.temperature, ini.path + ".temperature");
  auto check_dims = [&](const ExplicitState& e, const std::string& path) {
    for (const auto& [key, v] : {std::pair{"q", &e.q}, std::pair{"p", &e.p}})
      if (v->size() != std::size_t(S::dof))
        throw ConfigError(path + "." + key, "has " + std::to_string(v->size()) + " entries, " + c.system_name +
                                                " needs " + std::to_string(S::dof));
  };
  if (ini.kind == InitialSpec::Kind::around) check_dims(ini.center, ini.path);
  if (ini.kind != InitialSpec::Kind::states) return;
  for (std::size_t i = 0; i < ini.states.size(); ++i) {
    const std::string path = ini.path + ".states[" + std::to_string(i) + "]";
    try {
      check_dims(ini.states[i], path);
      // Index 1 without holonomic constraints: every (q, p) is a state.
      if constexpr (!is_nonholonomic<S> || holonomic_count<S> > 0)
        check_on_manifold(sys, ini, c.newton, ini.states[i], path);
    } catch (const ConfigError& e) {
      if (!ini.states_as_arrays || e.path().rfind(path + ".", 0) != 0) throw;
      // States handed over as arrays: the error is at row i of array q or p, states.q[i].
      const std::string key = e.path().substr(path.size() + 1);
      const std::string message = std::string(e.what()).substr(std::string("config error at ").size() + e.path().size() + 2);
      throw ConfigError(ini.path + ".states." + key + "[" + std::to_string(i) + "]", message);
    }
  }
}

}  // namespace tether

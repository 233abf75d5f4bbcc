#pragma once
// The contracts of the registry (include/tether/registry.hpp), as concepts:
// the system families, the narrower kinds of system some methods need, and
// what every system and method declares. The registry checks each entry
// against them where it is listed; a method says which systems it applies to
// with one of these concepts (its `applies_to`).
#include <concepts>

#include "tether/core/family.hpp"
#include "tether/core/parameters.hpp"
#include "tether/core/random.hpp"
#include "tether/systems/generalized_hamiltonian.hpp"

namespace tether {

// What every registered system and method declares about itself: its config
// name, a one-line description and the reference it implements (by the key of
// docs/references.md), and its runtime parameters (core/parameters.hpp).
template <class T>
concept Declared = requires(T t) {
  { T::name } -> std::convertible_to<const char*>;
  { T::description } -> std::convertible_to<const char*>;
  { T::citation } -> std::convertible_to<const char*>;
  typename T::Parameters;
  t.prm;
};

// Optional: the compile-time choice among instantiations sharing one name.
template <class T>
concept HasVariant = requires {
  { T::variant } -> std::convertible_to<Variant>;
};

// Holonomic systems (BMS24): q in R^dof on N = {g(q) = 0}, constant mass
// matrix, H = p.M^-1 p / 2 + V(q). The SHAKE/RATTLE family integrates them.
template <class S>
concept HolonomicSystem = !is_nonholonomic<S> && !is_lagrangian<S> &&
    requires(const S& s, const Vec<S::dof>& q, const Vec<S::constraint_count>& lambda) {
      typename S::Gram;
      { s.potential(q) } -> std::convertible_to<Real>;
      { s.potential_gradient(q) } -> std::convertible_to<Vec<S::dof>>;
      { s.constraints(q) } -> std::convertible_to<Vec<S::constraint_count>>;
      { s.constraint_jacobian_times(q, q) } -> std::convertible_to<Vec<S::constraint_count>>;
      { s.constraint_transpose_times(q, lambda) } -> std::convertible_to<Vec<S::dof>>;
      { s.gram(q, q) } -> std::convertible_to<typename S::Gram>;
      { s.mass_times(q) } -> std::convertible_to<Vec<S::dof>>;
      { s.inverse_mass_times(q) } -> std::convertible_to<Vec<S::dof>>;
      { s.length_scale() } -> std::convertible_to<Real>;
      { s.energy_scale() } -> std::convertible_to<Real>;
    };

// Index-1 generalized Hamiltonian systems (MMVW13, LJM12): every (q, p) is a
// state, lambda = lambda~(q, p); the symplectic Runge-Kutta family.
template <class S>
concept Index1System = is_nonholonomic<S> && holonomic_count<S> == 0 && requires {
  { S::form } -> std::convertible_to<Form>;
  { S::multiplier_count } -> std::convertible_to<int>;
};

// Index-1 systems with holonomic constraints h(q) = 0 too (MMVW13 Prop 6).
template <class S>
concept MixedSystem = is_nonholonomic<S> && holonomic_count<S> > 0 && S::form == Form::lagrangian;

// Constrained Lagrangians with m(q) and a magnetic term (PCSZ09).
template <class S>
concept LagrangianSystem = is_lagrangian<S> && requires(const S& s, const Vec<S::dof>& q) {
  { s.energy(q, q) } -> std::convertible_to<Real>;
  s.constraints(q);
  s.velocity_constraints(q, q);
};

template <class S>
concept RegisteredSystem = Declared<S> && requires {
  { S::dof } -> std::convertible_to<int>;
} && (HolonomicSystem<S> || Index1System<S> || MixedSystem<S> || LagrangianSystem<S>);

// Whether flipping p reverses the flow, (q, p) -> (q, -p): true unless the
// system says otherwise (a magnetic term needs the field flipped too).
template <class S>
constexpr bool reversed_by_momentum_flip() {
  if constexpr (requires { S::reversed_by_momentum_flip; }) return S::reversed_by_momentum_flip;
  else return true;
}

// Whether a holonomic system draws its own configurations on N (the thermal
// and canonical starts need it): built-in systems do; a system declared as
// expressions starts from given states.
template <class S>
concept SamplesConfigurations = requires(const S& s, CounterRng& rng) {
  { s.thermal_configuration(rng, Real(1)) } -> std::convertible_to<Vec<S::dof>>;
};

template <class S>
constexpr Family family_of() {
  if constexpr (is_lagrangian<S>) return Family::lagrangian;
  else if constexpr (is_nonholonomic<S> && holonomic_count<S> > 0) return Family::mixed;
  else if constexpr (is_nonholonomic<S>) return Family::nonholonomic;
  else return Family::holonomic;
}

// Narrower kinds of holonomic system that some methods need.
// Rigid bodies in ambient coordinates, R in R^{3x3} with R^T R = I (BMS24 Example 5.3).
template <class S>
concept RigidBodySystem = HolonomicSystem<S> && requires(const S& s) {
  { S::bodies } -> std::convertible_to<int>;
  { S::tangent_dim } -> std::convertible_to<int>;
  { s.principal_inertia(0) } -> std::convertible_to<Vec<3>>;
};
// No constraints at all (BM21 §4.1: retraction maps and Newmark on T*Q).
template <class S>
concept UnconstrainedSystem = HolonomicSystem<S> && S::constraint_count == 0;
// A point on a sphere about the origin, T*S^2 (BM21 Example 5.4).
template <class S>
concept SphereSystem = HolonomicSystem<S> && S::dof == 3 && S::constraint_count == 1 && requires(const S& s) {
  { s.sphere_radius() } -> std::convertible_to<Real>;
};

// What every registered method declares: its name, description, citation
// and parameters (Declared), the order with its default parameters, whether
// it keeps q_prev (two-step), whether it is symmetric (time-reversible) and
// symplectic (on T*N, canonical dq ^ dp) with its default parameters, and
// which systems it applies to. The property tests check each claim.
template <class M, class S>
concept MethodFor = M::template applies_to<S>;

template <class M>
concept RegisteredMethod = Declared<M> && requires {
  { M::order } -> std::convertible_to<int>;
  { M::two_step } -> std::convertible_to<bool>;
  { M::symmetric } -> std::convertible_to<bool>;
  { M::symplectic } -> std::convertible_to<bool>;
};

}  // namespace tether

#pragma once
// The registry: every system and method this build knows, each listed once.
// Config parsing and validation, dispatch, `tether list`, summary.json's
// method description, the generated instantiation units (one per system,
// CMakeLists.txt) and the tests' case lists all come from these two lists.
//
// Keep one entry per line between the markers: CMake counts the system lines
// to generate one instantiation unit per system (a static_assert in each unit
// catches a miscount).
#include "tether/core/families.hpp"
#include "tether/methods/composition.hpp"
#include "tether/methods/constrained_midpoint.hpp"
#include "tether/methods/gauss_legendre.hpp"
#include "tether/methods/lie_rattle.hpp"
#include "tether/methods/newmark.hpp"
#include "tether/methods/null_space_rattle.hpp"
#include "tether/methods/rattle.hpp"
#include "tether/methods/rattle_midpoint.hpp"
#include "tether/methods/retraction.hpp"
#include "tether/methods/shake.hpp"
#include "tether/methods/sphere_retraction.hpp"
#include "tether/methods/stormer_verlet.hpp"
#include "tether/methods/symplectic_euler.hpp"
#include "tether/methods/symplectic_euler_a.hpp"
#include "tether/methods/symplectic_euler_b.hpp"
#include "tether/methods/variational.hpp"
#include "tether/systems/chain.hpp"
#include "tether/systems/double_pendulum.hpp"
#include "tether/systems/fisher_bingham.hpp"
#include "tether/systems/four_bar.hpp"
#include "tether/systems/heisenberg.hpp"
#include "tether/systems/heisenberg_vakonomic.hpp"
#include "tether/systems/kepler.hpp"
#include "tether/systems/magnetic_sphere.hpp"
#include "tether/systems/martinet.hpp"
#include "tether/systems/parallel_parking.hpp"
#include "tether/systems/rigid_body.hpp"
#include "tether/systems/rigid_chain.hpp"
#include "tether/systems/sphere_contact.hpp"
#include "tether/systems/spherical_pendulum.hpp"

namespace tether {

template <class... T>
struct TypeList {
  static constexpr int size = sizeof...(T);
};

// clang-format off
using Systems = TypeList<
    // registry systems begin
    SphericalPendulum,
    DoublePendulum,
    Chain<4>,
    Chain<8>,
    Chain<16>,
    FourBar,
    Kepler,
    RigidBody,
    RigidChain<1>,
    RigidChain<2>,
    MagneticSphere,
    Heisenberg,
    HeisenbergVakonomic,
    Martinet,
    MartinetLagrangian,
    ParallelParking,
    SphereContact,
    FisherBingham
    // registry systems end
    >;

using Methods = TypeList<
    SymplecticEulerA,
    SymplecticEulerB,
    Shake,
    Rattle,
    ConstrainedMidpoint,
    Composition<Rattle>,
    Composition<ConstrainedMidpoint>,
    Composition<SymplecticEulerPair>,
    NullSpaceRattle,
    LieRattle<So3Exp>,
    LieRattle<So3Cayley>,
    LieLobatto<So3Exp>,
    LieLobatto<So3Cayley>,
    ThetaRetraction,
    Newmark,
    SphereRetraction<ProjectionRetraction>,
    SphereRetraction<ExpRetraction>,
    Variational,
    GaussLegendre<1>,
    GaussLegendre<2>,
    GaussLegendre<3>,
    SymplecticEuler,
    StormerVerlet,
    RattleMidpoint>;
// clang-format on

// The I-th type of a list.
template <int I, class List>
struct At;
template <int I, class T, class... Rest>
struct At<I, TypeList<T, Rest...>> : At<I - 1, TypeList<Rest...>> {};
template <class T, class... Rest>
struct At<0, TypeList<T, Rest...>> {
  using type = T;
};
template <int I>
using SystemAt = typename At<I, Systems>::type;
template <int I>
using MethodAt = typename At<I, Methods>::type;

// Calls f(std::type_identity<T>{}, index) for every type of a list, in order.
template <class... T, class F>
constexpr void for_each_type(TypeList<T...>, F&& f) {
  int i = 0;
  (f(std::type_identity<T>{}, i++), ...);
}

// The registration checks, with messages that say which contract is unmet.
template <class... S>
constexpr bool check_systems(TypeList<S...>) {
  static_assert((RegisteredSystem<S> && ...),
                "every entry of Systems must declare name, description, citation, Parameters and prm, and "
                "satisfy one family concept of core/families.hpp: HolonomicSystem, Index1System, MixedSystem "
                "or LagrangianSystem");
  return true;
}
template <class... M>
constexpr bool check_methods(TypeList<M...>) {
  static_assert((RegisteredMethod<M> && ...),
                "every entry of Methods must declare name, description, citation, Parameters and prm, order, "
                "two_step, symmetric and applies_to<S> (core/families.hpp)");
  return true;
}
static_assert(check_systems(Systems{}));
static_assert(check_methods(Methods{}));

}  // namespace tether

#pragma once
// The registry's systems: every system this build knows, each listed once
// (tether/registry.hpp adds the methods). Apart from the registry, so that
// the units CMake generates for each method include the systems and their own
// method's header alone: touching one method's header rebuilds its units only.
//
// Keep one entry per line between the markers, with the header that
// defines it: CMake counts them (engine.cpp checks its count against this
// list), and a pair a build compiles at first use includes that header.
#include <type_traits>

#include "tether/core/families.hpp"
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
    SphericalPendulum,                    // tether/systems/spherical_pendulum.hpp
    DoublePendulum,                       // tether/systems/double_pendulum.hpp
    Chain<4>,                             // tether/systems/chain.hpp
    Chain<8>,                             // tether/systems/chain.hpp
    Chain<16>,                            // tether/systems/chain.hpp
    FourBar,                              // tether/systems/four_bar.hpp
    Kepler,                               // tether/systems/kepler.hpp
    RigidBody,                            // tether/systems/rigid_body.hpp
    RigidChain<1>,                        // tether/systems/rigid_chain.hpp
    RigidChain<2>,                        // tether/systems/rigid_chain.hpp
    MagneticSphere,                       // tether/systems/magnetic_sphere.hpp
    Heisenberg,                           // tether/systems/heisenberg.hpp
    HeisenbergVakonomic,                  // tether/systems/heisenberg_vakonomic.hpp
    Martinet,                             // tether/systems/martinet.hpp
    MartinetLagrangian,                   // tether/systems/martinet.hpp
    ParallelParking,                      // tether/systems/parallel_parking.hpp
    SphereContact,                        // tether/systems/sphere_contact.hpp
    FisherBingham                         // tether/systems/fisher_bingham.hpp
    // registry systems end
    >;
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

// Calls f(std::type_identity<T>{}, index) for every type of a list, in order.
template <class... T, class F>
constexpr void for_each_type(TypeList<T...>, F&& f) {
  int i = 0;
  (f(std::type_identity<T>{}, i++), ...);
}

// The registration check, with a message that says which contract is unmet.
template <class... S>
constexpr bool check_systems(TypeList<S...>) {
  static_assert((RegisteredSystem<S> && ...),
                "every entry of Systems must declare name, description, citation, Parameters and prm, and "
                "satisfy one family concept of core/families.hpp: HolonomicSystem, Index1System, MixedSystem "
                "or LagrangianSystem");
  return true;
}
static_assert(check_systems(Systems{}));

}  // namespace tether

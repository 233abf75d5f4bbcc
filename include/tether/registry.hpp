#pragma once
// The registry: every system (tether/system_list.hpp) and method this build
// knows, each listed once. Config parsing and validation, dispatch, `tether
// list`, summary.json's method description, the generated instantiation units
// (one per method header, CMakeLists.txt) and the tests' case lists all come from
// these two lists.
//
// Keep one method per line between the markers, with the header that declares
// it in the line's comment: CMake generates one unit per method header that
// includes that header and the systems alone, so touching a method's header
// rebuilds its own units (engine.cpp checks CMake's count against this list).
// The comment lines between them divide the methods into groups that pair
// with the same systems: the compile check (no GPU) compiles each group in
// one unit, which then compiles those systems' device code once.
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
#include "tether/system_list.hpp"

namespace tether {

// clang-format off
using Methods = TypeList<
    // registry methods begin
    // holonomic: the SHAKE/RATTLE family and its compositions
    SymplecticEulerA,                         // tether/methods/symplectic_euler_a.hpp
    SymplecticEulerB,                         // tether/methods/symplectic_euler_b.hpp
    Shake,                                    // tether/methods/shake.hpp
    Rattle,                                   // tether/methods/rattle.hpp
    ConstrainedMidpoint,                      // tether/methods/constrained_midpoint.hpp
    Composition<Rattle>,                      // tether/methods/composition.hpp
    Composition<ConstrainedMidpoint>,         // tether/methods/composition.hpp
    Composition<SymplecticEulerPair>,         // tether/methods/composition.hpp
    NullSpaceRattle,                          // tether/methods/null_space_rattle.hpp
    // rigid bodies: RATTLE on the Lie group
    LieRattle<So3Exp>,                        // tether/methods/lie_rattle.hpp
    LieRattle<So3Cayley>,                     // tether/methods/lie_rattle.hpp
    LieLobatto<So3Exp>,                       // tether/methods/lie_rattle.hpp
    LieLobatto<So3Cayley>,                    // tether/methods/lie_rattle.hpp
    // retractions and Newmark
    ThetaRetraction,                          // tether/methods/retraction.hpp
    Newmark,                                  // tether/methods/newmark.hpp
    SphereRetraction<ProjectionRetraction>,   // tether/methods/sphere_retraction.hpp
    SphereRetraction<ExpRetraction>,          // tether/methods/sphere_retraction.hpp
    // variational integrators
    Variational,                              // tether/methods/variational.hpp
    // index-1 systems: Gauss-Legendre collocation
    GaussLegendre<1>,                         // tether/methods/gauss_legendre.hpp
    GaussLegendre<2>,                         // tether/methods/gauss_legendre.hpp
    GaussLegendre<3>,                         // tether/methods/gauss_legendre.hpp
    // index-1 systems: partitioned methods
    SymplecticEuler,                          // tether/methods/symplectic_euler.hpp
    StormerVerlet,                            // tether/methods/stormer_verlet.hpp
    // mixed systems (contact)
    RattleMidpoint                            // tether/methods/rattle_midpoint.hpp
    // registry methods end
    >;
// clang-format on

template <int I>
using MethodAt = typename At<I, Methods>::type;

// The registration check, with a message that says which contract is unmet.
template <class... M>
constexpr bool check_methods(TypeList<M...>) {
  static_assert((RegisteredMethod<M> && ...),
                "every entry of Methods must declare name, description, citation, Parameters and prm, order, "
                "two_step, symmetric and applies_to<S> (core/families.hpp)");
  return true;
}
static_assert(check_methods(Methods{}));

}  // namespace tether

#pragma once
// The systems and methods this build instantiates, in one place: config
// validation, the host dispatch, `tether list` and the CUDA instantiations
// all expand these. Methods come in two families and pair only with systems
// of their own family. (A new chain size also needs its
// kernels/instantiate_chainN.cu, one file per system so that nvcc compiles
// them in parallel.)
#include "tether/methods/composition.hpp"
#include "tether/methods/constrained_midpoint.hpp"
#include "tether/methods/gauss_legendre.hpp"
#include "tether/methods/lie_rattle.hpp"
#include "tether/methods/newmark.hpp"
#include "tether/methods/null_space_rattle.hpp"
#include "tether/methods/retraction.hpp"
#include "tether/methods/sphere_retraction.hpp"
#include "tether/methods/variational.hpp"
#include "tether/methods/rattle.hpp"
#include "tether/methods/rattle_midpoint.hpp"
#include "tether/methods/shake.hpp"
#include "tether/methods/stormer_verlet.hpp"
#include "tether/methods/symplectic_euler.hpp"
#include "tether/methods/symplectic_euler_a.hpp"
#include "tether/methods/symplectic_euler_b.hpp"
#include "tether/systems/chain.hpp"
#include "tether/systems/double_pendulum.hpp"
#include "tether/systems/heisenberg.hpp"
#include "tether/systems/kepler.hpp"
#include "tether/systems/magnetic_sphere.hpp"
#include "tether/systems/rigid_body.hpp"
#include "tether/systems/rigid_chain.hpp"
#include "tether/systems/heisenberg_vakonomic.hpp"
#include "tether/systems/martinet.hpp"
#include "tether/systems/parallel_parking.hpp"
#include "tether/systems/sphere_contact.hpp"
#include "tether/systems/spherical_pendulum.hpp"

// Holonomic systems (seed 000): SHAKE/RATTLE family.
#define TETHER_FOR_EACH_HOLONOMIC_METHOD(X, S) \
  X(S, ::tether::SymplecticEulerA)             \
  X(S, ::tether::SymplecticEulerB)             \
  X(S, ::tether::Shake)                        \
  X(S, ::tether::Rattle)                       \
  X(S, ::tether::ConstrainedMidpoint)          \
  X(S, ::tether::Composition<::tether::Rattle>) \
  X(S, ::tether::Composition<::tether::ConstrainedMidpoint>) \
  X(S, ::tether::Composition<::tether::SymplecticEulerPair>)

// Further holonomic methods for some holonomic systems only:
// rigid bodies in ambient coordinates (seed 000 Example 5.3, §6),
#define TETHER_FOR_EACH_RIGID_METHOD(X, S)                 \
  X(S, ::tether::NullSpaceRattle)                          \
  X(S, ::tether::LieRattle<::tether::So3Exp>)              \
  X(S, ::tether::LieRattle<::tether::So3Cayley>)           \
  X(S, ::tether::LieLobatto<::tether::So3Exp>)             \
  X(S, ::tether::LieLobatto<::tether::So3Cayley>)
// unconstrained systems (seed 003 Prop 5.1, §4.1),
#define TETHER_FOR_EACH_UNCONSTRAINED_METHOD(X, S) \
  X(S, ::tether::ThetaRetraction)                  \
  X(S, ::tether::Newmark)
// and a point on a sphere, T*S^2 (seed 003 Example 5.4).
#define TETHER_FOR_EACH_SPHERE_METHOD(X, S) \
  X(S, ::tether::SphereProjection)          \
  X(S, ::tether::SphereExp)

// Constrained Lagrangians with m(q) and a(q) (seed 002).
#define TETHER_FOR_EACH_LAGRANGIAN_METHOD(X, S) X(S, ::tether::Variational)

#define TETHER_FOR_EACH_RIGID_CHAIN_SIZE(X) X(1) X(2)

// Index-1 generalized Hamiltonian systems (seed 001, seed 004).
#define TETHER_FOR_EACH_NONHOLONOMIC_METHOD(X, S) \
  X(S, ::tether::GaussLegendre<1>)                \
  X(S, ::tether::GaussLegendre<2>)                \
  X(S, ::tether::GaussLegendre<3>)                \
  X(S, ::tether::SymplecticEuler)                 \
  X(S, ::tether::StormerVerlet)

// Index-1 systems with holonomic constraints as well (seed 001 Props 6-7).
#define TETHER_FOR_EACH_MIXED_METHOD(X, S) X(S, ::tether::RattleMidpoint)

#define TETHER_FOR_EACH_CHAIN_SIZE(X) X(4) X(8) X(16)

#define TETHER_FOR_EACH_NONHOLONOMIC_SYSTEM(X) \
  X(::tether::Heisenberg)                      \
  X(::tether::HeisenbergVakonomic)             \
  X(::tether::Martinet)                        \
  X(::tether::MartinetLagrangian)              \
  X(::tether::ParallelParking)

#define TETHER_FOR_EACH_MIXED_SYSTEM(X) X(::tether::SphereContact)

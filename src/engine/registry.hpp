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

#pragma once
// The methods and chain sizes this build instantiates, in one place: config
// validation, the host dispatch, `tether list` and the CUDA instantiations
// all expand these. (A new chain size also needs its kernels/instantiate_chainN.cu,
// one file per system so that nvcc compiles them in parallel.)
#include "tether/methods/constrained_midpoint.hpp"
#include "tether/methods/rattle.hpp"
#include "tether/methods/shake.hpp"
#include "tether/methods/symplectic_euler_a.hpp"
#include "tether/methods/symplectic_euler_b.hpp"
#include "tether/systems/chain.hpp"
#include "tether/systems/double_pendulum.hpp"
#include "tether/systems/spherical_pendulum.hpp"

#define TETHER_FOR_EACH_METHOD(X, S) \
  X(S, ::tether::SymplecticEulerA)   \
  X(S, ::tether::SymplecticEulerB)   \
  X(S, ::tether::Shake)              \
  X(S, ::tether::Rattle)             \
  X(S, ::tether::ConstrainedMidpoint)

#define TETHER_FOR_EACH_CHAIN_SIZE(X) X(4) X(8) X(16)

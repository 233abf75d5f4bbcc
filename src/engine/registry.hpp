#pragma once
// The (system, method) pairs this build instantiates, in one place: the host
// dispatch and the CUDA instantiation list both expand these.
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

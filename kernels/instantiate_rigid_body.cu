// Explicit CUDA instantiations for RigidBody (one file per system: they compile in parallel).
#include "cuda_backend.cuh"
#include "engine/registry.hpp"

TETHER_FOR_EACH_HOLONOMIC_METHOD(TETHER_INSTANTIATE_CUDA, ::tether::RigidBody)
TETHER_FOR_EACH_RIGID_METHOD(TETHER_INSTANTIATE_CUDA, ::tether::RigidBody)

// Explicit CUDA instantiations for RigidChain<2> (one file per system: they compile in parallel).
#include "cuda_backend.cuh"
#include "engine/registry.hpp"

TETHER_FOR_EACH_HOLONOMIC_METHOD(TETHER_INSTANTIATE_CUDA, ::tether::RigidChain<2>)
TETHER_FOR_EACH_RIGID_METHOD(TETHER_INSTANTIATE_CUDA, ::tether::RigidChain<2>)

// Explicit CUDA instantiations for SphericalPendulum (one file per system: they compile in parallel).
#include "cuda_backend.cuh"
#include "engine/registry.hpp"

TETHER_FOR_EACH_HOLONOMIC_METHOD(TETHER_INSTANTIATE_CUDA, ::tether::SphericalPendulum)
TETHER_FOR_EACH_SPHERE_METHOD(TETHER_INSTANTIATE_CUDA, ::tether::SphericalPendulum)

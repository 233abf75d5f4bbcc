// Explicit CUDA instantiations for Kepler (one file per system: they compile in parallel).
#include "cuda_backend.cuh"
#include "engine/registry.hpp"

TETHER_FOR_EACH_HOLONOMIC_METHOD(TETHER_INSTANTIATE_CUDA, ::tether::Kepler)
TETHER_FOR_EACH_UNCONSTRAINED_METHOD(TETHER_INSTANTIATE_CUDA, ::tether::Kepler)

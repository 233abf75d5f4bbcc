// Explicit CUDA instantiations for SphereContact (one file per system: they compile in parallel).
#include "cuda_backend.cuh"
#include "engine/registry.hpp"

TETHER_FOR_EACH_MIXED_METHOD(TETHER_INSTANTIATE_CUDA, ::tether::SphereContact)

// Explicit CUDA instantiations for MagneticSphere (one file per system: they compile in parallel).
#include "cuda_backend.cuh"
#include "engine/registry.hpp"

TETHER_FOR_EACH_LAGRANGIAN_METHOD(TETHER_INSTANTIATE_CUDA, ::tether::MagneticSphere)

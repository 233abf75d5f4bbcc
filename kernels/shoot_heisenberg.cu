// CUDA shooting instantiations for Heisenberg (one file per system: they compile in parallel).
#include "shoot.cuh"
#include "engine/registry.hpp"

TETHER_FOR_EACH_NONHOLONOMIC_METHOD(TETHER_INSTANTIATE_CUDA_SHOOT, ::tether::Heisenberg)

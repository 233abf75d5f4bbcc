#pragma once
// Included by the CUDA units CMake generates from the registry
// (cuda_<method header>.cu, and cuda_check_<k>.cu for the compile check),
// after the methods' headers: the run, shooting and sampling kernels of those
// methods with every system that pairs with them.
#include "backends/cuda/instantiate_pair.cuh"
#include "tether/system_list.hpp"

// For system I (registry index) with method tether::M: each generated unit
// names its methods tether::Method<j> and expands this for each of them with
// every system (TETHER_FOR_EACH_SYSTEM_WITH).
#define TETHER_INSTANTIATE_CUDA_PAIR(I, M)                                                               \
  static_assert(I < ::tether::Systems::size, "CMake counted more systems than tether/system_list.hpp lists"); \
  TETHER_INSTANTIATE_CUDA(::tether::SystemAt<I>, ::tether::M)

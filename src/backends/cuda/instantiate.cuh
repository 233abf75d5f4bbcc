#pragma once
// Included by the CUDA units CMake generates from the registry
// (cuda_<method header>.cu, and cuda_check_<k>.cu for the compile check),
// after the methods' headers: the run, shooting and sampling kernels of those
// methods with every system that pairs with them.
#include "backends/cuda/sample.cuh"
#include "backends/cuda/shoot.cuh"
#include "tether/system_list.hpp"

// For system I (registry index) with method tether::M: each generated unit
// names its methods tether::Method<j> and expands this for each of them with
// every system (TETHER_FOR_EACH_SYSTEM_WITH).
#define TETHER_INSTANTIATE_CUDA_PAIR(I, M)                                                               \
  static_assert(I < ::tether::Systems::size, "CMake counted more systems than tether/system_list.hpp lists"); \
  template std::unique_ptr<::tether::Backend>                                                            \
  tether::make_cuda_backend<::tether::SystemAt<I>, ::tether::M>(                                         \
      const ::tether::SystemAt<I>&, const ::tether::M&, const ::tether::StepControl&);                   \
  template std::unique_ptr<::tether::ShotRunner>                                                         \
  tether::make_cuda_shot_runner<::tether::SystemAt<I>, ::tether::M>(                                     \
      const ::tether::SystemAt<I>&, const ::tether::ShootControl&);                                      \
  template std::unique_ptr<::tether::ChainRunner>                                                        \
  tether::make_cuda_chain_runner<::tether::SystemAt<I>, ::tether::M>(                                    \
      const ::tether::SystemAt<I>&, const ::tether::M&, const ::tether::HmcControl&);

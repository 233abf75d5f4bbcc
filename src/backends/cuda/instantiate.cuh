#pragma once
// Included by the CUDA unit CMake generates for each registered method
// (cuda_method_<j>.cu), after the method's header: the run, shooting and
// sampling kernels of that method with every system that pairs with it.
#include "backends/cuda/sample.cuh"
#include "backends/cuda/shoot.cuh"
#include "tether/system_list.hpp"

// For system I (registry index) with the method of the unit: each generated
// unit names its method tether::UnitMethod and expands this for every system
// (TETHER_FOR_EACH_SYSTEM).
#define TETHER_INSTANTIATE_CUDA_PAIR(I)                                                                  \
  static_assert(I < ::tether::Systems::size, "CMake counted more systems than tether/system_list.hpp lists"); \
  template std::unique_ptr<::tether::Backend>                                                            \
  tether::make_cuda_backend<::tether::SystemAt<I>, ::tether::UnitMethod>(                                \
      const ::tether::SystemAt<I>&, const ::tether::UnitMethod&, const ::tether::StepControl&);          \
  template std::unique_ptr<::tether::ShotRunner>                                                         \
  tether::make_cuda_shot_runner<::tether::SystemAt<I>, ::tether::UnitMethod>(                            \
      const ::tether::SystemAt<I>&, const ::tether::ShootControl&);                                      \
  template std::unique_ptr<::tether::ChainRunner>                                                        \
  tether::make_cuda_chain_runner<::tether::SystemAt<I>, ::tether::UnitMethod>(                           \
      const ::tether::SystemAt<I>&, const ::tether::UnitMethod&, const ::tether::HmcControl&);

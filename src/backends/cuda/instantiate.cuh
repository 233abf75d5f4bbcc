#pragma once
// Included by the CUDA unit CMake generates for each registered system
// (cuda_system_<I>.cu): the run, shooting and sampling kernels of system I
// with every method that pairs with it.
#include "backends/cuda/sample.cuh"
#include "backends/cuda/shoot.cuh"

#define TETHER_INSTANTIATE_CUDA_SYSTEM(I)                                                                    \
  static_assert(I < ::tether::Systems::size, "CMake generated more units than tether/registry.hpp lists"); \
  template std::unique_ptr<::tether::Backend> tether::make_cuda_backend<::tether::SystemAt<I>>(           \
      const ::tether::SystemAt<I>&, const ::tether::PairedMethod<::tether::SystemAt<I>>&,                   \
      const ::tether::StepControl&);                                                                        \
  template std::unique_ptr<::tether::ShotRunner> tether::make_cuda_shot_runner<::tether::SystemAt<I>>(     \
      const ::tether::SystemAt<I>&, const ::tether::PairedMethod<::tether::SystemAt<I>>&,                   \
      const ::tether::ShootControl&);                                                                       \
  template std::unique_ptr<::tether::ChainRunner> tether::make_cuda_chain_runner<::tether::SystemAt<I>>(   \
      const ::tether::SystemAt<I>&, const ::tether::PairedMethod<::tether::SystemAt<I>>&,                   \
      const ::tether::HmcControl&);

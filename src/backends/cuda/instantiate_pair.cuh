#pragma once
// The run, shooting and sampling kernels of one (system type S, method type
// M) pair, with the host code that launches them: what each unit CMake
// generates expands for its pairs (instantiate.cuh), and what the CUDA unit
// of a declared system expands for its one (expr/compiled_pair.hpp).
#include "backends/cuda/sample.cuh"
#include "backends/cuda/shoot.cuh"

// One engine's entry point each (a declared pair's unit holds its engine's
// alone), and all three (the built-in pairs).
#define TETHER_INSTANTIATE_CUDA_RUN(S, M)                                                                      \
  template std::unique_ptr<::tether::Backend> tether::make_cuda_backend<S, M>(const S&, const M&,                \
                                                                             const ::tether::StepControl&);
#define TETHER_INSTANTIATE_CUDA_SHOOT(S, M)                                                                    \
  template std::unique_ptr<::tether::ShotRunner> tether::make_cuda_shot_runner<S, M>(const S&,                   \
                                                                                    const ::tether::ShootControl&);
#define TETHER_INSTANTIATE_CUDA_SAMPLE(S, M)                                                                   \
  template std::unique_ptr<::tether::ChainRunner> tether::make_cuda_chain_runner<S, M>(const S&, const M&,       \
                                                                                      const ::tether::HmcControl&);
#define TETHER_INSTANTIATE_CUDA(S, M) \
  TETHER_INSTANTIATE_CUDA_RUN(S, M) TETHER_INSTANTIATE_CUDA_SHOOT(S, M) TETHER_INSTANTIATE_CUDA_SAMPLE(S, M)

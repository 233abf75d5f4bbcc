#pragma once
// The cuda backend's entry points, compiled by nvcc: CMake generates one
// unit per method header of the registry (cuda_<method header>.cu) that
// instantiates these for its methods with every system (instantiate.cuh).
#include <memory>

#include "backends/backend.hpp"
#include "backends/chain_runner.hpp"
#include "backends/shot_runner.hpp"

namespace tether {

// For a pair the registry does not allow (or one that cannot shoot or run a
// chain), these throw std::logic_error: the config parser refuses it before.
template <class S, class M>
std::unique_ptr<Backend> make_cuda_backend(const S& sys, const M& method, const StepControl& ctl);
// Index-1 systems only: the shooting kernels.
template <class S, class M>
std::unique_ptr<ShotRunner> make_cuda_shot_runner(const S& sys, const ShootControl& ctl);
// Monte Carlo chains, with the methods that can run them.
template <class S, class M>
std::unique_ptr<ChainRunner> make_cuda_chain_runner(const S& sys, const M& method, const HmcControl& ctl);

}  // namespace tether

#pragma once
// The cuda backend, compiled by nvcc in kernels/ and explicitly instantiated
// there for every registered (system, method) pair.
#include "engine/backend.hpp"

namespace tether {

template <class S, class M>
std::unique_ptr<Backend<S, M>> make_cuda_backend(const S& sys, const M& method, const StepControl& ctl);

int cuda_runtime_device_count();

}  // namespace tether

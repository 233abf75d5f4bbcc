#pragma once
// What every cuda backend shares, compiled once in runtime.cu rather than in
// each generated per-system unit: error checks and the ensemble reductions
// (Thrust and its reduction kernels are heavy to compile, and do not depend on
// the system).
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "tether/ensemble/advance.hpp"

namespace tether {

// Throws std::runtime_error naming the call when e is an error.
void cuda_check(cudaError_t e, const char* what);

// The reductions behind Backend::observe over a device ensemble whose
// per-trajectory observations observe_kernel has written.
class ObservationReducer {
 public:
  ObservationReducer() = default;
  ObservationReducer(const ObservationReducer&) = delete;
  ObservationReducer& operator=(const ObservationReducer&) = delete;
  ~ObservationReducer();

  // chunk_sums: the energy-error sum of each observation_chunk of
  // trajectories, in id order (the cpu backend's order); returns the maxima.
  Observation reduce(const EnsembleView& dev, std::vector<Real>& chunk_sums);

 private:
  Real* sums_ = nullptr;
  std::int64_t capacity_ = 0;
};

}  // namespace tether

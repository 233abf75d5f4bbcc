#include <thrust/execution_policy.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform_reduce.h>

#include <stdexcept>
#include <string>

#include "backends/cuda/device_count.hpp"
#include "backends/cuda/runtime.cuh"

namespace tether {

// 0 when the driver or a device is missing: the cpu backend is used then.
int cuda_runtime_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

void cuda_runtime_use_device(int device) { cuda_check(cudaSetDevice(device), "cudaSetDevice"); }

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

namespace {

struct ObservationOf {
  EnsembleView v;
  __host__ __device__ Observation operator()(std::int64_t i) const { return observation_of(v, i); }
};

struct MergeObservations {
  __host__ __device__ Observation operator()(Observation a, const Observation& b) const {
    a.merge(b);
    return a;
  }
};

// One thread per chunk sums its trajectories' energy errors in id order.
__global__ void chunk_sum_kernel(EnsembleView v, Real* sums, std::int64_t chunks) {
  const std::int64_t b = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= chunks) return;
  Real s = 0;
  const std::int64_t end = (b + 1) * observation_chunk < v.count ? (b + 1) * observation_chunk : v.count;
  for (std::int64_t i = b * observation_chunk; i < end; ++i)
    if (v.status[i] == 0) s += v.energy_error[i];
  sums[b] = s;
}

}  // namespace

ObservationReducer::~ObservationReducer() {
  if (sums_) cudaFree(sums_);
}

Observation ObservationReducer::reduce(const EnsembleView& dev, std::vector<Real>& chunk_sums) {
  const std::int64_t chunks = (dev.count + observation_chunk - 1) / observation_chunk;
  if (capacity_ < chunks) {
    if (sums_) cudaFree(sums_);
    sums_ = nullptr;
    capacity_ = 0;
    cuda_check(cudaMalloc(&sums_, std::size_t(chunks) * sizeof(Real)), "cudaMalloc");
    capacity_ = chunks;
  }
  constexpr int threads = 128;
  chunk_sum_kernel<<<unsigned((chunks + threads - 1) / threads), threads>>>(dev, sums_, chunks);
  cuda_check(cudaGetLastError(), "chunk_sum_kernel launch");
  chunk_sums.resize(std::size_t(chunks));
  cuda_check(cudaMemcpy(chunk_sums.data(), sums_, std::size_t(chunks) * sizeof(Real), cudaMemcpyDeviceToHost),
             "cudaMemcpy chunk sums");
  return thrust::transform_reduce(thrust::device, thrust::counting_iterator<std::int64_t>(0),
                                  thrust::counting_iterator<std::int64_t>(dev.count), ObservationOf{dev},
                                  Observation{}, MergeObservations{});
}

}  // namespace tether

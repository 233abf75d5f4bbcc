#pragma once
// cuda shooting: one thread per shot running shoot_trajectory, the code the
// cpu backend runs, in a kernel per shooting kind (single shooting's threads
// keep no nodes). Shots are long (steps x Newton iterations), so one launch
// takes the whole batch.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "backends/cuda/cuda_backend.cuh"

namespace tether {

template <class S, class M, Shooting kind>
__global__ void shoot_kernel(S sys, ShootControl ctl, ShotView v) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < v.count) shoot_trajectory<S, MethodFlow<M>, kind>(sys, ctl, v, i);
}

template <class S, class M>
class CudaShotRunner final : public ShotRunner {
 public:
  CudaShotRunner(const S& sys, const ShootControl& ctl) : sys_(sys), ctl_(ctl) {}

  void run(HostShots& h) override {
    ShotView d;
    d.count = h.count;
    Real *q0 = nullptr, *target = nullptr, *guess = nullptr, *from = nullptr, *p0 = nullptr, *residual = nullptr,
         *energy = nullptr, *length = nullptr, *conjugate = nullptr, *pT = nullptr,
         *error = nullptr;
    std::uint8_t* status = nullptr;
    std::int32_t* iterations = nullptr;
    try {
      copy_in(q0, h.q0);
      copy_in(target, h.target);
      copy_in(guess, h.guess);
      if (!h.from.empty()) copy_in(from, h.from);
      copy_in(p0, h.p0);
      copy_in(residual, h.residual);
      copy_in(energy, h.energy);
      copy_in(length, h.length);
      copy_in(conjugate, h.conjugate_time);
      copy_in(pT, h.pT);
      copy_in(error, h.error_estimate);
      copy_in(status, h.status);
      copy_in(iterations, h.iterations);
      d.q0 = q0, d.target = target, d.guess = guess, d.from = from, d.p0 = p0, d.residual = residual;
      d.energy = energy, d.length = length, d.conjugate_time = conjugate, d.pT = pT, d.error_estimate = error;
      d.status = status, d.iterations = iterations;
      // A warp per block: a shot's thread holds 255 registers, so an SM runs
      // 8 warps at most whatever the block, and a few thousand shots (408
      // targets x 9 guesses) spread over 115 SMs instead of crowding 29 (as
      // blocks of 128 did on an H200, 2026-11-30), where an SM's L1 can hold
      // its one warp's frames (32 x 4.4 KB for GL3). The launch lasts as long
      // as its slowest warp's Newton solve.
      constexpr int threads = 32;
      const unsigned blocks = unsigned((h.count + threads - 1) / threads);
      if (shooting_kind(ctl_) == Shooting::multiple)
        launch(shoot_kernel<S, M, Shooting::multiple>, blocks, threads, d);
      else
        launch(shoot_kernel<S, M, Shooting::single>, blocks, threads, d);
      cuda_check(cudaGetLastError(), "shoot_kernel launch");
      cuda_check(cudaDeviceSynchronize(), "shoot_kernel");
      copy_out(h.p0, p0);
      copy_out(h.residual, residual);
      copy_out(h.energy, energy);
      copy_out(h.length, length);
      copy_out(h.conjugate_time, conjugate);
      copy_out(h.pT, pT);
      copy_out(h.error_estimate, error);
      copy_out(h.status, status);
      copy_out(h.iterations, iterations);
    } catch (...) {
      release({q0, target, guess, from, p0, residual, energy, length, conjugate, pT, error, status, iterations});
      throw;
    }
    release({q0, target, guess, from, p0, residual, energy, length, conjugate, pT, error, status, iterations});
  }

 private:
  // The frames live in local memory, cached in the SM's L1, which shares its
  // 256 KB with shared memory: these kernels use none, so ask for all of it
  // as L1 (a preference the driver may override): one warp's frames are
  // 32 x 4.4 KB for Heisenberg GL3, 32 x 11.6 KB for the car's.
  template <class Kernel>
  void launch(Kernel kernel, unsigned blocks, int threads, const ShotView& d) const {
    cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxL1),
               "shoot_kernel carveout");
    kernel<<<blocks, threads>>>(sys_, ctl_, d);
  }

  template <class T>
  static void copy_in(T*& d, const std::vector<T>& h) {
    cuda_check(cudaMalloc(&d, h.size() * sizeof(T)), "cudaMalloc");
    cuda_check(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  template <class T>
  static void copy_out(std::vector<T>& h, const T* d) {
    cuda_check(cudaMemcpy(h.data(), d, h.size() * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  }
  static void release(std::initializer_list<void*> ptrs) {
    for (void* p : ptrs)
      if (p) cudaFree(p);
  }

  S sys_;
  ShootControl ctl_;
};

template <class S, class M>
std::unique_ptr<ShotRunner> make_cuda_shot_runner(const S& sys, const ShootControl& ctl) {
  if constexpr (Index1System<S> && MethodFor<M, S>)
    return std::make_unique<CudaShotRunner<S, M>>(sys, ctl);
  else
    throw std::logic_error(std::string(M::name) + " does not shoot " + S::name);
}

}  // namespace tether


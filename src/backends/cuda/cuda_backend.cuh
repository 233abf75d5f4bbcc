#pragma once
// cuda: one thread per trajectory running advance_trajectory, the same step
// code the cpu backend runs, or a tile of threads per trajectory, one per
// bead of a chain of 16 beads or more (advance_tile); state read once per
// launch, stepped in registers, written back at output times.
#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/runtime.cuh"

namespace tether {

// A chain steps in tiles on a GPU from 16 lanes on, and below in a thread of
// its own: at 10^5 chains, 100 steps, RATTLE in tiles on an H200 (2026-11-30)
// ran chain4 at 6.1e8 and chain8 at 3.0e8 trajectory-steps/s, where a thread
// per chain had run them at 2.18e9 and 6.15e8 on an H100 (2026-11-26, the same
// FP64 rate), and chain16 at 1.23e8 against 1.02e8. (The cpu steps every
// tile pair in tiles: there they cost nothing.)
constexpr int cuda_tile_min_lanes = 16;
template <class S, class M>
constexpr bool cuda_runs_in_tile = requires { requires runs_in_tile<S, M> && S::tile_lanes >= cuda_tile_min_lanes; };
// needs_replay (ensemble/advance.hpp) with the GPU's choice of tiles: a
// one-thread launch of a method whose failed step leaves the state part-way
// is replayed.
template <class S, class M>
constexpr bool cuda_needs_replay = !cuda_runs_in_tile<S, M> && !keeps_state_on_failure<M>;

template <class S, class M>
__global__ void advance_kernel(S sys, M method, StepControl ctl, EnsembleView v, int nsteps, std::int64_t steps_before,
                               bool replay) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < v.count) advance_trajectory<S, M>(sys, method, ctl, v, i, nsteps, steps_before, replay);
}

// A tile of S::tile_lanes consecutive threads per trajectory (advance_tile).
template <class S, class M>
__global__ void advance_tile_kernel(S sys, M method, StepControl ctl, EnsembleView v, int nsteps,
                                    std::int64_t steps_before) {
  const std::int64_t i = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / S::tile_lanes;
  if (i < v.count) advance_tile<S, M>(sys, method, ctl, v, i, nsteps, steps_before);  // a whole tile or none
}

template <class S>
__global__ void observe_kernel(S sys, EnsembleView v, std::int64_t step) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < v.count) observe_trajectory<S>(sys, v, i, step);
}

template <class S, class M>
class CudaBackend final : public Backend {
 public:
  CudaBackend(const S& sys, const M& method, const StepControl& ctl) : sys_(sys), method_(method), ctl_(ctl) {}
  ~CudaBackend() override { release(); }

  void load(HostEnsemble& h) override {
    release();
    dev_.count = h.count;
    for_each_array(h, [&](auto& host, auto*& dev) { copy_in(dev, host); });
  }

  void advance(int nsteps, std::int64_t steps_before) override {
    launch_advance(nsteps, steps_before, false);
    if constexpr (cuda_needs_replay<S, M>) launch_advance(nsteps, steps_before, true);  // see advance_trajectory
  }

  Observation observe(std::int64_t step, std::vector<Real>& chunk_sums) override {
    observe_kernel<S><<<blocks(), threads>>>(sys_, dev_, step);
    cuda_check(cudaGetLastError(), "observe_kernel launch");
    return reducer_.reduce(dev_, chunk_sums);
  }

  double first_launch_work() const override { return 1e7; }

  void store(HostEnsemble& h) override {
    for_each_array(h, [&](auto& host, auto*& dev) { copy_out(host, dev); });
  }

 private:
  static constexpr int threads = 128;
  unsigned blocks() const { return unsigned((dev_.count + threads - 1) / threads); }

  void launch_advance(int nsteps, std::int64_t steps_before, bool replay) {
    if constexpr (cuda_runs_in_tile<S, M>) {  // no replay: a tile step keeps its state on failure
      static_assert(threads % S::tile_lanes == 0, "whole tiles per block");
      const unsigned tile_blocks = unsigned((dev_.count * S::tile_lanes + threads - 1) / threads);
      advance_tile_kernel<S, M><<<tile_blocks, threads>>>(sys_, method_, ctl_, dev_, nsteps, steps_before);
    } else {
      advance_kernel<S, M><<<blocks(), threads>>>(sys_, method_, ctl_, dev_, nsteps, steps_before, replay);
    }
    cuda_check(cudaGetLastError(), cuda_runs_in_tile<S, M> ? "advance_tile_kernel launch" : "advance_kernel launch");
    cuda_check(cudaDeviceSynchronize(), cuda_runs_in_tile<S, M> ? "advance_tile_kernel" : "advance_kernel");
  }

  // Every per-trajectory array, as (host vector, device pointer) pairs.
  template <class F>
  void for_each_array(HostEnsemble& h, F&& f) {
    f(h.q, dev_.q);
    f(h.p, dev_.p);
    if (h.two_step) f(h.q_prev, dev_.q_prev);
    f(h.energy0, dev_.energy0);
    f(h.energy_scale, dev_.energy_scale);
    f(h.status, dev_.status);
    f(h.failed_step, dev_.failed_step);
    f(h.iterations_sum, dev_.iterations_sum);
    f(h.iterations_max, dev_.iterations_max);
    f(h.energy_error, dev_.energy_error);
    f(h.constraint_violation, dev_.constraint_violation);
    f(h.velocity_violation, dev_.velocity_violation);
  }

  template <class T>
  void copy_in(T*& d, const std::vector<T>& h) {
    cuda_check(cudaMalloc(&d, h.size() * sizeof(T)), "cudaMalloc");
    cuda_check(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  template <class T>
  void copy_out(std::vector<T>& h, const T* d) {
    cuda_check(cudaMemcpy(h.data(), d, h.size() * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  }
  void release() {
    for (void* p : {(void*)dev_.q, (void*)dev_.p, (void*)dev_.q_prev, (void*)dev_.energy0, (void*)dev_.energy_scale,
                    (void*)dev_.status, (void*)dev_.failed_step, (void*)dev_.iterations_sum,
                    (void*)dev_.iterations_max, (void*)dev_.energy_error, (void*)dev_.constraint_violation,
                    (void*)dev_.velocity_violation})
      if (p) cudaFree(p);
    dev_ = EnsembleView{};
  }

  S sys_;
  M method_;
  StepControl ctl_;
  EnsembleView dev_;
  ObservationReducer reducer_;
};

template <class S, class M>
std::unique_ptr<Backend> make_cuda_backend(const S& sys, const M& method, const StepControl& ctl) {
  if constexpr (MethodFor<M, S>)
    return std::make_unique<CudaBackend<S, M>>(sys, method, ctl);
  else
    throw std::logic_error(std::string(M::name) + " does not pair with " + S::name);
}

}  // namespace tether


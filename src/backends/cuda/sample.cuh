#pragma once
// cuda sampling: one thread per chain running run_chain, or for pairs that
// step in tiles a tile of threads per chain running tile_run_chain: the code
// the cpu backend runs. A call runs a window of iterations; the host sizes it.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "backends/chain_runner.hpp"
#include "backends/cuda/cuda_backend.cuh"

namespace tether {

template <class S, class M>
__global__ void chain_kernel(S sys, M method, HmcControl ctl, SamplePlan plan, SampleView v) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < v.count) run_chain(sys, method, ctl, plan, v, i);
}

// A tile of S::tile_lanes consecutive threads per chain (sampling/hmc_tile.hpp).
template <class S, class M>
__global__ void chain_tile_kernel(S sys, M method, HmcControl ctl, SamplePlan plan, SampleView v) {
  const std::int64_t i = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / S::tile_lanes;
  if (i < v.count) tile_run_chain<S, M, tile::Thread<S::tile_lanes>>(sys, method, ctl, plan, v, i);  // a whole tile or none
}

template <class S, class M>
class CudaChainRunner final : public ChainRunner {
 public:
  CudaChainRunner(const S& sys, const M& method, const HmcControl& ctl) : sys_(sys), method_(method), ctl_(ctl) {}

  void run(HostChains& h, const SamplePlan& plan) override {
    SampleView d = h.view();
    std::vector<void*> owned;
    auto allocate = [&](auto*& dev, const auto& host) {
      using T = std::decay_t<decltype(*host.data())>;
      T* ptr = nullptr;
      cuda_check(cudaMalloc(&ptr, host.size() * sizeof(T)), "cudaMalloc");
      owned.push_back(ptr);
      dev = ptr;
    };
    auto copy_in = [&](auto*& dev, const auto& host) {
      allocate(dev, host);
      cuda_check(cudaMemcpy(dev, host.data(), host.size() * sizeof(*host.data()), cudaMemcpyHostToDevice),
                 "cudaMemcpy to device");
    };
    auto copy_out = [](auto& host, const auto* dev) {
      using T = std::decay_t<decltype(*host.data())>;
      cuda_check(cudaMemcpy(host.data(), dev, host.size() * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    };
    try {
      copy_in(d.q, h.q), copy_in(d.p, h.p), copy_in(d.step_size, h.step_size);
      copy_in(d.log_h_bar, h.log_h_bar), copy_in(d.h_bar, h.h_bar);
      d.metric = nullptr;
      if (!h.metric.empty()) copy_in(d.metric, h.metric);
      // The proposals and the draws are only written by the kernel.
      allocate(d.proposal_q, h.proposal_q), allocate(d.proposal_p, h.proposal_p);
      allocate(d.draw_q, h.draw_q), allocate(d.draw_potential, h.draw_potential);
      allocate(d.draw_acceptance, h.draw_acceptance), allocate(d.draw_energy, h.draw_energy);
      allocate(d.draw_step_size, h.draw_step_size), allocate(d.draw_steps, h.draw_steps);
      allocate(d.draw_outcome, h.draw_outcome), allocate(d.draw_tree_depth, h.draw_tree_depth);
      // A dynamic trajectory's scratch lives on the device alone (HostChains holds none for cuda).
      d.tree = nullptr;
      const std::size_t tree_size = std::size_t(h.count) * std::size_t(h.dof) * std::size_t(h.tree_vectors);
      if (tree_size > 0) {
        cuda_check(cudaMalloc(&d.tree, tree_size * sizeof(Real)), "cudaMalloc");
        owned.push_back(d.tree);
      }
      constexpr int threads = 128;
      // The cpu's chain loop chooses likewise (host_chain), but for the chains it steps in tiles at any size.
      const bool in_tile = cuda_runs_in_tile<S, M> && !ctl_.dynamic && ctl_.metric == MetricKind::mass;
      if constexpr (cuda_runs_in_tile<S, M>) {
        static_assert(threads % S::tile_lanes == 0, "whole tiles per block");
        const unsigned blocks = unsigned((h.count * S::tile_lanes + threads - 1) / threads);
        if (in_tile) chain_tile_kernel<S, M><<<blocks, threads>>>(sys_, method_, ctl_, plan, d);
      }
      if (!in_tile)
        chain_kernel<S, M><<<unsigned((h.count + threads - 1) / threads), threads>>>(sys_, method_, ctl_, plan, d);
      const char* name = in_tile ? "chain_tile_kernel" : "chain_kernel";
      cuda_check(cudaGetLastError(), (std::string(name) + " launch").c_str());
      cuda_check(cudaDeviceSynchronize(), name);
      copy_out(h.q, d.q), copy_out(h.p, d.p), copy_out(h.step_size, d.step_size);
      copy_out(h.log_h_bar, d.log_h_bar), copy_out(h.h_bar, d.h_bar), copy_out(h.draw_q, d.draw_q);
      copy_out(h.draw_potential, d.draw_potential), copy_out(h.draw_acceptance, d.draw_acceptance);
      copy_out(h.draw_energy, d.draw_energy), copy_out(h.draw_step_size, d.draw_step_size);
      copy_out(h.draw_steps, d.draw_steps), copy_out(h.draw_outcome, d.draw_outcome);
      copy_out(h.draw_tree_depth, d.draw_tree_depth);
      if (!h.metric.empty()) copy_out(h.metric, d.metric);
    } catch (...) {
      for (void* ptr : owned) cudaFree(ptr);
      throw;
    }
    for (void* ptr : owned) cudaFree(ptr);
  }

  // A probe, as the run backend's first launch (cuda_backend.cuh): 10^7
  // steps took 0.2 ms to 2 s on an H100 (lightest to heaviest system measured);
  // the windows after it are sized by the rate it measures.
  double work_per_call() const override { return 1e7; }

 private:
  S sys_;
  M method_;
  HmcControl ctl_;
};

template <class S, class M>
std::unique_ptr<ChainRunner> make_cuda_chain_runner(const S& sys, const M& method, const HmcControl& ctl) {
  if constexpr (SamplerMethodFor<M, S>)
    return std::make_unique<CudaChainRunner<S, M>>(sys, method, ctl);
  else
    throw std::logic_error(std::string(M::name) + " cannot run a Monte Carlo chain of " + S::name);
}

}  // namespace tether

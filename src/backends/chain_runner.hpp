#pragma once
// Backends for sampling: each runs run_chain over a batch of chains.
// cpu and reference: backends/host_chain.hpp; cuda: one thread per chain,
// or a tile of threads (backends/cuda/sample.cuh).
#include <memory>
#include <vector>

#include "tether/sampling/hmc_tile.hpp"

namespace tether {

// Host storage of a batch of chains and of `draws` draws each (see SampleView).
struct HostChains {
  std::int64_t count = 0, first_chain = 0, draws = 0;
  int dof = 0;
  std::vector<Real> q, p, step_size, log_h_bar, h_bar;
  std::vector<Real> proposal_q, proposal_p;  // scratch: each chain's proposal while it is checked
  std::vector<Real> draw_q, draw_potential, draw_acceptance, draw_energy, draw_step_size;
  std::vector<std::int32_t> draw_steps;
  std::vector<std::uint8_t> draw_outcome, draw_tree_depth;
  // Scratch: each chain's dynamic trajectory, tree_vectors x dof per chain;
  // held here for the host backends only (a GPU allocates its own).
  int tree_vectors = 0;
  std::vector<Real> tree;
  // Each chain's metric when it is not the system's mass (MetricLayout).
  std::vector<Real> metric;

  HostChains(std::int64_t n, std::int64_t first, int dof_, std::int64_t draws_, int tree_vectors_ = 0,
             bool tree_on_host = true, int metric_size = 0);

  SampleView view() {
    SampleView v;
    v.count = count;
    v.first_chain = first_chain;
    v.q = q.data();
    v.p = p.data();
    v.proposal_q = proposal_q.data();
    v.proposal_p = proposal_p.data();
    v.step_size = step_size.data();
    v.log_h_bar = log_h_bar.data();
    v.h_bar = h_bar.data();
    v.draw_count = draws;
    v.draw_q = draw_q.data();
    v.draw_potential = draw_potential.data();
    v.draw_acceptance = draw_acceptance.data();
    v.draw_energy = draw_energy.data();
    v.draw_step_size = draw_step_size.data();
    v.draw_steps = draw_steps.data();
    v.draw_outcome = draw_outcome.data();
    v.draw_tree_depth = draw_tree_depth.data();
    v.tree = tree.data();
    v.metric = metric.empty() ? nullptr : metric.data();
    return v;
  }
};

class ChainRunner {
 public:
  virtual ~ChainRunner() = default;
  // Runs plan's iterations on every chain of the batch (states and step sizes
  // in place, draws into the batch's draw storage).
  virtual void run(HostChains& chains, const SamplePlan& plan) = 0;
  // Steps per call that take about a second (the first window; the next ones are timed).
  virtual double work_per_call() const = 0;
};

}  // namespace tether

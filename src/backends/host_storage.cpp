// The host batches' constructors, compiled once rather than in every unit
// that instantiates a backend.
#include "backends/backend.hpp"
#include "backends/chain_runner.hpp"

namespace tether {

HostEnsemble::HostEnsemble(std::int64_t n, int dof_, bool two_step_)
    : count(n), dof(dof_), two_step(two_step_),
      q(std::size_t(n) * dof_), p(std::size_t(n) * dof_), q_prev(two_step_ ? std::size_t(n) * dof_ : 0),
      energy0(n), energy_scale(n), energy_error(n), constraint_violation(n), velocity_violation(n),
      status(n, 0), failed_step(n, 0), iterations_sum(n, 0), iterations_max(n, 0) {}

HostChains::HostChains(std::int64_t n, std::int64_t first, int dof_, std::int64_t draws_, int tree_vectors_,
                       bool tree_on_host, int metric_size)
    : count(n), first_chain(first), draws(draws_), dof(dof_), q(std::size_t(n * dof_)), p(std::size_t(n * dof_)),
      step_size(std::size_t(n)), log_h_bar(std::size_t(n)), h_bar(std::size_t(n)),
      proposal_q(std::size_t(n * dof_)), proposal_p(std::size_t(n * dof_)),
      draw_q(std::size_t(n * dof_ * draws_)), draw_potential(std::size_t(n * draws_)),
      draw_acceptance(std::size_t(n * draws_)), draw_energy(std::size_t(n * draws_)),
      draw_step_size(std::size_t(n * draws_)), draw_steps(std::size_t(n * draws_)),
      draw_outcome(std::size_t(n * draws_)), draw_tree_depth(std::size_t(n * draws_)),
      tree_vectors(tree_vectors_), tree(tree_on_host ? std::size_t(n * dof_ * tree_vectors_) : 0),
      metric(std::size_t(n) * std::size_t(metric_size)) {}

}  // namespace tether

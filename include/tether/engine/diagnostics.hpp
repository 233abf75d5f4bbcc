#pragma once
// Convergence diagnostics of Markov chains, VGSCB21 (docs/references.md):
// rank-normalised split R-hat and bulk and tail effective sample sizes, as
// ArviZ and posterior compute them. x holds one scalar's draws,
// x[chain * draws + draw]. And the energy Bayesian fraction of missing
// information of each chain (Bet16), from its Hamiltonian energies.
#include <cstdint>
#include <vector>

namespace tether {

struct ChainDiagnostics {
  double mean = 0, sd = 0;  // over all draws (sd with ddof 1)
  double rhat = 0;          // max(bulk, tail) rank-normalised split R-hat (VGSCB21 §4.1-4.2)
  double ess_bulk = 0;      // ESS of the rank-normalised split chains (§4.3)
  double ess_tail = 0;      // min ESS of the 5% and 95% quantile indicators (§4.3)
};

// NaN where fewer than 4 draws per chain, and R-hat with one chain (as ArviZ).
ChainDiagnostics diagnose_chains(const std::vector<double>& x, std::int64_t chains, std::int64_t draws);

// The pieces, for tests: each on chains x draws (not yet split).
double rank_normalized_split_rhat(const std::vector<double>& x, std::int64_t chains, std::int64_t draws);
double ess_bulk(const std::vector<double>& x, std::int64_t chains, std::int64_t draws);
double ess_tail(const std::vector<double>& x, std::int64_t chains, std::int64_t draws);

// E-BFMI of each chain (Bet16), as ArviZ's bfmi and Stan estimate it: the
// sum of the squared differences of successive energies over the sum of
// their squared deviations from the chain's mean energy.
// Low values say that momentum resampling moves a chain's energy little
// against the spread of energies it visits; NaN for fewer than 2 draws or a
// constant or non-finite energy. Below low_energy_bfmi, Stan and ArviZ warn.
std::vector<double> energy_bfmi(const std::vector<double>& energy, std::int64_t chains, std::int64_t draws);
inline constexpr double low_energy_bfmi = 0.3;

}  // namespace tether

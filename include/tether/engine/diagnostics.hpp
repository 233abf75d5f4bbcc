#pragma once
// Convergence diagnostics of Markov chains, VGSCB21 (docs/references.md):
// rank-normalised split R-hat and bulk and tail effective sample sizes, as
// ArviZ and posterior compute them. x holds one scalar's draws,
// x[chain * draws + draw].
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

}  // namespace tether

#pragma once
// What a run's trajectories add up to (the timeseries statistics, the Newton
// counts, the failures), kept so that runs of disjoint slices of an ensemble
// (`tether run --shard k/K`) merge into exactly what one run gives: counts are
// integers, maxima do not depend on order, and each timeseries row's
// energy-error sum is taken in fixed blocks of tally_block trajectories (the
// chunk sums of a block added in id order, then the block sums in block
// order), so a slice that starts on a block boundary hands over its block
// sums and the merge adds them as the single run does.
#include <algorithm>
#include <vector>

#include "engine/checkpoint_blob.hpp"
#include "tether/engine/run.hpp"
#include "tether/ensemble/advance.hpp"

namespace tether {

constexpr std::int64_t tally_block = shard_granule;  // shards are cut on block boundaries
static_assert(tally_block % observation_chunk == 0, "blocks are whole observation chunks");

struct RunTally {
  // Per timeseries row from first_row on (every row, or for a run that
  // streams its timeseries the one row being observed): live count and
  // maxima; the sum of the closed blocks' energy-error sums; the block being
  // summed now (its index, its partial sum).
  std::int64_t first_row = 0;
  std::vector<Observation> rows;
  std::vector<Real> row_sums, open_sums;
  std::vector<std::int64_t> open_block;
  // A shard keeps every closed block's sum per row, for the merge.
  bool keep_blocks = false;
  std::vector<std::vector<Real>> blocks;
  std::uint64_t iterations = 0, steps_taken = 0, steps_attempted = 0;
  std::int64_t failed = 0, projected_states = 0;
  int newton_max = 0;
  Real max_projection_distance = 0;
  std::vector<Failure> failures;  // the first failure_report_cap, in id order
  double integration = 0;
  // Maxima over the rows handed over so far (NaN kept).
  Real energy_error_max = 0, constraint_max = 0, velocity_max = 0;

  RunTally() = default;
  RunTally(std::int64_t row_count, bool keep);

  // Row `row`'s place in the vectors (the row must be held).
  std::size_t slot(std::int64_t row) const { return std::size_t(row - first_row); }
  Observation& observation(std::int64_t row) { return rows[slot(row)]; }

  // The energy-error sum of the observation chunk `chunk` (global index) at `row`.
  void add_chunk(std::int64_t at, std::int64_t chunk, Real sum) {
    const std::size_t row = slot(at);
    const std::int64_t block = chunk / (tally_block / observation_chunk);
    if (block != open_block[row]) close_block(row);
    open_block[row] = block;
    open_sums[row] += sum;
  }
  void close_block(std::size_t row) {
    if (open_block[row] < 0) return;
    row_sums[row] += open_sums[row];
    if (keep_blocks) blocks[row].push_back(open_sums[row]);
    open_sums[row] = 0;
    open_block[row] = -1;
  }
  // Ends every row's open block (at the end of a run, or of a shard).
  void close_blocks() {
    for (std::size_t r = 0; r < rows.size(); ++r) close_block(r);
  }

  // Another tally's contribution, of the ids after this one's (a later shard).
  void merge(const RunTally& t, std::size_t failure_cap);

  // Rows of blocks are saved flat, each row's count first.
  void save(BlobWriter& w) const;
  void load(BlobReader& b);
  // Rows [0, row_count) in all, `held` of them in memory from first_row on.
  bool fits(std::int64_t row_count, std::int64_t held) const;

  // Row `row`, complete (every trajectory observed at it), as the timeseries
  // has it; its maxima go into the run's.
  TimeseriesRow finish_row(std::int64_t row, const RunConfig& c);

  // A streaming run's tally holds one row: hands it over, complete, and
  // makes room for the next.
  void stream_row(std::int64_t row, const RunConfig& c, TimeseriesSink& sink);

  // The result the tally stands for: the rows it holds (to `sink`, else into
  // r.timeseries; a streaming run's one slot is past the last row by now),
  // the run's maxima and the Newton mean.
  void fill(const RunConfig& c, RunResult& r, TimeseriesSink* sink = nullptr);
};

}  // namespace tether

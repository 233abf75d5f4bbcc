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
  // Per timeseries row: live count and maxima; the sum of the closed blocks'
  // energy-error sums; the block being summed now (its index, its partial sum).
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

  RunTally() = default;
  RunTally(std::int64_t row_count, bool keep) : keep_blocks(keep) {
    rows.resize(std::size_t(row_count));
    row_sums.assign(std::size_t(row_count), 0);
    open_sums.assign(std::size_t(row_count), 0);
    open_block.assign(std::size_t(row_count), -1);
    if (keep) blocks.resize(std::size_t(row_count));
  }

  // The energy-error sum of the observation chunk `chunk` (global index) at `row`.
  void add_chunk(std::size_t row, std::int64_t chunk, Real sum) {
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
  void merge(const RunTally& t, std::size_t failure_cap) {
    for (std::size_t r = 0; r < rows.size(); ++r) {
      rows[r].merge(t.rows[r]);
      for (Real b : t.blocks[r]) row_sums[r] += b;
    }
    iterations += t.iterations, steps_taken += t.steps_taken, steps_attempted += t.steps_attempted;
    failed += t.failed, projected_states += t.projected_states;
    newton_max = std::max(newton_max, t.newton_max);
    max_projection_distance = std::max(max_projection_distance, t.max_projection_distance);
    for (const Failure& f : t.failures)
      if (failures.size() < failure_cap) failures.push_back(f);
    integration += t.integration;
  }

  // Rows of blocks are saved flat, each row's count first.
  void save(BlobWriter& w) const {
    w.put(rows), w.put(row_sums), w.put(open_sums), w.put(open_block), w.put(keep_blocks);
    std::vector<std::int64_t> counts;
    std::vector<Real> flat;
    for (const auto& b : blocks) counts.push_back(std::int64_t(b.size())), flat.insert(flat.end(), b.begin(), b.end());
    w.put(counts), w.put(flat);
    w.put(iterations), w.put(steps_taken), w.put(steps_attempted), w.put(failed), w.put(projected_states);
    w.put(newton_max), w.put(max_projection_distance), w.put(failures), w.put(integration);
  }
  void load(BlobReader& b) {
    b.get(rows), b.get(row_sums), b.get(open_sums), b.get(open_block), b.get(keep_blocks);
    std::vector<std::int64_t> counts;
    std::vector<Real> flat;
    b.get(counts), b.get(flat);
    blocks.clear();
    std::size_t at = 0;
    for (std::int64_t n : counts) {
      if (n < 0 || std::size_t(n) > flat.size() - at) throw std::runtime_error("the tally's block sums are truncated");
      blocks.emplace_back(flat.begin() + std::ptrdiff_t(at), flat.begin() + std::ptrdiff_t(at + std::size_t(n)));
      at += std::size_t(n);
    }
    b.get(iterations), b.get(steps_taken), b.get(steps_attempted), b.get(failed), b.get(projected_states);
    b.get(newton_max), b.get(max_projection_distance), b.get(failures), b.get(integration);
  }
  bool fits(std::int64_t row_count) const {
    const std::size_t n = std::size_t(row_count);
    return rows.size() == n && row_sums.size() == n && open_sums.size() == n && open_block.size() == n &&
           blocks.size() == (keep_blocks ? n : 0);
  }

  // The result the tally stands for (blocks closed first): the timeseries
  // rows, the run's maxima and the Newton mean.
  void fill(const RunConfig& c, RunResult& r) {
    close_blocks();
    r.timeseries.clear();
    for (std::size_t row = 0; row < rows.size(); ++row) {
      const Observation& o = rows[row];
      TimeseriesRow t;
      t.step = std::min(c.steps, std::int64_t(row) * c.output_every);
      t.time = Real(t.step) * c.dt;
      t.live = o.ok;
      t.mean_energy_error = o.ok > 0 ? row_sums[row] / Real(o.ok) : 0;
      t.max_energy_error = o.energy_error_max;
      t.max_constraint_violation = o.constraint_max;
      t.max_velocity_constraint_violation = o.velocity_max;
      r.max_relative_energy_error = max_keeping_nan(r.max_relative_energy_error, t.max_energy_error);
      r.max_constraint_violation = max_keeping_nan(r.max_constraint_violation, t.max_constraint_violation);
      r.max_velocity_constraint_violation =
          max_keeping_nan(r.max_velocity_constraint_violation, t.max_velocity_constraint_violation);
      r.timeseries.push_back(t);
    }
    r.newton_mean = steps_attempted > 0 ? double(iterations) / double(steps_attempted) : 0;
    r.newton_max = newton_max;
    r.trajectory_steps = steps_taken;
    r.failed = failed;
    r.failures = failures;
    r.projected_states = projected_states;
    r.max_projection_distance = max_projection_distance;
    r.integration_seconds = integration;
  }
};

}  // namespace tether

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
  RunTally(std::int64_t row_count, bool keep) : keep_blocks(keep) {
    rows.resize(std::size_t(row_count));
    row_sums.assign(std::size_t(row_count), 0);
    open_sums.assign(std::size_t(row_count), 0);
    open_block.assign(std::size_t(row_count), -1);
    if (keep) blocks.resize(std::size_t(row_count));
  }

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
    w.put(first_row), w.put(energy_error_max), w.put(constraint_max), w.put(velocity_max);
    w.put(rows), w.put(row_sums), w.put(open_sums), w.put(open_block), w.put(keep_blocks);
    std::vector<std::int64_t> counts;
    std::vector<Real> flat;
    for (const auto& b : blocks) counts.push_back(std::int64_t(b.size())), flat.insert(flat.end(), b.begin(), b.end());
    w.put(counts), w.put(flat);
    w.put(iterations), w.put(steps_taken), w.put(steps_attempted), w.put(failed), w.put(projected_states);
    w.put(newton_max), w.put(max_projection_distance), w.put(failures), w.put(integration);
  }
  void load(BlobReader& b) {
    b.get(first_row), b.get(energy_error_max), b.get(constraint_max), b.get(velocity_max);
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
  // Rows [0, row_count) in all, `held` of them in memory from first_row on.
  bool fits(std::int64_t row_count, std::int64_t held) const {
    const std::size_t n = std::size_t(held);
    const bool window = held == row_count ? first_row == 0 : first_row >= 0 && first_row <= row_count;
    return window && rows.size() == n && row_sums.size() == n &&
           open_sums.size() == n && open_block.size() == n && blocks.size() == (keep_blocks ? n : 0);
  }

  // Row `row`, complete (every trajectory observed at it), as the timeseries
  // has it; its maxima go into the run's.
  TimeseriesRow finish_row(std::int64_t row, const RunConfig& c) {
    const std::size_t k = slot(row);
    close_block(k);
    const Observation& o = rows[k];
    TimeseriesRow t;
    t.step = std::min(c.steps, row * c.output_every);
    t.time = Real(t.step) * c.dt;
    t.live = o.ok;
    t.mean_energy_error = o.ok > 0 ? row_sums[k] / Real(o.ok) : 0;
    t.max_energy_error = o.energy_error_max;
    t.max_constraint_violation = o.constraint_max;
    t.max_velocity_constraint_violation = o.velocity_max;
    energy_error_max = max_keeping_nan(energy_error_max, t.max_energy_error);
    constraint_max = max_keeping_nan(constraint_max, t.max_constraint_violation);
    velocity_max = max_keeping_nan(velocity_max, t.max_velocity_constraint_violation);
    return t;
  }

  // A streaming run's tally holds one row: hands it over, complete, and
  // makes room for the next.
  void stream_row(std::int64_t row, const RunConfig& c, TimeseriesSink& sink) {
    sink.row(finish_row(row, c));
    rows[0] = Observation{};
    row_sums[0] = open_sums[0] = 0;
    open_block[0] = -1;
    first_row = row + 1;
  }

  // The result the tally stands for: the rows it holds (to `sink`, else into
  // r.timeseries; a streaming run's one slot is past the last row by now),
  // the run's maxima and the Newton mean.
  void fill(const RunConfig& c, RunResult& r, TimeseriesSink* sink = nullptr) {
    r.timeseries.clear();
    for (std::size_t k = 0; k < rows.size() && first_row + std::int64_t(k) < timeseries_rows(c); ++k) {
      const TimeseriesRow t = finish_row(first_row + std::int64_t(k), c);
      if (sink != nullptr)
        sink->row(t);
      else
        r.timeseries.push_back(t);
    }
    r.max_relative_energy_error = energy_error_max;
    r.max_constraint_violation = constraint_max;
    r.max_velocity_constraint_violation = velocity_max;
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

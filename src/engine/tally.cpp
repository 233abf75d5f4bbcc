#include "engine/tally.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tether {

RunTally::RunTally(std::int64_t row_count, bool keep) : keep_blocks(keep) {
  rows.resize(std::size_t(row_count));
  row_sums.assign(std::size_t(row_count), 0);
  open_sums.assign(std::size_t(row_count), 0);
  open_block.assign(std::size_t(row_count), -1);
  if (keep) blocks.resize(std::size_t(row_count));
}

void RunTally::merge(const RunTally& t, std::size_t failure_cap) {
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

void RunTally::save(BlobWriter& w) const {
  w.put(first_row), w.put(energy_error_max), w.put(constraint_max), w.put(velocity_max);
  w.put(rows), w.put(row_sums), w.put(open_sums), w.put(open_block), w.put(keep_blocks);
  std::vector<std::int64_t> counts;
  std::vector<Real> flat;
  for (const auto& b : blocks) counts.push_back(std::int64_t(b.size())), flat.insert(flat.end(), b.begin(), b.end());
  w.put(counts), w.put(flat);
  w.put(iterations), w.put(steps_taken), w.put(steps_attempted), w.put(failed), w.put(projected_states);
  w.put(newton_max), w.put(max_projection_distance), w.put(failures), w.put(integration);
}

void RunTally::load(BlobReader& b) {
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

bool RunTally::fits(std::int64_t row_count, std::int64_t held) const {
  const std::size_t n = std::size_t(held);
  const bool window = held == row_count ? first_row == 0 : first_row >= 0 && first_row <= row_count;
  return window && rows.size() == n && row_sums.size() == n &&
         open_sums.size() == n && open_block.size() == n && blocks.size() == (keep_blocks ? n : 0);
}

TimeseriesRow RunTally::finish_row(std::int64_t row, const RunConfig& c) {
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

void RunTally::stream_row(std::int64_t row, const RunConfig& c, TimeseriesSink& sink) {
  sink.row(finish_row(row, c));
  rows[0] = Observation{};
  row_sums[0] = open_sums[0] = 0;
  open_block[0] = -1;
  first_row = row + 1;
}

void RunTally::fill(const RunConfig& c, RunResult& r, TimeseriesSink* sink) {
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
  r.newton_mean = steps_attempted > 0 ? double(iterations) / double(steps_attempted) : NAN;  // none: no step
  r.newton_max = newton_max;
  r.trajectory_steps = steps_taken;
  r.failed = failed;
  r.failures = failures;
  r.projected_states = projected_states;
  r.max_projection_distance = max_projection_distance;
  r.integration_seconds = integration;
}

}  // namespace tether

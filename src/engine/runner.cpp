#include "engine/runner.hpp"

#include <algorithm>

namespace tether {

void RunProgress::save(BlobWriter& w, const HostEnsemble& h) const {
  w.put(first), w.put(done), w.put(next_row), w.put(work_done);
  tally.save(w);
  w.put(h.count), w.put(h.q), w.put(h.p), w.put(h.q_prev), w.put(h.energy0), w.put(h.energy_scale), w.put(h.status);
  w.put(h.failed_step), w.put(h.iterations_sum), w.put(h.iterations_max);
}

void RunProgress::load(BlobReader& b, HostEnsemble& h) {
  b.get(first), b.get(done), b.get(next_row), b.get(work_done);
  tally.load(b);
  b.get(h.count), b.get(h.q), b.get(h.p), b.get(h.q_prev), b.get(h.energy0), b.get(h.energy_scale), b.get(h.status);
  b.get(h.failed_step), b.get(h.iterations_sum), b.get(h.iterations_max);
  b.expect_end();
  const std::size_t n = h.count >= 0 ? std::size_t(h.count) : 0;
  h.energy_error.assign(n, 0), h.constraint_violation.assign(n, 0), h.velocity_violation.assign(n, 0);
}

bool RunProgress::fits(const HostEnsemble& h, std::int64_t batch, std::int64_t lo, std::int64_t hi, std::int64_t steps,
                       std::int64_t intervals, std::int64_t held_rows) const {
  const std::size_t n = std::size_t(h.count) * std::size_t(h.dof), count = std::size_t(h.count);
  return first >= lo && first < hi && (first - lo) % batch == 0 && h.count == std::min(batch, hi - first) &&
         done >= 0 && done <= steps && next_row >= 1 && next_row <= intervals + 1 && tally.fits(intervals + 1, held_rows) &&
         h.q.size() == n && h.p.size() == n && h.q_prev.size() == (h.two_step ? n : 0) && h.energy0.size() == count &&
         h.energy_scale.size() == count && h.status.size() == count && h.failed_step.size() == count &&
         h.iterations_sum.size() == count && h.iterations_max.size() == count;
}

}  // namespace tether

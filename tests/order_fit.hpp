#pragma once
// The one order-fit helper of the tests: observed convergence orders from
// errors at step sizes that halve, or fitted over any step sizes.
#include <cmath>
#include <cstddef>
#include <vector>

namespace tether::test {

// log2(e_i / e_{i+1}) for errors at h, h/2, h/4, ...
inline std::vector<double> observed_orders(const std::vector<double>& err) {
  std::vector<double> o;
  for (std::size_t i = 0; i + 1 < err.size(); ++i) o.push_back(std::log2(err[i] / err[i + 1]));
  return o;
}

// Least-squares slope of log(err) against log(h).
inline double fitted_order(const std::vector<double>& h, const std::vector<double>& err) {
  const double n = double(h.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < h.size(); ++i) {
    const double x = std::log(h[i]), y = std::log(err[i]);
    sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

}  // namespace tether::test

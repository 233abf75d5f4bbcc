// VGSCB21's diagnostics, written to give what ArviZ (0.2x) gives on the same
// draws: its split, rank normalisation, folding, R-hat and Geyer-truncated
// autocorrelation sums, with the autocovariances summed directly (ArviZ uses
// an FFT: the same sums up to roundoff) and only as far as the truncation
// needs them.
#include "tether/engine/diagnostics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace tether {

namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

// A chains x draws array, chain-major.
struct Chains {
  std::int64_t m = 0, n = 0;
  std::vector<double> x;
  double at(std::int64_t c, std::int64_t d) const { return x[std::size_t(c * n + d)]; }
};

// Each chain cut into its first and last floor(n/2) draws (the middle one of
// an odd count dropped): 2m chains that R-hat can compare (VGSCB21 §4.1).
Chains split(const std::vector<double>& x, std::int64_t m, std::int64_t n) {
  Chains s;
  const std::int64_t half = n / 2;
  s.m = 2 * m;
  s.n = half;
  s.x.reserve(std::size_t(s.m * half));
  for (std::int64_t c = 0; c < m; ++c) {
    for (std::int64_t d = 0; d < half; ++d) s.x.push_back(x[std::size_t(c * n + d)]);
    for (std::int64_t d = n - half; d < n; ++d) s.x.push_back(x[std::size_t(c * n + d)]);
  }
  return s;
}

// Standard normal quantile: Acklam's rational approximation (relative error
// 1.15e-9) polished by one Halley step on erfc, to about 1e-15.
double normal_quantile(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  double x;
  if (p < 0.02425) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p > 1 - 0.02425) {
    const double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2 * 3.14159265358979323846) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

// Rank normalisation (VGSCB21 eq. (14)): average ranks r over all draws
// (ties share theirs), z = Phi^-1((r - 3/8) / (S + 1/4)).
Chains z_scale(Chains s) {
  const std::size_t size = s.x.size();
  std::vector<std::size_t> order(size);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t i, std::size_t j) { return s.x[i] < s.x[j]; });
  std::vector<double> rank(size);
  for (std::size_t i = 0; i < size;) {
    std::size_t j = i;
    while (j + 1 < size && s.x[order[j + 1]] == s.x[order[i]]) ++j;
    const double average = (double(i) + double(j)) / 2 + 1;  // ranks from 1
    for (std::size_t k = i; k <= j; ++k) rank[order[k]] = average;
    i = j + 1;
  }
  for (std::size_t i = 0; i < size; ++i) s.x[i] = normal_quantile((rank[i] - 0.375) / (double(size) + 0.25));
  return s;
}

double mean_of(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()); }

// numpy's quantile with linear interpolation, over all draws.
double quantile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double h = double(v.size() - 1) * p;
  const std::size_t lo = std::size_t(std::floor(h));
  if (lo + 1 >= v.size()) return v.back();
  return v[lo] + (h - double(lo)) * (v[lo + 1] - v[lo]);
}

// Basic R-hat of (already split) chains (VGSCB21 eqs. (3)-(4)).
double rhat(const Chains& s) {
  std::vector<double> means(std::size_t(s.m)), vars(std::size_t(s.m));
  for (std::int64_t c = 0; c < s.m; ++c) {
    double mu = 0;
    for (std::int64_t d = 0; d < s.n; ++d) mu += s.at(c, d);
    mu /= double(s.n);
    double v = 0;
    for (std::int64_t d = 0; d < s.n; ++d) v += (s.at(c, d) - mu) * (s.at(c, d) - mu);
    means[std::size_t(c)] = mu;
    vars[std::size_t(c)] = v / double(s.n - 1);
  }
  const double grand = mean_of(means);
  double between = 0;
  for (double mu : means) between += (mu - grand) * (mu - grand);
  between = double(s.n) * between / double(s.m - 1);
  const double within = mean_of(vars);
  return std::sqrt((between / within + double(s.n) - 1) / double(s.n));
}

// ESS of (already split) chains: Geyer's initial positive and monotone
// sequences on the chains' combined autocorrelations (VGSCB21 §3.2).
double ess(const Chains& s) {
  const auto [lo, hi] = std::minmax_element(s.x.begin(), s.x.end());
  if (*hi - *lo < 1e-15) return double(s.x.size());  // a constant: as ArviZ
  const std::int64_t m = s.m, n = s.n;
  std::vector<double> mean(static_cast<std::size_t>(m));
  for (std::int64_t c = 0; c < m; ++c) {
    double mu = 0;
    for (std::int64_t d = 0; d < n; ++d) mu += s.at(c, d);
    mean[std::size_t(c)] = mu / double(n);
  }
  // The chains' mean autocovariance at lag t (biased, / n), computed on demand.
  std::vector<double> acov_cache;
  auto acov = [&](std::int64_t t) {
    while (std::int64_t(acov_cache.size()) <= t) {
      const std::int64_t lag = std::int64_t(acov_cache.size());
      double sum = 0;
      for (std::int64_t c = 0; c < m; ++c) {
        const double mu = mean[std::size_t(c)];
        double part = 0;
        for (std::int64_t d = 0; d + lag < n; ++d) part += (s.at(c, d) - mu) * (s.at(c, d + lag) - mu);
        sum += part / double(n);
      }
      acov_cache.push_back(sum / double(m));
    }
    return acov_cache[std::size_t(t)];
  };
  const double mean_var = acov(0) * double(n) / double(n - 1);
  double var_plus = mean_var * double(n - 1) / double(n);
  if (m > 1) {
    const double grand = mean_of(mean);
    double v = 0;
    for (double mu : mean) v += (mu - grand) * (mu - grand);
    var_plus += v / double(m - 1);
  }
  std::vector<double> rho(std::size_t(n), 0.0);
  double even = 1, odd = 1 - (mean_var - acov(1)) / var_plus;
  rho[0] = even;
  rho[1] = odd;
  std::int64_t t = 1;
  while (t < n - 3 && even + odd > 0) {
    even = 1 - (mean_var - acov(t + 1)) / var_plus;
    odd = 1 - (mean_var - acov(t + 2)) / var_plus;
    if (even + odd >= 0) {
      rho[std::size_t(t + 1)] = even;
      rho[std::size_t(t + 2)] = odd;
    }
    t += 2;
  }
  const std::int64_t max_t = t - 2;
  if (even > 0) rho[std::size_t(max_t + 1)] = even;
  for (t = 1; t <= max_t - 2; t += 2)
    if (rho[std::size_t(t + 1)] + rho[std::size_t(t + 2)] > rho[std::size_t(t - 1)] + rho[std::size_t(t)]) {
      rho[std::size_t(t + 1)] = (rho[std::size_t(t - 1)] + rho[std::size_t(t)]) / 2;
      rho[std::size_t(t + 2)] = rho[std::size_t(t + 1)];
    }
  double tau = -1;
  for (std::int64_t k = 0; k <= max_t; ++k) tau += 2 * rho[std::size_t(k)];
  if (max_t + 1 < n) tau += rho[std::size_t(max_t + 1)];
  const double total = double(m * n);
  tau = std::max(tau, 1 / std::log10(total));
  return total / tau;
}

}  // namespace

double rank_normalized_split_rhat(const std::vector<double>& x, std::int64_t chains, std::int64_t draws) {
  if (draws < 4 || chains < 2) return nan;
  const Chains s = split(x, chains, draws);
  const double bulk = rhat(z_scale(s));
  std::vector<double> all = s.x;
  std::nth_element(all.begin(), all.begin() + std::ptrdiff_t(all.size() / 2), all.end());
  double median = all[all.size() / 2];
  if (all.size() % 2 == 0)
    median = (median + *std::max_element(all.begin(), all.begin() + std::ptrdiff_t(all.size() / 2))) / 2;
  Chains folded = s;
  for (double& v : folded.x) v = std::fabs(v - median);
  const double tail = rhat(z_scale(folded));
  return std::max(bulk, tail);
}

double ess_bulk(const std::vector<double>& x, std::int64_t chains, std::int64_t draws) {
  if (draws < 4) return nan;
  return ess(z_scale(split(x, chains, draws)));
}

double ess_tail(const std::vector<double>& x, std::int64_t chains, std::int64_t draws) {
  if (draws < 4) return nan;
  double least = std::numeric_limits<double>::infinity();
  for (double p : {0.05, 0.95}) {
    const double q = quantile(x, p);
    std::vector<double> indicator(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) indicator[i] = x[i] <= q ? 1.0 : 0.0;
    least = std::min(least, ess(split(indicator, chains, draws)));
  }
  return least;
}

std::vector<double> energy_bfmi(const std::vector<double>& energy, std::int64_t chains, std::int64_t draws) {
  std::vector<double> r(std::size_t(chains), nan);
  if (draws < 2) return r;
  for (std::int64_t c = 0; c < chains; ++c) {
    const double* e = energy.data() + c * draws;
    double mean = 0, squared_steps = 0, squared_deviations = 0;
    for (std::int64_t d = 0; d < draws; ++d) mean += e[d];
    mean /= double(draws);
    for (std::int64_t d = 0; d < draws; ++d) {
      squared_deviations += (e[d] - mean) * (e[d] - mean);
      if (d > 0) squared_steps += (e[d] - e[d - 1]) * (e[d] - e[d - 1]);
    }
    const double ratio = squared_steps / squared_deviations;
    if (std::isfinite(ratio)) r[std::size_t(c)] = ratio;
  }
  return r;
}

ChainDiagnostics diagnose_chains(const std::vector<double>& x, std::int64_t chains, std::int64_t draws) {
  ChainDiagnostics r;
  r.mean = mean_of(x);
  double v = 0;
  for (double y : x) v += (y - r.mean) * (y - r.mean);
  r.sd = x.size() > 1 ? std::sqrt(v / double(x.size() - 1)) : nan;
  r.rhat = rank_normalized_split_rhat(x, chains, draws);
  r.ess_bulk = ess_bulk(x, chains, draws);
  r.ess_tail = ess_tail(x, chains, draws);
  return r;
}

}  // namespace tether

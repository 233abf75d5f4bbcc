#pragma once
// The metric a chain samples with (`sample.metric`), when it is not the
// system's own mass matrix M0: a constant M = Sigma^-1, Sigma Stan's inverse
// metric, diagonal or dense, estimated per chain in warm-up windows
// (MetricWindows, Stan's windowed adaptation; HG14 for its step size).
//
// Changing the mass matrix on a constraint manifold changes the measure the
// chain samples: constrained HMC with mass M leaves exp(-V/kT) sigma_N^M(dq)
// invariant, sigma_N^M the surface measure M induces on N, and
//   sigma_N^M(dq) = sqrt(det M det(G M^-1 G^T) / det(G G^T)) sigma_N(dq)
// (LRS19; G = G(q) the constraint Jacobian, sigma_N Hausdorff). To keep
// the target exp(-V/kT) sigma_N^M0(dq) the system defines, a chain with M
// runs on the potential
//   V_M(q) = V(q) + kT/2 [log det(G M^-1 G^T) - log det(G M0^-1 G^T)],
// whose terms are the Gram log-determinants of GS17, which Mici's
// constrained systems add to the potential. Its gradient,
//   kT grad_q tr(G(q) D),  D = M^-1 G^T (G M^-1 G^T)^-1 - M0^-1 G^T (G M0^-1 G^T)^-1
// with D held at the current q (d log det A = tr(A^-1 dA)), needs derivatives
// of G, which the system contract does not give: it is taken by central
// differences of G(q) D, exact to rounding for the quadratic constraints of
// the built-in systems (G linear in q). The sampler stays exact whatever the
// accuracy of this force: RATTLE's kick is a translation along the fibre of
// T*N, volume-preserving and reversible for any force field f(q), and the
// Metropolis test and the multinomial weights use V_M itself. A symmetric
// composition of RATTLE steps (BMS24 §5.2) keeps both properties. That is
// why a metric runs with RATTLE and its compositions only (takes_metric): an
// implicit method with a force that is not exactly a gradient would not
// preserve volume.
#include <cstdint>

#include "tether/core/families.hpp"
#include "tether/core/small_solve.hpp"
#include "tether/methods/composition.hpp"
#include "tether/methods/rattle.hpp"

namespace tether {

enum class MetricKind : std::uint8_t {
  mass,      // the system's own mass matrix (mechanics' default)
  identity,  // M = I
  diag,      // M = diag(Sigma)^-1, Sigma estimated in warm-up
  dense,     // M = Sigma^-1, Sigma a dense covariance estimated in warm-up
};

inline const char* metric_name(MetricKind kind) {
  switch (kind) {
    case MetricKind::identity: return "identity";
    case MetricKind::diag: return "diag";
    case MetricKind::dense: return "dense";
    default: return "mass";
  }
}

// Reals a chain stores for its metric: the diagonal of Sigma, or the lower
// triangle of its Cholesky factor L (Sigma = L L^T), row by row.
TETHER_HD constexpr int metric_values(MetricKind kind, int dof) {
  return kind == MetricKind::mass ? 0 : kind == MetricKind::dense ? dof * (dof + 1) / 2 : dof;
}
TETHER_HD constexpr int packed_index(int r, int c) { return r * (r + 1) / 2 + c; }  // L(r, c), c <= r

// Sigma as draws.nc keeps it (`inverse_metric`, Stan's inv_metric): the
// diagonal (diag), or the whole matrix row by row (dense); none for the
// system's mass or the identity, which adapt nothing.
constexpr int inverse_metric_values(MetricKind kind, int dof) {
  return kind == MetricKind::diag ? dof : kind == MetricKind::dense ? dof * dof : 0;
}
inline constexpr const char* inverse_metric_meaning =
    "Sigma = M^-1, the chain's metric adapted in warm-up (Stan's inv_metric): its diagonal (diag) or the matrix (dense)";

// Only RATTLE and its compositions run with a metric (see above); their
// reference forms too (a stepper holding one as `method`), and a stepper that
// says it may (a host chain's step through a pointer to one of them).
template <class M>
constexpr bool metric_method = std::is_same_v<M, Rattle> || std::is_same_v<M, Composition<Rattle>>;
template <class Stepper>
constexpr bool takes_metric = metric_method<Stepper> || requires(const Stepper& s) {
  requires metric_method<std::remove_cvref_t<decltype(s.method)>>;
} || requires { requires Stepper::takes_metric; };

// One chain's metric: value e at values[e * stride] (SampleView's layout).
struct ChainMetric {
  MetricKind kind = MetricKind::identity;
  const Real* values = nullptr;
  std::int64_t stride = 1;

  // A volatile load: with the stride a run-time value GCC versions these
  // loops for stride 1, and that copy's last bits differed from the other's
  // (a batch of one chain drifted 3e-13 from a batch of ten in 80
  // iterations); a chain's draws must not depend on its batch.
  TETHER_HD Real at(int e) const {
    const volatile Real* v = values;
    return v[e * stride];
  }
  TETHER_HD Real lower(int r, int c) const { return at(packed_index(r, c)); }

  // Sigma_cc: the variance the metric gives coordinate c.
  TETHER_HD Real variance(int c) const {
    if (kind != MetricKind::dense) return at(c);
    Real s = 0;
    for (int j = 0; j <= c; ++j) s += lower(c, j) * lower(c, j);
    return s;
  }

  // Sigma's inverse_metric_values(kind, dof) values (above), value e at
  // out[e * out_stride]; for dense Sigma_rc = sum_j L(r, j) L(c, j).
  void inverse_metric(int dof, Real* out, std::int64_t out_stride) const {
    if (kind != MetricKind::dense) {
      for (int c = 0; c < dof; ++c) out[c * out_stride] = at(c);
      return;
    }
    for (int r = 0; r < dof; ++r)
      for (int c = 0; c < dof; ++c) {
        Real s = 0;
        for (int j = 0; j <= (r < c ? r : c); ++j) s += lower(r, j) * lower(c, j);
        out[(r * dof + c) * out_stride] = s;
      }
  }

  // Sigma p = M^-1 p.
  template <int N>
  TETHER_HD Vec<N> inverse_times(const Vec<N>& p) const {
    Vec<N> x;
    if (kind != MetricKind::dense) {
      for (int c = 0; c < N; ++c) x[c] = at(c) * p[c];
      return x;
    }
    Vec<N> y;  // L^T p, then L (L^T p)
    for (int c = 0; c < N; ++c) {
      Real s = 0;
      for (int r = c; r < N; ++r) s += lower(r, c) * p[r];
      y[c] = s;
    }
    for (int r = 0; r < N; ++r) {
      Real s = 0;
      for (int c = 0; c <= r; ++c) s += lower(r, c) * y[c];
      x[r] = s;
    }
    return x;
  }
  // L^-T v (dense): a square root of M, (L^-T)(L^-T)^T = Sigma^-1.
  template <int N>
  TETHER_HD Vec<N> transpose_solve(const Vec<N>& v) const {
    Vec<N> x;
    for (int r = N - 1; r >= 0; --r) {
      Real s = v[r];
      for (int j = r + 1; j < N; ++j) s -= lower(j, r) * x[j];
      x[r] = s / lower(r, r);
    }
    return x;
  }
  // M v = Sigma^-1 v.
  template <int N>
  TETHER_HD Vec<N> times(const Vec<N>& v) const {
    Vec<N> z;
    if (kind != MetricKind::dense) {
      for (int c = 0; c < N; ++c) z[c] = v[c] / at(c);
      return z;
    }
    for (int r = 0; r < N; ++r) {  // L z = v
      Real s = v[r];
      for (int j = 0; j < r; ++j) s -= lower(r, j) * z[j];
      z[r] = s / lower(r, r);
    }
    return transpose_solve(z);
  }
  // C xi with C C^T = M: xi ~ N(0, I) gives C xi ~ N(0, M).
  template <int N>
  TETHER_HD Vec<N> sqrt_times(const Vec<N>& xi) const {
    if (kind == MetricKind::dense) return transpose_solve(xi);
    Vec<N> x;
    for (int c = 0; c < N; ++c) x[c] = xi[c] / sqrt(at(c));
    return x;
  }
};

// G(qa) W G(qb)^T, W = M^-1 given as a function, and W G(qb)^T into wgt.
template <class S, class InverseMass>
TETHER_HD Mat<S::constraint_count, S::constraint_count> weighted_gram(const S& sys, const Vec<S::dof>& qa,
                                                                    const Vec<S::dof>& qb,
                                                                    const InverseMass& inverse_mass,
                                                                    Mat<S::dof, S::constraint_count>& wgt) {
  constexpr int n = S::dof, k = S::constraint_count;
  Mat<k, k> a;
  for (int j = 0; j < k; ++j) {
    Vec<k> e = Vec<k>::Zero();
    e[j] = 1;
    wgt.col(j) = inverse_mass(Vec<n>(sys.constraint_transpose_times(qb, e)));
    a.col(j) = sys.constraint_jacobian_times(qa, Vec<n>(wgt.col(j)));
  }
  return a;
}

// log det(G W G^T) at q, W = M^-1 given as a function, and where d is not
// null W G^T (G W G^T)^-1 (n x k) into *d (the force needs it, an energy
// not); false when G W G^T is not positive definite.
template <class S, class InverseMass>
TETHER_HD bool gram_log_det(const S& sys, const Vec<S::dof>& q, const InverseMass& inverse_mass, Real& log_det,
                            Mat<S::dof, S::constraint_count>* d) {
  constexpr int n = S::dof, k = S::constraint_count;
  Mat<n, k> wgt;
  const Mat<k, k> a = weighted_gram(sys, q, q, inverse_mass, wgt);
  Cholesky<k> f;
  if (!f.factor(Mat<k, k>(Real(0.5) * (a + a.transpose())))) return false;
  log_det = f.log_det();
  if (d != nullptr)
    for (int r = 0; r < n; ++r) d->row(r) = f.solve(Vec<k>(wgt.row(r).transpose())).transpose();
  return true;
}

// The system S sampled with a chain's metric: S's constraints, the metric's
// kinetic energy, and the potential V_M above. It satisfies HolonomicSystem,
// so the step code runs on it unchanged.
template <class S>
struct MetricSystem {
  static constexpr int dof = S::dof;
  static constexpr int constraint_count = S::constraint_count;
  static constexpr bool reversed_by_momentum_flip = ::tether::reversed_by_momentum_flip<S>();
  using Gram = std::conditional_t<(constraint_count > 0), DenseMatrix<constraint_count>, typename S::Gram>;
  using Q = Vec<dof>;

  const S& sys;
  ChainMetric metric;
  Real temperature = 1;
  // Off only in the tests, to show that a sampler without the term is wrong.
  bool correct_measure = true;

  // The term's two log-determinants at q: their difference, log det(G M^-1
  // G^T) - log det(G M0^-1 G^T), and where d is not null D (above); false
  // where a Gram matrix is not positive definite.
  TETHER_HD bool measure_term(const Q& q, Real& difference, Mat<dof, constraint_count>* d) const {
    Real log_det = 0, log_det0 = 0;
    Mat<dof, constraint_count> d0;
    if (!gram_log_det(sys, q, [&](const Q& p) { return metric.inverse_times(p); }, log_det, d) ||
        !gram_log_det(sys, q, [&](const Q& p) { return Q(sys.inverse_mass_times(p)); }, log_det0,
                      d != nullptr ? &d0 : nullptr))
      return false;
    difference = log_det - log_det0;
    if (d != nullptr) *d -= d0;
    return true;
  }

  TETHER_HD Real potential(const Q& q) const {
    if constexpr (constraint_count == 0) {
      return sys.potential(q);
    } else {
      if (!correct_measure) return sys.potential(q);
      Real difference = 0;
      if (!measure_term(q, difference, nullptr)) return Real(NAN);
      return sys.potential(q) + Real(0.5) * temperature * difference;
    }
  }
  TETHER_HD Q potential_gradient(const Q& q) const {
    Q grad = sys.potential_gradient(q);
    if (!correct_measure) return grad;
    if constexpr (constraint_count > 0) {
      constexpr int k = constraint_count;
      Real unused = 0;
      Mat<dof, k> d;
      if (!measure_term(q, unused, &d)) return Q::Constant(Real(NAN));
      // tr(G(x) d) = sum_i (G(x) d_i)_i; its gradient by central differences.
      const auto trace = [&](const Q& x) {
        Real t = 0;
        for (int i = 0; i < k; ++i) t += sys.constraint_jacobian_times(x, Q(d.col(i)))[i];
        return t;
      };
      const Real eps = Real(1e-4) * sys.length_scale();
      for (int j = 0; j < dof; ++j) {
        Q up = q, down = q;
        up[j] += eps;
        down[j] -= eps;
        grad[j] += temperature * (trace(up) - trace(down)) / (up[j] - down[j]);
      }
    }
    return grad;
  }
  TETHER_HD Vec<constraint_count> constraints(const Q& q) const { return sys.constraints(q); }
  TETHER_HD Vec<constraint_count> constraint_jacobian_times(const Q& q, const Q& v) const {
    return sys.constraint_jacobian_times(q, v);
  }
  TETHER_HD Q constraint_transpose_times(const Q& q, const Vec<constraint_count>& lambda) const {
    return sys.constraint_transpose_times(q, lambda);
  }
  // G(qa) M^-1 G(qb)^T.
  TETHER_HD Gram gram(const Q& qa, const Q& qb) const {
    if constexpr (constraint_count == 0) {
      return Gram();
    } else {
      Mat<dof, constraint_count> unused;
      Gram m;
      m.a = weighted_gram(sys, qa, qb, [&](const Q& p) { return metric.inverse_times(p); }, unused);
      return m;
    }
  }
  TETHER_HD Q mass_times(const Q& v) const { return metric.times(v); }
  TETHER_HD Q inverse_mass_times(const Q& p) const { return metric.inverse_times(p); }
  TETHER_HD Q sqrt_mass_times(const Q& xi) const { return metric.sqrt_times(xi); }
  TETHER_HD Real length_scale() const { return sys.length_scale(); }
  TETHER_HD Real energy_scale() const { return sys.energy_scale(); }
};

// A chain's metric storage in a batch (SampleView::metric): component e of
// chain i at [e * count + i]: Sigma (metric_values), then while it adapts
// the running mean and sum of squared deviations of the window's states
// (Welford's, as Stan's estimators), dual averaging's mu since the last
// window, and how many windows ended in an estimate that was not positive
// definite (the metric before it kept).
struct MetricLayout {
  int values = 0, mean = 0, squares = 0, mu = 0, fallbacks = 0, size = 0;
  TETHER_HD static MetricLayout of(MetricKind kind, int dof) {
    MetricLayout l;
    const int v = metric_values(kind, dof);
    if (v == 0) return l;
    l.values = 0;
    l.mean = v;
    l.squares = v + dof;
    l.mu = l.squares + v;
    l.fallbacks = l.mu + 1;
    l.size = l.fallbacks + 1;
    return l;
  }
};

// A chain's metric before its first window: Sigma = I (Stan's start), and
// dual averaging's mu.
inline void metric_start(MetricKind kind, int dof, Real* m, std::int64_t stride, Real mu) {
  const MetricLayout l = MetricLayout::of(kind, dof);
  for (int e = 0; e < l.size; ++e) m[e * stride] = 0;
  for (int c = 0; c < dof; ++c) m[(l.values + (kind == MetricKind::dense ? packed_index(c, c) : c)) * stride] = 1;
  if (l.size > 0) m[l.mu * stride] = mu;
}

// Welford's update of a window's mean and squared deviations with the
// window's n-th state q (Stan: welford_var_estimator, welford_covar_estimator).
template <int N>
TETHER_HD void metric_add_state(MetricKind kind, const MetricLayout& l, Real* m, std::int64_t stride, const Vec<N>& q,
                                std::int64_t n) {
  Vec<N> delta;
  for (int c = 0; c < N; ++c) {
    Real& mean = m[(l.mean + c) * stride];
    delta[c] = q[c] - mean;
    mean += delta[c] / Real(n);
  }
  for (int r = 0; r < N; ++r) {
    const Real after = q[r] - m[(l.mean + r) * stride];
    if (kind == MetricKind::dense)
      for (int c = 0; c <= r; ++c) m[(l.squares + packed_index(r, c)) * stride] += after * delta[c];
    else
      m[(l.squares + r) * stride] += after * delta[r];
  }
}

// At a window's end, from its n states: the regularised estimate (Stan)
//   Sigma = n/(n + 5) C + 1e-3 l^2 5/(n + 5) I
// (C the sample covariance, or its diagonal; l the system's length scale,
// where Stan's unit is 1), factored for dense; false, Sigma unchanged, when
// it is not finite and positive definite. The window's sums restart.
template <int N>
TETHER_HD bool metric_end_window(MetricKind kind, const MetricLayout& l, Real* m, std::int64_t stride, std::int64_t n,
                                 Real length_scale) {
  const int v = metric_values(kind, N);
  const Real shrink = Real(n) / Real(n + 5) / Real(n - 1), ridge = Real(1e-3) * length_scale * length_scale * 5 / Real(n + 5);
  auto a = [&](int e) -> Real& { return m[(l.squares + e) * stride]; };
  bool ok = n > 1;
  for (int e = 0; e < v; ++e) a(e) *= shrink;
  for (int r = 0; r < N; ++r) a(kind == MetricKind::dense ? packed_index(r, r) : r) += ridge;
  if (kind == MetricKind::dense) {  // Cholesky in place, packed (Cholesky<N>'s N x N copy would sit in a GPU thread)
    for (int c = 0; ok && c < N; ++c) {
      Real d = a(packed_index(c, c));
      for (int j = 0; j < c; ++j) d -= a(packed_index(c, j)) * a(packed_index(c, j));
      ok = d > 0 && is_finite(d);
      if (!ok) break;
      a(packed_index(c, c)) = sqrt(d);
      for (int r = c + 1; r < N; ++r) {
        Real s = a(packed_index(r, c));
        for (int j = 0; j < c; ++j) s -= a(packed_index(r, j)) * a(packed_index(c, j));
        a(packed_index(r, c)) = s / a(packed_index(c, c));
      }
    }
  }
  for (int e = 0; ok && e < v; ++e) ok = is_finite(a(e)) && (kind == MetricKind::dense || a(e) > 0);
  for (int e = 0; e < v; ++e) {
    if (ok) m[(l.values + e) * stride] = a(e);
    a(e) = 0;
  }
  for (int c = 0; c < N; ++c) m[(l.mean + c) * stride] = 0;
  return ok;
}

// Stan's windowed adaptation schedule (Stan; stan::mcmc::windowed_adaptation):
// an initial buffer of `init` iterations, then windows that double in length
// from `base`, the last stretched to meet a terminal buffer of `term`
// iterations (75, 25, 50 by default; 15%, 75%, 10% of a warm-up shorter than
// their sum). The states of a window's iterations estimate Sigma at its end.
struct MetricWindows {
  std::int64_t warmup = 0, init = 0, term = 0, base = 0;

  static MetricWindows stan(std::int64_t warmup) {
    MetricWindows w{warmup, 75, 50, 25};
    if (w.init + w.base + w.term > warmup) {
      w.init = std::int64_t(0.15 * double(warmup));
      w.term = std::int64_t(0.1 * double(warmup));
      w.base = warmup - (w.init + w.term);
    }
    return w;
  }
  TETHER_HD std::int64_t last() const { return warmup - term - 1; }  // the last window's end
  // The window after [start, end] of `size` iterations (Stan's compute_next_window).
  TETHER_HD void next(std::int64_t& start, std::int64_t& end, std::int64_t& size) const {
    start = end + 1;
    size *= 2;
    end += size;
    if (end != last() && end + 2 * size >= warmup - term) end = last();
  }
  // The window [start, end] iteration k falls in; false when k is in neither.
  TETHER_HD bool window_of(std::int64_t k, std::int64_t& start, std::int64_t& end) const {
    if (k < init || k > last()) return false;
    std::int64_t size = base;
    start = init;
    end = init + base - 1;
    while (k > end && end < last()) next(start, end, size);
    return true;
  }
  // Where step-size adaptation last restarted before iteration k: after the
  // last window that ended before k (Stan restarts dual averaging there), else 0.
  TETHER_HD std::int64_t restart_before(std::int64_t k) const {
    std::int64_t restart = 0, start = init, size = base, end = init + base - 1;
    while (base > 0 && end < k) {
      restart = end + 1;
      if (end == last()) break;
      next(start, end, size);
    }
    return restart;
  }
};

}  // namespace tether

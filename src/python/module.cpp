// tether._tether: the engine (tether/engine.hpp) for Python. Each call parses
// a config's JSON text, runs it with the GIL released, and hands the results
// over as NumPy arrays that own the engine's buffers (no copy); the package
// (python/tether/__init__.py) arranges them as xarray objects.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "tether/engine.hpp"
#include "tether/sampling/hmc.hpp"

namespace nb = nanobind;
using tether::Real;

namespace {

PyObject* config_error_type = nullptr;

// A vector's buffer as a NumPy array that owns it.
template <class T>
nb::object hand_over(std::vector<T>&& v, std::initializer_list<std::size_t> shape) {
  auto* owned = new std::vector<T>(std::move(v));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T>(owned->data(), shape, owner));
}

// Signals and the Python progress callback, checked where the engine reports
// progress (between launches, about once a second): a KeyboardInterrupt, or
// an exception the callback raised, unwinds the engine as `Interrupted` and
// is raised again once the GIL is back.
struct Interrupted {};
class Progress {
 public:
  explicit Progress(nb::object callback) : callback_(std::move(callback)) {}
  std::function<void(double, double)> function() {
    return [this](double done, double total) {
      nb::gil_scoped_acquire gil;
      try {
        if (PyErr_CheckSignals() != 0) throw nb::python_error();
        if (!callback_.is_none()) callback_(done, total);
      } catch (nb::python_error& e) {
        error_.emplace(std::move(e));
        throw Interrupted{};
      }
    };
  }
  // Runs `work` without the GIL; raises what interrupted it.
  template <class F>
  auto call(F&& work) {
    std::optional<decltype(work())> result;
    try {
      nb::gil_scoped_release release;
      result.emplace(work());
    } catch (const Interrupted&) {
      throw std::move(*error_);
    }
    return std::move(*result);
  }

 private:
  nb::object callback_;
  std::optional<nb::python_error> error_;
};

// threads > 0: the cpu backend's OpenMP threads for this call only.
class Threads {
 public:
  explicit Threads(int threads) {
#ifdef _OPENMP
    before_ = omp_get_max_threads();
    if (threads > 0) omp_set_num_threads(threads);
#else
    (void)threads;
#endif
  }
  ~Threads() {
#ifdef _OPENMP
    omp_set_num_threads(before_);
#endif
  }

 private:
  int before_ = 1;
};

// Every final state and snapshot of a run, in arrays laid out as results.nc's.
class ArraySink final : public tether::FinalStateSink {
 public:
  ArraySink(const tether::RunConfig& c, int dof) : c_(c), dof_(std::size_t(dof)) {
    const std::size_t n = c.write_final_states ? std::size_t(c.size) : 0;
    q.resize(n * dof_), p.resize(n * dof_), status.resize(n), failed_step.resize(n);
    energy_error.resize(n), constraint_violation.resize(n), velocity_violation.resize(n);
    snaps_ = std::size_t(tether::snapshots_per_trajectory(c));
    const std::size_t t = c.track_ids.size() * snaps_;
    tracked_q.resize(t * dof_), tracked_p.resize(t * dof_), tracked_status.resize(t);
    tracked_energy_error.resize(t), tracked_constraint_violation.resize(t), tracked_velocity_violation.resize(t);
  }
  void write(const tether::TrajectoryRecord& r) override {
    if (status.empty()) return;
    const std::size_t i = std::size_t(r.id);
    std::copy(r.q.begin(), r.q.end(), q.begin() + std::ptrdiff_t(i * dof_));
    std::copy(r.p.begin(), r.p.end(), p.begin() + std::ptrdiff_t(i * dof_));
    status[i] = static_cast<std::uint8_t>(r.status);
    failed_step[i] = r.status == tether::Status::ok ? -1 : r.failed_step;
    energy_error[i] = r.energy_error, constraint_violation[i] = r.constraint_violation;
    velocity_violation[i] = r.velocity_violation;
  }
  void snapshot(const tether::TrajectoryRecord& r) override {
    const auto at = std::lower_bound(c_.track_ids.begin(), c_.track_ids.end(), r.id);
    const std::size_t k = std::size_t(at - c_.track_ids.begin()) * snaps_ + std::size_t(tether::snapshot_index(c_, r.step));
    std::copy(r.q.begin(), r.q.end(), tracked_q.begin() + std::ptrdiff_t(k * dof_));
    std::copy(r.p.begin(), r.p.end(), tracked_p.begin() + std::ptrdiff_t(k * dof_));
    tracked_status[k] = static_cast<std::uint8_t>(r.status);
    tracked_energy_error[k] = r.energy_error, tracked_constraint_violation[k] = r.constraint_violation;
    tracked_velocity_violation[k] = r.velocity_violation;
  }
  std::size_t snapshots() const { return snaps_; }

  std::vector<Real> q, p, energy_error, constraint_violation, velocity_violation, tracked_q, tracked_p;
  std::vector<Real> tracked_energy_error, tracked_constraint_violation, tracked_velocity_violation;
  std::vector<std::uint8_t> status, tracked_status;
  std::vector<std::int64_t> failed_step;

 private:
  const tether::RunConfig& c_;
  std::size_t dof_, snaps_ = 0;
};

// Every draw of every chain, as draws.nc holds them: [chain][draw][component].
class ArrayDraws final : public tether::DrawSink {
 public:
  ArrayDraws(std::int64_t chains, std::int64_t draws, int dof, tether::MetricKind metric)
      : chains_(std::size_t(chains)), draws_(std::size_t(draws)), dof_(std::size_t(dof)),
        metric_values_(std::size_t(tether::inverse_metric_values(metric, dof))) {
    const std::size_t n = chains_ * draws_;
    q.resize(n * dof_), potential.resize(n), acceptance_rate.resize(n), energy.resize(n), step_size.resize(n);
    n_steps.resize(n), outcome.resize(n), diverging.resize(n), tree_depth.resize(n);
    inverse_metric.resize(chains_ * metric_values_);
  }
  void write(const tether::DrawBlock& b) override {  // the block is [draw][component][chain]
    const std::size_t n = std::size_t(b.chains);
    for (std::size_t d = 0; d < std::size_t(b.draws); ++d)
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t chain = std::size_t(b.first_chain) + i, draw = std::size_t(b.first_draw) + d;
        const std::size_t at = chain * draws_ + draw, from = d * n + i;
        for (std::size_t c = 0; c < dof_; ++c) q[at * dof_ + c] = b.q[(d * dof_ + c) * n + i];
        potential[at] = b.potential[from], acceptance_rate[at] = b.acceptance[from], energy[at] = b.energy[from];
        step_size[at] = b.step_size[from], n_steps[at] = b.steps[from], outcome[at] = b.outcome[from];
        diverging[at] = tether::is_divergent(tether::HmcOutcome(b.outcome[from])), tree_depth[at] = b.tree_depth[from];
      }
    if (b.inverse_metric != nullptr)  // [e][chain] to [chain][e]
      for (std::size_t e = 0; e < metric_values_; ++e)
        for (std::size_t i = 0; i < n; ++i)
          inverse_metric[(std::size_t(b.first_chain) + i) * metric_values_ + e] = b.inverse_metric[e * n + i];
  }
  std::vector<Real> q, potential, acceptance_rate, energy, step_size, inverse_metric;
  std::vector<std::int32_t> n_steps, tree_depth;
  std::vector<std::uint8_t> outcome;
  std::vector<bool> diverging;

 private:
  std::size_t chains_, draws_, dof_, metric_values_;
};

using Array = nb::ndarray<const double, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

// What a run takes from memory: initial states given as arrays (when q0 and
// p0 are), and the batch-size override (0: the config's).
tether::InMemoryRun in_memory_run(const std::optional<Array>& q0, const std::optional<Array>& p0,
                                  std::int64_t batch_size) {
  tether::InMemoryRun in_memory;
  in_memory.batch_size = batch_size;
  if (q0 && p0) {
    if (q0->shape(0) != p0->shape(0))
      throw tether::ConfigError("ensemble.initial.states", "q has " + std::to_string(q0->shape(0)) + " rows, p " +
                                                               std::to_string(p0->shape(0)));
    in_memory.q = q0->data(), in_memory.p = p0->data(), in_memory.count = std::int64_t(q0->shape(0));
    in_memory.q_columns = int(q0->shape(1)), in_memory.p_columns = int(p0->shape(1));
  }
  return in_memory;
}

nb::dict run(const std::string& text, const std::string& source, std::optional<Array> q0, std::optional<Array> p0,
             const std::string& backend, int threads, std::int64_t batch_size, nb::object progress) {
  tether::RunConfig c = tether::parse_config_in_memory(text, source, in_memory_run(q0, p0, batch_size));
  if (!backend.empty()) c.backend = backend;
  Threads scope(threads);
  c.backend = tether::resolve_backend(c.backend, c.size);
  tether::check_config(c);  // with the backend's own library, where the system is declared
  const int dof = tether::system_dof(c);
  ArraySink sink(c, dof);
  Progress bar(std::move(progress));
  tether::RunOptions opt;
  opt.final_states = &sink;
  opt.progress = bar.function();
  const tether::RunResult r = bar.call([&] { return tether::run(c, opt); });

  nb::dict out;
  out["attributes"] = tether::results_attributes(c, r).dump();
  out["dof"] = dof;
  const std::size_t rows = r.timeseries.size();
  std::vector<std::int64_t> step(rows), live(rows);
  std::vector<Real> time(rows), mean_error(rows), max_error(rows), max_cv(rows), max_vv(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    const tether::TimeseriesRow& t = r.timeseries[i];
    step[i] = t.step, live[i] = t.live, time[i] = t.time, mean_error[i] = t.mean_energy_error;
    max_error[i] = t.max_energy_error, max_cv[i] = t.max_constraint_violation;
    max_vv[i] = t.max_velocity_constraint_violation;
  }
  out["step"] = hand_over(std::move(step), {rows});
  out["time"] = hand_over(std::move(time), {rows});
  out["live_trajectories"] = hand_over(std::move(live), {rows});
  out["mean_relative_energy_error"] = hand_over(std::move(mean_error), {rows});
  out["max_relative_energy_error"] = hand_over(std::move(max_error), {rows});
  out["max_constraint_violation"] = hand_over(std::move(max_cv), {rows});
  out["max_velocity_constraint_violation"] = hand_over(std::move(max_vv), {rows});
  const std::size_t n = sink.status.size(), m = std::size_t(dof);
  if (c.write_final_states) {
    out["q"] = hand_over(std::move(sink.q), {n, m});
    out["p"] = hand_over(std::move(sink.p), {n, m});
    out["status"] = hand_over(std::move(sink.status), {n});
    out["failed_step"] = hand_over(std::move(sink.failed_step), {n});
    out["energy_error"] = hand_over(std::move(sink.energy_error), {n});
    out["constraint_violation"] = hand_over(std::move(sink.constraint_violation), {n});
    out["velocity_constraint_violation"] = hand_over(std::move(sink.velocity_violation), {n});
  }
  if (!c.track_ids.empty()) {
    const std::size_t t = c.track_ids.size(), s = sink.snapshots();
    std::vector<std::int64_t> snapshot_step(s);
    for (std::size_t k = 0; k < s; ++k) snapshot_step[k] = tether::snapshot_step(c, std::int64_t(k));
    out["tracked"] = hand_over(std::vector<std::int64_t>(c.track_ids), {t});
    out["snapshot_step"] = hand_over(std::move(snapshot_step), {s});
    out["tracked_q"] = hand_over(std::move(sink.tracked_q), {t, s, m});
    out["tracked_p"] = hand_over(std::move(sink.tracked_p), {t, s, m});
    out["tracked_status"] = hand_over(std::move(sink.tracked_status), {t, s});
    out["tracked_energy_error"] = hand_over(std::move(sink.tracked_energy_error), {t, s});
    out["tracked_constraint_violation"] = hand_over(std::move(sink.tracked_constraint_violation), {t, s});
    out["tracked_velocity_constraint_violation"] = hand_over(std::move(sink.tracked_velocity_violation), {t, s});
  }
  return out;
}

nb::dict shoot(const std::string& text, const std::string& source, const std::string& backend, int threads,
               nb::object progress) {
  tether::ShootConfig c = tether::parse_shoot_config(text, source);
  if (!backend.empty()) c.run.backend = backend;
  Threads scope(threads);
  c.run.backend = tether::resolve_shoot_backend(c);
  Progress bar(std::move(progress));
  tether::ShootOptions opt;
  opt.progress = bar.function();
  const tether::ShootResult r = bar.call([&] { return tether::shoot(c, opt); });

  const std::size_t t = r.targets.size(), n = c.shoot.q0.size();
  std::vector<Real> target(t * n), p0(t * n), pT(t * n), residual(t), energy(t), length(t), conjugate_time(t),
      error_estimate(t), second_length(t);
  std::vector<std::uint8_t> status(t), converged(t), conjugate_point(t), near_cut_locus(t);
  std::vector<std::int32_t> iterations(t), attempts(t), converged_attempts(t), round(t);
  for (std::size_t i = 0; i < t; ++i) {
    const tether::TargetResult& k = r.targets[i];
    std::copy(k.target.begin(), k.target.end(), target.begin() + std::ptrdiff_t(i * n));
    std::copy(k.p0.begin(), k.p0.end(), p0.begin() + std::ptrdiff_t(i * n));
    std::copy(k.pT.begin(), k.pT.end(), pT.begin() + std::ptrdiff_t(i * n));
    status[i] = static_cast<std::uint8_t>(k.status), near_cut_locus[i] = k.near_cut_locus;
    converged[i] = k.status == tether::ShotStatus::converged;
    conjugate_point[i] = k.conjugate_point(r.time());
    iterations[i] = k.iterations, attempts[i] = k.attempts, converged_attempts[i] = k.converged_attempts;
    round[i] = k.round, residual[i] = k.residual, energy[i] = k.energy, length[i] = k.length;
    conjugate_time[i] = k.conjugate_time, error_estimate[i] = k.error_estimate, second_length[i] = k.second_length;
  }
  nb::dict out;
  out["summary"] = tether::shoot_summary(c, r).dump();
  out["q1"] = hand_over(std::move(target), {t, n});
  out["p0"] = hand_over(std::move(p0), {t, n});
  out["pT"] = hand_over(std::move(pT), {t, n});
  out["status"] = hand_over(std::move(status), {t});
  out["iterations"] = hand_over(std::move(iterations), {t});
  out["residual"] = hand_over(std::move(residual), {t});
  out["energy"] = hand_over(std::move(energy), {t});
  out["length"] = hand_over(std::move(length), {t});
  out["error_estimate"] = hand_over(std::move(error_estimate), {t});
  out["conjugate_time"] = hand_over(std::move(conjugate_time), {t});
  out["second_length"] = hand_over(std::move(second_length), {t});
  out["converged"] = hand_over(std::move(converged), {t});
  out["conjugate_point"] = hand_over(std::move(conjugate_point), {t});
  out["near_cut_locus"] = hand_over(std::move(near_cut_locus), {t});
  out["attempts"] = hand_over(std::move(attempts), {t});
  out["converged_attempts"] = hand_over(std::move(converged_attempts), {t});
  out["round"] = hand_over(std::move(round), {t});
  if (!r.geodesics.empty()) {  // every geodesic is sampled at the same times
    const std::size_t g = r.geodesics.size(), s = r.geodesics.front().times.size();
    std::vector<std::int64_t> which(g);
    std::vector<Real> q(g * s * n);
    for (std::size_t i = 0; i < g; ++i) {
      which[i] = r.geodesics[i].target;
      for (std::size_t k = 0; k < s; ++k)
        std::copy(r.geodesics[i].q[k].begin(), r.geodesics[i].q[k].end(), q.begin() + std::ptrdiff_t((i * s + k) * n));
    }
    out["geodesic_target"] = hand_over(std::move(which), {g});
    out["geodesic_time"] = hand_over(std::vector<Real>(r.geodesics.front().times), {s});
    out["geodesic_q"] = hand_over(std::move(q), {g, s, n});
  }
  return out;
}

nb::dict sample(const std::string& text, const std::string& source, const std::string& algorithm,
                const std::string& backend, int threads, nb::object progress) {
  tether::SampleConfig c = tether::parse_sample_config(
      algorithm.empty() ? text : tether::with_sample_algorithm(text, source, algorithm), source);
  if (!backend.empty()) c.run.backend = backend;
  Threads scope(threads);
  c.run.backend = tether::resolve_backend(c.run.backend, c.sample.chains);
  tether::check_sample_config(c);
  tether::check_memory_for_draws(c);
  const int dof = tether::system_dof(c.run);
  ArrayDraws draws(c.sample.chains, c.sample.draws, dof, c.sample.metric);
  Progress bar(std::move(progress));
  tether::SampleOptions opt;
  opt.draws = &draws;
  opt.progress = bar.function();
  const tether::SampleResult r = bar.call([&] { return tether::sample(c, opt); });

  const std::size_t chains = std::size_t(c.sample.chains), n = std::size_t(c.sample.draws), m = std::size_t(dof);
  nb::dict out;
  out["summary"] = tether::sample_summary(c, r, nullptr).dump();
  out["q"] = hand_over(std::move(draws.q), {chains, n, m});
  out["potential"] = hand_over(std::move(draws.potential), {chains, n});
  out["acceptance_rate"] = hand_over(std::move(draws.acceptance_rate), {chains, n});
  out["energy"] = hand_over(std::move(draws.energy), {chains, n});
  out["step_size"] = hand_over(std::move(draws.step_size), {chains, n});
  out["n_steps"] = hand_over(std::move(draws.n_steps), {chains, n});
  out["outcome"] = hand_over(std::move(draws.outcome), {chains, n});
  out["diverging"] = hand_over(std::vector<std::uint8_t>(draws.diverging.begin(), draws.diverging.end()), {chains, n});
  if (c.sample.dynamic) out["tree_depth"] = hand_over(std::move(draws.tree_depth), {chains, n});
  if (c.sample.metric == tether::MetricKind::diag) out["inverse_metric"] = hand_over(std::move(draws.inverse_metric), {chains, m});
  if (c.sample.metric == tether::MetricKind::dense)
    out["inverse_metric"] = hand_over(std::move(draws.inverse_metric), {chains, m, m});
  out["system_parameters"] = tether::system_parameter_values(tether::system_info(c.run), c.run.system_parameters).dump();
  out["temperature"] = c.sample.temperature;
  return out;
}

// Parses and checks a config as its command would before running (nothing
// runs), a run's states given as arrays included; returns the command ("run",
// "shoot" or "sample").
std::string validate(const std::string& text, const std::string& source, std::optional<Array> q0,
                     std::optional<Array> p0) {
  const std::string command = tether::config_command(text, source);
  const bool arrays = q0 && p0;
  if (arrays && command != "run")
    throw tether::ConfigError("ensemble.initial.states", "given as arrays is for tether.run, not " + command);
  if (command == "shoot") {
    tether::parse_shoot_config(text, source);
  } else if (command == "sample") {
    tether::check_sample_config(tether::parse_sample_config(text, source));
  } else {
    tether::check_config(arrays ? tether::parse_config_in_memory(text, source, in_memory_run(q0, p0, 0))
                                : tether::parse_config(text, source));
  }
  return command;
}

template <class F>
nb::list names(int count, F&& name) {
  nb::list out;
  for (int k = 0; k < count; ++k) out.append(name(k));
  return out;
}

}  // namespace

NB_MODULE(_tether, m) {
  m.doc() = "tether's engine; use the tether package";
  config_error_type = PyErr_NewExceptionWithDoc(
      "tether.ConfigError", "A bad config: the message names what is wrong, `path` where (a JSON path, or the file).",
      PyExc_ValueError, nullptr);
  if (config_error_type == nullptr) throw nb::python_error();
  m.attr("ConfigError") = nb::handle(config_error_type);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const tether::ConfigError& e) {
      // (A config's own bytes may be echoed: decoded with replacement, never an error of its own.)
      const auto text = [](const std::string& s) {
        return nb::steal(PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "replace"));
      };
      nb::object error = nb::steal(PyObject_CallOneArg(config_error_type, text(e.what()).ptr()));
      if (!error.is_valid()) return;  // the call's own exception stands
      error.attr("path") = text(e.path());
      PyErr_SetObject(config_error_type, error.ptr());
    }
  });

  // Config text and its source travel as bytes: a file's own bytes, whatever its encoding or its name's.
  const auto text = [](const nb::bytes& b) { return std::string(b.c_str(), b.size()); };
  m.def("run", [text](nb::bytes t, nb::bytes s, std::optional<Array> q0, std::optional<Array> p0, const std::string& b,
                      int threads, std::int64_t batch, nb::object progress) {
    return run(text(t), text(s), q0, p0, b, threads, batch, std::move(progress));
  }, nb::arg("text"), nb::arg("source"), nb::arg("q0").none(), nb::arg("p0").none(), nb::arg("backend"),
        nb::arg("threads"), nb::arg("batch_size"), nb::arg("progress").none());
  m.def("shoot", [text](nb::bytes t, nb::bytes s, const std::string& b, int threads, nb::object progress) {
    return shoot(text(t), text(s), b, threads, std::move(progress));
  }, nb::arg("text"), nb::arg("source"), nb::arg("backend"), nb::arg("threads"), nb::arg("progress").none());
  m.def("sample", [text](nb::bytes t, nb::bytes s, const std::string& a, const std::string& b, int threads,
                          nb::object progress) { return sample(text(t), text(s), a, b, threads, std::move(progress)); },
        nb::arg("text"), nb::arg("source"), nb::arg("algorithm"), nb::arg("backend"), nb::arg("threads"),
        nb::arg("progress").none());
  m.def("validate", [text](nb::bytes t, nb::bytes s, std::optional<Array> q0, std::optional<Array> p0) {
    return validate(text(t), text(s), q0, p0);
  }, nb::arg("text"), nb::arg("source"), nb::arg("q0").none(), nb::arg("p0").none());
  m.def("read_config_file", [text](nb::bytes path) {
    const std::string content = tether::read_config_file(text(path));
    return nb::bytes(content.data(), content.size());
  }, nb::arg("path"));
  m.def("catalog", [] { return tether::catalog_json().dump(); });
  m.def("backends", [] {
    nb::dict out;
    out["cuda_built"] = tether::cuda_built() && !tether::cuda_compile_check_only();
    out["cuda_devices"] = tether::cuda_device_count();
    return out;
  });
  m.attr("status_names") = names(tether::status_count, [](int k) { return tether::status_name(tether::Status(k)); });
  m.attr("shot_status_names") = names(tether::shot_status_count, [](int k) { return tether::shot_status_name(tether::ShotStatus(k)); });
  m.attr("inverse_metric_meaning") = tether::inverse_metric_meaning;
  m.attr("hmc_outcome_names") =
      names(tether::hmc_outcome_count, [](int k) { return tether::hmc_outcome_name(tether::HmcOutcome(k)); });
}

#include "engine/engine.hpp"

#include <type_traits>

#include "engine/cpu_backend.hpp"
#include "engine/dispatch.hpp"
#include "engine/reference_backend.hpp"
#include "engine/registry.hpp"
#include "engine/runner.hpp"
#ifdef TETHER_HAVE_CUDA
#include "engine/cuda_backend.hpp"
#endif

namespace tether {

Observation reduce_observations(const EnsembleView& v, std::vector<Real>& chunk_sums) {
  const std::int64_t chunks = (v.count + observation_chunk - 1) / observation_chunk;
  chunk_sums.assign(static_cast<std::size_t>(chunks), 0);
  std::vector<Observation> part(static_cast<std::size_t>(chunks));
#pragma omp parallel for schedule(static) if (v.count >= parallel_threshold)
  for (std::int64_t b = 0; b < chunks; ++b) {
    Observation o;
    Real sum = 0;
    for (std::int64_t i = b * observation_chunk; i < std::min(v.count, (b + 1) * observation_chunk); ++i) {
      const Observation one = observation_of(v, i);
      o.merge(one);
      if (one.ok) sum += v.energy_error[i];
    }
    part[std::size_t(b)] = o;
    chunk_sums[std::size_t(b)] = sum;
  }
  Observation total;
  for (const auto& o : part) total.merge(o);
  return total;
}

bool cuda_built() {
#ifdef TETHER_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#ifdef TETHER_HAVE_CUDA
  return cuda_runtime_device_count();
#else
  return 0;
#endif
}

std::string resolve_backend(const std::string& requested) {
  if (requested == "auto") return cuda_device_count() > 0 ? "cuda" : "cpu";
  if (requested == "cuda") {
    if (!cuda_built()) throw ConfigError("backend", "\"cuda\" is not available: this build has no CUDA support");
    if (cuda_device_count() == 0) throw ConfigError("backend", "\"cuda\" is not available: no CUDA device is present");
  }
  if (requested != "cpu" && requested != "reference" && requested != "cuda")
    throw ConfigError("backend", "unknown backend \"" + requested + "\" (one of: auto, cpu, reference, cuda)");
  return requested;
}

namespace {

template <class S, class M>
std::unique_ptr<Backend<S, M>> make_backend(const std::string& name, const S& sys, const M& method,
                                            const StepControl& ctl) {
  if (name == "cpu") return std::make_unique<CpuBackend<S, M>>(sys, method, ctl);
  if (name == "reference") return std::make_unique<ReferenceBackend<S, M>>(sys, method, ctl);
#ifdef TETHER_HAVE_CUDA
  if (name == "cuda") return make_cuda_backend<S, M>(sys, method, ctl);
#endif
  throw ConfigError("backend", "backend \"" + name + "\" is not available in this build");
}

}  // namespace

CompositionScheme composition_scheme(const std::string& name) {
  if (name == "triple_jump") return CompositionScheme::triple_jump;
  if (name == "suzuki") return CompositionScheme::suzuki;
  if (name == "yoshida6") return CompositionScheme::yoshida6;
  if (name == "kahan_li6") return CompositionScheme::kahan_li6;
  if (name == "kahan_li8") return CompositionScheme::kahan_li8;
  throw ConfigError("method.scheme", "unknown composition scheme \"" + name + "\"");
}

Variational::Parameters variational_parameters(const MethodSpec& spec) {
  Variational::Parameters p;
  if (spec.layer == "heun")
    p = Variational::Parameters::heun();
  else if (spec.layer == "kutta3")
    p = Variational::Parameters::kutta3();
  else if (spec.layer == "explicit") {
    const std::size_t s = spec.layer_b.size();
    if (s < 1 || s > std::size_t(Variational::max_stages))
      throw ConfigError("method.layer.b", "must have 1 to " + std::to_string(Variational::max_stages) + " weights, got " +
                                              std::to_string(s));
    if (spec.layer_c.size() != s || spec.layer_a.size() != s)
      throw ConfigError("method.layer", "a (rows), b and c must all have the same length, the number of stages");
    p.stages = int(s);
    for (std::size_t i = 0; i < std::size_t(Variational::max_stages); ++i) {
      p.b[i] = i < s ? spec.layer_b[i] : 0;
      p.c[i] = i < s ? spec.layer_c[i] : 0;
      for (std::size_t j = 0; j < std::size_t(Variational::max_stages); ++j) p.a[i][j] = 0;
    }
    for (std::size_t i = 0; i < s; ++i) {
      if (spec.layer_a[i].size() != s)
        throw ConfigError("method.layer.a[" + std::to_string(i) + "]", "must have " + std::to_string(s) + " entries");
      for (std::size_t j = 0; j < s; ++j) p.a[i][j] = spec.layer_a[i][j];
    }
  }
  p.alpha_plus = spec.alpha_plus;
  p.solver = spec.solver == "newton" ? Variational::Solver::newton : Variational::Solver::fixed_point;
  if (const char* bad = p.check()) throw ConfigError("method", bad);
  return p;
}

CompositionForm composition_form(const std::string& name) {
  return name == "extrinsic" ? CompositionForm::extrinsic : CompositionForm::intrinsic;
}

void check_config(const RunConfig& c) {
  with_system(c, [&](const auto& sys) {
    check_initial_states(sys, c);
    using S = std::decay_t<decltype(sys)>;
    return with_method<S>(c, [](auto) { return 0; });  // the method's own parameter checks
  });
}

RunResult run(const RunConfig& c, const RunOptions& opt) {
  check_config(c);
  const std::string backend = resolve_backend(c.backend);
  return with_system(c, [&](const auto& sys) {
    using S = std::decay_t<decltype(sys)>;
    return with_method<S>(c, [&](auto method) {
      using M = decltype(method);
      auto be = make_backend<S, M>(backend, sys, method, StepControl{c.dt, c.newton});
      RunResult r = run_ensemble<S, M>(sys, method, c, *be, opt);
      r.system = c.system_name;
      r.method = c.method_name;
      r.stages = c.stages;
      r.family = is_lagrangian<S> ? "lagrangian" : (is_nonholonomic<S> ? "nonholonomic" : "holonomic");
      r.backend = backend;
      return r;
    });
  });
}

}  // namespace tether

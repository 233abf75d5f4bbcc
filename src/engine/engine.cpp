#include "tether/engine/run.hpp"

#include <array>
#include <chrono>
#include <iterator>
#include <utility>

#include "backends/backend.hpp"
#include "compiled_pairs.hpp"
#include "engine/tally.hpp"
#include "engine/pair_entry.hpp"
#include "expr/compiled_pair.hpp"
#include "tether/registry.hpp"
#ifdef TETHER_HAVE_CUDA
#include "backends/cuda/device_count.hpp"
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
#if defined(TETHER_HAVE_CUDA) || defined(TETHER_CUDA_COMPILE_CHECK)
  return true;
#else
  return false;
#endif
}

bool cuda_compile_check_only() {
#ifdef TETHER_CUDA_COMPILE_CHECK
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

std::string build_fingerprint() {
  std::string s = "compiler " __VERSION__ ", cpu lanes " + std::to_string(cpu_lanes);
#if defined(__FMA__)
  s += ", host fma";
#endif
#ifdef TETHER_NO_FMA
  s += ", no fused multiply-adds";
#endif
  s += cuda_built() ? (cuda_compile_check_only() ? ", cuda checked only" : ", cuda") : ", no cuda";
  return s;
}

void use_cuda_device_of_rank(int rank) {
#ifdef TETHER_HAVE_CUDA
  if (const int devices = cuda_runtime_device_count(); devices > 0) cuda_runtime_use_device(rank % devices);
#else
  (void)rank;
#endif
}

std::string resolve_backend(const std::string& requested) {
  if (requested == "auto") return !cuda_compile_check_only() && cuda_device_count() > 0 ? "cuda" : "cpu";
  if (requested == "cuda") {
    if (!cuda_built()) throw ConfigError("backend", "\"cuda\" is not available: this build has no CUDA support");
    if (cuda_compile_check_only())
      throw ConfigError("backend", "\"cuda\" is not available: this build compiled its kernels only to check them "
                                   "(TETHER_CUDA_COMPILE_CHECK=ON); build with scripts/build.sh to run them");
    if (cuda_device_count() == 0) throw ConfigError("backend", "\"cuda\" is not available: no CUDA device is present");
  }
  if (requested != "cpu" && requested != "reference" && requested != "cuda")
    throw ConfigError("backend", "unknown backend \"" + requested + "\" (one of: auto, cpu, reference, cuda)");
  return requested;
}

std::string resolve_backend(const std::string& requested, std::int64_t ensemble, std::int64_t cuda_from) {
  const std::string backend = resolve_backend(requested);
  return requested == "auto" && backend == "cuda" && ensemble < cuda_from ? "cpu" : backend;
}

std::string resolve_shoot_backend(const ShootConfig& c) {
  return resolve_backend(c.run.backend, std::int64_t(c.shoot.targets.size()) * c.shoot.guesses_per_target(),
                         auto_cuda_min_shots);
}

namespace {

// Each built-in (system, method) pair's entry points, by registry indices
// (defined in the generated per-method units): those of the methods this
// build compiled in (compiled_pairs.hpp); the config reader sends the others'
// pairs to the first-use compile.
template <class S, class M, std::size_t J>
constexpr PairEntry compiled_entry() {
  if constexpr (method_compiled[J])
    return pair_entry<S, M>();
  else
    return {};
}

template <class S, class... M, std::size_t... J>
constexpr std::array<PairEntry, sizeof...(M)> row(TypeList<M...>, std::index_sequence<J...>) {
  return {compiled_entry<S, M, J>()...};
}

template <class... S>
const PairEntry& entry(TypeList<S...>, int system, int method) {
  static constexpr std::array<std::array<PairEntry, Methods::size>, sizeof...(S)> table{
      row<S>(Methods{}, std::make_index_sequence<Methods::size>{})...};
  const PairEntry& e = table.at(std::size_t(system)).at(std::size_t(method));
  if (!e.run) throw std::logic_error("the registry does not pair system " + std::to_string(system) + " with method " +
                                     std::to_string(method));
  return e;
}

#ifdef TETHER_SYSTEM_COUNT
static_assert(Systems::size == TETHER_SYSTEM_COUNT,
              "CMake counted a different number of systems in tether/system_list.hpp: keep one per line there");
static_assert(std::size(method_compiled) == Methods::size && std::size(system_types) == Systems::size &&
                  std::size(system_headers) == Systems::size,
              "CMake generated compiled_pairs.hpp from another registry");
static_assert(Methods::size == TETHER_METHOD_COUNT,
              "CMake counted a different number of methods in tether/registry.hpp: keep one per line there");
#endif

// A declared system's pair is compiled when first used, one engine (and
// backend: cuda's holds its kernels) at a time (expr/compiled_pair.hpp).
const PairEntry& entry_for(const RunConfig& c, PairEngine engine, const std::string& backend) {
  return c.declared ? declared_pair(*c.declared, c.method, engine, backend).entry
                    : entry(Systems{}, c.system, c.method);
}

}  // namespace

void check_config(const RunConfig& c) {
  if (c.declared)
    declared_pair(*c.declared, c.method, PairEngine::run, c.backend).check(c);
  else
    check_system(c);
}

RunResult run(const RunConfig& c, const RunOptions& opt) {
  check_config(c);
  const std::string backend = resolve_backend(c.backend, c.size);
  return entry_for(c, PairEngine::run, backend).run(c, opt, backend);
}

RunResult merge_shards(const RunConfig& c, const std::vector<std::string>& tallies) {
  const std::int64_t rows = timeseries_rows(c);
  RunTally total(rows, false);
  for (std::size_t k = 0; k < tallies.size(); ++k) {
    RunTally t;
    BlobReader b(tallies[k], "shard " + std::to_string(k) + "'s sums (its shard.tether)");
    t.load(b);
    b.expect_end();
    if (!t.keep_blocks || !t.fits(rows, rows))
      throw std::runtime_error("shard " + std::to_string(k) + "'s sums do not fit the config's timeseries");
    total.merge(t, RunOptions{}.failure_report_cap);
  }
  RunResult r;
  r.trajectories = c.size;
  r.steps = c.steps;
  r.dt = c.dt;
  r.system = c.system_name;
  r.method = c.method_name;
  r.stages = c.stages;
  total.fill(c, r);
  return r;
}

ShootResult shoot(const ShootConfig& c, const ShootOptions& opt) {
  const auto start = std::chrono::steady_clock::now();
  const std::string backend = resolve_shoot_backend(c);
  ShootResult r = entry_for(c.run, PairEngine::shoot, backend).shoot(c, opt, backend);
  r.system = c.run.system_name;
  r.method = c.run.method_name;
  r.stages = c.run.stages;
  r.backend = backend;
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

SampleResult sample(const SampleConfig& c, const SampleOptions& opt) {
  const auto start = std::chrono::steady_clock::now();
  const std::string backend = resolve_backend(c.run.backend, c.sample.chains);
  SampleResult r = entry_for(c.run, PairEngine::sample, backend).sample(c, opt, backend);
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace tether

// draws.nc: a sample's draws as netCDF-4 in the layout of ArviZ's
// InferenceData (az.from_netcdf, xarray.open_dataset(group=...)): group
// `posterior` with q (chain, draw, q_dim) and the potential V (chain, draw);
// group `sample_stats` with acceptance_rate, energy, step_size, n_steps,
// diverging (a failed solve or a diverged trajectory), outcome (why a
// proposal was rejected or a dynamic trajectory stopped, as CF flag values)
// and, for a dynamic sampler, tree_depth; for an adapted metric
// inverse_metric, each chain's Sigma (chain, inverse_metric_dim_0[,
// inverse_metric_dim_1]), as ArviZ names a matrix's dimensions. Written
// through the netCDF C library, block by block.
#include <netcdf.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/json_node.hpp"
#include "io/netcdf_check.hpp"
#include "tether/engine/catalog.hpp"
#include "tether/engine/config_error.hpp"
#include "tether/engine/output.hpp"
#include "tether/sampling/hmc.hpp"

namespace tether {

namespace {

// Opens `file`, calls read(group id of posterior), closes the file however
// read ends. `ok(status, what)` turns a netCDF failure into the caller's error.
template <class Ok, class Read>
void read_posterior(const std::filesystem::path& file, const Ok& ok, Read&& read) {
  int id, post;
  ok(nc_open(file.c_str(), NC_NOWRITE, &id), "open");
  try {
    ok(nc_inq_grp_ncid(id, "posterior", &post), "posterior");
    read(post);
  } catch (...) {
    nc_close(id);
    throw;
  }
  nc_close(id);
}

template <class Ok>
std::int64_t dimension(int group, const char* name, const Ok& ok) {
  int d;
  std::size_t n;
  ok(nc_inq_dimid(group, name, &d), name);
  ok(nc_inq_dimlen(group, d, &n), name);
  return std::int64_t(n);
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

namespace {
std::atomic<bool> netcdf_write_failed{false};
// draws.nc's chunks: up to this many chains by this many draws.
constexpr std::int64_t draws_chunk = 256;
}  // namespace

void mark_netcdf_write_failed() { netcdf_write_failed = true; }
bool netcdf_file_left_broken() { return netcdf_write_failed; }

struct NetcdfDraws::Ids {
  int file = -1, posterior = -1, stats = -1;
  int q = -1, potential = -1, acceptance = -1, energy = -1, step_size = -1, steps = -1, diverging = -1, outcome = -1;
  int tree_depth = -1;  // a dynamic sampler's only
  int inverse_metric = -1;  // an adapted metric's only
};

NetcdfDraws::NetcdfDraws(const std::filesystem::path& file, const SampleConfig& c, int dof)
    : file_(file), ids_(std::make_unique<Ids>()), dof_(dof), metric_(c.sample.metric) {
  Ids& id = *ids_;
  const auto ok = [&](int status, const char* what) { netcdf_check(status, "write", what, file_); };
  ok(nc_create(file_.c_str(), NC_CLOBBER | NC_NETCDF4, &id.file), "create");
  open_ = true;
  const std::string created = utc_now();
  const std::size_t chains = std::size_t(c.sample.chains), draws = std::size_t(c.sample.draws);
  // Chunks: a few hundred chains by a few hundred draws, whole q vectors.
  const std::size_t chunk_chains = std::min<std::size_t>(chains, draws_chunk),
                    chunk_draws = std::min<std::size_t>(draws, draws_chunk);

  auto group = [&](const char* name, int& gid) {
    ok(nc_def_grp(id.file, name, &gid), name);
    ok(nc_put_att_text(gid, NC_GLOBAL, "created_at", created.size(), created.c_str()), "created_at");
    static const std::string library = "tether";
    ok(nc_put_att_text(gid, NC_GLOBAL, "inference_library", library.size(), library.c_str()), "inference_library");
    int chain_dim, draw_dim, chain_var, draw_var;
    ok(nc_def_dim(gid, "chain", chains, &chain_dim), "chain");
    ok(nc_def_dim(gid, "draw", draws, &draw_dim), "draw");
    ok(nc_def_var(gid, "chain", NC_INT64, 1, &chain_dim, &chain_var), "chain");
    ok(nc_def_var(gid, "draw", NC_INT64, 1, &draw_dim, &draw_var), "draw");
    return std::array<int, 4>{chain_dim, draw_dim, chain_var, draw_var};
  };
  auto scalar = [&](int gid, const std::array<int, 4>& d, const char* name, nc_type type, int& var) {
    const int dims[2] = {d[0], d[1]};
    const std::size_t chunks[2] = {chunk_chains, chunk_draws};
    ok(nc_def_var(gid, name, type, 2, dims, &var), name);
    ok(nc_def_var_chunking(gid, var, NC_CHUNKED, chunks), name);
  };

  const auto post = group("posterior", id.posterior);
  for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"system", &c.run.system_name},
                                   std::pair<const char*, const std::string*>{"method", &c.run.method_name}})
    ok(nc_put_att_text(id.posterior, NC_GLOBAL, key, value->size(), value->c_str()), key);
  // What a run starting from these draws checks and needs (read_start_draws).
  const std::string parameters = system_parameter_values(system_info(c.run), c.run.system_parameters).dump();
  ok(nc_put_att_text(id.posterior, NC_GLOBAL, "system_parameters", parameters.size(), parameters.c_str()),
     "system_parameters");
  ok(nc_put_att_double(id.posterior, NC_GLOBAL, "temperature", NC_DOUBLE, 1, &c.sample.temperature), "temperature");
  int q_dim, q_dim_var;
  ok(nc_def_dim(id.posterior, "q_dim", std::size_t(dof), &q_dim), "q_dim");
  ok(nc_def_var(id.posterior, "q_dim", NC_INT64, 1, &q_dim, &q_dim_var), "q_dim");
  {
    const int dims[3] = {post[0], post[1], q_dim};
    const std::size_t chunks[3] = {chunk_chains, chunk_draws, std::size_t(dof)};
    ok(nc_def_var(id.posterior, "q", NC_DOUBLE, 3, dims, &id.q), "q");
    ok(nc_def_var_chunking(id.posterior, id.q, NC_CHUNKED, chunks), "q");
  }
  scalar(id.posterior, post, "potential", NC_DOUBLE, id.potential);

  const auto stats = group("sample_stats", id.stats);
  scalar(id.stats, stats, "acceptance_rate", NC_DOUBLE, id.acceptance);
  scalar(id.stats, stats, "energy", NC_DOUBLE, id.energy);
  scalar(id.stats, stats, "step_size", NC_DOUBLE, id.step_size);
  scalar(id.stats, stats, "n_steps", NC_INT, id.steps);
  scalar(id.stats, stats, "diverging", NC_BYTE, id.diverging);
  ok(nc_put_att_text(id.stats, id.diverging, "dtype", 4, "bool"), "diverging");  // xarray decodes it as bool
  scalar(id.stats, stats, "outcome", NC_UBYTE, id.outcome);
  if (c.sample.dynamic) scalar(id.stats, stats, "tree_depth", NC_INT, id.tree_depth);
  // Sigma: a vector (diag) or a matrix (dense) per chain, with coordinates 0..dof-1.
  const int metric_axes = c.sample.metric == MetricKind::dense ? 2 : c.sample.metric == MetricKind::diag ? 1 : 0;
  int metric_axis_vars[2] = {-1, -1};
  if (metric_axes > 0) {
    int dims[3] = {stats[0], -1, -1};
    for (int a = 0; a < metric_axes; ++a) {
      const std::string name = std::string("inverse_metric_dim_") + std::to_string(a);  // (GCC 12 misreads "..." + s)
      ok(nc_def_dim(id.stats, name.c_str(), std::size_t(dof), &dims[a + 1]), "inverse_metric");
      ok(nc_def_var(id.stats, name.c_str(), NC_INT64, 1, &dims[a + 1], &metric_axis_vars[a]), "inverse_metric");
    }
    ok(nc_def_var(id.stats, "inverse_metric", NC_DOUBLE, 1 + metric_axes, dims, &id.inverse_metric), "inverse_metric");
    const std::string meaning = inverse_metric_meaning;
    ok(nc_put_att_text(id.stats, id.inverse_metric, "long_name", meaning.size(), meaning.c_str()), "inverse_metric");
  }
  {
    unsigned char values[hmc_outcome_count];
    std::string meanings;
    for (int k = 0; k < hmc_outcome_count; ++k) {
      values[k] = static_cast<unsigned char>(k);
      if (k > 0) meanings += ' ';
      meanings += hmc_outcome_name(static_cast<HmcOutcome>(k));
    }
    ok(nc_put_att_uchar(id.stats, id.outcome, "flag_values", NC_UBYTE, hmc_outcome_count, values), "outcome");
    ok(nc_put_att_text(id.stats, id.outcome, "flag_meanings", meanings.size(), meanings.c_str()), "outcome");
  }
  ok(nc_enddef(id.file), "enddef");

  // Coordinates 0..n-1 in both groups.
  auto index = [](std::size_t n) {
    std::vector<long long> v(n);
    for (std::size_t k = 0; k < n; ++k) v[k] = static_cast<long long>(k);
    return v;
  };
  const auto chain_index = index(chains), draw_index = index(draws), q_index = index(std::size_t(dof));
  for (const auto& [gid, d] : {std::pair{id.posterior, post}, std::pair{id.stats, stats}}) {
    ok(nc_put_var_longlong(gid, d[2], chain_index.data()), "chain");
    ok(nc_put_var_longlong(gid, d[3], draw_index.data()), "draw");
  }
  ok(nc_put_var_longlong(id.posterior, q_dim_var, q_index.data()), "q_dim");
  for (int var : metric_axis_vars)
    if (var >= 0) ok(nc_put_var_longlong(id.stats, var, q_index.data()), "inverse_metric");
}

NetcdfDraws::~NetcdfDraws() {
  if (open_) netcdf_discard(ids_->file);  // unfinished: the caller removes the partial file
}

void NetcdfDraws::write(const DrawBlock& b) {
  const Ids& id = *ids_;
  const auto ok = [&](int status, const char* what) { netcdf_check(status, "write", what, file_); };
  const std::size_t n = std::size_t(b.chains), m = std::size_t(b.draws), dof = std::size_t(dof_);
  // The block is [draw][component][chain]; the file's order is [chain][draw][component].
  std::vector<double> q(n * m * dof);
  for (std::size_t d = 0; d < m; ++d)
    for (std::size_t c = 0; c < dof; ++c)
      for (std::size_t i = 0; i < n; ++i) q[(i * m + d) * dof + c] = b.q[(d * dof + c) * n + i];
  const std::size_t start3[3] = {std::size_t(b.first_chain), std::size_t(b.first_draw), 0}, count3[3] = {n, m, dof};
  ok(nc_put_vara_double(id.posterior, id.q, start3, count3, q.data()), "q");

  const std::size_t start2[2] = {std::size_t(b.first_chain), std::size_t(b.first_draw)}, count2[2] = {n, m};
  auto transpose = [&](const auto* in) {
    std::vector<std::decay_t<decltype(*in)>> out(n * m);
    for (std::size_t d = 0; d < m; ++d)
      for (std::size_t i = 0; i < n; ++i) out[i * m + d] = in[d * n + i];
    return out;
  };
  ok(nc_put_vara_double(id.posterior, id.potential, start2, count2, transpose(b.potential).data()), "potential");
  ok(nc_put_vara_double(id.stats, id.acceptance, start2, count2, transpose(b.acceptance).data()), "acceptance_rate");
  ok(nc_put_vara_double(id.stats, id.energy, start2, count2, transpose(b.energy).data()), "energy");
  ok(nc_put_vara_double(id.stats, id.step_size, start2, count2, transpose(b.step_size).data()), "step_size");
  ok(nc_put_vara_int(id.stats, id.steps, start2, count2, transpose(b.steps).data()), "n_steps");
  const std::vector<std::uint8_t> outcome = transpose(b.outcome);
  std::vector<signed char> diverging(outcome.size());
  for (std::size_t k = 0; k < outcome.size(); ++k)
    diverging[k] = is_divergent(HmcOutcome(outcome[k])) ? 1 : 0;
  ok(nc_put_vara_schar(id.stats, id.diverging, start2, count2, diverging.data()), "diverging");
  ok(nc_put_vara_uchar(id.stats, id.outcome, start2, count2, outcome.data()), "outcome");
  if (id.tree_depth >= 0) {
    const std::vector<std::uint8_t> depth = transpose(b.tree_depth);
    const std::vector<int> wide(depth.begin(), depth.end());
    ok(nc_put_vara_int(id.stats, id.tree_depth, start2, count2, wide.data()), "tree_depth");
  }
  if (id.inverse_metric >= 0 && b.inverse_metric != nullptr) {  // [e][chain] to [chain][e]
    const std::size_t values = std::size_t(inverse_metric_values(metric_, b.dof));
    std::vector<double> sigma(n * values);
    for (std::size_t e = 0; e < values; ++e)
      for (std::size_t i = 0; i < n; ++i) sigma[i * values + e] = b.inverse_metric[e * n + i];
    const std::size_t start[3] = {std::size_t(b.first_chain), 0, 0}, count[3] = {n, dof, dof};
    ok(nc_put_vara_double(id.stats, id.inverse_metric, start, count, sigma.data()), "inverse_metric");
  }
}

void NetcdfDraws::close() {
  open_ = false;
  netcdf_close(ids_->file, file_);
}

namespace {

// pick folded over every diagnosed scalar: the potential and each q component.
template <class F>
double fold(const DrawsDiagnostics& d, double start, F&& pick) {
  double r = pick(start, d.potential);
  for (const auto& x : d.q) r = pick(r, x);
  return r;
}

}  // namespace

double DrawsDiagnostics::max_rhat() const {  // NaN where no R-hat is defined (one chain): none, not 0
  return fold(*this, NAN, [](double r, const ChainDiagnostics& x) { return std::isfinite(x.rhat) ? std::fmax(r, x.rhat) : r; });
}
double DrawsDiagnostics::min_ess_bulk() const {
  return fold(*this, INFINITY, [](double r, const ChainDiagnostics& x) {
    return std::isfinite(x.ess_bulk) ? std::min(r, x.ess_bulk) : r;
  });
}
double DrawsDiagnostics::min_energy_bfmi() const {
  double r = NAN;
  for (double b : energy_bfmi) r = std::fmin(r, b);  // fmin skips NaN
  return r;
}
std::int64_t DrawsDiagnostics::low_energy_bfmi_chains() const {
  return std::count_if(energy_bfmi.begin(), energy_bfmi.end(), [](double b) { return b < low_energy_bfmi; });
}
double DrawsDiagnostics::min_ess_tail() const {
  return fold(*this, INFINITY, [](double r, const ChainDiagnostics& x) {
    return std::isfinite(x.ess_tail) ? std::min(r, x.ess_tail) : r;
  });
}

DrawsDiagnostics diagnose_draws_file(const std::filesystem::path& file, std::int64_t max_values) {
  const auto ok = [&](int status, const char* what) { netcdf_check(status, "read", what, file); };
  DrawsDiagnostics r;
  read_posterior(file, ok, [&](int post) {
    const std::int64_t chains = dimension(post, "chain", ok), draws = dimension(post, "draw", ok);
    const std::int64_t dof = dimension(post, "q_dim", ok);
    r.chains_used = std::max<std::int64_t>(1, std::min(chains, max_values / std::max<std::int64_t>(1, draws)));
    std::vector<double> x(std::size_t(r.chains_used * draws));
    int q, potential;
    ok(nc_inq_varid(post, "q", &q), "q");
    ok(nc_inq_varid(post, "potential", &potential), "potential");
    for (std::int64_t c = 0; c < dof; ++c) {
      const std::size_t start[3] = {0, 0, std::size_t(c)}, count[3] = {std::size_t(r.chains_used), std::size_t(draws), 1};
      ok(nc_get_vara_double(post, q, start, count, x.data()), "q");
      r.q.push_back(diagnose_chains(x, r.chains_used, draws));
    }
    const std::size_t start[2] = {0, 0}, count[2] = {std::size_t(r.chains_used), std::size_t(draws)};
    ok(nc_get_vara_double(post, potential, start, count, x.data()), "potential");
    r.potential = diagnose_chains(x, r.chains_used, draws);
    int root, stats, energy;
    ok(nc_inq_grp_parent(post, &root), "sample_stats");
    ok(nc_inq_grp_ncid(root, "sample_stats", &stats), "sample_stats");
    ok(nc_inq_varid(stats, "energy", &energy), "energy");
    ok(nc_get_vara_double(stats, energy, start, count, x.data()), "energy");
    r.energy_bfmi = energy_bfmi(x, r.chains_used, draws);
  });
  return r;
}

StartDraws read_start_draws(const std::filesystem::path& file, std::int64_t count, int dof, const std::string& where) {
  // Every netCDF failure is the config's: the file it names is not a draws.nc.
  const auto ok = [&](int status, const char* what) {
    if (status != NC_NOERR)
      throw ConfigError(where, "names " + file.string() + ", which is not a draws.nc of tether sample (" + what +
                                   ": " + nc_strerror(status) + ")");
  };
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) throw ConfigError(where, "names " + file.string() + ", which does not exist");
  StartDraws r;
  read_posterior(file, ok, [&](int post) {
    auto text = [&](const char* name) {
      std::size_t n = 0;
      ok(nc_inq_attlen(post, NC_GLOBAL, name, &n), name);
      std::string s(n, '\0');
      ok(nc_get_att_text(post, NC_GLOBAL, name, s.data()), name);
      return s;
    };
    r.system = text("system");
    try {
      r.system_parameters = parse_config_json(text("system_parameters"), "system_parameters");
    } catch (const ConfigError& e) {
      throw ConfigError(where, "names " + file.string() + ", whose system_parameters attribute is not a config's JSON (" +
                                   e.what() + ")");
    }
    ok(nc_get_att_double(post, NC_GLOBAL, "temperature", &r.temperature), "temperature");
    r.chains = dimension(post, "chain", ok);
    r.draws = dimension(post, "draw", ok);
    const std::int64_t coordinates = dimension(post, "q_dim", ok);
    if (coordinates != dof)
      throw ConfigError(where, "names " + file.string() + ", whose q has " + std::to_string(coordinates) +
                                   " coordinates, not " + std::to_string(dof));
    if (r.chains < 1 || count > r.chains * r.draws)
      throw ConfigError(where, "names " + file.string() + ", which holds " + std::to_string(r.chains) + " chains x " +
                                   std::to_string(r.draws) + " draws, fewer than the " + std::to_string(count) +
                                   " trajectories of this run");
    // The last `rows` draws of every chain: trajectory i is chain i mod C at
    // draw D - 1 - i / C.
    const std::int64_t rows = (count + r.chains - 1) / r.chains;
    std::vector<double> block(std::size_t(r.chains * rows * dof));
    int q;
    ok(nc_inq_varid(post, "q", &q), "q");
    const std::size_t start[3] = {0, std::size_t(r.draws - rows), 0};
    const std::size_t extent[3] = {std::size_t(r.chains), std::size_t(rows), std::size_t(dof)};
    ok(nc_get_vara_double(post, q, start, extent, block.data()), "q");
    r.q.resize(std::size_t(count * dof));
    for (std::int64_t i = 0; i < count; ++i) {
      const std::int64_t chain = i % r.chains, row = rows - 1 - i / r.chains;
      for (int k = 0; k < dof; ++k)
        r.q[std::size_t(i * dof + k)] = Real(block[std::size_t((chain * rows + row) * dof + k)]);
    }
  });
  return r;
}

std::int64_t draws_file_bytes(const SampleSpec& s, int dof) {
  // Chunks of chain_chunk x draw_chunk draws, an edge chunk stored whole.
  const std::int64_t chain_chunk = std::min<std::int64_t>(s.chains, draws_chunk),
                     draw_chunk = std::min<std::int64_t>(s.draws, draws_chunk);
  const std::int64_t chunks = (s.chains + chain_chunk - 1) / chain_chunk * ((s.draws + draw_chunk - 1) / draw_chunk);
  return chunks * chain_chunk * draw_chunk * (std::int64_t(dof + 4) * 8 + 4 + 2) +
         s.chains * std::int64_t(inverse_metric_values(s.metric, dof)) * 8 +
         (std::int64_t(1) << 20) + chunks * 9 * 64;  // the header, and each of 9 variables' index entry per chunk
}

std::int64_t draws_side_file_bytes(const SampleSpec& s, std::int64_t chains, std::int64_t batch_size, int dof) {
  const std::int64_t batches = (chains + batch_size - 1) / std::max<std::int64_t>(batch_size, 1);
  // A block per window with draws: at most one per draw of each batch.
  return chains * s.draws * (std::int64_t(dof + 4) * 8 + 4 + 2) + batches * s.draws * std::int64_t(sizeof(std::int64_t) * 5) +
         chains * std::int64_t(inverse_metric_values(s.metric, dof)) * 8;
}

}  // namespace tether

// The files of `tether sample`: draws.bin as the draws come (what a
// checkpoint counts and a shard leaves), draws.nc made from it at the end,
// summary.json; and `tether merge` of sample shards.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "engine/sample_tally.hpp"
#include "io/side_files.hpp"
#include "io/text_out.hpp"
#include "tether/engine/config_error.hpp"
#include "tether/engine/output.hpp"
#include "tether/engine/run.hpp"

namespace tether {

namespace fs = std::filesystem;

namespace {

// One DrawBlock as a record of draws.bin: first chain, chains, first draw,
// draws, Sigma's values per chain (0 where the block has none) (int64 each),
// then q, potential, acceptance, energy, step size (doubles), steps (int32),
// outcomes and tree depths (bytes), and Sigma (doubles), each in the block's order.
struct BlockHead {
  std::int64_t first_chain = 0, chains = 0, first_draw = 0, draws = 0, metric_values = 0;
};

template <class T>
void put(std::string& out, const T* data, std::size_t n) {
  out.append(reinterpret_cast<const char*>(data), n * sizeof(T));
}

// Hands every record of draws.bin, in file order, to `sink`; the number of
// draws (chain x draw) they held. Each block must lie within the sample's
// chains and draws and hold finite positions (a draw is a state on N).
std::int64_t replay_draws(const fs::path& file, const SampleSpec& spec, int dof, DrawSink& sink) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file.string() + ": " + std::strerror(errno));
  std::vector<Real> q, potential, acceptance, energy, step_size, inverse_metric;
  std::vector<std::int32_t> steps;
  std::vector<std::uint8_t> outcome, tree_depth;
  std::int64_t held = 0;
  const auto get = [&](auto& v, std::size_t n) {
    v.resize(n);
    in.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * sizeof(v[0])));
    if (!in) throw std::runtime_error(file.string() + " ends in the middle of a block of draws");
  };
  for (BlockHead h; in.read(reinterpret_cast<char*>(&h), sizeof h);) {
    if (h.chains < 0 || h.draws < 0 || h.chains > (std::int64_t(1) << 34) || h.draws > (std::int64_t(1) << 40) ||
        double(h.chains) * double(h.draws) * double(dof) > 1e10)
      throw std::runtime_error(file.string() + " is damaged (a block of " + std::to_string(h.chains) + " chains x " +
                               std::to_string(h.draws) + " draws)");
    if (h.first_chain < 0 || h.first_draw < 0 || h.first_chain + h.chains > spec.chains ||
        h.first_draw + h.draws > spec.draws)
      throw std::runtime_error(file.string() + " is damaged (a block of chains " + std::to_string(h.first_chain) +
                               " + " + std::to_string(h.chains) + ", draws " + std::to_string(h.first_draw) + " + " +
                               std::to_string(h.draws) + ", beyond the sample's)");
    if (h.metric_values != 0 && h.metric_values != inverse_metric_values(spec.metric, dof))
      throw std::runtime_error(file.string() + " is damaged (a block with " + std::to_string(h.metric_values) +
                               " values of the metric per chain, not " +
                               std::to_string(inverse_metric_values(spec.metric, dof)) + ")");
    const std::size_t n = std::size_t(h.chains * h.draws);
    get(q, n * std::size_t(dof)), get(potential, n), get(acceptance, n), get(energy, n), get(step_size, n);
    get(steps, n), get(outcome, n), get(tree_depth, n);
    get(inverse_metric, std::size_t(h.chains * h.metric_values));
    for (Real x : q)
      if (!std::isfinite(x)) throw std::runtime_error(file.string() + " is damaged (a draw's position is not finite)");
    DrawBlock b;
    b.first_chain = h.first_chain, b.chains = h.chains, b.first_draw = h.first_draw, b.draws = h.draws, b.dof = dof;
    b.q = q.data(), b.potential = potential.data(), b.acceptance = acceptance.data(), b.energy = energy.data();
    b.step_size = step_size.data(), b.steps = steps.data(), b.outcome = outcome.data();
    b.tree_depth = tree_depth.data();
    b.inverse_metric = h.metric_values > 0 ? inverse_metric.data() : nullptr;
    sink.write(b);
    held += h.chains * h.draws;
  }
  if (in.gcount() != 0) throw std::runtime_error(file.string() + " ends in the middle of a block of draws");
  return held;
}

// draws.nc from draws.bin side files (the sample's own, or its shards' in
// chain order), its diagnostics, then summary.json; both committed, summary.json last.
DrawsDiagnostics write_sample_outputs(OutputFolder& folder, const SampleConfig& c, const SampleResult& r,
                                      const std::vector<fs::path>& draws_bin) {
  const int dof = system_dof(c.run);
  {
    NetcdfDraws nc(folder.partial("draws.nc"), c, dof);
    std::int64_t held = 0;
    for (const auto& file : draws_bin) held += replay_draws(file, c.sample, dof, nc);
    if (held != c.sample.chains * c.sample.draws)
      throw std::runtime_error("the draws files hold " + std::to_string(held) + " draws, not the " +
                               std::to_string(c.sample.chains) + " chains x " + std::to_string(c.sample.draws) +
                               " of the config: a draws.bin is damaged");
    nc.close();
  }
  const DrawsDiagnostics diagnostics = diagnose_draws_file(folder.partial("draws.nc"));
  write_sample_summary(folder.partial("summary.json"), c, r, diagnostics);
  folder.commit("draws.nc");
  folder.commit("summary.json");
  return diagnostics;
}

}  // namespace

struct SampleFiles::Files {
  Files(const OutputFolder& folder, const nlohmann::json* records)
      : verified(records != nullptr ? verify_checkpoint_files(folder, *records) : VerifiedFiles{}),
        draws(folder.partial("draws.bin"), records != nullptr ? &verified : nullptr, "draws.bin") {}
  VerifiedFiles verified;
  AppendFile draws;
  std::string block;
};

SampleFiles::SampleFiles(OutputFolder& folder, const SampleConfig& c, const nlohmann::json* records)
    : folder_(folder), c_(c), files_(std::make_unique<Files>(folder, records)) {}

SampleFiles::~SampleFiles() = default;

void SampleFiles::write(const DrawBlock& b) {
  std::string& out = files_->block;
  out.clear();
  const std::int64_t metric_values =
      b.inverse_metric != nullptr ? inverse_metric_values(c_.sample.metric, b.dof) : 0;
  const BlockHead h{b.first_chain, b.chains, b.first_draw, b.draws, metric_values};
  const std::size_t n = std::size_t(b.chains * b.draws);
  put(out, &h, 1);
  put(out, b.q, n * std::size_t(b.dof)), put(out, b.potential, n), put(out, b.acceptance, n);
  put(out, b.energy, n), put(out, b.step_size, n), put(out, b.steps, n), put(out, b.outcome, n);
  put(out, b.tree_depth, n);
  if (metric_values > 0) put(out, b.inverse_metric, std::size_t(b.chains * metric_values));
  files_->draws.append(out);
}

nlohmann::json SampleFiles::file_records() { return {{"draws.bin", files_->draws.record()}}; }

DrawsDiagnostics SampleFiles::finish(const SampleResult& r) {
  AppendFile& draws = files_->draws;
  draws.close();
  const DrawsDiagnostics d = write_sample_outputs(folder_, c_, r, {draws.file()});
  std::error_code ec;
  fs::remove(draws.file(), ec);
  return d;
}

void SampleFiles::finish_shard(const SampleResult& r, nlohmann::json header) {
  header["files"] = file_records();
  files_->draws.close();
  BlobWriter w;
  save_sample_tally(w, r);
  write_shard_file(folder_, header, w.bytes());
  folder_.commit("draws.bin");
  folder_.commit("shard.tether");
}

void merge_sample_shard_folders(OutputFolder& folder, const std::vector<ShardFolder>& parts) {
  const nlohmann::json& first = parts.front().header;
  SampleConfig c = parse_sample_config(first["config"].dump(), "the shards' config");
  c.run.backend = first.value("backend", std::string());
  SampleResult r;
  std::vector<fs::path> draws_bin;
  for (const auto& p : parts) {
    try {
      SampleResult shard;
      BlobReader b(p.tally);
      load_sample_tally(b, shard);
      b.expect_end();
      r.merge(shard);
    } catch (const std::runtime_error&) {
      throw ConfigError((p.dir / "shard.tether").string(), "is damaged: its counts are cut short");
    }
    r.wall_seconds = std::max(r.wall_seconds, p.header.value("wall_seconds", 0.0));
    draws_bin.push_back(p.file("draws.bin"));
  }
  r.system = c.run.system_name;
  r.method = describe_method(c.run);
  r.backend = c.run.backend;
  r.chains = c.sample.chains;
  r.draws = c.sample.draws;
  r.warmup = c.sample.warmup;
  r.thin = c.sample.thin;
  r.set_mean_acceptance(r.chains);
  write_sample_outputs(folder, c, r, draws_bin);
}

}  // namespace tether

// The files of `tether sample`: draws.bin as the draws come (what a
// checkpoint counts and a shard leaves), draws.nc made from it at the end,
// summary.json; and `tether merge` of sample shards.
#include <algorithm>
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
// draws (int64 each), then q, potential, acceptance, energy, step size
// (doubles), steps (int32) and outcomes (bytes), each in the block's order.
struct BlockHead {
  std::int64_t first_chain = 0, chains = 0, first_draw = 0, draws = 0;
};

template <class T>
void put(std::ofstream& out, const T* data, std::size_t n) {
  out.write(reinterpret_cast<const char*>(data), std::streamsize(n * sizeof(T)));
}

// Hands every record of draws.bin, in file order, to `sink`; the number of
// draws (chain x draw) they held.
std::int64_t replay_draws(const fs::path& file, int dof, DrawSink& sink) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file.string() + ": " + std::strerror(errno));
  std::vector<Real> q, potential, acceptance, energy, step_size;
  std::vector<std::int32_t> steps;
  std::vector<std::uint8_t> outcome;
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
    const std::size_t n = std::size_t(h.chains * h.draws);
    get(q, n * std::size_t(dof)), get(potential, n), get(acceptance, n), get(energy, n), get(step_size, n);
    get(steps, n), get(outcome, n);
    DrawBlock b;
    b.first_chain = h.first_chain, b.chains = h.chains, b.first_draw = h.first_draw, b.draws = h.draws, b.dof = dof;
    b.q = q.data(), b.potential = potential.data(), b.acceptance = acceptance.data(), b.energy = energy.data();
    b.step_size = step_size.data(), b.steps = steps.data(), b.outcome = outcome.data();
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
    for (const auto& file : draws_bin) held += replay_draws(file, dof, nc);
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
  std::ofstream draws;
  fs::path file;
};

SampleFiles::SampleFiles(OutputFolder& folder, const SampleConfig& c, const nlohmann::json* resume)
    : folder_(folder), c_(c), files_(std::make_unique<Files>()) {
  Files& f = *files_;
  f.file = folder.partial("draws.bin");
  if (resume != nullptr)
    reopen_at(f.draws, f.file, resume->value("draws.bin", std::uintmax_t(0)));
  else
    f.draws.open(f.file, std::ios::binary | std::ios::trunc);
  check_stream(f.draws, f.file);
}

SampleFiles::~SampleFiles() = default;

void SampleFiles::write(const DrawBlock& b) {
  std::ofstream& out = files_->draws;
  const BlockHead h{b.first_chain, b.chains, b.first_draw, b.draws};
  const std::size_t n = std::size_t(b.chains * b.draws);
  put(out, &h, 1);
  put(out, b.q, n * std::size_t(b.dof)), put(out, b.potential, n), put(out, b.acceptance, n);
  put(out, b.energy, n), put(out, b.step_size, n), put(out, b.steps, n), put(out, b.outcome, n);
  check_stream(out, files_->file);
}

nlohmann::json SampleFiles::checkpoint_sizes() {
  Files& f = *files_;
  f.draws.flush();
  check_stream(f.draws, f.file);
  const auto bytes = std::uintmax_t(f.draws.tellp());
  sync_file(f.file);
  return {{"draws.bin", bytes}};
}

DrawsDiagnostics SampleFiles::finish(const SampleResult& r) {
  Files& f = *files_;
  f.draws.close();
  check_stream(f.draws, f.file);
  const DrawsDiagnostics d = write_sample_outputs(folder_, c_, r, {f.file});
  std::error_code ec;
  fs::remove(f.file, ec);
  return d;
}

void SampleFiles::finish_shard(const SampleResult& r, const nlohmann::json& header) {
  Files& f = *files_;
  f.draws.close();
  check_stream(f.draws, f.file);
  const fs::path tally = folder_.partial("shard.tether");
  {
    std::ofstream out(tally, std::ios::binary);
    check_stream(out, tally);
    BlobWriter w;
    save_sample_tally(w, r);
    out << header.dump() << '\n' << w.bytes();
    out.close();
    check_stream(out, tally);
  }
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
    draws_bin.push_back(p.dir / "draws.bin");
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

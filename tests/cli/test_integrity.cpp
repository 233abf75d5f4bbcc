// What tether reads back is verified, what it writes harms nothing that is
// not its own, and a statistic with nothing to say says so: the `tether`
// command met by a hostile user (bit rot, edited files, links, full disks).
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include <cmath>
#include <map>
#include <set>

#include "cli/cli_fixture.hpp"
#include "io/checksum.hpp"

namespace tether::test {
namespace {

// Flips one bit of `file` at byte `offset`.
void flip_bit(const fs::path& file, std::uintmax_t offset, int bit = 2) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f) << file;
  f.seekg(std::streamoff(offset));
  char c = 0;
  f.get(c);
  f.seekp(std::streamoff(offset));
  f.put(char(c ^ (1 << bit)));
}

// Every file under `dir` and its bytes, but the lock (its content is its
// holder's pid) and a checkpoint a killed run was writing when it died (torn,
// cleared by whatever command meets it next).
std::map<std::string, std::string> contents(const fs::path& dir) {
  std::map<std::string, std::string> m;
  if (!fs::exists(dir)) return m;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != ".tether.lock" &&
        e.path().filename() != "checkpoint.tether.partial")
      m[fs::relative(e.path(), dir).string()] = read_file(e.path());
  return m;
}

// The names of the files whose bytes differ between two contents() (or that only one has).
std::set<std::string> changed(const std::map<std::string, std::string>& a, const std::map<std::string, std::string>& b) {
  std::set<std::string> names;
  for (const auto& [name, bytes] : a)
    if (!b.count(name) || b.at(name) != bytes) names.insert(name);
  for (const auto& [name, bytes] : b)
    if (!a.count(name)) names.insert(name);
  return names;
}

// Byte offsets spread over a file: its first line, its middle, its last bytes.
std::vector<std::uintmax_t> offsets_in(const fs::path& file) {
  const std::uintmax_t n = fs::file_size(file);
  return {5, n / 3, n / 2, n - 20, n - 2};
}

// ---------------------------------------------------------------- checkpoints

// A flipped bit anywhere in a checkpoint, or in a file it goes on from, is
// refused by name (exit 1), never resumed, and the folder is left as it was.
TEST_F(CliTest, ADamagedCheckpointIsRefusedNotResumed) {
  const fs::path cfg = write("config.json", checkpointed_config()), out = dir_ / "out";
  stop_at_checkpoint(dir_, "run", cfg, out, "KILL");
  if (fs::exists(out / "summary.json")) GTEST_SKIP() << "the run finished before the signal: a faster machine";
  ASSERT_TRUE(fs::exists(out / "checkpoint.tether"));
  struct Damage {
    std::string file;
    std::uintmax_t offset;
  };
  std::vector<Damage> damages;
  for (std::uintmax_t at : offsets_in(out / "checkpoint.tether")) damages.push_back({"checkpoint.tether", at});
  // final.csv.partial within what the checkpoint counted (its header, a row).
  for (std::uintmax_t at : {std::uintmax_t(3), std::uintmax_t(300)}) damages.push_back({"final.csv.partial", at});
  damages.push_back({"timeseries.csv.partial", 40});
  for (const Damage& d : damages) {
    const std::string what = d.file + " at byte " + std::to_string(d.offset);
    const fs::path copy = dir_ / "copy";
    fs::remove_all(copy);
    fs::copy(out, copy, fs::copy_options::recursive);
    flip_bit(copy / d.file, d.offset);
    const auto before = contents(copy);
    const Cli r = run(cfg, copy, "--resume");
    EXPECT_EQ(r.code, 1) << what << ": " << r.err;
    const std::string line = one_error_line(r);
    EXPECT_NE(line.find((copy / d.file).string() + " is damaged"), std::string::npos) << what << ": " << line;
    EXPECT_NE(line.find("run afresh, without --resume"), std::string::npos) << line;
    EXPECT_EQ(changed(contents(copy), before), std::set<std::string>{}) << what << ": the folder changed";
  }
  // The undamaged checkpoint still resumes.
  EXPECT_EQ(run(cfg, out, "--resume").code, 0);
  EXPECT_TRUE(fs::exists(out / "summary.json"));
}

// A checkpoint of the format before checksums (no seal) is another version's.
TEST_F(CliTest, ACheckpointOfAnotherVersionIsSaidToBeOne) {
  const fs::path cfg = write("config.json", checkpointed_config()), out = dir_ / "out";
  stop_at_checkpoint(dir_, "run", cfg, out, "KILL");
  if (fs::exists(out / "summary.json")) GTEST_SKIP() << "the run finished before the signal: a faster machine";
  std::string bytes = read_file(out / "checkpoint.tether");
  ASSERT_TRUE(unseal(bytes));
  const std::size_t line = bytes.find('\n');
  json header = json::parse(bytes.substr(0, line));
  header["format"] = "tether checkpoint 1";
  write("out/checkpoint.tether", header.dump() + bytes.substr(line));
  const Cli r = run(cfg, out, "--resume");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(one_error_line(r).find("is not a checkpoint of this version of tether"), std::string::npos) << r.err;
}

// A checkpoint forged to record a file outside the folder (its seal made
// anew: a CRC is no signature) is refused; the file it names is never
// truncated or read.
TEST_F(CliTest, AForgedCheckpointTouchesNoFileOutsideTheFolder) {
  const fs::path cfg = write("config.json", checkpointed_config()), out = dir_ / "out";
  stop_at_checkpoint(dir_, "run", cfg, out, "KILL");
  if (fs::exists(out / "summary.json")) GTEST_SKIP() << "the run finished before the signal: a faster machine";
  const fs::path victim = write("victim.partial", std::string("a user's file\n"));
  std::string bytes = read_file(out / "checkpoint.tether");
  ASSERT_TRUE(unseal(bytes));
  const std::size_t line = bytes.find('\n');
  json header = json::parse(bytes.substr(0, line));
  header["files"]["../victim"] = file_record(0, 0);
  write("out/checkpoint.tether", sealed(header.dump() + bytes.substr(line)));
  const Cli r = run(cfg, out, "--resume");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(one_error_line(r).find("records a file \"../victim\" that tether does not write"), std::string::npos)
      << r.err;
  EXPECT_EQ(read_file(victim), "a user's file\n");
}

// A sample's checkpoint and its draws.bin likewise.
TEST_F(CliTest, ADamagedSampleCheckpointIsRefusedNotResumed) {
  const fs::path cfg = write("sample.json", checkpointed_sample_config()), out = dir_ / "out";
  stop_at_checkpoint(dir_, "sample", cfg, out, "KILL");
  if (fs::exists(out / "summary.json")) GTEST_SKIP() << "the sample finished before the signal: a faster machine";
  ASSERT_TRUE(fs::exists(out / "checkpoint.tether"));
  const std::uintmax_t counted = json::parse(lines(read_file(out / "checkpoint.tether"))[0])["files"]["draws.bin"]["bytes"];
  ASSERT_GT(counted, 100u);
  for (const auto& [file, at] : {std::pair<std::string, std::uintmax_t>{"checkpoint.tether", 10},
                                 {"checkpoint.tether", fs::file_size(out / "checkpoint.tether") / 2},
                                 {"draws.bin.partial", 40},
                                 {"draws.bin.partial", counted - 1}}) {
    const fs::path copy = dir_ / "copy";
    fs::remove_all(copy);
    fs::copy(out, copy, fs::copy_options::recursive);
    flip_bit(copy / file, at);
    const auto before = contents(copy);
    const Cli r = tether("sample " + quote(cfg) + " --out " + quote(copy) + " --quiet --resume");
    EXPECT_EQ(r.code, 1) << file << " at " << at << ": " << r.err;
    EXPECT_NE(one_error_line(r).find((copy / file).string() + " is damaged"), std::string::npos) << r.err;
    EXPECT_EQ(changed(contents(copy), before), std::set<std::string>{}) << file << " at " << at;
  }
}

// ---------------------------------------------------------------- merge

// Runs the `count` shards of `cfg` (a run or a sample) into dir/shard_k.
std::vector<fs::path> make_shards(const CliTest& t, const std::function<Cli(const std::string&)>& tether,
                                  const std::string& command, const fs::path& cfg, const fs::path& dir, int count) {
  std::vector<fs::path> dirs;
  for (int k = 0; k < count; ++k) {
    dirs.push_back(dir / ("shard_" + std::to_string(k)));
    const Cli r = tether(command + " " + quote(cfg) + " --out " + quote(dirs.back()) + " --quiet --shard " +
                         std::to_string(k) + "/" + std::to_string(count));
    EXPECT_EQ(r.code, 0) << r.err;
  }
  (void)t;
  return dirs;
}

std::string merge_args(const std::vector<fs::path>& dirs, const fs::path& out) {
  std::string args = "merge";
  for (const auto& d : dirs) args.append(" ").append(quote(d));
  return args.append(" --out ").append(quote(out)).append(" --quiet");
}

// Replaces the first occurrence of `from` after byte `after` in `file`.
void edit(const fs::path& file, std::size_t after, const std::string& from, const std::string& to) {
  std::string s = read_file(file);
  const std::size_t at = s.find(from, after);
  ASSERT_NE(at, std::string::npos) << from << " in " << file;
  s.replace(at, from.size(), to);
  std::ofstream(file, std::ios::binary) << s;
}

// Every shard file `tether merge` reads is verified: a shard whose final.csv
// holds a NaN, a renamed (duplicate) id or an edited status, whose
// trajectories.bin or shard.tether has one flipped bit, is refused by the
// file's name (exit 2) and --out is not created.
TEST_F(CliTest, MergeRefusesDamagedShardFiles) {
  const auto cli = [this](const std::string& args) { return tether(args); };
  const fs::path cfg = write("config.json", sharded_config());
  const std::vector<fs::path> shards = make_shards(*this, cli, "run", cfg, dir_, 3);
  ASSERT_EQ(tether(merge_args(shards, dir_ / "intact")).code, 0);
  const fs::path final1 = shards[1] / "final.csv";
  const std::string row = lines(read_file(final1))[3];  // trajectory 4098's row
  const std::string id = split(row, ',')[0], number = split(row, ',')[2];
  struct Case {
    std::string name;
    fs::path file;
    std::function<void()> damage;
  };
  const std::vector<Case> cases = {
      {"a nan in final.csv", final1, [&] { edit(final1, 100, "," + number + ",", ",nan,"); }},
      {"a duplicate id", final1, [&] { edit(final1, 100, "\n" + id + ",", "\n" + std::to_string(std::stoll(id) - 1) + ","); }},
      {"an edited status", final1, [&] { edit(final1, 100, ",ok\n", ",non_finite\n"); }},
      {"a flipped bit in trajectories.bin", shards[2] / "trajectories.bin",
       [&] { flip_bit(shards[2] / "trajectories.bin", 50); }},
      {"a shard file cut short", shards[0] / "final.csv",
       [&] { fs::resize_file(shards[0] / "final.csv", fs::file_size(shards[0] / "final.csv") - 10); }},
  };
  std::vector<Case> all = cases;
  for (std::uintmax_t at : offsets_in(shards[0] / "shard.tether"))
    all.push_back({"a flipped bit in shard.tether at " + std::to_string(at), shards[0] / "shard.tether",
                   [&, at] { flip_bit(shards[0] / "shard.tether", at); }});
  for (const Case& c : all) {
    const std::string kept = read_file(c.file);
    c.damage();
    const Cli r = tether(merge_args(shards, dir_ / "merged"));
    EXPECT_EQ(r.code, 2) << c.name << ": " << r.err;
    const std::string line = one_error_line(r);
    EXPECT_NE(line.find(c.file.string() + ": is damaged"), std::string::npos) << c.name << ": " << line;
    EXPECT_FALSE(fs::exists(dir_ / "merged")) << c.name << ": --out was touched";
    std::ofstream(c.file, std::ios::binary) << kept;
  }
  EXPECT_EQ(tether(merge_args(shards, dir_ / "merged")).code, 0) << "the shards, restored, merge";
  EXPECT_EQ(read_file(dir_ / "merged" / "final.csv"), read_file(dir_ / "intact" / "final.csv"));
}

// Where a checksum cannot vouch for a row (a shard written by a faulty build,
// its checksums made over the faulty bytes), the merge still checks each row
// of final.csv: the ids in order, whole numbers, finite ones where the
// status is ok, a status by name.
TEST_F(CliTest, MergeChecksTheRowsAChecksumCannotVouchFor) {
  const auto cli = [this](const std::string& args) { return tether(args); };
  json j = base_config();
  j["ensemble"]["size"] = 4096 + 10;
  const fs::path cfg = write("config.json", j);
  const std::vector<fs::path> shards = make_shards(*this, cli, "run", cfg, dir_, 2);
  const fs::path final1 = shards[1] / "final.csv";
  const std::string original = read_file(final1), tally = read_file(shards[1] / "shard.tether");
  // Rewrites final.csv and re-records it in shard.tether, sealed anew, as a faulty writer would.
  const auto forge = [&](const std::string& text) {
    std::ofstream(final1, std::ios::binary) << text;
    std::string bytes = tally;
    ASSERT_TRUE(unseal(bytes));
    const std::size_t line = bytes.find('\n');
    json header = json::parse(bytes.substr(0, line));
    std::uint32_t crc = 0;
    ASSERT_TRUE(file_crc32(final1, text.size(), crc));
    header["files"]["final.csv"] = file_record(text.size(), crc);
    std::ofstream(shards[1] / "shard.tether", std::ios::binary) << sealed(header.dump() + bytes.substr(line));
  };
  const std::vector<std::string> rows = lines(original);
  const auto with_row = [&](std::size_t k, const std::string& row) {
    std::string text;
    for (std::size_t i = 0; i < rows.size(); ++i) text += (i == k ? row : rows[i]) + "\n";
    return text;
  };
  std::vector<std::string> fields = split(rows[2], ',');
  ASSERT_EQ(fields.back(), "ok");
  const auto row_with = [&](std::size_t field, const std::string& value) {
    std::vector<std::string> f = fields;
    f[field] = value;
    std::string r = f[0];
    for (std::size_t i = 1; i < f.size(); ++i) r += "," + f[i];
    return r;
  };
  for (const auto& [text, expect] :
       {std::pair<std::string, std::string>{with_row(2, row_with(3, "nan")), "field 3 is nan in a trajectory whose status is ok"},
        {with_row(2, row_with(0, "4096")), "its id is \"4096\""},
        {with_row(2, row_with(1, "1.0x")), "field 1 \"1.0x\" is not a number"},
        {with_row(2, row_with(fields.size() - 1, "fine")), "its status \"fine\" is none of tether's"},
        {with_row(2, rows[2] + ",0"), "fields, not"},
        {original.substr(0, original.size() - rows.back().size() - 1), "holds 9 rows, not the 10 of its trajectories"}}) {
    forge(text);
    const Cli r = tether(merge_args(shards, dir_ / "merged"));
    EXPECT_EQ(r.code, 2) << expect << ": " << r.err;
    const std::string line = one_error_line(r);
    EXPECT_NE(line.find(final1.string()), std::string::npos) << line;
    EXPECT_NE(line.find(expect), std::string::npos) << line;
    EXPECT_FALSE(fs::exists(dir_ / "merged"));
  }
  forge(original);  // the forger's own checksums: a consistent shard merges
  EXPECT_EQ(tether(merge_args(shards, dir_ / "merged")).code, 0);
}

// A sample shard's draws.bin and shard.tether are verified too.
TEST_F(CliTest, MergeRefusesDamagedSampleShards) {
  const auto cli = [this](const std::string& args) { return tether(args); };
  const fs::path cfg = write("sample.json", sharded_sample_config());
  const std::vector<fs::path> shards = make_shards(*this, cli, "sample", cfg, dir_, 2);
  const fs::path draws = shards[1] / "draws.bin";
  const std::uintmax_t q_at = 32 + 8;  // the second q value of the first block
  for (const auto& [file, damage] :
       {std::pair<fs::path, std::function<void()>>{draws, [&] {
          std::fstream f(draws, std::ios::in | std::ios::out | std::ios::binary);
          const double nan = std::nan("");
          f.seekp(std::streamoff(q_at));
          f.write(reinterpret_cast<const char*>(&nan), sizeof nan);
        }},
        {draws, [&] { flip_bit(draws, fs::file_size(draws) - 1, 0); }},
        {shards[0] / "shard.tether", [&] { flip_bit(shards[0] / "shard.tether", fs::file_size(shards[0] / "shard.tether") - 30); }}}) {
    const std::string kept = read_file(file);
    damage();
    const Cli r = tether(merge_args(shards, dir_ / "merged"));
    EXPECT_EQ(r.code, 2) << file << ": " << r.err;
    EXPECT_NE(one_error_line(r).find(file.string() + ": is damaged"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "merged"));
    std::ofstream(file, std::ios::binary) << kept;
  }
  EXPECT_EQ(tether(merge_args(shards, dir_ / "merged")).code, 0);
}

// ---------------------------------------------------------------- the output folder

// A symbolic link where the lock goes is refused, never written through:
// the file it points to is untouched, for every command that writes a folder.
TEST_F(CliTest, ALinkInPlaceOfTheLockIsRefused) {
  const fs::path victim = write("victim.txt", std::string("a user's file\n"));
  const fs::path run_cfg = write("run.json", base_config()), sample_cfg = write("sample.json", sample_config()),
                 shoot_cfg = write("shoot.json", shoot_config());
  const auto cli = [this](const std::string& args) { return tether(args); };
  const std::vector<fs::path> shards = make_shards(*this, cli, "sample", write("s.json", sharded_sample_config()), dir_, 2);
  const fs::path out = dir_ / "out";
  fs::create_directories(out);
  fs::create_symlink(victim, out / ".tether.lock");
  for (const std::string& args : {"run " + quote(run_cfg), "sample " + quote(sample_cfg), "shoot " + quote(shoot_cfg)}) {
    const Cli r = tether(args + " --out " + quote(out) + " --quiet");
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_NE(one_error_line(r).find("--out: " + (out / ".tether.lock").string() + " is a symbolic link"),
              std::string::npos)
        << r.err;
  }
  const Cli m = tether(merge_args(shards, out));
  EXPECT_EQ(m.code, 2) << m.err;
  EXPECT_EQ(read_file(victim), "a user's file\n");
  EXPECT_TRUE(fs::is_symlink(out / ".tether.lock"));
  EXPECT_EQ(std::distance(fs::directory_iterator(out), fs::directory_iterator()), 1) << "only the link is there";
}

// Exit 2 leaves --out as it was, for every command: no folder where there was
// none (nor its parents), no lock, no file changed in an earlier run's folder.
TEST_F(CliTest, ARefusedCommandLeavesTheFolderAsItWas) {
  json unprojectable = base_config();
  unprojectable["ensemble"] = {{"size", 1},
                               {"initial", {{"states", {{{"q", {0, 0, 0}}, {"p", {0, 0, 0}}}}}, {"project", true}}}};
  json sample_unprojectable = sample_config();
  sample_unprojectable["sample"]["chains"] = 1;
  sample_unprojectable["sample"]["initial"] = unprojectable["ensemble"]["initial"];
  json bad_shoot = shoot_config();
  bad_shoot["shoot"]["time"] = -1;
  const auto cli = [this](const std::string& args) { return tether(args); };
  const std::vector<fs::path> shards = make_shards(*this, cli, "run", write("sharded.json", sharded_config()), dir_, 3);
  fs::create_directories(dir_ / "empty");
  const std::vector<std::string> commands = {
      "run " + quote(write("run.json", unprojectable)),
      "sample " + quote(write("sample.json", sample_unprojectable)),
      "shoot " + quote(write("shoot.json", bad_shoot)),
      "merge " + quote(shards[0]) + " " + quote(shards[1]),
      "merge " + quote(shards[0]) + " " + quote(shards[1]) + " " + quote(shards[1]),
      "merge " + quote(shards[0]) + " " + quote(shards[1]) + " " + quote(dir_ / "empty"),
      "merge " + quote(shards[0]) + " " + quote(shards[1]) + " " + quote(dir_ / "nowhere")};
  // An earlier run's folder, its lock given up (a killed run's lock stays).
  const fs::path earlier = dir_ / "earlier";
  ASSERT_EQ(run(write("base.json", base_config()), earlier).code, 0);
  fs::remove(earlier / ".tether.lock");
  const auto before = contents(earlier);
  for (const std::string& command : commands) {
    const Cli fresh = tether(command + " --out " + quote(dir_ / "new" / "nested") + " --quiet");
    EXPECT_EQ(fresh.code, 2) << command << ": " << fresh.err;
    one_error_line(fresh);
    EXPECT_FALSE(fs::exists(dir_ / "new")) << command;
    const Cli old = tether(command + " --out " + quote(earlier) + " --quiet");
    EXPECT_EQ(old.code, 2) << command << ": " << old.err;
    EXPECT_EQ(changed(contents(earlier), before), std::set<std::string>{}) << command;
    EXPECT_FALSE(fs::exists(earlier / ".tether.lock")) << command;
  }
  // --out "" names no folder.
  const Cli empty = tether("run " + quote(dir_ / "base.json") + " --out ''");
  EXPECT_EQ(empty.code, 2);
  EXPECT_NE(one_error_line(empty).find("--out: is empty"), std::string::npos) << empty.err;
}

// ---------------------------------------------------------------- states that cannot be projected

// An explicit state that cannot be projected onto T*N (q = 0 on the sphere:
// the constraint's gradient vanishes) is refused by every command and by
// validate, at its path, rather than kept as a trajectory failed at step 0.
TEST_F(CliTest, AStateThatCannotBeProjectedIsRefusedEverywhere) {
  const json states = {{"states", {{{"q", {0, 0, 1}}, {"p", {0, 0, 0}}}, {{"q", {0, 0, 0}}, {"p", {1, 0, 0}}}}},
                       {"project", true}};
  json run_cfg = base_config();
  run_cfg["ensemble"] = {{"size", 2}, {"initial", states}};
  json sample_cfg = sample_config();
  sample_cfg["sample"]["chains"] = 2;
  sample_cfg["sample"]["initial"] = states;
  const fs::path r = write("run.json", run_cfg), s = write("sample.json", sample_cfg);
  for (const auto& [args, path] : {std::pair<std::string, std::string>{"run " + quote(r) + " --out " + quote(dir_ / "o"),
                                                                       "ensemble.initial.states[1]"},
                                   {"sample " + quote(s) + " --out " + quote(dir_ / "o"), "sample.initial.states[1]"},
                                   {"validate " + quote(r), "ensemble.initial.states[1]"},
                                   {"validate " + quote(s), "sample.initial.states[1]"}}) {
    const Cli c = tether(args);
    EXPECT_EQ(c.code, 2) << args << ": " << c.err;
    EXPECT_NE(one_error_line(c).find(path + ": cannot be projected onto the constraint manifold"), std::string::npos)
        << c.err;
    EXPECT_FALSE(fs::exists(dir_ / "o"));
  }
  // The projectable state alone runs, projected.
  run_cfg["ensemble"]["size"] = 1;
  run_cfg["ensemble"]["initial"]["states"].erase(1);
  run_cfg["ensemble"]["initial"]["states"][0]["q"] = {0, 0, 1.5};
  ASSERT_EQ(run(write("one.json", run_cfg), dir_ / "one").code, 0);
  const json summary = json::parse(read_file(dir_ / "one" / "summary.json"));
  EXPECT_EQ(summary["initial_projection"]["projected_states"], 1);
  EXPECT_EQ(summary["failed_trajectories"], 0);
}

// ---------------------------------------------------------------- statistics with nothing to say

// One chain has no R-hat: summary.json says null and the console "none",
// never 0. A run of no steps has no Newton mean.
TEST_F(CliTest, AStatisticWithNoDataIsNull) {
  json one = sample_config();
  one["sample"]["chains"] = 1;
  const Cli s = tether("sample " + quote(write("one.json", one)) + " --out " + quote(dir_ / "one"));
  ASSERT_EQ(s.code, 0) << s.err;
  const json d = json::parse(read_file(dir_ / "one" / "summary.json"))["diagnostics"];
  EXPECT_TRUE(d["max_rhat"].is_null()) << d["max_rhat"];
  for (const auto& q : d["q"]) EXPECT_TRUE(q["rhat"].is_null());
  EXPECT_TRUE(d["min_ess_bulk"].is_number()) << "one chain has an ESS";
  EXPECT_NE(s.out.find("max R-hat none (fewer than 2 chains or 4 draws)"), std::string::npos) << s.out;
  EXPECT_EQ(s.out.find("R-hat 0"), std::string::npos) << s.out;

  json two = one;
  two["sample"]["chains"] = 2;
  ASSERT_EQ(tether("sample " + quote(write("two.json", two)) + " --out " + quote(dir_ / "two") + " --quiet").code, 0);
  EXPECT_TRUE(json::parse(read_file(dir_ / "two" / "summary.json"))["diagnostics"]["max_rhat"].is_number())
      << "two chains have an R-hat: the null is for no data only";

  json none = base_config();
  none["method"]["steps"] = 0;
  none["output"]["every"] = 1;
  const Cli r = tether("run " + quote(write("none.json", none)) + " --out " + quote(dir_ / "none"));
  ASSERT_EQ(r.code, 0) << r.err;
  const json summary = json::parse(read_file(dir_ / "none" / "summary.json"));
  EXPECT_TRUE(summary["newton_iterations"]["mean"].is_null()) << summary["newton_iterations"];
  EXPECT_NE(r.out.find("Newton iterations mean none (no step)"), std::string::npos) << r.out;
}

// ---------------------------------------------------------------- messages and values

// Each refusal names the key that decides: tracked snapshots (not
// output.every) for a run whose snapshots cannot fit; sample.chains for
// too many chains; the temperature whose kT M overflows; a target box whose
// extent is not a finite double.
TEST_F(CliTest, RefusalsNameTheKeyThatDecides) {
  json tracked = base_config();
  tracked["method"]["steps"] = std::int64_t(1) << 40;
  tracked["output"] = {{"every", std::int64_t(1) << 40}, {"format", "netcdf"},
                       {"trajectories", {{"ids", {0, 1, 2, 3, 4}}, {"every", 1}}}};
  json chains = sample_config();
  chains["sample"]["chains"] = std::int64_t(1) << 34;
  json hot = sample_config();
  hot["sample"]["temperature"] = 1e308;
  json hot_run = base_config();
  hot_run["ensemble"]["initial"]["temperature"] = 1e307;
  json wide = shoot_config();
  wide["shoot"]["targets"] = {{"grid", {{"min", {-1e308, 0, 0}}, {"max", {1e308, 0, 0}}, {"count", {3, 1, 1}}}}};
  for (const auto& [args, expect] : {
           std::pair<std::string, std::string>{"run " + quote(write("t.json", tracked)), "output.trajectories: "},
           {"sample " + quote(write("c.json", chains)), "sample.chains: "},
           {"sample " + quote(write("h.json", hot)), "sample.temperature: is 1e+308"},
           {"run " + quote(write("hr.json", hot_run)), "ensemble.initial.temperature: is 1e+307"},
           {"shoot " + quote(write("w.json", wide)), "shoot.targets.grid.max[0]: is too far from min[0]"}}) {
    const Cli c = tether(args + " --out " + quote(dir_ / "o") + " --quiet");
    EXPECT_EQ(c.code, 2) << args << ": " << c.err;
    EXPECT_NE(one_error_line(c).find(expect), std::string::npos) << c.err;
    EXPECT_FALSE(fs::exists(dir_ / "o"));
  }
  // validate says the same of the values that cannot mean anything.
  EXPECT_EQ(tether("validate " + quote(dir_ / "h.json")).code, 2);
  EXPECT_EQ(tether("validate " + quote(dir_ / "w.json")).code, 2);
}

// ---------------------------------------------------------------- full disks

// A file system of `kib` KiB (tmpfs) at `dir`, for as long as this lives;
// where this machine allows no mount (not root, no tmpfs), mounted() is false.
class SmallDisk {
 public:
  SmallDisk(const fs::path& dir, std::uintmax_t kib) : dir_(dir) {
    fs::create_directories(dir_);
    const std::string cmd = "mount -t tmpfs -o size=" + std::to_string(kib) + "k tmpfs " + quote(dir_) + " 2>/dev/null";
    mounted_ = std::system(cmd.c_str()) == 0;
  }
  ~SmallDisk() {
    if (mounted_) (void)!std::system(("umount " + quote(dir_)).c_str());
  }
  bool mounted() const { return mounted_; }

 private:
  fs::path dir_;
  bool mounted_ = false;
};

// The up-front estimates are upper bounds of what a run, sample or shoot
// really takes at its peak (a side file and the file made from it side by side):
// on a disk of any size around that peak, each command is either refused
// before it starts (exit 2) or finishes (exit 0), never fails part-way.
TEST_F(CliTest, DiskEstimatesBoundThePeak) {
  if (!SmallDisk(dir_ / "probe", 1024).mounted()) GTEST_SKIP() << "this machine allows no tmpfs mount (run as root)";
  json sample = sample_config();
  sample["sample"]["chains"] = 300;  // chunks of 256 chains by 256 draws, two of them partly filled
  sample["sample"]["draws"] = 700;
  sample["sample"]["warmup"] = 0;
  sample["sample"]["thin"] = 1;
  json netcdf = base_config();
  netcdf["ensemble"]["size"] = 50000;
  netcdf["output"] = {{"every", 1}, {"format", "netcdf"}, {"trajectories", {{"ids", {0, 7, 49999}}, {"every", 1}}}};
  json csv = netcdf;
  csv["output"]["format"] = "csv";
  json shoot = shoot_config();
  shoot["shoot"]["targets"] = {{"grid", {{"min", {-0.5, -0.5, -0.1}}, {"max", {0.5, 0.5, 0.1}}, {"count", {20, 20, 5}}}}};
  shoot["output"] = {{"geodesics", {{"every", 1}}}};
  for (const auto& [command, config] : {std::pair<std::string, json>{"sample", sample}, {"run", netcdf}, {"run", csv},
                                        {"shoot", shoot}}) {
    const fs::path cfg = write("config.json", config);
    const std::string what = command + " " + config.dump().substr(0, 80);
    std::uintmax_t kept = 0;  // what the finished folder holds
    {
      const SmallDisk disk(dir_ / "disk", 256 * 1024);
      ASSERT_TRUE(disk.mounted());
      ASSERT_EQ(tether(command + " " + quote(cfg) + " --out " + quote(dir_ / "disk" / "o") + " --quiet").code, 0);
      for (const auto& e : fs::directory_iterator(dir_ / "disk" / "o")) kept += fs::file_size(e.path());
    }
    // The smallest disk the estimate lets the command start on, by bisection
    // (to 16 KiB): the command must finish there, and on every larger disk tried.
    const auto on_disk = [&](std::uintmax_t kib) {
      const SmallDisk disk(dir_ / "disk", kib);
      const Cli r = tether(command + " " + quote(cfg) + " --out " + quote(dir_ / "disk" / "o") + " --quiet");
      EXPECT_TRUE(r.code == 0 || r.code == 2) << what << " on " << kib << " KiB: exit " << r.code << ": " << r.err;
      if (r.code == 2) EXPECT_NE(r.err.find("free:"), std::string::npos) << r.err;
      return r.code;
    };
    std::uintmax_t refused = kept / 1024, started = 4 * kept / 1024 + 1024;
    ASSERT_EQ(on_disk(refused), 2) << what << ": what the finished folder holds alone cannot be enough";
    ASSERT_EQ(on_disk(started), 0) << what;
    while (started - refused > 16) {
      const std::uintmax_t mid = (refused + started) / 2;
      (on_disk(mid) == 2 ? refused : started) = mid;
    }
    EXPECT_LT(double(started), 3.0 * double(kept) / 1024) << what << ": an estimate far above the peak";
  }
}

// A disk that fills while draws.nc is written (the estimate passed, then
// something else took the space): one error line and exit 1, never a crash
// in the HDF5 library's clean-up, and no folder that looks finished.
TEST_F(CliTest, ADiskFullAtTheEndOfASampleEndsWithAMessage) {
  json j = sample_config();
  j["sample"]["chains"] = 100;
  j["sample"]["draws"] = 6000;
  j["sample"]["warmup"] = 0;
  j["sample"]["thin"] = 1;
  const fs::path cfg = write("sample.json", j), mount = dir_ / "disk", out = mount / "o";
  const double per_file = 100.0 * 6000 * 62;  // draws.bin and draws.nc each hold about this much
  const SmallDisk disk(mount, std::uintmax_t(2.6 * per_file / 1024));
  if (!disk.mounted()) GTEST_SKIP() << "this machine allows no tmpfs mount (run as root)";
  // Once the sample has started (its estimate passed), a filler leaves room
  // for draws.bin and half of draws.nc.
  const std::uintmax_t filler = std::uintmax_t((2.6 - 1.5) * per_file / (1 << 20)) - 1;
  const fs::path err = dir_ / "sample.stderr";
  const std::string cmd = "{ " + quote(TETHER_BINARY) + " sample " + quote(cfg) + " --out " + quote(out) +
                          " --quiet 2>" + quote(err) + " & pid=$!; for i in $(seq 500); do [ -e " +
                          quote(out / "draws.bin.partial") + " ] && break; sleep 0.01; done; dd if=/dev/zero of=" +
                          quote(mount / "filler") + " bs=1M count=" + std::to_string(filler) +
                          " 2>/dev/null; wait $pid; echo $?; }";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char status[16] = {};
  ASSERT_NE(std::fgets(status, sizeof status, p), nullptr);
  ::pclose(p);
  const Cli r{std::atoi(status), "", read_file(err)};
  EXPECT_EQ(r.code, 1) << "exit " << r.code << " (139: SIGSEGV): " << r.err;
  const std::string line = one_error_line(r);
  EXPECT_NE(line.find("draws.nc.partial"), std::string::npos) << line;
  EXPECT_FALSE(fs::exists(out / "draws.nc")) << "no file that looks finished";
  EXPECT_FALSE(fs::exists(out / "summary.json"));
}

}  // namespace
}  // namespace tether::test

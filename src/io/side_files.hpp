#pragma once
// What the writers of a run's or a sample's folder share beyond text: binary
// side files that a checkpoint counts and a resume goes on from, and the
// shard folders `tether merge` reads.
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/checksum.hpp"

namespace tether {

// The file's written bytes on disk (fsync on any descriptor of the file
// flushes them all): a checkpoint must not count bytes a crash could lose.
void sync_file(const std::filesystem::path& file);

class OutputFolder;

// The files a checkpoint goes on from, each one's first `bytes` verified
// against the CRC-32 the checkpoint recorded, by name.
struct VerifiedBytes {
  std::uintmax_t bytes = 0;
  std::uint32_t crc = 0;
};
using VerifiedFiles = std::map<std::string, VerifiedBytes>;
// Every file a checkpoint's "files" record names (name.partial in `folder`),
// verified before any is touched; std::runtime_error naming the one that is
// missing or damaged.
VerifiedFiles verify_checkpoint_files(const OutputFolder& folder, const nlohmann::json& records);

// A file a run or sample appends to as it goes, keeping the CRC-32 of what it
// wrote. Started afresh (resume null), or after the bytes a checkpoint
// recorded under `key` in `resume` (verify_checkpoint_files): what a stopped
// run wrote after them is dropped.
class AppendFile {
 public:
  AppendFile(const std::filesystem::path& file, const VerifiedFiles* resume, const std::string& key);
  void append(const char* data, std::size_t n);
  void append(const std::string& s) { append(s.data(), s.size()); }
  // Everything written so far on disk: its file_record, for a checkpoint or a shard.
  nlohmann::json record();
  void close();
  bool resumed() const { return resumed_; }
  const std::filesystem::path& file() const { return file_; }

 private:
  std::ofstream out_;
  std::filesystem::path file_;
  bool resumed_;
  Crc32 crc_;
};

// A finished shard's folder: shard.tether's header line (format, command,
// config, backend, shard, shards, ids, files, ...) and the bytes after it
// (its tally).
struct ShardFolder {
  std::filesystem::path dir;
  nlohmann::json header;
  std::string tally;
  // dir/name, a file the shard recorded in its header's "files" (ConfigError otherwise).
  std::filesystem::path file(const std::string& name) const;
  // The trajectory or chain ids [lo, hi) the shard ran.
  std::int64_t lo() const;
  std::int64_t hi() const;
};
// The K shard folders of one config, in shard order, every byte verified:
// ConfigError naming the folder that is not a finished shard, belongs to
// another run, is missing or given twice, or the file that is damaged (its
// CRC-32 not the one shard.tether recorded).
std::vector<ShardFolder> read_shard_folders(const std::vector<std::filesystem::path>& dirs);
// `header` (one line of JSON) and the shard's tally, sealed, as `folder`'s shard.tether.partial.
void write_shard_file(OutputFolder& folder, const nlohmann::json& header, const std::string& tally);
// What `tether merge` makes of them (read_shard_folders' result), by command.
void merge_run_shard_folders(OutputFolder& folder, const std::vector<ShardFolder>& parts);
void merge_sample_shard_folders(OutputFolder& folder, const std::vector<ShardFolder>& parts);

}  // namespace tether

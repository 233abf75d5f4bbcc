#pragma once
// What the writers of a run's or a sample's folder share beyond text: binary
// side files that a checkpoint counts and a resume goes on from, and the
// shard folders `tether merge` reads.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tether {

// Opens `file` to go on after its first `bytes` (a checkpoint's count),
// dropping what a stopped run wrote after them.
void reopen_at(std::ofstream& out, const std::filesystem::path& file, std::uintmax_t bytes);

// The file's written bytes on disk (fsync on any descriptor of the file
// flushes them all): a checkpoint must not count bytes a crash could lose.
void sync_file(const std::filesystem::path& file);

// A finished shard's folder: shard.tether's header line (format, command,
// config, backend, shard, shards, ...) and the bytes after it (its tally).
struct ShardFolder {
  std::filesystem::path dir;
  nlohmann::json header;
  std::string tally;
};
// The K shard folders of one config, in shard order; ConfigError naming the
// folder that is not a finished shard, belongs to another run, is missing
// or given twice.
std::vector<ShardFolder> read_shard_folders(const std::vector<std::filesystem::path>& dirs);
class OutputFolder;
// What `tether merge` makes of them (read_shard_folders' result), by command.
void merge_run_shard_folders(OutputFolder& folder, const std::vector<ShardFolder>& parts);
void merge_sample_shard_folders(OutputFolder& folder, const std::vector<ShardFolder>& parts);

}  // namespace tether

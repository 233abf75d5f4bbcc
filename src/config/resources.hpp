#pragma once
// What a run will hold in memory and write to disk, estimated before it
// starts, so that what cannot fit is refused with the figure instead of
// dying part-way with std::bad_alloc (or a full disk) after the previous
// results were given up.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "tether/engine/config_error.hpp"

namespace tether {

// Bytes of memory this process may still take: /proc/meminfo's
// MemAvailable, lowered by a cgroup (container, batch job) limit when one is
// set. 0 when unknown (then nothing is refused for memory).
inline double available_memory_bytes() {
  double avail = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    double kib = 0;
    meminfo >> kib;
    if (key == "MemAvailable:") {
      avail = kib * 1024;
      break;
    }
    meminfo.ignore(256, '\n');
  }
  if (avail == 0) {
    const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) avail = double(pages) * double(page);
  }
  double limit = 0, used = 0;
  std::ifstream max_file("/sys/fs/cgroup/memory.max"), current_file("/sys/fs/cgroup/memory.current");
  if (max_file >> limit && current_file >> used && limit > used && (avail == 0 || limit - used < avail))
    avail = limit - used;  // "max" (no limit) fails to parse as a number and is skipped
  return avail;
}

inline std::string mebibytes(double bytes) {
  char s[32];
  std::snprintf(s, sizeof s, bytes >= double(1 << 30) * 10 ? "%.0f GiB" : "%.0f MiB",
                bytes >= double(1 << 30) * 10 ? bytes / double(1 << 30) : bytes / double(1 << 20));
  return s;
}

// Refuses at `path` what would hold `bytes` of memory when this machine has
// less available. `what` says what the memory is for, `remedy` what to change.
inline void refuse_beyond_memory(const std::string& path, double bytes, const std::string& what,
                                 const std::string& remedy) {
  const double avail = available_memory_bytes();
  if (avail > 0 && bytes > avail)
    throw ConfigError(path, what + " need about " + mebibytes(bytes) + " of memory; this machine has " +
                                mebibytes(avail) + " available: " + remedy);
}

// Refuses at `path` output of `bytes` where the folder `out` will be (its
// nearest existing ancestor) has less free space, with room for the small
// files beside it (summary.json, the lock, a checkpoint's header; a file
// system allocates each in whole blocks).
inline void refuse_beyond_disk(const std::filesystem::path& out, const std::string& path, double bytes,
                               const std::string& what, const std::string& remedy) {
  bytes += 1 << 16;
  std::filesystem::path where = std::filesystem::absolute(out);
  while (!std::filesystem::exists(where) && where.has_parent_path() && where != where.parent_path())
    where = where.parent_path();
  std::error_code ec;
  const auto space = std::filesystem::space(where, ec);
  if (!ec && bytes > double(space.available))
    throw ConfigError(path, what + " need about " + mebibytes(bytes) + " in " + where.string() + ", which has " +
                                mebibytes(double(space.available)) + " free: " + remedy);
}

}  // namespace tether

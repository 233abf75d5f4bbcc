#pragma once
// What every writer of a run's folder shares: numbers as shortest round-trip
// decimals, and stream failures reported with the OS's reason.
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "tether/core/types.hpp"

namespace tether {

inline void append_number(std::string& s, Real x) {
  char buf[32];
  const auto res = std::to_chars(buf, buf + sizeof buf, x);
  s.append(buf, res.ptr);
}

// The OS's reason goes with the file name: "No space left on device",
// "Permission denied".
inline void check_stream(const std::ios& out, const std::filesystem::path& file) {
  if (!out)
    throw std::runtime_error("cannot write " + file.string() + (errno != 0 ? ": " + std::string(std::strerror(errno)) : ""));
}

}  // namespace tether

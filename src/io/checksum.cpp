#include "io/checksum.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

namespace tether {

namespace fs = std::filesystem;

void Crc32::add(const char* data, std::size_t n) {
  value_ = std::uint32_t(crc32_z(value_, reinterpret_cast<const Bytef*>(data), n));
}

bool file_crc32(const fs::path& file, std::uintmax_t bytes, std::uint32_t& crc) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  std::vector<char> block(std::size_t(1) << 20);
  Crc32 c;
  for (std::uintmax_t left = bytes; left > 0;) {
    const std::size_t want = std::size_t(std::min<std::uintmax_t>(left, block.size()));
    in.read(block.data(), std::streamsize(want));
    if (std::size_t(in.gcount()) != want) return false;
    c.add(block.data(), want);
    left -= want;
  }
  crc = c.value();
  return true;
}

nlohmann::json file_record(std::uintmax_t bytes, std::uint32_t crc) { return {{"bytes", bytes}, {"crc32", crc}}; }

bool matches_record(const fs::path& file, const nlohmann::json& record, std::uint32_t& crc) {
  if (!record.is_object() || !record.contains("bytes") || !record.contains("crc32") ||
      !record["bytes"].is_number_unsigned() || !record["crc32"].is_number_unsigned())
    return false;
  std::uint32_t have = 0;
  if (!file_crc32(file, record["bytes"].get<std::uintmax_t>(), have) || have != record["crc32"].get<std::uint32_t>())
    return false;
  crc = have;
  return true;
}

namespace {

constexpr std::size_t seal_bytes = 15;  // "crc32 " + 8 hex digits + "\n"

std::string seal_of(const std::string& bytes, std::size_t n) {
  Crc32 c;
  c.add(bytes.data(), n);
  char s[seal_bytes + 1];
  std::snprintf(s, sizeof s, "crc32 %08x\n", unsigned(c.value()));
  return std::string(s, seal_bytes);
}

}  // namespace

std::string sealed(std::string bytes) {
  bytes += seal_of(bytes, bytes.size());
  return bytes;
}

bool unseal(std::string& bytes) {
  if (bytes.size() < seal_bytes) return false;
  const std::size_t body = bytes.size() - seal_bytes;
  if (bytes.compare(body, seal_bytes, seal_of(bytes, body)) != 0) return false;
  bytes.resize(body);
  return true;
}

SealedRead read_sealed_file(const fs::path& file, const std::string& format, nlohmann::json& header,
                            std::string& body) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return SealedRead::missing;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // A seal that does not match is damage; no seal at all, a file of an older version or of something else.
  const bool has_seal = bytes.size() >= seal_bytes && bytes.compare(bytes.size() - seal_bytes, 6, "crc32 ") == 0 &&
                        bytes.back() == '\n';
  const bool intact = unseal(bytes);
  const std::size_t line = bytes.find('\n');
  nlohmann::json h;
  if (line != std::string::npos) {
    try {
      h = nlohmann::json::parse(bytes.begin(), bytes.begin() + std::ptrdiff_t(line));
    } catch (const nlohmann::json::exception&) {
      h = nullptr;
    }
  }
  const std::string theirs =
      h.is_object() && h.contains("format") && h["format"].is_string() ? h["format"].get<std::string>() : "";
  const bool ours = theirs == format;
  if (intact) {
    if (!ours) return SealedRead::other_format;
    header = std::move(h);
    body = bytes.substr(line + 1);
    return SealedRead::ok;
  }
  if (has_seal || ours) return SealedRead::damaged;
  const std::string kind = format.substr(0, format.rfind(' ') + 1);  // "tether checkpoint "
  return theirs.rfind(kind, 0) == 0 ? SealedRead::other_format : SealedRead::damaged;
}

}  // namespace tether

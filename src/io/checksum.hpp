#pragma once
// What tether reads back is verified before use: each file a checkpoint or a
// shard goes on from is recorded with its byte count and CRC-32 (zlib's, the
// checksum of gzip and PNG: every burst of up to 32 flipped bits is caught),
// and checkpoint.tether and shard.tether themselves end in a seal, the CRC-32
// of every byte before it, so that no bit of their headers or state goes
// unchecked.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace tether {

class Crc32 {
 public:
  Crc32() = default;
  explicit Crc32(std::uint32_t value) : value_(value) {}
  void add(const char* data, std::size_t n);
  std::uint32_t value() const { return value_; }

 private:
  std::uint32_t value_ = 0;  // crc32 of no bytes
};

// The CRC-32 of the first `bytes` of `file`; false when it holds fewer.
bool file_crc32(const std::filesystem::path& file, std::uintmax_t bytes, std::uint32_t& crc);

// A file's record in a checkpoint's or a shard's header: {"bytes": n, "crc32": c}.
nlohmann::json file_record(std::uintmax_t bytes, std::uint32_t crc);
// Whether `file`'s first record["bytes"] bytes have record["crc32"] as their CRC-32
// (a record that is not one of file_record's never matches); their CRC in `crc`.
bool matches_record(const std::filesystem::path& file, const nlohmann::json& record, std::uint32_t& crc);

// `bytes` followed by their seal (one line: "crc32 " and 8 hex digits).
std::string sealed(std::string bytes);
// `bytes` without their seal; false (and `bytes` unchanged) when the seal is
// missing or does not match what it seals.
bool unseal(std::string& bytes);

// A sealed file as checkpoint.tether and shard.tether are: one line of JSON
// (its header, whose "format" names its kind and version), a body, the seal.
enum class SealedRead { ok, missing, damaged, other_format };
SealedRead read_sealed_file(const std::filesystem::path& file, const std::string& format, nlohmann::json& header,
                            std::string& body);

}  // namespace tether

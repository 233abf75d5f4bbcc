#pragma once
// The bytes of a run's checkpoint (engine/runner.hpp) and of a shard's sums:
// plain values and vectors appended in order and read back in the same
// order, every length checked, so a truncated or foreign state is refused,
// never half-read (the file's seal, io/checksum.hpp, has caught damage before).
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tether {

class BlobWriter {
 public:
  template <class T>
  void put(const T& x) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes_.append(reinterpret_cast<const char*>(&x), sizeof x);
  }
  template <class T>
  void put(const std::vector<T>& v) {
    put(std::uint64_t(v.size()));
    bytes_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

class BlobReader {
 public:
  // `what` names the bytes in the message a truncated or foreign state gets.
  explicit BlobReader(const std::string& bytes, std::string what = "the checkpoint") : b_(bytes), what_(std::move(what)) {}
  template <class T>
  void get(T& x) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (b_.size() - at_ < sizeof x) bad();
    std::memcpy(&x, b_.data() + at_, sizeof x);
    at_ += sizeof x;
  }
  template <class T>
  void get(std::vector<T>& v) {
    std::uint64_t n = 0;
    get(n);
    if (n > (b_.size() - at_) / sizeof(T)) bad();
    v.resize(std::size_t(n));
    std::memcpy(v.data(), b_.data() + at_, std::size_t(n) * sizeof(T));
    at_ += std::size_t(n) * sizeof(T);
  }
  void expect_end() const {
    if (at_ != b_.size()) bad();
  }

 private:
  [[noreturn]] void bad() const { throw std::runtime_error(what_ + " is cut short, or was not written by this run"); }
  const std::string& b_;
  std::string what_;
  std::size_t at_ = 0;
};

}  // namespace tether

#pragma once
// Counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11, the
// generator behind Random123 and cuRAND's Philox). A draw is a pure function
// of (seed, trajectory id, draw index), so an ensemble's initial states do not
// depend on batch size, thread count or backend.
#include <cstdint>

#include "tether/core/types.hpp"

namespace tether {

class CounterRng {
 public:
  // Substream k of a stream starts at counter block k 2^32: substreams never
  // overlap (a user would need 2^34 draws from one). Substream 0 is the
  // initial state's; the sampler's iteration k uses substream k + 1.
  // A generator may also start at block `block` of its substream: four
  // 32-bit words a block, one uniform() is two of them and a pair of
  // normal()s two uniforms, refilled as soon as a block is used up, so that
  // after 2u uniforms normal j (of a pair) is block u / 2 + j / 2's (a tile's
  // bead draws its own three, sampling/hmc_tile.hpp).
  TETHER_HD CounterRng(std::uint64_t seed, std::uint64_t stream, std::uint64_t substream = 0, std::uint32_t block = 0)
      : key0_(static_cast<std::uint32_t>(seed)), key1_(static_cast<std::uint32_t>(seed >> 32)),
        stream_(stream), counter_((substream << 32) + block) {}

  // Uniform in (0, 1): never exactly 0, so log() in Box-Muller is safe.
  TETHER_HD Real uniform() {
    if (have_ == 0) refill();
    const std::uint32_t hi = buf_[4 - have_--];
    if (have_ == 0) refill();
    const std::uint32_t lo = buf_[4 - have_--];
    // 52 bits and the cell midpoint: (k + 1/2) 2^-52 is exact in double, so
    // the result is strictly inside (0, 1) (with 53 bits it could round to 1).
    const std::uint64_t bits = ((static_cast<std::uint64_t>(hi) << 20) ^ (lo >> 12)) & ((std::uint64_t(1) << 52) - 1);
    return (static_cast<Real>(bits) + Real(0.5)) * Real(1.0 / 4503599627370496.0);
  }

  // Standard normal (Box-Muller; the second value is kept for the next call).
  TETHER_HD Real normal() {
    if (has_spare_) { has_spare_ = false; return spare_; }
    const Real u1 = uniform(), u2 = uniform();
    const Real r = sqrt(Real(-2) * log(u1));
#ifdef __CUDA_ARCH__
    // sin and cos of pi (2 u2): no argument reduction, so none of sin's
    // large-argument path and the stack frame it gives every kernel that draws.
    Real s, c;
    sincospi(2 * u2, &s, &c);
    spare_ = r * s;
    has_spare_ = true;
    return r * c;
#else
    const Real t = Real(6.283185307179586476925286766559) * u2;
    spare_ = r * sin(t);
    has_spare_ = true;
    return r * cos(t);
#endif
  }

 private:
  TETHER_HD static void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
    const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
    hi = static_cast<std::uint32_t>(p >> 32);
    lo = static_cast<std::uint32_t>(p);
  }

  TETHER_HD void refill() {
    std::uint32_t c0 = static_cast<std::uint32_t>(counter_), c1 = static_cast<std::uint32_t>(counter_ >> 32);
    std::uint32_t c2 = static_cast<std::uint32_t>(stream_), c3 = static_cast<std::uint32_t>(stream_ >> 32);
    std::uint32_t k0 = key0_, k1 = key1_;
    for (int round = 0; round < 10; ++round) {
      std::uint32_t hi0, lo0, hi1, lo1;
      mulhilo(0xD2511F53u, c0, hi0, lo0);
      mulhilo(0xCD9E8D57u, c2, hi1, lo1);
      const std::uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
      c0 = n0; c1 = n1; c2 = n2; c3 = n3;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    buf_[0] = c0; buf_[1] = c1; buf_[2] = c2; buf_[3] = c3;
    have_ = 4;
    ++counter_;
  }

  std::uint32_t key0_, key1_;
  std::uint64_t stream_;
  std::uint64_t counter_;
  std::uint32_t buf_[4] = {0, 0, 0, 0};
  int have_ = 0;
  bool has_spare_ = false;
  Real spare_ = 0;
};

// A direction uniform on the unit sphere S^2: z uniform on [-1, 1] (by
// Archimedes' theorem the area element is uniform in z), then the azimuth.
template <class Rng>
TETHER_HD Vec<3> uniform_direction(Rng& rng) {
  const Real z = 2 * rng.uniform() - 1;
  const Real phi = Real(6.283185307179586476925286766559) * rng.uniform();
  const Real r = sqrt(1 - z * z);
  return Vec<3>(r * cos(phi), r * sin(phi), z);
}

}  // namespace tether

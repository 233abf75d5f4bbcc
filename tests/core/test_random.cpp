// Tests of CounterRng: Philox4x32-10 known answers, the counter layout, the
// pure-function property that makes ensembles batch-independent, and the
// statistics of uniform() and normal().
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "tether/core/random.hpp"

namespace tether {
namespace {

using Words = std::array<std::uint32_t, 4>;
using Key = std::array<std::uint32_t, 2>;

// Reference Philox4x32-10 written from the Random123 description (Salmon et
// al., SC'11): ten rounds of S-box + Feistel mix, key bumped between rounds.
// Pinned below by the published known-answer vectors, so it can serve as an
// oracle for CounterRng at arbitrary (seed, stream, draw index).
Words philox4x32_10(Words ctr, Key key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += 0x9E3779B9u;
      key[1] += 0xBB67AE85u;
    }
    const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * ctr[0];
    const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * ctr[2];
    ctr = {static_cast<std::uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<std::uint32_t>(p1),
           static_cast<std::uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<std::uint32_t>(p0)};
  }
  return ctr;
}

// Random123 tests/kat_vectors, "philox4x32 10" lines: counter, key, output.
struct Kat {
  Words ctr;
  Key key;
  Words out;
};
const Kat kats[] = {
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000}, {0x00000000, 0x00000000},
     {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

// CounterRng's layout (random.hpp): counter words (draw block lo, hi,
// stream lo, hi), key (seed lo, hi); block b holds draws 2b and 2b+1, each
// built from two words, the first word giving the high bits.
Words reference_block(std::uint64_t seed, std::uint64_t stream, std::uint64_t block) {
  return philox4x32_10({static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
                        static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)},
                       {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
}

// The 52 random bits behind draw `index`: 32 from the first word, 20 from the
// top of the second.
std::uint64_t reference_bits(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  const Words w = reference_block(seed, stream, index / 2);
  const int j = 2 * static_cast<int>(index % 2);
  return (std::uint64_t{w[j]} << 20) | (w[j + 1] >> 12);
}

// u must be the midpoint of the dyadic cell [bits, bits + 1] * 2^-52, which
// is exact in double: strictly inside (0, 1) for every bits.
::testing::AssertionResult in_cell(Real u, std::uint64_t bits) {
  const Real mid = std::ldexp(static_cast<Real>(bits) + 0.5, -52);
  if (u == mid && u > 0 && u < 1) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "u = " << u << " is not the cell midpoint " << mid << " for bits " << bits;
}

Real mean(const std::vector<Real>& x) {
  Real s = 0;
  for (Real v : x) s += v;
  return s / static_cast<Real>(x.size());
}

Real central_moment(const std::vector<Real>& x, Real m, int k) {
  Real s = 0;
  for (Real v : x) s += std::pow(v - m, k);
  return s / static_cast<Real>(x.size());
}

Real correlation(const std::vector<Real>& x, const std::vector<Real>& y) {
  const Real mx = mean(x), my = mean(y);
  Real sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxy / std::sqrt(sxx * syy);
}

std::vector<Real> uniforms(std::uint64_t seed, std::uint64_t stream, int n) {
  CounterRng rng(seed, stream);
  std::vector<Real> x(n);
  for (Real& v : x) v = rng.uniform();
  return x;
}

constexpr int big = 1000000;

// ---------------------------------------------------------------------------
// Known answers and layout.

TEST(Philox, ReferenceMatchesRandom123KnownAnswers) {
  for (const Kat& k : kats) {
    const Words out = philox4x32_10(k.ctr, k.key);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], k.out[i]) << "word " << i << " of ctr " << std::hex << k.ctr[0];
  }
}

// The zero vector is reachable through the public interface (seed 0, stream
// 0, first block); the other two need a counter of 2^63 draws or more.
TEST(CounterRng, FirstDrawsMatchZeroKnownAnswer) {
  CounterRng rng(0, 0);
  const Real u0 = rng.uniform(), u1 = rng.uniform();
  EXPECT_TRUE(in_cell(u0, (std::uint64_t{0x6627e8d5} << 20) | (0xe169c58du >> 12)));
  EXPECT_TRUE(in_cell(u1, (std::uint64_t{0xbc57ac4c} << 20) | (0x9b00dbd8u >> 12)));
}

// Every word of seed and stream reaches the key/counter, in the documented
// places, and draw k comes from block k / 2: a pure function of
// (seed, stream, k).
TEST(CounterRng, MatchesReferenceAtEveryDrawIndex) {
  const std::uint64_t seeds[] = {0, 1, 0xFFFFFFFFull, 0x100000000ull, 0xDEADBEEFCAFEF00Dull, ~0ull};
  const std::uint64_t streams[] = {0, 1, 12345, 0x100000000ull, 0x0370734413198A2Eull, ~0ull};
  for (const std::uint64_t seed : seeds)
    for (const std::uint64_t stream : streams) {
      CounterRng rng(seed, stream);
      for (std::uint64_t k = 0; k < 600; ++k)
        ASSERT_TRUE(in_cell(rng.uniform(), reference_bits(seed, stream, k)))
            << "seed " << seed << " stream " << stream << " draw " << k;
    }
}

TEST(CounterRng, SameSeedAndStreamReproduce) {
  CounterRng a(42, 9), b(42, 9), other(42, 10);
  // Interleaving with another generator must not matter: no shared state.
  for (int k = 0; k < 10000; ++k) {
    const Real x = a.uniform();
    other.uniform();
    ASSERT_EQ(x, b.uniform()) << "draw " << k;
  }
  CounterRng c(42, 9), d(42, 9);
  for (int k = 0; k < 10000; ++k) ASSERT_EQ(c.normal(), d.normal()) << "draw " << k;
}

TEST(CounterRng, DifferentSeedsAndStreamsDiffer) {
  // Includes the high words alone and seed/stream swapped.
  const std::pair<std::uint64_t, std::uint64_t> ids[] = {
      {0, 0}, {0, 1}, {1, 0}, {1, 1}, {0, 1ull << 32}, {1ull << 32, 0}, {7, 8}, {8, 7}, {~0ull, 0}, {0, ~0ull}};
  constexpr int n = sizeof(ids) / sizeof(ids[0]);
  std::vector<std::vector<Real>> seqs;
  for (const auto& [seed, stream] : ids) seqs.push_back(uniforms(seed, stream, 4));
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j)
      for (int k = 0; k < 4; ++k)
        EXPECT_NE(seqs[i][k], seqs[j][k]) << "ids " << i << ", " << j << " draw " << k;
}

// normal() is Box-Muller on consecutive uniform() pairs of the same stream.
TEST(CounterRng, NormalIsBoxMullerOfUniformPairs) {
  CounterRng a(3, 4), b(3, 4);
  for (int k = 0; k < 1000; ++k) {
    const Real u1 = b.uniform(), u2 = b.uniform();
    const Real r = std::sqrt(-2 * std::log(u1)), t = 2 * M_PI * u2;
    EXPECT_NEAR(a.normal(), r * std::cos(t), 1e-14 * (1 + r));
    EXPECT_NEAR(a.normal(), r * std::sin(t), 1e-14 * (1 + r));
  }
}

// ---------------------------------------------------------------------------
// Statistics. Tolerances are 5 standard errors of the statistic.

TEST(CounterRng, UniformMomentsAndHistogram) {
  const std::vector<Real> u = uniforms(2024, 1, big);
  for (Real v : u) ASSERT_TRUE(v > 0 && v < 1) << v;
  const Real n = big, m = mean(u), var = central_moment(u, m, 2);
  EXPECT_NEAR(m, 0.5, 5 * std::sqrt(1.0 / 12 / n));
  // Var of the sample variance ~ (mu4 - sigma^4) / n = (1/80 - 1/144) / n.
  EXPECT_NEAR(var, 1.0 / 12, 5 * std::sqrt((1.0 / 80 - 1.0 / 144) / n));

  // Chi-square over 1000 equal bins: mean df, standard deviation sqrt(2 df).
  constexpr int bins = 1000;
  std::vector<int> count(bins, 0);
  for (Real v : u) ++count[std::min(bins - 1, static_cast<int>(v * bins))];
  const Real expected = n / bins;
  Real chi2 = 0;
  for (int c : count) chi2 += (c - expected) * (c - expected) / expected;
  const Real df = bins - 1;
  EXPECT_LT(std::abs(chi2 - df), 5 * std::sqrt(2 * df)) << "chi2 " << chi2;
}

TEST(CounterRng, NormalMomentsAndKolmogorovSmirnov) {
  CounterRng rng(2024, 2);
  std::vector<Real> z(big);
  for (Real& v : z) v = rng.normal();
  const Real n = big, m = mean(z), var = central_moment(z, m, 2);
  EXPECT_NEAR(m, 0, 5 / std::sqrt(n));
  EXPECT_NEAR(var, 1, 5 * std::sqrt(2 / n));
  EXPECT_NEAR(central_moment(z, m, 3), 0, 5 * std::sqrt(15 / n));
  EXPECT_NEAR(central_moment(z, m, 4), 3, 5 * std::sqrt(96 / n));

  // sqrt(n) D_n follows the Kolmogorov distribution; P(K > 1.95) ~ 0.001.
  std::sort(z.begin(), z.end());
  Real d = 0;
  for (int i = 0; i < big; ++i) {
    const Real f = 0.5 * std::erfc(-z[i] / std::sqrt(2.0));
    d = std::max({d, (i + 1) / n - f, f - i / n});
  }
  EXPECT_LT(std::sqrt(n) * d, 1.95) << "KS D = " << d;
}

// An ensemble gives trajectory i stream i: the first draws of successive
// streams must look like an independent uniform sample.
TEST(CounterRng, SuccessiveStreamsAreUncorrelated) {
  constexpr int n = 200000;
  std::vector<Real> first(n), second(n);
  for (int s = 0; s < n; ++s) {
    CounterRng rng(99, static_cast<std::uint64_t>(s));
    first[s] = rng.uniform();
    second[s] = rng.uniform();
  }
  const Real se = 1 / std::sqrt(Real(n));
  const std::vector<Real> head(first.begin(), first.end() - 1), next(first.begin() + 1, first.end());
  EXPECT_LT(std::abs(correlation(head, next)), 5 * se);       // stream s vs s + 1
  EXPECT_LT(std::abs(correlation(first, second)), 5 * se);    // draw 0 vs draw 1
  EXPECT_NEAR(mean(first), 0.5, 5 * std::sqrt(1.0 / 12) * se);

  // Whole sequences of neighbouring streams and neighbouring seeds.
  const std::vector<Real> a = uniforms(99, 0, n), b = uniforms(99, 1, n), c = uniforms(100, 0, n);
  EXPECT_LT(std::abs(correlation(a, b)), 5 * se);
  EXPECT_LT(std::abs(correlation(a, c)), 5 * se);
}

TEST(CounterRng, SuccessiveDrawsAreUncorrelated) {
  const std::vector<Real> u = uniforms(5, 5, big);
  const Real se = 1 / std::sqrt(Real(big));
  for (const int lag : {1, 2, 3, 4}) {
    const std::vector<Real> x(u.begin(), u.end() - lag), y(u.begin() + lag, u.end());
    EXPECT_LT(std::abs(correlation(x, y)), 5 * se) << "lag " << lag;
  }
  // The two normals of one Box-Muller pair are independent.
  CounterRng rng(5, 6);
  std::vector<Real> z0(big / 2), z1(big / 2);
  for (int k = 0; k < big / 2; ++k) {
    z0[k] = rng.normal();
    z1[k] = rng.normal();
  }
  EXPECT_LT(std::abs(correlation(z0, z1)), 5 / std::sqrt(Real(big / 2)));
}

}  // namespace
}  // namespace tether

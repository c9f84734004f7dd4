// A small seeded random generator whose every output is fixed by this file: xoshiro256** seeded by
// splitmix64, with our own uniform and normal draws. The workload sampler uses it instead of
// std::*_distribution, whose outputs are implementation-defined, so that one seed gives the same
// document lengths and packed batches with every compiler and standard library.
#pragma once
#include <cmath>
#include <cstdint>

namespace seqpar {

// splitmix64 (Steele, Lea, Flood 2014): expands one 64-bit seed into xoshiro's state.
constexpr std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// xoshiro256** 1.0 (Blackman, Vigna 2018).
class Rng {
 public:
  explicit constexpr Rng(std::uint64_t seed) {
    for (auto& w : s_) w = splitmix64(seed);
  }

  constexpr std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1): the top 53 bits, exact in a double.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform in (0, 1]: for logarithms.
  double uniform_open0() { return 1.0 - uniform(); }

  // Uniform integer in [lo, hi] (lo <= hi) by rejection, no modulo bias.
  std::int64_t between(std::int64_t lo, std::int64_t hi) {
    const std::uint64_t span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
    if (span == ~std::uint64_t{0}) return static_cast<std::int64_t>(next());
    const std::uint64_t n = span + 1, limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
    std::uint64_t x = next();
    while (x >= limit) x = next();
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + x % n);
  }

  // Standard normal by Box-Muller, one value per call (the second is dropped: simpler state, and
  // the sampler's cost is the packing, not this).
  double normal() {
    const double u1 = uniform_open0(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
  }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4]{};
};

}  // namespace seqpar

// Helpers shared by the kernel tests: seeded random tensors and error measures.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace seqpar::test {

template <typename T = float>
std::vector<T> random_vector(std::size_t n, std::uint32_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(dist(gen));
  return v;
}

template <typename A, typename B>
double max_abs_diff(const std::vector<A>& a, const std::vector<B>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    if (std::isinf(x) && std::isinf(y) && (x > 0) == (y > 0)) continue;  // equal infinities (empty rows)
    if (std::isnan(x) || std::isnan(y)) return INFINITY;
    m = std::max(m, std::abs(x - y));
  }
  return a.size() == b.size() ? m : INFINITY;
}

template <typename T>
std::vector<double> to_double(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

}  // namespace seqpar::test

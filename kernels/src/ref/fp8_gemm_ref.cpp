#include "seqpar/kernels/fp8_gemm_ref.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <utility>

#include "seqpar/core/error.hpp"

namespace seqpar::kernels {

Fp8GemmExpected fp8_gemm_expected(const std::uint8_t* a_row, float a_scale_inv, const std::uint8_t* b_row,
                                  float b_scale_inv, std::int64_t k, Fp8Format a_format, Fp8Format b_format) {
  double sum = 0, abs_sum = 0;
  for (std::int64_t t = 0; t < k; ++t) {
    const double p = static_cast<double>(fp8_to_float(a_row[t], a_format)) * fp8_to_float(b_row[t], b_format);
    sum += p;
    abs_sum += std::fabs(p);
  }
  const double scale = static_cast<double>(a_scale_inv) * b_scale_inv;
  Fp8GemmExpected e;
  e.value = sum * scale;
  e.tolerance = std::ldexp(std::fabs(e.value), -8) + std::ldexp(abs_sum * std::fabs(scale), -13);
  return e;
}

Fp8GemmCheck fp8_gemm_check(const std::vector<Fp8GemmSample>& samples) {
  Fp8GemmCheck c;
  c.samples = static_cast<int>(samples.size());
  const double inf = std::numeric_limits<double>::infinity();
  c.worst_ratio = samples.empty() ? 0 : -1;
  for (const Fp8GemmSample& s : samples) {
    const double err = std::fabs(s.got - s.expected.value);
    double ratio = s.expected.tolerance > 0 ? err / s.expected.tolerance : (err == 0 ? 0 : inf);
    if (!std::isfinite(s.got) || std::isnan(ratio)) ratio = inf;  // NaN/inf output, or a NaN reference
    if (ratio > c.worst_ratio) {
      c.worst_ratio = ratio;
      c.worst = s;
    }
  }
  return c;
}

std::vector<std::pair<std::int64_t, std::int64_t>> fp8_gemm_sample_indices(std::int64_t m, std::int64_t n, int count,
                                                                           std::uint64_t seed) {
  if (m <= 0 || n <= 0) throw Error(fmt::format("fp8_gemm_sample_indices: m {} and n {} must be positive", m, n));
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  std::set<std::pair<std::int64_t, std::int64_t>> seen;
  const auto add = [&](std::int64_t i, std::int64_t j) {
    if (seen.insert({i, j}).second) out.emplace_back(i, j);
  };
  if (count > 0) add(0, 0);
  if (count > 1) add(m - 1, n - 1);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> row(0, m - 1), col(0, n - 1);
  const double cells = static_cast<double>(m) * static_cast<double>(n);
  const auto target = static_cast<std::size_t>(std::min<double>(count, cells));
  while (out.size() < target) add(row(rng), col(rng));
  return out;
}

}  // namespace seqpar::kernels

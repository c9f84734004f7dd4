// The FP8 GEMM reference and check (kernels/fp8_gemm_ref.hpp) on fresh random data: a correct result
// (the exact value rounded once to bf16) passes; the bugs the check exists for (A's scale from another
// row, B read transposed, one operand's scale missing) fail; NaN outputs fail; the sample indices.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "seqpar/core/bf16.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/kernels/fp8_gemm_ref.hpp"

namespace seqpar::kernels {
namespace {

struct Operands {
  std::int64_t m, n, k;
  Fp8Tensor a, b;  // A [m,k], B [n,k], quantized per row
};

Operands random_operands(std::int64_t m, std::int64_t n, std::int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(n * k));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = dist(rng) * static_cast<float>(1 + i / static_cast<std::size_t>(k));
  for (float& x : b) x = dist(rng);
  return {m, n, k, fp8_quantize(a.data(), m, k, Fp8Format::e4m3, Fp8Scaling::row),
          fp8_quantize(b.data(), n, k, Fp8Format::e4m3, Fp8Scaling::row)};
}

Fp8GemmExpected expected_at(const Operands& o, std::int64_t i, std::int64_t j) {
  return fp8_gemm_expected(o.a.data.data() + i * o.k, o.a.scale_inv[static_cast<std::size_t>(i)],
                           o.b.data.data() + j * o.k, o.b.scale_inv[static_cast<std::size_t>(j)], o.k);
}

// D[i,j] computed with a defect: `wrong_row` takes A's scale from row i+1, `transposed_b` reads B's
// column j (B[t, j] of a [k, n] reading of the [n, k] storage), `no_b_scale` forgets B's scale.
double computed(const Operands& o, std::int64_t i, std::int64_t j, int defect) {
  double sum = 0;
  for (std::int64_t t = 0; t < o.k; ++t) {
    const std::uint8_t bq = defect == 2 ? o.b.data[static_cast<std::size_t>((t * o.n + j) % (o.n * o.k))]
                                        : o.b.data[static_cast<std::size_t>(j * o.k + t)];
    sum += static_cast<double>(fp8_to_float(o.a.data[static_cast<std::size_t>(i * o.k + t)], Fp8Format::e4m3)) *
           fp8_to_float(bq, Fp8Format::e4m3);
  }
  const float sa = o.a.scale_inv[static_cast<std::size_t>(defect == 1 ? (i + 1) % o.m : i)];
  const float sb = defect == 3 ? 1.f : o.b.scale_inv[static_cast<std::size_t>(j)];
  return bf16_to_float(float_to_bf16(static_cast<float>(sum * sa * sb)));
}

TEST(Fp8GemmRef, CorrectResultPassesAndDefectsFail) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (auto [m, n, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{5, 3, 16}, {17, 40, 333}, {9, 24, 4096}}) {
    SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k);
    const Operands o = random_operands(m, n, k, rng);
    const auto idx = fp8_gemm_sample_indices(m, n, 16, rng());
    for (int defect = 0; defect < 4; ++defect) {
      std::vector<Fp8GemmSample> samples;
      for (auto [i, j] : idx) samples.push_back({i, j, computed(o, i, j, defect), expected_at(o, i, j)});
      const Fp8GemmCheck c = fp8_gemm_check(samples);
      EXPECT_EQ(c.samples, static_cast<int>(idx.size()));
      if (defect == 0)
        EXPECT_TRUE(c.passed()) << "worst ratio " << c.worst_ratio << " at " << c.worst.i << "," << c.worst.j;
      else
        EXPECT_FALSE(c.passed()) << "defect " << defect << " passed, worst ratio " << c.worst_ratio;
    }
  }
}

TEST(Fp8GemmRef, NonFiniteOutputsAndEmptyChecksFail) {
  Fp8GemmSample s{0, 0, std::nan(""), {1.0, 0.1}};
  EXPECT_FALSE(fp8_gemm_check({s}).passed());
  s.got = INFINITY;
  EXPECT_FALSE(fp8_gemm_check({s}).passed());
  s.got = 1.05;
  EXPECT_TRUE(fp8_gemm_check({s}).passed());
  EXPECT_FALSE(fp8_gemm_check({}).passed());
}

TEST(Fp8GemmRef, SampleIndicesAreDistinctInRangeWithCornersFirst) {
  const auto idx = fp8_gemm_sample_indices(7, 5, 20, 42);
  ASSERT_EQ(idx.size(), 20u);
  EXPECT_EQ(idx[0], std::make_pair(std::int64_t{0}, std::int64_t{0}));
  EXPECT_EQ(idx[1], std::make_pair(std::int64_t{6}, std::int64_t{4}));
  std::set<std::pair<std::int64_t, std::int64_t>> seen(idx.begin(), idx.end());
  EXPECT_EQ(seen.size(), idx.size());
  for (auto [i, j] : idx) EXPECT_TRUE(i >= 0 && i < 7 && j >= 0 && j < 5);
  EXPECT_EQ(fp8_gemm_sample_indices(2, 3, 100, 1).size(), 6u);  // capped at m x n
  EXPECT_THROW(fp8_gemm_sample_indices(0, 3, 4, 1), Error);
}

}  // namespace
}  // namespace seqpar::kernels

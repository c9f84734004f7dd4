// The GEMM tolerance of gemm_expected.hpp, checked on the CPU where the GPU test that uses it cannot
// run: a GPU-like result (fp32 accumulation in the opposite order, then either rounding order
// cuBLASLt's bias epilogue uses for a bf16 D) passes on every case the GPU test runs, and the
// mistakes the test is there to catch (a bias read per row, a missing alpha, a lost C) fail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <tuple>
#include <vector>

#include "gemm_expected.hpp"

namespace seqpar::test {
namespace {

enum class Epilogue { one_rounding, bf16_product_first, bias_per_row, no_alpha, no_c };

struct Operands {
  std::vector<float> a, b, c, bias;
};

// Uniform in [-1, 1], rounded to bf16 as the GPU test uploads them (C and the bias in D's type).
Operands operands(const GemmProblem& g, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  auto draw = [&](std::size_t n, bool bf16) {
    std::vector<float> v(n);
    for (float& x : v) x = bf16 ? round_bf16(dist(rng)) : dist(rng);
    return v;
  };
  const auto m = static_cast<std::size_t>(g.m), n = static_cast<std::size_t>(g.n), k = static_cast<std::size_t>(g.k);
  Operands o{draw(m * k, true), draw(k * n, true), draw(m * n, g.cd == DType::bf16), draw(n, g.cd == DType::bf16)};
  if (g.beta == 0.f) o.c.assign(m * n, 0.f);
  return o;
}

// What a GPU might write: the dot products summed in fp32 from the far end, then the epilogue.
std::vector<float> gpu_like(const GemmProblem& g, const Operands& o, Epilogue how) {
  std::vector<float> d(static_cast<std::size_t>(g.m) * static_cast<std::size_t>(g.n));
  for (int i = 0; i < g.m; ++i)
    for (int j = 0; j < g.n; ++j) {
      float acc = 0.f;
      for (int l = g.k - 1; l >= 0; --l) {
        const float av = g.trans_a ? o.a[std::size_t(l) * std::size_t(g.m) + std::size_t(i)]
                                   : o.a[std::size_t(i) * std::size_t(g.k) + std::size_t(l)];
        const float bv = g.trans_b ? o.b[std::size_t(j) * std::size_t(g.k) + std::size_t(l)]
                                   : o.b[std::size_t(l) * std::size_t(g.n) + std::size_t(j)];
        acc += av * bv;
      }
      const std::size_t idx = std::size_t(i) * std::size_t(g.n) + std::size_t(j);
      const float alpha = how == Epilogue::no_alpha ? 1.f : g.alpha;
      const float beta = how == Epilogue::no_c ? 0.f : g.beta;
      const float p = alpha * acc + beta * o.c[idx];
      float bias = 0.f;
      if (g.bias) bias = how == Epilogue::bias_per_row ? o.bias[std::size_t(i) % std::size_t(g.n)] : o.bias[std::size_t(j)];
      if (g.cd == DType::fp32) d[idx] = p + bias;
      else if (how == Epilogue::bf16_product_first) d[idx] = round_bf16(round_bf16(p) + bias);
      else d[idx] = round_bf16(p + bias);
    }
  return d;
}

std::vector<GemmProblem> problems() {
  std::vector<GemmProblem> out;
  // The GPU test's awkward shapes, smaller where they are large (the bound does not depend on m or n).
  for (auto [m, n, k] : {std::tuple{127, 65, 33}, {100, 300, 77}, {31, 70, 1000}, {3, 500, 7}})
    for (int t = 0; t < 4; ++t)
      for (DType cd : {DType::fp32, DType::bf16})
        for (float beta : {0.f, 1.f}) out.push_back({m, n, k, (t & 1) != 0, (t & 2) != 0, 0.5f, beta, cd, true});
  return out;
}

unsigned seed_of(const GemmProblem& g) { return unsigned(g.m * 131 + g.n * 17 + g.k + (g.trans_a ? 7 : 0) + (g.trans_b ? 3 : 0)); }

TEST(GemmExpected, EitherRoundingOrderOfTheBiasEpiloguePasses) {
  int differing = 0;  // elements where the two orders disagree: the case the tolerance must cover
  for (const GemmProblem& g : problems()) {
    const Operands o = operands(g, seed_of(g));
    const GemmExpected e = gemm_expected(g, o.a, o.b, o.c, o.bias);
    const auto once = gpu_like(g, o, Epilogue::one_rounding), twice = gpu_like(g, o, Epilogue::bf16_product_first);
    EXPECT_TRUE(gemm_matches(once, e, g.n)) << g.m << "x" << g.n << "x" << g.k << " " << to_string(g.cd);
    EXPECT_TRUE(gemm_matches(twice, e, g.n)) << g.m << "x" << g.n << "x" << g.k << " " << to_string(g.cd);
    for (std::size_t i = 0; i < once.size(); ++i) differing += once[i] != twice[i];
  }
  EXPECT_GT(differing, 1000);
}

TEST(GemmExpected, TheMistakesTheGpuTestIsForFail) {
  for (const GemmProblem& g : problems()) {
    const Operands o = operands(g, seed_of(g));
    const GemmExpected e = gemm_expected(g, o.a, o.b, o.c, o.bias);
    if (g.m > 1) {
      EXPECT_FALSE(gemm_matches(gpu_like(g, o, Epilogue::bias_per_row), e, g.n)) << g.m << "x" << g.n;
    }
    EXPECT_FALSE(gemm_matches(gpu_like(g, o, Epilogue::no_alpha), e, g.n)) << g.m << "x" << g.n;
    if (g.beta != 0.f) {
      EXPECT_FALSE(gemm_matches(gpu_like(g, o, Epilogue::no_c), e, g.n)) << g.m << "x" << g.n;
    }
  }
}

// Without a bias, a bf16 D is one rounding: the tolerance stays a rounding of the result, and a
// product off by one bf16 unit in the second place of its value is caught.
TEST(GemmExpected, WithoutBiasTheBoundIsTheResultsRounding) {
  GemmProblem g{127, 65, 33, false, false, 0.5f, 1.f, DType::bf16, false};
  const Operands o = operands(g, seed_of(g));
  const GemmExpected e = gemm_expected(g, o.a, o.b, o.c, o.bias);
  std::vector<float> d = gpu_like(g, o, Epilogue::one_rounding);
  EXPECT_TRUE(gemm_matches(d, e, g.n));
  for (std::size_t i = 0; i < d.size(); ++i) EXPECT_LE(e.tolerance[i], std::ldexp(std::abs(e.value[i]), -6) + 1e-4);
  for (float& x : d) x *= 1.02f;
  EXPECT_FALSE(gemm_matches(d, e, g.n));
}

}  // namespace
}  // namespace seqpar::test

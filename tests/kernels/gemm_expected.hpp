// What a GEMM with an optional bias epilogue must return, and how far it may be from it: the CPU
// reference (ref::layer_ops::gemm, fp32 accumulation) on the operands the GPU saw, and a per-element
// tolerance derived from the roundings a correct GPU result may carry. Pure C++ (the rounding is
// core's bf16), so the CPU tests check the tolerance itself against both orders the GPU may round in
// (test_gemm_expected.cpp) and the GPU test (test_cublaslt_gemm_gpu.cpp) uses it unchanged.
#pragma once
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "seqpar/core/bf16.hpp"
#include "seqpar/core/dtype.hpp"
#include "seqpar/kernels/layer_ops_ref.hpp"

namespace seqpar::test {

inline float round_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

struct GemmProblem {
  int m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1, beta = 0;
  DType cd = DType::fp32;  // C and D
  bool bias = false;       // n values, one per column of the row-major D
};

// The reference value of each element and its tolerance.
struct GemmExpected {
  std::vector<float> value, tolerance;
};

// The tolerance, element by element. Write p = alpha op(A) op(B) + beta C (exact in the reference),
// S = |alpha| sum |a||b| + |beta||C| the magnitude of p's terms, and u = 2^-8 the unit roundoff of
// bf16 (8 significant bits, round to nearest).
//  - fp32 accumulation in another order than the reference's: within g S with g = 4 sqrt(k+2) eps32
//    (the probabilistic bound of a length-k sum, with a factor for the two orders); the bias, in
//    fp32 D, is one more term of that sum.
//  - bf16 D without bias: one rounding of p on the GPU and one of the reference, each within u|p|.
//  - bf16 D with bias: cuBLASLt's algorithms differ in where they round. Some add the bias to p in
//    fp32 and round once; others round p to bf16 first and round the sum again (seen on an H100 with
//    cuBLAS 13, reports/results/h100/check/gpu_tests_kernels.log: every logged element equals
//    bf16(bf16(p) + bias)). The first rounding is within u|p|, the second within u(|p| + |bias|),
//    and the reference's own within u|p + bias|. The bound is scaled to the terms p and bias, not to
//    the result: where p and the bias cancel (p = 0.877, bias = -0.887), |p + bias| is a hundred
//    times smaller than the error the first rounding may leave, so a tolerance relative to the
//    result fails on a correct GPU. A bias read from the wrong index (per row rather than per
//    column) misses by |bias_j - bias_i|, far beyond u(3|p| + 2|bias|) (test_gemm_expected.cpp).
inline GemmExpected gemm_expected(const GemmProblem& g, const std::vector<float>& a, const std::vector<float>& b,
                                  const std::vector<float>& c_in, const std::vector<float>& bias) {
  const auto mn = static_cast<std::size_t>(g.m) * static_cast<std::size_t>(g.n);
  GemmExpected e;
  e.value = c_in;
  ref::layer_ops::gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, a.data(), b.data(), g.beta, e.value.data());
  std::vector<float> abs_a(a.size()), abs_b(b.size()), terms(mn);
  for (std::size_t i = 0; i < a.size(); ++i) abs_a[i] = std::abs(a[i]);
  for (std::size_t i = 0; i < b.size(); ++i) abs_b[i] = std::abs(b[i]);
  for (std::size_t i = 0; i < mn; ++i) terms[i] = std::abs(c_in[i]);
  ref::layer_ops::gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, std::abs(g.alpha), abs_a.data(), abs_b.data(),
                       std::abs(g.beta), terms.data());
  const double gamma = 4.0 * std::sqrt(static_cast<double>(g.k) + 2.0) * std::numeric_limits<float>::epsilon();
  const double u = std::ldexp(1.0, -8);
  e.tolerance.resize(mn);
  for (std::size_t idx = 0; idx < mn; ++idx) {
    const double p = e.value[idx];
    const double bias_j = g.bias ? bias[idx % static_cast<std::size_t>(g.n)] : 0.0;
    double tol = gamma * (terms[idx] + std::abs(bias_j));
    double want = p + bias_j;
    if (g.cd == DType::bf16) {
      want = round_bf16(static_cast<float>(want));
      tol += g.bias ? u * (std::abs(p) + (std::abs(p) + std::abs(bias_j)) + std::abs(p + bias_j)) : 2 * u * std::abs(p);
    }
    e.value[idx] = static_cast<float>(want);
    e.tolerance[idx] = static_cast<float>(tol + 1e-30);
  }
  return e;
}

// Elements outside their tolerance (NaN included), with the first few named.
inline ::testing::AssertionResult gemm_matches(const std::vector<float>& got, const GemmExpected& e, int n) {
  int bad = 0;
  std::string first;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(static_cast<double>(got[i]) - e.value[i]);
    if (!(d <= e.tolerance[i]) && ++bad <= 5)
      first += fmt::format(" [{},{}] got {} want {} (tolerance {})", i / static_cast<std::size_t>(n),
                           i % static_cast<std::size_t>(n), got[i], e.value[i], e.tolerance[i]);
  }
  if (bad == 0 && got.size() == e.value.size()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements off:" << first;
}

}  // namespace seqpar::test

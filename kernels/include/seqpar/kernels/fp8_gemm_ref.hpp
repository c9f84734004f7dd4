// The CPU reference of the FP8 GEMM (CublasLtGemm::matmul_fp8): one element of D[m,n] = (sa A)(sb B)^T
// from the FP8 codes of A's row i and B's row j and their dequantize scales, and the tolerance a correct
// bf16 result stays within. The GPU test and seqpar-bench-gemm's first-run check both call it, on
// sampled elements (a full reference of a benchmark-sized GEMM would take the CPU minutes). Pure C++.
#pragma once
#include <cstdint>
#include <vector>

#include "seqpar/core/fp8.hpp"

namespace seqpar::kernels {

struct Fp8GemmExpected {
  double value = 0;      // sa sb sum_k A[i,k] B[j,k], decoded exactly, summed in double
  double tolerance = 0;  // |D[i,j] - value| a correct result stays within (see fp8_gemm_expected)
};

// The tolerance is 2^-8 |value| (D's one rounding to bf16, 2^-9, doubled) plus 2^-13 sa sb sum_k |A B|
// for the accumulation. The latter is an assumption, not a measured figure: Hopper's FP8 tensor cores
// keep about 14 bits in their accumulation before cuBLAS promotes partial sums to fp32 (DeepSeek-V3
// technical report, arXiv:2412.19437, section 3.3.2), so 2^-13 of the absolute sum bounds it with a
// factor of two to spare. A layout or scale bug is off by about |value| itself, which for random data
// is ~sqrt(k) times the per-term size while 2^-13 sum |A B| is ~k / 8192 times it: the check still
// fails such a bug for k up to the ~10^5 the benchmark's shapes reach.
Fp8GemmExpected fp8_gemm_expected(const std::uint8_t* a_row, float a_scale_inv, const std::uint8_t* b_row,
                                  float b_scale_inv, std::int64_t k, Fp8Format a_format = Fp8Format::e4m3,
                                  Fp8Format b_format = Fp8Format::e4m3);

// One sampled element: its indices, the GPU's value, and what the reference expects.
struct Fp8GemmSample {
  std::int64_t i = 0, j = 0;
  double got = 0;
  Fp8GemmExpected expected;
};

// The worst sample by |got - expected| / tolerance (a NaN or infinite got is worst of all: ratio inf).
struct Fp8GemmCheck {
  int samples = 0;
  double worst_ratio = 0;
  Fp8GemmSample worst;
  bool passed() const { return samples > 0 && worst_ratio <= 1.0; }
};
Fp8GemmCheck fp8_gemm_check(const std::vector<Fp8GemmSample>& samples);

// `count` distinct (i, j) element indices of an [m, n] result from `seed`, the corners (0, 0) and
// (m-1, n-1) first (the last row and column catch a wrong leading dimension). Throws seqpar::Error for
// non-positive m or n.
std::vector<std::pair<std::int64_t, std::int64_t>> fp8_gemm_sample_indices(std::int64_t m, std::int64_t n, int count,
                                                                           std::uint64_t seed);

}  // namespace seqpar::kernels

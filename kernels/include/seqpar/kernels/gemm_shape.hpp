// One GEMM problem on row-major operands: the shape the cuBLAS wrapper (cublas_gemm.hpp) takes and
// the benchmark's shape lists (bench/gemm) produce. Pure C++.
#pragma once
#include <cstdint>
#include <string>

namespace seqpar::kernels {

// Row-major C[m,n] = op(A) * op(B) with op(A) of shape [m,k] and op(B) of shape [k,n]. trans_a: A is stored
// [k,m]; trans_b: B is stored [n,k] (a weight [out,in], as in Y = X W^T).
struct GemmShape {
  std::string op;  // e.g. "qkv_fwd", "mlp_down_dw", "square"
  std::int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  std::int64_t tokens = 0;  // the token count the GEMM belongs to (0 for the square sizes)
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
};

}  // namespace seqpar::kernels

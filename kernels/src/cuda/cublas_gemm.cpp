#include "seqpar/kernels/cublas_gemm.hpp"

#include <fmt/format.h>

#include <climits>

#include "seqpar/core/error.hpp"

namespace seqpar::kernels {

CublasHandle::CublasHandle(cudaStream_t stream) {
  SEQPAR_CUBLAS_CHECK(cublasCreate(&handle_));
  try {
    SEQPAR_CUBLAS_CHECK(cublasSetStream(handle_, stream));
    // fp32 accumulation throughout: no split-K reductions in the bf16 output type.
    SEQPAR_CUBLAS_CHECK(cublasSetMathMode(
        handle_, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  } catch (...) {
    cublasDestroy(handle_);
    throw;
  }
}

CublasHandle::~CublasHandle() {
  if (handle_) cublasDestroy(handle_);  // destructors do not throw; nothing useful to do with a failure here
}

void check_cublas_dims(const GemmShape& s) {
  for (std::int64_t d : {s.m, s.n, s.k})
    if (d <= 0 || d > INT_MAX)
      throw Error(fmt::format("GEMM {}: m, n, k must be in 1..{} for cuBLAS, got m={} n={} k={}", s.op, INT_MAX, s.m,
                              s.n, s.k));
}

void gemm_bf16(const CublasHandle& handle, const GemmShape& s, const void* a, const void* b, void* c) {
  check_cublas_dims(s);
  const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  // cuBLAS is column-major: a row-major C[m,n] is a column-major C^T[n,m] = op(B)^T op(A)^T, so B goes first.
  // Row-major B[k,n] is column-major [n,k] (no transpose, ld n); a stored [n,k] B is column-major [k,n]
  // (transpose, ld k). Likewise for A with m in place of n.
  const cublasOperation_t op_b = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = s.trans_b ? k : n;
  const int lda = s.trans_a ? m : k;
  const float alpha = 1.f, beta = 0.f;
  SEQPAR_CUBLAS_CHECK(cublasGemmEx(handle.get(), op_b, op_a, n, m, k, &alpha, b, CUDA_R_16BF, ldb, a, CUDA_R_16BF,
                                   lda, &beta, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace seqpar::kernels

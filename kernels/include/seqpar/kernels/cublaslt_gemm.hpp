// The cuBLASLt GEMM: row-major D = alpha op(A) op(B) + beta C (+ bias) with A and B bf16, C and D fp32
// or bf16, fp32 accumulation and fp32 alpha/beta, and an optional bias epilogue. The training step's CUDA
// back end runs its GEMMs through it (cublasGemmEx, cublas_gemm.hpp, stays selectable there). Matmul
// descriptors, layouts and the heuristic's algorithm are cached per problem, so a training step asks
// the heuristic once per GEMM shape. Plain C++ over cuBLASLt; CUDA builds only.
#pragma once
#include <cuda_runtime.h>
#include <library_types.h>

#include <cstddef>
#include <memory>

#include "seqpar/core/fp8.hpp"
#include "seqpar/kernels/gemm_shape.hpp"

namespace seqpar::kernels {

// One cuBLASLt handle on one stream, its workspace and its plan cache. Not thread-safe: a cached
// descriptor is updated per call (the bias pointer), so one object serves one host thread.
class CublasLtGemm {
 public:
  // cuBLAS's own default workspace on Hopper is 32 MiB too; the handle allocates it once (cudaMalloc,
  // outside any caller's memory accounting, as cuBLAS's own workspace is) and frees it with the object.
  static constexpr std::size_t kDefaultWorkspaceBytes = std::size_t{32} << 20;

  explicit CublasLtGemm(cudaStream_t stream = nullptr, std::size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // Row-major D[m,n] = alpha op(A) op(B) + beta C for the layout of `s` (GemmShape: op(A) = A^T when
  // trans_a, A stored [k,m]; likewise B, stored [n,k]). A and B bf16; C and D both `cd_type` (CUDA_R_32F
  // or CUDA_R_16BF), contiguous [m,n]. c may be d (in place), or null when beta is 0 (C is then not
  // read). bias, when not null: n values of cd_type added to every row of D (one per column of the
  // row-major result: the rows of cuBLASLt's column-major D^T, the length CUBLASLT_EPILOGUE_BIAS
  // broadcasts over; its bias type is D's for these types). With a bf16 D some algorithms round
  // alpha op(A) op(B) + beta C to bf16 before adding the bias and round again (seen on an H100), so
  // such a D is within two bf16 roundings of the exact sum: one relative to the product, one to
  // product + bias (tests/kernels/gemm_expected.hpp); an fp32 D rounds once. Asynchronous on
  // the stream. Throws seqpar::Error naming the shape for sizes cuBLASLt cannot take (int32), a type
  // it does not, no algorithm, or a failed call.
  void matmul(const GemmShape& s, float alpha, const void* a, const void* b, float beta, const void* c, void* d,
              cudaDataType_t cd_type, const void* bias = nullptr);

  // FP8: row-major D[m,n] = (a_scale_inv x A) (b_scale_inv x B)^T with A [m,k] and B [n,k] E4M3
  // (core/fp8.hpp), D bf16, fp32 accumulation (cuBLASLt's default, not its FAST_ACCUM mode). Only this
  // "TN" layout (s.trans_a false, s.trans_b true) is taken: cuBLASLt's FP8 GEMMs on Hopper require it
  // (cuBLAS docs, cublasLtMatmul's FP8 type table: "A must be transposed and B non-transposed"), which
  // is why frameworks keep transposed FP8 copies for the backward GEMMs. The scales are device
  // pointers to the dequantize factors (fp8.hpp's scale_inv): one float each with Fp8Scaling::tensor
  // (CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F), m floats for A and n for B with Fp8Scaling::row
  // (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, in cublasLt.h since CUDA 12.9; whether a GPU runs it is
  // the library's answer, an Error here when it has none). Throws seqpar::Error naming the shape for
  // another layout, sizes cuBLASLt cannot take, no algorithm, or a failed call.
  void matmul_fp8(const GemmShape& s, Fp8Scaling scaling, const void* a, const float* a_scale_inv, const void* b,
                  const float* b_scale_inv, void* d);

  // How many (shape, transposes, type, epilogue, alignment) plans the cache holds: each one cost one
  // heuristic query.
  std::size_t cached_plans() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace seqpar::kernels

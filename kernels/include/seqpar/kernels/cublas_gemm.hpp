// The GEMM wrappers: bf16 GEMM through cuBLAS (cublasGemmEx, fp32 accumulation, bf16 output) on row-major
// operands, with every cuBLAS status checked. Plain C++ over cuBLAS; CUDA builds only.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "seqpar/kernels/cublas_check.hpp"
#include "seqpar/kernels/gemm_shape.hpp"

namespace seqpar::kernels {

// A cuBLAS handle bound to a stream, with reduced-precision reductions disallowed; destroyed with the object.
class CublasHandle {
 public:
  explicit CublasHandle(cudaStream_t stream = nullptr);
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// Throws seqpar::Error naming the GEMM unless m, n and k are in 1..INT_MAX (cuBLAS's and cuBLASLt's GEMMs take
// int dimensions and leading dimensions); shared by both wrappers.
void check_cublas_dims(const GemmShape& s);

// C = op(A) op(B) for the row-major layout of `s` (A, B, C bf16; accumulation in fp32). Asynchronous on the
// handle's stream. Throws seqpar::Error for dimensions cuBLAS cannot take (int32) or a failed call.
void gemm_bf16(const CublasHandle& handle, const GemmShape& s, const void* a, const void* b, void* c);

}  // namespace seqpar::kernels

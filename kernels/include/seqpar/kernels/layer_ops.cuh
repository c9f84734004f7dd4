// The layer ops on the GPU: elementwise ops, RMSNorm, RoPE, SwiGLU, embedding, cross-entropy, AdamW
// and element-type conversion, the small kernels of a training step. Host launchers callable from
// plain C++, asynchronous on `s`; each computes what the CPU reference of the same name does
// (layer_ops_ref.hpp, which documents the semantics and layouts) and is tested against it.
// Element types: activations and their gradients (the void* arguments) are fp32 or bf16 (raw 16-bit
// words), named by the DType beside them; any other type throws seqpar::Error naming the op and the
// type. Parameters, their gradients, AdamW's moments, rstd and the losses are fp32. Every op loads
// its inputs to fp32, computes in fp32 and rounds to nearest-even when it stores bf16; ops that
// accumulate into an output (add's y, rmsnorm_backward's dinp) load its old value first.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "seqpar/kernels/dtype.hpp"

namespace seqpar::kernels::layer_ops {

void add(DType ty, void* y, DType tx, const void* x, std::int64_t n, cudaStream_t s);  // y += x, any mix
void scale(DType t, void* x, float alpha, std::int64_t n, cudaStream_t s);
// out = in converted (a plain copy when the types match).
void convert(DType to, void* out, DType from, const void* in, std::int64_t n, cudaStream_t s);
void embedding_forward(DType t, void* out, const int* tokens, const float* table, int tokens_n, int c,
                       cudaStream_t s);
void embedding_backward(float* dtable, DType t, const void* dout, const int* tokens, int tokens_n, int c,
                        cudaStream_t s);
void rmsnorm_forward(DType t, void* out, float* rstd, const void* inp, const float* w, int tokens_n, int c,
                     float eps, cudaStream_t s);
void rmsnorm_backward(DType t, void* dinp, float* dw, const void* dout, const void* inp, const float* w,
                      const float* rstd, int tokens_n, int c, cudaStream_t s);
void rope(DType t, void* x, const int* pos, int tokens_n, int heads, int d, float theta, bool inverse,
          cudaStream_t s);
void swiglu_forward(DType t, void* out, const void* gate, const void* up, std::int64_t n, cudaStream_t s);
void swiglu_backward(DType t, void* dgate, void* dup, const void* dout, const void* gate, const void* up,
                     std::int64_t n, cudaStream_t s);
// One block per row: the max and the sum run in fp32 over the row as stored, and the gradient is
// written back in place in the logits' type (bf16 logits are never held in fp32).
void cross_entropy(float* losses, DType t, void* logits, const int* labels, int tokens_n, int v, float dscale,
                   cudaStream_t s);
// One fused pass over fp32 p, g, m, v; p_bf16 (nullptr: none) receives the updated p rounded to bf16.
void adamw(float* p, const float* g, float* m, float* v, std::int64_t n, float lr, float b1, float b2, float eps,
           float wd, int step, std::uint16_t* p_bf16, cudaStream_t s);

}  // namespace seqpar::kernels::layer_ops

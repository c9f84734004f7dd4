// The layer ops on the GPU (fp32): elementwise ops, RMSNorm, RoPE, SwiGLU, embedding, cross-entropy,
// AdamW and fp32 <-> bf16 conversion, the small kernels of a training step. Host launchers callable
// from plain C++, asynchronous on `s`; each computes what the CPU reference of the same name does
// (layer_ops_ref.hpp, which documents the semantics and layouts) and is tested against it.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace seqpar::kernels::layer_ops {

void add(float* y, const float* x, std::int64_t n, cudaStream_t s);
void scale(float* x, float alpha, std::int64_t n, cudaStream_t s);
void fill(float* x, float value, std::int64_t n, cudaStream_t s);
void embedding_forward(float* out, const int* tokens, const float* table, int t, int c, cudaStream_t s);
void embedding_backward(float* dtable, const float* dout, const int* tokens, int t, int c, cudaStream_t s);
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int t, int c, float eps,
                     cudaStream_t s);
void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                      const float* rstd, int t, int c, cudaStream_t s);
void rope(float* x, const int* pos, int t, int heads, int d, float theta, bool inverse, cudaStream_t s);
void swiglu_forward(float* out, const float* gate, const float* up, std::int64_t n, cudaStream_t s);
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                     std::int64_t n, cudaStream_t s);
void cross_entropy(float* losses, float* logits, const int* labels, int t, int v, float dscale, cudaStream_t s);
void adamw(float* p, const float* g, float* m, float* v, std::int64_t n, float lr, float b1, float b2, float eps,
           float wd, int step, cudaStream_t s);
// bf16 stored as raw 16-bit words so callers need no CUDA half types.
void to_bf16(std::uint16_t* out, const float* in, std::int64_t n, cudaStream_t s);
void from_bf16(float* out, const std::uint16_t* in, std::int64_t n, cudaStream_t s);

}  // namespace seqpar::kernels::layer_ops

// Flash attention forward and backward on the GPU (FlashAttention-2 style, tensor cores through WMMA,
// fp32 accumulation). Same layouts, mask and offsets as seqpar::ref (attention_ref.hpp).
// Host-callable from plain C++: only cuda_runtime.h is needed to include this header.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "seqpar/kernels/attention_ref.hpp"
#include "seqpar/kernels/dtype.hpp"

namespace seqpar::kernels {

using ref::AttentionShape;

// Supported: dtype bf16 or fp16 (q, k, v, o, dout, dq, dk, dv all in it), head_dim 64 or 128, any
// positive sequence lengths, batch and heads (heads % kv_heads == 0), causal or not, with offsets.
// Device pointers must be 16-byte aligned (cudaMalloc'd buffers are). Bad arguments throw seqpar::Error;
// a failed launch throws seqpar::Error with the CUDA message. Asynchronous on `stream`.

// o [batch, seq_q, heads, head_dim] in dtype; lse [batch, heads, seq_q] fp32 (natural log; -inf for a row
// that sees no key, whose o is 0).
void flash_attention_forward(const AttentionShape& s, DType dtype, const void* q, const void* k, const void* v,
                             void* o, float* lse, cudaStream_t stream = nullptr);

// Scratch the backward needs: fp32 dQ accumulator [batch, seq_q, heads, head_dim] and D [batch, heads, seq_q].
std::size_t flash_attention_backward_workspace_bytes(const AttentionShape& s);

// OVERWRITES dq, dk, dv (nothing accumulates into the caller's buffers; ring steps sum their partial
// results themselves, preferably in fp32). o and lse may be the final merged output and LSE, as in ring
// backward: D = rowsum(dout * o) and P is recomputed as exp(scale * q k^T - lse).
// Design: one thread block per (batch, KV head, 64-key tile) loops over the query heads of its GQA group and
// the 32-row query tiles, keeping dK and dV in shared memory (no atomics for them); dQ is added with fp32
// atomicAdd into the workspace and converted to dtype at the end. `workspace` needs
// flash_attention_backward_workspace_bytes(s) bytes of device memory, 256-byte aligned.
void flash_attention_backward(const AttentionShape& s, DType dtype, const void* q, const void* k, const void* v,
                              const void* o, const float* lse, const void* dout, void* dq, void* dk, void* dv,
                              void* workspace, cudaStream_t stream = nullptr);

}  // namespace seqpar::kernels

// Ulysses reshards on the GPU: the layout changes before and after the all-to-alls (single tensors and
// fused q,k,v), and KV-head replication/reduction for GQA. Same layouts as reshard_ref.hpp; any DType.
// Host-callable from plain C++. Bad arguments throw seqpar::Error. Asynchronous on `stream`.
#pragma once
#include <cuda_runtime.h>

#include "seqpar/kernels/dtype.hpp"

namespace seqpar::kernels {

// x [b, n, heads, d] -> send [P][b, n, heads/P, d]
void ulysses_pack(int P, int b, int n, int heads, int d, DType t, const void* x, void* send,
                  cudaStream_t stream = nullptr);
// recv [P][b, n, heads/P, d] (chunk p = sequence block p) -> y [b, P*n, heads/P, d]
void ulysses_unpack(int P, int b, int n, int heads, int d, DType t, const void* recv, void* y,
                    cudaStream_t stream = nullptr);
// y [b, P*n, heads/P, d] -> send [P][b, n, heads/P, d]
void ulysses_pack_reverse(int P, int b, int n, int heads, int d, DType t, const void* y, void* send,
                          cudaStream_t stream = nullptr);
// recv [P][b, n, heads/P, d] (chunk p = head group p) -> x [b, n, heads, d]
void ulysses_unpack_reverse(int P, int b, int n, int heads, int d, DType t, const void* recv, void* x,
                            cudaStream_t stream = nullptr);
// Fused: send chunk p = [q | k | v] parts of head group p (kv_heads % P == 0), in one launch.
void ulysses_pack_qkv(int P, int b, int n, int heads, int kv_heads, int d, DType t, const void* q, const void* k,
                      const void* v, void* send, cudaStream_t stream = nullptr);
void ulysses_unpack_qkv(int P, int b, int n, int heads, int kv_heads, int d, DType t, const void* recv, void* yq,
                        void* yk, void* yv, cudaStream_t stream = nullptr);
// Fused backward of q, k, v (the inverses of the two above): dq, dk, dv [b, P*n, heads/P (kv_heads/P), d] ->
// send chunk p = [dq | dk | dv] of sequence block p; recv chunk p (head group p) -> dq, dk, dv [b, n, heads, d].
void ulysses_pack_qkv_reverse(int P, int b, int n, int heads, int kv_heads, int d, DType t, const void* dq,
                              const void* dk, const void* dv, void* send, cudaStream_t stream = nullptr);
void ulysses_unpack_qkv_reverse(int P, int b, int n, int heads, int kv_heads, int d, DType t, const void* recv,
                                void* dq, void* dk, void* dv, cudaStream_t stream = nullptr);
// kv [b, n, kv_heads, d] -> out [b, n, kv_heads*rep, d] (each head rep times consecutively).
void replicate_kv_heads(int rep, int b, int n, int kv_heads, int d, DType t, const void* kv, void* out,
                        cudaStream_t stream = nullptr);
// dout [b, n, kv_heads*rep, d] -> dkv [b, n, kv_heads, d], the replicas summed in fp32 (overwrites dkv).
void reduce_kv_heads(int rep, int b, int n, int kv_heads, int d, DType t, const void* dout, void* dkv,
                     cudaStream_t stream = nullptr);

}  // namespace seqpar::kernels

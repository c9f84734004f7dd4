// CPU reference of the Ulysses reshards around the all-to-alls, and of the KV-head replication for
// GQA when P % kv_heads == 0. All are pure data movement (sums for reduce_kv_heads), in float32.
#pragma once

namespace seqpar::ref {

// Before the forward all-to-all: x [b, n, heads, d] -> send [P][b, n, heads/P, d]; chunk p holds head group p (heads p*heads/P ...).
void ulysses_pack(int P, int b, int n, int heads, int d, const float* x, float* send);
// After it: recv [P][b, n, heads/P, d], chunk p = sequence block p -> y [b, P*n, heads/P, d].
void ulysses_unpack(int P, int b, int n, int heads, int d, const float* recv, float* y);
// The reverse direction (output back to sequence shards): y [b, P*n, heads/P, d] -> send [P][b, n, heads/P, d];
// recv [P][b, n, heads/P, d] (chunk p = head group p) -> x [b, n, heads, d].
void ulysses_pack_reverse(int P, int b, int n, int heads, int d, const float* y, float* send);
void ulysses_unpack_reverse(int P, int b, int n, int heads, int d, const float* recv, float* x);

// Fused q, k, v: one send buffer, chunk p = [pack(q) chunk p | pack(k) chunk p | pack(v) chunk p], so one
// all-to-all moves all three. k and v have kv_heads heads (kv_heads % P == 0; replicate first otherwise).
void ulysses_pack_qkv(int P, int b, int n, int heads, int kv_heads, int d, const float* q, const float* k,
                      const float* v, float* send);
// recv chunk p = [q | k | v] of sequence block p -> yq [b, P*n, heads/P, d], yk, yv [b, P*n, kv_heads/P, d].
void ulysses_unpack_qkv(int P, int b, int n, int heads, int kv_heads, int d, const float* recv, float* yq,
                        float* yk, float* yv);
// The backward of q, k, v in the same fused layout (the inverses of the two above), one all-to-all between:
// dq [b, P*n, heads/P, d], dk, dv [b, P*n, kv_heads/P, d] -> send chunk p = [dq | dk | dv] of sequence block p;
void ulysses_pack_qkv_reverse(int P, int b, int n, int heads, int kv_heads, int d, const float* dq,
                              const float* dk, const float* dv, float* send);
// recv chunk p = [dq | dk | dv] of head group p -> dq [b, n, heads, d], dk, dv [b, n, kv_heads, d].
void ulysses_unpack_qkv_reverse(int P, int b, int n, int heads, int kv_heads, int d, const float* recv, float* dq,
                                float* dk, float* dv);

// GQA with P % kv_heads == 0: kv [b, n, kv_heads, d] -> [b, n, kv_heads*rep, d], each head repeated rep times
// consecutively; and its backward, which sums the replicas' gradients.
void replicate_kv_heads(int rep, int b, int n, int kv_heads, int d, const float* kv, float* out);
void reduce_kv_heads(int rep, int b, int n, int kv_heads, int d, const float* dout, float* dkv);

}  // namespace seqpar::ref

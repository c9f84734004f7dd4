// CPU reference of attention: forward with log-sum-exp, backward, and the merge of partial results
// by their LSE. Written for clarity, not speed: the GPU kernels and the CPU training step check against it.
#pragma once
#include <cstdint>

namespace seqpar::ref {

// Layouts, row-major: q, o, dq, dout: [batch, seq_q, heads, head_dim]; k, v, dk, dv: [batch, seq_k, kv_heads, head_dim];
// lse: [batch, heads, seq_q] fp32 natural log. Query head h uses KV head h / (heads / kv_heads).
// Causal mask with global offsets: query row i sees key j iff k_offset + j <= q_offset + i; with a sliding window
// W > 0 also (q_offset + i) - (k_offset + j) < W (core's in_band, doc_work.hpp: W keys including itself, Hugging
// Face's `sliding_window`). A row that sees no key gets o = 0, lse = -inf.
struct AttentionShape {
  int batch = 1, seq_q = 0, seq_k = 0, heads = 0, kv_heads = 0, head_dim = 0;
  bool causal = false;
  std::int64_t q_offset = 0, k_offset = 0;
  float scale = 0.f;        // 0 -> 1/sqrt(head_dim)
  std::int64_t window = 0;  // sliding window W (causal only); 0: none
};

// Throws seqpar::Error naming the field when a size is not positive, heads % kv_heads != 0, or a window is
// negative or given without causal.
void validate(const AttentionShape& s);
// The softmax scale actually used: s.scale, or 1/sqrt(head_dim) when it is 0.
double effective_scale(const AttentionShape& s);
// Whether query row i sees key j under the shape's mask (bounds not checked).
bool visible(const AttentionShape& s, std::int64_t i, std::int64_t j);

void attention_forward(const AttentionShape& s, const float* q, const float* k, const float* v, float* o, float* lse);
// Overwrites dq, dk, dv (the caller sums partial results, e.g. across ring steps). o and lse may be the FINAL (merged)
// output and LSE of the full attention, as in ring backward: D = rowsum(dout * o).
void attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v, const float* o,
                        const float* lse, const float* dout, float* dq, float* dk, float* dv);
// Merges a partial result for the same queries into (o, lse) in place; lse = -inf means "nothing yet".
void lse_merge(int batch, int seq_q, int heads, int head_dim, float* o, float* lse, const float* o_part,
               const float* lse_part);

// The same in float64 (lse too), for the higher-precision checks of the GPU kernels and finite differences.
void attention_forward(const AttentionShape& s, const double* q, const double* k, const double* v, double* o,
                       double* lse);
void attention_backward(const AttentionShape& s, const double* q, const double* k, const double* v,
                        const double* o, const double* lse, const double* dout, double* dq, double* dk,
                        double* dv);
void lse_merge(int batch, int seq_q, int heads, int head_dim, double* o, double* lse, const double* o_part,
               const double* lse_part);

}  // namespace seqpar::ref

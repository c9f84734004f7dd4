#include "seqpar/sim/compute_cost.hpp"

namespace seqpar::sim {

namespace {
constexpr double kBf16 = 2.0;

double shape_efficiency(double peak_eff, double tokens, double half) {
  return tokens <= 0 ? 0.0 : peak_eff * tokens / (tokens + half);
}
}  // namespace

double mlp_gemm_flops(const Model& m, double tokens) {
  const double mats = m.mlp == MlpKind::swiglu ? 3.0 : 2.0;
  return 2.0 * tokens * mats * m.hidden * m.ffn_hidden;
}

double layer_gemm_flops(const Model& m, double tokens) {
  const double q = double(m.heads) * m.head_dim, kv = double(m.kv_heads) * m.head_dim;
  const double attention = 2.0 * tokens * m.hidden * (q + 2.0 * kv) + 2.0 * tokens * q * m.hidden;
  return attention + mlp_gemm_flops(m, tokens);
}

double head_gemm_flops(const Model& m, double tokens) { return 2.0 * tokens * m.hidden * double(m.vocab); }

double attention_flops(double batch, double seq_q, double seq_k, double heads, double head_dim) {
  return 4.0 * batch * seq_q * seq_k * heads * head_dim;
}

double gemm_time(const Gpu& g, double flops, double tokens, int launches) {
  const double eff = shape_efficiency(g.gemm_efficiency, tokens, g.gemm_half_tokens);
  return flops / (g.bf16_flops * eff) + launches * g.kernel_overhead_s;
}

double attention_time(const Gpu& g, double flops, double block_tokens, bool backward) {
  const double peak = backward ? g.attention_bwd_efficiency : g.attention_fwd_efficiency;
  const double eff = shape_efficiency(peak, block_tokens, g.attention_half_tokens);
  return flops / (g.bf16_flops * eff) + g.kernel_overhead_s;
}

double memory_bound_time(const Gpu& g, double bytes) { return bytes / g.hbm_bytes_per_s; }

double layer_elementwise_bytes_per_token(const Model& m) {
  // Two norms (read + write), two residual adds (two reads + a write), RoPE on q and k,
  // and the activation (SwiGLU reads gate and up, writes one; GELU reads one, writes one).
  const double h = m.hidden, qk = double(m.heads + m.kv_heads) * m.head_dim;
  const double act = m.mlp == MlpKind::swiglu ? 3.0 * m.ffn_hidden : 2.0 * m.ffn_hidden;
  return kBf16 * (4.0 * h + 6.0 * h + 2.0 * qk + act);
}

double selective_recompute_bytes_per_token(const Model& m) {
  const double act = m.mlp == MlpKind::swiglu ? 3.0 * m.ffn_hidden : 2.0 * m.ffn_hidden;
  return kBf16 * (4.0 * m.hidden + act);
}

}  // namespace seqpar::sim

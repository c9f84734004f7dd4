#include "seqpar/sim/compute_cost.hpp"

#include <algorithm>
#include <cmath>

#include "element_bytes.hpp"
#include "seqpar/sim/moe_cost.hpp"

namespace seqpar::sim {

double curve_efficiency(const EfficiencyCurve& c, double tokens) {
  if (tokens <= 0) return 0.0;
  if (c.half_tokens <= 0) return c.efficiency;
  // (L/h)^p / (1 + (L/h)^p) computed from the ratio: L^p itself overflows for large L and p.
  const double ratio = tokens / c.half_tokens;
  const double x = c.exponent == 1.0 ? ratio : std::pow(ratio, c.exponent);  // pow is the search's costliest call
  return std::isinf(x) ? c.efficiency : c.efficiency * x / (1.0 + x);
}

EfficiencyCurve gemm_curve(const Gpu& g) { return {g.gemm_efficiency, g.gemm_half_tokens, g.gemm_exponent}; }

EfficiencyCurve attention_curve(const Gpu& g, bool backward, const AttentionKernel& k) {
  const AttentionCurve* best = nullptr;
  double best_dist = 0;
  bool best_mask = false;
  for (const auto& c : g.attention_curves) {
    if (c.backward != backward) continue;
    // Head dimensions compare by ratio (64 is as far from 128 as 128 from 256); an unrecorded one
    // ranks after every recorded one.
    const double dist = c.head_dim > 0 && k.head_dim > 0 ? std::fabs(std::log(double(c.head_dim) / k.head_dim)) : 1e3;
    const bool mask = c.causal.has_value() && *c.causal == k.causal;
    if (!best || dist < best_dist || (dist == best_dist && mask && !best_mask)) {
      best = &c;
      best_dist = dist;
      best_mask = mask;
    }
  }
  if (best) return best->curve;
  double eff = backward ? g.attention_bwd_efficiency : g.attention_fwd_efficiency;
  // A score-bound kernel takes the same time per score at any head dimension (hardware.hpp).
  if (g.attention_score_bound_head_dim > 0 && k.head_dim > 0)
    eff = std::min(1.0, eff * k.head_dim / g.attention_score_bound_head_dim);
  return {eff, g.attention_half_tokens, 1.0};
}

double mlp_gemm_flops(const Model& m, double tokens) {
  if (m.moe()) return moe_mlp_flops(m, tokens);  // the active experts, the router (moe_cost.hpp)
  const double mats = m.mlp == MlpKind::swiglu ? 3.0 : 2.0;
  return 2.0 * tokens * mats * m.hidden * m.ffn_hidden;
}

namespace {
double softmax_gemm_flops(const Model& m, double tokens) {
  // Latent attention: its five projections (model.hpp), one multiply-add per weight and token.
  if (m.mla()) return 2.0 * tokens * double(m.attention_weight_params());
  const double q = double(m.heads) * m.head_dim, kv = double(m.kv_heads) * m.head_dim;
  return 2.0 * tokens * m.hidden * (q + 2.0 * kv) + 2.0 * tokens * q * m.hidden;
}
}  // namespace

double attention_gemm_flops(const Model& m, double tokens) {
  if (m.linear_layers() == 0) return softmax_gemm_flops(m, tokens);
  // The mean over the layers: a linear layer's in_proj_qkvz, in_proj_ba and out_proj in place of
  // q, k, v and o (model.hpp: linear_weight_params).
  const double l = m.linear_share();
  return (1 - l) * softmax_gemm_flops(m, tokens) + l * 2.0 * tokens * double(m.linear_weight_params());
}

double layer_gemm_flops(const Model& m, double tokens) { return attention_gemm_flops(m, tokens) + mlp_gemm_flops(m, tokens); }

double head_gemm_flops(const Model& m, double tokens) { return 2.0 * tokens * m.hidden * double(m.vocab); }

double attention_flops(double batch, double seq_q, double seq_k, double heads, double head_dim) {
  return 4.0 * batch * seq_q * seq_k * heads * head_dim;
}

double gemm_time(const Gpu& g, double flops, double tokens, int launches, double rate_scale) {
  const double eff = curve_efficiency(gemm_curve(g), tokens);
  return flops / (g.bf16_flops * eff * rate_scale) + launches * g.kernel_overhead_s;
}

double fp8_gemm_time(const Gpu& g, double flops, double tokens, int launches, double rate_scale) {
  const double eff = curve_efficiency({g.fp8_gemm_efficiency, g.fp8_gemm_half_tokens, g.fp8_gemm_exponent}, tokens);
  return flops / (g.fp8_flops * eff * rate_scale) + launches * g.kernel_overhead_s;
}

double attention_rate(const Gpu& g, double block_tokens, bool backward, const AttentionKernel& kernel) {
  const double fp8_eff = backward ? g.fp8_attention_bwd_efficiency : g.fp8_attention_fwd_efficiency;
  if (kernel.fp8 && fp8_eff > 0 && g.fp8_flops > 0)
    return g.fp8_flops * curve_efficiency({fp8_eff, g.attention_half_tokens, 1.0}, block_tokens);
  return g.bf16_flops * curve_efficiency(attention_curve(g, backward, kernel), block_tokens);
}

double attention_time(const Gpu& g, double flops, double block_tokens, bool backward, const AttentionKernel& kernel,
                      double rate_scale) {
  return flops / (attention_rate(g, block_tokens, backward, kernel) * rate_scale) + g.kernel_overhead_s;
}

double memory_bound_time(const Gpu& g, double bytes) { return bytes / g.hbm_bytes_per_s; }

// Two norms (read + write) and two residual adds (two reads + a write).
double layer_norm_region_bytes_per_token(const Model& m) { return kBf16 * (4.0 + 6.0) * m.hidden; }

double layer_elementwise_bytes_per_token(const Model& m) {
  // The norm regions, RoPE on q and k (none with learned positions, added once at the embedding),
  // and the activation (SwiGLU reads gate and up, writes one; GELU reads one, writes one).
  // Latent attention rotates the last rope_dim of each q head and the one shared rotary key.
  const double rotated = m.mla() ? double(m.heads + 1) * m.latent.rope_dim : double(m.heads + m.kv_heads) * m.head_dim;
  const double qk = m.positions == PositionKind::rope ? rotated : 0.0;
  const double act = m.mlp == MlpKind::swiglu ? 3.0 * m.mlp_width() : 2.0 * m.mlp_width();
  return layer_norm_region_bytes_per_token(m) + kBf16 * (2.0 * qk + act);
}

double selective_recompute_norm_bytes_per_token(const Model& m) { return kBf16 * 4.0 * m.hidden; }

double selective_recompute_bytes_per_token(const Model& m) {
  const double act = m.mlp == MlpKind::swiglu ? 3.0 * m.mlp_width() : 2.0 * m.mlp_width();
  return selective_recompute_norm_bytes_per_token(m) + kBf16 * act;
}

}  // namespace seqpar::sim

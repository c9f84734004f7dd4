// Compute cost: FLOPs (docs/ARCHITECTURE.md, Conventions: FLOPs) over an achievable rate that depends on shape.
// Efficiency rises with the token dimension as a Hill curve, eff * L^p / (L^p + L_half^p)
// (hardware.hpp: EfficiencyCurve): small GEMMs and short attention blocks fill the GPU poorly.
// Every kernel call also pays the GPU's kernel overhead. Memory-bound elementwise work is bytes
// over HBM bandwidth.
#pragma once
#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/model.hpp"

namespace seqpar::sim {

// Forward FLOPs of one layer's GEMMs (Q, K, V, output projection, MLP) for `tokens` rows.
double layer_gemm_flops(const Model& m, double tokens);
// Forward FLOPs of the attention's GEMMs alone (Q, K, V, output projection); with linear-attention
// layers the mean over the layers (theirs: in_proj_qkvz, in_proj_ba, out_proj).
double attention_gemm_flops(const Model& m, double tokens);
// Forward FLOPs of the MLP GEMMs alone (recomputed by tiled MLP); for a MoE model the active
// experts' and the router's, the mean over its layers (moe_cost.hpp: moe_mlp_flops).
double mlp_gemm_flops(const Model& m, double tokens);
// Forward FLOPs of the LM head.
double head_gemm_flops(const Model& m, double tokens);
// Attention core forward: 4 * batch * sq * sk * heads * d for an unmasked block. Callers pass
// Model::pair_dim() as d: QK^T over keys of head_dim and PV over values of v_dim (latent attention:
// 2 x 192 + 2 x 128 = 4 x 160 per pair and head), head_dim itself otherwise.
double attention_flops(double batch, double seq_q, double seq_k, double heads, double head_dim);

// GEMM kernels per layer (forward); the backward launches twice as many.
inline constexpr int kGemmsPerLayer = 7;

// The curve's efficiency at `tokens` (0 for no tokens).
double curve_efficiency(const EfficiencyCurve& c, double tokens);
EfficiencyCurve gemm_curve(const Gpu& g);

// `rate_scale`: the share of the figures' rate the kernels reach where they run (1 for the kernels
// alone; a framework's step efficiencies inside its steps: framework_terms.hpp).
double gemm_time(const Gpu& g, double flops, double tokens, int launches, double rate_scale = 1.0);
// The same in FP8: the GPU's FP8 peak and FP8 curve (hardware.hpp).
double fp8_gemm_time(const Gpu& g, double flops, double tokens, int launches, double rate_scale = 1.0);

// What an attention kernel call computes, beyond its FLOPs: the head dimension (0: unspecified)
// and whether it applies a causal mask (the diagonal block of a causal model; ring steps after the
// first are unmasked blocks).
// fp8: the plan runs attention in FP8 (core/precision.hpp), at the kernel's FP8 rate in each
// direction where it has one (hardware.hpp), else at its bf16 rate.
struct AttentionKernel {
  int head_dim = 0;
  bool causal = false;
  bool fp8 = false;
};
// The calibrated curve for a call: same direction, then the nearest head dimension (by ratio),
// then the same mask; the GPU's scalar attention figures when it has no curve of that direction.
EfficiencyCurve attention_curve(const Gpu& g, bool backward, const AttentionKernel& kernel);
// The rate (FLOP/s) one attention call reaches over a block of `block_tokens` keys: the FP8 peak
// times the kernel's FP8 efficiency where the call runs in FP8 and the kernel has that direction in
// FP8, else the bf16 peak times attention_curve's efficiency.
double attention_rate(const Gpu& g, double block_tokens, bool backward, const AttentionKernel& kernel);
// One attention kernel call over a block whose key (and query) length is `block_tokens`.
double attention_time(const Gpu& g, double flops, double block_tokens, bool backward,
                      const AttentionKernel& kernel = {}, double rate_scale = 1.0);
double memory_bound_time(const Gpu& g, double bytes);

// Bytes that one layer's elementwise ops (norms, RoPE, residuals, activation) move per token,
// forward; the backward moves about twice as much.
double layer_elementwise_bytes_per_token(const Model& m);
// The part of it in the norm and residual regions (the norms and the residual adds): under tensor
// parallelism a rank runs it over 1/tp of the tokens with sequence parallelism, over all of them
// without (framework.hpp: tp_sequence_parallel); the rest runs over its heads and MLP columns.
double layer_norm_region_bytes_per_token(const Model& m);
// The part of it that selective checkpointing recomputes (norms and the MLP activation), and the
// norms' part of that.
double selective_recompute_bytes_per_token(const Model& m);
double selective_recompute_norm_bytes_per_token(const Model& m);

}  // namespace seqpar::sim

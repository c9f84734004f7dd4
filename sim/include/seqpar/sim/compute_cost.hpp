// Compute cost: FLOPs (DESIGN.md §2 conventions) over an achievable rate that depends on shape.
// Efficiency rises with the token dimension as L / (L + L_half): small GEMMs and short attention
// blocks fill the GPU poorly. Memory-bound elementwise work is bytes over HBM bandwidth.
#pragma once
#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/model.hpp"

namespace seqpar::sim {

// Forward FLOPs of one layer's GEMMs (Q, K, V, output projection, MLP) for `tokens` rows.
double layer_gemm_flops(const Model& m, double tokens);
// Forward FLOPs of the MLP GEMMs alone (recomputed by tiled MLP).
double mlp_gemm_flops(const Model& m, double tokens);
// Forward FLOPs of the LM head.
double head_gemm_flops(const Model& m, double tokens);
// Attention core forward: 4 * batch * sq * sk * heads * d for an unmasked block.
double attention_flops(double batch, double seq_q, double seq_k, double heads, double head_dim);

// GEMM kernels per layer (forward); the backward launches twice as many.
inline constexpr int kGemmsPerLayer = 7;

double gemm_time(const Gpu& g, double flops, double tokens, int launches);
// One attention kernel call over a block whose key (and query) length is `block_tokens`.
double attention_time(const Gpu& g, double flops, double block_tokens, bool backward);
double memory_bound_time(const Gpu& g, double bytes);

// Bytes that one layer's elementwise ops (norms, RoPE, residuals, activation) move per token,
// forward; the backward moves about twice as much.
double layer_elementwise_bytes_per_token(const Model& m);
// The part of it that selective checkpointing recomputes (norms and the MLP activation).
double selective_recompute_bytes_per_token(const Model& m);

}  // namespace seqpar::sim

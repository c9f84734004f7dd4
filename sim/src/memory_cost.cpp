#include "seqpar/sim/memory_cost.hpp"

#include <algorithm>

#include "seqpar/core/tiling.hpp"
#include "seqpar/sim/attention_cost.hpp"
#include "seqpar/sim/framework_terms.hpp"

namespace seqpar::sim {

namespace {
constexpr double kBf16 = 2.0, kF32 = 4.0;
// Mixed-precision AdamW: fp32 master weights, first and second moments (ZeRO paper's K = 12).
constexpr double kOptimizerBytesPerParam = 12.0;
}  // namespace

StoredValues stored_values_per_token(const Model& m, const Plan& p, Checkpoint mode) {
  const double h = m.hidden, f = m.ffn_hidden, d = m.head_dim, a = m.heads;
  if (mode == Checkpoint::full) return {h, 0};  // the layer input alone
  const bool selective = mode == Checkpoint::selective;
  const int U = p.ulysses_degree;
  // KV heads stored per local token inside attention: replication to U heads costs memory too.
  const double kv = kv_heads_sent(m, U);
  double attn = h                          // norm input
                + (selective ? 0 : h)      // norm output = QKV GEMM input (recomputed if selective)
                + a * d + 2 * kv * d       // q, k, v as the attention kernel reads them
                + a * d * (U > 1 ? 2 : 1); // output; Ulysses keeps it in both layouts
  double mlp = h;                          // norm input
  if (!p.mem.tiled_mlp) {
    mlp += (selective ? 0 : h);            // norm output = first GEMM input
    const double kept = m.mlp == MlpKind::swiglu ? 3 : 2;  // gate, up, act / fc1, act
    mlp += (kept - (selective ? 1 : 0)) * f;               // selective recomputes the activation
  }
  // fp32: the LSE per head, and each norm's rstd (1 / RMS per token), which its backward needs and
  // PyTorch's RMSNorm keeps (selective recomputes the norm output from the input and this rstd);
  // TiledMLP recomputes the MLP norm, rstd included, inside each tile.
  const double rstd = 1 + (p.mem.tiled_mlp ? 0 : 1);
  return {attn + mlp, a + rstd};
}

double stored_bytes_per_token(const Model& m, const Plan& p, Checkpoint mode) {
  const StoredValues v = stored_values_per_token(m, p, mode);
  return kBf16 * v.bf16 + kF32 * v.fp32;
}

double alst_tile_rows(const Model& m, const Plan& p) {
  const std::int64_t local = p.sp > 0 ? p.seq_len / p.sp : p.seq_len;
  return double(p.micro_batch) * double(alst_tile_tokens(local, m.hidden));
}

MemoryEstimate estimate_memory(const Model& m, const System& s, const Plan& p) {
  MemoryEstimate e;
  MemoryBreakdown& b = e.peak;
  const double psi = double(m.total_params());
  const double D = p.gpus;  // ZeRO shards over the data x sequence parallel group
  const int z = p.mem.zero;
  b.parameters = kBf16 * psi / (z >= 3 ? D : 1);
  b.gradients = kBf16 * psi / (z >= 2 ? D : 1);
  const double opt = kOptimizerBytesPerParam * psi / (z >= 1 ? D : 1);
  b.optimizer_states = p.mem.offload_optimizer ? 0 : opt;
  b.reserved = s.gpu.reserved_bytes;

  const AttentionShapes sh = attention_shapes(m, p);
  const double T = sh.batch * sh.local_tokens;  // tokens in this rank's residual stream
  // A calibrated profile's framework memory (reserve and per-token) counts as reserved; 0 otherwise.
  b.reserved += framework_reserved_bytes(s.framework, T);
  const double h = m.hidden, f = m.ffn_hidden, d = m.head_dim, a = m.heads;
  const bool full = p.mem.checkpoint == Checkpoint::full;

  // Stored activations: every layer's, plus the final norm's input and output (LM head input).
  const double per_layer = stored_bytes_per_token(m, p, p.mem.checkpoint) * T;
  const double final_norm = 2 * kBf16 * h * T;
  const bool offload = full && p.mem.offload_checkpoints;
  // Offloaded checkpoints: every layer input goes to the host (ALST offloads each checkpoint as
  // the forward makes it, and the backward copies it back), and at most two are on the GPU at a
  // time (the one in use, the next prefetched; in the forward, the newest and the one in flight).
  const double on_device = offload ? std::min(2.0, double(m.layers)) : double(m.layers);
  b.activations = on_device * per_layer + final_norm;
  e.host_bytes = (offload ? m.layers * per_layer : 0) + (p.mem.offload_optimizer ? opt : 0);

  // Layer-backward phase.
  const double grad_stream = 2 * kBf16 * h * T;  // gradient of the layer output and of the residual
  const double recompute = full ? stored_bytes_per_token(m, p, Checkpoint::none) * T : 0;
  const double mats = m.mlp == MlpKind::swiglu ? 2 : 1;  // gradients of the MLP intermediates
  const double tile = std::min(T, alst_tile_rows(m, p));
  const double mlp_ws = p.mem.tiled_mlp ? kBf16 * tile * f * (mats + (mats + 1))
                                        : kBf16 * T * f * mats;
  const double zero3 = (z >= 3 && D > 1) ? 3 * kBf16 * double(m.params_per_layer()) : 0;
  const double working = grad_stream + recompute + mlp_ws + zero3;
  const double kv_stored = sh.kv_heads_sent;
  double attn_buf = kF32 * T * a * d                        // dQ accumulator
                    + kBf16 * T * (a + 2 * kv_stored) * d;  // dQ, dK, dV outputs
  if (p.ulysses_degree > 1) attn_buf += 2 * sh.qkv_a2a_bytes;     // all-to-all send and receive
  // Ring: K,V double buffer, dK,dV travelling double buffer (fp32), local dK,dV accumulator (fp32).
  if (p.ring_degree > 1) attn_buf += (2 + 4 + 2) * sh.kv_block_bytes;
  const double layer_phase = working + attn_buf;

  // Loss phase: bf16 logits, fp32 logits for the softmax, bf16 gradient, per token and vocab entry.
  const double loss_tokens = p.mem.tiled_loss ? tile : T;
  const double logits = (kBf16 + kF32 + kBf16) * loss_tokens * m.vocab;
  const double loss_working = kBf16 * h * T + ((z >= 3 && D > 1) ? 2 * kBf16 * double(m.vocab) * h : 0);
  const double loss_phase = logits + loss_working;

  const double base = b.parameters + b.gradients + b.optimizer_states + b.activations + b.reserved;
  e.layer_phase_bytes = base + layer_phase;
  e.loss_phase_bytes = base + loss_phase;
  if (layer_phase >= loss_phase) {
    e.peak_phase = "layer-backward";
    b.working = working;
    b.attention_buffers = attn_buf;
  } else {
    e.peak_phase = "loss";
    b.working = loss_working;
    b.logits = logits;
  }
  return e;
}

}  // namespace seqpar::sim

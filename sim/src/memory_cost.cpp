#include "seqpar/sim/memory_cost.hpp"

#include <algorithm>

#include "seqpar/core/tiling.hpp"
#include "seqpar/sim/attention_cost.hpp"
#include "seqpar/sim/framework_terms.hpp"
#include "seqpar/sim/methods.hpp"

namespace seqpar::sim {

namespace {
constexpr double kBf16 = 2.0, kF32 = 4.0;
// Mixed-precision AdamW: fp32 master weights, first and second moments (ZeRO paper's K = 12).
constexpr double kOptimizerBytesPerParam = 12.0;
// MLP intermediates the forward keeps: gate, up and the activation (SwiGLU) / fc1 and the
// activation (GELU); and the gradients of them the backward holds at once: d(act), d(gate),
// d(up) / d(act), d(fc1).
double mlp_kept(const Model& m) { return m.mlp == MlpKind::swiglu ? 3 : 2; }
double mlp_grads(const Model& m) { return m.mlp == MlpKind::swiglu ? 3 : 2; }
}  // namespace

namespace {
// What one layer stores, split at the attention / MLP boundary: the backward frees the MLP's part
// before it reaches the attention's (train/src/model.cpp, block_backward).
struct LayerStore {
  StoredValues attn, mlp;
};

LayerStore layer_store(const Model& m, const Plan& p, Checkpoint mode) {
  const double h = m.hidden, f = m.ffn_hidden, d = m.head_dim, a = m.heads;
  if (mode == Checkpoint::full) return {{h, 0}, {0, 0}};  // the layer input alone
  const bool selective = mode == Checkpoint::selective;
  const int U = p.ulysses_degree;
  // KV heads stored per local token inside attention: replication to U heads costs memory too.
  const double kv = kv_heads_sent(m, U);
  LayerStore s;
  s.attn.bf16 = h                          // norm input
                + (selective ? 0 : h)      // norm output = QKV GEMM input (recomputed if selective)
                + a * d + 2 * kv * d       // q, k, v as the attention kernel reads them
                + a * d * (U > 1 ? 2 : 1); // output; Ulysses keeps it in both layouts
  // fp32: the LSE per head, and the norm's rstd (1 / RMS per token), which its backward needs and
  // PyTorch's RMSNorm keeps (selective recomputes the norm output from the input and this rstd).
  s.attn.fp32 = a + 1;
  s.mlp.bf16 = h;                          // norm input
  if (!p.mem.tiled_mlp) {
    s.mlp.bf16 += (selective ? 0 : h);     // norm output = first GEMM input
    s.mlp.bf16 += (mlp_kept(m) - (selective ? 1 : 0)) * f;  // selective recomputes the activation
    s.mlp.fp32 = 1;                        // the norm's rstd; TiledMLP recomputes it in each tile
  }
  return s;
}

double bytes(const StoredValues& v) { return kBf16 * v.bf16 + kF32 * v.fp32; }
}  // namespace

StoredValues stored_values_per_token(const Model& m, const Plan& p, Checkpoint mode) {
  const LayerStore s = layer_store(m, p, mode);
  return {s.attn.bf16 + s.mlp.bf16, s.attn.fp32 + s.mlp.fp32};
}

double stored_bytes_per_token(const Model& m, const Plan& p, Checkpoint mode) {
  const StoredValues v = stored_values_per_token(m, p, mode);
  return kBf16 * v.bf16 + kF32 * v.fp32;
}

double alst_tile_rows(const Model& m, const Plan& p) {
  const std::int64_t local = p.sp > 0 ? p.seq_len / p.sp : p.seq_len;
  return double(p.micro_batch) * double(alst_tile_tokens(local, m.hidden));
}

// The transient phases of the step and what each holds (the order train/src/model.cpp runs; a
// framework's autograd frees the same tensors at the same points). T: the rank's tokens; h, f:
// hidden and MLP widths; "lower": the stored activations of the layers below, whose backward is
// still to come. The peak of a phase is the MAX over its sub-phases, never their sum: what one
// sub-phase frees is gone before the next allocates.
//
// Loss (before the layers' backward): every layer's stored activations (full checkpointing: the
// layer inputs, all on the host when offloaded: the forward waited for the last copy), the final
// norm's input, output and rstd, and
//   L1 head:       the logits of one tile (tiled loss) or of all T tokens, at the framework's bytes
//                  per logit; the gradient of the final norm output (h); the per-token loss (fp32).
//   L2 final norm: the logits gone; the gradients of its output and input (2h).
// Layer backward, at the top layer (every lower layer's activations are still alive):
//   A recompute (full checkpointing only): the kept layer inputs (offloaded: the one in use and
//                  the next prefetched), the layer's activations rebuilt as "none" stores them, the
//                  block output (h), the residual gradient (h); TiledMLP: one tile's forward
//                  (norm output, the MLP intermediates, rstd).
//   B MLP backward: the layer's activations; the residual gradient and the gradient of the norm
//                  output (2h); untiled: the gradients of the MLP intermediates (3f SwiGLU), and
//                  under selective the recomputed norm output and activation (h + f); TiledMLP:
//                  one tile's recomputed forward and backward (norm output and its gradient 2h,
//                  intermediates and their gradients 6f, rstd), nothing of the other tiles.
//   C attention backward: the MLP's part of the layer freed; its attention part; dO, dQ, dK, dV
//                  in the local layout, and the method's buffers:
//                  Ulysses (U > 1): dO, dQ, dK, dV in the head-sharded layout, plus one
//                    all-to-all's send and receive buffers at a time (dO in; dQ, dK, dV out, with
//                    the replicated KV heads' gradients before their reduction);
//                  ring (R > 1): K,V double buffer (bf16), the travelling dK,dV in and the local
//                    dK,dV accumulator double buffer (fp32), the dQ accumulator (fp32), and one
//                    block's dQ, dK, dV (bf16; one sequence's);
//                  all-gather KV (R > 1): the re-gathered K,V of the whole sequence (bf16), its
//                    dK,dV accumulators (fp32), one call's dK,dV (all_gather_backward_buffers);
//                  SP = 1: none (one flash-attention call writes dQ, dK, dV directly).
//   D QKV backward: the attention's saved tensors and dO freed; the layer input and norm output
//                  (selective recomputes it), dQ, dK, dV, the two gradients (2h).
// ZeRO-3 gathers the layer's parameters (bf16) around its compute in every layer sub-phase.
namespace {
struct Phase {
  double activations = 0, attention_buffers = 0, working = 0, logits = 0;
  double total() const { return activations + attention_buffers + working + logits; }
};
const Phase& larger(const Phase& a, const Phase& b) { return b.total() > a.total() ? b : a; }

// All-gather KV context parallelism's attention-backward buffers (R > 1; sub-phase C above), as
// train/src/sp_attention.cpp allocates them: the whole sequence's K and V gathered again and laid
// out in sequence order (bf16), the dK,dV accumulators of the whole sequence (fp32, reduce-scattered
// at the end), and one kernel call's dK,dV over its key prefix (bf16, at most the whole sequence,
// one sequence's), beside the kernel's workspace. No dQ or output accumulator: each query chunk is
// one call, which writes its dQ in place. The gather's rank-order buffer (half of K,V at a time) and
// the reduce-scatter's result are alive only while the accumulators or these temporaries are not.
double all_gather_backward_buffers(const Model& m, const System& s, const Plan& p, const AttentionShapes& sh) {
  const double kv_values = sh.batch * double(p.seq_len) * sh.kv_heads_local * m.head_dim;  // one of K, V
  const double one_call = 2 * sh.key_tokens * sh.kv_heads_local * m.head_dim;               // its dK, dV
  return attention_kernel_workspace_bytes(m, s, p) + kBf16 * 2 * kv_values + kF32 * 2 * kv_values + kBf16 * one_call;
}

// The method's attention-backward buffers (sub-phase C above).
double attention_backward_buffers(const Model& m, const System& s, const Plan& p, const AttentionShapes& sh,
                                  double T) {
  if (kv_all_gather(p)) return all_gather_backward_buffers(m, s, p, sh);
  const double d = m.head_dim;
  double ring = attention_kernel_workspace_bytes(m, s, p);
  if (p.ring_degree > 1) {
    const double kvb = sh.kv_block_bytes;                  // K and V of one ring step, bf16
    const double dq_acc = kF32 * T * m.heads * d;          // = B x (N/R) x (heads/U) x d
    const double block = kBf16 * (sh.block_tokens * sh.heads_local + 2 * sh.attn_tokens * sh.kv_heads_local) * d;
    ring += (2 + 6) * kvb + dq_acc + block;                // 2: K,V double; 6: 3 fp32 dK,dV
  }
  if (p.ulysses_degree == 1) return ring;
  const double q = kBf16 * T * m.heads * d, a2a = sh.qkv_a2a_bytes;  // a2a: q, k, v (sent heads)
  const double grads = a2a + q;                            // dO, dQ, dK, dV, head-sharded
  const bool replicated = sh.kv_heads_sent > m.kv_heads;
  const double wide = replicated ? 2 * kBf16 * T * sh.kv_heads_sent * d : 0;
  const double gather = grads + 2 * q;                     // dO's all-to-all
  const double inside = grads + ring;
  const double scatter = a2a + wide + 2 * a2a;             // dQ, dK, dV's all-to-all
  return std::max({gather, inside, scatter});
}
}  // namespace

double attention_kernel_workspace_bytes(const Model& m, const System& s, const Plan& p) {
  const AttentionShapes sh = attention_shapes(m, p);
  // One kernel call's queries: one sequence's block (a zigzag ring block is half the rank's).
  const double rows = sh.block_tokens * sh.heads_local;
  const bool expands = s.gpu.attention_bwd_expands_kv_grads && sh.kv_heads_local < sh.heads_local;
  // dK and dV per query head for the call's keys (at most the rank's attention tokens; all-gather:
  // the whole sequence).
  const double kv_grads = expands ? 2 * kBf16 * sh.key_tokens * sh.heads_local * m.head_dim : 0;
  return kF32 * rows * (m.head_dim + 1) + kv_grads;
}

MemoryEstimate estimate_memory(const Model& m, const System& s, const Plan& p) {
  MemoryEstimate e;
  MemoryBreakdown& b = e.peak;
  const double psi = double(m.total_params());
  const double D = p.gpus;  // ZeRO shards over the data x sequence parallel group
  const int z = p.mem.zero;
  b.parameters = kBf16 * psi / (z >= 3 ? D : 1);
  b.gradients = s.framework.gradient_bytes_per_param * psi / (z >= 2 ? D : 1);
  const double opt = kOptimizerBytesPerParam * psi / (z >= 1 ? D : 1);
  b.optimizer_states = p.mem.offload_optimizer ? 0 : opt;
  b.reserved = s.gpu.reserved_bytes;

  const AttentionShapes sh = attention_shapes(m, p);
  const double T = sh.batch * sh.local_tokens;  // tokens in this rank's residual stream
  // A calibrated profile's framework memory (reserve and per-token) counts as reserved; 0 otherwise.
  b.reserved += framework_reserved_bytes(s.framework, T);
  const double h = m.hidden, f = m.ffn_hidden, d = m.head_dim, a = m.heads, L = m.layers;
  const Checkpoint mode = p.mem.checkpoint;
  const bool full = mode == Checkpoint::full, selective = mode == Checkpoint::selective;
  const bool tiled = p.mem.tiled_mlp;

  // Stored activations per layer; full checkpointing's are the layer inputs.
  const double per_layer = stored_bytes_per_token(m, p, mode) * T;
  const bool offload = full && p.mem.offload_checkpoints;
  // Offloaded checkpoints: every layer input goes to the host (ALST offloads each checkpoint as
  // the forward makes it, and the backward copies it back), and at most two are on the GPU at a
  // time in the backward (the one in use, the next prefetched).
  const double on_device = offload ? std::min(2.0, L) : L;
  e.host_bytes = (offload ? L * per_layer : 0) + (p.mem.offload_optimizer ? opt : 0);
  e.device_checkpoint_bytes = full ? on_device * per_layer : 0;

  const double hT = kBf16 * h * T;  // one bf16 hidden-wide tensor of the rank's tokens
  // The batch on the device in every phase: token ids, labels and positions, int32 each (PyTorch's
  // int64 ids would be twice this; either is a fraction of a percent of a layer's activations).
  const double batch = 3 * 4.0 * T;
  const double zero3 = (z >= 3 && D > 1) ? 3 * kBf16 * double(m.params_per_layer()) : 0;
  const double tile = std::min(T, alst_tile_rows(m, p));

  // Layer backward (sub-phases A-D above), at the top layer.
  const LayerStore cur = layer_store(m, p, full ? Checkpoint::none : mode);
  const double lower = full ? e.device_checkpoint_bytes - hT : (L - 1) * per_layer;  // + this layer's input
  const double layer_all = lower + (bytes(cur.attn) + bytes(cur.mlp)) * T;
  const double layer_attn = lower + bytes(cur.attn) * T;
  const double kept_f = mlp_kept(m) * f;
  Phase recompute, mlp, attn, qkv;
  if (full) {
    recompute.activations = layer_all + hT;
    recompute.working = batch + hT + zero3 + (tiled ? tile * (kBf16 * (h + kept_f) + kF32) : 0);
  }
  mlp.activations = layer_all;
  mlp.working = batch + 2 * hT + zero3 +
                (tiled ? tile * (kBf16 * (2 * h + kept_f + mlp_grads(m) * f) + kF32)
                       : kBf16 * T * (mlp_grads(m) * f + (selective ? h + f : 0)));
  const double dqkv = kBf16 * T * (a + 2.0 * m.kv_heads) * d;
  attn.activations = layer_attn;
  attn.working = batch + 2 * hT + zero3 + kBf16 * T * a * d + dqkv;  // + dO
  attn.attention_buffers = attention_backward_buffers(m, s, p, sh, T);
  // QKV backward: the attention's saved q, k, v, o, LSE are gone; the norm output is back.
  qkv.activations = lower + kBf16 * T * (selective ? h : 2 * h) + kF32 * T;  // input, norm output, rstd
  qkv.working = batch + 2 * hT + zero3 + dqkv + (selective ? hT : 0);
  const Phase& layer = larger(larger(recompute, mlp), larger(attn, qkv));

  // Loss (L1 and L2 above): the layers' stored activations and the final norm's.
  const double kept = (full ? (offload ? 0 : L * per_layer) : L * per_layer) + 2 * hT + kF32 * T;
  const double loss_tokens = p.mem.tiled_loss ? tile : T;
  Phase head, final_norm;
  head.activations = final_norm.activations = kept;
  head.logits = s.framework.loss_bytes_per_logit * loss_tokens * m.vocab;
  e.loss_logits_bytes = head.logits;
  const double zero3_head = (z >= 3 && D > 1) ? 2 * kBf16 * double(m.vocab) * h : 0;
  head.working = batch + hT + kF32 * T + zero3_head;
  final_norm.working = batch + 2 * hT;
  const Phase& loss = larger(head, final_norm);

  const double base = b.parameters + b.gradients + b.optimizer_states + b.reserved;
  e.layer_phase_bytes = base + layer.total();
  e.loss_phase_bytes = base + loss.total();
  const bool layer_peak = layer.total() >= loss.total();
  const Phase& at = layer_peak ? layer : loss;
  e.peak_phase = layer_peak ? "layer-backward" : "loss";
  b.activations = at.activations;
  b.attention_buffers = at.attention_buffers;
  b.working = at.working;
  b.logits = at.logits;
  return e;
}

}  // namespace seqpar::sim

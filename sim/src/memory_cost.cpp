#include "seqpar/sim/memory_cost.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "seqpar/core/tiling.hpp"
#include "seqpar/sim/attention_cost.hpp"
#include "seqpar/sim/framework_terms.hpp"
#include "seqpar/sim/methods.hpp"
#include "seqpar/sim/tensor_parallel_cost.hpp"
#include "seqpar/sim/linear_attention.hpp"
#include "seqpar/sim/moe_cost.hpp"
#include "element_bytes.hpp"

namespace seqpar::sim {

namespace {

// One named term a phase holds.
struct Item {
  std::string_view name;  // a literal, or a term's name in the framework (alive for the estimate)
  MemPart part;
  double bytes;
};

// What a phase holds: its sums by part always, and its named terms only when Named (the `simulate`
// table and memory_terms). The planner's search instantiates Items<false>: a few doubles, no list,
// so a plan's estimate makes no heap allocation.
template <bool Named>
class Items {
 public:
  Items() = default;
  Items(std::string_view name, MemPart part, double bytes) { add(name, part, bytes); }
  void add(std::string_view name, MemPart part, double bytes) {
    parts_[static_cast<std::size_t>(part)] += bytes;
    total_ += bytes;
    if constexpr (Named) list_.push_back({name, part, bytes});
  }
  // Every term of `from`, `times` over (skipped when not positive); under `rename` when given, one
  // term per part (the layers below hold a dozen tensors each: one line, not a dozen of one name).
  void add_all(const Items& from, double times = 1, std::string_view rename = {}) {
    if (times <= 0) return;
    for (std::size_t k = 0; k < parts_.size(); ++k) parts_[k] += from.parts_[k] * times;
    total_ += from.total_ * times;
    if constexpr (Named) {
      if (rename.empty()) {
        for (const Item& i : from.list_) list_.push_back({i.name, i.part, i.bytes * times});
        return;
      }
      for (std::size_t k = 0; k < parts_.size(); ++k)
        if (from.parts_[k] != 0) list_.push_back({rename, static_cast<MemPart>(k), from.parts_[k] * times});
    }
  }
  double total() const { return total_; }
  double part(MemPart p) const { return parts_[static_cast<std::size_t>(p)]; }
  // The named terms (none unless Named).
  std::span<const Item> list() const {
    if constexpr (Named) return list_;
    else return {};
  }

 private:
  struct NoList {};
  std::array<double, kMemParts> parts_{};
  double total_ = 0;
  [[no_unique_address]] std::conditional_t<Named, std::vector<Item>, NoList> list_;
};
template <bool Named>
double total(const Items<Named>& v) {
  return v.total();
}
template <bool Named>
Items<Named> join(std::initializer_list<const Items<Named>*> parts) {
  Items<Named> v;
  for (const Items<Named>* i : parts) v.add_all(*i);
  return v;
}

// A phase's total alone, added up as Items adds its own (the same terms in the same order, so the
// two agree to the bit): the estimate compares the layer's sub-phases by it and builds the parts of
// the peak's alone.
class Total {
 public:
  void add(std::string_view, MemPart, double bytes) { total_ += bytes; }
  template <class From>
  void add_all(const From& from, double times = 1, std::string_view = {}) {
    if (times <= 0) return;
    total_ += from.total() * times;
  }
  double total() const { return total_; }

 private:
  double total_ = 0;
};

// The sum of `parts` in an accumulator A (Items or Total), as join() adds them.
template <class A, class... From>
A sum(const From&... parts) {
  A v;
  (v.add_all(parts), ...);
  return v;
}

// The sizes a tensor's widths stand for, on this model and plan.
struct Sizes {
  std::array<double, kWidths> width{};      // values per token, by Width
  std::array<double, kConstants> constant{};  // values, by Constant
  double layers = 0, layer_params = 0;
  double tokens = 0, tile = 0, loss_rows = 0;  // rows of Rows::all, tile, loss
  bool fp8_gemm = false;  // the linear layers run in FP8: a term's fp8_bytes applies
  // Linear-attention layers (linear_attention.hpp): their share of the layers, the widths of the
  // inventory that are softmax attention's (q, kv, kv_attention, heads: a linear layer has none of
  // them), and what a linear layer stores instead, per token.
  double linear_share = 0;
  std::array<double, kWidths> softmax_width{};
  LinearStored linear{};
};

}  // namespace

// Under tensor parallelism (Megatron with sequence parallelism) a rank holds, per token of its SP
// shard, 1/tp of every width: the per-head and per-column ones (q, kv, heads, ffn; KV heads
// replicated when tp exceeds them) inside the TP region, the hidden ones because the norm and
// residual regions hold 1/tp of the tokens and the GEMM inputs are stored as those shards and
// gathered again for the backward (Korthikanti et al., arXiv 2205.05198, Sec. 4.2.2: every term
// of sbh(34 + 5as/h) divided by t), and the logits' vocabulary (vocab-parallel cross entropy).
// Without sequence parallelism the norm and residual regions, and the GEMM inputs they produce,
// are whole on every TP rank (Sec. 4.2.1: sbh(10 + 24/t + 5as/(ht))): the hidden width is not divided.
// Per-token scalars (`one`: token ids, labels; `norm_stats`: the norms' fp32 statistics) and RoPE's tables
// are not divided: the batch enters every TP rank whole.
std::array<double, kWidths> rank_widths(const Model& m, const Framework& f, const Plan& p) {
  std::array<double, kWidths> w{};
  const double d = m.head_dim, t = p.tp > 0 ? p.tp : 1;
  auto set = [&](Width k, double v) { w[static_cast<std::size_t>(k)] = v; };
  set(Width::hidden, f.tp_sequence_parallel ? m.hidden / t : m.hidden);
  set(Width::ffn, m.mlp_width() / t);  // ffn_hidden for a dense model; a MoE token's experts' rows
  set(Width::q, double(m.heads) / t * d);
  // K and V count as two tensors of `kv` (framework.hpp): their mean width per head (latent
  // attention: keys head_dim, values v_dim wide; head_dim otherwise).
  set(Width::kv, double(kv_heads_per_tp_rank(m.kv_heads, p.tp)) * m.pair_dim());
  set(Width::kv_attention, double(kv_heads_sent(m, p)) * m.pair_dim());
  set(Width::heads, m.heads / t);
  set(Width::head_dim, m.head_dim);
  set(Width::one, 1);
  set(Width::vocab, m.vocab / t);
  set(Width::fc1, (m.moe() ? 2 * m.mlp_width() : double(m.fc1_columns())) / t);
  set(Width::rope, m.positions == PositionKind::rope ? m.head_dim : 0);
  set(Width::norm_stats, m.norm == NormKind::layernorm ? 2 : 1);
  return w;
}

namespace {

Sizes sizes(const Model& m, const Framework& f, const Plan& p, const AttentionShapes& sh) {
  Sizes z;
  const double d = m.head_dim, t = p.tp > 0 ? p.tp : 1;
  z.width = rank_widths(m, f, p);
  z.layer_params = m.moe() ? moe_layer_params_per_rank(m, p) : double(m.params_per_layer()) / t;
  if (m.linear_layers() > 0) {
    z.linear_share = m.linear_share();
    for (Width k : {Width::q, Width::kv, Width::kv_attention, Width::heads})
      z.softmax_width[static_cast<std::size_t>(k)] = z.width[static_cast<std::size_t>(k)];
    z.linear = linear_stored_values_per_token(m, p);
  }
  z.layers = m.layers;
  z.fp8_gemm = p.precision.has(Fp8Part::gemm);
  auto con = [&](Constant c, double v) { z.constant[static_cast<std::size_t>(c)] = v; };
  const double h = m.hidden;
  con(Constant::hidden_q, h * m.heads * d / t);
  con(Constant::hidden_kv, h * kv_heads_per_tp_rank(m.kv_heads, p.tp) * d);
  con(Constant::hidden_ffn, m.moe() ? h * moe_local_mlp_columns(m, p) / t : h * m.ffn_hidden / t);
  con(Constant::vocab_hidden, double(m.vocab) * h / t);
  con(Constant::layer_params, z.layer_params);
  con(Constant::hidden_fc1, m.moe() ? h * 2 * moe_local_mlp_columns(m, p) / t : h * double(m.fc1_columns()) / t);
  z.tokens = sh.batch * sh.local_tokens;
  z.tile = std::min(z.tokens, alst_tile_rows(m, p));
  // Tiled loss: ALST's tiles; else the framework's own chunks (one at a time), or all the rows.
  z.loss_rows = p.mem.tiled_loss ? z.tile : std::ceil(z.tokens / f.loss_chunks);
  return z;
}

double values_per_token(const TensorTerm& t, const Sizes& z) { return t.per_token.dot(z.width); }

double rows(const TensorTerm& t, const Sizes& z) {
  switch (t.rows) {
    case Rows::tile: return z.tile;
    case Rows::loss: return z.loss_rows;
    case Rows::all: break;
  }
  return z.tokens;
}

double constant_values(const TensorTerm& t, const Sizes& z) { return t.constant.dot(z.constant); }

// Bytes per value of a term in this plan: its FP8 size where the linear layers run in FP8 and the
// framework keeps it as an FP8 GEMM input.
double value_bytes(const TensorTerm& t, const Sizes& z) { return z.fp8_gemm && t.fp8_bytes > 0 ? t.fp8_bytes : t.bytes; }

double term_bytes(const TensorTerm& t, const Sizes& z) {
  return value_bytes(t, z) * (values_per_token(t, z) * rows(t, z) + constant_values(t, z)) * (t.times_layers ? z.layers : 1);
}

// A layer term's bytes in the mean layer: without its softmax-attention widths in the linear
// layers' share (the term's own bytes, bit for bit, without linear layers).
double layer_term_bytes(const TensorTerm& t, const Sizes& z) {
  const double bytes = term_bytes(t, z);
  if (z.linear_share == 0) return bytes;
  const double softmax = value_bytes(t, z) * t.per_token.dot(z.softmax_width) * rows(t, z) * (t.times_layers ? z.layers : 1);
  return bytes - z.linear_share * softmax;
}

// What the linear layers store instead, per layer in the mean layer (0 without them).
constexpr std::string_view kLinearStored = "linear-attention layers' tensors (gated DeltaNet: conv input and output, "
                                           "q, k, A, beta, output, gate; the layers' share)";
double linear_stored_bytes(const Sizes& z) {
  return z.linear_share * (kBf16 * z.linear.bf16 + kF32 * z.linear.fp32) * z.tokens;
}

// The terms of a list that apply to the plan.
template <bool Named>
Items<Named> terms(const std::vector<TensorTerm>& list, const Sizes& z, const Plan& p) {
  Items<Named> out;
  for (const TensorTerm& t : list)
    if (t.when.holds(p)) out.add(t.name, t.part, term_bytes(t, z));
  return out;
}

// The query rows of one attention call on the rank whose calls are longest: a sequence's whole
// group (N / R). Under zigzag (and all-gather's head/tail chunks) rank R-1 holds chunks R-1 and R,
// which are adjacent, and the step's layout joins them into one segment (train/src/seq_layout.cpp,
// group_segments): its calls span N / R queries where the other ranks' span N / 2R. The peak that
// decides whether a plan fits is that rank's.
double query_rows(const AttentionShapes& sh) { return sh.attn_tokens; }

// The layer entries alive in a backward sub-phase: those not yet freed (freed after `until`).
bool alive_in(const TensorTerm& t, Until sub) { return static_cast<int>(t.until) >= static_cast<int>(sub); }

// All-gather KV context parallelism's attention-backward buffers (R > 1), as
// train/src/sp_attention.cpp allocates them: the whole sequence's K and V gathered again and laid
// out in sequence order (bf16), the dK,dV accumulators of the whole sequence (fp32, reduce-scattered
// at the end), and one kernel call's dK,dV over its key prefix (bf16, at most the whole sequence,
// one sequence's), beside the kernel's workspace. No dQ or output accumulator: each query chunk is
// one call, which writes its dQ in place. The gather's rank-order buffer (half of K,V at a time) and
// the reduce-scatter's result are alive only while the accumulators or these temporaries are not.
double all_gather_backward_buffers(const Model& m, const Plan& p, const AttentionShapes& sh, double workspace) {
  const double kv_values = sh.batch * double(p.seq_len) * sh.kv_heads_local * m.head_dim;  // one of K, V
  const double one_call = 2 * sh.key_tokens * sh.kv_heads_local * m.head_dim;               // its dK, dV
  return workspace + kBf16 * 2 * kv_values + kF32 * 2 * kv_values + kBf16 * one_call;
}

// The method's attention-backward buffers, as seqpar-train's SpAttention allocates them
// (train/src/sp_attention.cpp), with the kernel's workspace where it is held per call:
//   all-gather KV (R > 1): all_gather_backward_buffers;
//   ring (R > 1): the travelling K,V and the next block (bf16), the dK,dV accumulator double buffer
//     and the incoming dK,dV (fp32), the dQ accumulator (fp32), and one block's dQ, dK, dV (bf16);
//     or the framework's own (Framework::ring_backward), per token of the rank;
//   Ulysses (U > 1): dO, dQ, dK, dV in the head-sharded layout, plus one all-to-all's send and
//     receive buffers at a time (dO in; dQ, dK, dV out, packed or per tensor as the framework
//     moves them, with the replicated KV heads' gradients before their reduction).
double method_buffers(const Model& m, const Framework& f, const Plan& p, const AttentionShapes& sh, const Sizes& z,
                      double workspace) {
  const double T = z.tokens;
  if (kv_all_gather(p)) return all_gather_backward_buffers(m, p, sh, workspace);
  const double d = m.head_dim;
  double ring = workspace;
  if (p.ring_degree > 1 && f.ring_backward_given) {
    ring += total(terms<false>(f.ring_backward, z, p));
  } else if (p.ring_degree > 1) {
    const double kvb = sh.kv_block_bytes;                  // K and V of one ring step, bf16
    const double dq_acc = kF32 * T * sh.heads_tp * d;      // = B x (N/R) x (heads/(tp U)) x d
    // One call's dQ over the longest query segment (query_rows) and dK, dV over a whole group.
    const double block = kBf16 * (query_rows(sh) * sh.heads_local * d + 2 * sh.attn_tokens * sh.kv_heads_local * m.pair_dim());
    ring += (2 + 6) * kvb + dq_acc + block;                // 2: K,V double; 6: 3 fp32 dK,dV
  }
  if (p.ulysses_degree == 1) return ring;
  const double q = kBf16 * T * sh.heads_tp * d, a2a = sh.qkv_a2a_bytes;  // a2a: q, k, v (sent heads)
  const double grads = a2a + q;                            // dO, dQ, dK, dV, head-sharded
  const bool replicated = sh.kv_heads_sent > sh.kv_heads_tp;
  const double wide = replicated ? 2 * kBf16 * T * sh.kv_heads_sent * d : 0;
  const double gather = grads + 2 * q;                     // dO's all-to-all
  const double inside = grads + ring;
  // dQ, dK, dV back: packed, one send and one receive buffer of all three; per tensor, one
  // tensor's pair at a time (dQ's, the largest; a replicated KV head's dK is at most as wide).
  const double scatter = a2a + wide + (f.ulysses_per_tensor ? 2 * q : 2 * a2a);
  return std::max({gather, inside, scatter});
}

template <bool Named>
struct Phase {
  Items<Named> items;
  std::string_view name, sub;
  double bytes = 0;
};
}  // namespace

StoredValues stored_values_per_token(const Model& m, const System& s, const Plan& plan, Checkpoint mode) {
  Plan p = plan;
  p.mem.checkpoint = mode;
  const Framework& f = s.profile;
  StoredValues v;
  // A value of other than 2 or 4 bytes counts as its share of the nearer one.
  auto add = [&](double values, double bytes) {
    if (bytes <= kBf16) v.bf16 += values * bytes / kBf16;
    else v.fp32 += values * bytes / kF32;
  };
  if (mode == Checkpoint::full) {  // the layer input, sharded under TP: its width alone
    add(rank_widths(m, f, p)[static_cast<std::size_t>(Width::hidden)], f.checkpoint_bytes);
    return v;
  }
  const Sizes z = sizes(m, f, p, attention_shapes(m, p));
  for (const TensorTerm& t : f.layer)
    if (t.when.holds(p))
      add(values_per_token(t, z) - z.linear_share * t.per_token.dot(z.softmax_width) +
              constant_values(t, z) / std::max(z.tokens, 1.0),
          value_bytes(t, z));
  if (z.linear_share > 0) {  // the linear layers' own tensors (linear_attention.hpp), their share
    add(z.linear_share * z.linear.bf16, kBf16);
    add(z.linear_share * z.linear.fp32, kF32);
  }
  return v;
}

double stored_bytes_per_token(const Model& m, const System& s, const Plan& p, Checkpoint mode) {
  const StoredValues v = stored_values_per_token(m, s, p, mode);
  return kBf16 * v.bf16 + kF32 * v.fp32;
}

double alst_tile_rows(const Model& m, const Plan& p) {
  const std::int64_t local = p.sp > 0 ? p.seq_len / p.sp : p.seq_len;
  return double(p.micro_batch) * double(alst_tile_tokens(local, m.hidden));
}

namespace {
// The workspaces below, from the shapes the estimate has already derived.
double kernel_workspace_bytes(const Model& m, const System& s, const AttentionShapes& sh) {
  // One kernel call's queries: one sequence's longest query segment on the rank that holds it.
  const double rows = query_rows(sh) * sh.heads_local;
  const Gpu& g = s.gpu;
  const double per_row = g.attention_bwd_workspace_per_head_dim * m.head_dim + g.attention_bwd_workspace_per_row;
  const bool expands = g.attention_bwd_expands_kv_grads && sh.kv_heads_local < sh.heads_local;
  // dK and dV per query head for the call's keys (at most the rank's attention tokens; all-gather:
  // the whole sequence).
  const double kv_grads = expands ? 2 * kBf16 * sh.key_tokens * sh.heads_local * m.head_dim : 0;
  return kF32 * rows * per_row + kv_grads;
}
double forward_workspace_bytes(const Model& m, const System& s, const Plan& p, const AttentionShapes& sh) {
  const bool unmasked_blocks = p.ring_degree > 1 || !m.causal;
  if (!unmasked_blocks) return 0;
  return kF32 * query_rows(sh) * sh.heads_local * s.gpu.attention_fwd_workspace_per_head_dim * m.head_dim;
}
}  // namespace

double attention_kernel_workspace_bytes(const Model& m, const System& s, const Plan& p) {
  return kernel_workspace_bytes(m, s, attention_shapes(m, p));
}

double attention_forward_workspace_bytes(const Model& m, const System& s, const Plan& p) {
  return forward_workspace_bytes(m, s, p, attention_shapes(m, p));
}

// The phases of the step and what each holds, in the order the framework's backward runs them.
// "Lower": the stored activations of the layers whose backward is still to come.
//   Layer backward of layer l (evaluated at the top layer, l = L, and at the bottom, l = 1: in
//   between the total is linear in l, lower layers' activations giving way to produced gradients):
//     recompute (full checkpointing: the layer rebuilt from its input), MLP, attention (with the
//     method's buffers and the kernel's workspace), QKV; each holds the layer's stored tensors not
//     yet freed and its own transients.
//   Loss: every layer's stored activations (full checkpointing: the layer inputs, none on the
//     device when offloaded), what the final norm keeps, and the head's (logits) or the final
//     norm's backward transients.
//   Optimizer: the states with every gradient.
// The peak of a phase is the largest of its sub-phases, never their sum: what one sub-phase frees
// is gone before the next allocates.
double attention_method_buffer_bytes(const Model& m, const System& s, const Plan& p) {
  const Framework& f = s.profile;
  const AttentionShapes sh = attention_shapes(m, p);
  const double workspace = f.attention_workspace_persistent ? 0.0 : kernel_workspace_bytes(m, s, sh);
  return method_buffers(m, f, p, sh, sizes(m, f, p, sh), workspace);
}

namespace {
// What FP8 linear layers add to the states (Framework's fp8 figures): the FP8 weight copies (and
// transposes) the framework caches for the step, of every layer, or under ZeRO-3 of the layers
// gathered at once; and each scaled tensor's scale and amax history (fp32), three tensors (input,
// weight, output gradient) for each of a layer's four linear modules (QKV, projection, fc1, fc2).
// The embedding and the LM head stay bf16.
template <class Items>
void add_fp8_states(double L, const Framework& f, const Plan& p, double layer_params, bool zero3_gathers,
                    Items& states) {
  if (!p.precision.has(Fp8Part::gemm)) return;
  const double cached = zero3_gathers ? std::min(f.zero3_gathered_layers, L) : L;
  states.add("FP8 weight copies and transposes", MemPart::parameters,
             f.fp8_weight_cache_bytes_per_param * cached * layer_params);
  constexpr double kScaledTensorsPerLayer = 3.0 * 4.0;
  states.add("FP8 scales and amax history", MemPart::parameters,
             kF32 * kScaledTensorsPerLayer * L * (f.fp8_amax_history + 1));
}
}  // namespace

namespace {
// One pipeline stage's peak (pipeline_cost.hpp: StageShape; the whole model without stages): its
// layers, its parameters, the head and loss on the last alone, and the stored activations of the
// micro-batches in flight there.
template <bool Named>
MemoryEstimate estimate(const Model& m, const System& s, const Plan& p, const StageShape& st, double psi_sharded) {
  using Items = seqpar::sim::Items<Named>;
  using Phase = seqpar::sim::Phase<Named>;
  MemoryEstimate e;
  const Framework& f = s.profile;
  const AttentionShapes sh = attention_shapes(m, p);
  Sizes z = sizes(m, f, p, sh);
  z.layers = st.layers;  // a stage's (all of them without stages)
  const double T = z.tokens, L = st.layers, h = z.width[static_cast<std::size_t>(Width::hidden)];
  // A rank's parameters: 1/tp of its stage's (tensor_parallel_cost.hpp; the model's without stages).
  const double psi = st.params_per_tp_rank, layer_params = z.layer_params;
  const double D = zero_group_size(p);  // ZeRO shards over the data x sequence parallel group
  // psi_sharded: zero_sharded_params_per_tp_rank (StageLayout's).
  const int zero = p.mem.zero;
  const bool full = p.mem.checkpoint == Checkpoint::full;
  const bool offload = full && p.mem.offload_checkpoints;

  // States. Gradients made during the backward count in each phase as far as it has produced them.
  Items states;
  double grads = 0, weight_bytes_per_param = 0;
  for (const StateTerm& t : f.states) {
    // ZeRO's shard of the whole model, or the rank's replica (1/ep of the experts under EP).
    const double bytes = t.bytes_per_param * (zero >= t.zero_stage ? psi_sharded : psi) / (zero >= t.zero_stage ? D : 1);
    if (t.part == MemPart::parameters && t.zero_stage == 3) weight_bytes_per_param += t.bytes_per_param;
    if ((p.mem.offload_optimizer && t.offloaded_with_optimizer) || (p.mem.offload_params && t.offloaded_with_params))
      e.host_bytes += bytes;
    else if (t.part == MemPart::gradients && f.gradients_during_backward) grads += bytes;
    else states.add(t.name, t.part, bytes);
  }
  add_fp8_states(L, f, p, layer_params, zero >= 3 && (D > 1 || p.mem.offload_params), states);
  const double h_tp = m.hidden / double(p.tp > 0 ? p.tp : 1);
  // The LM head (the embedding if tied) and final norm: on the last stage alone (a first stage's
  // embedding gradient comes after its layers', as the layers' own order has it).
  const double head_params = st.has_head ? double(m.vocab) * h_tp + h_tp : 0.0;
  auto with_grads = [&]<class A>(A v, double params) {
    if (grads > 0) v.add("gradients produced so far", MemPart::gradients, grads * std::min(1.0, params / psi));
    return v;
  };

  // Per layer: what each stores across the forward (full checkpointing: its input alone).
  // And what the current layer holds in each sub-phase of its backward: its stored tensors not yet
  // freed; under full checkpointing rebuilt from its input (the checkpoint), which it holds instead
  // of a rebuilt input. One pass over the layer's terms: each term's bytes once.
  Items stored_by_layer, cur_mlp, cur_attn, cur_qkv;
  for (const TensorTerm& t : f.layer) {
    if (!t.when.holds(p)) continue;
    const double bytes = layer_term_bytes(t, z);
    stored_by_layer.add(t.name, t.part, bytes);
    if (full && t.input) continue;
    for (auto [sub, cur] : {std::pair{Until::mlp, &cur_mlp}, {Until::attention, &cur_attn}, {Until::qkv, &cur_qkv}})
      if (alive_in(t, sub)) cur->add(t.name, t.part, bytes);
  }
  if (z.linear_share > 0) {  // alive until the layer's attention backward, as the attention's own tensors
    const double b = linear_stored_bytes(z);
    stored_by_layer.add(kLinearStored, MemPart::activations, b);
    cur_mlp.add(kLinearStored, MemPart::activations, b);
    cur_attn.add(kLinearStored, MemPart::activations, b);
  }
  if (m.moe()) {  // the token dispatcher's buffers, kept for the experts' backward (moe_cost.hpp)
    const double b = moe_dispatch_bytes_per_layer(m, p, T);
    stored_by_layer.add("expert dispatch buffers (permuted tokens, routing probabilities and indices)",
                        MemPart::activations, b);
    cur_mlp.add("expert dispatch buffers (permuted tokens, routing probabilities and indices)", MemPart::activations, b);
  }
  const Items per_layer =
      full ? Items("layer input (checkpoint)", MemPart::checkpoints, f.checkpoint_bytes * h * T) : stored_by_layer;
  const double per_layer_bytes = total(per_layer);
  if (full)
    for (Items* cur : {&cur_mlp, &cur_attn, &cur_qkv})
      cur->add("this layer's input (checkpoint)", MemPart::checkpoints, per_layer_bytes);
  // The other micro-batches in flight on this stage (pipeline_cost.hpp): each keeps every layer's
  // stored activations (or checkpoints) until its backward; none without stages.
  const double other_in_flight = (st.in_flight - 1) * L;
  e.host_bytes += offload ? L * per_layer_bytes : 0;
  if (offload && other_in_flight > 0) e.host_bytes += other_in_flight * per_layer_bytes;
  e.device_checkpoint_bytes = full ? (offload ? std::min(2.0, L) : L) * per_layer_bytes : 0;
  if (full && !offload && other_in_flight > 0) e.device_checkpoint_bytes += other_in_flight * per_layer_bytes;

  Items common = terms<Named>(f.every_phase, z, p);
  const double workspace = kernel_workspace_bytes(m, s, sh);
  if (f.attention_workspace_persistent) {
    common.add("attention kernel's backward workspace (kept between calls)", MemPart::attention_buffers, workspace);
    common.add("attention kernel's forward workspace (kept between calls)", MemPart::attention_buffers,
               forward_workspace_bytes(m, s, p, sh));
  }
  double zero3 = 0, zero3_head = 0;  // ZeRO-3 gathers the layers' weights around their compute, and the head's
  const bool zero3_gathers = zero >= 3 && (D > 1 || p.mem.offload_params);  // sharded, or fetched from the host
  if (zero3_gathers) {
    // Gathered in FP8 (Fp8Part::weights: torchao's FP8 all-gather), a layer's weights arrive as FP8.
    zero3 = f.zero3_gathered_layers * (p.precision.has(Fp8Part::weights) ? kFp8 : weight_bytes_per_param) * layer_params;
    zero3_head = 2 * weight_bytes_per_param * double(m.vocab) * h_tp;  // vocab-parallel
  }
  const Items through_backward = terms<Named>(f.backward_stored, z, p);

  // Layer backward at layer l (1 = bottom).
  const double method = method_buffers(m, f, p, sh, z, f.attention_workspace_persistent ? 0.0 : workspace);
  const Items rec = full ? terms<Named>(f.recompute, z, p) : Items(), mlp = terms<Named>(f.mlp_backward, z, p),
              attn = terms<Named>(f.attention_backward, z, p), qkv = terms<Named>(f.qkv_backward, z, p);
  const Items method_items("SP method's attention buffers", MemPart::attention_buffers, method);
  // Sub-phase `sub` of layer l's backward, in an accumulator A.
  constexpr std::string_view kLayerSubs[] = {"recompute", "mlp", "attention", "qkv"};
  auto layer_sub = [&]<class A>(double l, std::size_t sub) {
    // Offloaded checkpoints: the one in use and the next prefetched (none below the bottom layer).
    const double lower = offload ? std::min(1.0, l - 1) : l - 1;
    A base = with_grads(sum<A>(states, common, through_backward), head_params + (L - l + 1) * layer_params);
    base.add_all(per_layer, lower, "stored by the layers below");
    if (!offload && other_in_flight > 0) base.add_all(per_layer, other_in_flight, "stored by the other micro-batches in flight");
    if (zero3 > 0) base.add("ZeRO-3 gathered layer weights", MemPart::working, zero3);
    switch (sub) {
      case 0: return full ? sum<A>(base, cur_mlp, rec) : A();
      case 1: return sum<A>(base, cur_mlp, mlp);
      case 2: return sum<A>(base, cur_attn, attn, method_items);
      default: return sum<A>(base, cur_qkv, qkv);
    }
  };
  // The largest, first among equals, by its total; its parts only if it is the step's peak.
  Phase layer_peak{Items(), {}, {}, 0};
  double layer_peak_l = 0;
  std::size_t layer_peak_sub = 0;
  for (const double l : {L, 1.0})
    for (std::size_t sub = 0; sub < std::size(kLayerSubs); ++sub)
      if (const double b = layer_sub.template operator()<Total>(l, sub).total(); b > layer_peak.bytes) {
        layer_peak = {Items(), "layer-backward", kLayerSubs[sub], b};
        layer_peak_l = l;
        layer_peak_sub = sub;
      }

  // Loss, before the layers' backward: every layer's stored activations (full checkpointing: the
  // inputs kept on the device). The head's forward and backward come before any gradient (the LM
  // head's is made at the end of its backward); the final norm's backward holds the head's.
  Items kept_layers;
  const double kept = full ? (offload ? 0 : L) : L;
  kept_layers.add_all(per_layer, kept, full ? "layer inputs kept (checkpoints)" : std::string_view());
  const Items head_base = join({&states, &common, &through_backward, &kept_layers});
  const Items loss_base = with_grads(head_base, head_params);
  const Items stored = terms<Named>(f.loss_stored, z, p), fwd_t = terms<Named>(f.loss_forward, z, p),
              bwd_t = terms<Named>(f.loss_backward, z, p), norm_t = terms<Named>(f.loss_final_norm, z, p);
  Items fwd = join({&head_base, &stored, &fwd_t}), bwd = join({&head_base, &stored, &bwd_t});
  if (zero3_head > 0) {
    fwd.add("ZeRO-3 gathered head weights", MemPart::working, zero3_head);
    bwd.add("ZeRO-3 gathered head weights", MemPart::working, zero3_head);
  }
  const Items final_norm = join({&loss_base, &stored, &norm_t});
  e.loss_logits_bytes = std::max(fwd.part(MemPart::logits), bwd.part(MemPart::logits));
  Phase loss_peak{final_norm, "loss", "final-norm", total(final_norm)};
  for (auto [items, name] : {std::pair{&fwd, "head-forward"}, std::pair{&bwd, "head-backward"}})
    if (total(*items) > loss_peak.bytes) loss_peak = {*items, "loss", name, total(*items)};
  if (!st.has_head) {  // a stage before the last runs no head and no loss
    loss_peak = Phase{Items(), "loss", "none", 0};
    e.loss_logits_bytes = 0;
  }
  // Optimizer step: every gradient, no activations.
  Items opt = with_grads(join({&states, &common}), psi);
  const double opt_b = total(opt);
  const Phase optimizer{std::move(opt), "optimizer", "step", opt_b};

  const Phase* at = &layer_peak;
  if (loss_peak.bytes > at->bytes) at = &loss_peak;
  if (optimizer.bytes > at->bytes) at = &optimizer;
  if (at == &layer_peak && layer_peak.bytes > 0)
    layer_peak.items = layer_sub.template operator()<Items>(layer_peak_l, layer_peak_sub);
  e.peak_phase = at->name;
  e.peak_subphase = at->sub;

  MemoryBreakdown& b = e.peak;
  b.parameters = at->items.part(MemPart::parameters);
  b.gradients = at->items.part(MemPart::gradients);
  b.optimizer_states = at->items.part(MemPart::optimizer_states);
  b.activations = at->items.part(MemPart::activations);
  b.checkpoints = at->items.part(MemPart::checkpoints);
  b.attention_buffers = at->items.part(MemPart::attention_buffers);
  b.logits = at->items.part(MemPart::logits);
  b.working = at->items.part(MemPart::working);
  for (const Item& i : at->items.list())
    if (i.bytes > 0) e.terms.push_back({std::string(i.name), i.part, i.bytes});  // Named only
  // The device's own reserve (context, library workspaces), the allocator's (a constant and a
  // fraction of what it tracks), and a calibrated profile's fitted memory (framework_terms.hpp).
  auto reserve = [&](double tracked) {
    return s.gpu.reserved_bytes + f.reserve_bytes + f.fragmentation * tracked + framework_reserved_bytes(s.framework, T);
  };
  b.reserved = reserve(b.tracked());
  e.device_reserve_bytes = s.gpu.reserved_bytes;
  e.fragmentation_bytes = f.fragmentation * b.tracked();
  e.layer_phase_bytes = layer_peak.bytes + reserve(layer_peak.bytes);
  e.loss_phase_bytes = loss_peak.bytes + reserve(loss_peak.bytes);
  e.optimizer_phase_bytes = optimizer.bytes + reserve(optimizer.bytes);
  return e;
}
}  // namespace

namespace {
// One stage's estimate, of the plan's stage layout (derived once for all the stages asked for).
MemoryEstimate stage_memory(const Model& m, const System& s, const Plan& p, const StageLayout& layout, int stage,
                            MemoryDetail detail) {
  const StageShape st = stage_shape(m, p, layout.split, stage);
  const double psi_sharded = layout.zero_sharded_params_per_tp_rank;
  MemoryEstimate e = detail == MemoryDetail::terms ? estimate<true>(m, s, p, st, psi_sharded)
                                                   : estimate<false>(m, s, p, st, psi_sharded);
  e.peak_stage = stage;
  return e;
}
}  // namespace

MemoryEstimate estimate_stage_memory(const Model& m, const System& s, const Plan& p, int stage, MemoryDetail detail) {
  return stage_memory(m, s, p, stage_layout(m, p), stage, detail);
}

MemoryEstimate estimate_memory(const Model& m, const System& s, const Plan& p, MemoryDetail detail) {
  const StageLayout layout = stage_layout(m, p);
  if (p.pp <= 1) return stage_memory(m, s, p, layout, 0, detail);
  // The peak is the first stage's (the most micro-batches in flight, the embedding), the last's
  // (the head, its logits and the loss), or, where the ends run a layer fewer (pipeline_cost.hpp:
  // StageSplit), the second's (one micro-batch fewer in flight than the first, one layer more). A
  // stage further on holds still fewer in flight and the same layers as the second.
  MemoryEstimate peak = stage_memory(m, s, p, layout, 0, detail);
  for (int i : {p.pp - 1, 1}) {
    if (i == 1 && (p.pp <= 2 || layout.split != StageSplit::ends_lighter)) continue;
    MemoryEstimate e = stage_memory(m, s, p, layout, i, detail);
    if (e.peak.total() > peak.peak.total()) peak = std::move(e);
  }
  return peak;
}

std::vector<StageMemory> stage_memories(const Model& m, const System& s, const Plan& p) {
  std::vector<StageMemory> out;
  const StageLayout layout = stage_layout(m, p);
  const int P = std::max(1, p.pp);
  for (int i = 0; i < P; ++i) {
    const MemoryEstimate e = stage_memory(m, s, p, layout, i, MemoryDetail::sums);
    out.push_back({i, in_flight_micro_batches(p, i), e.peak.total(), e.peak_phase, e.peak_subphase});
  }
  return out;
}

}  // namespace seqpar::sim

// A training framework's memory inventory, as data (sim/presets/frameworks/*.json): the states it
// keeps per parameter, what each layer saves for its backward per token, the transients of each
// phase of the step, what the loss materialises, and its allocator and time terms. The memory
// model (memory_cost.cpp) walks the step's phases over this inventory; the README's "Framework
// profiles" section describes the file format.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "seqpar/core/plan.hpp"
#include "seqpar/sim/model.hpp"

namespace seqpar::sim {

// The memory categories of a prediction, the same as seqpar-train's report (train/memory.hpp) and
// `simulate --json`'s "memory" object; reserved is the allocator's and the device's share.
enum class MemPart { parameters, gradients, optimizer_states, activations, checkpoints, attention_buffers, logits, working };
inline constexpr int kMemParts = 8;
std::string_view to_string(MemPart p);

// Per-token width symbols: a tensor holds sum(coef x symbol) values per local token.
//   hidden, ffn, q (heads x head_dim), kv (kv_heads x head_dim, as the model has them),
//   kv_attention (KV heads x head_dim as the attention holds them: replicated up to U under
//   Ulysses when U > kv_heads), heads (query heads), head_dim, one, vocab, fc1 (the first MLP
//   GEMM's output: gate and up, 2 x ffn, for SwiGLU; ffn for GELU, so one profile counts either
//   MLP), rope (head_dim for rotary positions, whose cos/sin tables it sizes; 0 for learned ones),
//   norm_stats (a norm's saved statistics per token: rsigma for RMSNorm, mean and rsigma for LayerNorm).
enum class Width { hidden, ffn, q, kv, kv_attention, heads, head_dim, one, vocab, fc1, rope, norm_stats };
inline constexpr int kWidths = 12;
std::string_view to_string(Width w);

// Constant sizes (values that do not grow with the tokens): one layer's weight matrices, the
// LM head's, a whole layer's parameters.
enum class Constant { hidden_q, hidden_kv, hidden_ffn, vocab_hidden, layer_params, hidden_fc1 };
inline constexpr int kConstants = 6;
// "hidden*q", "hidden*kv", "hidden*ffn", "vocab*hidden", "layer_params", "hidden*fc1" (fc1's weight)
std::string_view to_string(Constant c);

// The backward sub-phase after which a stored tensor of a layer is freed: the MLP's backward, the
// attention's, or the QKV projections' (the end of the layer's backward).
enum class Until { mlp, attention, qkv };
// The rows a transient spans: the rank's tokens, one ALST tile (tiled MLP), or the loss's rows
// (one tile under tiled loss, else all tokens).
enum class Rows { all, tile, loss };

// A tensor applies only when every condition given holds (an empty condition always holds).
struct Condition {
  std::vector<Checkpoint> checkpoint;  // empty: any mode
  std::optional<bool> tiled_mlp, tiled_loss, ulysses, ring, offload_checkpoints;
  std::optional<bool> fp8_gemm;  // the linear layers run in FP8 (core/precision.hpp: Fp8Part::gemm)
  // Inline: the memory estimate asks it of every term of a plan's inventory.
  bool holds(const Plan& p) const {
    if (!checkpoint.empty()) {
      bool any = false;
      for (Checkpoint c : checkpoint) any = any || c == p.mem.checkpoint;
      if (!any) return false;
    }
    auto is = [](const std::optional<bool>& want, bool have) { return !want || *want == have; };
    return is(tiled_mlp, p.mem.tiled_mlp) && is(tiled_loss, p.mem.tiled_loss) && is(ulysses, p.ulysses_degree > 1) &&
           is(ring, p.ring_degree > 1) &&
           is(offload_checkpoints, p.mem.checkpoint == Checkpoint::full && p.mem.offload_checkpoints) &&
           is(fp8_gemm, p.precision.has(Fp8Part::gemm));
  }
};

// A term's coefficients by symbol (a Width or a Constant, by index): the nonzero ones alone, in
// symbol order. A term names one or two of the twelve widths, and the memory estimate sums
// coefficient x size over every term of every plan a search tries: over the named ones alone, the
// same sum (adding 0 x a size changes none), in a sixth of the additions.
template <std::size_t N>
class Coefficients {
 public:
  // The coefficient of symbol i, 0 when the term does not name it.
  double operator[](std::size_t i) const {
    for (std::size_t k = 0; k < n_; ++k)
      if (index_[k] == i) return value_[k];
    return 0;
  }
  // Sets symbol i's coefficient (0 drops it), keeping symbol order.
  void set(std::size_t i, double v) {
    std::size_t k = 0;
    while (k < n_ && index_[k] < i) ++k;
    if (k < n_ && index_[k] == i) {
      for (std::size_t j = k; j + 1 < n_; ++j) index_[j] = index_[j + 1], value_[j] = value_[j + 1];
      --n_;
    }
    if (v == 0) return;
    for (std::size_t j = n_; j > k; --j) index_[j] = index_[j - 1], value_[j] = value_[j - 1];
    index_[k] = static_cast<std::uint8_t>(i);
    value_[k] = v;
    ++n_;
  }
  // sum over the named symbols, in symbol order, of coefficient x sizes[symbol].
  double dot(const std::array<double, N>& sizes) const {
    double v = 0;
    for (std::size_t k = 0; k < n_; ++k) v += value_[k] * sizes[index_[k]];
    return v;
  }
  double sum() const {
    double v = 0;
    for (std::size_t k = 0; k < n_; ++k) v += value_[k];
    return v;
  }

 private:
  std::array<std::uint8_t, N> index_{};
  std::array<double, N> value_{};
  std::size_t n_ = 0;
};

struct TensorTerm {
  std::string name, source;
  Coefficients<kWidths> per_token;     // values per token, by Width
  Coefficients<kConstants> constant;   // values independent of the tokens (e.g. autocast's weight casts)
  double bytes = 2;                         // per value
  // Per value when the linear layers run in FP8 and the framework keeps this tensor as the FP8 GEMM's
  // input (Transformer Engine's LayerNormLinear and LayerNormMLP save their FP8 casts); 0: `bytes`.
  double fp8_bytes = 0;
  bool times_layers = false;                // held once per layer of the model (e.g. every layer's cache)
  MemPart part = MemPart::activations;
  Until until = Until::qkv;                 // stored layer tensors only
  Rows rows = Rows::all;                    // transients only
  // The layer's input: under full checkpointing it is the checkpoint itself, not rebuilt.
  bool input = false;
  Condition when;
};

// A per-parameter state: master weights, the weights the GEMMs read, gradients, optimizer moments.
struct StateTerm {
  std::string name, source;
  MemPart part = MemPart::parameters;
  double bytes_per_param = 0;
  int zero_stage = 1;                // sharded over the data x sequence-parallel group from this ZeRO stage on
  bool offloaded_with_optimizer = false;  // --offload-optimizer moves it to host memory
  bool offloaded_with_params = false;     // --offload-params moves it to host memory
};

// What a training framework adds beyond the kernels the cost models time, fitted by `seqpar
// calibrate` from measured steps (sim/framework_terms.hpp has the JSON and the functions the cost
// models call). The defaults change no prediction: dividing by 1 and adding 0 are exact.
struct FrameworkTerms {
  double memory_bound_efficiency = 1;  // elementwise and optimizer work: achieved / HBM bandwidth
  double step_overhead_s = 0;          // fixed per step (launches, Python, synchronisation)
  double gemm_step_efficiency = 1;       // GEMMs inside the steps: achieved / the GPU figures' rate
  double attention_step_efficiency = 1;  // attention kernels inside the steps: achieved / the GPU figures' rate
  double host_pin_s_per_gib = 0;       // a cold first step only: seconds to pin each GiB of host buffers it keeps
  double reserve_bytes = 0;            // memory kept beyond the modelled parts (allocator, context)
  double bytes_per_token = 0;          // ... and per local token (fp32 logits, caches)
};

// One of a framework's attention kernels: the kernel, and the GPU compute capabilities ("9.0") on
// which the framework picks it (none listed: any GPU), as PyTorch's SDPA prefers cuDNN on Hopper and
// FlashAttention-2 elsewhere.
struct AttentionChoice {
  std::string kernel;
  std::vector<std::string> compute_capability;
  bool applies_to(std::string_view gpu_compute_capability) const;
};

// A tensor whose elements one of the framework's kernels indexes in 32 bits: a plan that makes it
// larger cannot run (the kernel reads out of bounds), whatever the memory says.
enum class IndexedTensor {
  hidden,     // a layer's input as the norms and RoPE get it: micro-batch x local tokens x hidden / tp
  attention,  // q as the attention kernel gets it: micro-batch x attention tokens x local heads x head_dim
};
struct IndexLimit {
  IndexedTensor tensor = IndexedTensor::hidden;
  double max_elements = 0;
  std::string kernel, source;  // the kernel that indexes it, and why the limit is what it is
};
std::string_view to_string(IndexedTensor t);

// A memory-bound kernel the framework runs in every layer beyond the model's own norms, residual
// adds, positions and activation (compute_cost.hpp): a dropout mask, an unfused bias add, a copy.
// It moves per_token widths (as the inventory counts them on a rank) times the bytes per value,
// forward and backward, over the rank's tokens (elementwise_cost.hpp).
struct ElementwiseTerm {
  std::string name, source;
  std::array<double, kWidths> per_token{};
  double forward_bytes = 0, backward_bytes = 0;
};

struct Framework {
  std::string name, description;
  std::vector<StateTerm> states;
  // Gradients allocated as the backward reaches each parameter (PyTorch's zero_grad(set_to_none=True))
  // rather than kept for the whole step: the peak then sees only the gradients produced so far.
  bool gradients_during_backward = false;
  // Bytes per value of the layer input that full checkpointing keeps (the residual stream's type).
  double checkpoint_bytes = 2;
  std::vector<TensorTerm> layer;            // what one layer stores for its backward
  // The transients of the layer backward's sub-phases (recompute: full checkpointing only).
  std::vector<TensorTerm> recompute, mlp_backward, attention_backward, qkv_backward;
  std::vector<TensorTerm> loss_stored;      // kept from the forward through the loss (the final norm's)
  std::vector<TensorTerm> backward_stored;  // kept from the forward through the whole backward
  // The loss's sub-phases: the head's forward (logits and the loss), its backward (the logits'
  // gradient), and the final norm's backward.
  std::vector<TensorTerm> loss_forward, loss_backward, loss_final_norm;
  // The loss run over its rows in this many equal chunks, one after another (torchtitan's
  // ChunkedLossWrapper: lm_head, cross entropy and the chunk's backward per chunk), so the logits'
  // transients (Rows::loss) span one chunk's rows; 1: the rank's tokens at once.
  int loss_chunks = 1;
  std::vector<TensorTerm> every_phase;      // the batch (token ids, labels, positions)
  // The attention kernel's backward workspace (the GPU preset's figure) is held in the attention
  // backward only, or for the whole step (a grow-only scratch buffer kept between calls).
  bool attention_workspace_persistent = false;
  // How the Ulysses all-to-alls move q, k, v and their gradients: packed into one all-to-all each
  // way (seqpar-train: one send and one receive buffer of all three), or one all-to-all per tensor
  // (DeepSpeed's Ulysses: a buffer pair of one tensor at a time).
  bool ulysses_per_tensor = false;
  // The ring's attention-backward buffers (R > 1) as the framework's ring implementation allocates
  // them, per token of the rank (e.g. Transformer Engine's bf16 KV/dKV double buffer); not given:
  // seqpar-train's (fp32 dK,dV and dQ accumulators: sim/src/memory_cost.cpp, method_buffers).
  std::vector<TensorTerm> ring_backward;
  bool ring_backward_given = false;
  double zero3_gathered_layers = 3;         // ZeRO-3: layers' weights gathered at once (prefetch)
  // How the framework overlaps its host traffic with compute: offloaded parameters prefetched
  // ahead of the layers that need them (DeepSpeed ZeRO-3's prefetch buckets) or fetched when each
  // layer starts; offloaded checkpoints copied on a side stream, at most two on the device (ALST's
  // and seqpar-train's double buffer), or synchronously.
  bool params_prefetched = true, checkpoints_overlapped = true;
  // Under tensor parallelism, whether the norm and residual regions (norms, residual adds, the
  // dropouts beside them) are split over the TP ranks by sequence (Megatron's sequence
  // parallelism, Korthikanti et al. Sec. 4.2.2) or run whole on every TP rank (Megatron-LM before
  // it: replicated, Sec. 4.2.1). The same bytes cross the TP group either way.
  bool tp_sequence_parallel = true;
  // The allocator's reserve beyond the tracked tensors: a constant and a fraction of the peak.
  double reserve_bytes = 0, fragmentation = 0;
  // Time terms (its step-time FrameworkTerms; the rest stay at their defaults): fitted once from
  // measured steps and kept in the profile with their source, or priors; `seqpar calibrate` fits
  // them again from a user's steps. time_sources holds each given term's source, by key.
  FrameworkTerms time;
  std::vector<std::pair<std::string, std::string>> time_sources;
  // Memory-bound bytes the loss moves per logit, forward and backward (its casts, softmax and
  // gradient); timed at HBM bandwidth over the memory-bound efficiency. 0: not counted.
  double loss_elementwise_bytes_per_logit = 0;
  std::vector<ElementwiseTerm> layer_elementwise;  // time: the framework's own per-layer kernels
  std::string source;  // what the profile as a whole describes (framework version, settings)
  // The MLP kinds whose saved tensors the inventory counts (a profile derived from one framework's
  // SwiGLU module says nothing of its GELU one); empty: any, through the fc1 width.
  std::vector<MlpKind> mlp_kinds;
  std::vector<IndexLimit> index_limits;  // its kernels' 32-bit index limits (validity.hpp applies them)
  // The memory options the framework runs ("runs" in the profile; absent: all): a plan asking for
  // another is not a plan of this framework (validity.hpp), and advise and maxlen search only these.
  std::vector<int> zero_stages{0, 1, 2, 3};
  bool runs_offload_optimizer = true, runs_offload_params = true, runs_tensor_parallel = true;
  bool runs_pipeline_parallel = true;  // pipeline stages (Plan::pp); the search tries none where false
  // ALST's memory features (DeepSpeed's TiledMLP, the tiled loss, checkpoints offloaded to the host),
  // which a framework without them does not run (torchtitan chunks its loss its own way: loss_chunks).
  bool runs_offload_checkpoints = true, runs_tiled_mlp = true, runs_tiled_loss = true;
  // The SP methods its sequence parallelism is (empty: all); sp 1 is no method and always runs.
  std::vector<Method> runs_methods;
  bool runs_method(Method m) const {
    return runs_methods.empty() || std::find(runs_methods.begin(), runs_methods.end(), m) != runs_methods.end();
  }
  std::string runs_source;
  // The attention kernel family the framework runs, in its own order of preference (a GPU preset's
  // attention_kernels names): the first choice made for the GPU's compute capability whose figures
  // the GPU preset has (attention_kernels.hpp: select_attention_kernel). Empty: the GPU's default.
  std::vector<AttentionChoice> attention_choices;
  std::string attention_source;  // why the framework runs those kernels (its dispatch code, its recipe)
  // FP8 (core/precision.hpp; the profile's "fp8" object, absent: bf16 only). The parts it runs in
  // FP8 (Fp8Part bits), its recipes, the bytes per linear-layer parameter of the FP8 weights it
  // caches for the step (an FP8 copy and the transpose Hopper's FP8 GEMMs need), and the amax
  // history each scaled tensor keeps (values, fp32) under delayed scaling.
  std::uint8_t fp8_parts = 0;
  std::vector<Fp8Recipe> fp8_recipes;
  double fp8_weight_cache_bytes_per_param = 0;
  double fp8_amax_history = 0;
  std::string fp8_source;
  bool runs_fp8(Fp8Recipe r) const;
};

// The memory options a plan of this framework has when none is given: the plan defaults, with the
// ZeRO stage the framework runs nearest to ZeRO-1 (seqpar-train: 0).
MemoryOptions default_memory_options(const Framework& f);

// Name of a built-in framework profile (sim/presets/frameworks/NAME.json) or a path to one;
// seqpar::Error naming the input and the field for an unknown name or a malformed file.
Framework load_framework(std::string_view name_or_path);
Framework framework_from_json(const nlohmann::json& j, std::string_view what);
// The profile used when none is named.
inline constexpr std::string_view kDefaultFramework = "deepspeed-alst";
const Framework& default_framework();

}  // namespace seqpar::sim

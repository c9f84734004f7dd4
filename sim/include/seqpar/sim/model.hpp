// A transformer model as the simulator and the training step see it: shapes only, from a preset.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace seqpar::sim {

enum class MlpKind { swiglu, gelu };
enum class NormKind { rmsnorm, layernorm };  // layernorm also has a bias
// Rotary embeddings (applied to q and k in every layer, with cos/sin tables) or a learned position
// table added to the token embedding once (GPT-2, GPT-3, Megatron's GPT).
enum class PositionKind { rope, learned };
std::string_view to_string(MlpKind k);       // "swiglu", "gelu"
std::string_view to_string(NormKind k);      // "rmsnorm", "layernorm"
std::string_view to_string(PositionKind k);  // "rope", "learned"
// The kind a name spells (each kind's to_string), or false for another name.
bool kind_named(std::string_view name, MlpKind& out);
bool kind_named(std::string_view name, NormKind& out);
bool kind_named(std::string_view name, PositionKind& out);
std::string to_string(const std::vector<MlpKind>& kinds);  // "swiglu, gelu"

// The attention of one layer (README "Attention kinds"): full causal attention over the sequence
// (unmasked for encoders), or a causal sliding window: a query sees the model's sliding_window keys
// ending at itself (Hugging Face's `sliding_window`; Gemma 2/3's local layers, Mistral v0.1's); or a
// linear-attention layer, a gated DeltaNet in place of softmax attention (Qwen3-Next's and Qwen3.5's
// "linear_attention" layers; Model::linear gives its shape, README "Linear attention").
enum class AttentionKind { full, sliding, linear };
// "full_attention", "sliding_attention", "linear_attention" (HF's layer_types)
std::string_view to_string(AttentionKind k);
bool kind_named(std::string_view name, AttentionKind& out);

// A mixture-of-experts MLP (README "Mixture of experts"), as DeepSeek-V3, Qwen3-MoE, GLM-4.5, gpt-oss and
// Mixtral configure it: each MoE layer's MLP is `routed` experts of SwiGLU width `ffn` (HF's
// moe_intermediate_size), of which a router (a hidden x routed linear layer, softmax/sigmoid and
// top-k) picks `top_k` per token, plus `shared` experts of width `shared_ffn` that every token passes
// (DeepSeek's n_shared_experts x moe_intermediate_size, Qwen2-MoE's shared_expert_intermediate_size).
// The first `dense_layers` layers keep the dense MLP of width Model::ffn_hidden (DeepSeek-V3's and
// GLM-4.5's first_k_dense_replace). `imbalance`: the load of the busiest expert over the mean
// (dropless routing: the rank holding it sets the MLP's time); 1 is a perfectly balanced router.
// routed == 0: a dense model (every cost bit-identical to a model without this struct).
struct Experts {
  int routed = 0;
  int top_k = 0;
  int ffn = 0;
  int shared = 0;
  int shared_ffn = 0;
  int dense_layers = 0;
  double imbalance = 1.0;
};

// Multi-head latent attention (README "Latent attention (MLA)"), as DeepSeek-V2/V3 configure it:
// q = W_uq norm(W_dq x) (q_rank: q_lora_rank; 0 when q is projected from x directly, as in
// DeepSeek-V2-Lite), the latent c_KV = W_dkv x of kv_rank (kv_lora_rank) beside one rotary key of
// rope_dim (qk_rope_head_dim, W_kr x) that every head shares, and per head a key of
// Model::head_dim - rope_dim (qk_nope_head_dim) up-projected from norm(c_KV) and concatenated with
// the shared rotary key (head_dim = qk_nope + qk_rope wide), a value of Model::v_head_dim up-projected
// from it too, and q heads of head_dim (the last rope_dim rotated). Attention then runs as
// multi-head attention of `heads` query and key/value heads whose keys are head_dim wide and whose
// values are v_head_dim wide. kv_rank == 0: not latent (every cost bit-identical to a model without it).
struct Latent {
  int q_rank = 0;
  int kv_rank = 0;
  int rope_dim = 0;
};

// A gated DeltaNet layer (README "Linear attention"), as transformers' Qwen3NextGatedDeltaNet builds
// it from Qwen3NextConfig: q and k of `key_heads` heads of `key_dim` (linear_num_key_heads,
// linear_key_head_dim), v and the output gate z of `value_heads` heads of `value_dim`
// (linear_num_value_heads, linear_value_head_dim; q and k are repeated to the value heads for the
// kernel), a causal depthwise convolution of `conv_kernel` taps (linear_conv_kernel_dim) over q, k
// and v, and per value head a decay and a write strength (a, b). Its state is one key_dim x
// value_dim matrix per value head, whatever the sequence's length. key_heads == 0: no linear layers.
struct LinearAttention {
  int key_heads = 0;
  int value_heads = 0;
  int key_dim = 0;
  int value_dim = 0;
  int conv_kernel = 0;
};

struct Model {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;  // q and k heads' width (latent attention: qk_nope_head_dim + qk_rope_head_dim)
  int v_head_dim = 0;  // v and output heads' width when it differs from head_dim (latent attention); 0: head_dim
  int ffn_hidden = 0;
  int vocab = 0;
  MlpKind mlp = MlpKind::swiglu;
  PositionKind positions = PositionKind::rope;
  NormKind norm = NormKind::rmsnorm;
  bool tied_embeddings = false;
  bool causal = true;  // decoder LMs; false for encoders: no mask, no ring imbalance
  // Attention kinds. `layer_kinds` lists every layer's kind in order, or is empty: every layer
  // full (every model before kinds; its costs are bit-identical to those without this field).
  // `sliding_window` is W of the sliding layers (0 without any): one width per model, as every
  // config that has one gives (Gemma 3, Mistral v0.1, gpt-oss).
  std::vector<AttentionKind> layer_kinds;
  std::int64_t sliding_window = 0;
  LinearAttention linear;  // the linear layers' shape (key_heads == 0 without any)
  Experts experts;  // routed == 0: dense
  Latent latent;    // kv_rank == 0: q, k, v projected from the hidden state directly
  // Attention sinks (README "Attention sinks"), as gpt-oss has them in every layer: one learned logit
  // per query head added to the softmax's denominator (transformers' GptOssAttention.sinks, shape
  // [num_attention_heads]; the sink's probability is dropped, so no value is attached to it).
  // false: plain softmax (every cost bit-identical to a model without this field).
  bool attention_sinks = false;
  // Where each figure came from (field -> the preset's "source": a model card, a config.json and
  // its key); empty for figures given as bare numbers. Shown in the simulator's JSON.
  std::map<std::string, std::string> sources;

  // Parameter counts: weights and norms; linear-layer biases are not modelled (< 0.1% of GPT's).
  // Computed with checked arithmetic: a count beyond 64 bits throws seqpar::Error.
  // The first MLP GEMM's output columns: gate and up (2 x ffn) for SwiGLU, ffn for GELU.
  std::int64_t fc1_columns() const;
  std::int64_t norm_params() const;
  // One layer's parameters: a dense layer's; for a MoE model or one with linear-attention layers
  // the mean over its layers (rounded down; layer_params_total() is the exact sum), so per-layer
  // memory terms stay per layer.
  std::int64_t params_per_layer() const;
  std::int64_t embedding_params() const;  // token embedding + LM head (once if tied) + final norm
  std::int64_t total_params() const;
  // Mixture of experts (Experts above). moe(): the model has routed experts. moe_layers(): the
  // layers whose MLP is experts (layers - dense_layers; 0 for a dense model).
  bool moe() const { return experts.routed > 0; }
  int moe_layers() const { return moe() ? layers - experts.dense_layers : 0; }
  // Latent attention (Latent above). v_dim(): the value (and attention output) heads' width.
  // pair_dim(): the mean of the key and value widths; one (query, key) pair of one head costs
  // 2 x head_dim FLOPs in QK^T and 2 x v_dim in PV, 4 x pair_dim together (compute_cost.hpp's
  // attention_flops), and a token's K and V of one head are 2 x pair_dim values. Both equal
  // head_dim without latent attention (exactly: the arithmetic is bit-identical).
  bool mla() const { return latent.kv_rank > 0; }
  int v_dim() const { return v_head_dim > 0 ? v_head_dim : head_dim; }
  double pair_dim() const { return 0.5 * (double(head_dim) + double(v_dim())); }
  // The projection GEMMs' weights of one layer's attention (q, k, v, o; latent: W_dq, W_uq, W_dkv
  // with W_kr, W_ukv, W_o), without the latent attention's two norms (latent_norm_params), which
  // attention_params() adds. Their forward FLOPs per token are twice this (compute_cost.hpp).
  std::int64_t attention_weight_params() const;
  std::int64_t latent_norm_params() const { return mla() ? std::int64_t{latent.q_rank} + latent.kv_rank : 0; }
  // One layer's sink logits: one per query head (attention_sinks), else 0; attention_params() adds them.
  std::int64_t sink_params() const { return attention_sinks ? std::int64_t{heads} : 0; }
  // Parameters of one layer's attention (q, k, v, o projections, latent norms, sinks), of a dense MLP of the model's
  // ffn_hidden, of one expert (SwiGLU: gate, up, down of width Experts::ffn), of the shared experts
  // together, and of the router (hidden x routed).
  std::int64_t attention_params() const;
  std::int64_t dense_mlp_params() const;
  std::int64_t expert_params() const;
  std::int64_t shared_expert_params() const;
  std::int64_t router_params() const;
  // Every layer's parameters (dense layers and MoE layers with all their experts), and the part
  // that is routed experts (held 1/ep per rank under expert parallelism).
  std::int64_t layer_params_total() const;
  std::int64_t routed_expert_params_total() const;
  // The parameters one token passes through (Megatron's and torchtitan's "active" count: top_k
  // routed experts, the shared experts and the router in MoE layers; everything else whole), with
  // the embeddings (the token table and the LM head) or without them.
  std::int64_t active_params(bool with_embeddings = true) const;
  // The MLP's intermediate values per token, as the mean over layers: ffn_hidden for a dense model;
  // in a MoE layer top_k x the experts' width plus the shared experts' (each token's rows in the
  // experts it is routed to). Sizes the MLP's activations and elementwise work per token.
  double mlp_width() const;
  // Layers of the sliding kind (0 when layer_kinds is empty).
  int sliding_layers() const;
  // Layers of the linear kind (0 when layer_kinds is empty), and their share of the layers.
  int linear_layers() const;
  double linear_share() const { return layers > 0 ? double(linear_layers()) / layers : 0.0; }
  // One gated DeltaNet layer's parameters in place of attention_params() (README "Linear
  // attention"): in_proj_qkvz, in_proj_ba, conv1d, A_log, dt_bias, the gated norm and out_proj;
  // and the part of it that is GEMM weights (in_proj_qkvz, in_proj_ba, out_proj: 2 FLOPs per weight
  // and token). 0 without linear layers.
  std::int64_t linear_params() const;
  std::int64_t linear_weight_params() const;
  // Every layer's attention or linear-attention parameters: attention_params() per softmax layer
  // (full or sliding), linear_params() per linear layer.
  std::int64_t mixer_params_total() const;
  // Whether a sequence of seq_len tokens meets a band: a sliding layer whose window is shorter
  // than the sequence (a window of seq_len or more is full causal attention, costed as such).
  bool banded_at(std::int64_t seq_len) const { return sliding_layers() > 0 && sliding_window < seq_len; }
};

}  // namespace seqpar::sim

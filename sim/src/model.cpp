#include "seqpar/sim/model.hpp"

#include <initializer_list>

#include "seqpar/core/checked.hpp"

namespace seqpar::sim {

// Checked: a model file's shapes are user input, and a wrapped count would pass as a small model.
namespace {
std::int64_t mul(std::int64_t a, std::int64_t b) { return checked_mul(a, b, "model: parameter count"); }
std::int64_t add(std::int64_t a, std::int64_t b) { return checked_add(a, b, "model: parameter count"); }
}  // namespace

std::string_view to_string(MlpKind k) { return k == MlpKind::swiglu ? "swiglu" : "gelu"; }
std::string_view to_string(NormKind k) { return k == NormKind::rmsnorm ? "rmsnorm" : "layernorm"; }
std::string_view to_string(PositionKind k) { return k == PositionKind::rope ? "rope" : "learned"; }
std::string_view to_string(AttentionKind k) {
  switch (k) {
    case AttentionKind::full: return "full_attention";
    case AttentionKind::sliding: return "sliding_attention";
    case AttentionKind::linear: return "linear_attention";
  }
  return "full_attention";
}

namespace {
// Each enum's kinds; the name of each is its to_string.
template <class E>
bool named(std::string_view name, std::initializer_list<E> kinds, E& out) {
  for (E k : kinds)
    if (name == to_string(k)) {
      out = k;
      return true;
    }
  return false;
}
}  // namespace

bool kind_named(std::string_view name, MlpKind& out) { return named(name, {MlpKind::swiglu, MlpKind::gelu}, out); }
bool kind_named(std::string_view name, NormKind& out) { return named(name, {NormKind::rmsnorm, NormKind::layernorm}, out); }
bool kind_named(std::string_view name, PositionKind& out) {
  return named(name, {PositionKind::rope, PositionKind::learned}, out);
}

bool kind_named(std::string_view name, AttentionKind& out) {
  return named(name, {AttentionKind::full, AttentionKind::sliding, AttentionKind::linear}, out);
}

namespace {
int layers_of(const std::vector<AttentionKind>& kinds, AttentionKind kind) {
  int n = 0;
  for (AttentionKind k : kinds) n += k == kind ? 1 : 0;
  return n;
}
}  // namespace

int Model::sliding_layers() const { return layers_of(layer_kinds, AttentionKind::sliding); }
int Model::linear_layers() const { return layers_of(layer_kinds, AttentionKind::linear); }

std::string to_string(const std::vector<MlpKind>& kinds) {
  std::string out;
  for (MlpKind k : kinds) out += (out.empty() ? "" : ", ") + std::string(to_string(k));
  return out;
}

std::int64_t Model::fc1_columns() const { return mul(mlp == MlpKind::swiglu ? 2 : 1, ffn_hidden); }

std::int64_t Model::norm_params() const { return norm == NormKind::layernorm ? 2 * std::int64_t{hidden} : hidden; }

std::int64_t Model::attention_weight_params() const {
  const std::int64_t h = hidden, q = mul(heads, head_dim), kv = mul(kv_heads, head_dim);
  if (!mla()) return add(mul(2, mul(h, q)), mul(2, mul(h, kv)));
  // DeepSeek-V3's MLA (inference/model.py): wq_a (h x q_rank) and wq_b (q_rank x heads*head_dim), or
  // wq (h x heads*head_dim) without a q rank; wkv_a (h x (kv_rank + rope)); wkv_b (kv_rank x
  // heads*(qk_nope + v)); wo (heads*v x h).
  const std::int64_t qr = latent.q_rank, kr = latent.kv_rank, rope = latent.rope_dim;
  const std::int64_t wq = qr > 0 ? add(mul(h, qr), mul(qr, q)) : mul(h, q);
  const std::int64_t wkv_a = mul(h, add(kr, rope));
  const std::int64_t wkv_b = mul(kr, mul(heads, add(head_dim - rope, v_dim())));
  const std::int64_t wo = mul(mul(heads, v_dim()), h);
  return add(add(wq, wkv_a), add(wkv_b, wo));
}

std::int64_t Model::attention_params() const {
  return add(add(attention_weight_params(), latent_norm_params()), sink_params());
}

// transformers' Qwen3NextGatedDeltaNet (models/qwen3_next/modeling_qwen3_next.py): in_proj_qkvz
// (hidden x (2 key_heads key_dim + 2 value_heads value_dim): q, k, v, z), in_proj_ba (hidden x 2
// value_heads), out_proj (value_heads value_dim x hidden), all without bias; conv1d depthwise over
// conv_dim = 2 key_heads key_dim + value_heads value_dim channels of conv_kernel taps, no bias;
// A_log and dt_bias, one per value head; the gated RMSNorm's weight of value_dim (shared by the heads).
std::int64_t Model::linear_weight_params() const {
  if (linear.key_heads == 0) return 0;
  const std::int64_t h = hidden, qk = mul(linear.key_heads, linear.key_dim), v = mul(linear.value_heads, linear.value_dim);
  const std::int64_t qkvz = mul(h, add(mul(2, qk), mul(2, v))), ba = mul(h, mul(2, linear.value_heads));
  return add(add(qkvz, ba), mul(v, h));
}

std::int64_t Model::linear_params() const {
  if (linear.key_heads == 0) return 0;
  const std::int64_t conv_dim = add(mul(2, mul(linear.key_heads, linear.key_dim)), mul(linear.value_heads, linear.value_dim));
  const std::int64_t small = add(mul(conv_dim, linear.conv_kernel), add(mul(2, linear.value_heads), linear.value_dim));
  return add(linear_weight_params(), small);
}

std::int64_t Model::mixer_params_total() const {
  const int lin = linear_layers();
  return add(mul(layers - lin, attention_params()), mul(lin, linear_params()));
}

std::int64_t Model::dense_mlp_params() const { return add(mul(hidden, fc1_columns()), mul(hidden, ffn_hidden)); }

// Experts are SwiGLU in every MoE family seqpar reads (gate, up and down projections).
std::int64_t Model::expert_params() const { return mul(3, mul(hidden, experts.ffn)); }
std::int64_t Model::shared_expert_params() const { return mul(experts.shared, mul(3, mul(hidden, experts.shared_ffn))); }
std::int64_t Model::router_params() const { return moe() ? mul(hidden, experts.routed) : 0; }

std::int64_t Model::routed_expert_params_total() const {
  return mul(moe_layers(), mul(experts.routed, expert_params()));
}

// The attention (or linear attention) of every layer, then each layer's norms and MLP.
std::int64_t Model::layer_params_total() const {
  const std::int64_t norms = 2 * norm_params();
  const std::int64_t dense = mul(layers - moe_layers(), add(norms, dense_mlp_params()));
  const std::int64_t moe_layer = add(add(norms, shared_expert_params()), router_params());
  return add(add(add(mixer_params_total(), dense), mul(moe_layers(), moe_layer)), routed_expert_params_total());
}

std::int64_t Model::params_per_layer() const {
  if (!moe() && linear_layers() == 0) return add(add(attention_params(), dense_mlp_params()), 2 * norm_params());
  return layer_params_total() / layers;
}

double Model::mlp_width() const {
  if (!moe()) return ffn_hidden;
  const double moe_width = double(experts.top_k) * experts.ffn + double(experts.shared) * experts.shared_ffn;
  return (double(layers - moe_layers()) * ffn_hidden + double(moe_layers()) * moe_width) / layers;
}

std::int64_t Model::active_params(bool with_embeddings) const {
  const std::int64_t inactive = mul(moe_layers(), mul(experts.routed - experts.top_k, expert_params()));
  const std::int64_t all = with_embeddings ? total_params() : add(layer_params_total(), norm_params());
  return all - inactive;
}

std::int64_t Model::embedding_params() const {
  const std::int64_t table = mul(vocab, hidden);
  return add(tied_embeddings ? table : mul(2, table), norm_params());  // + final norm
}

std::int64_t Model::total_params() const {
  if (!moe() && linear_layers() == 0) return add(mul(layers, params_per_layer()), embedding_params());
  return add(layer_params_total(), embedding_params());
}

}  // namespace seqpar::sim

#include "seqpar/train/model_config.hpp"

#include <fmt/format.h>

#include "seqpar/core/checked.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::train {

// Checked: user sizes (--hidden 1e9 ...) would otherwise wrap into a small or negative count.
namespace {
constexpr const char* kParamFields = "parameters (layers, hidden, heads x head_dim, kv_heads, ffn_hidden, vocab)";
std::int64_t mul(std::int64_t a, std::int64_t b) { return checked_mul<std::int64_t>(a, b, kParamFields); }
std::int64_t add(std::int64_t a, std::int64_t b) { return checked_add<std::int64_t>(a, b, kParamFields); }
}  // namespace

std::int64_t ModelConfig::attention_params_per_layer() const {
  const std::int64_t c = hidden, q = mul(heads, head_dim), kv = mul(kv_heads, head_dim);
  return add(c, add(mul(2, mul(c, q)), mul(2, mul(c, kv))));  // norm; wq and wo; wk and wv
}

std::int64_t ModelConfig::mlp_params_per_layer() const {
  return add(hidden, mul(3, mul(hidden, ffn)));  // norm; w1, w3 and w2
}

std::int64_t ModelConfig::params_per_layer() const {
  return add(attention_params_per_layer(), mlp_params_per_layer());
}

std::int64_t ModelConfig::embedding_params() const { return mul(mul(vocab, hidden), tied_embeddings ? 1 : 2); }

std::int64_t ModelConfig::total_params() const {
  return add(add(mul(layers, params_per_layer()), embedding_params()), hidden);
}

int ModelConfig::sliding_layers() const { return kinds_model().sliding_layers(); }

std::int64_t ModelConfig::window_of(int layer) const {
  const bool slides = !layer_kinds.empty() && layer_kinds[static_cast<std::size_t>(layer)] == sim::AttentionKind::sliding;
  return slides ? sliding_window : 0;
}

sim::Model ModelConfig::kinds_model() const {
  sim::Model m;
  m.name = name;
  m.layers = layers;
  m.layer_kinds = layer_kinds;
  m.sliding_window = sliding_window;
  return m;
}

ModelConfig from_sim(const sim::Model& m) {
  // The step's block is Llama's: anything else would train a different model under this one's name.
  if (m.mlp != sim::MlpKind::swiglu)
    throw Error(fmt::format("model '{}': mlp must be swiglu for the training step (a Llama-style decoder)",
                            m.name));
  if (m.norm != sim::NormKind::rmsnorm)
    throw Error(fmt::format("model '{}': norm must be rmsnorm for the training step (a Llama-style decoder)",
                            m.name));
  if (m.positions != sim::PositionKind::rope)
    throw Error(fmt::format("model '{}': positions must be rope for the training step (a Llama-style decoder)",
                            m.name));
  if (m.mla())
    throw Error(fmt::format("model '{}': latent attention (kv_lora_rank {}) is simulator-only; the training step's "
                            "attention projects q, k, v from the hidden state (a Llama-style decoder)",
                            m.name, m.latent.kv_rank));
  if (m.linear_layers() > 0)
    throw Error(fmt::format("model '{}': linear-attention layers ({} gated DeltaNet layers) are simulator-only; the "
                            "training step's layers are softmax attention (a Llama-style decoder)",
                            m.name, m.linear_layers()));
  if (m.attention_sinks)
    throw Error(fmt::format("model '{}': attention sinks are simulator-only; the training step's softmax has no sink "
                            "logit (a Llama-style decoder)", m.name));
  // A MoE preset's MLP is experts (sim::Experts); the step's dense SwiGLU of ffn_hidden would train
  // another model, with other weights, FLOPs and memory, under its name.
  if (m.moe())
    throw Error(fmt::format("model '{}': mixture of experts ({} routed experts, top {}) is simulator-only; the training "
                            "step's MLP is one dense SwiGLU (a Llama-style decoder)",
                            m.name, m.experts.routed, m.experts.top_k));
  ModelConfig c;
  c.name = m.name;
  c.layers = m.layers;
  c.hidden = m.hidden;
  c.heads = m.heads;
  c.kv_heads = m.kv_heads;
  c.head_dim = m.head_dim;
  c.ffn = m.ffn_hidden;
  c.vocab = m.vocab;
  c.tied_embeddings = m.tied_embeddings;
  c.layer_kinds = m.layer_kinds;
  c.sliding_window = m.sliding_window;
  return c;
}

void validate(const ModelConfig& c) {
  auto positive = [](int v, const char* field) {
    if (v <= 0) throw Error(fmt::format("{} = {}: must be positive", field, v));
  };
  positive(c.layers, "layers");
  positive(c.hidden, "hidden");
  positive(c.heads, "heads");
  positive(c.kv_heads, "kv_heads");
  positive(c.head_dim, "head_dim");
  positive(c.ffn, "ffn_hidden");
  positive(c.vocab, "vocab");
  if (c.heads % c.kv_heads != 0)
    throw Error(fmt::format("heads = {} must be divisible by kv_heads = {}", c.heads, c.kv_heads));
  if (!c.layer_kinds.empty() && c.layer_kinds.size() != static_cast<std::size_t>(c.layers))
    throw Error(fmt::format("layer kinds: {} kinds for {} layers (one kind a layer; --layers on a preset with sliding "
                            "layers changes its depth: give --window to make every layer sliding or full)",
                            c.layer_kinds.size(), c.layers));
  if (c.sliding_window < 0)
    throw Error(fmt::format("window = {}: must be >= 0 (0: full causal attention)", c.sliding_window));
  if (c.sliding_layers() > 0 && c.sliding_window < 1)
    throw Error(fmt::format("window = {}: sliding-window layers need a window >= 1 (the keys a query sees, itself "
                            "included)", c.sliding_window));
  if (c.head_dim % 2 != 0)
    throw Error(fmt::format("head_dim = {} must be even (rotary embedding rotates pairs)", c.head_dim));
}

double block_flops(const ModelConfig& c, std::int64_t batch, std::int64_t seq_len,
                   bool attention_only) {
  const double t = static_cast<double>(batch) * static_cast<double>(seq_len);
  const double h = c.hidden, q = static_cast<double>(c.heads) * c.head_dim,
               kv = static_cast<double>(c.kv_heads) * c.head_dim;
  double gemm_fwd = 2.0 * t * h * (q + 2 * kv) + 2.0 * t * q * h;
  if (!attention_only) gemm_fwd += 2.0 * t * h * c.ffn * 3;
  const double attn_fwd = 4.0 * static_cast<double>(batch) * static_cast<double>(seq_len) *
                          static_cast<double>(seq_len) * c.heads * c.head_dim / 2.0;
  return 3.0 * gemm_fwd + 3.5 * attn_fwd;
}

double model_flops(const ModelConfig& c, std::int64_t batch, std::int64_t seq_len) {
  const double t = static_cast<double>(batch) * static_cast<double>(seq_len);
  return c.layers * block_flops(c, batch, seq_len, false) + 3.0 * 2.0 * t * c.hidden * c.vocab;
}

}  // namespace seqpar::train

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
// ending at itself (Hugging Face's `sliding_window`; Gemma 2/3's local layers, Mistral v0.1's).
enum class AttentionKind { full, sliding };
std::string_view to_string(AttentionKind k);  // "full_attention", "sliding_attention" (HF's layer_types)
bool kind_named(std::string_view name, AttentionKind& out);

struct Model {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
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
  // Where each figure came from (field -> the preset's "source": a model card, a config.json and
  // its key); empty for figures given as bare numbers. Shown in the simulator's JSON.
  std::map<std::string, std::string> sources;

  // Parameter counts: weights and norms; linear-layer biases are not modelled (< 0.1% of GPT's).
  // Computed with checked arithmetic: a count beyond 64 bits throws seqpar::Error.
  // The first MLP GEMM's output columns: gate and up (2 x ffn) for SwiGLU, ffn for GELU.
  std::int64_t fc1_columns() const;
  std::int64_t norm_params() const;
  std::int64_t params_per_layer() const;
  std::int64_t embedding_params() const;  // token embedding + LM head (once if tied) + final norm
  std::int64_t total_params() const;
  // Layers of the sliding kind (0 when layer_kinds is empty).
  int sliding_layers() const;
  // Whether a sequence of seq_len tokens meets a band: a sliding layer whose window is shorter
  // than the sequence (a window of seq_len or more is full causal attention, costed as such).
  bool banded_at(std::int64_t seq_len) const { return sliding_layers() > 0 && sliding_window < seq_len; }
};

}  // namespace seqpar::sim

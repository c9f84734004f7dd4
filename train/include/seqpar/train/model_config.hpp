// Sizes of the Llama-style decoder the training step runs, and its model FLOPs (docs/ARCHITECTURE.md,
// Conventions: FLOPs: GEMMs 2mnk forward and twice that backward; attention 4·b·s²·h·d forward, halved
// when causal, 2.5x that backward; never recomputation).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "seqpar/sim/model.hpp"

namespace seqpar::train {

struct ModelConfig {
  std::string name = "custom";
  int layers = 2, hidden = 64, heads = 4, kv_heads = 2, head_dim = 16, ffn = 128, vocab = 256;
  bool tied_embeddings = false;
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;
  // Attention kinds, as the simulator's Model has them (sim/model.hpp): every layer's kind in order
  // or empty (every layer full causal), and W of the sliding layers (core's in_band: a query sees
  // the W keys ending at itself). seqpar-train's --window W makes every layer sliding.
  std::vector<sim::AttentionKind> layer_kinds;
  std::int64_t sliding_window = 0;

  // Layers of the sliding kind, and the window layer l runs (0: full causal).
  int sliding_layers() const;
  std::int64_t window_of(int layer) const;
  // The simulator's view of these kinds (name, layers and kinds only): for its legality rule.
  sim::Model kinds_model() const;

  // Parameter counts; each throws seqpar::Error naming the sizes when it does not fit in 64 bits.
  std::int64_t attention_params_per_layer() const;  // its RMSNorm, wq, wk, wv, wo
  std::int64_t mlp_params_per_layer() const;        // its RMSNorm, w1, w3, w2
  std::int64_t params_per_layer() const;
  std::int64_t embedding_params() const;  // embedding and LM head (one table when tied)
  std::int64_t total_params() const;      // every layer, the embeddings and the final norm
};

// From a simulator preset; only SwiGLU models are supported (throws seqpar::Error otherwise). Its
// attention kinds come along (sliding layers run their band).
ModelConfig from_sim(const sim::Model& m);
// Throws seqpar::Error naming the field when a size is not positive or heads are not divisible, or
// the kinds do not fit the layers (one kind a layer; sliding layers need a window >= 1).
void validate(const ModelConfig& c);

// Model FLOPs of one forward+backward of one decoder block (attention_only: without the MLP)
// over `batch` sequences of `seq_len` tokens (causal).
double block_flops(const ModelConfig& c, std::int64_t batch, std::int64_t seq_len, bool attention_only);
// The same for the whole model: every block plus the LM head.
double model_flops(const ModelConfig& c, std::int64_t batch, std::int64_t seq_len);

}  // namespace seqpar::train

// The Llama-style decoder, llm.c style: one parameter buffer with named tensors, explicit forward
// and backward per op, AdamW. Per rank it sees only its own tokens; attention goes through
// SpAttention, so the same code runs unsharded (U = R = 1) and under every SP method.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "seqpar/core/plan.hpp"
#include "seqpar/train/backend.hpp"
#include "seqpar/train/model_config.hpp"
#include "seqpar/train/sp_attention.hpp"

namespace seqpar::train {

struct ParamTensor {
  std::string name;  // "layers.0.wq", "embed", ...
  std::int64_t offset = 0, count = 0;
  bool decay = false;  // weight decay on matrices, not on norms
};

struct AdamWConfig {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.0f;
};

// What one decoder block's backward needs; freed as the backward passes it. Selective
// checkpointing leaves h1, h2 and act empty (the backward recomputes them); TiledMLP keeps none of
// h2, rstd2, gate, up, act (each MLP tile is recomputed in the backward). Activations are in the
// back end's activation type; the norms' rstd is fp32.
struct LayerActs {
  Tensor x_in, h1, x_mid, h2, gate, up, act;
  Floats rstd1, rstd2;
  AttnSaved attn;
};

class Model {
 public:
  // batch sequences of layout.local_len() tokens each on this rank. blocks_only: the decoder
  // blocks without embedding, final norm and LM head (for the layer benchmark).
  // mem: ALST's memory features (checkpoint, offload_checkpoints, tiled_mlp, tiled_loss; the
  // rest is the trainer's); tile_tokens: rows per MLP and loss tile, 0 for ALST's choice
  // (batch x core's alst_tile_tokens of the local sequence, the tiles the simulator prices).
  Model(Backend& be, const ModelConfig& cfg, int batch, const SeqLayout& layout, int ring_index,
        comm::Communicator* ulysses, comm::Communicator* ring, bool blocks_only = false,
        const seqpar::MemoryOptions& mem = {}, int tile_tokens = 0);
  ~Model();

  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  std::int64_t param_count() const { return params_.size(); }
  float* params() { return params_.data(); }
  float* grads() { return grads_.data(); }
  // Normal(0, 0.02) matrices, ones for the norms; the same for every rank given the seed.
  void init(std::uint64_t seed);
  // After the parameters were written from outside (a broadcast, a test): refreshes the bf16 copy
  // the GEMMs read (bf16 activations only; AdamW keeps it current otherwise).
  void parameters_changed();
  // The type activations are stored in (the back end's act_dtype() when the model was built).
  DType activation_type() const { return adt_; }

  // tokens, labels (-1: no label) and positions of this rank's batch*local_len tokens (device
  // buffers). Runs forward and backward, accumulating into the gradients; dloss_scale is
  // d(loss)/d(token loss), 1 / (real tokens of the whole step). Returns this rank's summed loss.
  double forward_backward(const int* tokens, const int* labels, const int* positions,
                          float dloss_scale);
  // Each token's loss from the last forward_backward, this rank's order (0 where no label): the
  // terms the step's loss averages, which validation.hpp compares one by one.
  const std::vector<float>& token_losses() const { return token_losses_; }
  void zero_grads();

  // One decoder block (attention_only: RMSNorm, QKV, RoPE, SP attention, output projection and
  // residual, without the MLP): x_out = block(x_in), keeping what the backward needs in `a`.
  Tensor block_forward(int layer, Tensor&& x_in, LayerActs& a, const int* positions,
                       bool attention_only = false);
  // dx: d(x_out) in, d(x_in) out (in place); parameter gradients accumulate. Frees `a`.
  void block_backward(int layer, LayerActs& a, Ref dx, const int* positions,
                      bool attention_only = false);
  // An activation buffer of this model's type.
  Tensor activations(std::int64_t count, MemCategory c = MemCategory::activations) {
    return Tensor(be_, count, adt_, c);
  }
  void adamw_step(const AdamWConfig& opt, int step);

  int tokens_per_rank() const { return tokens_; }
  int tile_tokens() const { return tile_; }
  SpAttention& attention() { return *attn_; }

 private:
  struct LayerParams {  // offsets into the parameter (and gradient) buffer
    std::int64_t attn_norm, wq, wk, wv, wo, mlp_norm, w1, w3, w2;
  };
  const float* p(std::int64_t off) const { return params_.data() + off; }
  float* g(std::int64_t off) { return grads_.data() + off; }
  // A weight matrix as the GEMMs read it: the bf16 copy with bf16 activations, else the fp32 master.
  CRef weight(std::int64_t off) const { return w16_.size() ? w16_.cref(off) : CRef(p(off)); }
  // rows: tokens_ for the whole rank, fewer for a tile.
  void linear_forward(Ref out, CRef inp, std::int64_t w, int out_dim, int in_dim, int rows = -1);
  // dinp (+)= dout W; dW += dout^T inp.
  void linear_backward(Ref dinp, bool accumulate, CRef dout, CRef inp, std::int64_t w, int out_dim,
                       int in_dim, int rows = -1);
  // TiledMLP: x_out += MLP(norm(x_mid)) one tile of rows at a time, keeping nothing; the
  // backward recomputes each tile and accumulates into dx (d(x_out) in, d(x_mid) out).
  void tiled_mlp_forward(const LayerParams& lp, CRef x_mid, Ref x_out);
  // One tile's MLP input side, n rows from x: the norm (h, rstd), gate, up and act = silu(gate) * up.
  void mlp_tile_forward(const LayerParams& lp, CRef x, int n, Ref h, float* rstd, Ref gate, Ref up, Ref act);
  void tiled_mlp_backward(const LayerParams& lp, CRef x_mid, Ref dx);
  // The forward of every block, keeping what the checkpoint mode says; the backward of every
  // block (recomputing as needed). dx: d(last block output) in, d(embedding output) out.
  void blocks_forward(Tensor& x, std::vector<LayerActs>& la, std::vector<Tensor>& kept,
                      const int* positions);
  void blocks_backward(std::vector<LayerActs>& la, std::vector<Tensor>& kept, Ref dx,
                       const int* positions);
  // Final norm output hf -> logits -> loss; d(hf) into dhf, the LM head gradient accumulated.
  // Tiled loss holds the logits of one tile at a time. Returns the summed loss.
  double head_forward_backward(CRef hf, const int* labels, float dloss_scale, Ref dhf);

  Backend& be_;
  DType adt_;  // the activation type
  ModelConfig cfg_;
  int batch_, tokens_;
  bool blocks_only_;
  seqpar::MemoryOptions mem_;
  int tile_;
  // Offloaded layer inputs: pinned host buffers (MemCategory::host_offload), one per layer,
  // allocated by the first step and reused.
  std::vector<Tensor> host_kept_;
  std::vector<float> token_losses_;  // host copy of the last step's per-token losses
  std::unique_ptr<SpAttention> attn_;
  std::vector<ParamTensor> tensors_;
  std::vector<LayerParams> layers_;
  std::int64_t embed_ = 0, final_norm_ = 0, lm_head_ = 0;
  Floats params_, grads_, m_, v_;
  // bf16 activations: the parameters rounded to bf16 (what the GEMMs read), written with the
  // fp32 master by each AdamW pass; empty in fp32.
  Tensor w16_;
};

}  // namespace seqpar::train

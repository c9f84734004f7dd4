// Peak GPU memory of one rank: parameters, gradients and optimizer states (ZeRO 0-3 over the
// data x sequence parallel group), stored activations (Korthikanti et al. terms without the s^2
// part, as flash attention has none), and the transients of the phase where the peak falls:
// the backward of one layer (recomputation, attention buffers) or the loss (logits).
#pragma once
#include <string_view>

#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/model.hpp"
#include "seqpar/sim/plan.hpp"

namespace seqpar::sim {

struct MemoryBreakdown {
  double parameters = 0, gradients = 0, optimizer_states = 0, activations = 0;
  double attention_buffers = 0, working = 0, logits = 0, reserved = 0;
  double total() const {
    return parameters + gradients + optimizer_states + activations + attention_buffers + working + logits + reserved;
  }
};

struct MemoryEstimate {
  MemoryBreakdown peak;            // the parts alive at the peak; they add up to peak.total()
  std::string_view peak_phase;     // "layer-backward" or "loss"
  double layer_phase_bytes = 0;    // total at the other phase too, for the report
  double loss_phase_bytes = 0;
  double host_bytes = 0;           // offloaded checkpoints and optimizer states, per GPU
  double device_checkpoint_bytes = 0;  // full checkpointing's layer inputs on the GPU at most
  double loss_logits_bytes = 0;    // the logits the loss phase holds, peak or not
};

// What one layer stores for its backward per local token, for a checkpoint mode, counted in
// values of each precision: bf16 tensors, and fp32 ones (attention's LSE per head, RMSNorm's rstd).
struct StoredValues {
  double bf16 = 0, fp32 = 0;
};
StoredValues stored_values_per_token(const Model& m, const Plan& p, Checkpoint mode);
// The same in bytes: 2 per bf16 value, 4 per fp32 value.
double stored_bytes_per_token(const Model& m, const Plan& p, Checkpoint mode);

// Tokens in one tile of tiled MLP and tiled loss: ALST's tile of the local sequence
// (core/tiling.hpp, the rule the training step runs) times the micro-batch.
double alst_tile_rows(const Model& m, const Plan& p);

// The flash-attention backward kernel's workspace, held during the attention backward at any SP
// degree: an fp32 dQ accumulator (the kernel adds each key tile's dQ with atomics) and an fp32 row
// sum per query row (D = rowsum(dO * O)), for one call: one sequence's block of queries. As
// seqpar's kernel (kernels/src/cuda/flash_backward.cu, flash_attention_backward_workspace_bytes)
// and FlashAttention-2's mha_bwd (dq_accum, softmax_d) allocate it; with a kernel that expands GQA
// gradients (Gpu::attention_bwd_expands_kv_grads), dK and dV per query head too. The CPU back end
// has none of it.
double attention_kernel_workspace_bytes(const Model& m, const System& s, const Plan& p);

MemoryEstimate estimate_memory(const Model& m, const System& s, const Plan& p);

}  // namespace seqpar::sim

// The simulator's own per-phase figures of one optimizer step, kept with the result so that the
// step timeline (sim/step_trace.hpp) lays out exactly what simulate() added up, with no second
// cost model. Seconds; every layer and every micro-step costs the same, so the figures are one
// micro-step's, and `micro_steps` says how many an optimizer step runs.
#pragma once
#include "seqpar/sim/attention_cost.hpp"

namespace seqpar::sim {

struct StepFigures {
  int layers = 0;
  int micro_steps = 1;  // gradient accumulation: forward and backward passes per optimizer step
  // One layer: its GEMMs (q, k, v, o, MLP; one figure), its elementwise ops, its attention.
  double gemm_fwd_s = 0, gemm_bwd_s = 0;
  double elementwise_fwd_s = 0, elementwise_bwd_s = 0;
  AttentionCost attention;
  // Full checkpointing: the whole layer forward (GEMMs, elementwise, attention with its
  // communication) runs again before the layer's backward.
  bool full_recompute = false;
  // Other recomputation in one layer's backward (selective checkpointing, tiled MLP).
  double layer_recompute_s = 0;
  // Tensor parallelism (tensor_parallel_cost.hpp), exposed on the compute stream's clock: one
  // layer's forward and backward collectives, and the embedding's and LM head's per pass (full
  // checkpointing reruns the layer's forward collectives in its recomputation).
  double tp_layer_fwd_s = 0, tp_layer_bwd_s = 0, tp_head_fwd_s = 0, tp_head_bwd_s = 0;
  // Expert parallelism (moe_cost.hpp), exposed: one layer's dispatch and combine all-to-alls in
  // each pass (the mean over the layers; full checkpointing reruns the forward's).
  double ep_layer_fwd_s = 0, ep_layer_bwd_s = 0;
  // The LM head, and the tiled loss's recomputation in its backward.
  double head_fwd_s = 0, head_bwd_s = 0, loss_recompute_s = 0;
  // Data-parallel traffic on its own stream: during the forward (ZeRO-3 gathers), during the
  // backward, and after it (ZeRO-1/2 parameter gather, always exposed); what of each is exposed.
  double dp_fwd_s = 0, dp_bwd_s = 0, dp_after_s = 0;
  double dp_fwd_exposed_s = 0, dp_bwd_exposed_s = 0;
  // Whether the backward's traffic runs in every micro-step (ZeRO-2/3) or only in the last (ZeRO-0/1);
  // the forward's (ZeRO-3) runs in every one.
  bool dp_bwd_every_micro_step = false;
  // Checkpoint offload: one way's copy time, and what of it the forward and backward leave exposed.
  double offload_one_way_s = 0, offload_fwd_exposed_s = 0, offload_bwd_exposed_s = 0;
  // Offloaded parameters: one pass's fetch from host memory, and what of it each pass leaves exposed.
  double params_fetch_s = 0, params_fwd_exposed_s = 0, params_bwd_exposed_s = 0;
  double optimizer_s = 0;
  double fp8_weight_cast_s = 0;  // FP8 weights cast with their transposes, once per step (fp8_cost.hpp)
  // Step time that no phase above accounts for (a calibrated fixed overhead per micro-step, all of
  // the optimizer step's together).
  double unattributed_s = 0;
};

}  // namespace seqpar::sim

// Mixture-of-experts layers (model.hpp: Experts) under expert parallelism (Plan::ep): the one table
// of what a MoE layer costs a rank beside the attention (README "Mixture of experts").
//
// Compute, per MoE layer and rank (T tokens of the rank's sequence shard per micro-step, TP's 1/tp
// of every GEMM's columns as for the dense MLP: Megatron-Core's expert TP defaults to the TP size):
//   router        2 T hidden routed / tp FLOPs (a GEMM over T rows);
//   shared        2 T 3 hidden shared_ffn shared / tp (GEMMs over T rows);
//   routed        2 T top_k 3 hidden ffn / tp x load, as grouped GEMMs (one launch per matrix) whose
//                 rows per expert are T top_k ep / routed (each expert's share of the EP group's
//                 routed tokens); their efficiency is the GPU's GEMM curve at that row count
//                 (assumption: a grouped GEMM runs each expert's GEMM as well as a dense GEMM of its
//                 rows; no grouped-GEMM figure is calibrated yet).
//   load          the busiest rank's routed tokens over the mean: the rank holding the busiest
//                 expert (Experts::imbalance x the mean) beside routed/ep - 1 experts at the mean,
//                 (imbalance + n - 1) / n with n = routed / ep; 1 at ep = 1, where one rank runs
//                 every expert and the sum is the mean (dropless routing: nothing is dropped).
// The backward is twice the forward's FLOPs and launches. Dense layers (the first dense_layers)
// run their dense MLP as a dense model does.
//
// Communication: the token dispatcher's all-to-alls (Megatron-Core's alltoall dispatcher), dispatch
// before the experts and combine after, in the forward; their transposes in the backward: 2 + 2
// per MoE layer. Each all-to-all's per-rank buffer is T / tp x top_k x hidden x 2 bytes (bf16),
// of which (ep - 1) / ep leaves the rank (collective_time's bus factor). The group is ep ranks tp
// world ranks apart inside the data x sequence parallel ranks, placed with place_group, so it
// crosses the same NVLink ports and NICs as a Ulysses group of that size and stride. The layer
// runs its attention, then its experts: the expert all-to-alls and Ulysses' (or the ring's
// exchange) use those links one after the other, each at the links' full rate, and their times
// add; none is overlapped with compute (Megatron-Core's default; its EP overlap is not modelled).
#pragma once
#include "seqpar/core/plan.hpp"
#include "seqpar/sim/comm_cost.hpp"
#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/model.hpp"

namespace seqpar::sim {

struct MoeCost {
  // The layer's MLP (dense or experts with their router) and its all-to-alls, each the mean over
  // the model's layers (the dense layers have no all-to-all), per micro-step: simulate() multiplies
  // by the layers as it does every per-layer figure.
  double mlp_fwd_s = 0, mlp_bwd_s = 0;
  double all_to_all_fwd_s = 0, all_to_all_bwd_s = 0;
  // One MoE layer's figures: an all-to-all's per-rank buffer (nccl-tests size) and time, the rows
  // each local expert's GEMMs run over, the busiest rank's load over the mean.
  double all_to_all_bytes = 0, all_to_all_s = 0;
  double rows_per_expert = 0, load = 1;
};

// Forward FLOPs of one layer's MLP for `tokens` rows, the mean over the model's layers: the dense
// MLP; in MoE layers top_k routed experts, the shared experts and the router (every expert a token
// passes: the FLOPs of the active parameters, as Megatron-Core and torchtitan count MoE models).
double moe_mlp_flops(const Model& m, double tokens);

// The table above for a MoE model (m.moe()) and plan p at `tokens` per rank per micro-step.
MoeCost moe_layer_cost(const Model& m, const System& s, const Plan& p, double tokens);

// The EP group: ep ranks, tp world ranks apart (consecutive data x sequence parallel ranks).
Placement place_ep_group(const System& s, const Plan& p);

// Memory (memory_cost.cpp), each the mean over the model's layers:
// - one layer's parameters on a rank: 1/tp of each, 1/(tp ep) of the routed experts;
// - the MLP weight columns a rank holds per layer (the dense ffn_hidden; in a MoE layer its
//   routed / ep experts' and the shared experts' widths), sizing the per-layer weight terms
//   (casts, gradient buffers) a framework profile charges as hidden x ffn;
// - the token dispatcher's buffers a MoE layer keeps for its backward: the permuted tokens the
//   experts' first GEMMs read (T / tp x top_k x hidden, bf16; TP's sequence-parallel shard) and
//   the routing probabilities and indices (T / tp x top_k, fp32 and int32), as Megatron-Core's
//   alltoall dispatcher holds them.
double moe_layer_params_per_rank(const Model& m, const Plan& p);
double moe_local_mlp_columns(const Model& m, const Plan& p);
double moe_dispatch_bytes_per_layer(const Model& m, const Plan& p, double tokens);

// Why plan p cannot split model m's experts (empty when it can): ep > 1 on a dense model, or
// routed experts not divisible by ep.
std::string expert_parallel_refusal(const Model& m, const Plan& p);

}  // namespace seqpar::sim

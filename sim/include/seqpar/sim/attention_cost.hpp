// Cost of one layer's sequence-parallel attention: Ulysses all-to-alls (exposed), then the ring
// over the Ulysses groups, where each step costs max(compute, transfer) (overlapped) and a
// contiguous causal ring waits for its most loaded rank while zigzag balances the work; or, for
// all-gather KV context parallelism, one exposed all-gather of K,V (forward, and again in the
// backward), one kernel call per query chunk over its key prefix, and an exposed reduce-scatter
// of dK,dV.
#pragma once
#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/model.hpp"
#include "seqpar/core/plan_validity.hpp"
#include "seqpar/sim/plan.hpp"

namespace seqpar::sim {

struct DocumentCosts;

// KV heads that enter the Ulysses all-to-all on one rank: all of its TP rank's KV heads
// (kv_heads_per_tp_rank) when U divides them, else each head replicated up to U heads (valid only
// when they divide U; see validity.hpp).
inline int kv_heads_sent(const Model& m, const Plan& p) {
  const int kv = kv_heads_per_tp_rank(m.kv_heads, p.tp);
  return kv % p.ulysses_degree == 0 ? kv : p.ulysses_degree;
}

// The shapes one rank works on; shared by the time and memory models.
struct AttentionShapes {
  double batch = 1;
  // N / P: a rank's tokens entering attention and the GEMMs (per sequence). Under tensor
  // parallelism these are the TP group's tokens, all-gathered; its norm and residual regions hold
  // N / (P x tp) of them (sequence parallelism).
  double local_tokens = 0;
  double attn_tokens = 0;      // N / R: tokens per rank inside attention, after the Ulysses all-to-all
  double heads_tp = 0;         // query heads of one TP rank: heads / tp
  double kv_heads_tp = 0;      // KV heads of one TP rank: kv_heads / tp, or 1 replicated when tp > kv_heads
  double heads_local = 0;      // query heads per rank inside attention: heads / (tp x U)
  double kv_heads_sent = 0;    // KV heads entering the all-to-all: kv_heads_tp, or U when replicated
  double kv_heads_local = 0;   // KV heads per rank inside attention: max(kv_heads_tp / U, 1)
  double qkv_a2a_bytes = 0;    // per-rank all-to-all buffer for q, k, v (bf16)
  double o_a2a_bytes = 0;      // per-rank all-to-all buffer for the output
  double kv_block_bytes = 0;   // one ring step's K and V block (bf16): a rank's own K,V
  double block_tokens = 0;     // the token dimension of one kernel call after ring step 0 (N/R, zigzag N/2R);
                               // all-gather: a query chunk (N/2R head/tail, N/R contiguous)
  double key_tokens = 0;       // the longest key length of one kernel call: N/R (ring, Ulysses: N); all-gather N
  double kv_gathered_bytes = 0;  // all-gather: the whole sequence's K and V (bf16), what each rank gathers
};
AttentionShapes attention_shapes(const Model& m, const Plan& p);

struct AttentionCost {
  double fwd_kernel_s = 0, bwd_kernel_s = 0;  // attention kernels alone
  double fwd_s = 0, bwd_s = 0;                // elapsed, with the communication left exposed
  double fwd_comm_s = 0, bwd_comm_s = 0;      // all transfer time, hidden or not
  double model_flops_fwd = 0;                 // causal attention FLOPs per rank (for MFU)
  // The parts the elapsed times above are made of, for the step timeline (sim/step_trace.hpp):
  // the two Ulysses all-to-alls (0 without Ulysses), the ring's steps (1 without a ring), one hop's
  // transfer, and the kernel time of step 0 (the causal diagonal) and of each later step.
  double a2a_qkv_s = 0, a2a_o_s = 0;
  // All-gather KV (0 otherwise): the K,V all-gather (forward, and again in the backward) and the
  // backward's dK,dV reduce-scatter, each exposed; the kernels are step 0's figures.
  double kv_gather_s = 0, dkv_scatter_s = 0;
  int ring_steps = 1;
  double hop_s = 0;
  double step0_fwd_s = 0, step_fwd_s = 0, step0_bwd_s = 0, step_bwd_s = 0;
  // A model with linear-attention layers (linear_attention.hpp): their share of the mean layer,
  // elapsed, which the timeline draws as one block; the parts above are then the softmax layers'
  // share alone (a mean of ring steps and state all-gathers would not be either's timeline).
  double linear_fwd_s = 0, linear_bwd_s = 0;
};
// With `docs` (document_cost.hpp), the attention of a packed-document workload in its load
// balancer's layout: each step's kernel time scaled by its slowest rank's share, the transfers by
// the most tokens a rank holds.
AttentionCost attention_layer_cost(const Model& m, const System& s, const Plan& p, const DocumentCosts* docs = nullptr);

}  // namespace seqpar::sim

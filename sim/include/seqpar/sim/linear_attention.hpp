// Linear-attention layers (model.hpp's AttentionKind::linear: a gated DeltaNet, Qwen3-Next's and
// Qwen3.5's) under the SP methods: the one table of which methods an implementation serves them
// with (the legality rule, with its source), their work, the bytes each method moves, what a layer
// stores for its backward, and one layer's cost beside the full layer's (attention_cost.hpp mixes
// the kinds over the model's layers).
//
// Work. fla's chunked gated delta rule (fla/ops/gated_delta_rule/chunk.py, chunk size C = 64) on
// value head h of width d_v with keys of d_k (q and k repeated to the value heads, as
// transformers' Qwen3NextGatedDeltaNet calls it), per token (linear_rule_flops_per_token):
//   A = beta K K^T in the chunk       2 C d_k        (chunk_scaled_dot_kkt_fwd)
//   (I + A)^-1, C x C lower-triangular 2 C^2 / 3     (solve_tril: C^3/3 multiply-adds a chunk)
//   w = A beta K, u = A beta V        2 C (d_k + d_v) (recompute_w_u_fwd)
//   v_new = u - w h; h += K^T v_new   4 d_k d_v      (chunk_gated_delta_rule_fwd_h: a d_k x d_v state)
//   o = q h + (q K^T, masked) v_new   2 d_k d_v + 2 C (d_k + d_v) (chunk_fwd_o)
// No causal imbalance: a token's work does not grow with its position. The backward recomputes
// w, u and the chunk states h (chunk_gated_delta_rule_bwd) and then runs the transposed products:
// taken as 2.5 x the forward, the factor the attention tables use (an assumption: no per-kernel
// count of fla's backward is made). Not counted: the depthwise causal conv (2 conv_kernel FLOPs per
// channel and token, about 1% of the rule's at Qwen3-Next's shape), the l2norms and the gates.
//
// Kernel rate. The chunked kernels are Triton kernels of 64-row tiles, not a FlashAttention
// kernel, and no published throughput figure for them on the GPUs seqpar models was found:
// kLinearRuleEfficiency of the GPU's bf16 peak is an assumption (README "Linear attention").
//
// Per SP method, on one rank (B sequences of N tokens, heads / tp on a TP rank):
//   Ulysses       Megatron-LM's gated DeltaNet CP (PRs 2614/2642) and PyTorch PR 197487: q, k, v,
//                 the output gate z, beta and alpha cross an all-to-all from sequence-parallel to
//                 head-parallel over the full timeline (the causal conv runs there), and the output
//                 comes back: per local token 2 H_k d_k + 2 H_v d_v + 2 H_v values in, H_v d_v out
//                 (bf16), reversed in the backward; the widths of Megatron-LM's in_proj split
//                 (megatron/core/ssm/gated_delta_net.py: query, key of qk_dim, value, z of v_dim,
//                 beta, alpha of num_value_heads; q and k are repeated to the value heads after the
//                 conv). Key and value heads must divide by U.
//   ring, ring-zigzag, allgather, allgather-contiguous: state passing. fla's native context
//                 parallelism (fla/ops/cp, PR 691: chunk_gated_delta_rule_fwd_h_pre_process) has
//                 every rank but the last summarize its tokens as one affine map of the incoming
//                 state, [H_v, d_k, d_v + d_k] in fp32, and all-gathers the summaries (not a
//                 sequential chain of R steps: each rank folds its predecessors' maps into its
//                 initial state); the causal conv's halo, the last conv_kernel - 1 tokens of the
//                 conv's channels, crosses by another all-gather (conv_cp_send_recv_fwd). The
//                 backward all-gathers the summaries' and the halo's gradients. A head/tail layout
//                 (ring-zigzag, allgather) holds two fragments a rank, each summarized (Attention
//                 Gym's delta-rule CP, which torchtitan PR 4803 uses with head-tail partitions).
//                 Building a summary runs the state pass over a d_k x (d_v + d_k) map: 4 d_k (d_k
//                 + d_v) FLOPs per token and head more on every rank but the last. Folding the R - 1
//                 maps (2 d_k^2 (d_k + d_v) FLOPs a head each, ~10^-4 of a 64K rank's rule) is not
//                 counted.
//   hybrid        refused (linear_refusal).
// The summaries and halos are exposed (the local pass waits for its initial state).
#pragma once
#include <string>

#include "seqpar/core/plan.hpp"
#include "seqpar/sim/attention_cost.hpp"

namespace seqpar::sim {

// The chunk of fla's chunked gated delta rule (chunk_gated_delta_rule's default chunk_size).
inline constexpr double kLinearChunk = 64;
// The share of the GPU's bf16 peak the chunked rule's kernels reach: an assumption (no published figure found).
inline constexpr double kLinearRuleEfficiency = 0.3;

// Why no implementation seqpar knows runs linear-attention layers under method `m` (the rule, with
// its source), or empty when one does (every method but hybrid).
std::string linear_refusal(Method m);

// Forward FLOPs of the chunked gated delta rule per token and value head (the table above).
double linear_rule_flops_per_token(const LinearAttention& l);
// Forward FLOPs of one state summary per token and value head (fla's CP pre-process).
double linear_summary_flops_per_token(const LinearAttention& l);
// The causal conv's channels: q, k and v (2 H_k d_k + H_v d_v).
double linear_conv_channels(const LinearAttention& l);

// The bytes one rank moves for one linear layer on plan `p`, forward (the backward moves the same):
// Ulysses' two all-to-alls (each rank's buffer), or state passing's two all-gathers (the gathered
// output: every rank's summaries, every rank's halos).
struct LinearBytes {
  double a2a_in = 0, a2a_out = 0;
  double summaries = 0, halos = 0;
};
LinearBytes linear_layer_bytes(const Model& m, const Plan& p);

// What one linear layer stores for its backward per token of the rank's shard (bf16 and fp32
// values), as transformers' Qwen3NextGatedDeltaNet with fla's kernels saves it: the conv's input
// and output (2 x conv channels), the l2-normed q and k at the value heads (2 H_v d_k), the chunks'
// triangular solves A (C per value head, bf16: chunk_gated_delta_rule_fwd_intra), beta, the rule's
// output, the gate z and the gated norm's output (3 H_v d_v); fp32: q's and k's l2norm rstd, the
// decay's softplus input, output and g, the gated norm's rstd (6 H_v). fla keeps no chunk state
// for the backward: it recomputes h (chunk_gated_delta_rule_bwd). The layer input and the norm
// output before in_proj are the framework inventory's (every layer has them).
struct LinearStored {
  double bf16 = 0, fp32 = 0;
};
LinearStored linear_stored_values_per_token(const Model& m, const Plan& p);

// One linear layer's cost on plan `p` (a method linear_refusal allows). The state summaries'
// all-gather is reported in kv_gather_s (and its backward's in dkv_scatter_s), the all-to-alls in
// a2a_qkv_s and a2a_o_s.
AttentionCost linear_layer_cost(const Model& m, const System& s, const Plan& p);

}  // namespace seqpar::sim

// Sliding-window attention layers (model.hpp's AttentionKind::sliding) under the SP methods: the
// one table of which methods an implementation serves for a window (the legality rule, with its
// source), and a banded layer's cost beside the full layer's (attention_cost.hpp mixes the two
// over the model's layers).
//
// What the band changes. A query at position q sees the keys (q - W, q]: a sequence of N tokens has
// band_pairs(N, W) = W (W + 1) / 2 + (N - W) W pairs per head (core/doc_work.hpp) instead of
// about N^2 / 2. Per method, on the slowest rank:
//   Ulysses       every rank runs the whole sequence's band for heads/U heads: the kernels scale by
//                 band_pairs(N, W) / N^2 of the unmasked square (a causal kernel, at the causal
//                 rate); the all-to-alls are unchanged (q, k, v and the output of every token).
//   all-gather    (Transformer Engine's cp_comm_type "all_gather", head/tail chunks r and 2R-1-r of
//                 2R) each chunk is one call over the keys of its window: chunk i of c tokens holds
//                 band_pairs((i+1)c, W) - band_pairs(ic, W) pairs. TE gathers the whole sequence's
//                 K,V and slices each chunk's window out of it (AttnFuncWithCPAndKVAllGather), so
//                 the gather and the dK,dV reduce-scatter move what the full layer's do.
//   ring, ring-zigzag, hybrid, allgather-contiguous: refused (window_refusal).
// The layer's activations are the full layer's (the same q, k, v, output and softmax statistics
// per token); only the kernel's own workspace differs, which the memory model does not count.
#pragma once
#include <cstdint>
#include <string>

#include "seqpar/core/plan.hpp"
#include "seqpar/sim/attention_cost.hpp"

namespace seqpar::sim {

// Why no implementation seqpar knows runs sliding-window layers under method `m` (the rule, with
// its source), or empty when one does (ulysses, allgather).
std::string window_refusal(Method m);

// The pairs of the queries at positions [a, a + c) of one causal sequence under window W (W >= 1):
// sum over q of min(q + 1, W). In double: the planner's arithmetic, exact below 2^53.
double band_pairs_between(double a, double c, double W);

// One sliding layer's attention cost on plan `p` (a method window_refusal allows, W < seq_len):
// `full` is the full layer's cost on the same plan; the communication is its, the kernels the band's.
AttentionCost sliding_layer_cost(const Model& m, const System& s, const Plan& p, const AttentionCost& full);

}  // namespace seqpar::sim

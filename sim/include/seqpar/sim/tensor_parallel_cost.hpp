// Cost of Megatron-style tensor parallelism with its sequence-parallel regions (Korthikanti et
// al., arXiv 2205.05198, Sec. 4.2.2): per layer, the forward all-gathers the (tokens x hidden)
// activation before the QKV and fc1 GEMMs and reduce-scatters it after the output projection and
// fc2; the backward runs the conjugates (a reduce-scatter for each all-gather, an all-gather for
// each reduce-scatter; the re-gather of the sharded GEMM input for the weight gradient runs
// beside the input-gradient GEMM, hidden). Around the layers, the vocab-parallel embedding's output is reduce-
// scattered and the LM head's input all-gathered (and their conjugates in the backward). Megatron
// runs them on the compute stream: none overlaps the GEMMs (TE's userbuffer overlap aside).
#pragma once
#include "seqpar/sim/comm_cost.hpp"
#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/model.hpp"
#include "seqpar/sim/pipeline_cost.hpp"
#include "seqpar/core/plan.hpp"

#include <algorithm>

namespace seqpar::sim {

struct TensorParallelCost {
  double activation_bytes = 0;  // one all-gather's output: micro_batch x (seq_len / sp) x hidden, bf16
  double all_gather_s = 0, reduce_scatter_s = 0;  // one of each over the plan's TP group
  double layer_fwd_s = 0, layer_bwd_s = 0;        // one layer: 2 all-gathers + 2 reduce-scatters each
  double head_fwd_s = 0, head_bwd_s = 0;          // the embedding's and the LM head's, once per pass
};
// All zero for tp = 1.
TensorParallelCost tensor_parallel_cost(const Model& m, const System& s, const seqpar::Plan& p);

// The parameters one rank holds before ZeRO: the model's over tp (the norms' weights, replicated
// over the TP group in Megatron, are counted as sharded: a few hidden-sized vectors per layer).
// With pipeline stages, the largest stage's (pipeline_cost.hpp: the first with the embedding, the
// last with the head, or one between with more layers than either): the one whose data-parallel
// traffic and optimizer step take longest (validity refuses stages for a mixture of experts).
// Under expert parallelism (Plan::ep) the rank holds 1/ep of the routed experts (moe_cost.hpp).
// `split` is the plan's stage_split (pipeline_cost.hpp: StageLayout holds the answer per structure).
inline double params_per_tp_rank(const Model& m, const seqpar::Plan& p, StageSplit split) {
  if (p.pp > 1) {
    double most =
        std::max(stage_params_per_tp_rank(m, p, split, 0), stage_params_per_tp_rank(m, p, split, p.pp - 1));
    if (p.pp > 2) most = std::max(most, stage_params_per_tp_rank(m, p, split, 1));
    return most;
  }
  if (p.ep <= 1 || !m.moe()) return double(m.total_params()) / (p.tp > 0 ? p.tp : 1);
  const double tp = p.tp > 0 ? p.tp : 1, experts = double(m.routed_expert_params_total());
  return (double(m.total_params()) - experts) / tp + experts / (tp * p.ep);
}
inline double params_per_tp_rank(const Model& m, const seqpar::Plan& p) {
  return params_per_tp_rank(m, p, p.pp > 1 ? stage_split(m, p) : StageSplit::even);
}
// The parameters whose ZeRO shards a rank holds, before dividing by zero_group_size: the model's
// (with stages, the largest stage's) over tp. Experts split over ep ranks shard over the other D /
// ep ranks of the group (Megatron-Core's expert data parallelism): 1/(tp ep) of them over D/ep
// ranks is the same share as 1/tp over D.
inline double zero_sharded_params_per_tp_rank(const Model& m, const seqpar::Plan& p) {
  if (p.pp > 1) return params_per_tp_rank(m, p);
  return double(m.total_params()) / (p.tp > 0 ? p.tp : 1);
}
// The ranks ZeRO shards over and the data-parallel collectives run in: the dp x sp ranks of one
// stage holding the same TP shard, gpus / (tp x pp).
inline int zero_group_size(const seqpar::Plan& p) {
  const int t = p.tp > 0 ? p.tp : 1, s = p.pp > 0 ? p.pp : 1;
  return p.gpus / t / s;
}

}  // namespace seqpar::sim

#include "seqpar/sim/tensor_parallel_cost.hpp"

namespace seqpar::sim {

TensorParallelCost tensor_parallel_cost(const Model& m, const System& s, const seqpar::Plan& p) {
  TensorParallelCost c;
  if (p.tp <= 1) return c;
  // The TP group's tokens: a rank's SP shard, gathered whole inside the TP region.
  c.activation_bytes = 2.0 * double(p.micro_batch) * (double(p.seq_len) / p.sp) * m.hidden;
  const Placement group = place_tp_group(s, p);
  c.all_gather_s = collective_time(s, Collective::all_gather, c.activation_bytes, group);
  c.reduce_scatter_s = collective_time(s, Collective::reduce_scatter, c.activation_bytes, group);
  // Attention and MLP each: all-gather in, reduce-scatter out (the backward: the conjugates).
  c.layer_fwd_s = c.layer_bwd_s = 2 * (c.all_gather_s + c.reduce_scatter_s);
  // Embedding: reduce-scatter of its partial sums; LM head: all-gather of its input.
  c.head_fwd_s = c.head_bwd_s = c.all_gather_s + c.reduce_scatter_s;
  return c;
}

}  // namespace seqpar::sim

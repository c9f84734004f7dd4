// Multi-head latent attention (model.hpp's Latent) under the SP methods: the one table of which
// methods an implementation serves for it (the legality rule, with its source). Its costs are the
// existing tables' with the model's widths (attention_cost.cpp, compute_cost.cpp, memory_cost.cpp):
//   FLOPs       the five projections (Model::attention_weight_params, 2 per weight and token);
//               QK^T over head_dim-wide heads and PV over v_dim-wide ones (4 x pair_dim per pair).
//   Ulysses     all-to-all of q (head_dim), k (head_dim) and v (v_dim) per head, heads split over
//               the U ranks, and the output (v_dim) back.
//   ring        Transformer Engine's p2p ring (AttnFuncWithCPAndKVP2P) sends the up-projected K and
//               V of every head, flattened into one buffer when their widths differ
//               (`torch.cat((k.view(-1), v.view(-1)))`): per token and head head_dim + v_dim values.
//               Sending the latent c_KV (kv_rank) and the shared rotary key (rope_dim) and
//               re-projecting on the receiving rank would move (kv_rank + rope) / (heads x
//               (head_dim + v_dim)) of that; no implementation checked does it, so it is not modelled.
//   all-gather  Transformer Engine's all_gather gathers K and V at their widths (the same bytes per
//               token as a ring hop, from every rank).
#pragma once
#include <string>
#include <string_view>

#include "seqpar/core/plan.hpp"

namespace seqpar::sim {

// Why no implementation seqpar knows runs latent attention under method `m` with the attention
// kernel family `kernel` (System::gpu.attention_kernel: "cudnn", "flash-attention-2", ...), the rule
// with its source, or empty when one does: ring-zigzag and hybrid with any kernel; ulysses and
// allgather with cuDNN's (Transformer Engine 2.16 on).
std::string latent_refusal(Method m, std::string_view kernel);

}  // namespace seqpar::sim

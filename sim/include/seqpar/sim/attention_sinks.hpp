// Attention sinks (model.hpp's Model::attention_sinks) under the SP methods: the one table of which
// methods an implementation serves them with (the legality rule, with its source). Their costs:
//   parameters  one learned logit per query head and layer (Model::sink_params), in the layer's
//               parameters, gradients and optimizer states like any weight.
//   FLOPs       one more logit per (query, head) in the softmax's denominator: H exp-and-adds per
//               query against the H x keys scores it already takes (under 0.1% of a 4K causal
//               layer's softmax, less beyond); not added: no cost table has a per-query term.
//   Ulysses     Transformer Engine splits the H logits over the U ranks with the heads
//               (flash_attn_a2a_communicate_softmax_offset): H / U values a layer, not per token;
//               not added to the all-to-alls' bytes.
//   memory      H values a layer (in the parameters); the activations are the full layer's.
#pragma once
#include <string>
#include <string_view>

#include "seqpar/core/plan.hpp"

namespace seqpar::sim {

// Why no implementation seqpar knows runs attention sinks under method `m` with the attention
// kernel family `kernel` (System::gpu.attention_kernel), the rule with its source, or empty when one
// does: ulysses with cuDNN's kernel (Transformer Engine 2.9 on, cuDNN 9.13.1 on); every other method
// is refused.
std::string sinks_refusal(Method m, std::string_view kernel);

}  // namespace seqpar::sim

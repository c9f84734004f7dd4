// Latent attention under the SP methods: legality (latent_attention.hpp).
#include "seqpar/sim/latent_attention.hpp"

#include <fmt/format.h>

namespace seqpar::sim {

namespace {
// Transformer Engine's guard on every context-parallel attention call (attn_forward_func_with_cp in
// transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py, NVIDIA/TransformerEngine
// at 015d22571b33):
//   enable_mla = k.shape[-1] != v.shape[-1]
//   assert not enable_mla or cp_comm_type in ["p2p", "a2a+p2p"],
//       "The context parallel running configs cannot support MLA!"
constexpr const char* kTeLatentRule =
    "Transformer Engine's context parallelism serves latent attention (keys and values of different widths) with "
    "cp_comm_type p2p or a2a+p2p only (attn_forward_func_with_cp: \"The context parallel running configs cannot "
    "support MLA!\")";
}  // namespace

std::string latent_refusal(Method m) {
  switch (m) {
    case Method::ring_zigzag:  // TE's p2p: head/tail chunks (DualChunkSwap) with a causal mask
    case Method::hybrid:       // TE's a2a+p2p
      return {};
    case Method::ulysses:
      return fmt::format("ulysses: no implementation supports latent attention ({}: its a2a refuses it)", kTeLatentRule);
    case Method::allgather:
      return fmt::format("allgather: no implementation supports latent attention ({}: its all_gather refuses it)",
                         kTeLatentRule);
    case Method::ring:
    case Method::allgather_contiguous:
      return fmt::format("{}: no implementation seqpar knows runs latent attention over contiguous shards ({}; its "
                         "p2p shards head/tail: use ring-zigzag)",
                         to_string(m), kTeLatentRule);
  }
  return "unknown method";
}

}  // namespace seqpar::sim

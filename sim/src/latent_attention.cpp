// Latent attention under the SP methods: legality (latent_attention.hpp).
#include "seqpar/sim/latent_attention.hpp"

#include <fmt/format.h>

#include "seqpar/sim/attention_kernels.hpp"

namespace seqpar::sim {

namespace {
// Transformer Engine's context parallelism (transformer_engine/pytorch/attention/dot_product_attention/
// context_parallel.py, attn_forward_func_with_cp). Until v2.16 it guarded every call with
//   enable_mla = k.shape[-1] != v.shape[-1]
//   assert not enable_mla or cp_comm_type in ["p2p", "a2a+p2p"], "The context parallel running configs
//       cannot support MLA!"   (NVIDIA/TransformerEngine at 015d22571b33)
// Commit ee5dcec22 ("Add MXFP8 attention (#2719)", first in v2.16) removed the guard: its cuDNN
// (FusedAttention) back end serves latent attention under every cp_comm_type, while its tests still
// skip the FlashAttention back end outside p2p ("MLA CP currently only support KV P2P!",
// tests/pytorch/attention/test_attention_with_cp.py).
constexpr const char* kTeLatentRule =
    "Transformer Engine serves latent attention (keys and values of different widths) under cp_comm_type a2a and "
    "all_gather with its cuDNN back end only, from v2.16 (commit ee5dcec22 removed attn_forward_func_with_cp's "
    "\"The context parallel running configs cannot support MLA!\"); its FlashAttention back end, and every back end "
    "before v2.16, serve it under p2p and a2a+p2p only (test_attention_with_cp.py: \"MLA CP currently only support "
    "KV P2P!\")";
}  // namespace

std::string latent_refusal(Method m, std::string_view kernel) {
  switch (m) {
    case Method::ring_zigzag:  // TE's p2p: head/tail chunks (DualChunkSwap) with a causal mask
    case Method::hybrid:       // TE's a2a+p2p
      return {};
    case Method::ulysses:
    case Method::allgather:
      if (kernel == "cudnn") return {};
      return fmt::format("{}: no implementation supports latent attention with the {} attention kernel ({})",
                         to_string(m), kernel_label(kernel), kTeLatentRule);
    case Method::ring:
    case Method::allgather_contiguous:
      return fmt::format("{}: no implementation seqpar knows runs latent attention over contiguous shards (Transformer "
                         "Engine's p2p and all_gather shard head/tail: use ring-zigzag or allgather)",
                         to_string(m));
  }
  return "unknown method";
}

}  // namespace seqpar::sim

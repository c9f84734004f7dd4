// Attention sinks under the SP methods: legality (attention_sinks.hpp).
#include "seqpar/sim/attention_sinks.hpp"

#include <fmt/format.h>

#include "seqpar/sim/attention_kernels.hpp"

namespace seqpar::sim {

namespace {
// Transformer Engine (NVIDIA/TransformerEngine at d0067d0da6cb, transformer_engine/pytorch/attention/
// dot_product_attention/): gpt-oss's sinks are its softmax_type "learnable" (an offset of shape [h]
// in the softmax's denominator), added with commit 5e4e0b2c3 ("Add sink attention support from
// cuDNN (#2148)", first in v2.9). context_parallel.py, attn_forward_func_with_cp, asserts
//   softmax_type == "vanilla" or use_fused_attention   ("... only supports {softmax_type=} with FusedAttention backend!")
//   softmax_type == "vanilla" or cp_comm_type == "a2a" ("... only supports {softmax_type=} with cp_comm_type = 'a2a'!")
// and utils.py's backend filter disables FlashAttention for any non-vanilla softmax; its
// FusedAttention (cuDNN) serves it from cuDNN 9.13.1 (common/fused_attn/fused_attn.cpp).
constexpr const char* kTeSinksRule =
    "Transformer Engine (v2.9 on, commit 5e4e0b2c3) runs attention sinks (softmax_type \"learnable\") under context "
    "parallelism with cp_comm_type a2a and its cuDNN (FusedAttention, cuDNN 9.13.1 on) back end only: "
    "attn_forward_func_with_cp asserts \"Context parallelism only supports {softmax_type=} with cp_comm_type = "
    "'a2a'!\" and \"... with FusedAttention backend!\"";
// ring-flash-attention (zhuzilin/ring-flash-attention at 0fc25b46f3e7, ring_flash_attn/*.py) passes no
// sink to its per-step flash_attn calls, and PyTorch's context parallel wraps
// scaled_dot_product_attention, which takes none.
constexpr const char* kOtherRings =
    "ring-flash-attention's ring and zigzag functions take no sink, nor does PyTorch context parallel's "
    "scaled_dot_product_attention";
}  // namespace

std::string sinks_refusal(Method m, std::string_view kernel) {
  switch (m) {
    case Method::ulysses:
      if (kernel == "cudnn") return {};
      return fmt::format("{}: no implementation seqpar knows runs attention sinks with the {} attention kernel ({})",
                         to_string(m), kernel_label(kernel), kTeSinksRule);
    case Method::ring:
    case Method::ring_zigzag:
    case Method::allgather:
    case Method::allgather_contiguous:
    case Method::hybrid:
      return fmt::format("{}: no implementation seqpar knows runs attention sinks under it ({}; {}); use ulysses",
                         to_string(m), kTeSinksRule, kOtherRings);
  }
  return "unknown method";
}

}  // namespace seqpar::sim

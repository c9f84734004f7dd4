// Sliding-window layers under the SP methods: legality and the banded kernels (window_cost.hpp).
#include "seqpar/sim/window_cost.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "seqpar/core/error.hpp"
#include "seqpar/sim/compute_cost.hpp"
#include "seqpar/sim/framework_terms.hpp"
#include "seqpar/sim/methods.hpp"

namespace seqpar::sim {

namespace {
// Transformer Engine's guard on every context-parallel attention call (attn_forward_func_with_cp in
// transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py):
//   assert not sliding_window_attn or cp_comm_type in ["a2a", "all_gather"],
//       "The context parallel running configs cannot support sliding window attetnion!"
// (later versions narrow all_gather to its FlashAttention backend: `cp_comm_type == "all_gather"
// and not use_fused_attention`).
constexpr const char* kTeRule =
    "Transformer Engine's context parallelism serves sliding windows with cp_comm_type a2a or all_gather only "
    "(attn_forward_func_with_cp: \"The context parallel running configs cannot support sliding window attetnion!\")";
// zhuzilin/ring-flash-attention (ring_flash_attn/ring_flash_attn.py) passes window_size unchanged to
// every step's flash-attention call, which measures it from that block's own diagonal, not from the
// global positions: off the diagonal the band is wrong, so it does not serve windows either.
constexpr const char* kRingFlashRule =
    "ring-flash-attention passes window_size unchanged to each step's block call, where FlashAttention measures "
    "it from the block's own diagonal (ring_flash_attn/ring_flash_attn.py)";
}  // namespace

std::string window_refusal(Method m) {
  switch (m) {
    case Method::ulysses:
    case Method::allgather:
      return {};
    case Method::ring:
    case Method::ring_zigzag:
      return fmt::format("{}: no implementation supports sliding-window layers ({}: its p2p ring refuses them; {})",
                         to_string(m), kTeRule, kRingFlashRule);
    case Method::hybrid:
      return fmt::format("hybrid: no implementation supports sliding-window layers ({}: its a2a+p2p refuses them)",
                         kTeRule);
    case Method::allgather_contiguous:
      return fmt::format("allgather-contiguous: no implementation seqpar knows gathers K,V for sliding-window layers "
                         "over contiguous shards (Transformer Engine's all_gather, which serves them, shards "
                         "head/tail: use allgather)");
  }
  return "unknown method";
}

double band_pairs_between(double a, double c, double W) {
  // sum_{q=0}^{x-1} min(q + 1, W): x (x + 1) / 2 up to W, then W (W + 1) / 2 + (x - W) W.
  auto upto = [W](double x) { return x <= W ? x * (x + 1) / 2 : W * (W + 1) / 2 + (x - W) * W; };
  return upto(a + c) - upto(a);
}

AttentionCost sliding_layer_cost(const Model& m, const System& s, const Plan& p, const AttentionCost& full) {
  if (std::string why = window_refusal(p.method); !why.empty()) throw Error(why);
  const AttentionShapes a = attention_shapes(m, p);
  const double N = double(p.seq_len), W = double(m.sliding_window), R = p.ring_degree, d = m.pair_dim();
  const bool fp8 = p.precision.has(Fp8Part::attention);
  const AttentionKernel banded{m.head_dim, true, fp8};  // a causal kernel with a left window
  AttentionCost c = full;
  // Per GPU, for MFU: the band's pairs at 4 d FLOPs each, shared as the full layer's are.
  c.model_flops_fwd = attention_flops(a.batch, 1.0, band_pairs_between(0, N, W), m.heads, d) / p.sp / p.tp;
  double fwd = 0, bwd = 0;
  if (kv_all_gather(p)) {
    // Head/tail: the critical rank holds chunks R-1 and R of 2R (c = N/2R), the middle pair: a
    // chunk's band pairs rise with its start and are concave in it, so the pair summing to 2R-1
    // nearest the middle holds the most (with W <= c every chunk but the first holds c W).
    const double chunk = a.block_tokens;
    for (double i : {R - 1, R}) {
      const double flops = attention_flops(a.batch, 1.0, band_pairs_between(i * chunk, chunk, W), a.heads_local, d);
      fwd += framework_attention_time(s, flops, chunk, false, banded);
      bwd += framework_attention_time(s, 2.5 * flops, chunk, true, banded);
    }
  } else {
    // Ulysses: one call over the whole sequence's band for this rank's heads.
    const double flops = attention_flops(a.batch, 1.0, band_pairs_between(0, N, W), a.heads_local, d);
    fwd = framework_attention_time(s, flops, a.attn_tokens, false, banded);
    bwd = framework_attention_time(s, 2.5 * flops, a.attn_tokens, true, banded);
  }
  // The transfers are the full layer's, exposed as they were: only the kernels change.
  c.fwd_s = full.fwd_s - full.fwd_kernel_s + fwd;
  c.bwd_s = full.bwd_s - full.bwd_kernel_s + bwd;
  c.fwd_kernel_s = c.step0_fwd_s = fwd;
  c.bwd_kernel_s = c.step0_bwd_s = bwd;
  return c;
}

}  // namespace seqpar::sim

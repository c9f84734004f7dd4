// Linear-attention layers under the SP methods: legality, work, bytes and storage (linear_attention.hpp).
#include "seqpar/sim/linear_attention.hpp"

#include <fmt/format.h>

#include "seqpar/core/error.hpp"
#include "seqpar/sim/comm_cost.hpp"
#include "seqpar/sim/fp8_cost.hpp"
#include "seqpar/sim/methods.hpp"
#include "element_bytes.hpp"

namespace seqpar::sim {

std::string linear_refusal(Method m) {
  if (m != Method::hybrid) return {};
  // Megatron-LM's gated DeltaNet CP is one all-to-all over the whole CP group (PR 2614: "[s / CP, b,
  // head, ...]" to "[s, b, head / CP, ...]"); fla's native CP and Attention Gym's pass state over the
  // whole group. Neither composes the two over a Ulysses x ring split.
  return "hybrid: no implementation seqpar knows runs linear-attention layers over a Ulysses x ring split (Megatron-LM's "
         "gated DeltaNet context parallelism is one all-to-all over the whole CP group, PRs 2614/2642; fla's native "
         "context parallelism passes state over the whole group, fla/ops/cp): use ulysses, or a ring or all-gather "
         "method (state passing)";
}

double linear_rule_flops_per_token(const LinearAttention& l) {
  const double C = kLinearChunk, dk = l.key_dim, dv = l.value_dim;
  const double kkt = 2 * C * dk, solve = 2 * C * C / 3, wu = 2 * C * (dk + dv);
  const double state = 4 * dk * dv, out = 2 * dk * dv + 2 * C * (dk + dv);
  return kkt + solve + wu + state + out;
}

double linear_summary_flops_per_token(const LinearAttention& l) {
  return 4.0 * l.key_dim * (double(l.key_dim) + l.value_dim);
}

double linear_conv_channels(const LinearAttention& l) {
  return 2.0 * l.key_heads * l.key_dim + double(l.value_heads) * l.value_dim;
}

namespace {
// One TP rank's share of the heads (Megatron-LM's gated DeltaNet splits both head counts over TP).
LinearAttention tp_share(const Model& m, const Plan& p) {
  LinearAttention l = m.linear;
  const int tp = p.tp > 0 ? p.tp : 1;
  l.key_heads /= tp;
  l.value_heads /= tp;
  return l;
}

// Fragments of the sequence a rank holds: two under a head/tail layout, else one.
double fragments(const Plan& p) { return method_entry(p.method).ring_layout == RingLayout::zigzag ? 2.0 : 1.0; }
}  // namespace

LinearBytes linear_layer_bytes(const Model& m, const Plan& p) {
  const LinearAttention l = tp_share(m, p);
  const double B = p.micro_batch, local = double(p.seq_len) / p.sp, R = p.ring_degree;
  LinearBytes b;
  if (p.ulysses_degree > 1) {
    const double in = 2.0 * l.key_heads * l.key_dim + 2.0 * l.value_heads * l.value_dim + 2.0 * l.value_heads;
    b.a2a_in = kBf16 * B * local * in;
    b.a2a_out = kBf16 * B * local * double(l.value_heads) * l.value_dim;
  }
  if (R > 1) {
    const double summary = kF32 * double(l.value_heads) * l.key_dim * (double(l.value_dim) + l.key_dim);
    const double halo = kBf16 * double(l.conv_kernel - 1) * linear_conv_channels(l);
    b.summaries = R * fragments(p) * B * summary;
    b.halos = R * fragments(p) * B * halo;
  }
  return b;
}

LinearStored linear_stored_values_per_token(const Model& m, const Plan& p) {
  const LinearAttention l = tp_share(m, p);
  const double hv = l.value_heads;
  LinearStored v;
  v.bf16 = 2 * linear_conv_channels(l) + 2 * hv * l.key_dim + kLinearChunk * hv + hv + 3 * hv * l.value_dim;
  v.fp32 = 6 * hv;
  return v;
}

AttentionCost linear_layer_cost(const Model& m, const System& s, const Plan& p) {
  if (std::string why = linear_refusal(p.method); !why.empty()) throw Error(why);
  const LinearAttention l = tp_share(m, p);
  const double B = p.micro_batch, N = double(p.seq_len);
  AttentionCost c;
  // Every method shares the layer's work evenly: Ulysses runs N tokens of H_v / U heads, state
  // passing N / R tokens of H_v heads (no causal imbalance). Per GPU for MFU: the same.
  const double rule = B * (N / p.sp) * l.value_heads * linear_rule_flops_per_token(l);
  c.model_flops_fwd = rule;
  // Every rank but the last builds its summaries: the critical rank is one of them.
  const double summary = p.ring_degree > 1 ? B * (N / p.sp) * l.value_heads * linear_summary_flops_per_token(l) : 0.0;
  const Gpu& g = s.gpu;
  const double rate = g.bf16_flops * kLinearRuleEfficiency * s.framework.attention_step_efficiency;
  // fla's forward launches the cumsum, the fused kkt/solve/w,u, the state pass and the output (4);
  // its backward 2.5 times as many, rounded (10), and one pre-process kernel each under state passing.
  const double pre = p.ring_degree > 1 ? 1.0 : 0.0;
  c.fwd_kernel_s = (rule + summary) / rate + (4 + pre) * g.kernel_overhead_s;
  c.bwd_kernel_s = 2.5 * (rule + summary) / rate + (10 + pre) * g.kernel_overhead_s;
  c.step0_fwd_s = c.fwd_kernel_s;
  c.step0_bwd_s = c.bwd_kernel_s;

  const LinearBytes b = linear_layer_bytes(m, p);
  const SpGroups groups = place_sp_groups(s, p);
  const double fwd_scale = forward_activation_bytes_scale(p);  // FP8 comm: the forward's activations
  double fwd_comm = 0, bwd_comm = 0;
  if (p.ulysses_degree > 1) {
    const Placement& pu = groups.ulysses;
    c.a2a_qkv_s = collective_time(s, Collective::all_to_all, fwd_scale * b.a2a_in, pu);
    c.a2a_o_s = collective_time(s, Collective::all_to_all, fwd_scale * b.a2a_out, pu);
    fwd_comm += c.a2a_qkv_s + c.a2a_o_s;
    bwd_comm += collective_time(s, Collective::all_to_all, b.a2a_out, pu) +
                collective_time(s, Collective::all_to_all, b.a2a_in, pu);
  }
  if (p.ring_degree > 1) {
    // fp32 summaries and bf16 halos, forward; their gradients in the backward, at the same sizes.
    const Placement& pr = groups.ring;
    const double halo = collective_time(s, Collective::all_gather, b.halos, pr);
    c.kv_gather_s = collective_time(s, Collective::all_gather, b.summaries, pr);
    c.dkv_scatter_s = c.kv_gather_s;
    fwd_comm += c.kv_gather_s + halo;
    bwd_comm += c.dkv_scatter_s + halo;
  }
  c.fwd_comm_s = fwd_comm;
  c.bwd_comm_s = bwd_comm;
  c.fwd_s = c.fwd_kernel_s + fwd_comm;
  c.bwd_s = c.bwd_kernel_s + bwd_comm;
  return c;
}

}  // namespace seqpar::sim

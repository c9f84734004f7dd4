#include "seqpar/sim/attention_cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "seqpar/core/error.hpp"

#include "seqpar/sim/comm_cost.hpp"
#include "seqpar/sim/document_cost.hpp"
#include "seqpar/sim/compute_cost.hpp"
#include "seqpar/sim/framework_terms.hpp"
#include "seqpar/sim/fp8_cost.hpp"
#include "seqpar/sim/methods.hpp"
#include "seqpar/sim/linear_attention.hpp"
#include "seqpar/sim/window_cost.hpp"
#include "element_bytes.hpp"

namespace seqpar::sim {

AttentionShapes attention_shapes(const Model& m, const Plan& p) {
  AttentionShapes a;
  // Keys are head_dim wide and values v_dim (latent attention; both head_dim otherwise): q and k
  // cross at head_dim, v at v_dim, the output at v_dim; a K,V pair is 2 x pair_dim values.
  const double U = p.ulysses_degree, R = p.ring_degree, N = double(p.seq_len), d = m.head_dim, kv = 2.0 * m.pair_dim();
  a.batch = p.micro_batch;
  a.local_tokens = N / p.sp;
  a.attn_tokens = N / R;
  a.heads_tp = double(m.heads) / p.tp;
  a.kv_heads_tp = kv_heads_per_tp_rank(m.kv_heads, p.tp);
  a.heads_local = a.heads_tp / U;
  a.kv_heads_sent = kv_heads_sent(m, p);
  a.kv_heads_local = a.kv_heads_sent / U;
  a.qkv_a2a_bytes = kBf16 * a.batch * a.local_tokens * (a.heads_tp * d + a.kv_heads_sent * kv);
  a.o_a2a_bytes = kBf16 * a.batch * a.local_tokens * a.heads_tp * m.v_dim();
  a.kv_block_bytes = kBf16 * a.batch * a.attn_tokens * a.kv_heads_local * kv;
  a.block_tokens = zigzag_ring(p) && m.causal ? a.attn_tokens / 2 : a.attn_tokens;
  a.key_tokens = a.attn_tokens;
  if (kv_all_gather(p)) {
    // Each query chunk is its own call (also without a mask) against keys up to the whole sequence.
    a.block_tokens = zigzag_ring(p) ? a.attn_tokens / 2 : a.attn_tokens;
    a.key_tokens = N;
    a.kv_gathered_bytes = R * a.kv_block_bytes;
  }
  return a;
}

namespace {

// Whether every ring step after the diagonal has the same factor (one causal sequence, or a
// workload that loads every later step alike): the closed form then holds, bit for bit today's.
bool uniform_after_step0(const DocumentCosts& d) {
  for (std::size_t k = 2; k < d.step_factor.size(); ++k)
    if (d.step_factor[k] != d.step_factor[1]) return false;
  return true;
}

// One kernel call over a query chunk and its key prefix: the causal diagonal part at the causal
// kernel's rate, the unmasked part before it at the unmasked rate, one launch.
double prefix_call_time(const System& s, double diagonal_flops, double prefix_flops, double tokens, bool backward,
                        int head_dim, bool fp8) {
  const Gpu& g = s.gpu;
  auto part = [&](double flops, bool causal) {
    const double rate = attention_rate(g, tokens, backward, {head_dim, causal, fp8});
    return flops > 0 ? flops / (rate * s.framework.attention_step_efficiency) : 0.0;
  };
  return part(diagonal_flops, true) + part(prefix_flops, false) + g.kernel_overhead_s;
}

// All-gather KV context parallelism on the critical rank. With a causal mask a head/tail rank r
// holds chunks r and 2R-1-r of 2R (c = N/2R tokens each): chunk i sees keys [0, (i+1)c), a causal
// c x c diagonal and an unmasked c x ic prefix, so every rank does c^2 (2R-1) unmasked and two
// diagonals: balanced. Contiguous ranks hold chunk r of R; the last waits for the others (a
// diagonal and R-1 unmasked blocks). Without a mask every chunk sees every key. K,V are gathered
// before the forward and again before the backward (Transformer Engine keeps only the local K,V),
// and dK,dV of the whole sequence are reduce-scattered after it; none of it overlaps compute.
AttentionCost all_gather_attention_cost(const Model& m, const System& s, const Plan& p, const AttentionShapes& a,
                                        AttentionCost c, const DocumentCosts* docs) {
  const double d = m.pair_dim(), R = p.ring_degree, N = double(p.seq_len);  // attention_flops' width
  const bool head_tail = zigzag_ring(p), fp8 = p.precision.has(Fp8Part::attention);
  // Rows of one call, and the calls of the critical rank: (diagonal FLOPs, prefix FLOPs) each.
  const double rows = a.block_tokens;
  auto block = [&](double keys) { return attention_flops(a.batch, rows, keys, a.heads_local, d); };
  std::array<std::pair<double, double>, 2> calls{};  // at most two: no list on the planner's path
  std::size_t n = 0;
  if (!m.causal) {  // every call unmasked: no diagonal
    for (int i = 0; i < (head_tail ? 2 : 1); ++i) calls[n++] = {0.0, block(N)};
  } else if (head_tail) {
    for (double chunk : {0.0, 2 * R - 1}) calls[n++] = {0.5 * block(rows), block(chunk * rows)};
  } else {
    calls[n++] = {0.5 * block(rows), block((R - 1) * rows)};
  }
  for (std::size_t i = 0; i < n; ++i) {
    const auto& [diagonal, prefix] = calls[i];
    c.fwd_kernel_s += prefix_call_time(s, diagonal, prefix, rows, false, m.head_dim, fp8);
    c.bwd_kernel_s += prefix_call_time(s, 2.5 * diagonal, 2.5 * prefix, rows, true, m.head_dim, fp8);
  }
  // Under documents: the slowest rank's tiles against the whole gathered sequence, over the
  // reference's; the gather moves every rank's tokens, padding included.
  const double kernel_factor = docs ? docs->step_factor.front() : 1.0, tokens = docs ? docs->token_factor : 1.0;
  c.fwd_kernel_s *= kernel_factor;
  c.bwd_kernel_s *= kernel_factor;
  const Placement& ring = place_sp_groups(s, p).ring;
  c.kv_gather_s = collective_time(s, Collective::all_gather, tokens * a.kv_gathered_bytes, ring);
  // The forward's gather in FP8 under Fp8Part::comm; the backward gathers bf16 K,V again.
  const double gather_f = collective_time(s, Collective::all_gather,
                                          forward_activation_bytes_scale(p) * tokens * a.kv_gathered_bytes, ring);
  // dK,dV of the whole sequence in bf16, reduced onto each owner (Transformer Engine's dtype).
  c.dkv_scatter_s = collective_time(s, Collective::reduce_scatter, tokens * a.kv_gathered_bytes, ring);
  c.fwd_s = gather_f + c.fwd_kernel_s;
  c.bwd_s = c.kv_gather_s + c.bwd_kernel_s + c.dkv_scatter_s;
  c.fwd_comm_s = gather_f;
  c.bwd_comm_s = c.kv_gather_s + c.dkv_scatter_s;
  c.step0_fwd_s = c.fwd_kernel_s;
  c.step0_bwd_s = c.bwd_kernel_s;
  return c;
}

// One full-attention layer (every layer of a model without kinds).
AttentionCost full_layer_cost(const Model& m, const System& s, const Plan& p, const DocumentCosts* docs) {
  const AttentionShapes a = attention_shapes(m, p);
  AttentionCost c;
  const double d = m.pair_dim();  // attention_flops' width (compute_cost.hpp)
  const bool fp8 = p.precision.has(Fp8Part::attention);
  const double mask = m.causal ? 0.5 : 1.0;  // a causal mask halves the work
  // Per GPU: a sequence's attention shared by its SP group's ranks and, inside each, by the TP ranks' heads;
  // under documents, the work the document mask leaves.
  c.model_flops_fwd = mask * attention_flops(a.batch, double(p.seq_len), double(p.seq_len), m.heads, d) / p.sp / p.tp *
                      (docs ? docs->work_ratio : 1.0);
  if (docs && !m.causal)
    throw Error(fmt::format("documents: model '{}' has no causal mask; a document mask is causal within each document",
                            m.name));
  // Every all-to-all, hop and gather moves the rank's tokens, padding included (document_cost.hpp).
  const double tokens = docs ? docs->token_factor : 1.0;

  double a2a_fwd = 0, a2a_bwd = 0;
  const SpGroups groups = place_sp_groups(s, p);  // where the plan puts its Ulysses and ring groups
  // Fp8Part::comm: the forward's activations cross in FP8; the backward's gradients stay bf16.
  const double fwd_scale = forward_activation_bytes_scale(p);
  if (p.ulysses_degree > 1) {
    const Placement& pu = groups.ulysses;
    const double qkv = collective_time(s, Collective::all_to_all, tokens * a.qkv_a2a_bytes, pu);
    const double o = collective_time(s, Collective::all_to_all, tokens * a.o_a2a_bytes, pu);
    const double qkv_f = collective_time(s, Collective::all_to_all, fwd_scale * tokens * a.qkv_a2a_bytes, pu);
    const double o_f = collective_time(s, Collective::all_to_all, fwd_scale * tokens * a.o_a2a_bytes, pu);
    a2a_fwd = qkv_f + o_f;  // q,k,v in; output back
    c.a2a_qkv_s = qkv_f;
    c.a2a_o_s = o_f;
    a2a_bwd = o + qkv;  // dO in; dq,dk,dv back
  }

  const int R = p.ring_degree;
  if (kv_all_gather(p)) return all_gather_attention_cost(m, s, p, a, c, docs);  // U = 1: no all-to-all
  if (R == 1) {
    // Ulysses: every rank runs the whole sequence's documents for its heads.
    const double flops = mask * attention_flops(a.batch, a.attn_tokens, a.attn_tokens, a.heads_local, d) *
                         (docs ? docs->step_factor.front() : 1.0);
    const AttentionKernel kernel{m.head_dim, m.causal, fp8};
    c.fwd_kernel_s = framework_attention_time(s, flops, a.attn_tokens, false, kernel);
    c.bwd_kernel_s = framework_attention_time(s, 2.5 * flops, a.attn_tokens, true, kernel);
    c.fwd_s = c.fwd_kernel_s + a2a_fwd;
    c.bwd_s = c.bwd_kernel_s + a2a_bwd;
    c.fwd_comm_s = a2a_fwd;
    c.step0_fwd_s = c.fwd_kernel_s;
    c.step0_bwd_s = c.bwd_kernel_s;
    c.bwd_comm_s = a2a_bwd;
    return c;
  }

  // One unmasked block: this rank's queries against one rank's keys.
  const double block = attention_flops(a.batch, a.attn_tokens, a.attn_tokens, a.heads_local, d);
  // One ring step's hop: the slowest of its hops (comm_cost.hpp says which flows share a NIC).
  const double hop = collective_time(s, Collective::send_recv, tokens * a.kv_block_bytes, groups.ring);
  const double hop_f = collective_time(s, Collective::send_recv, fwd_scale * tokens * a.kv_block_bytes, groups.ring);
  // Per-step kernel time of the critical rank. Step 0 is the causal diagonal over the rank's own
  // tokens in both layouts (zigzag's two chunks, laid end to end, are one causal call). After it,
  // zigzag gives every rank half a block (one varlen call over half-length chunks), while the
  // contiguous ring's last rank holds a full unmasked block at every step. Without a mask every
  // step is a full block and zigzag changes nothing.
  // The diagonal step applies the model's mask; every later step is an unmasked block.
  const bool zigzag = zigzag_ring(p) && m.causal;  // the method table's ring layout
  const AttentionKernel diagonal{m.head_dim, m.causal, fp8}, unmasked{m.head_dim, false, fp8};
  const double step0_f = framework_attention_time(s, mask * block, a.attn_tokens, false, diagonal);
  const double step0_b = framework_attention_time(s, 2.5 * mask * block, a.attn_tokens, true, diagonal);
  const double step_f = zigzag ? framework_attention_time(s, block / 2, a.block_tokens, false, unmasked)
                               : framework_attention_time(s, block, a.attn_tokens, false, unmasked);
  const double step_b = zigzag ? framework_attention_time(s, 2.5 * block / 2, a.block_tokens, true, unmasked)
                               : framework_attention_time(s, 2.5 * block, a.attn_tokens, true, unmasked);
  const double steps_after0 = R - 1;
  c.fwd_comm_s = a2a_fwd + steps_after0 * hop_f;
  c.bwd_comm_s = a2a_bwd + steps_after0 * 2 * hop + hop;
  c.ring_steps = R;
  c.hop_s = hop;
  if (docs && !uniform_after_step0(*docs)) {
    // Under documents each step's slowest rank has its own share (document_cost.hpp): the steps
    // one by one, each overlapped with its hop as below.
    const std::vector<double>& f = docs->step_factor;
    c.fwd_kernel_s = f[0] * step0_f;
    c.bwd_kernel_s = f[0] * step0_b;
    c.fwd_s = a2a_fwd + std::max(f[0] * step0_f, hop_f);
    c.bwd_s = a2a_bwd + std::max(f[0] * step0_b, 2 * hop);
    for (int k = 1; k < R; ++k) {
      const double sf = f[std::size_t(k)] * step_f, sb = f[std::size_t(k)] * step_b;
      c.fwd_kernel_s += sf;
      c.bwd_kernel_s += sb;
      c.fwd_s += k + 1 < R ? std::max(sf, hop_f) : sf;
      c.bwd_s += k + 1 < R ? std::max(sb, 2 * hop) : sb + hop;
    }
    c.step0_fwd_s = f[0] * step0_f;
    c.step0_bwd_s = f[0] * step0_b;
    c.step_fwd_s = (c.fwd_kernel_s - c.step0_fwd_s) / steps_after0;  // the mean later step, for the timeline
    c.step_bwd_s = (c.bwd_kernel_s - c.step0_bwd_s) / steps_after0;
    return c;
  }
  // One factor for every step after the diagonal (1 without documents): the closed form.
  const double f0 = docs ? docs->step_factor[0] : 1.0, fk = docs ? docs->step_factor[1] : 1.0;
  const double s0f = f0 * step0_f, s0b = f0 * step0_b, skf = fk * step_f, skb = fk * step_b;
  c.fwd_kernel_s = s0f + steps_after0 * skf;
  c.bwd_kernel_s = s0b + steps_after0 * skb;
  // Forward: R-1 K,V hops, each overlapped with the block in hand; the last block needs no send.
  c.fwd_s = a2a_fwd + std::max(s0f, hop_f) + (steps_after0 - 1) * std::max(skf, hop_f) + skf;
  // Backward: K,V and the partial dK,dV travel together (two blocks per hop); after the last step
  // the dK,dV make one more hop home, exposed.
  c.bwd_s = a2a_bwd + std::max(s0b, 2 * hop) + (steps_after0 - 1) * std::max(skb, 2 * hop) + skb + hop;
  c.step0_fwd_s = s0f;
  c.step_fwd_s = skf;
  c.step0_bwd_s = s0b;
  c.step_bwd_s = skb;
  return c;
}


// The mean layer of a model whose layers are of several kinds: every time the layers' mean
// (simulate() multiplies a layer's figures by the layers), each kind weighted by its share of the
// layers. The parts the timeline lays out (all-to-alls, gathers, ring steps) are the softmax kinds'
// alone: the full layer's ring shape, mixed with the band's (a sliding layer runs only under methods
// without ring hops); the linear layers' share is one block (AttentionCost::linear_fwd_s).
AttentionCost mix_layers(const AttentionCost& full, const AttentionCost& band, double sliding, const AttentionCost& lin,
                         double linear) {
  AttentionCost c = full;
  const double rest = 1 - sliding - linear;
  for (double AttentionCost::*f : {&AttentionCost::fwd_kernel_s, &AttentionCost::bwd_kernel_s, &AttentionCost::fwd_s,
                                   &AttentionCost::bwd_s, &AttentionCost::fwd_comm_s, &AttentionCost::bwd_comm_s,
                                   &AttentionCost::model_flops_fwd})
    c.*f = rest * full.*f + sliding * band.*f + linear * lin.*f;
  for (double AttentionCost::*f :
       {&AttentionCost::a2a_qkv_s, &AttentionCost::a2a_o_s, &AttentionCost::kv_gather_s, &AttentionCost::dkv_scatter_s,
        &AttentionCost::hop_s, &AttentionCost::step0_fwd_s, &AttentionCost::step_fwd_s, &AttentionCost::step0_bwd_s,
        &AttentionCost::step_bwd_s})
    c.*f = rest * full.*f + sliding * band.*f;
  c.linear_fwd_s = linear * lin.fwd_s;
  c.linear_bwd_s = linear * lin.bwd_s;
  return c;
}

}  // namespace

AttentionCost attention_layer_cost(const Model& m, const System& s, const Plan& p, const DocumentCosts* docs) {
  const AttentionCost full = full_layer_cost(m, s, p, docs);
  const bool banded = m.banded_at(p.seq_len), linear = m.linear_layers() > 0;
  if (!banded && !linear) return full;  // one kind at this length: the full layer's figures, bit for bit
  // A method no implementation serves for a kind: the plan is invalid (validity.cpp says why); its
  // structure's costs are still asked for (simulate's halves), and are the full layer's.
  if ((banded && !window_refusal(p.method).empty()) || (linear && !linear_refusal(p.method).empty())) return full;
  if (docs && banded)
    throw Error(fmt::format("documents: model '{}' has sliding-window layers; a document workload's costs count the "
                            "causal document mask only (core/doc_work.hpp counts the band, the simulator does not "
                            "use it yet)", m.name));
  if (docs)  // fla resets the state at each document (cu_seqlens); not modelled
    throw Error(fmt::format("documents: model '{}' has linear-attention layers; a document workload's costs are "
                            "modelled for softmax attention only", m.name));
  const double layers = m.layers;
  const AttentionCost band = banded ? sliding_layer_cost(m, s, p, full) : AttentionCost{};
  const AttentionCost lin = linear ? linear_layer_cost(m, s, p) : AttentionCost{};
  return mix_layers(full, band, banded ? m.sliding_layers() / layers : 0.0, lin, m.linear_share());
}

}  // namespace seqpar::sim

// Each formula of the cost models against a small case computed by hand (synthetic hardware
// with round numbers, see fixtures.hpp).
#include <gtest/gtest.h>

#include <cmath>

#include "fixtures.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/attention_cost.hpp"
#include "seqpar/sim/comm_cost.hpp"
#include "seqpar/sim/compute_cost.hpp"
#include "seqpar/sim/memory_cost.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/result_json.hpp"
#include "seqpar/sim/simulate.hpp"

namespace seqpar::sim {
namespace {

using namespace testing;
constexpr double kRel = 1e-12;

double rel(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-300); }
#define EXPECT_REL(a, b) EXPECT_LT(rel((a), (b)), kRel) << #a " = " << (a) << ", expected " << (b)

TEST(CommCost, AllToAllInsideANodeIsTheOffRankShareOverTheLink) {
  // 4 ranks, 4 MB each: 3 chunks of 1 MB leave each GPU at 100 GB/s, plus 10 us.
  const System s = round_system();
  EXPECT_REL(collective_time(s, Collective::all_to_all, 4e6, place_group(s, 4, 1)), 30e-6 + 10e-6);
}

TEST(CommCost, AllToAllAcrossNodesIsLimitedByTheNicShare) {
  // 8 ranks on 2 nodes, chunks of 0.5 MB: 3 stay in the node (15 us), 4 cross at 10 GB/s (200 us), + 20 us.
  const System s = round_system();
  const Placement p = place_group(s, 8, 1);
  EXPECT_EQ(p.per_node, 4);
  EXPECT_EQ(p.nodes, 2);
  EXPECT_REL(collective_time(s, Collective::all_to_all, 4e6, p), 200e-6 + 20e-6);
}

TEST(CommCost, RingCollectivesFollowTheBandwidthTermsOfNcclTests) {
  const System s = round_system();
  // allreduce 4 ranks, 4 MB: 2 x 10 us x log2(4) + 2 x 4 MB x 3/4 / 100 GB/s.
  EXPECT_REL(collective_time(s, Collective::all_reduce, 4e6, place_group(s, 4, 1)), 40e-6 + 60e-6);
  // allgather 8 ranks over 2 nodes, 8 MB: the start (20 us) and the ring's fill, 6 steps inside
  // the nodes at 1 us and 1 across at 5 us, + 8 MB x 7/8 / 40 GB/s. NCCL runs one ring per NIC,
  // so the 4 members of a node bring their 4 NIC shares (4 x 10 GB/s) to each boundary; until
  // issue 16 this was charged at one share (700 us), 4x too slow.
  EXPECT_REL(collective_time(s, Collective::all_gather, 8e6, place_group(s, 8, 1)), 31e-6 + 175e-6);
  EXPECT_REL(collective_time(s, Collective::reduce_scatter, 8e6, place_group(s, 8, 1)), 31e-6 + 175e-6);
  // sendrecv of 1 MB inside a node, and between ring neighbours that sit on different nodes.
  EXPECT_REL(collective_time(s, Collective::send_recv, 1e6, place_group(s, 2, 1)), 10e-6 + 10e-6);
  const Placement across = place_group(s, 4, 4);  // ring group of a hybrid with U = 4
  EXPECT_EQ(across.per_node, 1);
  EXPECT_EQ(across.nodes, 4);
  EXPECT_REL(collective_time(s, Collective::send_recv, 1e6, across), 20e-6 + 100e-6);
}

TEST(CommCost, PcieAllToAllIsLimitedByTheSocketLink) {
  // 2 + 2 GPUs on two sockets: 2 x 2 flows of 1 MB share 5 GB/s (800 us) vs 3 MB per GPU at 20 GB/s (150 us).
  const System s = round_pcie_system();
  const Placement p = place_group(s, 4, 1);
  EXPECT_EQ(p.socket_a, 2);
  EXPECT_EQ(p.socket_b, 2);
  EXPECT_REL(collective_time(s, Collective::all_to_all, 4e6, p), 800e-6 + 10e-6);
  // A ring that crosses the sockets moves at the socket link's rate.
  EXPECT_REL(collective_time(s, Collective::send_recv, 1e6, p), 10e-6 + 200e-6);
  // Two GPUs behind one socket never cross it.
  EXPECT_REL(collective_time(s, Collective::send_recv, 1e6, place_group(s, 2, 1)), 10e-6 + 50e-6);
}

TEST(CommCost, BusBandwidthUsesTheNcclTestsFactors) {
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_reduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_to_all, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_gather, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::send_recv, 2), 1.0);
  const CommEstimate e = estimate_collective(round_system(), Collective::all_to_all, 4e6, 4);
  EXPECT_REL(e.time_s, 40e-6);
  EXPECT_REL(e.algbw_gbps, 4e6 / 40e-6 / 1e9);
  EXPECT_REL(e.busbw_gbps, e.algbw_gbps * 3 / 4);
}

TEST(ComputeCost, GemmRateRisesWithTheTokenDimension) {
  const Gpu g = round_gpu();
  EXPECT_REL(gemm_time(g, 1e12, 100, 0), 1e12 / (100e12 * 0.25));   // half of 50% at 100 tokens
  EXPECT_REL(gemm_time(g, 1e12, 300, 0), 1e12 / (100e12 * 0.375));  // 0.5 x 300/400
  Gpu slow = g;
  slow.kernel_overhead_s = 1e-3;
  EXPECT_REL(gemm_time(slow, 1e12, 300, 3), 1e12 / (100e12 * 0.375) + 3e-3);
}

TEST(ComputeCost, AttentionUsesForwardAndBackwardEfficiency) {
  const Gpu g = round_gpu();
  EXPECT_REL(attention_time(g, 1e12, 4096, false), 1e12 / 50e12);
  EXPECT_REL(attention_time(g, 1e12, 4096, true), 1e12 / 25e12);
  EXPECT_DOUBLE_EQ(attention_flops(2, 10, 20, 3, 4), 4.0 * 2 * 10 * 20 * 3 * 4);
}

TEST(ComputeCost, LayerGemmFlopsAreTwicePerTokenTheLinearWeights) {
  const Model m = tiny_model();
  // q 8x8, k,v 2 x 8x8, o 8x8, MLP 3 x 8x16 = 640 weights; 2 FLOPs each per token.
  EXPECT_DOUBLE_EQ(layer_gemm_flops(m, 1), 1280);
  EXPECT_DOUBLE_EQ(mlp_gemm_flops(m, 10), 2.0 * 10 * 384);
  EXPECT_DOUBLE_EQ(head_gemm_flops(m, 10), 2.0 * 10 * 8 * 32);
  EXPECT_EQ(m.params_per_layer(), 656);   // 640 + two norms of 8
  EXPECT_EQ(m.total_params(), 2 * 656 + 2 * 32 * 8 + 8);
}

// RoPE rotates q and k in every layer (a read and a write of each, bf16); a learned position table
// is added once at the embedding, so GPT-style blocks move none of those bytes.
TEST(ComputeCost, ElementwiseBytesChargeRopeOnlyToRotaryModels) {
  Model m = tiny_model();  // 2 heads, 2 KV heads, head_dim 4, hidden 8, SwiGLU ffn 16
  const double rope = layer_elementwise_bytes_per_token(m);
  m.positions = PositionKind::learned;
  EXPECT_DOUBLE_EQ(rope - layer_elementwise_bytes_per_token(m), 2.0 * 2 * (2 + 2) * 4);
  EXPECT_DOUBLE_EQ(layer_elementwise_bytes_per_token(m), 2.0 * (10 * 8 + 3 * 16));
  // Presets say which: the GPT presets learned, the Llama ones rotary; anything else is refused.
  EXPECT_EQ(load_model("gpt-1.3b").positions, PositionKind::learned);
  EXPECT_EQ(load_model("llama3-8b").positions, PositionKind::rope);
  nlohmann::json j = to_json(load_model("gpt-30b"));
  EXPECT_EQ(j.at("positions"), "learned");
  j["positions"] = "alibi";
  try {
    model_from_json(j, "gpt.json");
    ADD_FAILURE() << "positions 'alibi' accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpt.json: field 'positions' must be rope or learned (got 'alibi')"),
              std::string::npos)
        << e.what();
  }
}

TEST(AttentionShapes, GqaHeadsAreSplitOrReplicated) {
  Model m = tiny_model();
  m.heads = 8;
  m.kv_heads = 2;
  m.head_dim = 1;
  const AttentionShapes split = attention_shapes(m, plan(Method::ulysses, 2, 64, 2, 2, 1));
  EXPECT_EQ(split.kv_heads_sent, 2);
  EXPECT_EQ(split.kv_heads_local, 1);
  const AttentionShapes rep = attention_shapes(m, plan(Method::ulysses, 4, 64, 4, 4, 1));
  EXPECT_EQ(rep.kv_heads_sent, 4);  // each KV head replicated twice
  EXPECT_EQ(rep.kv_heads_local, 1);
  // 16 local tokens x (8 q + 2 x 4 kv heads) x d=1 x 2 bytes.
  EXPECT_DOUBLE_EQ(rep.qkv_a2a_bytes, 16.0 * 16 * 2);
  EXPECT_DOUBLE_EQ(rep.o_a2a_bytes, 16.0 * 8 * 2);
}

TEST(AttentionCost, RingStepsOverlapComputeWithTheNextBlock) {
  // Two-rank contiguous ring on one node: step 0 is the diagonal (half a block) overlapped with
  // the one K,V hop; step 1 is a full block. Backward moves K,V and dK,dV (two blocks) per hop
  // and returns dK,dV once more at the end.
  const Model m = tiny_model();
  const System s = round_system();
  const Plan p = plan(Method::ring, 2, 1 << 16, 2, 1, 2);
  const AttentionShapes sh = attention_shapes(m, p);
  const double block = attention_flops(1, 1 << 15, 1 << 15, 2, 4);
  const double hop = collective_time(s, Collective::send_recv, sh.kv_block_bytes, place_group(s, 2, 1));
  EXPECT_DOUBLE_EQ(sh.kv_block_bytes, 2.0 * 2 * (1 << 15) * 2 * 4);
  const AttentionCost c = attention_layer_cost(m, s, p);
  const double f0 = attention_time(s.gpu, block / 2, 1 << 15, false), f1 = attention_time(s.gpu, block, 1 << 15, false);
  const double b0 = attention_time(s.gpu, 1.25 * block, 1 << 15, true), b1 = attention_time(s.gpu, 2.5 * block, 1 << 15, true);
  EXPECT_REL(c.fwd_s, std::max(f0, hop) + f1);
  EXPECT_REL(c.bwd_s, std::max(b0, 2 * hop) + b1 + hop);
  EXPECT_REL(c.fwd_comm_s, hop);
  EXPECT_REL(c.bwd_comm_s, 3 * hop);
  EXPECT_REL(c.fwd_kernel_s, f0 + f1);
}

TEST(AttentionCost, WithoutAMaskEveryRingStepIsAFullBlockAndZigzagChangesNothing) {
  Model m = tiny_model();
  m.causal = false;
  const System s = round_system();
  const AttentionCost c = attention_layer_cost(m, s, plan(Method::ring, 4, 1 << 16, 4, 1, 4));
  const AttentionCost z = attention_layer_cost(m, s, plan(Method::ring_zigzag, 4, 1 << 16, 4, 1, 4));
  const double block = attention_flops(1, 1 << 14, 1 << 14, 2, 4);
  EXPECT_REL(c.fwd_kernel_s, 4 * attention_time(s.gpu, block, 1 << 14, false));
  EXPECT_REL(z.fwd_kernel_s, c.fwd_kernel_s);
  EXPECT_REL(c.model_flops_fwd, attention_flops(1, 1 << 16, 1 << 16, 2, 4) / 4);
  m.causal = true;
  EXPECT_REL(attention_layer_cost(m, s, plan(Method::ring, 4, 1 << 16, 4, 1, 4)).model_flops_fwd, c.model_flops_fwd / 2);
}

TEST(AttentionCost, AllGatherKvGathersOnceEachWayAndBalancesHeadAndTail) {
  // 4 ranks in a node, N = 64K: head/tail chunks of c = 8K. Rank 0 holds chunks 0 and 7: chunk 0
  // is a causal c x c diagonal, chunk 7 a diagonal and a 7c prefix. Blocks of 4 x 8K x k x 2 heads
  // x 4 FLOPs: 2^30 + (2^30 + 14 x 2^30) = 2^34 = the causal layer's 2^36 over 4 ranks, at 50
  // TFLOP/s forward and 25 backward (round_gpu). K,V of 16K tokens per rank: 2^19 bytes; the
  // all-gather (and the reduce-scatter) of 2^21 bytes costs 10 us + 3 ring steps of 1 us + 2^21 x
  // 3/4 / 100 GB/s.
  const Model m = tiny_model();
  const System s = round_system();
  const AttentionCost c = attention_layer_cost(m, s, plan(Method::allgather, 4, 1 << 16, 4, 1, 4));
  const double coll = 13e-6 + double(1 << 21) * 0.75 / 100e9;
  const double fwd = std::ldexp(1.0, 34) / 50e12, bwd = 2.5 * std::ldexp(1.0, 34) / 25e12;
  EXPECT_REL(c.kv_gather_s, coll);
  EXPECT_REL(c.dkv_scatter_s, coll);
  EXPECT_REL(c.fwd_kernel_s, fwd);
  EXPECT_REL(c.bwd_kernel_s, bwd);
  EXPECT_REL(c.fwd_s, coll + fwd);          // exposed: nothing overlaps the gather
  EXPECT_REL(c.bwd_s, coll + bwd + coll);   // gathered again, then dK,dV reduce-scattered
  EXPECT_REL(c.fwd_comm_s, coll);
  EXPECT_REL(c.bwd_comm_s, 2 * coll);
  EXPECT_REL(c.model_flops_fwd, std::ldexp(1.0, 34));
  const AttentionShapes sh = attention_shapes(m, plan(Method::allgather, 4, 1 << 16, 4, 1, 4));
  EXPECT_DOUBLE_EQ(sh.kv_gathered_bytes, double(1 << 21));
  EXPECT_DOUBLE_EQ(sh.block_tokens, 8192);
  EXPECT_DOUBLE_EQ(sh.key_tokens, 65536);
  // Contiguous: the last rank's 16K queries see a diagonal (2^32) and a 48K prefix (6 x 2^32),
  // (2R-1)/R = 1.75 times the balanced work; the communication is the same.
  const AttentionCost k = attention_layer_cost(m, s, plan(Method::allgather_contiguous, 4, 1 << 16, 4, 1, 4));
  EXPECT_REL(k.fwd_kernel_s, 1.75 * fwd);
  EXPECT_REL(k.bwd_s, coll + 1.75 * bwd + coll);
}

TEST(MemoryCost, AllGatherKvHoldsTheWholeSequencesKvAndFp32Gradients) {
  // The case above: K,V of all 64K tokens (2 KV heads of 4) gathered again in bf16, their dK,dV
  // accumulated in fp32, one call's dK,dV over all 64K keys in bf16, and the kernel's fp32 dQ
  // workspace for one call of the last rank, whose head and tail chunks (3 and 4 of 8) are
  // adjacent and make one 16K-row segment (2 heads, 4 + 1 values a row).
  const Model m = tiny_model();
  const System s = round_system();
  const MemoryEstimate e = estimate_memory(m, s, plan(Method::allgather, 4, 1 << 16, 4, 1, 4));
  const double kv = 65536.0 * 2 * 4;
  EXPECT_EQ(e.peak_phase, "layer-backward");
  EXPECT_DOUBLE_EQ(e.peak.attention_buffers, 4.0 * 16384 * 2 * 5 + 2 * 2 * kv + 4 * 2 * kv + 2 * 2 * kv);
}

// round_system() with a named framework profile (sim/presets/frameworks/).
System with_framework(const char* name) {
  System s = round_system();
  use_framework(s, load_framework(name));
  return s;
}

TEST(MemoryCost, StoredActivationsPerTokenByCheckpointMode) {
  const Model m = tiny_model();
  const System s = with_framework("seqpar-train");
  Plan p = plan(Method::ulysses, 1, 64, 1, 1, 1);
  // none: attention 8 (norm in) + 8 (norm out) + 8 (q) + 16 (k, v) + 8 (o) = 48; MLP 8 + 8 + 3 x 16 = 64;
  // bf16, plus fp32: the LSE of 2 heads and the rstd of the 2 norms.
  EXPECT_DOUBLE_EQ(stored_bytes_per_token(m, s, p, Checkpoint::none), 2.0 * (48 + 64) + 4 * (2 + 2));
  // selective drops both norm outputs and the activation output (the norms keep their rstd).
  EXPECT_DOUBLE_EQ(stored_bytes_per_token(m, s, p, Checkpoint::selective), 2.0 * (40 + 40) + 4 * (2 + 2));
  EXPECT_DOUBLE_EQ(stored_bytes_per_token(m, s, p, Checkpoint::full), 2.0 * 8);
  p.mem.tiled_mlp = true;  // the MLP keeps only its input; each tile recomputes its norm
  EXPECT_DOUBLE_EQ(stored_bytes_per_token(m, s, p, Checkpoint::none), 2.0 * (48 + 8) + 4 * (2 + 1));
  const StoredValues v = stored_values_per_token(m, s, p, Checkpoint::none);
  EXPECT_DOUBLE_EQ(v.bf16, 48 + 8);
  EXPECT_DOUBLE_EQ(v.fp32, 2 + 1);
  // Ulysses keeps the attention output in both layouts.
  Plan u = plan(Method::ulysses, 2, 64, 2, 2, 1);
  EXPECT_DOUBLE_EQ(stored_bytes_per_token(m, s, u, Checkpoint::none), 2.0 * (56 + 64) + 4 * (2 + 2));
}

TEST(MemoryCost, ZeroShardsStatesOverTheWholeGroup) {
  const Model m = tiny_model();
  const double psi = double(m.total_params());
  Plan p = plan(Method::ulysses, 4, 64, 1, 1, 1);  // dp = 4
  const System s = with_framework("deepspeed-alst");  // the ZeRO paper's 2 + 2 + 12 bytes per parameter
  p.mem.zero = 0;
  MemoryBreakdown b = estimate_memory(m, s, p).peak;
  EXPECT_DOUBLE_EQ(b.parameters, 2 * psi);
  EXPECT_DOUBLE_EQ(b.gradients, 2 * psi);
  EXPECT_DOUBLE_EQ(b.optimizer_states, 12 * psi);
  p.mem.zero = 1;
  EXPECT_DOUBLE_EQ(estimate_memory(m, s, p).peak.optimizer_states, 3 * psi);
  p.mem.zero = 2;
  EXPECT_DOUBLE_EQ(estimate_memory(m, s, p).peak.gradients, psi / 2);
  const System fp32_grads = with_framework("megatron-core");  // Megatron-LM's fp32 main gradients
  EXPECT_DOUBLE_EQ(estimate_memory(m, fp32_grads, p).peak.gradients, psi);
  p.mem.zero = 3;
  EXPECT_DOUBLE_EQ(estimate_memory(m, s, p).peak.parameters, psi / 2);
  p.mem.offload_optimizer = true;
  const MemoryEstimate e = estimate_memory(m, s, p);
  EXPECT_DOUBLE_EQ(e.peak.optimizer_states, 0);
  EXPECT_DOUBLE_EQ(e.host_bytes, 3 * psi);
  // Parameter offload (ZeRO-3's offload_param) moves the bf16 shards to the host too.
  p.mem.offload_params = true;
  const MemoryEstimate w = estimate_memory(m, s, p);
  EXPECT_DOUBLE_EQ(w.peak.parameters, 0);
  EXPECT_DOUBLE_EQ(w.host_bytes, 3 * psi + psi / 2);
  // seqpar-train counts its fp32 master weights with the parameters (its own report does).
  p.mem = {};
  p.mem.zero = 0;
  const MemoryBreakdown t = estimate_memory(m, with_framework("seqpar-train"), p).peak;
  EXPECT_DOUBLE_EQ(t.parameters, 6 * psi);
  EXPECT_DOUBLE_EQ(t.gradients, 4 * psi);
  EXPECT_DOUBLE_EQ(t.optimizer_states, 8 * psi);
}

TEST(MemoryCost, TiledLossHoldsOneTileOfLogits) {
  const Model m = tiny_model();
  const System s = with_framework("deepspeed-alst");
  Plan p = plan(Method::ulysses, 1, 4096, 1, 1, 1);
  auto logits = [&](const Plan& q) { return estimate_memory(m, s, q).loss_logits_bytes; };
  // PyTorch's cross entropy in the loss's backward: the fp32 log-softmax kept from the forward, its
  // gradient and the logits' (derived/hf-llama.json: 12 bytes per logit).
  EXPECT_DOUBLE_EQ(logits(p), 12.0 * 4096 * 32);
  // At the peak when they outweigh the layer backward.
  EXPECT_EQ(estimate_memory(m, s, p).peak_phase, "loss");
  EXPECT_EQ(estimate_memory(m, s, p).peak_subphase, "head-backward");
  EXPECT_DOUBLE_EQ(estimate_memory(m, s, p).peak.logits, 12.0 * 4096 * 32);
  // seqpar-train keeps the bf16 logits and writes their gradient in place.
  EXPECT_DOUBLE_EQ(estimate_memory(m, with_framework("seqpar-train"), p).loss_logits_bytes, 2.0 * 4096 * 32);
  p.mem.tiled_loss = true;
  // ALST's tile: ceil(4096 / hidden 8) = 512 tiles of 8 tokens.
  EXPECT_DOUBLE_EQ(alst_tile_rows(m, p), 8);
  EXPECT_DOUBLE_EQ(logits(p), 12.0 * 8 * 32);
  p.seq_len = 4100;  // 513 tiles of 8 (the last 4 tokens)
  p.micro_batch = 2;  // each tile holds both sequences' slices
  EXPECT_DOUBLE_EQ(alst_tile_rows(m, p), 2 * 8);
}

TEST(MemoryCost, OffloadedCheckpointsAllGoToTheHostAndTwoStayOnTheGpu) {
  const Model m = tiny_model();  // 2 layers
  const System s = with_framework("seqpar-train");
  Plan p = plan(Method::ulysses, 1, 4096, 1, 1, 1);
  p.mem.checkpoint = Checkpoint::full;
  Model deep = m;
  deep.layers = 6;
  const double per_layer = stored_bytes_per_token(deep, s, p, Checkpoint::full) * 4096;
  const MemoryEstimate kept = estimate_memory(deep, s, p);
  p.mem.offload_checkpoints = true;
  const MemoryEstimate off = estimate_memory(deep, s, p);
  EXPECT_DOUBLE_EQ(off.host_bytes, 6 * per_layer);  // every layer input, as the step offloads them
  EXPECT_DOUBLE_EQ(kept.peak.checkpoints - off.peak.checkpoints, (6 - 2) * per_layer);
  Model one = m;
  one.layers = 1;  // one layer: only its input to keep on the GPU
  p.mem.offload_checkpoints = false;
  const double one_kept = estimate_memory(one, s, p).peak.checkpoints;
  p.mem.offload_checkpoints = true;
  EXPECT_DOUBLE_EQ(estimate_memory(one, s, p).peak.checkpoints, one_kept);
}

TEST(Simulate, ModelFlopsFollowTheDesignConventions) {
  // Tiny model, one GPU, 64 tokens: GEMMs 3 x (2 layers x 1280 x 64 + LM head 2 x 64 x 8 x 32);
  // attention 3.5 x the causal forward 0.5 x 4 x 64 x 64 x 2 heads x 4 per layer.
  const Result r = simulate(tiny_model(), round_system(), plan(Method::ulysses, 1, 64, 1, 1, 1));
  ASSERT_TRUE(r.valid);
  EXPECT_DOUBLE_EQ(r.model_flops_per_gpu, 3 * (2 * 1280.0 * 64 + 2.0 * 64 * 8 * 32) + 2 * 3.5 * 65536.0);
  EXPECT_REL(r.tflops_per_gpu, r.model_flops_per_gpu / r.step_time_s / 1e12);
  EXPECT_REL(r.mfu, r.model_flops_per_gpu / r.step_time_s / 100e12);
  EXPECT_REL(r.tokens_per_s_per_gpu, 64 / r.step_time_s);
}

}  // namespace
}  // namespace seqpar::sim

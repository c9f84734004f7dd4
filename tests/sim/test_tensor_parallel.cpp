// Tensor parallelism composed with sequence parallelism: the plan's TP degree and its head rules,
// the TP collectives and where they run, the sharded states and activations (through the framework
// profile's inventory, checked term by term against Korthikanti et al.), advise choosing TP and
// saying why, and the plan's JSON.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "fixtures.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/comm_cost.hpp"
#include "seqpar/sim/framework.hpp"
#include "seqpar/sim/memory_cost.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/simulate.hpp"
#include "seqpar/sim/step_trace.hpp"
#include "seqpar/sim/tensor_parallel_cost.hpp"
#include "seqpar/sim/validity.hpp"

namespace seqpar::sim {
namespace {

using seqpar::sim::testing::plan;
using seqpar::testing::CliRun;
using seqpar::testing::seqpar;

bool mentions(const std::vector<std::string>& errors, const std::string& a, const std::string& b = "") {
  return std::any_of(errors.begin(), errors.end(), [&](const std::string& e) {
    return e.find(a) != std::string::npos && (b.empty() || e.find(b) != std::string::npos);
  });
}

TEST(TensorParallel, HeadRulesPerMethod) {
  const Model m = load_model("llama3-8b");  // 32 query heads, 8 KV heads
  const System s = load_system("dgx-h100");
  std::vector<std::string> e;
  // Ulysses needs the query heads divisible by tp x U: 32 / (4 x 8) is whole, 32 / (4 x 16) is not.
  EXPECT_TRUE(check_plan(m, s, plan(Method::ulysses, 32, 1 << 16, 8, 8, 1, 4), e)) << e.front();
  e.clear();
  EXPECT_FALSE(check_plan(m, s, plan(Method::ulysses, 64, 1 << 16, 16, 16, 1, 4), e));
  EXPECT_TRUE(mentions(e, "heads: 8 query heads per TP rank (32 / tp 4)", "Ulysses degree 16")) << e.front();
  // KV heads: 2 per TP rank at tp 4, replicated over U = 8 (2 divides 8).
  e.clear();
  EXPECT_TRUE(check_plan(m, s, plan(Method::ulysses, 32, 1 << 16, 8, 8, 1, 4), e));
  // TP beyond the KV heads replicates them (tp 16 > 8 KV heads; 8 divides 16).
  e.clear();
  EXPECT_TRUE(check_plan(m, s, plan(Method::ring_zigzag, 32, 1 << 16, 2, 1, 2, 16), e)) << e.front();
  // Ring and all-gather need the heads divisible by tp alone.
  Model odd = m;
  odd.heads = 24;
  odd.kv_heads = 6;
  odd.head_dim = 4096 / 24;
  e.clear();
  EXPECT_FALSE(check_plan(odd, s, plan(Method::ring_zigzag, 16, 1 << 16, 1, 1, 1, 16), e));
  EXPECT_TRUE(mentions(e, "heads: 24 query heads are not divisible by the tensor-parallel degree 16")) << e.front();
  e.clear();
  EXPECT_FALSE(check_plan(odd, s, plan(Method::allgather, 16, 1 << 16, 4, 1, 4, 4), e));
  EXPECT_TRUE(mentions(e, "kv_heads: 6 KV heads and tensor-parallel degree 4", "neither divides")) << e.front();
  // GPUs = tp x sp x dp; the sequence splits over sp and again over tp; the MLP's columns over tp.
  e.clear();
  EXPECT_FALSE(check_plan(m, s, plan(Method::ring, 24, 1 << 16, 4, 1, 4, 4), e));
  EXPECT_TRUE(mentions(e, "gpus: 24 GPUs are not divisible by tp 4 x sp 4")) << e.front();
  e.clear();
  EXPECT_FALSE(check_plan(m, s, plan(Method::ring, 16, 16 * 3 + 4, 4, 1, 4, 4), e));
  EXPECT_TRUE(mentions(e, "seq_len: 52 is not divisible by 16", "tp 4")) << e.front();
  Model ffn = m;
  ffn.ffn_hidden = 14338;
  e.clear();
  EXPECT_FALSE(check_plan(ffn, s, plan(Method::ring, 16, 1 << 16, 4, 1, 4, 4), e));
  EXPECT_TRUE(mentions(e, "ffn_hidden: 14338 is not divisible by the tensor-parallel degree 4")) << e.front();
  // Checked arithmetic: a degree beyond the limit is named, never multiplied.
  e.clear();
  EXPECT_FALSE(check_plan(m, s, plan(Method::ring, 8, 1 << 16, 8, 1, 8, 1 << 30), e));
  EXPECT_TRUE(mentions(e, "tp:")) << e.front();
  e.clear();
  EXPECT_FALSE(check_plan(m, s, plan(Method::ring, 8, 1 << 16, 8, 1, 8, 0), e));
  EXPECT_TRUE(mentions(e, "tp:")) << e.front();
}

TEST(TensorParallel, CollectivesPerLayerOnTheTpGroupsLink) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  const Plan p = plan(Method::ulysses, 16, 1 << 17, 4, 4, 1, 4);
  const TensorParallelCost c = tensor_parallel_cost(m, s, p);
  // One all-gather's output: the SP shard's tokens x hidden in bf16.
  EXPECT_DOUBLE_EQ(c.activation_bytes, 2.0 * (1 << 17) / 4 * m.hidden);
  const Placement tp_group = place_tp_group(s, p);
  EXPECT_EQ(tp_group.size, 4);
  EXPECT_EQ(tp_group.nodes, 1);  // TP fits in a node: its collectives stay on NVLink
  EXPECT_EQ(crossing_flows_per_nic(s, Collective::all_gather, tp_group), 0);
  EXPECT_DOUBLE_EQ(c.all_gather_s, collective_time(s, Collective::all_gather, c.activation_bytes, tp_group));
  EXPECT_DOUBLE_EQ(c.reduce_scatter_s, collective_time(s, Collective::reduce_scatter, c.activation_bytes, tp_group));
  EXPECT_DOUBLE_EQ(c.layer_fwd_s, 2 * (c.all_gather_s + c.reduce_scatter_s));
  EXPECT_DOUBLE_EQ(c.layer_bwd_s, c.layer_fwd_s);
  // SP groups sit outside the TP groups: a Ulysses group of 4 is 4 world ranks apart.
  EXPECT_EQ(place_sp_groups(s, p).ulysses.stride, 4);
  // A TP group larger than a node crosses the NICs and costs more per byte.
  const Plan wide = plan(Method::ulysses, 16, 1 << 17, 1, 1, 1, 16);
  EXPECT_GT(crossing_flows_per_nic(s, Collective::all_gather, place_tp_group(s, wide)), 0);

  // The step: every layer's forward and backward collectives, the embedding's and the head's,
  // each exposed; full checkpointing reruns the forward's.
  Result r = simulate(m, s, p);
  ASSERT_TRUE(r.valid) << r.errors.front();
  const double L = m.layers;
  const double per_step = L * (c.layer_fwd_s + c.layer_bwd_s) + c.head_fwd_s + c.head_bwd_s;
  EXPECT_NEAR(r.time.tp_comm, per_step, 1e-12 * per_step);
  EXPECT_GE(r.time.exposed_comm, r.time.exposed_attention_comm + r.time.exposed_dp_comm + per_step - 1e-12);
  Plan ck = p;
  ck.mem.checkpoint = Checkpoint::full;
  ck.grad_accum_steps = 2;
  r = simulate(m, s, ck);
  EXPECT_NEAR(r.time.tp_comm, 2 * (per_step + L * c.layer_fwd_s), 1e-12 * per_step);
  // The step timeline lays the TP collectives out on their own track and still ends at the step.
  const trace::Trace tr = step_trace(r, 0, "predicted");
  bool tp_track = false;
  for (const trace::Slice& sl : tr.slices()) tp_track |= sl.tid == trace::stream_tid(trace::Stream::tensor_parallel);
  EXPECT_TRUE(tp_track);
  // Without TP there is none.
  EXPECT_EQ(simulate(m, s, plan(Method::ulysses, 16, 1 << 17, 16, 16, 1, 1)).time.tp_comm, 0.0);
  EXPECT_EQ(tensor_parallel_cost(m, s, plan(Method::ulysses, 16, 1 << 17, 16, 16, 1, 1)).layer_fwd_s, 0.0);
}

TEST(TensorParallel, GemmsAndThroughputShareTheTpGroup) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  // tp 2 x sp 4 against sp 4 alone on half the GPUs: the same tokens per rank, half the GEMM
  // FLOPs; tokens/s per GPU counts each token once per TP group.
  const Result one = simulate(m, s, plan(Method::ulysses, 4, 1 << 16, 4, 4, 1, 1));
  const Result two = simulate(m, s, plan(Method::ulysses, 8, 1 << 16, 4, 4, 1, 2));
  ASSERT_TRUE(one.valid && two.valid);
  EXPECT_NEAR(two.model_flops_per_gpu, one.model_flops_per_gpu / 2, 1e-9 * one.model_flops_per_gpu);
  EXPECT_LT(two.time.gemm, one.time.gemm * 0.55);
  EXPECT_NEAR(two.tokens_per_s_per_gpu, double(1 << 16) / 8 / two.step_time_s, 1e-9 * two.tokens_per_s_per_gpu);
}

// The framework profile's per-layer inventory under TP: Korthikanti et al., "Reducing Activation
// Recomputation in Large Transformer Models" (arXiv 2205.05198), Sec. 4.1 (Table 2's terms:
// activations per layer sbh(34 + 5as/h) without parallelism) and Sec. 4.2.2 (tensor with sequence
// parallelism: sbh(34/t + 5as/(ht)), every term divided by t). The paper's 5as/h terms are the
// s x s attention scores, softmax and dropout, which flash attention (the simulator's kernels) never
// stores; the 34 sbh are written here as a profile, term by term in the paper's bytes.
constexpr const char* kKorthikantiTable2 = R"json({
  "name": "korthikanti-table-2",
  "states": [{"name": "bf16 weights", "part": "parameters", "bytes_per_param": 2}],
  "layer": [
    {"name": "attention LayerNorm input", "per_token": {"hidden": 1}, "bytes": 2},
    {"name": "QKV GEMM input", "per_token": {"hidden": 1}, "bytes": 2},
    {"name": "Q and K (QK^T input)", "per_token": {"q": 1, "kv_attention": 1}, "bytes": 2},
    {"name": "V (softmax x V input)", "per_token": {"kv_attention": 1}, "bytes": 2},
    {"name": "output projection input", "per_token": {"q": 1}, "bytes": 2},
    {"name": "attention dropout mask", "per_token": {"hidden": 1}, "bytes": 1},
    {"name": "MLP LayerNorm input", "per_token": {"hidden": 1}, "bytes": 2},
    {"name": "fc1 input", "per_token": {"hidden": 1}, "bytes": 2},
    {"name": "GeLU input", "per_token": {"ffn": 1}, "bytes": 2},
    {"name": "fc2 input", "per_token": {"ffn": 1}, "bytes": 2},
    {"name": "MLP dropout mask", "per_token": {"hidden": 1}, "bytes": 1}
  ]
})json";

// The paper's own block: GPT-3-shaped (MHA, GELU, LayerNorm, ffn = 4h) with the 22B model's
// hidden and heads.
Model paper_block() {
  Model m = load_model("gpt-30b");
  m.hidden = 6144;
  m.heads = m.kv_heads = 64;
  m.head_dim = 96;
  m.ffn_hidden = 4 * m.hidden;
  return m;
}

TEST(TensorParallel, ActivationsPerLayerAreKorthikantisTermsOverT) {
  const Model m = paper_block();
  System s = load_system("dgx-a100-80g");
  s.profile = framework_from_json(nlohmann::json::parse(kKorthikantiTable2), "Korthikanti Table 2");
  const std::int64_t seq = 2048;  // the paper's sequence length
  for (int t : {1, 2, 4, 8}) {
    const Plan p = plan(Method::ulysses, t, seq, 1, 1, 1, t);
    std::vector<std::string> e;
    ASSERT_TRUE(check_plan(m, s, p, e)) << e.front();
    // Per token of the sequence (b = 1): 34 h / t bytes.
    EXPECT_DOUBLE_EQ(stored_bytes_per_token(m, s, p, Checkpoint::none), 34.0 * m.hidden / t) << "t=" << t;
  }
  // The Megatron-Core profile (a Llama block: RMSNorm, SwiGLU, GQA, flash attention, no dropout):
  // every term but the per-token fp32 norm statistics (rsigma, 4 bytes each, two per layer) is 1/t.
  s.profile = load_framework("megatron-core");
  const Model llama = load_model("llama3-70b");  // 64 heads, 8 KV heads
  const Plan base = plan(Method::ulysses, 8, 8192, 1, 1, 1, 1), tp8 = plan(Method::ulysses, 8, 8192, 1, 1, 1, 8);
  const double rsigma = 2 * 4.0;
  const double b1 = stored_bytes_per_token(llama, s, base, Checkpoint::none);
  const double b8 = stored_bytes_per_token(llama, s, tp8, Checkpoint::none);
  EXPECT_NEAR(b8 - rsigma, (b1 - rsigma) / 8, 1e-9 * b1);
  // Term by term against the paper's rows (Sec. 4.1), counted for this block, over t = 8:
  //   LayerNorm inputs 2+2, QKV input 2, fc1 input 2 (hidden); Q, K, V 2(q + 2 kv); output
  //   projection input 2q; GeLU input -> SwiGLU's gate and up 2(2 ffn); fc2 input 2 ffn; the flash
  //   kernel's fp32 log-sum-exp per head 4.
  const double h = llama.hidden, q = double(llama.heads) * llama.head_dim, kv = double(llama.kv_heads) * llama.head_dim;
  const double expected = (8 * h + 2 * (q + 2 * kv) + 2 * q + 4 * llama.ffn_hidden + 2 * llama.ffn_hidden +
                           4.0 * llama.heads) / 8 + rsigma;
  EXPECT_NEAR(b8, expected, 1e-9 * expected);
  // Full checkpointing keeps each layer's input, sequence-sharded: 2 sbh / t.
  EXPECT_DOUBLE_EQ(stored_bytes_per_token(llama, s, tp8, Checkpoint::full), 2.0 * h / 8);
}

// The same profile on the paper's own block (GPT: GELU MLP, MHA, ffn = 4h) is Table 2's 34 sbh/t
// term for term, less the two dropout masks (sbh each; the profile's flash attention and Megatron-
// Core runs have no dropout) and plus what flash attention and the fused norms keep instead (the
// fp32 log-sum-exp per head; each LayerNorm's mean and rsigma, fp32). Its fc1 output is the GeLU input, ffn wide: the
// SwiGLU block's gate and up would be 2 x ffn, 8 sbh/t more at ffn = 4h.
TEST(TensorParallel, MegatronCoreOnAGeluBlockIsKorthikantisTableLessDropout) {
  const Model gpt = paper_block();
  ASSERT_EQ(gpt.mlp, MlpKind::gelu);
  System s = load_system("dgx-a100-80g");
  s.profile = load_framework("megatron-core");
  ASSERT_EQ(gpt.norm, NormKind::layernorm);
  const double h = gpt.hidden, stats = 2 * 2 * 4.0;  // two norms, mean and rsigma
  for (int t : {1, 2, 4, 8}) {
    const Plan p = plan(Method::ulysses, t, 2048, 1, 1, 1, t);
    std::vector<std::string> e;
    ASSERT_TRUE(check_plan(gpt, s, p, e)) << e.front();
    EXPECT_DOUBLE_EQ(stored_bytes_per_token(gpt, s, p, Checkpoint::none), (34.0 - 2.0) * h / t + stats + 4.0 * gpt.heads / t)
        << "t=" << t;
    Model gated = gpt;
    gated.mlp = MlpKind::swiglu;
    EXPECT_DOUBLE_EQ(stored_bytes_per_token(gated, s, p, Checkpoint::none) - stored_bytes_per_token(gpt, s, p, Checkpoint::none),
                     2.0 * gpt.ffn_hidden / t)
        << "t=" << t;
  }
}

// Megatron-LM before sequence parallelism (Korthikanti et al., Sec. 4.2.1): the LayerNorms, the
// dropouts and the residual stream run whole on every TP rank, so the activations per layer are
// sbh(10 + 24/t) rather than 34 sbh/t (the paper's 10: both LayerNorm inputs, the QKV and fc1 inputs,
// the two dropout masks), full checkpointing keeps the whole layer input, and every rank's
// elementwise work in the norm regions is the whole sequence's. The TP traffic is the same bytes
// (all-reduces then, an all-gather and reduce-scatter pair now).
TEST(TensorParallel, WithoutSequenceParallelismTheNormRegionsAreWholeOnEveryRank) {
  const Model m = paper_block();
  System sp = load_system("dgx-a100-80g");
  sp.profile = framework_from_json(nlohmann::json::parse(kKorthikantiTable2), "Korthikanti Table 2");
  System whole = sp;
  nlohmann::json doc = nlohmann::json::parse(kKorthikantiTable2);
  doc["tensor_parallel"] = {{"norm_regions", "replicated"}};
  whole.profile = framework_from_json(doc, "Korthikanti Table 2, replicated");
  ASSERT_TRUE(sp.profile.tp_sequence_parallel);
  ASSERT_FALSE(whole.profile.tp_sequence_parallel);
  const double h = m.hidden;
  for (int t : {1, 2, 4, 8}) {
    Plan p = plan(Method::ulysses, t, 2048, 1, 1, 1, t);
    EXPECT_DOUBLE_EQ(stored_bytes_per_token(m, whole, p, Checkpoint::none), (10.0 + 24.0 / t) * h) << "t=" << t;
    EXPECT_DOUBLE_EQ(stored_bytes_per_token(m, whole, p, Checkpoint::full), 2.0 * h) << "t=" << t;
    p.mem.checkpoint = Checkpoint::full;
    const Result a = simulate(m, sp, p), b = simulate(m, whole, p);
    ASSERT_TRUE(a.valid && b.valid);
    EXPECT_DOUBLE_EQ(b.time.tp_comm, a.time.tp_comm) << "t=" << t;
    EXPECT_DOUBLE_EQ(b.time.gemm, a.time.gemm) << "t=" << t;
    // The norm regions' bytes (two LayerNorms read and written, two residual adds) over the
    // (1 - 1/t) share of the tokens sequence parallelism would have left to the other ranks: once
    // in the forward, twice in the backward, once more in the recomputed forward.
    const double extra = 2.0 * 10 * h * 2048 * (1 - 1.0 / t) / sp.gpu.hbm_bytes_per_s;
    EXPECT_NEAR(b.time.elementwise - a.time.elementwise, m.layers * 3 * extra, 1e-9 * b.time.elementwise) << "t=" << t;
    EXPECT_NEAR(b.time.recompute - a.time.recompute, m.layers * extra, 1e-9 * b.time.recompute) << "t=" << t;
  }
}

// The megatron-lm-2021 profile (the SC21 paper's code) on the paper's own block is Table 2's terms
// as Sec. 4.2.1 shares them, sbh(10 + 24/t), plus the fused LayerNorms' fp32 mean and invvar (the s^2
// score terms of its unfused attention are not in the memory model).
TEST(TensorParallel, MegatronLm2021IsKorthikantisTableWithoutSequenceParallelism) {
  const Model gpt = paper_block();
  System s = load_system("dgx-a100-80g");
  s.profile = load_framework("megatron-lm-2021");
  const double h = gpt.hidden, stats = 2 * 2 * 4.0;
  for (int t : {1, 2, 4, 8}) {
    const Plan p = plan(Method::ulysses, t, 2048, 1, 1, 1, t);
    std::vector<std::string> e;
    ASSERT_TRUE(check_plan(gpt, s, p, e)) << e.front();
    EXPECT_DOUBLE_EQ(stored_bytes_per_token(gpt, s, p, Checkpoint::none), (10.0 + 24.0 / t) * h + stats) << "t=" << t;
  }
}

TEST(TensorParallel, StatesShardOverTpThenZeroOverTheRest) {
  const Model m = load_model("llama3-70b");
  System s = load_system("dgx-h100");
  s.profile = load_framework("megatron-core");
  Plan one = plan(Method::ring_zigzag, 16, 1 << 16, 16, 1, 16, 1), tp = plan(Method::ring_zigzag, 16, 1 << 16, 2, 1, 2, 8);
  for (int zero : {0, 1}) {
    one.mem.zero = tp.mem.zero = zero;
    const MemoryEstimate a = estimate_memory(m, s, one), b = estimate_memory(m, s, tp);
    // 2 bytes of weights and 4 of gradients per parameter: 1/8 of them each under TP 8.
    EXPECT_NEAR(b.peak.parameters, double(m.total_params()) * 2 / 8, 1e-6 * b.peak.parameters);
    EXPECT_NEAR(a.peak.parameters, double(m.total_params()) * 2, 1e-6 * a.peak.parameters);
    // ZeRO-1 shards the optimizer states over the rest: 16 ranks without TP, 2 with it.
    const double states = double(m.total_params()) * 12;
    EXPECT_NEAR(b.peak.optimizer_states, zero ? states / 8 / 2 : states / 8, 1e-6 * states) << "zero " << zero;
    EXPECT_NEAR(a.peak.optimizer_states, zero ? states / 16 : states, 1e-6 * states) << "zero " << zero;
  }
  // The data-parallel group is the ranks holding the same shard: gpus / tp of them, tp apart.
  const Placement z = place_zero_group(s, tp);
  EXPECT_EQ(z.size, 2);
  EXPECT_EQ(z.stride, 8);
}

TEST(TensorParallel, AdvisePicksTpWhenTheHeadsOrMemoryCapSp) {
  // Llama-3-8B, one 1M-token sequence on 32 H100s, Ulysses only: without TP, Ulysses 32 (the
  // query-head cap) must recompute every layer to fit; TP 4 shards the weights and activations
  // so that no recomputation is needed.
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  SearchSpace space;
  space.methods = {Method::ulysses};
  space.global_batch = GlobalBatch{0, 1};
  const Advice a = advise(m, s, 32, std::int64_t{1} << 20, space);
  ASSERT_NE(a.best(), nullptr);
  EXPECT_GT(a.best()->plan.tp, 1) << describe(a.best()->plan);
  EXPECT_EQ(std::int64_t{a.best()->plan.tp} * a.best()->plan.sp, 32);
  ASSERT_GE(a.reasons.size(), 2u);
  EXPECT_NE(a.reasons[1].find(fmt::format("tp={}:", a.best()->plan.tp)), std::string::npos) << a.reasons[1];
  EXPECT_NE(a.reasons[1].find("faster than the best plan without tensor parallelism"), std::string::npos) << a.reasons[1];
  // Ulysses beyond the 32 query heads is never ranked; tp x sp beyond them is, as long as the
  // heads per TP rank divide by U.
  for (const Result& r : a.ranked) EXPECT_EQ(m.heads % (r.plan.tp * r.plan.ulysses_degree), 0) << describe(r.plan);
  // The search tried TP 1, 2, 4, 8 (the GPUs of a node) and no more.
  EXPECT_EQ(tp_degrees(m, s, 32), (std::vector<int>{1, 2, 4, 8}));
  // When TP loses, the reasons say so and why.
  space.methods = all_methods();
  space.global_batch = GlobalBatch{std::int64_t{4} << 20, 0};
  const Advice b = advise(m, s, 64, std::int64_t{128} << 10, space);
  ASSERT_NE(b.best(), nullptr);
  if (b.best()->plan.tp == 1)
    EXPECT_NE(b.reasons[1].find("tensor parallelism not chosen"), std::string::npos) << b.reasons[1];
  else
    EXPECT_NE(b.reasons[1].find("faster than the best plan without tensor parallelism"), std::string::npos);
  EXPECT_GT(b.best()->plan.grad_accum_steps, 1);
}

TEST(TensorParallel, PlanJsonAndLabelsCarryTp) {
  Plan p = plan(Method::hybrid, 64, 1 << 17, 8, 4, 2, 2);
  const nlohmann::json j = to_json(p);
  EXPECT_EQ(j["tp"], 2);
  EXPECT_EQ(j["dp"], 4);
  EXPECT_EQ(plan_from_json(j), p);
  nlohmann::json old = j;
  old.erase("tp");  // documents written before TP read as tp 1
  EXPECT_EQ(plan_from_json(old).tp, 1);
  EXPECT_EQ(describe_structure(p), "tp=2 hybrid U4xR2");
  EXPECT_EQ(describe_structure(j), "tp=2 hybrid U4xR2");
  p.sp = p.ulysses_degree = p.ring_degree = 1;
  EXPECT_EQ(describe_structure(p), "tp=2 sp=1");
}

TEST(TensorParallelCli, SimulateAdviseSweepMaxlenTakeTp) {
  CliRun r = seqpar("simulate --gpus 16 --tp 2 --seq-len 128K --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = r.json();
  EXPECT_EQ(j["plan"]["tp"], 2);
  EXPECT_EQ(j["plan"]["sp"], 8);  // every GPU the TP groups leave
  EXPECT_GT(j["time"]["tp_comm_s"].get<double>(), 0);
  EXPECT_EQ(j["groups"]["tensor"]["size"], 2);
  EXPECT_NE(j["groups"]["label"].get<std::string>().find("TP2 in a node"), std::string::npos);
  r = seqpar("simulate --gpus 16 --tp 2 --seq-len 128K");
  EXPECT_NE(r.out.find("tp=2 ulysses sp=8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tensor parallel (all-gather, reduce-scatter)"), std::string::npos) << r.out;
  // Invalid: exit 2 naming the rule.
  r = seqpar("simulate --gpus 64 --tp 4 --sp 16 --seq-len 128K");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE((r.out + r.err).find("query heads per TP rank"), std::string::npos) << r.out << r.err;
  r = seqpar("advise --gpus 16 --tp 2 --seq-len 128K --json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = r.json();
  EXPECT_EQ(j["best"]["tp"], 2);
  EXPECT_FALSE(j["reasons"].empty());
  r = seqpar("maxlen --gpus 8 --tp 4 --method ring-zigzag --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.json()["plan"]["tp"], 4);
  const std::string dir = "/tmp/seqpar_tp_sweep_" + std::to_string(::getpid());
  r = seqpar("sweep --gpus 8 --seq-len 32K --tp 1,2 --method ulysses --out " + dir + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  bool two = false;
  j = r.json();
  for (const auto& pt : j["results"]) two |= pt["plan"]["tp"] == 2;
  EXPECT_TRUE(two);
  std::filesystem::remove_all(dir);
  r = seqpar("sweep --gpus 8 --seq-len 32K --tp 2,2 --out " + dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("tp"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace seqpar::sim

// Linear-attention (gated DeltaNet) layers (README "Linear attention"): a layer's parameters, its
// work and the bytes each SP method moves for it at a small awkward shape, derived by hand; the
// methods refused for it and the head rule; the mean layer of a hybrid model; Qwen3-Next's preset
// against its published size.
#include <gtest/gtest.h>

#include <string>

#include "fixtures.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/trace.hpp"
#include "seqpar/sim/attention_cost.hpp"
#include "seqpar/sim/compute_cost.hpp"
#include "seqpar/sim/linear_attention.hpp"
#include "seqpar/sim/memory_cost.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/result_json.hpp"
#include "seqpar/sim/simulate.hpp"
#include "seqpar/sim/step_trace.hpp"
#include "seqpar/sim/validity.hpp"

namespace seqpar::sim {
namespace {

using nlohmann::json;
using testing::plan;

// The tiny model (hidden 8, 2 heads of 4, SwiGLU 16, vocab 32, untied) at 4 layers, the first three
// linear and the last full (full_attention_interval 4), the linear layers of 2 key heads of 3 and
// 4 value heads of 5 with a 3-tap conv.
Model tiny_linear() {
  Model m = testing::tiny_model();
  m.name = "tiny-linear";
  m.layers = 4;
  m.layer_kinds = {AttentionKind::linear, AttentionKind::linear, AttentionKind::linear, AttentionKind::full};
  m.linear = {2, 4, 3, 5, 3};
  return m;
}

// Qwen3NextGatedDeltaNet's parameters by hand: q, k 2 x 3 = 6 wide each, v and z 4 x 5 = 20 each.
//   in_proj_qkvz 8 x (6 + 6 + 20 + 20) = 416, in_proj_ba 8 x (4 + 4) = 64, out_proj 20 x 8 = 160: 640
//   conv1d (6 + 6 + 20 = 32 channels) x 3 taps = 96, A_log 4, dt_bias 4, gated norm 5: 109
// The full layer's attention: q, k, v, o 4 x 8 x 8 = 256. Layers: 256 + 3 x 749 = 2503, their
// norms 4 x 16 = 64, their MLPs 4 x (8 x 32 + 16 x 8) = 1536; embeddings 2 x 32 x 8 + 8 = 520:
// 4623. GEMM FLOPs of 10 tokens, the layers' mean: (2 x 10 x 256 + 3 x 2 x 10 x 640) / 4 = 10880.
TEST(LinearAttention, ParametersAndProjectionFlopsByHand) {
  const Model m = tiny_linear();
  EXPECT_EQ(m.linear_layers(), 3);
  EXPECT_EQ(m.linear_weight_params(), 640);
  EXPECT_EQ(m.linear_params(), 749);
  EXPECT_EQ(m.mixer_params_total(), 2503);
  EXPECT_EQ(m.layer_params_total(), 4103);
  EXPECT_EQ(m.total_params(), 4623);
  EXPECT_DOUBLE_EQ(attention_gemm_flops(m, 10), 10880.0);
  EXPECT_EQ(linear_conv_channels(m.linear), 32.0);
  // A model without linear layers has none of it.
  EXPECT_EQ(testing::tiny_model().linear_params(), 0);
  EXPECT_EQ(testing::tiny_model().mixer_params_total(), 2 * 256);
}

// The chunked rule per token and value head, C = 64, d_k = 3, d_v = 5 (linear_attention.hpp):
//   kkt 2 x 64 x 3 = 384; solve 2 x 64^2 / 3 = 8192/3; w, u 2 x 64 x 8 = 1024; state 4 x 15 = 60;
//   output 2 x 15 + 2 x 64 x 8 = 1054: 2522 + 8192/3 = 15758/3. A summary: 4 x 3 x (3 + 5) = 96.
TEST(LinearAttention, RuleFlopsByHand) {
  const LinearAttention l = tiny_linear().linear;
  EXPECT_DOUBLE_EQ(linear_rule_flops_per_token(l), 15758.0 / 3);
  EXPECT_DOUBLE_EQ(linear_summary_flops_per_token(l), 96.0);
}

// Ulysses at U = 2 on N = 64 (32 tokens a rank): in, q and k 2 x 3 each, v and z 4 x 5 each, beta
// and alpha 4 each: 60 values, 2 x 32 x 60 = 3840 bytes; out 4 x 5 = 20 values, 2 x 32 x 20 = 1280.
// Work: 64 tokens of 2 value heads = 32 tokens of 4: 32 x 4 x 15758/3 FLOPs, no summary. On the
// round GPU (100 TFLOP/s, no launch cost) at 0.3 of the peak.
TEST(LinearAttention, UlyssesBytesAndWorkByHand) {
  const System s = testing::round_system();
  const Model m = tiny_linear();
  const Plan p = plan(Method::ulysses, 2, 64, 2, 2, 1);
  const LinearBytes b = linear_layer_bytes(m, p);
  EXPECT_EQ(b.a2a_in, 3840.0);
  EXPECT_EQ(b.a2a_out, 1280.0);
  EXPECT_EQ(b.summaries, 0.0);
  EXPECT_EQ(b.halos, 0.0);
  const AttentionCost c = linear_layer_cost(m, s, p);
  const double flops = 32.0 * 4 * 15758.0 / 3;
  EXPECT_DOUBLE_EQ(c.model_flops_fwd, flops);
  EXPECT_DOUBLE_EQ(c.fwd_kernel_s, flops / (100e12 * 0.3));
  EXPECT_DOUBLE_EQ(c.bwd_kernel_s, 2.5 * flops / (100e12 * 0.3));
  EXPECT_GT(c.a2a_qkv_s, c.a2a_o_s);
  EXPECT_DOUBLE_EQ(c.fwd_s, c.fwd_kernel_s + c.a2a_qkv_s + c.a2a_o_s);
  EXPECT_EQ(c.kv_gather_s, 0.0);
}

// State passing at R = 4 on N = 64 (16 tokens a rank). A summary: 4 value heads x 3 x (5 + 3) fp32
// = 384 bytes; a halo: (3 - 1) taps x 32 channels bf16 = 128 bytes; gathered from 4 ranks: 1536 and
// 512. Head/tail layouts (ring-zigzag, allgather) hold two fragments a rank: 3072 and 1024. Work:
// 16 tokens x 4 heads x (15758/3 + 96) on every method: no causal imbalance.
TEST(LinearAttention, StatePassingBytesAndWorkByHand) {
  const System s = testing::round_system();
  const Model m = tiny_linear();
  struct Case { Method method; double summaries, halos; };
  for (const Case& k : {Case{Method::ring, 1536, 512}, Case{Method::allgather_contiguous, 1536, 512},
                        Case{Method::ring_zigzag, 3072, 1024}, Case{Method::allgather, 3072, 1024}}) {
    const Plan p = plan(k.method, 4, 64, 4, 1, 4);
    const LinearBytes b = linear_layer_bytes(m, p);
    EXPECT_EQ(b.summaries, k.summaries) << to_string(k.method);
    EXPECT_EQ(b.halos, k.halos) << to_string(k.method);
    EXPECT_EQ(b.a2a_in, 0.0);
    const AttentionCost c = linear_layer_cost(m, s, p);
    EXPECT_DOUBLE_EQ(c.model_flops_fwd, 16.0 * 4 * 15758.0 / 3) << to_string(k.method);
    EXPECT_DOUBLE_EQ(c.fwd_kernel_s, 16.0 * 4 * (15758.0 / 3 + 96) / (100e12 * 0.3)) << to_string(k.method);
    EXPECT_GT(c.kv_gather_s, 0.0);
    EXPECT_DOUBLE_EQ(c.fwd_s, c.fwd_kernel_s + c.fwd_comm_s);
  }
  // The summaries do not grow with the sequence; the full layer's K,V do.
  const Plan longer = plan(Method::ring, 4, 1 << 20, 4, 1, 4);
  EXPECT_EQ(linear_layer_bytes(m, longer).summaries, 1536.0);
}

// The mean layer: 1/4 the full layer's figures, 3/4 the linear layer's (the full layer's are those
// of the same model without kinds).
TEST(LinearAttention, HybridModelMixesTheKindsByTheirShare) {
  const System s = testing::round_system();
  const Model m = tiny_linear();
  Model all_full = m;
  all_full.layer_kinds.clear();
  all_full.linear = {};
  for (const Plan& p : {plan(Method::ulysses, 2, 64, 2, 2, 1), plan(Method::ring_zigzag, 4, 64, 4, 1, 4)}) {
    const AttentionCost mixed = attention_layer_cost(m, s, p), full = attention_layer_cost(all_full, s, p);
    const AttentionCost lin = linear_layer_cost(m, s, p);
    EXPECT_DOUBLE_EQ(mixed.fwd_s, 0.25 * full.fwd_s + 0.75 * lin.fwd_s) << to_string(p.method);
    EXPECT_DOUBLE_EQ(mixed.bwd_kernel_s, 0.25 * full.bwd_kernel_s + 0.75 * lin.bwd_kernel_s) << to_string(p.method);
    EXPECT_DOUBLE_EQ(mixed.model_flops_fwd, 0.25 * full.model_flops_fwd + 0.75 * lin.model_flops_fwd);
  }
}

// The timeline lays the mean layer out as the simulator costs it (step_trace checks every layer's
// attention against AttentionCost::fwd_s and bwd_s, and throws on a difference): the softmax layers'
// share of the ring steps, hops and all-to-alls, and the linear layers' share as one block, under
// every method that serves them, with ring hops exposed (a short sequence) or hidden.
TEST(LinearAttention, TheTimelineFollowsTheMeanLayer) {
  const Model m = load_model("qwen3-next-80b-a3b");
  const System s = load_system("hgx-h200");
  int drawn = 0;
  for (Method meth : {Method::ulysses, Method::ring, Method::ring_zigzag, Method::allgather, Method::allgather_contiguous})
    for (std::int64_t seq : {std::int64_t{1} << 12, std::int64_t{1} << 18}) {
      Plan p = testing::plan_all_sp(meth, 8, seq);
      p.gpus = 32;
      p.ep = 8;
      p.mem.zero = 3;
      p.mem.checkpoint = Checkpoint::full;
      const Result r = simulate(m, s, p);
      ASSERT_TRUE(r.valid) << to_string(meth) << " " << json(r.errors).dump();
      const json t = step_trace(r, 0, "predicted").to_json();
      EXPECT_TRUE(trace::validate(t).empty()) << to_string(meth);
      EXPECT_NE(t.dump().find("linear-attention layers (their share)"), std::string::npos) << to_string(meth);
      ++drawn;
    }
  EXPECT_EQ(drawn, 10);
}

// Stored per token (linear_attention.hpp), tiny_linear: bf16 conv in and out 2 x 32, q and k at the
// value heads 2 x 4 x 3, A 64 x 4, beta 4, output, z and norm output 3 x 4 x 5: 64 + 24 + 256 + 4 +
// 60 = 408; fp32 6 x 4 = 24. A linear layer has none of deepspeed-alst's softmax-attention terms
// (Ulysses 2: q, k, v 8 + 2 x 8, the output 8 and again in the sequence layout 8: 40 bf16; the
// softmax_lse, 2 heads: 2 fp32). The mixed model's mean layer is 1/4 the full layer's and 3/4 the
// all-linear model's.
TEST(LinearAttention, StoredValuesByHand) {
  const Model m = tiny_linear();
  const Plan p = plan(Method::ulysses, 2, 64, 2, 2, 1);
  const LinearStored v = linear_stored_values_per_token(m, p);
  EXPECT_EQ(v.bf16, 408.0);
  EXPECT_EQ(v.fp32, 24.0);
  const System s = load_system("dgx-h100");  // deepspeed-alst's inventory
  Model all_full = m, all_linear = m;
  all_full.layer_kinds.clear();
  all_full.linear = {};
  all_linear.layer_kinds.assign(4, AttentionKind::linear);
  const StoredValues mixed = stored_values_per_token(m, s, p, Checkpoint::none);
  const StoredValues full = stored_values_per_token(all_full, s, p, Checkpoint::none);
  const StoredValues lin = stored_values_per_token(all_linear, s, p, Checkpoint::none);
  EXPECT_DOUBLE_EQ(full.bf16 - lin.bf16, 40.0 - 408.0);
  EXPECT_DOUBLE_EQ(full.fp32 - lin.fp32, 2.0 - 24.0);
  EXPECT_DOUBLE_EQ(mixed.bf16, 0.25 * full.bf16 + 0.75 * lin.bf16);
  EXPECT_DOUBLE_EQ(mixed.fp32, 0.25 * full.fp32 + 0.75 * lin.fp32);
}

// Hybrid (a Ulysses x ring split) has no implementation; every other method serves linear layers.
// Key and value heads must divide by tp x U.
TEST(LinearAttention, MethodRuleAndHeadRule) {
  const System s = testing::round_system();
  const Model m = tiny_linear();
  const Plan hybrid = plan(Method::hybrid, 4, 64, 4, 2, 2);
  const std::string why = linear_method_error(m, hybrid);
  EXPECT_EQ(why.rfind("method: model 'tiny-linear' has 3 linear-attention layers (2 key and 4 value heads); hybrid: "
                      "no implementation", 0), 0u) << why;
  const Result r = simulate(m, s, hybrid);
  EXPECT_FALSE(r.valid);
  bool listed = false;
  for (const std::string& e : r.errors) listed |= e == why;
  EXPECT_TRUE(listed) << json(r.errors).dump();
  EXPECT_THROW(linear_layer_cost(m, s, hybrid), Error);
  for (Method meth : {Method::ulysses, Method::ring, Method::ring_zigzag, Method::allgather, Method::allgather_contiguous})
    EXPECT_EQ(linear_refusal(meth), "") << to_string(meth);
  // U = 4 does not divide the 2 key heads (the full layer's 2 heads refuse it too).
  const std::string heads = linear_method_error(m, plan(Method::ulysses, 4, 64, 4, 4, 1));
  EXPECT_EQ(heads.rfind("ulysses_degree: model 'tiny-linear'", 0), 0u) << heads;
  EXPECT_NE(heads.find("= 4 must divide both"), std::string::npos) << heads;
  EXPECT_EQ(linear_method_error(m, plan(Method::ulysses, 2, 64, 2, 2, 1)), "");
  // No linear layers, no rule.
  EXPECT_EQ(linear_method_error(testing::tiny_model(), hybrid), "");
}

// Qwen3-Next 80B-A3B from its config.json: 36 linear and 12 full layers. By hand:
//   linear layer  in_proj_qkvz 2048 x (2 x 2048 + 2 x 4096) = 25,165,824, in_proj_ba 2048 x 64 =
//                 131,072, out_proj 4096 x 2048 = 8,388,608; conv 8192 x 4 = 32,768; 32 + 32 + 128:
//                 33,718,464
//   full layer    q, o 2 x 2048 x 4096, k, v 2 x 2048 x 512: 18,874,368
//   MoE layer     512 experts x 3 x 2048 x 512 = 1,610,612,736, shared 3,145,728, router 1,048,576,
//                 norms 4096
//   embeddings    2 x 151936 x 2048 + 2048 = 622,336,000
//   total 36 x 33,718,464 + 12 x 18,874,368 + 48 x 1,614,811,136 + 622,336,000 = 79,573,623,552
// Qwen3-Coder-Next, the same shape, is 79,674,391,296 by its safetensors: the 0.13% between is the
// full attention's output gate (12 x 2048 x 4096 = 100,663,296), which is not modelled.
TEST(LinearAttention, Qwen3NextParametersByHand) {
  const Model m = load_model("qwen3-next-80b-a3b");
  EXPECT_EQ(m.linear_layers(), 36);
  EXPECT_EQ(m.layer_kinds[3], AttentionKind::full);
  EXPECT_EQ(m.layer_kinds[4], AttentionKind::linear);
  EXPECT_EQ(m.linear_params(), 33'718'464);
  EXPECT_EQ(m.attention_params(), 18'874'368);
  EXPECT_EQ(m.total_params(), 79'573'623'552);
  EXPECT_EQ(79'674'391'296 - m.total_params(), 100'767'744);
  for (const char* k : {"linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
                        "linear_conv_kernel_dim", "full_attention_interval"})
    EXPECT_TRUE(m.sources.count(k)) << k;
  // A result's model reads back with its kinds and its linear shape.
  const Model back = model_from_json(to_json(m), "round trip");
  EXPECT_EQ(back.total_params(), m.total_params());
  EXPECT_EQ(back.linear_layers(), 36);
  EXPECT_EQ(back.linear.value_heads, 32);
  // Ulysses 8 over 16 key heads: valid; 32 does not divide them.
  EXPECT_EQ(linear_method_error(m, plan(Method::ulysses, 8, 1 << 16, 8, 8, 1)), "");
  EXPECT_NE(linear_method_error(m, plan(Method::ulysses, 32, 1 << 16, 32, 32, 1)), "");
}

// A preset's linear fields without a linear layer, or linear layers without their fields, are refused.
TEST(LinearAttention, PresetFieldsAreCheckedTogether) {
  json j = to_json(load_model("qwen3-next-80b-a3b"));
  json missing = j;
  missing.erase("linear_conv_kernel_dim");
  EXPECT_THROW(model_from_json(missing, "missing"), Error);
  json stray = to_json(load_model("llama3-8b"));
  stray["linear_num_key_heads"] = 16;
  EXPECT_THROW(model_from_json(stray, "stray"), Error);
  json uneven = j;
  uneven["linear_num_value_heads"] = 24;  // not a multiple of 16 key heads
  EXPECT_THROW(model_from_json(uneven, "uneven"), Error);
}

// Qwen3-Next 80B-A3B's config.json keys (as its preset cites them), layer_types left out as the
// release leaves them: read as the preset, through full_attention_interval.
const json kQwen3Next = json::parse(R"({
  "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "decoder_sparse_step": 1,
  "full_attention_interval": 4, "head_dim": 256, "hidden_size": 2048, "intermediate_size": 5120,
  "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
  "linear_value_head_dim": 128, "mlp_only_layers": [], "moe_intermediate_size": 512, "num_attention_heads": 16,
  "num_experts": 512, "num_experts_per_tok": 10, "num_hidden_layers": 48, "num_key_value_heads": 2,
  "shared_expert_intermediate_size": 512, "tie_word_embeddings": false, "vocab_size": 151936})");

TEST(LinearAttention, HuggingFaceConfigReadsAsThePreset) {
  const Model h = load_model(testing::write_config("seqpar_linear_test", "Qwen3-Next-80B-A3B", kQwen3Next.dump()));
  const Model p = load_model("qwen3-next-80b-a3b");
  EXPECT_EQ(h.total_params(), p.total_params());
  EXPECT_EQ(h.active_params(), p.active_params());
  EXPECT_EQ(h.layer_kinds, p.layer_kinds);
  EXPECT_EQ(h.linear.value_heads, 32);
  EXPECT_EQ(h.experts.shared, 1);
  // layer_types spelt out read the same; linear_attention is refused in a family without it.
  json listed = kQwen3Next;
  listed.erase("full_attention_interval");
  listed["layer_types"] = json::array();
  for (AttentionKind k : p.layer_kinds) listed["layer_types"].push_back(std::string(to_string(k)));
  EXPECT_EQ(load_model(testing::write_config("seqpar_linear_test", "listed", listed.dump())).layer_kinds, p.layer_kinds);
  json llama = json::parse(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100,
    "layer_types": ["linear_attention", "full_attention"]})");
  EXPECT_THROW(load_model(testing::write_config("seqpar_linear_test", "llama-linear", llama.dump())), Error);
  json missing = kQwen3Next;
  missing.erase("linear_key_head_dim");
  EXPECT_THROW(load_model(testing::write_config("seqpar_linear_test", "missing", missing.dump())), Error);
}

}  // namespace
}  // namespace seqpar::sim

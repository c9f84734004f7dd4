// Multi-head latent attention (README "Latent attention (MLA)"): DeepSeek-V3's parameter count
// against the published totals, per-rank attention work and bytes under the methods that serve it
// against hand-derived counts at SP 2, 4 and 8, the methods refused for it, and the Hugging Face
// configs of the DeepSeek families read as the preset.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "fixtures.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/attention_cost.hpp"
#include "seqpar/sim/compute_cost.hpp"
#include "seqpar/sim/latent_attention.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/result_json.hpp"
#include "seqpar/sim/simulate.hpp"
#include "seqpar/sim/validity.hpp"

namespace seqpar::sim {
namespace {

using nlohmann::json;
using testing::plan;

// The tiny model with latent attention: 2 heads, q/k heads of 6 (4 non-rotary + 2 rotary), values
// of 4, q rank 4, KV rank 4 (hidden 8).
Model tiny_latent() {
  Model m = testing::tiny_model();
  m.name = "tiny-mla";
  m.head_dim = 6;
  m.v_head_dim = 4;
  m.latent = {4, 4, 2};
  return m;
}

// Projections by hand (DeepSeek-V3's inference/model.py, class MLA): wq_a 8 x 4 = 32, wq_b 4 x (2 x 6)
// = 48, wkv_a 8 x (4 + 2) = 48, wkv_b 4 x 2 x (4 + 4) = 64, wo (2 x 4) x 8 = 64: 256 weights; the
// q and kv latents' norms 4 + 4. Forward GEMM FLOPs: 2 per weight and token.
TEST(Mla, ProjectionParametersAndFlopsByHand) {
  const Model m = tiny_latent();
  EXPECT_EQ(m.attention_weight_params(), 256);
  EXPECT_EQ(m.latent_norm_params(), 8);
  EXPECT_EQ(m.attention_params(), 264);
  EXPECT_DOUBLE_EQ(attention_gemm_flops(m, 10), 2.0 * 10 * 256);
  // QK^T 2 x 6 and PV 2 x 4 FLOPs per pair and head: 4 x 5.
  EXPECT_EQ(m.pair_dim(), 5.0);
  // Without a q rank q comes from the hidden state: wq 8 x 12 = 96 instead of 32 + 48.
  Model direct = m;
  direct.latent.q_rank = 0;
  EXPECT_EQ(direct.attention_weight_params(), 256 - 80 + 96);
  EXPECT_EQ(direct.latent_norm_params(), 4);  // no q latent, no q norm: the KV latent's 4
}

// DeepSeek-V3 (deepseek-ai/DeepSeek-V3 README: 671B total, 37B activated; README_WEIGHTS.md: main
// model 671B, 36.7B activated including the 0.9B embedding and 0.9B head). By hand:
//   attention  wq_a 7168 x 1536 + wq_b 1536 x 128 x 192 + wkv_a 7168 x 576 + wkv_b 512 x 128 x 256
//              + wo 16384 x 7168 = 187,105,280, norms 1536 + 512: 187,107,328
//   dense MLP  3 x 7168 x 18432 = 396,361,728; an expert 3 x 7168 x 2048 = 44,040,192
//   dense layer 187,107,328 + 396,361,728 + 2 x 7168 = 583,483,392 (x 3)
//   MoE layer   187,107,328 + 257 experts 11,318,329,344 + router 7168 x 256 = 1,835,008 + 14,336
//               = 11,507,286,016 (x 58)
//   embeddings  2 x 129280 x 7168 + 7168 = 1,853,365,248
//   total 1,750,450,176 + 667,422,588,928 + 1,853,365,248 = 671,026,404,352
//   active: less 58 x 248 idle experts x 44,040,192 = 633,474,121,728: 37,552,282,624
TEST(Mla, DeepSeekV3ParametersMatchThePublishedTotals) {
  const Model m = load_model("deepseek-v3");
  EXPECT_TRUE(m.mla());
  EXPECT_EQ(m.attention_params(), 187'107'328);
  EXPECT_EQ(m.total_params(), 671'026'404'352);
  EXPECT_EQ(m.active_params(), 37'552'282'624);
  EXPECT_NEAR(double(m.total_params()) / 671e9, 1.0, 0.001);
  EXPECT_NEAR(double(m.active_params()) / 37e9, 1.0, 0.02);  // +1.5% of "37B"; +2.3% of README_WEIGHTS' 36.7B
  for (const char* k : {"layers", "hidden", "heads", "kv_heads", "head_dim", "v_head_dim", "q_lora_rank", "kv_lora_rank",
                        "qk_rope_head_dim", "ffn_hidden", "vocab", "experts", "experts_per_token", "expert_ffn_hidden",
                        "shared_experts", "shared_expert_ffn_hidden", "dense_layers", "expert_imbalance"})
    EXPECT_TRUE(m.sources.count(k)) << k;
  // A result's model reads back with its latent attention.
  const Model back = model_from_json(to_json(m), "round trip");
  EXPECT_EQ(back.total_params(), m.total_params());
  EXPECT_EQ(back.v_dim(), 128);
  EXPECT_EQ(back.latent.q_rank, 1536);
  EXPECT_FALSE(to_json(load_model("llama3-8b")).contains("kv_lora_rank"));
}

// Ring (TE's p2p, head/tail) at SP 2, 4, 8 on N = 64 tokens, tiny_latent: each rank holds N/R
// tokens; a hop carries every head's up-projected K (6) and V (4) in bf16:
//   2 bytes x N/R x 2 heads x 10 = 40 N/R: 1280, 640, 320 bytes.
// Model FLOPs per GPU: N^2 / 2 causal pairs x (2 x 6 + 2 x 4) x 2 heads / R = 81920 / R.
// The kernels do the FLOPs of an ordinary model whose heads are pair_dim = 5 wide (4 x 5 per pair),
// so on the round GPU (one rate at every head width) their times are that model's.
TEST(Mla, RingWorkAndBytesByHand) {
  const System s = testing::round_system();
  const Model m = tiny_latent();
  Model same_flops = testing::tiny_model();
  same_flops.head_dim = 5;
  for (int R : {2, 4, 8}) {
    const Plan p = plan(Method::ring_zigzag, R, 64, R, 1, R);
    const AttentionShapes a = attention_shapes(m, p);
    EXPECT_EQ(a.kv_block_bytes, 40.0 * 64 / R) << R;
    const AttentionCost c = attention_layer_cost(m, s, p), e = attention_layer_cost(same_flops, s, p);
    EXPECT_DOUBLE_EQ(c.model_flops_fwd, 81920.0 / R) << R;
    EXPECT_DOUBLE_EQ(c.fwd_kernel_s, e.fwd_kernel_s) << R;
    EXPECT_DOUBLE_EQ(c.bwd_kernel_s, e.bwd_kernel_s) << R;
    // The hop is a send of those bytes; the MHA model's K,V of 5 + 5 per head are the same bytes.
    EXPECT_EQ(a.kv_block_bytes, attention_shapes(same_flops, p).kv_block_bytes);
    EXPECT_DOUBLE_EQ(c.hop_s, e.hop_s) << R;
  }
}

// Hybrid (TE's a2a+p2p) with U = 2: the all-to-all sends q (6), k (6), v (4) of every head of the
// rank's N/P tokens and brings the output (4 per head) back; the ring inside moves K,V of the U
// group's tokens (N/R) for its heads/U = 1 head.
//   SP 4 (U 2, R 2): q,k,v 2 x 16 x (2 x 6 + 2 x 10) = 1024; out 2 x 16 x 2 x 4 = 256; hop 2 x 32 x 1 x 10 = 640
//   SP 8 (U 2, R 4): 2 x 8 x 32 = 512; 2 x 8 x 8 = 128; hop 2 x 16 x 10 = 320
//   SP 2: a hybrid needs U > 1 and R > 1 (Ulysses alone: UlyssesBytesByHand).
TEST(Mla, HybridAllToAllAndRingBytesByHand) {
  const Model m = tiny_latent();
  struct Case { int sp, u, r; double qkv, o, hop; };
  for (const Case& k : {Case{4, 2, 2, 1024, 256, 640}, Case{8, 2, 4, 512, 128, 320}}) {
    const AttentionShapes a = attention_shapes(m, plan(Method::hybrid, k.sp, 64, k.sp, k.u, k.r));
    EXPECT_EQ(a.qkv_a2a_bytes, k.qkv) << k.sp;
    EXPECT_EQ(a.o_a2a_bytes, k.o) << k.sp;
    EXPECT_EQ(a.kv_block_bytes, k.hop) << k.sp;
  }
}

// DeepSeek-V3 at 128K on SP 8 ring-zigzag: a hop carries 16,384 tokens x 128 heads x (192 + 128)
// bf16 = 1,342,177,280 bytes; the latent c_KV and rotary key (512 + 64) of the same tokens would be
// 18,874,368 bytes, 1/71 of it (not modelled: no implementation sends it).
TEST(Mla, DeepSeekV3RingHopIsTheUpProjectedKv) {
  const Model m = load_model("deepseek-v3");
  const AttentionShapes a = attention_shapes(m, plan(Method::ring_zigzag, 8, 1 << 17, 8, 1, 8));
  EXPECT_EQ(a.kv_block_bytes, 1'342'177'280.0);
  EXPECT_NEAR(a.kv_block_bytes / (2.0 * 16384 * (512 + 64)), 71.1, 0.05);
}

// Transformer Engine 2.16 on: ring-zigzag (p2p) and hybrid (a2a+p2p) with any kernel, ulysses (a2a)
// and allgather (all_gather) with cuDNN's; contiguous shards with none.
TEST(Mla, MethodsWithoutAnImplementationAreRefused) {
  const System flash = testing::with_kernel("dgx-h100", "flash-attention-3");
  const System cudnn = testing::with_kernel("dgx-h100", "cudnn");
  const Model m = load_model("deepseek-v3");
  auto expect_refused = [&](const System& s, Method meth, const std::string& words) {
    const Plan p = testing::plan_all_sp(meth, 8, 1 << 16);
    const std::string why = latent_method_error(m, s, p);
    EXPECT_EQ(why.rfind("method: model 'deepseek-v3' has latent attention (kv_lora_rank 512, keys 192 and values 128 "
                        "wide); " + std::string(to_string(meth)) + ": no implementation", 0), 0u) << why;
    EXPECT_NE(why.find(words), std::string::npos) << why;
    const Result r = simulate(m, s, p);
    EXPECT_FALSE(r.valid) << to_string(meth);
    bool listed = false;
    for (const std::string& e : r.errors) listed |= e == why;
    EXPECT_TRUE(listed) << json(r.errors).dump();
  };
  for (Method meth : {Method::ulysses, Method::allgather})
    expect_refused(flash, meth, "with the flash-attention-3 attention kernel");
  for (const System* s : {&flash, &cudnn})
    for (Method meth : {Method::ring, Method::allgather_contiguous})
      expect_refused(*s, meth, "over contiguous shards");
  for (Method meth : {Method::ring_zigzag, Method::hybrid})
    EXPECT_EQ(latent_method_error(m, flash, testing::plan_all_sp(meth, 8, 1 << 16)), "")
        << to_string(meth);
  for (Method meth : {Method::ring_zigzag, Method::hybrid, Method::ulysses, Method::allgather})
    EXPECT_EQ(latent_method_error(m, cudnn, testing::plan_all_sp(meth, 8, 1 << 16)), "")
        << to_string(meth);
  EXPECT_NE(latent_refusal(Method::ulysses, "flash-attention-2").find("MLA CP currently only support KV P2P!"),
            std::string::npos);
  // No context parallelism: the method's name means nothing.
  EXPECT_EQ(latent_method_error(m, flash, plan(Method::ulysses, 8, 1 << 16, 1, 1, 1)), "");
  // Tensor parallelism of the latent projections is not modelled: refused by name.
  const Result tp = simulate(m, cudnn, plan(Method::ring_zigzag, 16, 1 << 16, 8, 1, 8, 2));
  bool named = false;
  for (const std::string& e : tp.errors) named |= e.rfind("tp: tensor parallelism of latent attention", 0) == 0;
  EXPECT_TRUE(named) << json(tp.errors).dump();
}

// Ulysses (cuDNN's kernel) at SP 2 on N = 64, tiny_latent (2 heads: U at most 2): the all-to-all
// sends q (6), k (6) and v (4) of both heads for the rank's 32 tokens and brings the output (4 a
// head) back: q,k,v 2 bytes x 32 x (2 x 6 + 2 x 10) = 2048; out 2 x 32 x 8 = 512. Each rank then
// runs the whole sequence for 1 head: model FLOPs per GPU 81920 / 2, as the ring's.
TEST(Mla, UlyssesBytesByHand) {
  System s = testing::round_system();
  s.gpu.attention_kernel = "cudnn";
  const Model m = tiny_latent();
  const Plan p = plan(Method::ulysses, 2, 64, 2, 2, 1);
  const AttentionShapes a = attention_shapes(m, p);
  EXPECT_EQ(a.qkv_a2a_bytes, 2048.0);
  EXPECT_EQ(a.o_a2a_bytes, 512.0);
  EXPECT_DOUBLE_EQ(attention_layer_cost(m, s, p).model_flops_fwd, 40960.0);
  const Result r = simulate(m, s, p);
  EXPECT_TRUE(r.valid) << json(r.errors).dump();
  // DeepSeek-V3, 128 heads, at U = 2, 4, 8 and 64K: 2 bytes x 65536/U tokens x 128 x (192 + 192 + 128)
  // = 8,589,934,592 / U bytes in, 2 x 65536/U x 128 x 128 = 2,147,483,648 / U out.
  const Model d = load_model("deepseek-v3");
  for (int U : {2, 4, 8}) {
    const AttentionShapes ds = attention_shapes(d, plan(Method::ulysses, U, 1 << 16, U, U, 1));
    EXPECT_EQ(ds.qkv_a2a_bytes, 8'589'934'592.0 / U) << U;
    EXPECT_EQ(ds.o_a2a_bytes, 2'147'483'648.0 / U) << U;
  }
}

TEST(Mla, LatentFieldsAreChecked) {
  const json good = to_json(load_model("deepseek-v3"));
  auto refused = [&](json bad, const std::string& words) {
    try {
      model_from_json(bad, "m");
      ADD_FAILURE() << "accepted " << bad.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  json a = good;
  a.erase("v_head_dim");
  refused(a, "needs all of 'kv_lora_rank', 'qk_rope_head_dim' and 'v_head_dim'");
  json b = good;
  b["qk_rope_head_dim"] = 192;
  refused(b, "qk_rope_head_dim 192 must be less than head_dim 192");
  json c = good;
  c["kv_heads"] = 8;
  refused(c, "kv_heads 8 must equal heads 128");
  json d = to_json(load_model("llama3-8b"));
  d["q_lora_rank"] = 1536;
  refused(d, "q_lora_rank describes latent attention");
  json e = good;
  e["q_lora_rank"] = -1;
  refused(e, "'q_lora_rank' must be a whole number from 0");
}

std::string write_mla_config(const std::string& folder, const json& doc) {
  return testing::write_config("seqpar_mla_test", folder, doc.dump());
}

// DeepSeek-V3's figures (deepseek-ai/DeepSeek-V3 inference/configs/config_671B.json) under the
// keys transformers' DeepseekV3Config reads, as its Hugging Face config.json spells them, with
// quantization_config (FP8 weights, refused) left out.
const json kDeepSeekV3 = json::parse(R"({
  "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "first_k_dense_replace": 3,
  "hidden_size": 7168, "intermediate_size": 18432, "kv_lora_rank": 512, "moe_intermediate_size": 2048,
  "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "num_attention_heads": 128,
  "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128, "num_nextn_predict_layers": 1,
  "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "topk_group": 4,
  "tie_word_embeddings": false, "vocab_size": 129280})");

TEST(Mla, HuggingFaceConfigsReadAsThePreset) {
  const Model h = load_model(write_mla_config("DeepSeek-V3", kDeepSeekV3)), p = load_model("deepseek-v3");
  EXPECT_EQ(h.total_params(), p.total_params());
  EXPECT_EQ(h.active_params(), p.active_params());
  EXPECT_EQ(h.head_dim, 192);
  EXPECT_EQ(h.v_dim(), 128);
  EXPECT_EQ(h.latent.q_rank, 1536);
  EXPECT_EQ(h.latent.kv_rank, 512);
  EXPECT_EQ(h.latent.rope_dim, 64);
  EXPECT_NE(h.sources.at("head_dim").find("qk_nope_head_dim + qk_rope_head_dim"), std::string::npos);
  // DeepSeek-V2 spells it the same; a null q_lora_rank (V2-Lite) projects q directly.
  json v2 = kDeepSeekV3;
  v2["model_type"] = "deepseek_v2";
  v2["q_lora_rank"] = nullptr;
  const Model l = load_model(write_mla_config("DeepSeek-V2-like", v2));
  EXPECT_EQ(l.latent.q_rank, 0);
  EXPECT_EQ(l.attention_weight_params(), p.attention_weight_params() - 7168 * 1536 - 1536 * 128 * 192 +
                                             std::int64_t{7168} * 128 * 192);
  // What the simulator does not model is refused by its key.
  json q = kDeepSeekV3;
  q["quantization_config"] = {{"quant_method", "fp8"}};
  EXPECT_THROW(load_model(write_mla_config("ds-fp8", q)), Error);
  json f = kDeepSeekV3;
  f["moe_layer_freq"] = 2;
  EXPECT_THROW(load_model(write_mla_config("ds-freq", f)), Error);
  json n = kDeepSeekV3;
  n.erase("qk_nope_head_dim");
  EXPECT_THROW(load_model(write_mla_config("ds-no-nope", n)), Error);
}

// A step of DeepSeek-V3 under the methods that serve it: valid, with the expert all-to-alls and
// the ring's exchange on their links.
TEST(Mla, DeepSeekV3SimulatesWithEpAndCp) {
  const System s = load_system("dgx-h100");
  Plan p = plan(Method::ring_zigzag, 256, 1 << 16, 8, 1, 8);
  p.ep = 32;
  const Result r = simulate(load_model("deepseek-v3"), s, p);
  ASSERT_TRUE(r.valid) << json(r.errors).dump();
  EXPECT_GT(r.time.expert_comm, 0);
  EXPECT_GT(r.time.attention_comm, 0);
}

}  // namespace
}  // namespace seqpar::sim

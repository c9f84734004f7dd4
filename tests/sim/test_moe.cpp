// Mixture of experts (README "Mixture of experts"): the presets' parameter counts against the
// published totals, the Hugging Face configs of the MoE families read as the presets, and the
// rules on the experts' fields.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "fixtures.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/comm_cost.hpp"
#include "seqpar/sim/compute_cost.hpp"
#include "seqpar/sim/moe_cost.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/result_json.hpp"
#include "seqpar/sim/simulate.hpp"
#include "seqpar/sim/step_trace.hpp"

namespace seqpar::sim {
namespace {

using nlohmann::json;

// Within `rel` of the published figure.
void expect_near_rel(double got, double published, double rel, const std::string& what) {
  EXPECT_NEAR(got / published, 1.0, rel) << what << ": " << got << " vs " << published;
}

// Counted: every weight matrix (q, k, v, o; each expert's gate, up, down; shared experts; the
// router), the norms, the token embedding and the LM head; not counted: biases, q/k norms, MTP
// layers (model.hpp). "Active": top_k routed experts of each MoE layer instead of all of them.
TEST(Moe, ParameterCountsMatchThePublishedTotals) {
  // Qwen3-30B-A3B (model card: 30.5B total, 3.3B activated). By hand:
  //   attention 2 x 2048 x 4096 + 2 x 2048 x 512 = 18,874,368; experts 128 x 3 x 2048 x 768 =
  //   603,979,776; router 2048 x 128 = 262,144; norms 2 x 2048 -> 623,120,384 per layer x 48 =
  //   29,909,778,432; embeddings 2 x 151936 x 2048 + 2048 (final norm) = 622,331,904 ->
  //   30,532,110,336. Active: minus 48 x 120 x 3 x 2048 x 768 = 27,179,089,920 -> 3,353,020,416.
  const Model q = load_model("qwen3-30b-a3b");
  EXPECT_EQ(q.total_params(), 30'532'110'336);
  EXPECT_EQ(q.active_params(), 3'353'020'416);
  expect_near_rel(double(q.total_params()), 30.5e9, 0.01, "qwen3-30b-a3b total");
  expect_near_rel(double(q.active_params()), 3.3e9, 0.02, "qwen3-30b-a3b active (3.35 rounds to 3.3)");
  // Mixtral 8x7B (Mistral's announcement: 46.7B total, 12.9B per token).
  const Model mx = load_model("mixtral-8x7b");
  expect_near_rel(double(mx.total_params()), 46.7e9, 0.01, "mixtral total");
  expect_near_rel(double(mx.active_params()), 12.9e9, 0.01, "mixtral active");
  // GLM-4.5-Air (model card: 106B total, 12B active). Z.ai's active count leaves the embedding and
  // the LM head out (with them it is 13.4B): the layers' active parameters, 12.18B.
  //   attention 2 x 4096 x 12288 + 2 x 4096 x 1024 = 109,051,904; a MoE layer's active MLP
  //   (8 + 1) x 3 x 4096 x 1408 + router 4096 x 128 = 156,237,824; dense MLP 3 x 4096 x 10944 =
  //   134,479,872; norms 2 x 4096 per layer -> 45 x 265,297,920 + 243,539,968 + 4096 (final
  //   norm) = 12,181,950,464.
  const Model g = load_model("glm-4.5-air");
  expect_near_rel(double(g.total_params()), 106e9, 0.01, "glm-4.5-air total");
  EXPECT_EQ(g.active_params(false), 12'181'950'464);
  expect_near_rel(double(g.active_params(false)), 12e9, 0.016, "glm-4.5-air active without embeddings");
  // gpt-oss-120b (model card: 116.83B total, 5.13B active counting the unembedding but not the
  // token embedding): the layers' active parameters plus one vocab x hidden table.
  const Model o = load_model("gpt-oss-120b");
  expect_near_rel(double(o.total_params()), 116.83e9, 0.01, "gpt-oss-120b total");
  expect_near_rel(double(o.active_params(false)) + double(o.vocab) * o.hidden, 5.13e9, 0.01, "gpt-oss-120b active");
  // A dense model: active = total, one layer's count unchanged by the MoE code.
  const Model l = load_model("llama3-8b");
  EXPECT_FALSE(l.moe());
  EXPECT_EQ(l.active_params(), l.total_params());
  EXPECT_EQ(l.total_params(), 8'030'261'248);  // Llama 3 8B's published count
  EXPECT_EQ(l.mlp_width(), double(l.ffn_hidden));
}

TEST(Moe, PresetsCiteEveryExpertFigure) {
  for (const char* name : {"qwen3-30b-a3b", "mixtral-8x7b", "glm-4.5-air", "gpt-oss-120b"}) {
    const Model m = load_model(name);
    EXPECT_TRUE(m.moe()) << name;
    for (const char* k : {"experts", "experts_per_token", "expert_ffn_hidden", "expert_imbalance"})
      EXPECT_TRUE(m.sources.count(k)) << name << " " << k;
  }
  const Model g = load_model("glm-4.5-air");
  EXPECT_EQ(g.experts.dense_layers, 1);
  EXPECT_EQ(g.moe_layers(), 45);
  EXPECT_EQ(g.experts.shared, 1);
  EXPECT_EQ(g.experts.shared_ffn, 1408);
  // Per-token MLP width: (10944 + 45 x 9 x 1408) / 46 = (10944 + 570240) / 46 = 12634.43...
  EXPECT_DOUBLE_EQ(g.mlp_width(), (10944.0 + 45.0 * 9 * 1408) / 46);
  const Model o = load_model("gpt-oss-120b");
  EXPECT_EQ(o.sliding_layers(), 18);
  EXPECT_EQ(o.sliding_window, 128);
}

// A model's JSON carries its experts and reads back to the same model.
TEST(Moe, ModelJsonRoundTrips) {
  const Model g = load_model("glm-4.5-air");
  const json j = to_json(g);
  EXPECT_EQ(j["experts"], 128);
  EXPECT_EQ(j["dense_layers"], 1);
  EXPECT_EQ(j["active_params"], g.active_params());
  const Model back = model_from_json(j, "round trip");
  EXPECT_EQ(back.total_params(), g.total_params());
  EXPECT_EQ(back.active_params(), g.active_params());
  EXPECT_FALSE(to_json(load_model("llama3-8b")).contains("experts"));  // dense JSON unchanged
}

void expect_refused(json j, const std::string& needle) {
  try {
    model_from_json(j, "moe test");
    ADD_FAILURE() << "accepted " << j.dump();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Moe, ExpertFieldsAreChecked) {
  const json base = to_json(load_model("qwen3-30b-a3b"));
  json j = base;
  j.erase("experts_per_token");
  expect_refused(j, "needs all of 'experts', 'experts_per_token' and 'expert_ffn_hidden'");
  j = base;
  j["experts_per_token"] = 129;
  expect_refused(j, "experts_per_token 129 is more than the 128 experts");
  j = base;
  j["dense_layers"] = 48;
  expect_refused(j, "'dense_layers' must be a whole number from 0 to layers - 1 = 47");
  j = base;
  j["shared_experts"] = 1;
  expect_refused(j, "give both 'shared_experts' and 'shared_expert_ffn_hidden'");
  j = base;
  j["expert_imbalance"] = 0.5;
  expect_refused(j, "'expert_imbalance' must be between 1 and 16");
  json dense = to_json(load_model("llama3-8b"));
  dense["dense_layers"] = 1;
  expect_refused(dense, "describe a mixture of experts");
}

// The published config.json files (their MoE and shape keys) give the presets' models.
std::string write_config(const std::string& folder, const json& doc) {
  return testing::write_config("seqpar_moe_test", folder, doc.dump());
}

// Qwen/Qwen3-30B-A3B config.json (its shape and MoE keys as published).
const json kQwen3_30b = json::parse(R"({
  "architectures": ["Qwen3MoeForCausalLM"], "decoder_sparse_step": 1, "head_dim": 128, "hidden_size": 2048,
  "intermediate_size": 6144, "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe",
  "moe_intermediate_size": 768, "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
  "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4, "output_router_logits": false,
  "router_aux_loss_coef": 0.001, "sliding_window": null, "tie_word_embeddings": false, "use_sliding_window": false,
  "vocab_size": 151936})");

// zai-org/GLM-4.5-Air config.json (its shape and MoE keys as published).
const json kGlm45Air = json::parse(R"({
  "architectures": ["Glm4MoeForCausalLM"], "attention_bias": true, "first_k_dense_replace": 1, "head_dim": 128,
  "hidden_size": 4096, "intermediate_size": 10944, "model_type": "glm4_moe", "moe_intermediate_size": 1408,
  "n_group": 1, "n_routed_experts": 128, "n_shared_experts": 1, "norm_topk_prob": true, "num_attention_heads": 96,
  "num_experts_per_tok": 8, "num_hidden_layers": 46, "num_key_value_heads": 8, "num_nextn_predict_layers": 1,
  "partial_rotary_factor": 0.5, "routed_scaling_factor": 1.0, "tie_word_embeddings": false, "topk_group": 1,
  "use_qk_norm": false, "vocab_size": 151552})");

// mistralai/Mixtral-8x7B-v0.1 config.json (its shape and MoE keys as published).
const json kMixtral = json::parse(R"({
  "architectures": ["MixtralForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336, "model_type": "mixtral",
  "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "num_local_experts": 8, "router_aux_loss_coef": 0.02, "sliding_window": null, "tie_word_embeddings": false,
  "vocab_size": 32000})");

void expect_same_model(const Model& a, const Model& b) {
  EXPECT_EQ(a.total_params(), b.total_params()) << b.name;
  EXPECT_EQ(a.active_params(), b.active_params()) << b.name;
  EXPECT_EQ(a.experts.routed, b.experts.routed);
  EXPECT_EQ(a.experts.top_k, b.experts.top_k);
  EXPECT_EQ(a.experts.ffn, b.experts.ffn);
  EXPECT_EQ(a.experts.shared, b.experts.shared);
  EXPECT_EQ(a.experts.shared_ffn, b.experts.shared_ffn);
  EXPECT_EQ(a.experts.dense_layers, b.experts.dense_layers);
  EXPECT_EQ(a.layer_kinds, b.layer_kinds);
}

TEST(Moe, HuggingFaceConfigsReadAsThePresets) {
  expect_same_model(load_model(write_config("Qwen3-30B-A3B", kQwen3_30b)), load_model("qwen3-30b-a3b"));
  expect_same_model(load_model(write_config("Mixtral-8x7B-v0.1", kMixtral)), load_model("mixtral-8x7b"));
  const Model g = load_model(write_config("GLM-4.5-Air", kGlm45Air));
  expect_same_model(g, load_model("glm-4.5-air"));
  EXPECT_EQ(g.sources.at("dense_layers").find("first_k_dense_replace") != std::string::npos, true);
  // Layouts seqpar does not model are refused by their key.
  json q = kQwen3_30b;
  q["mlp_only_layers"] = {3, 7};
  EXPECT_THROW(load_model(write_config("q-mlp-only", q)), Error);
  q = kQwen3_30b;
  q["decoder_sparse_step"] = 2;
  EXPECT_THROW(load_model(write_config("q-sparse-step", q)), Error);
  json gl = kGlm45Air;
  gl["first_k_dense_replace"] = 46;
  EXPECT_THROW(load_model(write_config("glm-all-dense", gl)), Error);
  // A deepseek_v3 config without its latent-attention keys (qk_nope_head_dim, ...) is refused
  // (test_mla.cpp reads the real one).
  json ds = kGlm45Air;
  ds["model_type"] = "deepseek_v3";
  EXPECT_THROW(load_model(write_config("deepseek", ds)), Error);
}

// The MoE layer's FLOPs per token by hand: the active experts, the shared ones, the router.
TEST(Moe, MlpFlopsAreTheActiveExpertsAndTheRouter) {
  // Qwen3-30B-A3B, every layer MoE: 2 x 3 x 2048 x (8 x 768) + 2 x 2048 x 128 = 75,497,472 +
  // 524,288 = 76,021,760 per token.
  const Model q = load_model("qwen3-30b-a3b");
  EXPECT_DOUBLE_EQ(moe_mlp_flops(q, 1000), 1000 * 76'021'760.0);
  EXPECT_DOUBLE_EQ(mlp_gemm_flops(q, 1000), moe_mlp_flops(q, 1000));  // what MFU counts
  // GLM-4.5-Air: layer 0 dense, 2 x 3 x 4096 x 10944 = 268,959,744; layers 1-45 MoE,
  // 2 x 3 x 4096 x (8 + 1) x 1408 + 2 x 4096 x 128 = 311,427,072 + 1,048,576 = 312,475,648;
  // the mean over 46 layers.
  const Model g = load_model("glm-4.5-air");
  EXPECT_DOUBLE_EQ(moe_mlp_flops(g, 1), (268'959'744.0 + 45 * 312'475'648.0) / 46);
  // A dense model keeps its MLP FLOPs: 2 x 3 x 4096 x 14336 per token for Llama 3 8B.
  EXPECT_DOUBLE_EQ(mlp_gemm_flops(load_model("llama3-8b"), 1), 2.0 * 3 * 4096 * 14336);
}

// The dispatch and combine all-to-alls, their bytes on their links, and the busiest rank's load.
TEST(Moe, ExpertAllToAllsByHand) {
  const Model q = load_model("qwen3-30b-a3b");
  const System s = load_system("hgx-h200");
  Plan p = testing::plan(Method::ulysses, 8, 65536, 8, 8, 1);
  p.ep = 8;
  // T = 65536 / 8 = 8192 tokens per rank; a call's buffer 8192 x top-k 8 x 2048 x 2 bytes.
  const MoeCost c = moe_layer_cost(q, s, p, 8192);
  EXPECT_DOUBLE_EQ(c.all_to_all_bytes, 8192.0 * 8 * 2048 * 2);  // 268,435,456
  EXPECT_DOUBLE_EQ(c.all_to_all_s, collective_time(s, Collective::all_to_all, c.all_to_all_bytes, place_group(s, 8, 1, 8)));
  // 2 per pass in each of the 48 MoE layers (every layer): the per-layer mean is 2 x the call.
  EXPECT_DOUBLE_EQ(c.all_to_all_fwd_s, 2 * c.all_to_all_s);
  // Rows per expert: 8 ranks x 8192 tokens x 8 / 128 experts = 4096; at ep 1, 512.
  EXPECT_DOUBLE_EQ(c.rows_per_expert, 4096);
  Plan one = p;
  one.ep = 1;
  EXPECT_DOUBLE_EQ(moe_layer_cost(q, s, one, 8192).rows_per_expert, 512);
  EXPECT_DOUBLE_EQ(moe_layer_cost(q, s, one, 8192).all_to_all_s, 0);
  // The step: 48 layers x (2 + 2) calls, all exposed, in the comm totals.
  const Result r = simulate(q, s, p);
  ASSERT_TRUE(r.valid) << r.errors.front();
  EXPECT_NEAR(r.time.expert_comm, 48 * 4 * c.all_to_all_s, 1e-12);
  EXPECT_NEAR(r.time.exposed_comm, r.time.exposed_attention_comm + r.time.exposed_dp_comm + r.time.tp_comm + r.time.expert_comm,
              1e-12);
  // The busiest rank: 16 experts per rank, one at 1.2 x the mean -> (1.2 + 15) / 16 = 1.0125.
  Model skew = q;
  skew.experts.imbalance = 1.2;
  EXPECT_DOUBLE_EQ(moe_layer_cost(skew, s, p, 8192).load, 1.2 / 16 + 15.0 / 16);
  EXPECT_DOUBLE_EQ(moe_layer_cost(skew, s, one, 8192).load, 1.0);  // one rank holds every expert
  EXPECT_GT(moe_layer_cost(skew, s, p, 8192).mlp_fwd_s, c.mlp_fwd_s);
  // GLM-4.5-Air: layer 0 has no experts, so the per-layer mean is 45/46 of a MoE layer's.
  const Model g = load_model("glm-4.5-air");
  const MoeCost gc = moe_layer_cost(g, s, p, 8192);
  EXPECT_DOUBLE_EQ(gc.all_to_all_fwd_s, 2 * gc.all_to_all_s * 45 / 46);
  EXPECT_DOUBLE_EQ(gc.all_to_all_bytes, 8192.0 * 8 * 4096 * 2);
}

// Expert weights 1/ep on each rank; ZeRO's shards the same share at every ep.
TEST(Moe, ExpertWeightsSplitOverEp) {
  const Model q = load_model("qwen3-30b-a3b");
  const System s = load_system("hgx-h200");
  Plan p = testing::plan(Method::ulysses, 8, 65536, 8, 8, 1);
  p.mem.zero = 1;
  const Result one = simulate(q, s, p);
  p.ep = 8;
  const Result eight = simulate(q, s, p);
  ASSERT_TRUE(one.valid && eight.valid);
  // Routed experts 48 x 128 x 3 x 2048 x 768 = 28,991,029,248 of 30,532,110,336: at ep 8 a rank
  // holds 1,541,081,088 + 28,991,029,248 / 8 = 5,164,959,744 (bf16 weights and gradients, kept
  // whole under ZeRO-1); the optimizer states are ZeRO-1's shard of the whole model either way.
  EXPECT_DOUBLE_EQ(params_per_tp_rank(q, p), 5'164'959'744.0);
  EXPECT_NEAR(eight.memory.peak.parameters / one.memory.peak.parameters, 5'164'959'744.0 / 30'532'110'336.0, 1e-12);
  EXPECT_DOUBLE_EQ(eight.memory.peak.optimizer_states, one.memory.peak.optimizer_states);
  // The dispatch buffers: 8192 x 8 x (2048 x 2 + 4 + 4) bytes per MoE layer.
  EXPECT_DOUBLE_EQ(moe_dispatch_bytes_per_layer(q, p, 8192), 8192.0 * 8 * (2048 * 2 + 8));
}

TEST(Moe, ExpertParallelRules) {
  const System s = load_system("hgx-h200");
  Plan p = testing::plan(Method::ulysses, 16, 65536, 8, 8, 1);
  p.ep = 16;
  // Mixtral's 8 experts cannot split 16 ways; a dense model has none to split.
  Result r = simulate(load_model("mixtral-8x7b"), s, p);
  ASSERT_FALSE(r.valid);
  EXPECT_NE(r.errors.front().find("the 8 routed experts of model 'mixtral-8x7b' are not divisible by ep 16"),
            std::string::npos) << r.errors.front();
  p.ep = 2;
  r = simulate(load_model("llama3-8b"), s, p);
  ASSERT_FALSE(r.valid);
  EXPECT_NE(r.errors.front().find("model 'llama3-8b' has no experts"), std::string::npos) << r.errors.front();
  // The search: a MoE model's structures come once per EP degree; a dense model's once.
  SearchSpace space;
  space.tp = {1};
  space.sp = {8};
  space.methods = {Method::ulysses};
  const std::vector<Plan> moe = structures(load_model("qwen3-30b-a3b"), s, 8, 65536, space);
  std::vector<int> eps;
  for (const Plan& x : moe) eps.push_back(x.ep);
  EXPECT_EQ(eps, (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(structures(load_model("llama3-8b"), s, 8, 65536, space).size(), 1u);
  EXPECT_EQ(ep_degrees(load_model("mixtral-8x7b"), 64, 1), (std::vector<int>{1, 2, 4, 8}));
}

// The result's JSON: the experts beside the attention on their links for a MoE model; a dense
// model's document has neither key.
TEST(Moe, ResultJsonShowsTheExpertAllToAllBesideTheAttention) {
  const System s = load_system("hgx-h200");
  Plan p = testing::plan(Method::ulysses, 8, 65536, 8, 8, 1);
  p.ep = 8;
  const Model q = load_model("qwen3-30b-a3b");
  const json j = to_json(q, s, simulate(q, s, p));
  ASSERT_TRUE(j.contains("experts"));
  EXPECT_EQ(j["experts"]["ep"], 8);
  ASSERT_EQ(j["experts"]["links"].size(), 2u);
  EXPECT_NE(j["experts"]["links"][0]["what"].get<std::string>().find("attention"), std::string::npos);
  EXPECT_NE(j["experts"]["links"][1]["what"].get<std::string>().find("experts"), std::string::npos);
  EXPECT_GT(j["time"]["expert_comm_s"].get<double>(), 0);
  EXPECT_EQ(j["plan"]["ep"], 8);
  p.ep = 1;
  const Model l = load_model("llama3-8b");
  const json d = to_json(l, s, simulate(l, s, p));
  EXPECT_FALSE(d.contains("experts"));
  EXPECT_FALSE(d["time"].contains("expert_comm_s"));
  EXPECT_FALSE(d["plan"].contains("ep"));
}

// The step timeline draws the expert all-to-alls on their own stream (only where a plan has them)
// and still adds up to the step time (step_trace checks it and throws otherwise).
TEST(Moe, StepTraceDrawsTheExpertAllToAlls) {
  const System s = load_system("hgx-h200");
  Plan p = testing::plan(Method::ulysses, 8, 65536, 8, 8, 1);
  p.ep = 8;
  p.mem.checkpoint = Checkpoint::full;
  const Result r = simulate(load_model("qwen3-30b-a3b"), s, p);
  ASSERT_TRUE(r.valid);
  const std::string text = step_trace(r, 1, "moe").to_json().dump();
  EXPECT_NE(text.find("expert all-to-all (dispatch, combine)"), std::string::npos);
  EXPECT_NE(text.find("L0 recompute expert dispatch and combine"), std::string::npos);
  p.ep = 1;
  const std::string one = step_trace(simulate(load_model("qwen3-30b-a3b"), s, p), 1, "moe").to_json().dump();
  EXPECT_EQ(one.find("expert all-to-all"), std::string::npos);
}

}  // namespace
}  // namespace seqpar::sim

// Mixture of experts (README "Mixture of experts"): the presets' parameter counts against the
// published totals, the Hugging Face configs of the MoE families read as the presets, and the
// rules on the experts' fields.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "fixtures.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/result_json.hpp"
#include "seqpar/sim/simulate.hpp"

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
  const auto dir = std::filesystem::temp_directory_path() / "seqpar_moe_test" / folder;
  std::filesystem::create_directories(dir);
  const auto path = dir / "config.json";
  std::ofstream(path) << doc.dump();
  return path.string();
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
  // DeepSeek-V3's latent attention is not modelled: its family is refused.
  json ds = kGlm45Air;
  ds["model_type"] = "deepseek_v3";
  EXPECT_THROW(load_model(write_config("deepseek", ds)), Error);
}

}  // namespace
}  // namespace seqpar::sim

// Hugging Face config.json files as --model: the published Llama-3-8B and Qwen2-7B configs give
// the same simulation as the built-in presets written from them; GPT-2 names are read; what the
// simulator does not model is refused with the field named.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_runner.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/result_json.hpp"
#include "seqpar/sim/simulate.hpp"
#include "fixtures.hpp"

namespace seqpar::sim {
namespace {

using nlohmann::json;

// meta-llama/Meta-Llama-3-8B config.json as published.
const char* kLlama3_8b = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
  "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 500000.0,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.40.0.dev0",
  "use_cache": true, "vocab_size": 128256})";

// Qwen/Qwen2-7B config.json as published: a sliding_window width with use_sliding_window false.
const char* kQwen2_7b = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 3584, "initializer_range": 0.02,
  "intermediate_size": 18944, "max_position_embeddings": 131072, "max_window_layers": 28,
  "model_type": "qwen2", "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "transformers_version": "4.37.2", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 152064})";

// A fresh folder per test holding <name>/config.json, as a downloaded model is laid out.
std::string write_config(const std::string& folder, const std::string& text) {
  return testing::write_config("seqpar_hf_test", folder, text);
}

std::string with(const char* base, const std::string& key, const std::string& value) {
  json j = json::parse(base);
  j[key] = json::parse(value);
  return j.dump();
}

// The simulation minus the model's name and provenance, which differ by design.
json comparable(const Model& m, const System& s, const Plan& p) {
  json j = to_json(m, s, simulate(m, s, p));
  j.erase("name");
  j["model"].erase("name");
  j["model"].erase("sources");
  return j;
}

void expect_same_simulation(const std::string& config, const char* preset) {
  const Model from_config = load_model(config);
  const Model from_preset = load_model(preset);
  const System s = load_system("dgx-h100");
  for (const Plan& p : {testing::plan(Method::ulysses, 8, 1 << 17, 4, 4, 1),
                        testing::plan(Method::ring, 8, 1 << 17, 8, 1, 8),
                        testing::plan(Method::hybrid, 16, 1 << 18, 8, 4, 2)}) {
    const json a = comparable(from_config, s, p), b = comparable(from_preset, s, p);
    EXPECT_EQ(a, b) << preset << " " << to_string(p.method) << "\n" << a.dump(1) << "\n" << b.dump(1);
    EXPECT_EQ(a["valid"], true) << a.dump(1);
  }
}

void expect_refused(const std::string& text, const std::string& field) {
  const std::string path = write_config("refused", text);
  try {
    load_model(path);
    FAIL() << "accepted a config with " << field;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'" + field + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
  }
}

TEST(HfConfig, Llama3_8bConfigSimulatesAsThePreset) {
  expect_same_simulation(write_config("Meta-Llama-3-8B", kLlama3_8b), "llama3-8b");
}

TEST(HfConfig, Qwen2_7bConfigSimulatesAsThePreset) {
  expect_same_simulation(write_config("Qwen2-7B", kQwen2_7b), "qwen2-7b");
}

TEST(HfConfig, EachFigureCitesTheFileAndKey) {
  const std::string path = write_config("Meta-Llama-3-8B", kLlama3_8b);
  const Model m = load_model(path);
  EXPECT_EQ(m.name, "Meta-Llama-3-8B");  // the folder, as downloaded
  EXPECT_EQ(m.sources.at("hidden"), path + ": hidden_size");
  EXPECT_EQ(m.sources.at("kv_heads"), path + ": num_key_value_heads");
  EXPECT_EQ(m.sources.at("ffn_hidden"), path + ": intermediate_size");
  EXPECT_NE(m.sources.at("head_dim").find("hidden_size / num_attention_heads"), std::string::npos);
  EXPECT_EQ(to_json(m)["sources"]["layers"], path + ": num_hidden_layers");
}

TEST(HfConfig, HeadDimAndMissingKvHeadsAndTiedEmbeddings) {
  // Qwen3 gives head_dim explicitly, not hidden / heads (Qwen3-4B: 2560 / 32 = 80, head_dim 128).
  json q3 = json::parse(kQwen2_7b);
  q3.erase("use_sliding_window");
  q3.erase("sliding_window");
  q3.update({{"model_type", "qwen3"}, {"hidden_size", 2560}, {"num_attention_heads", 32},
             {"num_key_value_heads", 8}, {"head_dim", 128}, {"tie_word_embeddings", true}});
  const Model m = load_model(write_config("Qwen3-4B", q3.dump()));
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_TRUE(m.tied_embeddings);
  json l = json::parse(kLlama3_8b);
  l.erase("num_key_value_heads");
  l.erase("tie_word_embeddings");
  const Model mha = load_model(write_config("llama-mha", l.dump()));
  EXPECT_EQ(mha.kv_heads, 32);
  EXPECT_FALSE(mha.tied_embeddings);  // LlamaConfig's default
}

TEST(HfConfig, Gpt2StyleNamesAndGeluMlp) {
  const char* gpt2 = R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": null,
                          "n_positions": 1024, "vocab_size": 50257, "activation_function": "gelu_new"})";
  const std::string path = write_config("gpt2", gpt2);
  const Model m = load_model(path);
  EXPECT_EQ(m.layers, 12);
  EXPECT_EQ(m.hidden, 768);
  EXPECT_EQ(m.heads, 12);
  EXPECT_EQ(m.kv_heads, 12);
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_EQ(m.ffn_hidden, 4 * 768);
  EXPECT_EQ(m.vocab, 50257);
  EXPECT_EQ(m.mlp, MlpKind::gelu);
  EXPECT_EQ(m.norm, NormKind::layernorm);
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_EQ(m.positions, PositionKind::learned);  // GPT-2's wpe table, no RoPE
  EXPECT_EQ(m.sources.at("layers"), path + ": n_layer");
  EXPECT_EQ(load_model(write_config("gpt2-inner", with(gpt2, "n_inner", "1000"))).ffn_hidden, 1000);
  const char* neox = R"({"model_type": "gpt_neox", "hidden_size": 2048, "intermediate_size": 8192,
                          "num_hidden_layers": 24, "num_attention_heads": 16, "vocab_size": 50304,
                          "tie_word_embeddings": false, "use_parallel_residual": true})";
  const Model n = load_model(write_config("pythia", neox));
  EXPECT_EQ(n.mlp, MlpKind::gelu);
  EXPECT_EQ(n.positions, PositionKind::rope);  // GPT-NeoX rotates (part of) each head
  EXPECT_EQ(n.head_dim, 128);
  EXPECT_EQ(n.ffn_hidden, 8192);
}

TEST(HfConfig, WhatIsNotModelledIsRefusedWithTheFieldNamed) {
  expect_refused(with(kLlama3_8b, "num_local_experts", "8"), "num_local_experts");  // Mixtral
  expect_refused(with(kQwen2_7b, "num_experts", "60"), "num_experts");              // Qwen2-MoE
  expect_refused(with(kLlama3_8b, "n_routed_experts", "64"), "n_routed_experts");  // DeepSeek
  expect_refused(with(kLlama3_8b, "kv_lora_rank", "512"), "kv_lora_rank");
  expect_refused(with(kLlama3_8b, "quantization_config", R"({"quant_method": "awq"})"), "quantization_config");
  // A window in a family without sliding layers (Llama's attention has none).
  expect_refused(with(kLlama3_8b, "sliding_window", "4096"), "sliding_window");
  // Qwen's switch on, with no max_window_layers to say where sliding starts.
  json no_from = json::parse(with(kQwen2_7b, "use_sliding_window", "true"));
  no_from.erase("max_window_layers");
  expect_refused(no_from.dump(), "max_window_layers");
  // A string is no switch ("false" read as set, then reported as true).
  try {
    load_model(write_config("string-switch", with(kQwen2_7b, "use_sliding_window", "\"false\"")));
    ADD_FAILURE() << "accepted use_sliding_window \"false\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("field 'use_sliding_window' must be true, false or null (got \"false\")"),
              std::string::npos)
        << e.what();
  }
  expect_refused(with(kQwen2_7b, "layer_types", R"(["full_attention", "sliding_attention"])"), "layer_types");
  expect_refused(with(kQwen2_7b, "layer_types", json(std::vector<std::string>(28, "linear_attention")).dump()),
                 "layer_types");
  // Qwen3-Next is read (test_linear_attention.cpp); a config without its gated DeltaNet's keys is not.
  expect_refused(with(kLlama3_8b, "model_type", "\"qwen3_next\""), "linear_num_key_heads");
  // A family seqpar reads, missing the keys it needs (DeepSeek-V3's latent attention: test_mla.cpp).
  expect_refused(with(kLlama3_8b, "model_type", "\"deepseek_v3\""), "qk_nope_head_dim");
  expect_refused(with(kLlama3_8b, "hidden_size", "\"4096\""), "hidden_size");
  expect_refused(with(kLlama3_8b, "num_hidden_layers", "0"), "num_hidden_layers");
  json missing = json::parse(kLlama3_8b);
  missing.erase("vocab_size");
  expect_refused(missing.dump(), "vocab_size");
  // Off switches are not refusals: a null window, zero experts.
  EXPECT_NO_THROW(load_model(write_config("ok", with(with(kLlama3_8b, "model_type", "\"mistral\"").c_str(),
                                                              "sliding_window", "null"))));
  EXPECT_NO_THROW(load_model(write_config("ok", with(kLlama3_8b, "num_experts", "0"))));
}

// Sliding-window layers as the families spell them (README "Attention kinds").
TEST(HfConfig, SlidingWindowLayersAreRead) {
  // Mistral: a non-null sliding_window slides every layer; it is the mistral-7b-v0.1 preset's.
  const Model mi = load_model(write_config("Mistral-7B-v0.1", with(with(kLlama3_8b, "model_type", "\"mistral\"").c_str(),
                                                                   "sliding_window", "4096")));
  EXPECT_EQ(mi.sliding_layers(), 32);
  EXPECT_EQ(mi.sliding_window, 4096);
  EXPECT_NE(mi.sources.at("layer_types").find("every layer"), std::string::npos);
  // Qwen2 with use_sliding_window: layers from max_window_layers (28 of 28: none) slide.
  EXPECT_EQ(load_model(write_config("q-none", with(kQwen2_7b, "use_sliding_window", "true"))).sliding_layers(), 0);
  EXPECT_TRUE(load_model(write_config("q-none", with(kQwen2_7b, "use_sliding_window", "true"))).layer_kinds.empty());
  const Model q = load_model(write_config("q-some", with(with(kQwen2_7b, "use_sliding_window", "true").c_str(),
                                                         "max_window_layers", "20")));
  EXPECT_EQ(q.sliding_layers(), 8);
  EXPECT_EQ(q.layer_kinds[19], AttentionKind::full);
  EXPECT_EQ(q.layer_kinds[20], AttentionKind::sliding);
  EXPECT_EQ(q.sliding_window, 131072);
  // Gemma 3 (multimodal config, text model under text_config): the gemma3-27b preset's figures.
  const char* gemma = R"({"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
    "text_config": {"head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504, "model_type": "gemma3_text",
      "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16, "query_pre_attn_scalar": 168,
      "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024, "vocab_size": 262208},
    "vision_config": {"hidden_size": 1152}})";
  const Model g = load_model(write_config("gemma-3-27b-it", gemma)), preset = load_model("gemma3-27b");
  EXPECT_EQ(g.name, "gemma-3-27b-it");
  EXPECT_EQ(g.layer_kinds, preset.layer_kinds);
  EXPECT_EQ(g.sliding_window, 1024);
  EXPECT_EQ(g.hidden, preset.hidden);
  EXPECT_EQ(g.ffn_hidden, preset.ffn_hidden);
  EXPECT_EQ(g.kv_heads, preset.kv_heads);
  EXPECT_TRUE(g.tied_embeddings);
  EXPECT_NE(g.sources.at("layer_types").find("default 6"), std::string::npos);
  // layer_types wins over the family's rule.
  std::vector<std::string> types(32, "full_attention");
  types[0] = "sliding_attention";
  const Model lt = load_model(write_config(
      "lt", with(with(with(kLlama3_8b, "model_type", "\"mistral\"").c_str(), "sliding_window", "64").c_str(),
                 "layer_types", json(types).dump())));
  EXPECT_EQ(lt.sliding_layers(), 1);
}

TEST(HfConfig, TheCliTakesAConfigAsModelAndShowsTheSources) {
  const std::string path = write_config("Qwen2-7B", kQwen2_7b);
  const auto r = ::seqpar::testing::seqpar("simulate --model '" + path + "' --seq-len 64K --gpus 8 --sp 4 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = r.json();
  EXPECT_EQ(j["model"]["sources"]["vocab"], path + ": vocab_size") << r.out;
  EXPECT_EQ(j["model"]["kv_heads"], 4);
  const auto bad = ::seqpar::testing::seqpar("simulate --model '" + write_config("moe", with(kQwen2_7b, "num_experts", "60")) +
                                   "' --seq-len 64K --gpus 8 --sp 4");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("num_experts"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace seqpar::sim

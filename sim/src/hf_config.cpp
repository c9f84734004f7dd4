#include "seqpar/sim/hf_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/sim/limits.hpp"

namespace seqpar::sim {

namespace {

using nlohmann::json;

// How a family's config spells the shapes, and which blocks it has.
struct Family {
  const char* model_type;
  bool gpt2_names;      // n_embd, n_layer, n_head, n_inner instead of hidden_size, ...
  bool gated_mlp;       // SwiGLU (gate, up, down) vs a plain GELU MLP (up, down)
  bool grouped_query;   // num_key_value_heads exists in the family
  bool tied_default;    // tie_word_embeddings when the config leaves it out (transformers' default)
  bool learned_positions;  // a learned position table (GPT-2's wpe) instead of rotary embeddings
  bool experts = false;    // a mixture-of-experts family (read_experts)
  bool latent = false;     // latent attention (read_latent): DeepSeek-V2/V3
  // Attention sinks in every layer (model.hpp: Model::attention_sinks), which no config key states:
  // transformers' GptOssAttention.__init__ creates `self.sinks = nn.Parameter(torch.empty(
  // config.num_attention_heads))` unconditionally, and every GptOssDecoderLayer has one
  // (huggingface/transformers at 00d4b3d2142c, src/transformers/models/gpt_oss/modeling_gpt_oss.py).
  bool sinks = false;
};

constexpr Family kFamilies[] = {
    {"llama", false, true, true, false, false},   {"mistral", false, true, true, false, false},
    // Gemma 3's text model: a gated GELU MLP (gate, up, down: SwiGLU's shapes), tied by default.
    {"gemma3_text", false, true, true, true, false},
    {"qwen2", false, true, true, false, false},   {"qwen3", false, true, true, false, false},
    // Mixtures of experts (read_experts); gpt-oss's attention sinks are read (sinks), its biases are not modelled.
    {"qwen3_moe", false, true, true, false, false, true}, {"mixtral", false, true, true, false, false, true},
    // Qwen3-Next: experts as Qwen3-MoE's with one shared expert, gated DeltaNet layers (read_attention_kinds).
    {"qwen3_next", false, true, true, false, false, true},
    {"glm4_moe", false, true, true, false, false, true},  {"gpt_oss", false, true, true, false, false, true, false, true},
    // DeepSeek-V2 and V3: latent attention (read_latent) and experts read as GLM-4.5's (same keys).
    {"deepseek_v2", false, true, true, false, false, true, true}, {"deepseek_v3", false, true, true, false, false, true, true},
    {"gpt_neox", false, false, false, false, false},  // rotary (on rotary_pct of head_dim)
    // GPT-2 ties its LM head to the token embedding unless the config says otherwise.
    {"gpt2", true, false, false, true, true},
};

bool present(const json& doc, const char* key) {
  auto it = doc.find(key);
  return it != doc.end() && !it->is_null();
}

// Keys whose mere (non-null, non-zero, non-false) presence means a cost seqpar does not model.
struct Unmodelled {
  const char* key;
  const char* why;
};
constexpr Unmodelled kUnmodelled[] = {
    {"num_local_experts", "a mixture of experts"},
    {"num_experts", "a mixture of experts"},
    {"n_routed_experts", "a mixture of experts"},
    {"n_shared_experts", "a mixture of experts"},
    {"num_experts_per_tok", "a mixture of experts"},
    {"moe_intermediate_size", "a mixture of experts"},
    {"kv_lora_rank", "multi-head latent attention"},
    {"q_lora_rank", "multi-head latent attention"},
    {"num_nextn_predict_layers", "multi-token prediction layers"},
    {"quantization_config", "quantized weights (the simulator counts bf16 weights)"},
    {"add_cross_attention", "cross attention (an encoder-decoder)"},
    {"is_encoder_decoder", "an encoder-decoder"},
};

bool set(const json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  return true;  // an object or string: configured
}

// The keys a MoE family reads itself (read_experts) instead of refusing them.
bool read_by_moe_family(std::string_view key) {
  for (const char* k : {"num_local_experts", "num_experts", "n_routed_experts", "n_shared_experts", "num_experts_per_tok",
                        "moe_intermediate_size"})
    if (key == k) return true;
  return false;
}

// The families whose experts are spelt as GLM-4.5's (n_routed_experts, moe_intermediate_size,
// n_shared_experts, first_k_dense_replace) and whose multi-token-prediction layers are left out
// with a note (read_experts), not refused.
bool glm_style_experts(const Family& fam) {
  const std::string_view t = fam.model_type;
  return t == "glm4_moe" || t == "deepseek_v2" || t == "deepseek_v3";
}

void refuse_unmodelled(const json& doc, const Family& fam, const std::string& file) {
  for (const auto& u : kUnmodelled) {
    if (fam.experts && read_by_moe_family(u.key)) continue;
    if (glm_style_experts(fam) && std::string_view(u.key) == "num_nextn_predict_layers") continue;
    if (fam.latent && (std::string_view(u.key) == "kv_lora_rank" || std::string_view(u.key) == "q_lora_rank")) continue;
    auto it = doc.find(u.key);
    if (it != doc.end() && set(*it))
      throw Error(fmt::format("{}: field '{}' = {} describes {}, which seqpar does not model", file, u.key,
                              dump_json(*it, -1), u.why));
  }
  // layer_types: a list of the kinds seqpar models (read_attention_kinds), checked before the sizes.
  if (auto it = doc.find("layer_types"); it != doc.end() && !it->is_null()) {
    if (!it->is_array())
      throw Error(fmt::format("{}: field 'layer_types' must be a list with one attention type per layer (got {})", file,
                              dump_json(*it, -1)));
    const bool linear = std::string_view(fam.model_type) == "qwen3_next";  // its gated DeltaNet layers
    for (const auto& t : *it)
      if (!t.is_string() || (t.get<std::string>() != "full_attention" && t.get<std::string>() != "sliding_attention" &&
                             !(linear && t.get<std::string>() == "linear_attention")))
        throw Error(fmt::format("{}: field 'layer_types' has {}: only full_attention and sliding_attention layers are "
                                "modelled{}", file, dump_json(t, -1),
                                linear ? ", and linear_attention" : " (linear_attention: in the qwen3_next family)"));
  }
  // A switch is true, false or null: "false" (a string) would otherwise read as set.
  if (auto it = doc.find("use_sliding_window"); it != doc.end() && !it->is_boolean() && !it->is_null())
    throw Error(fmt::format("{}: field 'use_sliding_window' must be true, false or null (got {})", file,
                            dump_json(*it, -1)));
}

// layer_types, when given, names every layer once: a list of another length describes another model.
void check_layer_types_length(const json& doc, const char* k_layers, std::int64_t layers, const std::string& file) {
  auto it = doc.find("layer_types");
  if (it == doc.end() || !it->is_array() || static_cast<std::int64_t>(it->size()) == layers) return;
  throw Error(fmt::format("{}: field 'layer_types' lists {} layers, but '{}' is {}: give one type per layer", file,
                          it->size(), k_layers, layers));
}

// A positive whole number under `key`, at most `hi` (the seqpar limit of the size it becomes,
// named here with the config's own key), as a figure citing the file and key.
json size_figure(const json& doc, const char* key, const std::string& file, int hi) {
  auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) throw Error(fmt::format("{}: missing field '{}'", file, key));
  if (!it->is_number() || it->is_boolean())
    throw Error(fmt::format("{}: field '{}' must be a number (got {})", file, key, dump_json(*it, -1)));
  const double x = it->get<double>();
  if (!std::isfinite(x) || x < 1 || x != std::floor(x))
    throw Error(fmt::format("{}: field '{}' must be a positive whole number (got {})", file, key, dump_json(*it, -1)));
  if (x > hi) throw Error(fmt::format("{}: field '{}': {} is above the limit of {}", file, key, format_number(x), hi));
  return {{"value", static_cast<std::int64_t>(x)}, {"source", fmt::format("{}: {}", file, key)}};
}

bool flag(const json& doc, const char* key, bool fallback, const std::string& file) {
  auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw Error(fmt::format("{}: field '{}' must be true or false", file, key));
  return it->get<bool>();
}

// The model's name: the config's _name_or_path, else its folder ("…/Meta-Llama-3-8B/config.json"),
// else the file's stem.
std::string model_name(const json& doc, const std::string& file) {
  if (auto it = doc.find("_name_or_path"); it != doc.end() && it->is_string() && !it->get<std::string>().empty())
    return it->get<std::string>();
  const std::filesystem::path p(file);
  if (p.stem() == "config" && p.has_parent_path() && !p.parent_path().filename().empty())
    return p.parent_path().filename().string();
  return p.stem().string();
}

// Attention kinds (model.hpp) as the families spell them, into the preset's "sliding_window" and
// "layer_types" (presets.cpp): layer_types when the config lists them; else Gemma 3's
// sliding_window_pattern (transformers' Gemma3TextConfig: layer i full when (i + 1) % P == 0, P = 6
// when the config leaves it out); Qwen2/Qwen3's use_sliding_window, sliding from layer
// max_window_layers on (Qwen2Attention); Mistral's sliding_window on every layer. Other families
// have no window. A model whose every layer is full gets neither key: the plain model.
void read_attention_kinds(const json& doc, const Family& fam, std::int64_t layers, const std::string& file, json& p) {
  const std::string type = fam.model_type;
  std::vector<std::string> kinds;
  std::string how;
  if (auto it = doc.find("layer_types"); it != doc.end() && !it->is_null()) {
    for (const auto& t : *it) kinds.push_back(t.get<std::string>());  // checked by refuse_unmodelled
    how = fmt::format("{}: layer_types", file);
  } else if (type == "gemma3_text") {
    json pattern = {{"value", 6}};
    if (present(doc, "sliding_window_pattern")) pattern = size_figure(doc, "sliding_window_pattern", file, limits::kMaxLayers);
    const std::int64_t n = pattern["value"].get<std::int64_t>();
    for (std::int64_t i = 0; i < layers; ++i) kinds.push_back((i + 1) % n == 0 ? "full_attention" : "sliding_attention");
    how = present(doc, "sliding_window_pattern")
              ? fmt::format("{}: sliding_window_pattern = {} (layer i full when (i + 1) % {} == 0)", file, n, n)
              : fmt::format("{}: no sliding_window_pattern; Gemma3TextConfig's default 6 (layer i full when (i + 1) % 6 "
                            "== 0)", file);
  } else if (type == "qwen3_next") {
    // Qwen3NextConfig: without layer_types, layer i is full when (i + 1) % full_attention_interval
    // == 0 (4 when the config leaves it out), else linear_attention.
    json interval = {{"value", 4}};
    if (present(doc, "full_attention_interval"))
      interval = size_figure(doc, "full_attention_interval", file, limits::kMaxLayers);
    const std::int64_t n = interval["value"].get<std::int64_t>();
    for (std::int64_t i = 0; i < layers; ++i) kinds.push_back((i + 1) % n == 0 ? "full_attention" : "linear_attention");
    how = present(doc, "full_attention_interval")
              ? fmt::format("{}: full_attention_interval = {} (layer i full when (i + 1) % {} == 0)", file, n, n)
              : fmt::format("{}: no full_attention_interval; Qwen3NextConfig's default 4", file);
  } else if (type == "qwen2" || type == "qwen3" || type == "qwen3_moe") {
    if (flag(doc, "use_sliding_window", false, file)) {
      const std::int64_t from = size_figure(doc, "max_window_layers", file, limits::kMaxLayers)["value"].get<std::int64_t>();
      for (std::int64_t i = 0; i < layers; ++i) kinds.push_back(i >= from ? "sliding_attention" : "full_attention");
      how = fmt::format("{}: use_sliding_window true, layers from max_window_layers = {} slide", file, from);
    }
  } else if (type == "mistral" || type == "mixtral") {
    if (present(doc, "sliding_window")) {
      kinds.assign(static_cast<std::size_t>(layers), "sliding_attention");
      how = fmt::format("{}: sliding_window (MistralAttention applies it on every layer)", file);
    }
  } else if (present(doc, "sliding_window")) {
    throw Error(fmt::format("{}: field 'sliding_window' = {}: the {} family has no sliding-window layers seqpar reads "
                            "(null turns it off)", file, dump_json(doc["sliding_window"], -1), type));
  }
  if (std::find(kinds.begin(), kinds.end(), "linear_attention") != kinds.end()) {
    // transformers' Qwen3NextGatedDeltaNet reads these five (presets.cpp: read_linear).
    for (const char* k : {"linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                          "linear_value_head_dim", "linear_conv_kernel_dim"})
      p[k] = size_figure(doc, k, file, std::string_view(k).ends_with("heads") ? limits::kMaxHeads : limits::kMaxHeadDim);
    p["layer_types"] = kinds;
    p["sources"] = {{"layer_types", how}};
  }
  if (std::find(kinds.begin(), kinds.end(), "sliding_attention") == kinds.end()) return;
  if (!present(doc, "sliding_window"))
    throw Error(fmt::format("{}: sliding_attention layers need 'sliding_window' (the tokens a query sees)", file));
  p["sliding_window"] = size_figure(doc, "sliding_window", file, 1 << 30);
  p["layer_types"] = kinds;
  p["sources"] = {{"layer_types", how}};
}

// A whole number >= 0 under `key` (0 when absent or null), at most `hi`.
std::int64_t whole_or_zero(const json& doc, const char* key, const std::string& file, int hi) {
  if (!present(doc, key)) return 0;
  const json& v = doc[key];
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > hi)
    throw Error(fmt::format("{}: field '{}' must be a whole number from 0 to {} (got {})", file, key, hi,
                            dump_json(v, -1)));
  return v.get<std::int64_t>();
}

// Mixtures of experts (model.hpp: Experts) as each family's config spells them, into the preset's
// keys (presets.cpp: read_experts):
//   qwen3_moe: num_experts, num_experts_per_tok, moe_intermediate_size; every layer MoE
//     (decoder_sparse_step 1, mlp_only_layers empty: other layouts are refused).
//   mixtral, gpt_oss: num_local_experts, num_experts_per_tok; the experts' width is intermediate_size.
//   glm4_moe: n_routed_experts, num_experts_per_tok, moe_intermediate_size, n_shared_experts of
//     moe_intermediate_size each, first_k_dense_replace leading dense layers of intermediate_size;
//     the MTP layers (num_nextn_predict_layers) are left out, said in the description.
void read_experts(const json& doc, const Family& fam, const std::string& file, json& p) {
  const std::string type = fam.model_type;
  const bool glm = glm_style_experts(fam), qwen = type == "qwen3_moe" || type == "qwen3_next";
  const char* k_routed = glm ? "n_routed_experts" : qwen ? "num_experts" : "num_local_experts";
  p["experts"] = size_figure(doc, k_routed, file, limits::kMaxHeads);
  p["experts_per_token"] = size_figure(doc, "num_experts_per_tok", file, limits::kMaxHeads);
  p["expert_ffn_hidden"] =
      size_figure(doc, glm || qwen ? "moe_intermediate_size" : "intermediate_size", file, limits::kMaxFfnHidden);
  if (qwen) {
    if (present(doc, "decoder_sparse_step") && doc["decoder_sparse_step"] != 1)
      throw Error(fmt::format("{}: field 'decoder_sparse_step' = {}: only every-layer MoE (1) is modelled", file,
                              dump_json(doc["decoder_sparse_step"], -1)));
    if (present(doc, "mlp_only_layers") && !(doc["mlp_only_layers"].is_array() && doc["mlp_only_layers"].empty()))
      throw Error(fmt::format("{}: field 'mlp_only_layers' = {}: dense layers between MoE layers are not modelled "
                              "(only leading ones)", file, dump_json(doc["mlp_only_layers"], -1)));
  }
  if (type == "qwen3_next" && whole_or_zero(doc, "shared_expert_intermediate_size", file, limits::kMaxFfnHidden) > 0) {
    // Qwen3NextSparseMoeBlock: one shared_expert of shared_expert_intermediate_size beside the routed ones.
    p["shared_experts"] = {{"value", 1},
                           {"source", fmt::format("{}: shared_expert_intermediate_size > 0 (Qwen3NextSparseMoeBlock has "
                                                  "one shared_expert)", file)}};
    p["shared_expert_ffn_hidden"] = size_figure(doc, "shared_expert_intermediate_size", file, limits::kMaxFfnHidden);
  }
  if (glm) {
    // DeepSeek's moe_layer_freq: every k-th layer after the dense ones is MoE; only 1 is modelled.
    if (present(doc, "moe_layer_freq") && doc["moe_layer_freq"] != 1)
      throw Error(fmt::format("{}: field 'moe_layer_freq' = {}: only every-layer MoE after the dense layers (1) is "
                              "modelled", file, dump_json(doc["moe_layer_freq"], -1)));
    const std::int64_t shared = whole_or_zero(doc, "n_shared_experts", file, limits::kMaxHeads);
    if (shared > 0) {
      p["shared_experts"] = size_figure(doc, "n_shared_experts", file, limits::kMaxHeads);
      p["shared_expert_ffn_hidden"] = size_figure(doc, "moe_intermediate_size", file, limits::kMaxFfnHidden);
    }
    const std::int64_t layers = p["layers"]["value"].get<std::int64_t>();
    const std::int64_t dense = whole_or_zero(doc, "first_k_dense_replace", file, limits::kMaxLayers);
    if (dense >= layers)
      throw Error(fmt::format("{}: field 'first_k_dense_replace' = {} leaves no MoE layer of the {}", file, dense,
                              layers));
    if (dense > 0)
      p["dense_layers"] = {{"value", dense}, {"source", fmt::format("{}: first_k_dense_replace", file)}};
    if (const std::int64_t mtp = whole_or_zero(doc, "num_nextn_predict_layers", file, limits::kMaxLayers); mtp > 0)
      p["description"] = fmt::format("{}; its {} multi-token-prediction layer(s) (num_nextn_predict_layers) are not "
                                     "modelled", p["description"].get<std::string>(), mtp);
  }
}

// Latent attention (model.hpp: Latent) as DeepSeek-V2/V3's configs spell it (transformers'
// DeepseekV3Config), into the preset's keys (presets.cpp: read_latent): kv_lora_rank,
// qk_rope_head_dim, v_head_dim, q_lora_rank (null or absent: q projected directly, DeepSeek-V2-Lite);
// the q/k heads' width is qk_nope_head_dim + qk_rope_head_dim (a config's head_dim, which
// transformers sets to qk_rope_head_dim for the rotary tables, is not the heads' width).
void read_latent(const json& doc, const std::string& file, json& p) {
  const json nope = size_figure(doc, "qk_nope_head_dim", file, limits::kMaxHeadDim);
  const json rope = size_figure(doc, "qk_rope_head_dim", file, limits::kMaxHeadDim);
  const std::int64_t n = nope["value"].get<std::int64_t>(), r = rope["value"].get<std::int64_t>();
  if (n + r > limits::kMaxHeadDim)
    throw Error(fmt::format("{}: qk_nope_head_dim + qk_rope_head_dim = {} is above the limit of {}", file, n + r,
                            limits::kMaxHeadDim));
  p["head_dim"] = {{"value", n + r},
                   {"source", fmt::format("{}: qk_nope_head_dim + qk_rope_head_dim = {} + {}", file, n, r)}};
  p["qk_rope_head_dim"] = rope;
  p["kv_lora_rank"] = size_figure(doc, "kv_lora_rank", file, limits::kMaxHidden);
  p["v_head_dim"] = size_figure(doc, "v_head_dim", file, limits::kMaxHeadDim);
  if (whole_or_zero(doc, "q_lora_rank", file, limits::kMaxHidden) > 0)
    p["q_lora_rank"] = size_figure(doc, "q_lora_rank", file, limits::kMaxHidden);
}

}  // namespace

bool is_hf_config(const json& doc) {
  if (!doc.is_object() || doc.contains("layers") || doc.contains("hidden")) return false;
  // model_type names the family; a config without it is still recognised by the keys every
  // transformers config has, so the message says what is missing rather than "missing 'name'".
  for (const char* k : {"model_type", "architectures", "transformers_version", "hidden_size", "num_hidden_layers", "n_embd"})
    if (doc.contains(k)) return true;
  return false;
}

json model_preset_from_hf_config(const json& doc, std::string_view file_view) {
  const std::string file(file_view);
  if (!doc.is_object()) throw Error(fmt::format("{}: expected a JSON object", file));
  const Family* fam = nullptr;
  std::string families;
  for (const auto& f : kFamilies) families += fmt::format("{}{}", families.empty() ? "" : ", ", f.model_type);
  const auto type_it = doc.find("model_type");
  if (type_it == doc.end() || type_it->is_null())
    throw Error(fmt::format("{}: missing field 'model_type': a Hugging Face config names its family there (seqpar "
                            "reads {}); add it, or write a seqpar model preset instead (sim/presets/README.md)",
                            file, families));
  const json& type = *type_it;
  // Gemma 3's multimodal config holds its language model under text_config (model_type gemma3_text).
  if (type == "gemma3") {
    auto text = doc.find("text_config");
    if (text == doc.end() || !text->is_object())
      throw Error(fmt::format("{}: model_type gemma3 without a 'text_config' object: seqpar reads the text model's "
                              "shapes there", file));
    json t = *text;
    if (!t.contains("model_type")) t["model_type"] = "gemma3_text";
    json p = model_preset_from_hf_config(t, file + ": text_config");
    p["name"] = model_name(doc, file);
    return p;
  }
  for (const auto& f : kFamilies)
    if (type.is_string() && type.get<std::string>() == f.model_type) fam = &f;
  if (!fam)
    throw Error(fmt::format("{}: field 'model_type' = {} is not a family seqpar reads ({}); write a seqpar model "
                            "preset instead (sim/presets/README.md)", file, dump_json(type, -1), families));
  refuse_unmodelled(doc, *fam, file);

  const char* k_hidden = fam->gpt2_names ? "n_embd" : "hidden_size";
  const char* k_layers = fam->gpt2_names ? "n_layer" : "num_hidden_layers";
  const char* k_heads = fam->gpt2_names ? "n_head" : "num_attention_heads";
  json p;
  p["name"] = model_name(doc, file);
  p["description"] = fmt::format("{} ({} config.json)", file, fam->model_type);
  p["layers"] = size_figure(doc, k_layers, file, limits::kMaxLayers);
  check_layer_types_length(doc, k_layers, p["layers"]["value"].get<std::int64_t>(), file);
  p["hidden"] = size_figure(doc, k_hidden, file, limits::kMaxHidden);
  p["heads"] = size_figure(doc, k_heads, file, limits::kMaxHeads);
  if (fam->grouped_query && present(doc, "num_key_value_heads")) {
    p["kv_heads"] = size_figure(doc, "num_key_value_heads", file, limits::kMaxHeads);
  } else {
    p["kv_heads"] = p["heads"];
    p["kv_heads"]["source"] = fmt::format("{}: {} (no num_key_value_heads: one KV head per query head)", file, k_heads);
  }
  const std::int64_t hidden = p["hidden"]["value"].get<std::int64_t>();
  const std::int64_t heads = p["heads"]["value"].get<std::int64_t>();
  // Checked again on the preset; here the message names the config's own keys.
  if (const std::int64_t kv = p["kv_heads"]["value"].get<std::int64_t>(); heads % kv != 0)
    throw Error(fmt::format("{}: {} {} is not a multiple of num_key_value_heads {} (grouped-query attention shares "
                            "each KV head among a whole number of query heads)", file, k_heads, heads, kv));
  if (fam->latent) {
    read_latent(doc, file, p);
  } else if (present(doc, "head_dim")) {
    p["head_dim"] = size_figure(doc, "head_dim", file, limits::kMaxHeadDim);
  } else {
    if (hidden % heads != 0)
      throw Error(fmt::format("{}: {} {} is not a multiple of {} {} and there is no head_dim", file, k_hidden, hidden,
                              k_heads, heads));
    p["head_dim"] = {{"value", hidden / heads},
                     {"source", fmt::format("{}: {} / {} = {} / {}", file, k_hidden, k_heads, hidden, heads)}};
  }
  if (fam->gpt2_names && !present(doc, "n_inner")) {
    // GPT-2's MLP is 4 x n_embd when n_inner is null (transformers' GPT2MLP).
    p["ffn_hidden"] = {{"value", 4 * hidden}, {"source", fmt::format("{}: 4 x n_embd (n_inner null)", file)}};
  } else {
    p["ffn_hidden"] = size_figure(doc, fam->gpt2_names ? "n_inner" : "intermediate_size", file, limits::kMaxFfnHidden);
  }
  p["vocab"] = size_figure(doc, "vocab_size", file, limits::kMaxVocab);
  p["mlp"] = fam->gated_mlp ? "swiglu" : "gelu";
  p["norm"] = fam->gated_mlp ? "rmsnorm" : "layernorm";
  p["positions"] = fam->learned_positions ? "learned" : "rope";
  p["tied_embeddings"] = flag(doc, "tie_word_embeddings", fam->tied_default, file);
  read_attention_kinds(doc, *fam, p["layers"]["value"].get<std::int64_t>(), file, p);
  if (fam->experts) read_experts(doc, *fam, file, p);
  if (std::string_view(fam->model_type) == "qwen3_next")
    p["description"] = fmt::format("{}; not modelled: the full attention's output gate (q_proj twice as wide), its "
                                   "q/k norms, the shared expert's gate and the multi-token-prediction layer",
                                   p["description"].get<std::string>());
  if (fam->sinks) {
    p["attention_sinks"] = true;
    p["sources"]["attention_sinks"] = fmt::format(
        "{}: model_type {} (no config key: transformers' GptOssAttention has sinks, one logit per head, in every "
        "layer; modeling_gpt_oss.py at huggingface/transformers 00d4b3d2142c)", file, fam->model_type);
  }
  return p;
}

}  // namespace seqpar::sim

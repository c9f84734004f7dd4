// A Hugging Face model configuration (config.json) read as a seqpar model preset: the Llama,
// Mistral, Qwen2, Qwen3 (gated SwiGLU MLP, RMSNorm), GPT-NeoX and GPT-2 (GELU MLP, LayerNorm)
// families. Each figure's "source" names the file and the key it came from. A config that uses
// something the simulator does not model (experts, sliding windows, latent attention, quantized
// weights, cross attention) is refused with the field named, never silently approximated.
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>

namespace seqpar::sim {

// True when `doc` is a Hugging Face config rather than a seqpar preset: none of the preset's own
// "layers"/"hidden", and "model_type" or a key every transformers config has ("architectures",
// "transformers_version", "hidden_size", "num_hidden_layers", "n_embd"), so a config missing its
// model_type is told so.
bool is_hf_config(const nlohmann::json& doc);

// The seqpar model preset document (the schema of sim/presets/models/*.json, figures as
// {"value", "source"}) of a Hugging Face config read from `file`. Throws seqpar::Error naming the
// file and the key: a missing or unknown model_type, a missing or malformed size, a size above the
// seqpar limit (named by the config's key), layer_types not a list of one type per layer, a field
// not modelled.
nlohmann::json model_preset_from_hf_config(const nlohmann::json& doc, std::string_view file);

}  // namespace seqpar::sim

// A Hugging Face model configuration (config.json) read as a seqpar model preset: the Llama,
// Mistral, Qwen2, Qwen3 (gated SwiGLU MLP, RMSNorm), GPT-NeoX and GPT-2 (GELU MLP, LayerNorm)
// families. Each figure's "source" names the file and the key it came from. A config that uses
// something the simulator does not model (experts, sliding windows, latent attention, quantized
// weights, cross attention) is refused with the field named, never silently approximated.
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>

namespace seqpar::sim {

// True when `doc` is a Hugging Face config rather than a seqpar preset: it carries "model_type"
// and none of the preset's own "layers"/"hidden".
bool is_hf_config(const nlohmann::json& doc);

// The seqpar model preset document (the schema of sim/presets/models/*.json, figures as
// {"value", "source"}) of a Hugging Face config read from `file`. Throws seqpar::Error naming the
// file and the key: an unknown model_type, a missing or malformed size, a field not modelled.
nlohmann::json model_preset_from_hf_config(const nlohmann::json& doc, std::string_view file);

}  // namespace seqpar::sim

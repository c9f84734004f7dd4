// The top-level fields of each preset kind (gpu, system, model, framework), defined once, and the
// check every preset reader starts with.
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>

namespace seqpar::sim {

// A document of another preset kind (read from its keys), a Hugging Face config or a document seqpar
// writes (a measurement, a prediction), given where a preset of `kind` ("gpu", "system", "model",
// "framework") belongs, is refused as what it is ("m.json is a model preset, not a system preset:
// give it to --model"). seqpar::Error naming `what`.
void refuse_other_preset_kind(const nlohmann::json& j, std::string_view kind, std::string_view what);
// `j` read as a preset of `kind`: refuse_other_preset_kind, then an unknown field refused with the
// nearest known name. seqpar::Error naming `what`.
void check_preset_fields(const nlohmann::json& j, std::string_view kind, std::string_view what);

}  // namespace seqpar::sim

// The top-level fields of each preset kind (gpu, system, model, framework), defined once, and the
// check every preset reader starts with.
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>

namespace seqpar::sim {

// `j` read as a preset of `kind` ("gpu", "system", "model", "framework"): a document whose keys are
// another kind's (or a Hugging Face config's) is refused as what it is ("m.json is a model preset,
// not a system preset: give it to --model"); then an unknown field is refused with the nearest known
// name. seqpar::Error naming `what`.
void check_preset_fields(const nlohmann::json& j, std::string_view kind, std::string_view what);

}  // namespace seqpar::sim

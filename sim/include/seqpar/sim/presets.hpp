// Built-in presets (GPUs, systems, models) read from the JSON data files in sim/presets/, which
// are compiled into the library; a path to a JSON file of the same schema works wherever a name does.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/model.hpp"

namespace seqpar::sim {

// Name of a built-in preset, or a path to a JSON file (anything containing '/' or ending in
// ".json"). Unknown names and malformed files throw seqpar::Error naming the input.
Gpu load_gpu(std::string_view name_or_path);
System load_system(std::string_view name_or_path);
Model load_model(std::string_view name_or_path);

// Puts framework profile `f` (framework.hpp) on `s`, with its time priors unless `s` carries
// terms `seqpar calibrate` fitted (which stand). seqpar::Error when those were fitted over another
// framework: the terms belong to the profile they were fitted with.
void use_framework(System& s, const Framework& f);

// The preset document itself (sources included): a built-in by name, or a JSON file by path.
// Same errors as the loaders. `kind` is "gpu", "system", "model" or "framework".
nlohmann::json preset_document(std::string_view kind, std::string_view name_or_path);
// preset_document for a name that another document (`what`) gives in its field `kind` (a system's
// "gpu"): its errors are named under that document and field ("mine.json: gpu: unknown gpu preset ...").
nlohmann::json nested_preset_document(std::string_view kind, std::string_view name_or_path, std::string_view what);
// How errors name a preset: the path for a file, "system preset 'dgx-h100'" for a name.
std::string preset_label(std::string_view kind, std::string_view name_or_path);

// From already-parsed JSON (for calibrated profiles and tests). `what` names the document in errors.
// A string field of a preset document: `fallback` when absent (seqpar::Error naming `what` and the
// field without one), seqpar::Error when it is not a string.
std::string string_field(const nlohmann::json& j, const char* key, std::string_view what,
                         const char* fallback = nullptr);
// A preset's "name" (every kind's): a string that is not empty or blank, else seqpar::Error naming `what`.
std::string preset_name(const nlohmann::json& j, std::string_view what);
// A CUDA compute capability as "major.minor" ("9.0"), from a string or {"value": "9.0", "source"};
// seqpar::Error naming `what` for anything else.
std::string compute_capability_text(const nlohmann::json& v, std::string_view what);
Gpu gpu_from_json(const nlohmann::json& j, std::string_view what);
System system_from_json(const nlohmann::json& j, std::string_view what);
Model model_from_json(const nlohmann::json& j, std::string_view what);

// The built-in system of a GPU as the CUDA driver names it ("NVIDIA H100 80GB HBM3" ->
// "dgx-h100"), for measurements that say which device they ran on; empty when none matches.
std::optional<std::string> system_for_device_name(std::string_view device_name);

struct PresetEntry {
  std::string kind;  // "gpu", "system", "model", "framework"
  std::string name;
  std::string description;
  nlohmann::json document;  // the preset file as written, sources included
};
const std::vector<PresetEntry>& builtin_presets();

}  // namespace seqpar::sim

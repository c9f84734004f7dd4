// The preset JSON files, embedded at build time (see sim/CMakeLists.txt).
#pragma once
#include <vector>

namespace seqpar::sim::detail {

struct EmbeddedPreset {
  const char* kind;    // directory name: "gpus", "systems", "models"
  const char* path;    // source path, for error messages
  const char* content;
};

const std::vector<EmbeddedPreset>& embedded_presets();

}  // namespace seqpar::sim::detail

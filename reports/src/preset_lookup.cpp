#include <fmt/format.h>

#include "seqpar/common/error.hpp"
#include "seqpar/reports/calibrate.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/sim/presets.hpp"

namespace seqpar::reports {

PresetLookup sim_preset_lookup() {
  return [](const std::string& kind, const std::string& name) -> nlohmann::json {
    // Same rule as the simulator: a '/' or a .json suffix means a file.
    if (name.find('/') != std::string::npos || (name.size() > 5 && name.ends_with(".json")))
      return load_json_file(name);
    std::string known;
    for (const auto& p : seqpar::sim::builtin_presets()) {
      if (p.kind != kind) continue;
      if (p.name == name) return p.document;
      known += (known.empty() ? "" : ", ") + p.name;
    }
    throw Error(fmt::format("unknown {} preset '{}'; built-in {}s: {} (or give a path to a JSON file)", kind, name,
                            kind, known));
  };
}

}  // namespace seqpar::reports

#include "seqpar/reports/calibrate.hpp"
#include "seqpar/sim/presets.hpp"

namespace seqpar::reports {

PresetLookup sim_preset_lookup() {
  return [](const std::string& kind, const std::string& name) { return seqpar::sim::preset_document(kind, name); };
}

}  // namespace seqpar::reports

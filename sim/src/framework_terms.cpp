#include "seqpar/sim/framework_terms.hpp"

#include <fmt/format.h>

#include "seqpar/core/error.hpp"
#include "seqpar/sim/compute_cost.hpp"
#include "seqpar/sim/efficiency_curves.hpp"

namespace seqpar::sim {

using nlohmann::json;

namespace {
// Wide enough for any framework, narrow enough that every product stays finite.
constexpr double kMaxOverheadS = 1e4, kMaxBytes = 1e15, kMaxBytesPerToken = 1e9;
}  // namespace

void read_framework_terms(const json& system, std::string_view what, System& s) {
  auto it = system.find("framework");
  if (it == system.end() || it->is_null()) return;
  const std::string w = fmt::format("{}: framework", what);
  if (!it->is_object()) throw Error(fmt::format("{}: expected an object", w));
  FrameworkTerms f;
  auto opt = [&](const char* key, double lo, double hi, double fallback) {
    return it->contains(key) ? bounded_figure(*it, key, w, lo, hi) : fallback;
  };
  // An efficiency is a fraction of the bandwidth: (0, 1], as the GPU's efficiencies.
  f.memory_bound_efficiency = opt("memory_bound_efficiency", 1e-3, 1, 1);
  f.step_overhead_s = opt("step_overhead_s", 0, kMaxOverheadS, 0);
  // Memory a framework holds is never negative: what the inventory overcounts is its error to fix.
  f.reserve_bytes = opt("reserve_bytes", 0, kMaxBytes, 0);
  f.bytes_per_token = opt("bytes_per_token", 0, kMaxBytesPerToken, 0);
  // The loss's and the gradients' bytes are the framework profile's inventory now (framework.hpp).
  for (const char* moved : {"loss_bytes_per_logit", "gradient_bytes_per_param"})
    if (it->contains(moved))
      throw Error(fmt::format("{}: '{}' is no longer a framework term; it is part of the framework profile's "
                              "inventory (sim/presets/frameworks/, --framework)",
                              w, moved));
  s.framework = f;
  s.framework_calibrated = true;
  // The framework profile the terms were fitted over (framework.hpp); absent: the default.
  if (auto p = it->find("profile"); p != it->end()) {
    if (!p->is_string()) throw Error(fmt::format("{}: field 'profile' must be a framework preset name or path", w));
    s.profile = load_framework(p->get<std::string>());
  }
}

json framework_terms_json(const FrameworkTerms& f, const std::string& profile, const std::string& source) {
  return json{{"profile", profile},
              {"memory_bound_efficiency", f.memory_bound_efficiency},
              {"step_overhead_s", f.step_overhead_s},
              {"reserve_bytes", f.reserve_bytes},
              {"bytes_per_token", f.bytes_per_token},
              {"source", source}};
}

double framework_memory_bound_time(const System& s, double bytes) {
  return memory_bound_time(s.gpu, bytes) / s.framework.memory_bound_efficiency;
}

double framework_reserved_bytes(const FrameworkTerms& f, double local_tokens) {
  return f.reserve_bytes + f.bytes_per_token * local_tokens;
}

}  // namespace seqpar::sim

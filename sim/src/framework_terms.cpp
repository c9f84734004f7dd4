#include "seqpar/sim/framework_terms.hpp"

#include <fmt/format.h>

#include "seqpar/core/error.hpp"
#include "seqpar/sim/compute_cost.hpp"
#include "seqpar/sim/efficiency_curves.hpp"

namespace seqpar::sim {

using nlohmann::json;

void read_framework_terms(const json& system, std::string_view what, System& s) {
  auto it = system.find("framework");
  if (it == system.end() || it->is_null()) return;
  const std::string w = fmt::format("{}: framework", what);
  if (!it->is_object()) throw Error(fmt::format("{}: expected an object", w));
  FrameworkTerms f;
  // Each term's range is its physical one (hardware.hpp: kFrameworkTerms); a missing one keeps its default.
  for (const FrameworkTermSpec& t : kFrameworkTerms)
    if (it->contains(t.key)) f.*t.field = bounded_figure(*it, t.key, w, t.lo, t.hi);
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
    if (p->is_object()) s.profile = framework_from_json(*p, fmt::format("{}: profile", w));
    else if (p->is_string()) s.profile = load_framework(p->get<std::string>());
    else throw Error(fmt::format("{}: field 'profile' must be a framework profile (an object) or a preset name or path", w));
  }
}

json framework_terms_json(const FrameworkTerms& f, const json& profile, const std::string& source) {
  json j = json::object();
  j["profile"] = profile;
  for (const FrameworkTermSpec& t : kFrameworkTerms) j[t.key] = f.*t.field;
  j["source"] = source;
  return j;
}

double framework_memory_bound_time(const System& s, double bytes) {
  return memory_bound_time(s.gpu, bytes) / s.framework.memory_bound_efficiency;
}

double framework_gemm_time(const System& s, double flops, double tokens, int launches) {
  return gemm_time(s.gpu, flops, tokens, launches, s.framework.gemm_step_efficiency);
}

double framework_attention_time(const System& s, double flops, double block_tokens, bool backward,
                                const AttentionKernel& kernel) {
  return attention_time(s.gpu, flops, block_tokens, backward, kernel, s.framework.attention_step_efficiency);
}

double framework_reserved_bytes(const FrameworkTerms& f, double local_tokens) {
  return f.reserve_bytes + f.bytes_per_token * local_tokens;
}

}  // namespace seqpar::sim

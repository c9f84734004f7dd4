#include "seqpar/sim/framework_terms.hpp"

#include <fmt/format.h>

#include "seqpar/core/error.hpp"
#include "seqpar/sim/compute_cost.hpp"
#include "seqpar/sim/efficiency_curves.hpp"

namespace seqpar::sim {

using nlohmann::json;

namespace {
// Wide enough for any framework, narrow enough that every product stays finite. The memory terms
// may be negative: the modelled parts can overcount what a framework holds (check_numbers still
// refuses a negative total).
constexpr double kMaxOverheadS = 1e4, kMaxBytes = 1e15, kMaxBytesPerToken = 1e9, kMaxBytesPerLogit = 64;
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
  f.reserve_bytes = opt("reserve_bytes", -kMaxBytes, kMaxBytes, 0);
  f.bytes_per_token = opt("bytes_per_token", -kMaxBytesPerToken, kMaxBytesPerToken, 0);
  // At most a few copies of an fp32 logit; 0 for a fused loss that never materialises them.
  f.loss_bytes_per_logit = opt("loss_bytes_per_logit", 0, kMaxBytesPerLogit, f.loss_bytes_per_logit);
  f.gradient_bytes_per_param = opt("gradient_bytes_per_param", 1, 8, f.gradient_bytes_per_param);  // fp8 .. fp64
  s.framework = f;
}

json framework_terms_json(const FrameworkTerms& f, const std::string& source) {
  return json{{"memory_bound_efficiency", f.memory_bound_efficiency},
              {"step_overhead_s", f.step_overhead_s},
              {"reserve_bytes", f.reserve_bytes},
              {"bytes_per_token", f.bytes_per_token},
              {"loss_bytes_per_logit", f.loss_bytes_per_logit},
              {"gradient_bytes_per_param", f.gradient_bytes_per_param},
              {"source", source}};
}

double framework_memory_bound_time(const System& s, double bytes) {
  return memory_bound_time(s.gpu, bytes) / s.framework.memory_bound_efficiency;
}

double framework_reserved_bytes(const FrameworkTerms& f, double local_tokens) {
  return f.reserve_bytes + f.bytes_per_token * local_tokens;
}

}  // namespace seqpar::sim

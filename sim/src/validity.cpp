#include "seqpar/sim/validity.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "seqpar/core/checked.hpp"
#include "seqpar/core/limits.hpp"

namespace seqpar::sim {

// A profile derived from one framework's SwiGLU module (its saved tensors counted under PyTorch)
// says nothing of what that framework's GELU module saves: refuse rather than guess a fit.
std::string profile_mismatch(const Model& m, const System& s) {
  const auto& kinds = s.profile.mlp_kinds;
  if (kinds.empty() || std::find(kinds.begin(), kinds.end(), m.mlp) != kinds.end()) return {};
  return fmt::format("mlp: model '{}' has a {} MLP, but framework profile '{}' counts the saved tensors of a {} MLP "
                     "only; choose a profile that covers it (--framework seqpar-train or megatron-core count either "
                     "through the fc1 width) or write one",
                     m.name, to_string(m.mlp), s.profile.name, to_string(kinds));
}

bool check_plan(const Model& m, const System& s, const Plan& p, std::vector<std::string>& errors) {
  const std::size_t before = errors.size();
  const bool structure_ok = check_plan_structure(p, errors);
  // U out of range: the structure rules named it; the head rules would only add noise.
  if (!structure_ok && (range_error("", p.ulysses_degree, 1, limits::kMaxGpus) || range_error("", p.tp, 1, limits::kMaxGpus)))
    return false;
  check_heads(m.heads, m.kv_heads, p.tp, p.ulysses_degree, errors);
  // TP splits the MLP's columns (and the QKV and output projections' heads, checked above).
  if (p.tp > 1 && m.ffn_hidden % p.tp != 0)
    errors.push_back(fmt::format("ffn_hidden: {} is not divisible by the tensor-parallel degree {} (TP splits the MLP's "
                                 "columns over its ranks)", m.ffn_hidden, p.tp));
  if (std::string why = profile_mismatch(m, s); !why.empty()) errors.push_back(std::move(why));
  return errors.size() == before;
}

}  // namespace seqpar::sim

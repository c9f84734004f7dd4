#include "seqpar/sim/validity.hpp"

#include <fmt/format.h>

#include "seqpar/core/checked.hpp"
#include "seqpar/core/limits.hpp"

namespace seqpar::sim {

bool check_plan(const Model& m, const System& s, const Plan& p, std::vector<std::string>& errors) {
  (void)s;
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
  return errors.size() == before;
}

}  // namespace seqpar::sim

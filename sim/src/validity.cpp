#include "seqpar/sim/validity.hpp"

#include "seqpar/core/checked.hpp"
#include "seqpar/core/limits.hpp"

namespace seqpar::sim {

bool check_plan(const Model& m, const System& s, const Plan& p, std::vector<std::string>& errors) {
  (void)s;
  const std::size_t before = errors.size();
  const bool structure_ok = check_plan_structure(p, errors);
  // U out of range: the structure rules named it; the head rules would only add noise.
  if (!structure_ok && range_error("", p.ulysses_degree, 1, limits::kMaxGpus)) return false;
  check_heads(m.heads, m.kv_heads, p.ulysses_degree, errors);
  return errors.size() == before;
}

}  // namespace seqpar::sim

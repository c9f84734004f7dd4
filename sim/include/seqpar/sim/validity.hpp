// The rules a plan must obey (DESIGN.md §2 and §5): positive sizes, GPUs divisible into the
// degrees, heads and KV heads against the Ulysses degree, sequence divisibility. Memory fit is
// not a validity rule: an over-full plan is valid and reported as not fitting.
#pragma once
#include <string>
#include <vector>

#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/model.hpp"
#include "seqpar/sim/plan.hpp"

namespace seqpar::sim {

// Appends one message per broken rule to `errors`, each naming the field and the rule.
// Returns true when the plan is valid. Cheap when the plan is valid (no allocation).
bool check_plan(const Model& m, const System& s, const Plan& p, std::vector<std::string>& errors);

// The rules that need no model: sizes within [1, limits], GPUs divisible into the degrees,
// U x R = P, the method's degrees, sequence divisibility, memory options. check_plan applies
// these and then the head rules; the training step, which checks heads its own way, calls this.
bool check_plan_structure(const Plan& p, std::vector<std::string>& errors);

// The sequence granularity of a plan: seq_len must be a multiple of it (P, or 2P for zigzag).
std::int64_t seq_granularity(const Plan& p);

}  // namespace seqpar::sim

// The size limits live in core (seqpar/core/limits.hpp, seqpar::limits) because the plan rules
// there need them; this alias keeps the simulator's `sim::limits::kMaxGpus` spellings working.
#pragma once
#include "seqpar/core/limits.hpp"

namespace seqpar::sim {
namespace limits = ::seqpar::limits;
}  // namespace seqpar::sim

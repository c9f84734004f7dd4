// The plan is defined once, in core (seqpar/core/plan.hpp and plan_validity.hpp). This header
// only names it inside seqpar::sim, so code that still spells `sim::Plan` or includes this path
// keeps compiling while the tree moves to the core spellings; new code includes the core headers.
#pragma once
#include "seqpar/core/plan.hpp"
#include "seqpar/core/plan_validity.hpp"

namespace seqpar::sim {

using seqpar::Checkpoint;
using seqpar::MemoryOptions;
using seqpar::Method;
using seqpar::Plan;
using seqpar::PlanFlags;

using seqpar::check_plan_structure;
using seqpar::describe;
using seqpar::describe_structure;
using seqpar::implied_sp;
using seqpar::normalized;
using seqpar::parse_checkpoint;
using seqpar::parse_method;
using seqpar::plan_from_flags;
using seqpar::plan_from_json;
using seqpar::seq_granularity;
using seqpar::to_json;
using seqpar::to_string;

}  // namespace seqpar::sim

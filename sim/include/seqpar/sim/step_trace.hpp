// The predicted step as a timeline (`seqpar simulate --trace`): one track per stream (compute,
// Ulysses all-to-all, ring send/recv, data-parallel reduction, offload copies; core/trace.hpp),
// one slice per layer phase, laid out from the simulator's own figures (Result::figures) with the
// overlap rules simulate() uses: the Ulysses all-to-alls stall compute, ring step k's hop runs
// beside step k's kernel and the next step starts when both are done, data-parallel traffic and
// checkpoint offload hide under their pass and stall it at the end by what simulate() left
// exposed. The compute track's slices plus every communication slice's args.exposed_s add up to
// the step time, and the last slice ends at it.
#pragma once
#include <string_view>

#include "seqpar/core/trace.hpp"
#include "seqpar/sim/simulate.hpp"

namespace seqpar::sim {

// The timeline of a valid result, as process `pid` named `process_name`. seqpar::Error when the
// result is invalid, or when the layout does not reproduce the result's step time (the simulator
// and this layout disagree: a bug, reported rather than drawn).
trace::Trace step_trace(const Result& r, int pid, std::string_view process_name);

}  // namespace seqpar::sim

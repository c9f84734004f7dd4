// JSON forms of the simulator's objects, in the JSON contract of docs/ARCHITECTURE.md (snake_case, units in keys).
#pragma once
#include <nlohmann/json.hpp>

#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/model.hpp"
#include "seqpar/sim/simulate.hpp"

namespace seqpar::sim {

nlohmann::json to_json(const Model& m);
nlohmann::json to_json(const System& s, int gpus);  // with the node count for `gpus`

// "<system>/<model>/<method>/sp<P>/u<U>r<R>/gpus<G>/seq<N>": stable id of a point.
std::string point_name(const Model& m, const System& s, const Plan& p);

// One simulated plan: valid, errors, fits, step_time_s, tokens_per_s_per_gpu, tflops_per_gpu,
// mfu, peak_memory_bytes, memory{...}, time{...}; numbers are null when the plan is invalid.
nlohmann::json to_json(const Model& m, const System& s, const Result& r);
// A MoE model's experts in a valid result (its "experts" object): the EP degree, the MLP's and the
// all-to-alls' figures, and each group's communication per layer on its links ("links": the
// attention's group and the experts' side by side).
nlohmann::json experts_json(const Model& m, const System& s, const Result& r);

}  // namespace seqpar::sim

// Measured training steps beside the simulator's prediction in `seqpar report` (issue 16): each
// step (step_input.hpp: seqpar-train's JSON, bench_torch_step's, or the minimal step format) is
// predicted on one system by sim::simulate (step_fit.hpp: predict_step), per rank, with the error.
// A single-rank proxy (seqpar-train --comm loopback) records the plan it stands for, so it is
// predicted as that plan's rank: the simulator's step time and peak memory are per rank already.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "seqpar/reports/step_input.hpp"
#include "seqpar/reports/step_system.hpp"
#include "seqpar/sim/hardware.hpp"

namespace seqpar::reports {

// One measured step and where it came from, as the report gathers it.
struct StepRecord {
  MeasuredStep step;
  std::string source;                   // the report's source id (S1, S2, ...)
  std::string mode;                     // the measurement mode ("single-rank-proxy", ...), or "" when not given
  std::optional<std::string> gpu_name;  // the GPU the step ran on, when recorded
};

// {"system": name(s), "runtimes": [what ran the steps: step_system.hpp's to_json], "rows": [row...],
//  "max_abs_time_error": x, "max_abs_memory_error": x or null}
// with each row {"source", "file", "name", "model", "mode", "dtype", "plan_label", "gpus", "seq_len",
// "measured_step_time_s", "predicted_step_time_s", "time_error", "measured_peak_memory_bytes",
// "predicted_peak_memory_bytes", "memory_error"} (errors predicted / measured - 1; the memory
// fields null for a step without a measured peak), each step predicted on `systems.of(step)`: as it
// ran (its GPU, framework and attention kernel) unless --system / --framework say otherwise.
// With no steps: system null, rows empty. seqpar::Error naming the step when the simulator refuses
// its plan, or when no system can be chosen for it.
nlohmann::json compare_steps(StepSystems& systems, const std::vector<StepRecord>& steps);

// The same document with no steps (a report without training-step measurements).
nlohmann::json no_step_comparisons();

}  // namespace seqpar::reports

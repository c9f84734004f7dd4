// The framework-level terms of a profile (sim/framework_terms.hpp) fitted to measured training
// steps, every prediction made by the simulator itself (sim::simulate on the profile), and the
// leave-one-out check that tells a user how far the fitted profile predicts steps it has not seen.
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

#include "seqpar/reports/step_input.hpp"
#include "seqpar/sim/hardware.hpp"

namespace seqpar::reports {

struct StepFit {
  sim::FrameworkTerms terms;
  int points = 0;
  bool efficiency_fitted = false;  // two points or more; else the efficiency stays 1
  bool per_token_fitted = false;   // three points or more at two local token counts or more
  double time_rel_residual = 0, memory_rel_residual = 0;  // RMS of predicted / measured - 1
};

struct StepPrediction {
  double step_time_s = 0, peak_memory_bytes = 0;
};

// The simulator's step time and peak memory for a measured step on `sys`; seqpar::Error naming
// the step when the simulator refuses its plan (the plan is normalized against `sys` first).
StepPrediction predict_step(const sim::System& sys, const MeasuredStep& s);

// Fits the terms on `base` (its own framework terms are ignored). Time: the memory-bound
// efficiency by a search in log space, the per-step overhead (>= 0) by least squares on relative
// error for each candidate. Memory: the reserve, and a per-token term when the points support it,
// by least squares on relative error. Throws seqpar::Error when `steps` is empty.
StepFit fit_framework_terms(const sim::System& base, const std::vector<MeasuredStep>& steps);

// One object per step: file, name, plan, seq_len, measured and predicted (fitted on all points)
// step_time_s and peak_memory_bytes with their residuals, and the leave-one-out predictions and
// errors (the terms fitted on the other steps; null with a single step).
nlohmann::json step_rows(const sim::System& base, const StepFit& fit, const std::vector<MeasuredStep>& steps);

}  // namespace seqpar::reports

// The framework-level terms of a profile (sim/hardware.hpp: FrameworkTerms, kFrameworkTerms) fitted
// to measured training steps, every prediction made by the simulator itself (sim::simulate on the
// profile), and the leave-one-out check that tells a user how far the fitted profile predicts steps
// it has not seen. The fit is generic over the terms: each one's effect on each step is the
// simulator's own (a finite difference), and each stays in its physical range.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "seqpar/reports/step_input.hpp"
#include "seqpar/sim/hardware.hpp"

namespace seqpar::reports {

// One fittable term after the fit.
struct TermFit {
  std::string key;     // kFrameworkTerms' key
  double value = 0;    // as the profile holds it
  double prior = 0;    // the base system's (its default when the base has none)
  double lo = 0, hi = 0;  // the range the fit searched: physical, tightened by the steps
  bool determined = false;  // fitted; else held at its prior, `why` says why
  bool at_bound = false;    // fitted and ended on lo or hi
  std::string why;          // why it was not fitted, or which end of its range it reached and why
};

struct StepFit {
  sim::FrameworkTerms terms;
  int points = 0;                // distinct steps fitted
  std::vector<TermFit> fitted;   // every step-time and peak-memory term, in kFrameworkTerms' order
  double time_rel_residual = 0, memory_rel_residual = 0;  // RMS of predicted / measured - 1
};

struct StepPrediction {
  double step_time_s = 0, peak_memory_bytes = 0;
};

// The simulator's step time and peak memory for a measured step on `sys`; seqpar::Error naming
// the step when the simulator refuses its plan (the plan is normalized against `sys` first).
StepPrediction predict_step(const sim::System& sys, const MeasuredStep& s);

// The steps as the fit takes them: each checked against what `base`'s GPU can do (seqpar::Error
// naming the file and the rule for a step faster than the GPU's bf16 peak or a peak above its
// memory), and the measurements of one configuration (model, plan, dtype) merged into one point,
// their median time and peak, so that a step given twice or a hundred times weighs as one and a
// leave-one-out leaves all of its copies out. `notes` gets a line per merge.
std::vector<MeasuredStep> distinct_steps(const sim::System& base, const std::vector<MeasuredStep>& steps,
                                         std::vector<std::string>& notes);

// Fits the step-time and peak-memory terms of kFrameworkTerms on `base` to distinct steps (its
// own values of those terms are the priors; its framework choices are kept). Each quantity is a
// least squares on relative error with every term inside its range (physical, and no term alone
// larger than any step's measured time or peak): linear in the terms (an efficiency through its
// reciprocal), solved exactly on the box, repeated from the solution until it settles. A term the
// steps cannot determine keeps its prior and says why: N distinct steps fit at most N - 1 terms per
// quantity (one with one step), and a term whose effect on the steps is (nearly) a multiple of an
// earlier term's (bytes per token with one per-rank token count) is not fitted. Throws
// seqpar::Error when `steps` is empty.
StepFit fit_framework_terms(const sim::System& base, const std::vector<MeasuredStep>& steps);

// Lines for the user: each term held at its prior and why, each fitted term on a bound of its range.
std::vector<std::string> describe_undetermined(const StepFit& fit);

// One object per step: file, name, plan, seq_len, measured and predicted (fitted on all points)
// step_time_s and peak_memory_bytes with their residuals, and the leave-one-out predictions and
// errors (the terms fitted on the other steps; null with a single step).
nlohmann::json step_rows(const sim::System& base, const StepFit& fit, const std::vector<MeasuredStep>& steps);

}  // namespace seqpar::reports

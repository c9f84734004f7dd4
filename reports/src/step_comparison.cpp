#include "seqpar/reports/step_comparison.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "seqpar/core/error.hpp"
#include "seqpar/core/plan.hpp"
#include "seqpar/reports/report_data.hpp"
#include "seqpar/reports/step_fit.hpp"
#include "seqpar/sim/presets.hpp"

namespace seqpar::reports {

using nlohmann::json;

sim::System step_system(const std::string& option, const std::vector<StepRecord>& steps) {
  if (!option.empty()) {
    try {
      return sim::load_system(option);
    } catch (const Error& e) {
      throw Error(fmt::format("--system {}: {}", option, e.what()));
    }
  }
  if (steps.empty()) throw Error("report: no measured training steps to choose a system for");
  // The first step that names its GPU decides: one report compares steps on one system.
  for (const auto& r : steps) {
    if (!r.gpu_name) continue;
    if (auto name = sim::system_for_device_name(*r.gpu_name)) return sim::load_system(*name);
    throw Error(fmt::format("{}: {}: measured on GPU '{}', which matches no built-in system preset; give the system to "
                            "predict the training steps on with --system NAME|profile.json",
                            r.step.file, r.step.name, *r.gpu_name));
  }
  throw Error(fmt::format("{}: {}: the measured training step does not record its GPU; give the system to predict the "
                          "training steps on with --system NAME|profile.json",
                          steps.front().step.file, steps.front().step.name));
}

json no_step_comparisons() {
  return {{"system", nullptr}, {"rows", json::array()}, {"max_abs_time_error", nullptr}, {"max_abs_memory_error", nullptr}};
}

json compare_steps(const sim::System& sys, const std::vector<StepRecord>& steps) {
  if (steps.empty()) return no_step_comparisons();
  json rows = json::array();
  double max_time = 0, max_memory = 0;
  bool any_memory = false;
  for (const auto& r : steps) {
    const MeasuredStep& s = r.step;
    const StepPrediction p = predict_step(sys, s);  // the simulator's own simulate(), per rank
    const double time_error = p.step_time_s / s.step_time_s - 1;
    max_time = std::max(max_time, std::fabs(time_error));
    json row = {{"source", r.source},
                {"file", s.file},
                {"name", s.name},
                {"model", s.model.name},
                {"mode", r.mode},
                {"dtype", s.dtype},
                {"plan_label", plan_label(to_json(normalized(s.plan, sys.gpus_per_node)))},
                {"gpus", s.plan.gpus},
                {"seq_len", s.plan.seq_len},
                {"measured_step_time_s", s.step_time_s},
                {"predicted_step_time_s", p.step_time_s},
                {"time_error", time_error},
                {"measured_peak_memory_bytes", nullptr},
                {"predicted_peak_memory_bytes", p.peak_memory_bytes},
                {"memory_error", nullptr}};
    if (s.has_peak_memory) {
      const double memory_error = p.peak_memory_bytes / s.peak_memory_bytes - 1;
      row["measured_peak_memory_bytes"] = s.peak_memory_bytes;
      row["memory_error"] = memory_error;
      max_memory = std::max(max_memory, std::fabs(memory_error));
      any_memory = true;
    }
    rows.push_back(std::move(row));
  }
  return {{"system", sys.name}, {"rows", rows}, {"max_abs_time_error", max_time},
          {"max_abs_memory_error", any_memory ? json(max_memory) : json()}};
}

}  // namespace seqpar::reports

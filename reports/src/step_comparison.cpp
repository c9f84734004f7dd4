#include "seqpar/reports/step_comparison.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "seqpar/core/error.hpp"
#include "seqpar/core/plan.hpp"
#include "seqpar/reports/report_data.hpp"
#include "seqpar/reports/step_fit.hpp"

namespace seqpar::reports {

using nlohmann::json;

json no_step_comparisons() {
  return {{"system", nullptr},
          {"runtimes", json::array()},
          {"rows", json::array()},
          {"max_abs_time_error", nullptr},
          {"max_abs_memory_error", nullptr}};
}

json compare_steps(StepSystems& systems, const std::vector<StepRecord>& steps) {
  if (steps.empty()) return no_step_comparisons();
  json rows = json::array();
  double max_time = 0, max_memory = 0;
  bool any_memory = false;
  for (const auto& r : steps) {
    const MeasuredStep& s = r.step;
    const sim::System& sys = systems.of(s, r.gpu_name);
    const StepPrediction p = predict_step(sys, s);  // the simulator's own simulate(), per rank
    const double time_error = p.step_time_s / s.step_time_s - 1;
    max_time = std::max(max_time, std::fabs(time_error));
    json row = {{"source", r.source},
                {"file", s.file},
                {"name", s.name},
                {"model", s.model.name},
                {"mode", r.mode},
                {"dtype", s.dtype},
                {"system", sys.name},
                {"framework", sys.profile.name},
                {"attention_kernel", sys.gpu.attention_kernel},
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
  std::string names;
  for (const StepRuntime& rt : systems.runtimes())
    if (names.find(rt.system) == std::string::npos) names += (names.empty() ? "" : ", ") + rt.system;
  return {{"system", names},
          {"runtimes", to_json(systems.runtimes())},
          {"rows", rows},
          {"max_abs_time_error", max_time},
          {"max_abs_memory_error", any_memory ? json(max_memory) : json()}};
}

}  // namespace seqpar::reports

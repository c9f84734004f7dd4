// The system a measured training step is predicted on, as the step ran: the GPU it names (or
// --system), the framework it names (or --framework), and the attention kernel it ran (or the
// framework's own on that GPU), loaded once per combination. `seqpar report` predicts each step on
// its own; `seqpar calibrate` fits one profile to steps that agree.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "seqpar/reports/step_input.hpp"
#include "seqpar/sim/hardware.hpp"

namespace seqpar::reports {

// One combination of system, framework and kernel, and why each was chosen.
struct StepRuntime {
  std::string system, framework, framework_from, attention_kernel, attention_kernel_from;
  int steps = 0;  // how many steps were predicted with it
};

class StepSystems {
 public:
  // `system_option`: --system (a preset or a calibrated profile; empty: the preset of each step's
  // GPU); `framework_option`: --framework (empty: each step's own, else the system's).
  StepSystems(std::string system_option, std::string framework_option);

  // The system for `s`, measured on `gpu_name` when recorded. seqpar::Error naming the step when no
  // system can be chosen (a GPU without a preset and no --system), when its framework is not the one
  // a calibrated --system was fitted over, or for an unknown preset.
  const sim::System& of(const MeasuredStep& s, const std::optional<std::string>& gpu_name);

  // Each combination used, in first-use order.
  std::vector<StepRuntime> runtimes() const;

 private:
  struct Entry {
    std::string key;
    sim::System system;
    StepRuntime runtime;
  };
  std::string system_option_, framework_option_;
  std::vector<Entry> entries_;  // a handful: searched in order
};

// "framework seqpar-train (program seqpar-train), attention kernel cudnn (its config.attention_engine)
// on dgx-h100: 22 steps", one line per runtime; and the same as JSON objects.
std::string describe(const StepRuntime& r);
nlohmann::json to_json(const std::vector<StepRuntime>& rs);

}  // namespace seqpar::reports

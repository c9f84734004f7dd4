#include "seqpar/reports/step_system.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "seqpar/core/error.hpp"
#include "seqpar/sim/attention_kernels.hpp"
#include "seqpar/sim/presets.hpp"

namespace seqpar::reports {

using nlohmann::json;

StepSystems::StepSystems(std::string system_option, std::string framework_option)
    : system_option_(std::move(system_option)), framework_option_(std::move(framework_option)) {}

namespace {

// The system preset the step is predicted on: --system, else its GPU's built-in one.
std::string system_name(const std::string& option, const MeasuredStep& s, const std::optional<std::string>& gpu) {
  if (!option.empty()) return option;
  if (!gpu)
    throw Error(fmt::format("{}: {}: the measured training step does not record its GPU; give the system to predict "
                            "the training steps on with --system NAME|profile.json", s.file, s.name));
  if (auto name = sim::system_for_device_name(*gpu)) return *name;
  throw Error(fmt::format("{}: {}: measured on GPU '{}', which matches no built-in system preset; give the system to "
                          "predict the training steps on with --system NAME|profile.json", s.file, s.name, *gpu));
}

}  // namespace

const sim::System& StepSystems::of(const MeasuredStep& s, const std::optional<std::string>& gpu) {
  const std::string sys_name = system_name(system_option_, s, gpu);
  json doc;
  try {
    doc = sim::preset_document("system", sys_name);
  } catch (const Error& e) {
    throw Error(system_option_.empty() ? std::string(e.what()) : fmt::format("--system {}: {}", sys_name, e.what()));
  }
  const std::string what = sim::preset_label("system", sys_name);
  // The framework a calibrated profile was fitted over: its terms belong to it.
  const sim::System plain = sim::system_from_json(doc, what);
  const std::string own = plain.framework_calibrated ? plain.profile.name : std::string();

  StepRuntime rt;
  rt.system = sys_name;
  if (!framework_option_.empty()) {
    rt.framework = framework_option_;
    rt.framework_from = "--framework";
  } else if (!s.framework.empty()) {
    rt.framework = s.framework;
    rt.framework_from = s.framework_from;
  } else if (!own.empty()) {
    rt.framework = own;
    rt.framework_from = "the calibrated profile's; the step names none";
  } else {
    rt.framework = std::string(sim::kDefaultFramework);
    rt.framework_from = "the default; the step names none (give --framework, or \"framework\" in the step)";
  }
  if (!own.empty() && rt.framework != own && framework_option_.empty())
    throw Error(fmt::format("{}: {}: the step ran framework '{}' ({}), but --system {} was calibrated over framework "
                            "'{}': its fitted terms describe that framework; give a profile calibrated over '{}', or "
                            "--framework {} to predict the step as '{}'",
                            s.file, s.name, rt.framework, rt.framework_from, sys_name, own, rt.framework, own, own));

  // The step's own kernel where the GPU has figures for it, else the framework's choice there.
  const json gpu_doc = doc.contains("gpu") && doc["gpu"].is_string()
                           ? sim::preset_document("gpu", doc["gpu"].get<std::string>())
                           : doc.value("gpu", json::object());
  const std::vector<std::string> kernels = sim::attention_kernel_names(gpu_doc);
  std::string requested, missing;
  if (!s.attention_kernel.empty()) {
    if (std::find(kernels.begin(), kernels.end(), s.attention_kernel) != kernels.end()) requested = s.attention_kernel;
    else missing = s.attention_kernel;
  }
  const std::string key = fmt::format("{}\n{}\n{}\n{}", sys_name, rt.framework, requested, missing);
  for (Entry& e : entries_)
    if (e.key == key) {
      ++e.runtime.steps;
      return e.system;
    }

  sim::System sys;
  try {
    sys = rt.framework == own ? sim::system_from_json(doc, what, requested)
                              : sim::system_from_json(doc, what, requested, sim::load_framework(rt.framework));
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}: {}", s.file, s.name, e.what()));
  }
  rt.system = sys.name;  // the preset's or profile's own name, as the tables print systems
  rt.attention_kernel = sys.gpu.attention_kernel;
  if (!requested.empty())
    rt.attention_kernel_from = fmt::format("the step's: {}", s.attention_kernel_from);
  else if (!missing.empty())
    rt.attention_kernel_from = fmt::format("{}; the step ran '{}' ({}), for which {} has no figures",
                                           sys.attention_kernel_why, missing, s.attention_kernel_from, sys.gpu.name);
  else
    rt.attention_kernel_from = sys.attention_kernel_why;
  sys.framework_why = rt.framework_from;
  rt.steps = 1;
  entries_.push_back({key, std::move(sys), rt});
  return entries_.back().system;
}

std::vector<StepRuntime> StepSystems::runtimes() const {
  std::vector<StepRuntime> out;
  for (const Entry& e : entries_) out.push_back(e.runtime);
  return out;
}

std::string describe(const StepRuntime& r) {
  return fmt::format("framework {} ({}), attention kernel {} ({}), on {}: {} step{}", r.framework, r.framework_from,
                     r.attention_kernel.empty() ? "the GPU preset's" : r.attention_kernel, r.attention_kernel_from,
                     r.system, r.steps, r.steps == 1 ? "" : "s");
}

json to_json(const std::vector<StepRuntime>& rs) {
  json out = json::array();
  for (const StepRuntime& r : rs)
    out.push_back({{"system", r.system}, {"framework", r.framework}, {"framework_from", r.framework_from},
                   {"attention_kernel", r.attention_kernel}, {"attention_kernel_from", r.attention_kernel_from},
                   {"steps", r.steps}, {"text", describe(r)}});
  return out;
}

}  // namespace seqpar::reports

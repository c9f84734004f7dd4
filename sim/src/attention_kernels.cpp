#include "seqpar/sim/attention_kernels.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "seqpar/core/error.hpp"
#include "seqpar/sim/presets.hpp"

namespace seqpar::sim {

namespace {

using nlohmann::json;

constexpr const char* kFigures[] = {"attention_fwd_efficiency", "attention_bwd_efficiency"};

std::string list(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i ? ", " : "") + names[i] + (i == 0 ? " (default)" : "");
  return out;
}

// The "attention_kernels" object, checked: each entry an object (its figures are checked by
// gpu_from_json when chosen, with the same ranges as the default's).
const json* kernels_of(const json& gpu_doc, std::string_view what) {
  auto it = gpu_doc.find("attention_kernels");
  if (it == gpu_doc.end()) return nullptr;
  if (!it->is_object())
    throw Error(fmt::format("{}: field 'attention_kernels' must be an object of kernel name -> figures", what));
  auto def = gpu_doc.find("attention_kernel");
  if (def == gpu_doc.end() || !def->is_string() || def->get<std::string>().empty())
    throw Error(fmt::format("{}: field 'attention_kernels' needs 'attention_kernel', the name of the kernel the "
                            "default attention figures describe",
                            what));
  return &*it;
}

}  // namespace

std::vector<std::string> attention_kernel_names(const json& gpu_doc) {
  std::vector<std::string> out;
  auto def = gpu_doc.find("attention_kernel");
  if (def != gpu_doc.end() && def->is_string()) out.push_back(def->get<std::string>());
  auto it = gpu_doc.find("attention_kernels");
  if (it != gpu_doc.end() && it->is_object())
    for (const auto& [name, figures] : it->items())
      if (out.empty() || name != out.front()) out.push_back(name);
  return out;
}

json gpu_document_with_attention_kernel(const json& gpu_doc, std::string_view kernel, std::string_view what) {
  if (!gpu_doc.is_object()) throw Error(fmt::format("{}: expected a JSON object", what));
  const json* kernels = kernels_of(gpu_doc, what);
  if (kernel.empty()) return gpu_doc;
  const std::vector<std::string> names = attention_kernel_names(gpu_doc);
  if (names.empty())
    throw Error(fmt::format("{}: attention kernel '{}' asked for, but the GPU names no attention kernels (its "
                            "figures are the only ones; add 'attention_kernel' and 'attention_kernels')",
                            what, kernel));
  if (kernel == names.front()) return gpu_doc;
  if (!kernels || !kernels->contains(std::string(kernel)))
    throw Error(fmt::format("{}: unknown attention kernel '{}'; this GPU's kernels: {}", what, kernel, list(names)));
  const auto entry = kernels->find(std::string(kernel));
  const std::string where = fmt::format("{}: attention_kernels.{}", what, kernel);
  if (!entry->is_object()) throw Error(fmt::format("{}: expected an object of attention figures", where));
  json out = gpu_doc;
  for (const char* key : kFigures) {
    auto f = entry->find(key);
    if (f == entry->end()) throw Error(fmt::format("{}: missing field '{}'", where, key));
    out[key] = *f;
  }
  // Optional: how the kernel's backward holds GQA gradients and how large its workspace is, and
  // its FP8 figures (hardware.hpp); absent: per KV head, the default workspace, no FP8 path.
  for (const char* key : {"attention_bwd_expands_kv_grads", "attention_bwd_workspace_per_head_dim",
                          "attention_bwd_workspace_per_row", "attention_fwd_workspace_per_head_dim",
                          "attention_score_bound_head_dim", "varlen_attention", "fp8_attention_fwd_efficiency",
                          "fp8_attention_bwd_efficiency"}) {
    if (auto f = entry->find(key); f != entry->end()) out[key] = *f;
    else out.erase(key);
  }
  out["attention_kernel"] = std::string(kernel);
  out.erase("attention_curves");  // measured on the default kernel, not this one
  return out;
}

KernelSelection select_attention_kernel(const json& gpu_doc, std::string_view requested, const Framework& framework) {
  const std::vector<std::string> names = attention_kernel_names(gpu_doc);
  if (!requested.empty()) return {std::string(requested), "as asked (--attention-kernel)"};
  const std::string gpu = gpu_doc.is_object() ? gpu_doc.value("name", std::string("the GPU")) : std::string("the GPU");
  std::string cc;
  if (auto it = gpu_doc.find("compute_capability"); it != gpu_doc.end())
    cc = compute_capability_text(*it, fmt::format("gpu '{}': compute_capability", gpu));
  std::string missing;  // a kernel the framework runs here that the GPU preset has no figures for
  for (const AttentionChoice& c : framework.attention_choices) {
    if (!c.compute_capability.empty() && (cc.empty() || !c.applies_to(cc))) continue;
    if (std::find(names.begin(), names.end(), c.kernel) != names.end())
      return {c.kernel, c.compute_capability.empty()
                            ? fmt::format("{} runs it", framework.name)
                            : fmt::format("{} runs it on compute capability {}", framework.name, cc)};
    if (missing.empty()) missing = c.kernel;
  }
  const std::string def = names.empty() ? std::string() : names.front();
  if (!missing.empty())
    return {def, fmt::format("the GPU preset's default: {} runs {}, for which gpu '{}' has no figures", framework.name,
                             missing, gpu)};
  return {def, "the GPU preset's default"};
}

namespace {
// The system document with the selected kernel's figures on its GPU: the framework is `framework`,
// else the one the document itself names (a calibrated profile's), else the default.
System system_with_kernel(json sys, std::string_view what, std::string_view requested, const Framework* framework) {
  if (!sys.is_object()) return system_from_json(sys, what);  // the reader says what is wrong
  auto gi = sys.find("gpu");
  if (gi == sys.end() || !(gi->is_string() || gi->is_object())) return system_from_json(sys, what);
  const json gpu_doc = gi->is_string() ? nested_preset_document("gpu", gi->get<std::string>(), what) : *gi;
  const std::string gpu_what = gi->is_string() ? fmt::format("gpu preset '{}'", gi->get<std::string>())
                                               : fmt::format("{}: gpu", what);
  (void)kernels_of(gpu_doc, gpu_what);  // a malformed kernel table is named before anything is chosen from it
  const Framework own = framework ? Framework{} : system_from_json(sys, what).profile;
  const KernelSelection k = select_attention_kernel(gpu_doc, requested, framework ? *framework : own);
  sys["gpu"] = gpu_document_with_attention_kernel(gpu_doc, k.kernel, gpu_what);
  System s = system_from_json(sys, what);
  if (framework) use_framework(s, *framework);
  s.gpu.attention_kernel = k.kernel;
  s.attention_kernel_why = k.why;
  return s;
}
}  // namespace

System load_system(std::string_view name_or_path, std::string_view attention_kernel, const Framework& framework) {
  return system_with_kernel(preset_document("system", name_or_path), preset_label("system", name_or_path),
                            attention_kernel, &framework);
}

System load_system_with_framework(std::string_view name_or_path, std::string_view attention_kernel,
                                  std::string_view framework) {
  json sys = preset_document("system", name_or_path);
  const std::string what = preset_label("system", name_or_path);
  const json* carried = nullptr;
  if (sys.is_object())
    if (auto f = sys.find("framework"); f != sys.end() && f->is_object())
      if (auto p = f->find("profile"); p != f->end() && p->is_object() && p->contains("name") && (*p)["name"].is_string())
        carried = &*p;
  if (carried) {
    const std::string carried_name = (*carried)["name"].get<std::string>();
    if (framework == carried_name) return system_with_kernel(std::move(sys), what, attention_kernel, nullptr);
    if (framework == preset_label("framework", framework)) {  // a path: its profile may be the carried one
      json file = preset_document("framework", framework);
      if (file.is_object() && file.value("name", json()) == json(carried_name)) {
        // calibrate records the attention kernel its steps ran in the carried profile.
        json kept = *carried;
        file.erase("attention_kernel");
        kept.erase("attention_kernel");
        if (file != kept)
          throw Error(fmt::format("--framework {}: its profile is named '{}', as the profile {} was calibrated over, "
                                  "but differs from it: calibrate again over {}, or give --framework {} (the "
                                  "calibrated one)",
                                  framework, carried_name, what, framework, carried_name));
        return system_with_kernel(std::move(sys), what, attention_kernel, nullptr);
      }
    }
  }
  const Framework f = load_framework(framework);
  return system_with_kernel(std::move(sys), what, attention_kernel, &f);
}

System load_system(std::string_view name_or_path, std::string_view attention_kernel) {
  return system_with_kernel(preset_document("system", name_or_path), preset_label("system", name_or_path),
                            attention_kernel, nullptr);
}

System system_from_json(json sys, std::string_view what, std::string_view attention_kernel) {
  return system_with_kernel(std::move(sys), what, attention_kernel, nullptr);
}

System system_from_json(json sys, std::string_view what, std::string_view attention_kernel, const Framework& framework) {
  return system_with_kernel(std::move(sys), what, attention_kernel, &framework);
}

}  // namespace seqpar::sim

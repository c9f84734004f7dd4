// The attention kernel as a named choice. A GPU preset's attention_fwd_efficiency and
// attention_bwd_efficiency describe one kernel family, named by its "attention_kernel" (the
// default); "attention_kernels" holds the figures of others the preset has a source for:
//   "attention_kernel": "flash-attention-3",
//   "attention_kernels": {"flash-attention-2": {"attention_fwd_efficiency": {"value": .., "source": ..},
//                                               "attention_bwd_efficiency": {...}}, "cudnn": {...}}
// Choosing one puts its figures in place of the default's before the GPU is parsed, so the cost
// models, their checks and the figure ranges stay those of gpu_from_json: the choice describes the
// software on the GPU, not how the sequence is split, so it belongs to the hardware the simulator
// sees and is reported with it (System::gpu.attention_kernel), not to the plan.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/sim/hardware.hpp"

namespace seqpar::sim {

// A kernel family's name in a message: System::gpu.attention_kernel, or "GPU's default" when the
// preset names none (the kinds' method rules, latent_attention.cpp and attention_sinks.cpp, say it).
inline std::string_view kernel_label(std::string_view kernel) {
  return kernel.empty() ? std::string_view("GPU's default") : kernel;
}

// The kernels a GPU document names: the default first, then the others in the file's order
// (nlohmann keeps objects sorted by key). Empty when it names none.
std::vector<std::string> attention_kernel_names(const nlohmann::json& gpu_doc);

// `gpu_doc` with the named kernel's figures as its attention figures, its "attention_kernel" set to
// the name and, when the name is not the default, without calibrated attention curves (they were
// measured on the default). An empty name returns the document as it is. An unknown name, or a
// kernel entry without both figures, throws seqpar::Error naming `what` and the known kernels.
nlohmann::json gpu_document_with_attention_kernel(const nlohmann::json& gpu_doc, std::string_view kernel,
                                                  std::string_view what);

// The kernel whose figures a GPU takes, and why (System::attention_kernel_why): `requested`
// (--attention-kernel) when given; else the framework's first choice for the GPU's compute
// capability that the GPU document has figures for (framework.hpp: AttentionChoice); else the
// GPU's default, saying which kernel the framework runs that the preset has no figures for.
struct KernelSelection {
  std::string kernel;  // empty: the GPU names no kernels
  std::string why;
};
KernelSelection select_attention_kernel(const nlohmann::json& gpu_doc, std::string_view requested,
                                        const Framework& framework);

// load_system (presets.hpp) with the attention kernel select_attention_kernel picks for the
// system's own framework (a calibrated profile's, else the default) or `requested`. The returned
// System's gpu.attention_kernel names the kernel whose figures it carries.
System load_system(std::string_view name_or_path, std::string_view requested);
// The same from a system document already read (a preset changed by a published run's patch, a
// profile being calibrated); `what` names it in errors.
System system_from_json(nlohmann::json system_document, std::string_view what, std::string_view requested);

// The same with a training framework (framework.hpp) put on the system (use_framework), whose
// attention kernels are chosen from.
System load_system(std::string_view name_or_path, std::string_view requested, const Framework& framework);
System system_from_json(nlohmann::json system_document, std::string_view what, std::string_view requested,
                        const Framework& framework);
// The same with the framework --framework names (a preset name or a path). A system calibrated
// over a profile carries that profile whole: naming it (by its name, or by a file holding the same
// profile) uses the carried one, never a built-in or file that merely shares its name; a file
// that names the carried profile but differs from it is refused, naming both.
System load_system_with_framework(std::string_view name_or_path, std::string_view requested,
                                  std::string_view framework);

}  // namespace seqpar::sim

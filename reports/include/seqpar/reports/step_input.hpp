// Measured training steps as `seqpar calibrate` reads them: seqpar-train's measurement JSON, or
// the same minimal fields written by any framework (README: "Calibrating from training steps"):
//   {"model": "llama3-8b" | {shape: name, layers, hidden, heads, kv_heads, head_dim, ffn_hidden, vocab, ...},
//    "layers": 4, "vocab": 32000,             (optional: override the preset's)
//    "plan": {core's kPlanJsonKeys: method, gpus, seq_len, sp, ..., zero, checkpoint, ...},
//    "dtype": "bf16",                          (optional, default bf16)
//    "step_time_s": 1.17, "peak_memory_bytes": 4.07e10, "name": "..." (optional),
//    "device": "gpu", "gpu_name": "NVIDIA H100 80GB HBM3" (optional),
//    "framework": "hf-transformers" (optional: the framework profile the step ran, a preset name or path),
//    "attention_kernel": "cudnn" (optional: the attention kernel it ran, a GPU preset's attention_kernels name)}
// or {"steps": [step, ...]} with the same fields per step ("model", "device" and "gpu_name" may sit
// beside "steps"; a step's own win).
// seqpar-train keeps the model under config.model and the dtype under config.dtype; both are read.
// What ran the step is read from the documents the programs write, where the minimal fields are
// absent: "program": "seqpar-train" is framework seqpar-train with config.attention_engine's kernel;
// bench_torch_step with config.implementation "transformers" is hf-transformers.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "seqpar/core/plan.hpp"
#include "seqpar/sim/model.hpp"

namespace seqpar::reports {

struct MeasuredStep {
  std::string file, name;  // name: the step's own, else "<file>" or "<file>: steps[i]"
  sim::Model model;
  Plan plan;               // as written; normalized against the system when fitted
  std::string dtype;       // core's spelling (bf16, fp16, fp32, ...)
  double step_time_s = 0, peak_memory_bytes = 0;
  // False only when read with PeakMemory::optional and the step gives none (peak_memory_bytes 0):
  // `seqpar report` still sets its time beside the prediction, calibrate needs both.
  bool has_peak_memory = true;
  std::string device = "gpu";           // the step's "device", else its document's
  std::optional<std::string> gpu_name;  // the step's "gpu_name", else its document's (StepDocument)
  // The communicator it ran on (config.comm): "loopback" for a single-rank proxy, whose collectives
  // are device copies (comm_cost.hpp: loopback_system); empty when not recorded.
  std::string comm;
  // The share of step_time_s that is a cold first step (no warm-up: the programs' config.warmup 0
  // with config.steps 1 is a cold step, 2 the mean of a cold and a warm one, more a warm median).
  double cold_share = 0;
  // What ran it, as its document says (empty: it does not say), and where that was read.
  std::string framework, framework_from;
  std::string attention_kernel, attention_kernel_from;
};

// Whether a step without "peak_memory_bytes" is malformed (calibrate fits memory) or time-only (report).
enum class PeakMemory { required, optional };

// A document of measured steps: it has "step_time_s" and "plan", or a "steps" array, and is not a
// simulator prediction (kind "prediction"), which carries the same fields.
bool is_step_document(const nlohmann::json& doc);

struct StepDocument {
  std::vector<MeasuredStep> steps;
  std::string device = "gpu";           // the document's "device" when given (each step has its own too)
  std::optional<std::string> gpu_name;  // environment.gpu.name (seqpar-train), or "gpu_name"
};

// Reads one step document; seqpar::Error naming `where` and the field for anything malformed.
StepDocument read_step_document(const nlohmann::json& doc, const std::string& where, const std::string& file,
                                PeakMemory peak = PeakMemory::required);

}  // namespace seqpar::reports

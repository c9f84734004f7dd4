// seqpar-train against its PyTorch peer (scripts/bench_torch_step.py): training-step measurements of
// the same model shapes, plan (method, degrees, checkpointing and the other memory options), sequence
// length and GPU, set side by side with the ratios seqpar / PyTorch. Issue 15's bar is seqpar at least
// as fast with no more memory, so a step-time ratio <= 1 and a memory ratio <= 1 are seqpar's wins.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace seqpar::reports {

// The programs whose measurements are paired.
inline constexpr std::string_view kSeqparStepProgram = "seqpar-train";
inline constexpr std::string_view kTorchStepProgram = "bench_torch_step";

// True for a measurement document of either program.
bool is_peer_step_program(std::string_view program);

// One training step as the side-by-side reads it, from a measurement document of either program
// and one of its results (the plan and model are the result's, else the document's; "shape" is the
// model's sizes, or its name where the file gives only that):
// {"source", "program", "mode", "device", "gpu", "model", "shape", "plan_label", "seq_len", "gpus",
//  "step_time_s", "tflops_per_gpu", "peak_memory_bytes"} (the last two may be null).
// Throws seqpar::Error naming `where` and the field when the plan or a figure is malformed.
nlohmann::json peer_step_record(const nlohmann::json& doc, const nlohmann::json& result, std::string_view where,
                                const std::string& source);

// Rows of the side-by-side, in the order the seqpar-train records came, then the PyTorch records
// that matched none: {"model", "shape", "plan_label", "seq_len", "gpus", "gpu", "seqpar": record or
// null, "pytorch": record or null, "step_time_ratio", "tflops_ratio", "peak_memory_ratio"} (ratios
// seqpar / PyTorch; null when a side or a figure is missing). A record pairs with the first unpaired
// record of the other program with the same shape, plan label, sequence length, GPU count and GPU.
nlohmann::json pair_peer_steps(const nlohmann::json& records);

}  // namespace seqpar::reports

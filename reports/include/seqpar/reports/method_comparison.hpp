// The report's answer to "which plan, and what does each other method cost?": for every predicted
// (system, model, GPU count, sequence length), the fastest plan that fits, each method's own
// fastest plan relative to it (1.00 = the best), and each method's peak memory against the
// capacity. It feeds the one-line answers at the top of the report and the relative-throughput and
// memory-against-capacity figures.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace seqpar::reports {

// From report data's "points" (predictions only), cells in first-seen order:
// [{"system", "model", "gpus", "seq_len",
//   "best": {"method", "plan", "plan_label", "tokens_per_s_per_gpu", "source"} | null,
//   "methods": [{"method",                       // a method's name (core's order), or "no SP" (sp = 1)
//                "fits",                         // a plan of this method fits
//                "plan", "plan_label",           // its fastest fitting plan, else its leanest valid one
//                "tokens_per_s_per_gpu", "relative",   // null when none fits; relative = rate / best rate
//                "peak_memory_bytes", "memory_capacity_bytes",     // of that plan
//                "source"}],                                     // its source id (S1, ...)
//   "answer": "128K on 64 GPUs: Ulysses 8 x DP 8, selective checkpointing, 1.00; ring-zigzag 8: 0.93; ..."}]
nlohmann::json method_comparison(const nlohmann::json& points);

}  // namespace seqpar::reports

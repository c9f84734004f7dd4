// The report's tidy data: every input document (prediction, measurement, sweep collection, Google
// Benchmark) normalised into sources (provenance), points (plans with their figures), best plans,
// predicted-against-measured pairs, plain benchmark rows and validation verdicts. Written beside
// the report as JSON.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "seqpar/reports/calibrate.hpp"

namespace seqpar::reports {

// {"sources": [...], "points": [...], "best": [...], "comparisons": [...], "benchmarks": [...],
//  "peer_comparisons": [...] (seqpar-train beside bench_torch_step: peer_comparison.hpp),
//  "step_comparisons": {...} (measured training steps beside the simulator: step_comparison.hpp),
//  "method_comparison": [...] (per predicted length and GPU count, the best plan and each method
//  against it: method_comparison.hpp),
//  "validations": [...] (one verdict per seqpar-train --validate result: read_validation_verdict's
//  fields plus source, name, model, mode, backend, plan and plan_label; never a timing),
//  "documents": [...] (per predicted cell run under a packed-document workload: the ranking under
//  it beside one causal sequence's, and the per-rank work: document_comparison.hpp)}
// Sources get ids S1, S2, ... and every other entry names its source id. Measured training steps
// (documents with a top-level plan and step_time_s) are predicted as they ran (step_system.hpp):
// on `system` (a preset name or profile path; empty: the preset of each step's GPU) with `framework`
// (empty: the one each step's document names) instead of being listed as benchmark rows.
// Throws seqpar::Error naming the file and field for malformed input, and naming --system when
// the steps' system cannot be told.
nlohmann::json gather_report_data(const std::vector<InputDocument>& inputs, const std::string& system = "",
                                  const std::string& framework = "");

// "ulysses sp=8", "hybrid U4xR2", "ring-zigzag sp=4" (+ memory options when not the defaults).
std::string plan_label(const nlohmann::json& plan);
// Method and degrees without the memory options (core's describe_structure): one line of a
// throughput plot.
std::string structure_label(const nlohmann::json& plan);

// What a measurement mode means, for readers: "modelled (simulator)", "real ranks (one per GPU)", ...
std::string describe_mode(const std::string& mode);

}  // namespace seqpar::reports

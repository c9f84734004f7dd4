// The report's packed-document comparison: for every predicted cell run under a document workload
// (`seqpar sweep --documents`, `seqpar simulate --documents`, `seqpar advise --documents`), the
// workload as the document states
// it, the methods x load balancers ranked under it beside the same plans ranked on one causal
// sequence of the same length (the ranking seqpar gives without --documents), and each ring rank's
// attention work per load balancer (the per-rank work figure). Nothing is recomputed here: every
// figure is the simulator's, read from the input document.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace seqpar::reports {

// From one prediction document (`where` names it in errors; `src` is its source id). An empty
// array for a document without a workload. Entries, one per (system, GPUs, length):
// {"source", "system", "model", "gpus", "seq_len",
//  "workload": {"documents", "packing", "drawn_mean", "drawn_std", "drawn_count", "pieces_per_sequence",
//               "work_ratio_mean", "work_ratio_min", "work_ratio_max"},
//  "rows": [{"structure", "balancer", "ring_degree",
//            "tokens_per_s_per_gpu", "fits", "rank",   // under the workload (rate null: an invalid plan)
//            "one_sequence_tokens_per_s_per_gpu", "one_sequence_fits", "one_sequence_rank",  // one causal sequence
//            // ranks 1, 2, ... over the rows that fit (every row with a rate where none fits); 0: not ranked
//            "imbalance_mean", "imbalance_p95", "rank_work": [...]}],  // rows in workload-rank order
//  "answer": "..."}   // the best under the workload against the best on one sequence, in words
// An advise entry ("one_sequence_from": "advise") has no one-sequence figures of its own, nor
// per-rank counts (imbalance null, rank_work empty): pair_one_sequence fills them.
// Throws seqpar::Error naming `where` and the field when a workload's field is malformed.
nlohmann::json document_comparisons(const nlohmann::json& doc, std::string_view where, const std::string& src);

// For advise entries: each structure's one-sequence rate is its fastest fitting plan among the
// report's predicted points made without a workload for the same system, model, GPUs and length
// (an advise without --documents given beside it), and the ranks are set again.
void pair_one_sequence(nlohmann::json& entries, const nlohmann::json& points);

}  // namespace seqpar::reports

// The packed-document workload options (--documents, --packing, --doc-seed, --doc-batches,
// --balancer) and what simulate prints of a workload: its section (document lengths, the work the
// mask leaves) and the methods x load balancers table at the plan's SP degree.
#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "seqpar/core/doc_layout.hpp"
#include "seqpar/core/workload.hpp"
#include "seqpar/core/workload_flags.hpp"
#include "seqpar/sim/document_cost.hpp"
#include "seqpar/sim/simulate.hpp"

namespace seqpar::cli {

// The flags as every program has them (core/workload_flags.hpp); --balancer's default is the
// method's own layout (sim::native_balancer).
using DocumentOptions = WorkloadFlags;
inline void add_documents(CLI::App* app, DocumentOptions& o) { add_workload_flags(app, o, true); }

// The workload the options name (WorkloadFlags::workload), sampled at seq_len; nullopt without
// --documents.
std::optional<SampledWorkload> sample_documents(const DocumentOptions& o, std::int64_t seq_len);
// --balancer, or the plan's own.
Balancer plan_balancer(const DocumentOptions& o, const seqpar::Plan& p);

// One row of the methods x balancers table: the method at the plan's SP, GPUs and memory options.
struct DocumentRow {
  seqpar::Plan plan;
  Balancer balancer = Balancer::contiguous;
  std::optional<sim::DocumentCosts> costs;
  sim::Result docs, uniform;  // under the workload; one causal sequence of the same length
  std::string refused;        // why the row has no numbers (a plan rule, or the balancer's)
};
std::vector<DocumentRow> document_rows(const sim::Model& m, const sim::System& s, const seqpar::Plan& p,
                                       const SampledWorkload& w);

// Each ring rank's attention tiles over the mean of the ranks (mean over the sampled sequences).
std::vector<double> rank_work(const sim::DocumentCosts& c);

// The workload's own lines (document lengths drawn and packed, the work the mask leaves), then for
// simulate the plan's balancer: its per-rank work and imbalance.
void print_workload_summary(const DocumentOptions& o, const SampledWorkload& w);
nlohmann::json workload_summary_json(const DocumentOptions& o, const SampledWorkload& w);
void print_workload(const DocumentOptions& o, const SampledWorkload& w, const seqpar::Plan& p,
                    const sim::DocumentCosts& c);
void print_document_rows(const std::vector<DocumentRow>& rows);
// How the GPU's attention kernel is charged for short documents: its measured varlen figure and
// source, or that there is none and what is assumed (hardware.hpp: VarlenAttention).
void print_short_documents(const sim::Gpu& g, const sim::DocumentCosts* c = nullptr);
nlohmann::json short_documents_json(const sim::Gpu& g, const sim::DocumentCosts* c = nullptr);
nlohmann::json workload_json(const DocumentOptions& o, const SampledWorkload& w, const sim::DocumentCosts& c);
nlohmann::json document_rows_json(const std::vector<DocumentRow>& rows);

}  // namespace seqpar::cli

// One plan through the cost models: step time and its breakdown, throughput, MFU, peak memory.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "seqpar/core/doc_layout.hpp"
#include "seqpar/sim/elementwise_cost.hpp"
#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/memory_cost.hpp"
#include "seqpar/sim/model.hpp"
#include "seqpar/sim/moe_cost.hpp"
#include "seqpar/sim/pipeline_cost.hpp"
#include "seqpar/sim/plan.hpp"
#include "seqpar/sim/step_figures.hpp"
#include "seqpar/sim/tensor_parallel_cost.hpp"

namespace seqpar::sim {

struct DocumentCosts;

struct TimeBreakdown {
  double forward = 0, backward = 0;        // compute of each pass (backward includes recomputation)
  double compute = 0;                      // all kernel time: gemm + attention + elementwise + recompute
  double gemm = 0, attention_compute = 0, elementwise = 0, recompute = 0;
  double attention = 0;                    // attention fwd+bwd of all layers with its exposed communication
  double attention_comm = 0, exposed_attention_comm = 0;
  double dp_comm = 0, exposed_dp_comm = 0;
  double tp_comm = 0;                      // tensor parallelism's all-gathers and reduce-scatters, all exposed
  // Pipeline parallelism (pipeline_cost.hpp): the sends between stages (all exposed, in comm and
  // exposed_comm) and the bubble, (p - 1) / v micro-batch times of the slowest stage; 0 without stages.
  double pp_comm = 0, pipeline_bubble = 0;
  double expert_comm = 0;                  // the experts' dispatch and combine all-to-alls (moe_cost.hpp), all exposed
  // attention + data parallel + tensor parallel + pipeline sends + expert parallel
  double comm = 0, exposed_comm = 0;
  double optimizer = 0;
  double offload = 0, exposed_offload = 0; // checkpoint traffic to and from host memory
  // What a cold first step adds once (pinning the host buffers the framework keeps: its
  // host_pin_s_per_gib), beside and not in the step time: a measured step without warm-up pays it.
  double first_step = 0;
  // FP8's casts (fp8_cost.hpp): the GEMM operands' casts of every micro-step and the weights' once
  // per step; already in elementwise (and in recompute where full checkpointing casts again).
  double fp8_casts = 0;
};

struct Result {
  Plan plan;
  bool valid = false;
  std::vector<std::string> errors;
  bool fits = false;
  double step_time_s = 0;
  double tokens_per_s_per_gpu = 0;
  double tflops_per_gpu = 0;    // model FLOPs only: recomputation excluded
  double mfu = 0;
  double model_flops_per_gpu = 0;
  double capacity_bytes = 0;
  // Host memory of one node: what its GPUs offload (memory.host_bytes each, for the GPUs of the plan
  // on a node), against the system's host memory (0: not given, not checked).
  double host_node_bytes = 0, host_capacity_bytes = 0;
  bool gpu_fits = false, host_fits = true;  // fits = both
  MemoryEstimate memory;
  TimeBreakdown time;
  StepFigures figures;  // the per-phase figures `time` adds up (for the step timeline)
  double peak_memory_bytes() const { return memory.peak.total(); }
  // The load balancer of a packed-document workload's layout (document_cost.hpp); none without one.
  std::optional<Balancer> balancer;
  // The sequence length the memory estimate charged, where a packed-document workload's balancer
  // gives its fullest rank more than seq_len / sp tokens (per-document padding to a multiple of
  // 2 x CP, documents moved whole): DocumentCosts::memory_seq_len. 0: the plan's own.
  std::int64_t memory_seq_len = 0;
};

// The plan should be normalized (see plan.hpp). An invalid plan gives valid = false with errors
// and no numbers; it never throws for plan content.
Result simulate(const Model& m, const System& s, const Plan& p);
// The plan on a packed-document workload (document_cost.hpp: its sampled batches counted for this
// plan's layout and load balancer); with one document filling every sequence, simulate()'s result.
Result simulate(const Model& m, const System& s, const Plan& p, const DocumentCosts& docs);

// What a step costs by the plan's structure alone (TP, method, degrees, placement, micro-batch,
// length), whatever its memory options and accumulation: each layer's GEMMs, elementwise work,
// attention with its communication and TP collectives, the LM head and the loss's own work, for
// one micro-step. The advisor derives them once for the ~160 memory-option sets it tries on a
// structure.
struct StructureCosts {
  Plan structure;  // the plan they were derived for, memory options and accumulation at their defaults
  double tokens = 0;  // micro_batch x seq_len / sp: one rank's tokens per micro-step
  double gemm_fwd_s = 0, gemm_bwd_s = 0;  // one layer
  ElementwiseCost elementwise;
  AttentionCost attention;
  TensorParallelCost tensor_parallel;
  MoeCost moe;  // a MoE model's MLP and all-to-alls (moe_cost.hpp); zeros for a dense model
  double head_fwd_s = 0, head_bwd_s = 0, loss_elementwise_s = 0;
  // The data-parallel collectives of the bf16 parameters over the ZeRO group (gpus / tp ranks),
  // which the ZeRO stage picks from.
  int zero_group_ranks = 1;
  double zero_all_reduce_s = 0, zero_reduce_scatter_s = 0, zero_all_gather_s = 0;
  // The stages' split and the largest stage's parameters (pipeline_cost.hpp), which the time half
  // asks for in every memory-option set.
  StageLayout stages;
  PipelineSend pipeline_send;  // one send between stages (pipeline_cost.hpp); zeros without stages
  std::int64_t memory_seq_len = 0;  // the workload's (DocumentCosts::memory_seq_len); 0 without one
  double heaviest_work_factor = 1;  // the workload's (DocumentCosts::heaviest_work_factor); 1 without one
};
StructureCosts structure_costs(const Model& m, const System& s, const Plan& p, const DocumentCosts* docs = nullptr);

// simulate() in two halves, for a search that orders plans by speed before it asks which fit (the
// advisor times every memory-option set of a structure and estimates the memory of the fastest
// few): simulate_time() leaves the memory out (memory, the fits, host_node_bytes,
// host_capacity_bytes and time.first_step stay zero) and add_memory() adds it. Together they give
// simulate()'s numbers; a half whose numbers are not finite makes the result invalid, and
// add_memory() leaves an invalid result as it is. `c` must be structure_costs() of a plan that
// differs from `p` in its memory options or accumulation alone (std::logic_error otherwise).
Result simulate_time(const Model& m, const System& s, const Plan& p, const StructureCosts& c);
void add_memory(const Model& m, const System& s, Result& r);

// The named terms of a result's peak (the `simulate` table, `memory_terms` in the JSON), which
// simulate() leaves out: the planner's search needs the sums alone.
std::vector<MemoryTerm> memory_terms(const Model& m, const System& s, const Result& r);

}  // namespace seqpar::sim

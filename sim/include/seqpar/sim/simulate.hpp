// One plan through the cost models: step time and its breakdown, throughput, MFU, peak memory.
#pragma once
#include <string>
#include <vector>

#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/memory_cost.hpp"
#include "seqpar/sim/model.hpp"
#include "seqpar/sim/plan.hpp"
#include "seqpar/sim/step_figures.hpp"

namespace seqpar::sim {

struct TimeBreakdown {
  double forward = 0, backward = 0;        // compute of each pass (backward includes recomputation)
  double compute = 0;                      // all kernel time: gemm + attention + elementwise + recompute
  double gemm = 0, attention_compute = 0, elementwise = 0, recompute = 0;
  double attention = 0;                    // attention fwd+bwd of all layers with its exposed communication
  double attention_comm = 0, exposed_attention_comm = 0;
  double dp_comm = 0, exposed_dp_comm = 0;
  double tp_comm = 0;                      // tensor parallelism's all-gathers and reduce-scatters, all exposed
  double comm = 0, exposed_comm = 0;       // attention + data parallel + tensor parallel
  double optimizer = 0;
  double offload = 0, exposed_offload = 0; // checkpoint traffic to and from host memory
  // What a cold first step adds once (pinning the host buffers the framework keeps: its
  // host_pin_s_per_gib), beside and not in the step time: a measured step without warm-up pays it.
  double first_step = 0;
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
};

// Whether a plan's memory fits: the GPU's (its peak against the capacity) and the node's host memory
// (what the node's GPUs offload against the system's, when it gives one). simulate() decides `fits`
// with it, and the advisor asks it before timing a plan.
struct MemoryFit {
  bool gpu = false, host = true;
  double host_node_bytes = 0;
  bool both() const { return gpu && host; }
};
MemoryFit memory_fit(const System& s, const Plan& p, const MemoryEstimate& e);
// The host half alone, from one rank's host bytes (memory_cost.hpp: host_offload_bytes).
bool host_memory_fits(const System& s, const Plan& p, double host_bytes_per_gpu);

// The plan should be normalized (see plan.hpp). An invalid plan gives valid = false with errors
// and no numbers; it never throws for plan content.
Result simulate(const Model& m, const System& s, const Plan& p);

// The named terms of a result's peak (the `simulate` table, `memory_terms` in the JSON), which
// simulate() leaves out: the planner's search needs the sums alone.
std::vector<MemoryTerm> memory_terms(const Model& m, const System& s, const Result& r);

}  // namespace seqpar::sim

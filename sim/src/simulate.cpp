#include "seqpar/sim/simulate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include "seqpar/core/tiling.hpp"
#include "seqpar/sim/attention_cost.hpp"
#include "seqpar/sim/comm_cost.hpp"
#include "seqpar/sim/document_cost.hpp"
#include "seqpar/sim/compute_cost.hpp"
#include "seqpar/sim/elementwise_cost.hpp"
#include "seqpar/sim/framework_terms.hpp"
#include "seqpar/sim/fp8_cost.hpp"
#include "seqpar/sim/pipeline_cost.hpp"
#include "seqpar/sim/moe_cost.hpp"
#include "seqpar/sim/tensor_parallel_cost.hpp"
#include "seqpar/sim/validity.hpp"
#include "element_bytes.hpp"

namespace seqpar::sim {

namespace {

// AdamW on the GPU reads and writes fp32 master weight, both moments, the bf16 gradient and
// writes the bf16 weight: 4+4+4+2 read, 4+4+4+2 written.
constexpr double kAdamBytesPerParam = 28.0;

struct DataParallelCost {
  double total = 0, exposed = 0;
  // One occurrence of each: during a forward, during a backward, after the last backward.
  double in_fwd = 0, in_bwd = 0, after = 0, in_fwd_exposed = 0, in_bwd_exposed = 0;
  bool bwd_every_micro_step = false;  // in_bwd runs in every micro-step's backward (ZeRO-2/3), else once
};

// Gradient and parameter traffic over the data x sequence parallel group (the ranks that hold the
// same TP shard: gpus / tp of them, tp world ranks apart), on its own stream,
// overlapped with the pass it can hide under: all but the last layer of that pass's elapsed time
// (kernels and attention communication alike). `fwd` and `bwd` are one micro-step's passes.
//
// With gradient accumulation (k micro-steps per optimizer step), what runs how often follows
// DeepSpeed (runtime/engine.py, allreduce_gradients: "ZeRO stage >= 2 communicates during non
// gradient accumulation boundaries as well ... [else] communicate only at gradient accumulation
// boundaries") and Megatron-LM (forward_backward_no_pipelining runs all but the last micro-batch
// under no_sync, so DDP's all-reduce and the distributed optimizer's reduce-scatter run once, in
// the last backward): ZeRO-0/1 reduce once per optimizer step, under the last micro-step's
// backward; ZeRO-2 reduce-scatters in every micro-step's backward (its gradients are partitioned,
// so each micro-step's must leave the GPU); ZeRO-3 also gathers the parameters in every forward
// and backward. The ZeRO-1/2 parameter all-gather follows the optimizer, once.
DataParallelCost data_parallel_cost(const Model& m, const Plan& p, const StructureCosts& sc, double fwd, double bwd) {
  DataParallelCost c;
  if (sc.zero_group_ranks <= 1) return c;
  // A stage's layers (all of them without stages): the reduction hides under all but its last.
  const double L = stage_layers(m, p, sc.stages.split);
  const double hide = (L - 1) / L;
  switch (p.mem.zero) {
    case 0: c.in_bwd = sc.zero_all_reduce_s; break;
    case 1: c.in_bwd = sc.zero_reduce_scatter_s; c.after = sc.zero_all_gather_s; break;
    case 2:
      c.in_bwd = sc.zero_reduce_scatter_s;
      c.after = sc.zero_all_gather_s;
      c.bwd_every_micro_step = true;
      break;
    default:
      c.in_fwd = sc.zero_all_gather_s;
      c.in_bwd = sc.zero_all_gather_s + sc.zero_reduce_scatter_s;
      c.bwd_every_micro_step = true;
      break;
  }
  const double k = p.grad_accum_steps, k_bwd = c.bwd_every_micro_step ? k : 1.0;
  c.in_fwd_exposed = std::max(0.0, c.in_fwd - fwd * hide);
  c.in_bwd_exposed = std::max(0.0, c.in_bwd - bwd * hide);
  c.total = k * c.in_fwd + k_bwd * c.in_bwd + c.after;
  c.exposed = k * c.in_fwd_exposed + k_bwd * c.in_bwd_exposed + c.after;
  return c;
}

// Bytes of the weights a rank keeps in host memory under --offload-params (the framework's states
// that move with them: DeepSpeed's bf16 partition, Hugging Face's fp32 parameters), its ZeRO-3
// partition: what crosses its PCIe link each time a pass fetches them.
double offloaded_param_bytes(const System& s, const Plan& p, const StageLayout& stages) {
  if (!p.mem.offload_params) return 0;
  const double psi = stages.params_per_tp_rank, D = zero_group_size(p);
  const double psi_sharded = stages.zero_sharded_params_per_tp_rank;  // ZeRO's shards (EP: tensor_parallel_cost.hpp)
  double bytes = 0;
  for (const StateTerm& t : s.profile.states)
    if (t.offloaded_with_params)
      bytes += t.bytes_per_param * (p.mem.zero >= t.zero_stage ? psi_sharded : psi) / (p.mem.zero >= t.zero_stage ? D : 1);
  return bytes;
}

double optimizer_time(const System& s, const Plan& p, const StageLayout& stages) {
  const double shard = (p.mem.zero >= 1 ? stages.zero_sharded_params_per_tp_rank : stages.params_per_tp_rank) /
                       (p.mem.zero >= 1 ? zero_group_size(p) : 1);
  // Offloaded weights updated on the GPU go back to the host after the step.
  const double params_back =
      p.mem.offload_params && !p.mem.offload_optimizer ? offloaded_param_bytes(s, p, stages) / s.gpu.pcie_bytes_per_s : 0.0;
  if (!p.mem.offload_optimizer) return framework_memory_bound_time(s, kAdamBytesPerParam * shard) + params_back;
  // Gradients down and weights up over PCIe, then the host updates every GPU's shard of its node.
  const double gpus_on_node = std::min(p.gpus, s.gpus_per_node);
  return 2 * kBf16 * shard / s.gpu.pcie_bytes_per_s + shard * gpus_on_node / s.host_adam_params_per_s;
}

// Each quantity a result must hold finite and non-negative, by its name in the JSON.
template <class F>
void for_each_quantity(const Result& r, F f) {
  const TimeBreakdown& t = r.time;
  const MemoryBreakdown& b = r.memory.peak;
  f("step_time_s", r.step_time_s);
  f("tokens_per_s_per_gpu", r.tokens_per_s_per_gpu);
  f("tflops_per_gpu", r.tflops_per_gpu);
  f("mfu", r.mfu);
  f("model_flops_per_gpu", r.model_flops_per_gpu);
  f("memory_capacity_bytes", r.capacity_bytes);
  f("peak_memory_bytes", r.peak_memory_bytes());
  f("time.compute_s", t.compute);
  f("time.forward_s", t.forward);
  f("time.backward_s", t.backward);
  f("time.gemm_s", t.gemm);
  f("time.attention_compute_s", t.attention_compute);
  f("time.elementwise_s", t.elementwise);
  f("time.recompute_s", t.recompute);
  f("time.attention_s", t.attention);
  f("time.attention_comm_s", t.attention_comm);
  f("time.exposed_attention_comm_s", t.exposed_attention_comm);
  f("time.dp_comm_s", t.dp_comm);
  f("time.tp_comm_s", t.tp_comm);
  f("time.pp_comm_s", t.pp_comm);
  f("time.pipeline_bubble_s", t.pipeline_bubble);
  f("time.exposed_dp_comm_s", t.exposed_dp_comm);
  f("time.comm_s", t.comm);
  f("time.exposed_comm_s", t.exposed_comm);
  f("time.optimizer_s", t.optimizer);
  f("time.offload_s", t.offload);
  f("time.exposed_offload_s", t.exposed_offload);
  f("time.first_step_s", t.first_step);
  f("memory.parameters_bytes", b.parameters);
  f("memory.gradients_bytes", b.gradients);
  f("memory.optimizer_states_bytes", b.optimizer_states);
  f("memory.activations_bytes", b.activations);
  f("memory.checkpoints_bytes", b.checkpoints);
  f("memory.attention_buffers_bytes", b.attention_buffers);
  f("memory.working_bytes", b.working);
  f("memory.logits_bytes", b.logits);
  f("memory.reserved_bytes", b.reserved);
  f("memory_phases.layer_backward_bytes", r.memory.layer_phase_bytes);
  f("memory_phases.loss_bytes", r.memory.loss_phase_bytes);
  f("memory_phases.optimizer_bytes", r.memory.optimizer_phase_bytes);
  f("host_memory_bytes", r.memory.host_bytes);
  f("host_memory_per_node_bytes", r.host_node_bytes);
}

// A result is only as good as its least trustworthy number: a NaN, an infinity or a negative time
// or size (from extreme figures in a user's preset) makes the plan invalid rather than reported.
void check_numbers(Result& r) {
  // All at once first, without their names (the planner checks millions of results, nearly all
  // sound), then each by name where one is not.
  bool sound = r.step_time_s > 0;
  // Finite and non-negative is 0 <= v <= the largest double: NaN fails both comparisons.
  constexpr double kMax = std::numeric_limits<double>::max();
  for_each_quantity(r, [&](const char*, double v) { sound &= (v >= 0) & (v <= kMax); });
  if (sound) return;
  for_each_quantity(r, [&](const char* name, double v) {
    if (!std::isfinite(v) || v < 0)
      r.errors.push_back(fmt::format("{}: the model gives {}, not a finite non-negative number; the hardware or "
                                     "model figures are outside what the cost model can represent", name, v));
  });
  // A step takes time: zero would mean infinite throughput.
  if (r.errors.empty() && !(r.step_time_s > 0))
    r.errors.push_back(fmt::format("step_time_s: the model gives {}; a step must take a positive time", r.step_time_s));
  if (!r.errors.empty()) {
    r.valid = false;
    r.fits = false;
  }
}

// The per-phase figures the step time was added up from (simulate.hpp: Result::figures).
struct LayerCosts {
  double gemm_f, gemm_b, elem_f, elem_b;
  AttentionCost at;
  double head_f, head_b, loss_recompute;
  TensorParallelCost tp;
  double layers;  // the pacing stage's (pipeline_cost.hpp; all of them without stages)
};
void record_figures(Result& r, const Plan& p, const LayerCosts& c, const DataParallelCost& dpc) {
  const TimeBreakdown& t = r.time;
  StepFigures& f = r.figures;
  const double L = c.layers;
  f.layers = static_cast<int>(L);
  f.gemm_fwd_s = c.gemm_f;
  f.gemm_bwd_s = c.gemm_b;
  f.elementwise_fwd_s = c.elem_f;
  f.elementwise_bwd_s = c.elem_b;
  f.attention = c.at;
  f.full_recompute = p.mem.checkpoint == Checkpoint::full;
  f.head_fwd_s = c.head_f;
  f.tp_layer_fwd_s = c.tp.layer_fwd_s;
  f.tp_layer_bwd_s = c.tp.layer_bwd_s;
  f.tp_head_fwd_s = c.tp.head_fwd_s;
  f.tp_head_bwd_s = c.tp.head_bwd_s;
  f.head_bwd_s = c.head_b;
  f.loss_recompute_s = c.loss_recompute;
  // t.recompute holds each micro-step's L layers' recomputation (the whole forward under full
  // checkpointing, which full_recompute lays out) and the loss's once.
  if (!f.full_recompute) f.layer_recompute_s = (t.recompute / p.grad_accum_steps - c.loss_recompute) / L;
  f.dp_fwd_s = dpc.in_fwd;
  f.dp_bwd_s = dpc.in_bwd;
  f.dp_after_s = dpc.after;
  f.dp_fwd_exposed_s = dpc.in_fwd_exposed;
  f.dp_bwd_exposed_s = dpc.in_bwd_exposed;
  f.micro_steps = p.grad_accum_steps;
  f.dp_bwd_every_micro_step = dpc.bwd_every_micro_step;
  // (the offload figures are recorded where simulate() computes them)
  f.optimizer_s = t.optimizer;
  f.unattributed_s = std::max(0.0, r.step_time_s - (t.compute + t.exposed_comm + t.optimizer + t.exposed_offload));
}

// A result of the plan with its rules checked: invalid (with the errors) or ready for the halves.
Result checked_result(const Model& m, const System& s, const Plan& p) {
  Result r;
  r.plan = p;
  r.capacity_bytes = s.gpu.memory_bytes;
  r.valid = check_plan(m, s, p, r.errors);
  return r;
}

// The plan with what structure_costs() does not depend on set to one value.
Plan structure_of(Plan p) {
  p.mem = MemoryOptions{};
  p.grad_accum_steps = 1;
  return p;
}

// simulate()'s time half on a valid plan, its numbers not yet checked: everything but the memory.
void time_half(const Model& m, const System& s, const Plan& p, const StructureCosts& c, Result& r) {
  const Gpu& g = s.gpu;
  const double T = c.tokens, tp = p.tp;
  const bool full = p.mem.checkpoint == Checkpoint::full;
  // ALST's tiles (tiled MLP and loss only): their rows and count.
  auto tile = [&] { return alst_tile_rows(m, p); };
  auto tiles = [&] { return double(alst_tile_count(p.seq_len / p.sp, m.hidden)); };
  const double gemm_f = c.gemm_fwd_s, gemm_b = c.gemm_bwd_s;
  const ElementwiseCost& elem = c.elementwise;
  const double elem_f = elem.fwd_s, elem_b = elem.bwd_s;
  const AttentionCost& at = c.attention;
  TensorParallelCost tpc = c.tensor_parallel;
  // The layers one rank runs and whether the LM head and loss run there: the whole model without
  // stages; with them, the stage whose micro-batch takes longest (pipeline_cost.hpp: pacing_stage),
  // which sets the pipeline's pace. It is chosen on a layer's and the head's kernels and exposed
  // communication (the recomputation of full checkpointing in the layer's), the terms that differ
  // between stages.
  const PacingStage pace = p.pp <= 1 ? PacingStage{0, double(m.layers), true} : [&] {
    const double layer_s = gemm_f + gemm_b + elem_f + elem_b + at.fwd_s + at.bwd_s + tpc.layer_fwd_s +
                           tpc.layer_bwd_s + (full ? gemm_f + elem_f + at.fwd_s + tpc.layer_fwd_s : 0.0);
    const double head_s = c.head_fwd_s + c.head_bwd_s + c.loss_elementwise_s + tpc.head_fwd_s + tpc.head_bwd_s;
    return pacing_stage(m, p, c.stages.split, layer_s, head_s);
  }();
  const double L = pace.layers, H = pace.has_head ? 1.0 : 0.0;
  // A stage without the head runs none of its work (H = 0); with it (H = 1) the figures are exact.
  const double head_f = H * c.head_fwd_s, head_b = H * c.head_bwd_s;
  tpc.head_fwd_s *= H;
  tpc.head_bwd_s *= H;

  TimeBreakdown& t = r.time;
  double recompute_attention_exposed = 0, recompute_attention_comm = 0, recompute_tp_comm = 0;
  if (full) {
    // The whole layer forward again, its attention communication included.
    t.recompute = L * (gemm_f + elem_f + at.fwd_kernel_s);
    recompute_tp_comm = L * tpc.layer_fwd_s;
    recompute_attention_exposed = L * (at.fwd_s - at.fwd_kernel_s);
    recompute_attention_comm = L * at.fwd_comm_s;
  } else {
    if (p.mem.checkpoint == Checkpoint::selective)
      t.recompute += L * elem.selective_s;
    if (p.mem.tiled_mlp)
      t.recompute += L * linear_gemm_time(s, p, mlp_gemm_flops(m, T) / tp, tile(), int(3 * tiles() + 0.5));
  }
  const double loss_recompute = H * (p.mem.tiled_loss ? framework_gemm_time(s, head_gemm_flops(m, T) / tp, tile(), int(tiles() + 0.5)) : 0.0);
  t.recompute += loss_recompute;

  const double loss_elem = H * c.loss_elementwise_s;
  t.gemm = L * (gemm_f + gemm_b) + head_f + head_b;
  t.attention_compute = L * (at.fwd_kernel_s + at.bwd_kernel_s);
  t.elementwise = L * (elem_f + elem_b) + loss_elem;
  t.forward = L * (gemm_f + elem_f + at.fwd_kernel_s) + head_f;
  t.backward = L * (gemm_b + elem_b + at.bwd_kernel_s) + head_b + loss_elem + t.recompute;
  t.compute = t.forward + t.backward;

  t.attention_comm = L * (at.fwd_comm_s + at.bwd_comm_s) + recompute_attention_comm;
  const double exposed_fwd = L * (at.fwd_s - at.fwd_kernel_s);
  const double exposed_bwd = L * (at.bwd_s - at.bwd_kernel_s) + recompute_attention_exposed;
  t.exposed_attention_comm = exposed_fwd + exposed_bwd;
  // TP's all-gathers and reduce-scatters, each exposed (tensor_parallel_cost.hpp).
  const double tp_fwd = L * tpc.layer_fwd_s + tpc.head_fwd_s;
  const double tp_bwd = L * tpc.layer_bwd_s + tpc.head_bwd_s + recompute_tp_comm;
  t.tp_comm = tp_fwd + tp_bwd;
  // The experts' dispatch and combine all-to-alls, each exposed (moe_cost.hpp); full checkpointing
  // runs the forward's again. Zero without expert parallelism.
  const double ep_fwd = L * c.moe.all_to_all_fwd_s;
  const double ep_bwd = L * c.moe.all_to_all_bwd_s + (full ? L * c.moe.all_to_all_fwd_s : 0.0);
  t.expert_comm = ep_fwd + ep_bwd;
  t.attention = t.attention_compute + t.exposed_attention_comm + (full ? L * at.fwd_kernel_s : 0);

  // Host traffic over the GPU's PCIe link, hidden under a pass as far as the framework overlaps it
  // (Framework::checkpoints_overlapped, params_prefetched).
  if (full && p.mem.offload_checkpoints) {
    const double bytes = L * stored_bytes_per_token(m, s, p, Checkpoint::full) * T;
    const double one_way = bytes / g.pcie_bytes_per_s;
    const bool overlapped = s.profile.checkpoints_overlapped;
    t.offload = 2 * one_way;
    r.figures.offload_one_way_s = one_way;
    r.figures.offload_fwd_exposed_s = overlapped ? std::max(0.0, one_way - t.forward) : one_way;
    r.figures.offload_bwd_exposed_s = overlapped ? std::max(0.0, one_way - t.backward) : one_way;
    t.exposed_offload = r.figures.offload_fwd_exposed_s + r.figures.offload_bwd_exposed_s;
  }
  // Offloaded parameters: each pass fetches every layer's weights from the host before the ZeRO-3
  // all-gather (the full checkpointing recompute runs on the backward's fetch). Prefetched, a
  // layer's fetch hides under the layers before it, the first layer's never.
  if (const double param_bytes = offloaded_param_bytes(s, p, c.stages); param_bytes > 0) {
    const double fetch = param_bytes / g.pcie_bytes_per_s;
    auto exposed = [&](double pass) {
      return s.profile.params_prefetched ? std::max(fetch / L, fetch - pass * (L - 1) / L) : fetch;
    };
    r.figures.params_fetch_s = fetch;
    r.figures.params_fwd_exposed_s = exposed(t.forward);
    r.figures.params_bwd_exposed_s = exposed(t.backward);
    t.offload += 2 * fetch;
    t.exposed_offload += r.figures.params_fwd_exposed_s + r.figures.params_bwd_exposed_s;
  }

  // Everything above is one micro-step; an optimizer step runs grad_accum_steps of them, each its
  // own forward and backward with its attention communication and checkpoint traffic. The data-
  // parallel traffic runs per micro-step or once by ZeRO stage (data_parallel_cost), and the
  // optimizer once.
  const double k = p.grad_accum_steps;
  // Pipeline stages (pipeline_cost.hpp): the fill and drain add (p - 1) / v micro-step times of the
  // slowest stage (its kernels, exposed communication, host traffic and overhead), the sends
  // between stages their own time in every slot.
  // Under packed documents the micro-batches' attention differs: a pipeline whose every stage takes
  // t_j for micro-batch j runs sum_j t_j + (p - 1) max_j t_j (a proportionate flow shop), so the
  // fill and drain run at the heaviest sampled sequence's attention (StructureCosts::
  // heaviest_work_factor), the micro-batches themselves at the mean's.
  const PipelineCost pc = pipeline_cost(p, c.pipeline_send);
  if (p.pp > 1) {
    const double heavier_attention =
        (c.heaviest_work_factor - 1) * L * (at.fwd_kernel_s * (full ? 2 : 1) + at.bwd_kernel_s);
    t.pipeline_bubble = pc.bubble_slots * (t.compute + exposed_fwd + exposed_bwd + tp_fwd + tp_bwd + t.exposed_offload +
                                           s.framework.step_overhead_s + heavier_attention);
  }
  t.pp_comm = pc.comm_s;
  const DataParallelCost dpc =
      data_parallel_cost(m, p, c, t.forward + exposed_fwd + tp_fwd + ep_fwd, t.backward + exposed_bwd + tp_bwd + ep_bwd);
  for (double* per_micro_step : {&t.forward, &t.backward, &t.compute, &t.gemm, &t.attention_compute, &t.elementwise,
                                 &t.recompute, &t.attention, &t.attention_comm, &t.exposed_attention_comm, &t.offload,
                                 &t.exposed_offload, &t.tp_comm, &t.expert_comm})
    *per_micro_step *= k;
  // FP8 weights are cast (with their transposes) once per optimizer step and cached for its
  // micro-steps (Transformer Engine's is_first_microbatch), before the first forward.
  const double weight_cast = framework_memory_bound_time(s, fp8_weight_cast_bytes(m, p));
  r.figures.fp8_weight_cast_s = weight_cast;
  t.elementwise += weight_cast;
  t.forward += weight_cast;
  t.compute += weight_cast;
  t.fp8_casts = k * L * (elem.fp8_cast_fwd_s * (full ? 2 : 1) + elem.fp8_cast_bwd_s) + weight_cast;
  t.dp_comm = dpc.total;
  t.exposed_dp_comm = dpc.exposed;
  t.comm = t.attention_comm + t.dp_comm + t.tp_comm + t.pp_comm + t.expert_comm;
  t.exposed_comm = t.exposed_attention_comm + t.exposed_dp_comm + t.tp_comm + t.pp_comm + t.expert_comm;
  t.optimizer = optimizer_time(s, p, c.stages);

  // A calibrated profile's fixed framework overhead (0 otherwise: framework_terms.hpp), once per
  // micro-step: the launches and host work it stands for recur with every forward and backward.
  r.step_time_s = t.compute + t.exposed_comm + t.optimizer + t.exposed_offload + k * s.framework.step_overhead_s +
                  t.pipeline_bubble;
  // The model's FLOPs per GPU: every layer's and the head's, shared by the tp x pp ranks of a
  // pipeline (a stage's layers, the head on the last: the average over the stages).
  const double Lm = m.layers, pp = p.pp;
  const double model_flops =
      k * (3 * (Lm * layer_gemm_flops(m, T) + head_gemm_flops(m, T)) / tp + Lm * 3.5 * at.model_flops_fwd) / pp;
  r.model_flops_per_gpu = model_flops;
  r.tflops_per_gpu = model_flops / r.step_time_s / 1e12;
  r.mfu = model_flops / r.step_time_s / g.bf16_flops;
  r.tokens_per_s_per_gpu = k * T / tp / pp / r.step_time_s;  // a TP group's and a pipeline's ranks share their T tokens

  // The step timeline draws the loss's memory-bound work with the head's backward.
  record_figures(r, p, {gemm_f, gemm_b, elem_f, elem_b, at, head_f, head_b + loss_elem, loss_recompute, tpc, L}, dpc);
  r.figures.ep_layer_fwd_s = c.moe.all_to_all_fwd_s;
  r.figures.ep_layer_bwd_s = c.moe.all_to_all_bwd_s;
}

// The plan the memory estimate charges: the result's, at the workload's memory length where its
// balancer gives a rank more tokens (Result::memory_seq_len).
Plan memory_plan(const Result& r) {
  Plan p = r.plan;
  if (r.memory_seq_len > p.seq_len) p.seq_len = r.memory_seq_len;
  return p;
}

// simulate()'s memory half on a valid plan, its numbers not yet checked.
void memory_half(const Model& m, const System& s, Result& r) {
  const Plan p = memory_plan(r);
  r.memory = estimate_memory(m, s, p, MemoryDetail::sums);  // the named terms on request: memory_terms()
  r.time.first_step = s.framework.host_pin_s_per_gib * r.memory.host_bytes / (1024.0 * 1024.0 * 1024.0);
  r.gpu_fits = r.peak_memory_bytes() <= r.capacity_bytes;
  r.host_node_bytes = r.memory.host_bytes * double(std::min(p.gpus, s.gpus_per_node));
  r.host_capacity_bytes = s.host_memory_bytes;
  r.host_fits = s.host_memory_bytes <= 0 || r.host_node_bytes <= s.host_memory_bytes;
  r.fits = r.gpu_fits && r.host_fits;
}

}  // namespace

namespace {
// structure_costs(), with the ZeRO group's collectives of every stage or of p's alone (simulate()
// of one plan needs one or two of the three).
StructureCosts costs_of(const Model& m, const System& s, const Plan& p, bool every_zero_stage,
                        const DocumentCosts* docs = nullptr) {
  StructureCosts c;
  c.structure = structure_of(p);
  const double T = double(p.micro_batch) * double(p.seq_len) / p.sp;
  c.tokens = T;
  c.stages = stage_layout(m, p);
  c.pipeline_send = pipeline_send(m, s, p);
  // Tensor parallelism: each rank runs 1/tp of every GEMM (column- and row-parallel, the LM head
  // vocab-parallel) over all T tokens of its SP shard, and 1/tp of the elementwise work (the
  // norms and residuals over T / tp tokens in the sequence-parallel regions, the rest over its
  // heads' and MLP columns' share).
  const double tp = p.tp;
  // Per layer.
  if (m.moe()) {
    // The attention's four GEMMs as a dense layer's; the MLP from the MoE table (moe_cost.hpp).
    c.moe = moe_layer_cost(m, s, p, T);
    c.gemm_fwd_s = linear_gemm_time(s, p, attention_gemm_flops(m, T) / tp, T, 4) + c.moe.mlp_fwd_s;
    c.gemm_bwd_s = linear_gemm_time(s, p, 2 * attention_gemm_flops(m, T) / tp, T, 8) + c.moe.mlp_bwd_s;
  } else {
    c.gemm_fwd_s = linear_gemm_time(s, p, layer_gemm_flops(m, T) / tp, T, kGemmsPerLayer);
    c.gemm_bwd_s = linear_gemm_time(s, p, 2 * layer_gemm_flops(m, T) / tp, T, 2 * kGemmsPerLayer);
  }
  c.elementwise = layer_elementwise_cost(m, s, p);
  c.attention = attention_layer_cost(m, s, p, docs);
  c.memory_seq_len = docs ? docs->memory_seq_len : 0;
  c.heaviest_work_factor = docs ? docs->heaviest_work_factor : 1.0;
  // The LM head.
  c.head_fwd_s = framework_gemm_time(s, head_gemm_flops(m, T) / tp, T, 1);
  c.head_bwd_s = framework_gemm_time(s, 2 * head_gemm_flops(m, T) / tp, T, 2);
  c.tensor_parallel = tensor_parallel_cost(m, s, p);
  // The loss's own memory-bound work over the logits (the framework's casts, softmax, gradient).
  c.loss_elementwise_s =
      framework_memory_bound_time(s, s.profile.loss_elementwise_bytes_per_logit * T * double(m.vocab) / tp);
  // The data-parallel collectives of the bf16 parameters over the ZeRO group (data_parallel_cost).
  const Placement zero_group = place_zero_group(s, p);
  c.zero_group_ranks = zero_group.size;
  if (zero_group.size > 1) {
    const double bytes = kBf16 * c.stages.params_per_tp_rank;
    const int zero = p.mem.zero;
    if (every_zero_stage || zero == 0)
      c.zero_all_reduce_s = collective_time(s, Collective::all_reduce, bytes, zero_group);
    if (every_zero_stage || zero >= 1) {
      c.zero_reduce_scatter_s = collective_time(s, Collective::reduce_scatter, bytes, zero_group);
      // Gradients reduce in bf16; the parameters gather in FP8 under Fp8Part::weights (fp8_cost.hpp).
      c.zero_all_gather_s = collective_time(
          s, Collective::all_gather, parameter_gather_bytes_per_param(p) * c.stages.params_per_tp_rank, zero_group);
    }
  }
  return c;
}
}  // namespace

StructureCosts structure_costs(const Model& m, const System& s, const Plan& p, const DocumentCosts* docs) {
  return costs_of(m, s, p, true, docs);
}

namespace {
Result simulate_with(const Model& m, const System& s, const Plan& p, const DocumentCosts* docs) {
  Result r = checked_result(m, s, p);
  if (!r.valid) return r;
  time_half(m, s, p, costs_of(m, s, p, false, docs), r);
  r.memory_seq_len = docs ? docs->memory_seq_len : 0;
  memory_half(m, s, r);
  check_numbers(r);
  if (docs) r.balancer = docs->balancer;
  return r;
}
}  // namespace

Result simulate(const Model& m, const System& s, const Plan& p) { return simulate_with(m, s, p, nullptr); }

Result simulate(const Model& m, const System& s, const Plan& p, const DocumentCosts& docs) {
  return simulate_with(m, s, p, &docs);
}

Result simulate_time(const Model& m, const System& s, const Plan& p, const StructureCosts& c) {
  if (!(structure_of(p) == c.structure))
    throw std::logic_error(fmt::format("simulate_time: the costs are {}'s, not {}'s", describe_structure(c.structure),
                                       describe(p)));
  Result r = checked_result(m, s, p);
  if (!r.valid) return r;
  time_half(m, s, p, c, r);
  r.memory_seq_len = c.memory_seq_len;
  check_numbers(r);  // the memory's figures are still zeros: the time's are checked
  return r;
}

void add_memory(const Model& m, const System& s, Result& r) {
  if (!r.valid) return;
  memory_half(m, s, r);
  check_numbers(r);
}

std::vector<MemoryTerm> memory_terms(const Model& m, const System& s, const Result& r) {
  if (!r.valid) return {};
  return estimate_memory(m, s, memory_plan(r), MemoryDetail::terms).terms;
}

}  // namespace seqpar::sim

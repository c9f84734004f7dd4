// Cost of pipeline parallelism (Plan::pp stages, Plan::vp virtual stages per rank): the one table
// of what a pipeline adds to a step and to a stage's memory. Schedules: 1F1B (Narayanan et al.,
// PipeDream-Flush, arXiv 2006.09503) and Megatron-LM's interleaved 1F1B (Narayanan et al.,
// arXiv 2104.04473, Sec. 2.2.2).
//
// Time: each stage runs layers / pp layers of every micro-batch, the embedding on the first and the
// LM head and loss on the last, whose extra work makes it the slowest stage: it sets the pace. With
// m micro-batches per pipeline per step (Plan::grad_accum_steps) the step takes
// (m + (p - 1) / v) x the slowest stage's micro-batch forward and backward: the bubble is
// (p - 1) / (m x v) of the ideal m micro-batches (arXiv 2104.04473, Eq. 2 and Sec. 2.2.2).
// Between stages every micro-batch's boundary activation (micro_batch x seq_len / (sp x tp) x
// hidden bf16: a rank's shard, Megatron's scatter-gather of the pipeline send) goes forward and its
// gradient back, v times each per rank (each virtual stage's chunk ends with a send), on the link
// the placement puts consecutive stages on (tp x sp world ranks apart: [TP, CP, PP, DP]). The sends
// are charged exposed, one after the other with the compute (Megatron's default, without
// overlap_p2p_comm), in every micro-batch slot of the schedule, the bubble's included.
//
// Memory: stage i (0 = first) holds the stored activations of the micro-batches it has run forward
// and not yet backward. 1F1B: min(p - i, m) micro-batches (the first stage p, the last 1).
// Interleaved: Megatron-LM's warm-up count (schedules.py, forward_backward_pipelining_with_
// interleaving: (p - i - 1) x 2 + (v - 1) x p, at most m x v) plus the one in its first backward,
// each of layers / (p x v) layers; the first stage's p x (1 + (p - 1) / (p x v)) micro-batches' worth
// is Korthikanti et al.'s figure (arXiv 2205.05198, Sec. 4.2.3).
#pragma once
#include <cstdint>

#include "seqpar/core/plan.hpp"
#include "seqpar/sim/comm_cost.hpp"
#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/model.hpp"

namespace seqpar::sim {

// One stage's share of the model, as the memory estimate charges it.
struct StageShape {
  int index = 0;                    // 0 = first stage
  double layers = 0;                // stage_layer_count
  double params_per_tp_rank = 0;    // its layers', the embedding's on the first, the head's and final norm's on the last; / tp
  bool has_head = true;             // the LM head and the loss run here (the last stage)
  // Stored activations held at once, in micro-batches of this stage's layers: 1 without stages.
  double in_flight = 1;
};

// How the layers split over the stages. Even: layers / pp each (every virtual stage layers /
// (pp x vp)). Where pp x vp does not divide the layers but divides layers + 2, Megatron-LM's
// account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split count the
// embedding and the loss as a layer each: every virtual stage runs (layers + 2) / (pp x vp) layers
// but the first stage's first and the last stage's last, one fewer (Llama 3 405B: 126 layers over
// 16 stages, 8 each, 7 on the first and the last; arXiv 2407.21783 Sec. 3.3.2). Neither: no split
// (validity refuses the plan).
enum class StageSplit { even, ends_lighter, none };
StageSplit stage_split(const Model& m, const seqpar::Plan& p);

// What a plan's stages are by its structure alone (the model, tp, pp, vp and ep; not its memory
// options or micro-batches): derived once (StructureCosts, a memory estimate's stages) and passed
// wherever a stage is asked for, instead of deriving the split again at every question.
struct StageLayout {
  StageSplit split = StageSplit::even;  // even without stages
  // The largest stage's parameters per TP rank (tensor_parallel_cost.hpp: params_per_tp_rank), and
  // those whose ZeRO shards a rank holds (zero_sharded_params_per_tp_rank).
  double params_per_tp_rank = 0;
  double zero_sharded_params_per_tp_rank = 0;
};
StageLayout stage_layout(const Model& m, const seqpar::Plan& p);

// The layers stage `index` runs (all of them without stages), of `split` (the plan's stage_split).
int stage_layer_count(const Model& m, const seqpar::Plan& p, StageSplit split, int index);
inline int stage_layer_count(const Model& m, const seqpar::Plan& p, int index) {
  return stage_layer_count(m, p, stage_split(m, p), index);
}
// The most layers a stage runs (the data-parallel overlap's layers, advise's text, the JSON's
// layers_per_stage): the second stage's, as many as any other (the ends run as many or one fewer;
// with two stages, each is an end); the whole model without stages.
inline double stage_layers(const Model& m, const seqpar::Plan& p, StageSplit split) {
  return stage_layer_count(m, p, split, p.pp > 1 ? 1 : 0);
}
inline double stage_layers(const Model& m, const seqpar::Plan& p) { return stage_layers(m, p, stage_split(m, p)); }
// The stage that sets a pipeline's pace: the one whose micro-batch takes longest, with `layer_s` a
// layer's micro-batch time and `head_s` the LM head's and loss's (the last stage's alone; the first
// stage's embedding lookup is a gather, not charged). Without stages, the whole model with the head.
struct PacingStage {
  int index = 0;
  double layers = 0;
  bool has_head = true;
};
PacingStage pacing_stage(const Model& m, const seqpar::Plan& p, StageSplit split, double layer_s, double head_s);
// Stage `index`'s parameters per TP rank: its layers', the embedding table's on the first, the
// head's and final norm's on the last (pp > 1 only; of `split`).
double stage_params_per_tp_rank(const Model& m, const seqpar::Plan& p, StageSplit split, int index);
// Stage `index` of the plan's pipeline; without stages (pp = 1) the whole model, the figures
// simulate() has always used (total_params / tp, one micro-batch in flight).
StageShape stage_shape(const Model& m, const seqpar::Plan& p, StageSplit split, int index);
inline StageShape stage_shape(const Model& m, const seqpar::Plan& p, int index) {
  return stage_shape(m, p, p.pp <= 1 ? StageSplit::even : stage_split(m, p), index);
}
// Micro-batches' worth of stored activations stage `index` holds at its peak (see above).
double in_flight_micro_batches(const seqpar::Plan& p, int index);

struct PipelineCost {
  double send_bytes = 0;   // one boundary activation (or its gradient) of one rank
  double send_s = 0;       // one send between neighbouring stages on their link
  // Per optimizer step: the sends on the critical path, (m + (p - 1) / v) slots x 2 v sends.
  double comm_s = 0;
  double bubble_slots = 0;  // (p - 1) / v: micro-batch times the fill and drain add
  double bubble_fraction = 0;  // (p - 1) / (m x v)
};
// One boundary activation's send between neighbouring stages: the structure's alone (StructureCosts
// derives it once for every memory-option set and micro-batch count). All zero for pp = 1.
struct PipelineSend {
  double bytes = 0;  // PipelineCost::send_bytes
  double s = 0;      // PipelineCost::send_s
};
PipelineSend pipeline_send(const Model& m, const System& s, const seqpar::Plan& p);
// The step's pipeline terms, of the plan's micro-batches and virtual stages and the structure's
// send. All zero for pp = 1.
PipelineCost pipeline_cost(const seqpar::Plan& p, const PipelineSend& send);
inline PipelineCost pipeline_cost(const Model& m, const System& s, const seqpar::Plan& p) {
  return pipeline_cost(p, pipeline_send(m, s, p));
}

// Where consecutive stages sit: a group of pp ranks tp x sp world ranks apart.
Placement place_pp_group(const System& s, const seqpar::Plan& p);

}  // namespace seqpar::sim

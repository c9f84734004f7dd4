#include "seqpar/sim/pipeline_cost.hpp"

#include <algorithm>

#include "element_bytes.hpp"
#include "seqpar/sim/tensor_parallel_cost.hpp"

namespace seqpar::sim {

double in_flight_micro_batches(const seqpar::Plan& p, int index) {
  const double P = std::max(1, p.pp), v = std::max(1, p.vp), m = std::max(1, p.grad_accum_steps);
  if (P <= 1) return 1;
  if (v <= 1) return std::min(P - index, m);  // 1F1B: p - i warm-up forwards, at most m
  // Interleaved (Megatron-LM schedules.py): warm-up chunks (p - i - 1) x 2 + (v - 1) x p, at most
  // m x v, and the one in its first backward; each chunk is 1/v of the stage's layers.
  const double warmup = std::min((P - index - 1) * 2 + (v - 1) * P, m * v);
  return std::min(warmup + 1, m * v) / v;
}

StageSplit stage_split(const Model& m, const seqpar::Plan& p) {
  const std::int64_t chunks = std::int64_t{std::max(1, p.pp)} * std::max(1, p.vp);
  if (m.layers % chunks == 0) return StageSplit::even;
  // Each end gives up a layer: the first stage's first virtual stage may be the embedding alone
  // (Llama 3 405B at pp 16 x vp 8), but a stage keeps a layer.
  if (p.pp > 1 && (m.layers + 2) % chunks == 0 && (m.layers + 2) / chunks * std::max(1, p.vp) >= 2)
    return StageSplit::ends_lighter;
  return StageSplit::none;
}

int stage_layer_count(const Model& m, const seqpar::Plan& p, StageSplit split, int index) {
  if (p.pp <= 1) return m.layers;
  switch (split) {
    case StageSplit::even: return m.layers / p.pp;
    case StageSplit::ends_lighter: return (m.layers + 2) / p.pp - (index == 0 ? 1 : 0) - (index == p.pp - 1 ? 1 : 0);
    case StageSplit::none: break;
  }
  return m.layers / p.pp;  // an invalid plan's: validity names the rule
}

PacingStage pacing_stage(const Model& m, const seqpar::Plan& p, StageSplit split, double layer_s, double head_s) {
  if (p.pp <= 1) return {0, double(m.layers), true};
  // Stages between the first and the last all run the same layers: three candidates at most.
  PacingStage best{p.pp - 1, double(stage_layer_count(m, p, split, p.pp - 1)), true};
  double slowest = best.layers * layer_s + head_s;
  for (int i : {0, 1}) {
    if (i >= p.pp - 1) break;
    const double layers = stage_layer_count(m, p, split, i);
    if (layers * layer_s > slowest) {
      slowest = layers * layer_s;
      best = {i, layers, false};
    }
  }
  return best;
}

double stage_params_per_tp_rank(const Model& m, const seqpar::Plan& p, StageSplit split, int index) {
  const double tp = p.tp > 0 ? p.tp : 1;
  // Megatron keeps the embedding on the first stage and the output layer on the last (a tied
  // embedding is copied there, its gradient all-reduced between the two): each counts a table.
  const double table = double(m.vocab) * m.hidden;
  double params = stage_layer_count(m, p, split, index) * double(m.params_per_layer());
  if (index == 0) params += table;
  if (index == p.pp - 1) params += table + double(m.norm_params());
  return params / tp;
}

StageShape stage_shape(const Model& m, const seqpar::Plan& p, StageSplit split, int index) {
  StageShape st;
  st.index = index;
  if (p.pp <= 1) {
    st.layers = m.layers;
    st.params_per_tp_rank = params_per_tp_rank(m, p);  // the model's over tp (experts over tp x ep)
    return st;
  }
  st.layers = stage_layer_count(m, p, split, index);
  st.has_head = index == p.pp - 1;
  st.params_per_tp_rank = stage_params_per_tp_rank(m, p, split, index);
  st.in_flight = in_flight_micro_batches(p, index);
  return st;
}

StageLayout stage_layout(const Model& m, const seqpar::Plan& p) {
  StageLayout l;
  if (p.pp > 1) l.split = stage_split(m, p);
  l.params_per_tp_rank = params_per_tp_rank(m, p, l.split);
  l.zero_sharded_params_per_tp_rank = p.pp > 1 ? l.params_per_tp_rank : zero_sharded_params_per_tp_rank(m, p);
  return l;
}

Placement place_pp_group(const System& s, const seqpar::Plan& p) {
  return place_group(s, std::max(1, p.pp), std::max(1, p.tp) * std::max(1, p.sp), p.gpus);
}

PipelineSend pipeline_send(const Model& m, const System& s, const seqpar::Plan& p) {
  PipelineSend send;
  if (p.pp <= 1) return send;
  send.bytes = kBf16 * double(p.micro_batch) * (double(p.seq_len) / (double(p.sp) * std::max(1, p.tp))) * m.hidden;
  send.s = collective_time(s, Collective::send_recv, send.bytes, place_pp_group(s, p));
  return send;
}

PipelineCost pipeline_cost(const seqpar::Plan& p, const PipelineSend& send) {
  PipelineCost c;
  if (p.pp <= 1) return c;
  const double P = p.pp, v = std::max(1, p.vp), k = std::max(1, p.grad_accum_steps);
  c.send_bytes = send.bytes;
  c.send_s = send.s;
  c.bubble_slots = (P - 1) / v;
  c.bubble_fraction = (P - 1) / (k * v);
  c.comm_s = (k + c.bubble_slots) * 2 * v * c.send_s;
  return c;
}

}  // namespace seqpar::sim

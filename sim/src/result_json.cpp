#include "seqpar/sim/result_json.hpp"

#include <fmt/format.h>

#include "seqpar/core/json_io.hpp"
#include "seqpar/sim/comm_cost.hpp"
#include "seqpar/sim/fp8_cost.hpp"
#include "seqpar/sim/pipeline_cost.hpp"
#include "seqpar/sim/moe_cost.hpp"

namespace seqpar::sim {

using nlohmann::json;

json to_json(const Model& m) {
  json j = {{"name", m.name},          {"layers", m.layers},     {"hidden", m.hidden},
          {"heads", m.heads},        {"kv_heads", m.kv_heads}, {"head_dim", m.head_dim},
          {"ffn_hidden", m.ffn_hidden}, {"vocab", m.vocab},
          {"mlp", to_string(m.mlp)}, {"positions", to_string(m.positions)},
          {"norm", to_string(m.norm)},
          {"tied_embeddings", m.tied_embeddings},
          {"causal", m.causal}, {"params", m.total_params()}};
  if (!m.sources.empty()) j["sources"] = m.sources;  // each figure's provenance, as the preset cites it
  // Attention kinds only where the model has them (a model without keeps its JSON unchanged), in
  // the preset's own keys so a result's model reads back.
  if (!m.layer_kinds.empty()) {
    json types = json::array();
    for (AttentionKind k : m.layer_kinds) types.push_back(to_string(k));
    j["layer_types"] = std::move(types);
    if (m.sliding_window > 0) j["sliding_window"] = m.sliding_window;
    if (m.linear_layers() > 0) {
      j["linear_num_key_heads"] = m.linear.key_heads;
      j["linear_num_value_heads"] = m.linear.value_heads;
      j["linear_key_head_dim"] = m.linear.key_dim;
      j["linear_value_head_dim"] = m.linear.value_dim;
      j["linear_conv_kernel_dim"] = m.linear.conv_kernel;
    }
  }
  // Experts only for a MoE model, in the preset's keys; the active count beside the total.
  if (m.moe()) {
    const Experts& e = m.experts;
    j["experts"] = e.routed;
    j["experts_per_token"] = e.top_k;
    j["expert_ffn_hidden"] = e.ffn;
    if (e.shared > 0) {
      j["shared_experts"] = e.shared;
      j["shared_expert_ffn_hidden"] = e.shared_ffn;
    }
    if (e.dense_layers > 0) j["dense_layers"] = e.dense_layers;
    j["expert_imbalance"] = e.imbalance;
    j["active_params"] = m.active_params();
  }
  if (m.attention_sinks) j["attention_sinks"] = true;  // only where the model has them, as the preset's key
  // Latent attention only where the model has it, in the preset's keys.
  if (m.mla()) {
    if (m.latent.q_rank > 0) j["q_lora_rank"] = m.latent.q_rank;
    j["kv_lora_rank"] = m.latent.kv_rank;
    j["qk_rope_head_dim"] = m.latent.rope_dim;
    j["v_head_dim"] = m.v_dim();
  }
  return j;
}

json experts_json(const Model& m, const System& s, const Result& r) {
  // The table again for the plan (simulate() keeps only the step's sums): T tokens per rank.
  const Plan& p = r.plan;
  const MoeCost c = moe_layer_cost(m, s, p, double(p.micro_batch) * double(p.seq_len) / p.sp);
  const AttentionCost& at = r.figures.attention;
  json j = {{"ep", r.plan.ep},
            {"experts_per_rank", m.experts.routed / std::max(1, r.plan.ep)},
            {"moe_layers", m.moe_layers()},
            {"rows_per_expert", c.rows_per_expert},
            {"busiest_rank_load", c.load},
            {"mlp_fwd_s_per_layer", c.mlp_fwd_s},
            {"mlp_bwd_s_per_layer", c.mlp_bwd_s}};
  // Each group's communication per layer (forward + backward), on its links.
  json links = json::array();
  const SpGroups g = place_sp_groups(s, r.plan);
  auto link = [&](const char* what, const Placement& pl, Collective coll, double per_layer_s, const json& bytes) {
    links.push_back({{"what", what},
                     {"group", {{"size", pl.size}, {"stride", pl.stride}, {"nodes", pl.nodes}, {"per_node", pl.per_node}}},
                     {"crossing_flows_per_nic", pl.size > 1 ? crossing_flows_per_nic(s, coll, pl) : 0},
                     {"per_layer_s", per_layer_s},
                     {"bytes_per_call", bytes}});
  };
  if (r.plan.sp > 1)
    link(r.plan.ulysses_degree > 1 ? "attention (Ulysses all-to-all, ring exchange)" : "attention (ring exchange)",
         r.plan.ulysses_degree > 1 ? g.ulysses : g.ring, r.plan.ulysses_degree > 1 ? Collective::all_to_all : Collective::send_recv,
         at.fwd_comm_s + at.bwd_comm_s, json());
  // Per MoE layer: dispatch and combine in each pass.
  link("experts (dispatch and combine all-to-alls)", place_ep_group(s, p), Collective::all_to_all, 4 * c.all_to_all_s,
       c.all_to_all_bytes);
  j["links"] = std::move(links);
  j["all_to_all_bytes"] = c.all_to_all_bytes;
  j["all_to_all_s"] = c.all_to_all_s;
  return j;
}

json to_json(const System& s, int gpus) {
  const char* link = s.intra.kind == LinkKind::pcie ? "pcie" : s.intra.kind == LinkKind::nvlink ? "nvlink" : "nvswitch";
  return {{"name", s.name},
          {"gpu", s.gpu.name},
          {"attention_kernel", s.gpu.attention_kernel},
          {"gpus_per_node", s.gpus_per_node},
          // In 64 bits: an invalid plan's GPU count may be near INT_MAX, and is still printed.
          {"nodes", gpus > 0 ? (std::int64_t{gpus} + s.gpus_per_node - 1) / s.gpus_per_node : 0},
          {"intra_link", link},
          {"intra_gbps", s.intra.bytes_per_s / 1e9},
          {"inter_gbps", s.inter.bytes_per_s / 1e9},
          {"nics_per_node", nic_count(s)},
          {"nic_gbps", nic_rate(s) / 1e9},
          {"memory_capacity_bytes", s.gpu.memory_bytes},
          {"bf16_tflops", s.gpu.bf16_flops / 1e12},
          {"framework", s.profile.name},
          {"framework_why", s.framework_why},
          {"attention_kernel_why", s.attention_kernel_why}};
}

std::string point_name(const Model& m, const System& s, const Plan& p) {
  // The default placement keeps the old names; a ring-inner hybrid is another point.
  return fmt::format("{}/{}/{}/sp{}/u{}r{}{}/gpus{}/seq{}", s.name, m.name, to_string(p.method), p.sp,
                     p.ulysses_degree, p.ring_degree, p.placement == GroupPlacement::ring_inner ? "-ring-inner" : "",
                     p.gpus, p.seq_len);
}

json to_json(const Model& m, const System& s, const Result& r) {
  json j;
  j["name"] = point_name(m, s, r.plan);
  j["system"] = to_json(s, r.plan.gpus);
  j["model"] = to_json(m);
  j["plan"] = to_json(r.plan);
  if (r.balancer) j["balancer"] = to_string(*r.balancer);  // a packed-document workload's layout
  if (r.memory_seq_len > r.plan.seq_len) j["memory_seq_len"] = r.memory_seq_len;  // its padded tokens
  j["valid"] = r.valid;
  j["errors"] = r.errors;
  j["memory_capacity_bytes"] = r.capacity_bytes;
  auto invalid = [&j] {
    j["valid"] = false;
    for (const char* k : {"fits", "step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu",
                          "peak_memory_bytes", "memory", "time"})
      j[k] = nullptr;
    for (const char* k : {"memory_peak_phase", "memory_peak_subphase", "memory_phases", "memory_terms",
                          "memory_peak_stage", "memory_stages", "pipeline",
                          "host_memory_bytes", "host_memory_per_node_bytes", "host_memory_capacity_bytes", "fits_gpu",
                          "fits_host"})
      j.erase(k);
  };
  if (!r.valid) {
    invalid();
    return j;
  }
  // Where the plan's groups sit (comm_cost.hpp): what its communication was charged for. Valid
  // plans only: their degrees are in range.
  const SpGroups g = place_sp_groups(s, r.plan);
  auto group = [](const Placement& p) {
    return json{{"size", p.size}, {"stride", p.stride}, {"per_node", p.per_node}, {"most_per_node", p.most_per_node},
                {"nodes", p.nodes}};
  };
  j["groups"] = {{"tensor", group(place_tp_group(s, r.plan))},
                 {"ulysses", group(g.ulysses)},
                 {"ring", group(g.ring)},
                 {"label", describe_placement(s, r.plan)}};
  if (r.plan.pp > 1) j["groups"]["pipeline"] = group(place_pp_group(s, r.plan));
  // One optimizer step's batch (step_time_s is its time); tokens in floating point, as the product
  // of four limits can pass 2^63.
  j["global_batch_sequences"] = r.plan.global_batch_sequences();
  j["global_batch_tokens"] = double(r.plan.global_batch_sequences()) * double(r.plan.seq_len);
  j["fits"] = r.fits;
  j["fits_gpu"] = r.gpu_fits;  // peak_memory_bytes against memory_capacity_bytes
  j["fits_host"] = r.host_fits;  // host_memory_per_node_bytes against host_memory_capacity_bytes (null: not given)
  j["step_time_s"] = r.step_time_s;
  j["tokens_per_s_per_gpu"] = r.tokens_per_s_per_gpu;
  j["tflops_per_gpu"] = r.tflops_per_gpu;
  j["mfu"] = r.mfu;
  j["peak_memory_bytes"] = r.peak_memory_bytes();
  const MemoryBreakdown& b = r.memory.peak;
  j["memory"] = {{"parameters_bytes", b.parameters},
                 {"gradients_bytes", b.gradients},
                 {"optimizer_states_bytes", b.optimizer_states},
                 {"activations_bytes", b.activations},
                 {"checkpoints_bytes", b.checkpoints},
                 {"attention_buffers_bytes", b.attention_buffers},
                 {"working_bytes", b.working},
                 {"logits_bytes", b.logits},
                 {"reserved_bytes", b.reserved}};
  j["memory_peak_phase"] = r.memory.peak_phase;
  j["memory_peak_subphase"] = r.memory.peak_subphase;
  if (r.plan.pp > 1) {
    // Every stage's peak (pipeline_cost.hpp: its layers, parameters and micro-batches in flight);
    // peak_memory_bytes and the fit are the peak stage's.
    j["memory_peak_stage"] = r.memory.peak_stage;
    json stages = json::array();
    for (const StageMemory& st : stage_memories(m, s, r.plan))
      stages.push_back({{"stage", st.stage}, {"in_flight_micro_batches", st.in_flight}, {"peak_bytes", st.peak_bytes},
                        {"phase", st.phase}, {"subphase", st.subphase}});
    j["memory_stages"] = stages;
    const PipelineCost pc = pipeline_cost(m, s, r.plan);
    j["pipeline"] = {{"stages", r.plan.pp},
                     {"virtual_stages", r.plan.vp},
                     {"schedule", r.plan.vp > 1 ? "interleaved-1f1b" : "1f1b"},
                     {"micro_batches", r.plan.grad_accum_steps},
                     {"layers_per_stage", stage_layers(m, r.plan)},
                     {"bubble_fraction", pc.bubble_fraction},
                     {"send_bytes", pc.send_bytes},
                     {"send_s", pc.send_s}};
  }
  j["memory_phases"] = {{"layer_backward_bytes", r.memory.layer_phase_bytes},
                        {"loss_bytes", r.memory.loss_phase_bytes},
                        {"optimizer_bytes", r.memory.optimizer_phase_bytes}};
  // Every term of the peak by name (states, stored tensors, transients, buffers), in the order the
  // framework profile lists them; with the reserve they add up to peak_memory_bytes.
  json terms = json::array();
  for (const MemoryTerm& t : memory_terms(m, s, r))
    terms.push_back({{"name", t.name}, {"part", std::string(to_string(t.part))}, {"bytes", t.bytes}});
  terms.push_back({{"name", "reserve (device, allocator, calibrated)"}, {"part", "reserved"}, {"bytes", b.reserved}});
  j["memory_terms"] = terms;
  j["host_memory_bytes"] = r.memory.host_bytes;  // one GPU's offloaded bytes
  j["host_memory_per_node_bytes"] = r.host_node_bytes;
  j["host_memory_capacity_bytes"] = r.host_capacity_bytes > 0 ? json(r.host_capacity_bytes) : json();
  const TimeBreakdown& t = r.time;
  j["time"] = {{"compute_s", t.compute},
               {"comm_s", t.comm},
               {"exposed_comm_s", t.exposed_comm},
               {"attention_s", t.attention},
               {"forward_s", t.forward},
               {"backward_s", t.backward},
               {"gemm_s", t.gemm},
               {"attention_compute_s", t.attention_compute},
               {"elementwise_s", t.elementwise},
               {"recompute_s", t.recompute},
               {"attention_comm_s", t.attention_comm},
               {"exposed_attention_comm_s", t.exposed_attention_comm},
               {"dp_comm_s", t.dp_comm},
               {"exposed_dp_comm_s", t.exposed_dp_comm},
               {"tp_comm_s", t.tp_comm},
               {"pp_comm_s", t.pp_comm},
               {"pipeline_bubble_s", t.pipeline_bubble},
               {"optimizer_s", t.optimizer},
               {"offload_s", t.offload},
               {"exposed_offload_s", t.exposed_offload},
               {"first_step_s", t.first_step},
               {"fp8_casts_s", t.fp8_casts}};
  // A MoE model's experts beside the attention (moe_cost.hpp); absent for a dense model, whose
  // document stays as it was.
  if (m.moe()) {
    j["time"]["expert_comm_s"] = t.expert_comm;
    j["experts"] = experts_json(m, s, r);
  }
  j["fp8"] = fp8_json(s, r.plan);
  // simulate() checks its own numbers; this catches the rest (system and model figures built in
  // code rather than loaded), because nlohmann would print a NaN or an infinity as a silent null.
  if (const std::string bad = first_bad_number(j); !bad.empty()) {
    j["errors"].push_back(fmt::format("{}: not a finite non-negative number; the result is not valid", bad));
    invalid();
  }
  return j;
}

}  // namespace seqpar::sim

// seqpar simulate: one plan -> time breakdown, throughput, memory breakdown, fits or not.
#include <fmt/format.h>

#include <algorithm>

#include "commands.hpp"
#include "documents.hpp"
#include "options.hpp"
#include "seqpar/core/checked.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/comm_cost.hpp"
#include "seqpar/sim/limits.hpp"
#include "seqpar/sim/result_json.hpp"
#include "seqpar/sim/simulate.hpp"
#include "seqpar/sim/step_trace.hpp"
#include "seqpar/sim/fp8_cost.hpp"
#include "table.hpp"

namespace seqpar::cli {

namespace {

// The plan's micro-batches per optimizer step from a global batch (--global-batch-tokens or
// --global-batch): sequences / (dp x micro_batch) micro-steps, each replica's (with stages, each
// pipeline's micro-batches), as advise fills it (sim::batch_fills). An explicit --grad-accum-steps
// must agree.
seqpar::Plan filled(const sim::GlobalBatch& b, seqpar::Plan p, bool accum_given) {
  sim::check_global_batch(b);  // one of the two, in range
  require_range("gpus", p.gpus, 1, sim::limits::kMaxGpus);  // batch_fills divides the batch by dp
  std::string why;
  const std::optional<std::int64_t> sequences = sim::global_sequences(b, p.seq_len, why);
  if (!sequences) throw Error(why);
  const std::vector<seqpar::Plan> fills = sim::batch_fills(p, *sequences, p.micro_batch, why);
  if (fills.empty()) throw Error(why);
  if (accum_given && fills.front().grad_accum_steps != p.grad_accum_steps)
    throw Error(fmt::format("grad_accum_steps: {} micro-steps disagree with the global batch, which needs {} ({} "
                            "sequences / (dp {} x micro_batch {})); give one or the other",
                            p.grad_accum_steps, fills.front().grad_accum_steps, *sequences, p.dp(), p.micro_batch));
  return fills.front();
}

// With pipeline stages and no --vp (or no memory flag), the plan as pipelined runs are set up
// rather than Megatron's bare defaults (no interleaving, no recomputation), which nobody runs at
// this scale: every virtual-stage count advise tries (vp_degrees), each with the global batch
// filled again (interleaving needs a multiple of pp micro-batches) and the memory options advise
// would choose (best_memory_options: the lightest that fit within its tie of the fastest); of
// those, the one advise's rule puts first (chosen_before). What was given stays fixed. Empty when
// nothing was left to infer or nothing fits (the defaults are then shown, not fitting).
struct PipelineSetup {
  seqpar::Plan plan;
  std::string why;
};
std::optional<PipelineSetup> infer_pipeline_setup(const sim::Model& m, const sim::System& s, const seqpar::Plan& p,
                                                  bool vp_given, const MemoryFlags& mem,
                                                  const std::optional<sim::GlobalBatch>& batch, bool accum_given) {
  if (p.pp <= 1 || (vp_given && mem.any_given())) return std::nullopt;
  std::vector<sim::Result> fitting;
  for (const int vp : vp_given ? std::vector<int>{p.vp} : sim::vp_degrees(m, p.pp)) {
    seqpar::Plan q = p;
    q.vp = vp;
    try {
      if (batch) q = filled(*batch, q, accum_given);
    } catch (const Error&) {
      continue;  // this interleaving cannot take the batch (a multiple of pp micro-batches)
    }
    sim::StructureOutcome o = sim::best_memory_options(m, s, q, mem.fixed());
    if (o.best) fitting.push_back(std::move(*o.best));
  }
  if (fitting.empty()) return std::nullopt;
  double fastest = 0;
  for (const sim::Result& r : fitting) fastest = std::max(fastest, r.tokens_per_s_per_gpu);
  const sim::Result& best = *std::min_element(fitting.begin(), fitting.end(), [&](const sim::Result& a, const sim::Result& b) {
    return sim::chosen_before(a, b, fastest);
  });
  std::vector<std::string> what;
  if (!vp_given) what.push_back(fmt::format("vp={}", best.plan.vp));
  if (!mem.any_given()) what.push_back(seqpar::describe(best.plan.mem));
  std::string tried;
  if (!vp_given)
    for (const int vp : sim::vp_degrees(m, p.pp)) tried += fmt::format("{}{}", tried.empty() ? "" : ", ", vp);
  return PipelineSetup{
      best.plan,
      fmt::format("inferred: {} (pipeline stages without {}: {}{}; give {} to fix them)", fmt::join(what, " "),
                  vp_given ? "memory flags" : mem.any_given() ? "--vp" : "--vp or memory flags",
                  vp_given ? "" : fmt::format("the fastest of vp {} ", tried),
                  mem.any_given() ? "with the memory options given" : "with " + sim::memory_choice_rule(),
                  vp_given ? "memory flags" : mem.any_given() ? "--vp" : "--vp and memory flags")};
}

// A MoE model: the attention's and the experts' communication per layer, each on its group's links
// (result_json.cpp: experts_json), and the experts' figures.
void print_expert_links(const sim::Model& m, const sim::System& s, const sim::Result& r) {
  const nlohmann::json e = sim::experts_json(m, s, r);
  Table lt({"communication per layer (fwd + bwd)", "group", "nodes", "NIC flows", "seconds"});
  for (const auto& l : e["links"])
    lt.add({l["what"].get<std::string>(), fmt::format("{} ranks, stride {}", l["group"]["size"].get<int>(),
                                                      l["group"]["stride"].get<int>()),
            fmt::format("{}", l["group"]["nodes"].get<int>()), fmt::format("{}", l["crossing_flows_per_nic"].get<int>()),
            seconds(l["per_layer_s"].get<double>())});
  fmt::print("{}", lt.str());
  fmt::print("experts: ep {} ({} of {} experts per rank, {} per token), {:.0f} rows per expert GEMM, busiest rank {:.3f} x "
             "the mean load; all-to-all {} MiB per call\n\n",
             r.plan.ep, e["experts_per_rank"].get<int>(), m.experts.routed, m.experts.top_k,
             e["rows_per_expert"].get<double>(), e["busiest_rank_load"].get<double>(),
             fmt::format("{:.1f}", e["all_to_all_bytes"].get<double>() / (1024.0 * 1024.0)));
}

void print_human(const sim::Model& m, const sim::System& s, const sim::Result& r) {
  const seqpar::Plan& p = r.plan;
  fmt::print("{} on {} ({} GPUs, {} node(s)), sequence {} tokens\n", m.name, s.name, p.gpus,
             (p.gpus + s.gpus_per_node - 1) / s.gpus_per_node, format_count(p.seq_len));
  fmt::print("plan: {}  (dp={}; {} sequence{} of {} tokens per optimizer step)\nplacement: {}\n", seqpar::describe(p),
             p.dp(), p.global_batch_sequences(), p.global_batch_sequences() == 1 ? "" : "s", format_count(p.seq_len),
             sim::describe_placement(s, p));
  fmt::print("{}\n", inferred_text(s));
  for (const std::string& line : sim::fp8_lines(s, p)) fmt::print("{}\n", line);
  fmt::print("fits: {} (peak {} of {} GiB, at {}{}: {}{})\n\n", r.fits ? "yes" : "NO", gib(r.peak_memory_bytes()),
             gib(r.capacity_bytes), r.plan.pp > 1 ? fmt::format("stage {} of {}, ", r.memory.peak_stage, r.plan.pp) : std::string(),
             r.memory.peak_phase, r.memory.peak_subphase,
             r.host_node_bytes <= 0 ? std::string()
             : r.host_capacity_bytes > 0
                 ? fmt::format("; host {} of {} GiB per node{}", gib(r.host_node_bytes), gib(r.host_capacity_bytes),
                               r.host_fits ? "" : ": the offloaded bytes do NOT fit in host memory")
                 : fmt::format("; host {} GiB per node, not checked: the system gives no host memory", gib(r.host_node_bytes)));
  Table k({"metric", "value"});
  k.add({"step time (one optimizer step)", seconds(r.step_time_s)});
  k.add({"tokens/s per GPU", format_rate(r.tokens_per_s_per_gpu)});
  k.add({"TFLOP/s per GPU", fmt::format("{:.1f}", r.tflops_per_gpu)});
  k.add({"MFU", fmt::format("{:.1f}%", 100 * r.mfu)});
  fmt::print("{}\n", k.str());
  const sim::TimeBreakdown& t = r.time;
  Table tt({"time", "seconds", "share of step"});
  auto row = [&](const char* name, double v) {
    tt.add({name, seconds(v), fmt::format("{:.1f}%", 100 * v / r.step_time_s)});
  };
  row("compute", t.compute);
  row("  gemm", t.gemm);
  row("  attention kernels", t.attention_compute);
  row("  elementwise", t.elementwise);
  if (t.fp8_casts > 0) row("    of which FP8 casts", t.fp8_casts);
  row("  recompute", t.recompute);
  row("exposed comm", t.exposed_comm);
  row("  attention (all-to-all, ring waits)", t.exposed_attention_comm);
  row("  data parallel", t.exposed_dp_comm);
  if (r.plan.tp > 1) row("  tensor parallel (all-gather, reduce-scatter)", t.tp_comm);
  if (r.plan.pp > 1) {
    row("  pipeline sends between stages", t.pp_comm);
    row("pipeline bubble (fill and drain)", t.pipeline_bubble);
  }
  if (m.moe()) row("  expert parallel (dispatch, combine all-to-alls)", t.expert_comm);
  row("optimizer", t.optimizer);
  row("exposed offload", t.exposed_offload);
  if (t.first_step > 0) row("first step only: pinning host buffers (not in the step)", t.first_step);
  row("attention incl. exposed comm", t.attention);
  row("all comm (hidden or not)", t.comm);
  if (t.offload > 0) row("host traffic over PCIe (hidden or not)", t.offload);
  fmt::print("{}\n", tt.str());
  if (m.moe()) print_expert_links(m, s, r);
  const sim::MemoryBreakdown& b = r.memory.peak;
  Table mt({"memory at peak", "GiB"});
  mt.add({"parameters", gib(b.parameters)});
  mt.add({"gradients", gib(b.gradients)});
  mt.add({"optimizer states", gib(b.optimizer_states)});
  mt.add({"activations", gib(b.activations)});
  mt.add({"checkpoints", gib(b.checkpoints)});
  mt.add({"attention buffers", gib(b.attention_buffers)});
  mt.add({"working set", gib(b.working)});
  mt.add({"logits", gib(b.logits)});
  mt.add({"reserved", gib(b.reserved)});
  mt.add({"total (peak)", gib(b.total())});
  mt.add({"capacity", gib(r.capacity_bytes)});
  if (r.memory.host_bytes > 0) mt.add({"host memory (offloaded, this GPU's)", gib(r.memory.host_bytes)});
  fmt::print("{}\n", mt.str());
  Table terms({"peak, term by term", "part", "GiB"});
  for (const sim::MemoryTerm& term : sim::memory_terms(m, s, r))
    terms.add({term.name, std::string(sim::to_string(term.part)), gib(term.bytes)});
  terms.add({"reserve (device, allocator, calibrated)", "reserved", gib(b.reserved)});
  fmt::print("{}", terms.str());
  if (r.plan.pp > 1) {
    // Every stage's peak: the first holds the most micro-batches in flight, the last the head.
    Table st({"stage", "micro-batches in flight", "peak GiB", "at"});
    for (const sim::StageMemory& x : sim::stage_memories(m, s, r.plan))
      st.add({fmt::format("{}{}", x.stage, x.stage == r.memory.peak_stage ? " (peak)" : ""), fmt::format("{:.2f}", x.in_flight),
              gib(x.peak_bytes), fmt::format("{}: {}", x.phase, x.subphase)});
    fmt::print("\n{}", st.str());
  }
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  struct Opts {
    CommonOptions common;
    PlanOptions plan;
    MemoryFlags mem;
    DocumentOptions docs;
    BatchOptions batch;
    int gpus = 8;
    std::string seq_len;
    std::string trace;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("simulate", "One plan -> time breakdown, throughput, memory breakdown, fits or not");
  add_common(cmd, o->common);
  cmd->add_option("--gpus", o->gpus, "Total GPUs")->capture_default_str()->transform(at_most("gpus", sim::limits::kMaxGpus));
  cmd->add_option("--seq-len", o->seq_len, "Sequence length (e.g. 131072, 128K, 1M)")->required();
  add_plan(cmd, o->plan);
  add_memory(cmd, o->mem);
  add_documents(cmd, o->docs);
  add_batch(cmd, o->batch);
  cmd->add_option("--trace", o->trace,
                  "Also write the predicted step as a Chrome trace event file (open in ui.perfetto.dev)");
  cmd->callback([o, cmd] {
    guarded(o->common.json, "seqpar simulate", [&] {
      const sim::Model m = load_model(o->common);
      const sim::System s = load_system(o->common, m, o->plan.pp);
      // Without --method, the framework's own when it runs only some (torchtitan: allgather).
      seqpar::PlanFlags flags = o->plan;
      std::string method_why;
      if (cmd->get_option("--method")->count() == 0 && !s.profile.runs_method(seqpar::parse_method(flags.method))) {
        flags.method = std::string(seqpar::to_string(s.profile.runs_methods.front()));
        method_why = fmt::format("inferred: --method {} (framework {} runs its sequence parallelism as {} only; --method "
                                 "names another)", flags.method, s.profile.name, flags.method);
      }
      seqpar::Plan p = make_plan(flags, o->mem, o->gpus, parse_seq_len(o->seq_len), s);
      const std::optional<sim::GlobalBatch> batch = global_batch(o->batch);
      const bool accum_given = cmd->get_option("--grad-accum-steps")->count() > 0;
      const std::optional<PipelineSetup> setup =
          infer_pipeline_setup(m, s, p, cmd->get_option("--vp")->count() > 0, o->mem, batch, accum_given);
      if (setup) p = setup->plan;
      else if (batch) p = filled(*batch, p, accum_given);
      // A packed-document workload: the plan in its load balancer's layout, and every method beside it.
      const std::optional<SampledWorkload> workload = sample_documents(o->docs, p.seq_len);
      std::optional<sim::DocumentCosts> costs;
      std::vector<DocumentRow> rows;
      if (workload) {
        const sim::Result plain = sim::simulate(m, s, p);  // a plan rule first, as without documents
        if (plain.valid) costs = sim::document_costs(*workload, p, plan_balancer(o->docs, p), s.gpu);
        rows = document_rows(m, s, p, *workload);
      }
      const sim::Result r = costs ? sim::simulate(m, s, p, *costs) : sim::simulate(m, s, p);
      if (!o->trace.empty() && r.valid)
        trace::write_file(sim::step_trace(r, 0, fmt::format("predicted: {} (seqpar simulate)", seqpar::describe(p))),
                          o->trace);
      if (o->common.json) {
        nlohmann::json j = document("seqpar simulate");
        j.update(sim::to_json(m, s, r));
        if (setup) j["inferred"] = setup->why;
        if (!method_why.empty()) j["inferred_method"] = method_why;
        if (costs) {
          j["workload"] = workload_json(o->docs, *workload, *costs);
          j["workload"]["short_documents"] = short_documents_json(s.gpu, &*costs);
          j["document_table"] = document_rows_json(rows);
        }
        print_json(j);
      } else if (r.valid) {
        if (costs) {
          print_workload(o->docs, *workload, p, *costs);
          print_short_documents(s.gpu, &*costs);
        }
        if (!method_why.empty()) fmt::print("{}\n", method_why);
        if (setup) fmt::print("{}\n", setup->why);
        print_human(m, s, r);
        if (costs) {
          fmt::print("\n");
          print_document_rows(rows);
        }
      } else {
        for (const auto& e : r.errors) fmt::print(stderr, "seqpar: invalid plan: {}\n", e);
      }
      if (!r.valid) no_answer(false);
    });
  });
}

}  // namespace seqpar::cli

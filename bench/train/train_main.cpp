// seqpar-train: the end-to-end training step of a Llama-style decoder under a sequence-parallel
// plan (launched by mpirun/srun, one rank per GPU; or virtual ranks / the loopback proxy).
// Prints per-step time, tokens/s, TFLOP/s, MFU and peak memory; -J writes measurement JSON with
// the plan fields of `seqpar simulate --json`; --validate checks every step against the unsharded
// step and an fp32 reference (validation.hpp).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <mutex>
#include <optional>

#include "seqpar/comm/environment.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/dtype.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/core/progress.hpp"
#include "seqpar/core/stats.hpp"
#include "seqpar/core/usage_exit.hpp"
#include "seqpar/core/workload_flags.hpp"
#include "seqpar/sim/document_cost.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/train/launch.hpp"
#include "seqpar/train/size_limits.hpp"
#include "seqpar/train/timeline.hpp"
#include "seqpar/train/trainer.hpp"
#include "seqpar/train/validation.hpp"

namespace st = seqpar::train;

namespace {

struct Options {
  st::ModelOptions model;
  st::RunOptions run;
  int steps = 5, warmup = 1;
  float lr = 1e-3f;
  bool validate = false;
  st::ValidationRule rule;
  std::string precision = "bf16";
  std::string removed_rtol, removed_atol;  // the old tolerance flags, refused with a pointer to the new rule
  std::string gpu;  // preset whose bf16 peak gives MFU
  std::string trace;  // --trace: the last step's timeline, one file per rank
  // Packed documents (core's workload.hpp; the options `seqpar simulate` takes).
  seqpar::WorkloadFlags docs;
};

// Option checks that need no plan: a NaN learning rate or tolerance never reaches a step.
void check_options(const Options& o) {
  if (o.steps < 1) throw seqpar::Error(fmt::format("--steps = {}: must be >= 1", o.steps));
  if (o.warmup < 0 || (!o.validate && o.warmup >= o.steps))
    throw seqpar::Error(fmt::format("--warmup = {} with --steps = {}: at least one step must be timed",
                                    o.warmup, o.steps));
  if (!std::isfinite(o.lr) || !(o.lr > 0.0f))
    throw seqpar::Error(fmt::format("--lr = {}: must be a finite number > 0", o.lr));
  for (const auto& [flag, value] : {std::pair{"--rtol", &o.removed_rtol}, std::pair{"--atol", &o.removed_atol}})
    if (!value->empty())
      throw seqpar::Error(fmt::format(
          "{} {}: no longer taken: --validate derives each tensor's allowed error from the unsharded step's "
          "error and the arithmetic (README, seqpar-train: Validation); --error-factor and --error-atol "
          "override its two parts", flag, *value));
  st::check_rule(o.rule);
  if (!o.trace.empty() && o.validate)
    throw seqpar::Error("--trace with --validate: a validated step runs the unsharded steps beside it; trace a run "
                        "without --validate");
  (void)o.docs.workload();  // the workload's own checks, and its flags refused without --documents
  const st::Precision p = st::parse_precision(o.precision);
  if (p == st::Precision::fp32 && o.run.backend == "cuda")
    throw seqpar::Error("--precision fp32 with --backend cuda: the CUDA back end's attention kernels take bf16 "
                        "only (fp32 is the CPU back end's reference mode)");
}

st::TrainSetup make_setup(const Options& o, const st::ModelConfig& cfg, const seqpar::Plan& plan) {
  st::TrainSetup s;
  s.model = cfg;
  st::apply_plan(s, plan);  // with --checkpoint, --offload-checkpoints, --tiled-mlp, --tiled-loss
  s.opt.lr = o.lr;
  s.seed = o.run.seed;
  if ((s.documents = o.docs.workload()))
    s.balancer = o.docs.balancer.empty() ? seqpar::sim::native_balancer(plan)
                                         : seqpar::parse_balancer(o.docs.balancer, "--balancer");
  return s;
}

// Sizes are checked before any rank allocates: the sharded step and, with --validate, the
// unsharded one every rank also runs.
void check_sizes(const Options& o, const st::ModelConfig& cfg, const seqpar::Plan& plan) {
  const st::TrainSetup s = make_setup(o, cfg, plan);
  st::check_step_sizes(s);
  if (o.validate) st::check_step_sizes(st::reference_setup(s, plan.dp()));
}

// --trace: this rank's timeline of one step, as process `rank` (timeline.hpp).
void write_rank_trace(const std::string& path, const seqpar::comm::Communicator& world, const seqpar::Plan& plan,
                      st::Timeline& timeline) {
  seqpar::trace::Trace doc;
  st::add_to_trace(doc, world.rank(),
                   fmt::format("measured: rank {} of {} (seqpar-train)", world.rank(), seqpar::describe(plan)),
                   timeline.ranges());
  seqpar::trace::write_file(doc, st::rank_trace_path(path, world.rank(), world.size()));
}

// --validate's record of one check in the JSON (inf and NaN become null: JSON has neither).
nlohmann::json check_json(const st::TensorCheck& t) {
  return {{"name", t.what}, {"terms", t.terms}, {"sharded_error", t.sharded_error},
          {"unsharded_error", t.unsharded_error}, {"unsharded_error_per_term", t.baseline},
          {"ratio", t.ratio}, {"factor", t.factor}, {"floor", t.floor}, {"allowed_error", t.allowed},
          {"passed", t.ok}};
}

int run_rank(const Options& o, const st::ModelConfig& cfg, const seqpar::Plan& plan,
             seqpar::comm::Communicator& world, st::Backend& be, int argc, char** argv) {
  const st::TrainSetup s = make_setup(o, cfg, plan);
  const st::Precision precision = st::parse_precision(o.precision);
  const bool lead = world.rank() == 0;
  const bool proxy = world.backend() == seqpar::comm::Backend::loopback;

  be.set_precision(precision);
  st::Trainer trainer(be, &world, s);
  std::unique_ptr<st::StepValidator> val;
  st::ValidationRule rule = o.rule;
  rule.arithmetic = st::arithmetic_of(be);
  if (o.validate) {
    // World rank 0 runs the unsharded and reference steps for every rank (StepValidator).
    std::unique_ptr<st::Backend> unsharded_be;
    if (world.rank() == 0) {
      unsharded_be = st::make_backend(o.run.backend, o.run.attention);  // the same engine as the sharded step
      unsharded_be->set_precision(precision);
    }
    val = std::make_unique<st::StepValidator>(std::move(unsharded_be), s, plan.dp(), &world, &be);
    rule.step_tokens = val->step_tokens();
  }
  const double tokens = static_cast<double>(plan.seq_len) * plan.micro_batch * plan.dp();
  const double flops = st::model_flops(cfg, static_cast<std::int64_t>(plan.micro_batch) * plan.dp(), plan.seq_len);
  // The MFU denominator: the --gpu preset, else the preset of the device this runs on.
  double peak_flops = 0;
  if (!o.gpu.empty()) {
    peak_flops = seqpar::sim::load_gpu(o.gpu).bf16_flops;
  } else if (be.on_gpu()) {
    const nlohmann::json gpu = seqpar::comm::environment_info()["gpu"];
    if (gpu.is_object())
      if (auto sys = seqpar::sim::system_for_device_name(gpu["name"].get<std::string>()))
        peak_flops = seqpar::sim::load_system(*sys).gpu.bf16_flops;
  }

  if (lead)
    std::printf("# seqpar-train: %s, %s, world %d, backend %s, attention %s, comm %s\n# model %s: %d layers, hidden %d, heads %d/%d kv, params %lld\n",
                seqpar::describe(plan).c_str(), st::mode_name(world.backend()).c_str(),
                world.size(), o.run.backend.c_str(), std::string(be.attention_engine()).c_str(), o.run.comm.c_str(),
                cfg.name.c_str(),
                cfg.layers, cfg.hidden, cfg.heads, cfg.kv_heads,
                static_cast<long long>(cfg.total_params()));
  if (lead && !o.validate)
    std::printf("%6s %12s %12s %14s %12s %8s %14s\n", "step", "loss", "time_ms", "tokens/s/gpu",
                "TFLOP/s/gpu", "MFU", "peak_MiB");
  if (lead && o.validate)
    std::printf("# validate: %s; err = ||x - fp32 ref|| / ||fp32 ref|| per tensor (the loss, every gradient); pass "
                "when sharded err <= factor(n) x the unsharded err per term + floor (README, seqpar-train: "
                "Validation)\n%6s %12s %12s %12s  %s\n",
                rule.arithmetic.name.c_str(), "step", "loss", "unsharded", "fp32_ref",
                "closest to its bound: sharded err <= allowed (used)");
  std::vector<double> samples, losses;
  nlohmann::json validation = nlohmann::json::array();
  st::ValidationReport last;
  std::optional<st::TensorCheck> worst;  // over every step
  int failures = 0, worst_step = 0;
  be.memory().reset_peak();
  // Over many steps, how far it is and how long is left (rank 0, on a terminal only).
  seqpar::Progress progress("seqpar-train: steps", o.steps, lead ? stderr : nullptr);
  for (int i = 0; i < o.steps; ++i) {
    if (i > 0) progress.update(i);
    st::StepResult r;
    if (!o.validate) {
      // --trace records the last step only; the others run with no timeline, at no cost.
      std::unique_ptr<st::Timeline> timeline;
      if (!o.trace.empty() && i + 1 == o.steps) {
        timeline = st::make_timeline(be);
        be.set_timeline(timeline.get());
      }
      r = trainer.step();
      if (timeline) {
        be.set_timeline(nullptr);
        write_rank_trace(o.trace, world, plan, *timeline);
      }
    } else {
      r = trainer.compute_gradients();
      const st::StepValidator::Baseline v = val->baseline();
      last = val->check(trainer, r, v, rule);
      nlohmann::json tensors = nlohmann::json::array();
      for (const st::TensorCheck& t : last.tensors) {
        if (!t.ok) std::fprintf(stderr, "rank %d step %d: MISMATCH %s\n", world.rank(), i + 1, st::explain(t, rule).c_str());
        tensors.push_back(check_json(t));
      }
      failures += last.failures();
      const st::TensorCheck& w = last.worst();
      if (!worst || !(w.used() <= worst->used())) {
        worst = w;
        worst_step = i + 1;
      }
      validation.push_back({{"step", i + 1}, {"loss", r.loss}, {"unsharded_loss", v.unsharded.loss},
                            {"reference_loss", v.reference.loss}, {"worst", w.what}, {"failures", last.failures()},
                            {"tensors", tensors}});
      if (lead)
        std::printf("%6d %12.6f %12.6f %12.6f  %s: %.3g %s %.3g (%.0f%%)\n", i + 1, r.loss, v.unsharded.loss,
                    v.reference.loss, w.what.c_str(), w.sharded_error, w.ok ? "<=" : ">", w.allowed, 100 * w.used());
      val->advance(trainer);  // every run takes the next step from the fp32 reference's parameters
      losses.push_back(r.loss);
      continue;
    }
    if (!std::isfinite(r.loss)) {  // the same all-reduced loss on every rank: all stop here
      if (lead)
        std::fprintf(stderr, "seqpar-train: error: step %d: the loss is %g, not finite: the training diverged "
                     "(try a smaller --lr)\n", i + 1, r.loss);
      return 1;
    }
    losses.push_back(r.loss);
    if (i >= o.warmup) samples.push_back(r.time_s);
    const double tps = tokens / r.time_s / plan.gpus;
    const double tf = flops / r.time_s / plan.gpus / 1e12;
    const std::string mfu = peak_flops > 0 ? fmt::format("{:.3f}", tf * 1e12 / peak_flops) : "-";
    if (lead)
      std::printf("%6d %12.6f %12.3f %14.1f %12.4f %8s %14.2f%s\n", i + 1, r.loss, r.time_s * 1e3,
                  tps, tf, mfu.c_str(), static_cast<double>(be.memory().peak_bytes()) / (1 << 20),
                  i < o.warmup ? "  (warm-up)" : "");
  }
  progress.update(o.steps);
  if (lead && !o.validate) std::printf("%s", st::parts_table(be.memory()).c_str());
  const double total_failures = proxy ? failures : st::sum_over(world, be, failures);
  const std::vector<double> peaks = st::gather_over(world, be, static_cast<double>(be.memory().peak_bytes()));
  // The attention each rank computed in the last step, and core's count of it (doc_work.hpp).
  const std::vector<double> attn_pairs =
      st::gather_over(world, be, static_cast<double>(trainer.attention_work().pairs));
  const std::vector<double> attn_calls =
      st::gather_over(world, be, static_cast<double>(trainer.attention_work().calls));
  const std::vector<double> attn_counted =
      st::gather_over(world, be, static_cast<double>(trainer.counted_attention_pairs()));
  if (o.validate && lead) {
    std::printf("# step %d, every tensor (n: terms; b: the unsharded err per term; allowed = factor x b + floor):\n"
                "%-28s %9s %12s %12s %8s %10s %12s %s\n", o.steps, "tensor", "n", "sharded_err", "b",
                "factor", "floor", "allowed", "ok");
    for (const st::TensorCheck& t : last.tensors)
      std::printf("%-28s %9lld %12.3g %12.3g %8.3g %10.3g %12.3g %s\n", t.what.c_str(),
                  static_cast<long long>(t.terms), t.sharded_error, t.baseline, t.factor, t.floor, t.allowed,
                  t.ok ? "yes" : "NO");
    std::printf("# validate: %s (%g failed checks over all ranks and %d steps, %s)\n# closest to its bound: "
                "step %d, %s\n", total_failures == 0 ? "PASS" : "FAIL", total_failures, o.steps,
                rule.arithmetic.name.c_str(), worst_step, st::explain(*worst, rule).c_str());
  }

  if (lead && !o.run.json_path.empty()) {
    nlohmann::json doc = st::measurement_document(argc, argv, "seqpar-train",
                                                  st::mode_name(world.backend()), be.on_gpu());
    nlohmann::json mc = {{"name", cfg.name}, {"layers", cfg.layers}, {"hidden", cfg.hidden},
                         {"heads", cfg.heads}, {"kv_heads", cfg.kv_heads}, {"head_dim", cfg.head_dim},
                         {"ffn_hidden", cfg.ffn}, {"vocab", cfg.vocab},
                         {"tied_embeddings", cfg.tied_embeddings}, {"params", cfg.total_params()},
                         {"sliding_layers", cfg.sliding_layers()}, {"sliding_window", cfg.sliding_window}};
    doc["config"] = {{"model", mc}, {"steps", o.steps}, {"warmup", o.warmup}, {"lr", o.lr},
                     {"seed", o.run.seed}, {"backend", o.run.backend}, {"attention_engine", be.attention_engine()},
                     {"comm", o.run.comm},
                     {"world_size", world.size()}, {"validate", o.validate}, {"dtype", seqpar::to_string(be.act_dtype())},  // what activations are stored in
                     {"precision", o.precision},
                     {"gemm_precision", st::gemm_precision(be.precision())},
                     {"gemm_library", be.gemm_library()},
                     {"kv_replication", trainer.model().attention().kv_replication()}};
    doc["plan"] = seqpar::to_json(plan);
    if (s.documents)
    {
      doc["config"]["documents"] = o.docs.to_json();
      doc["config"]["documents"].update({{"balancer", seqpar::to_string(st::step_balancer(s))},
                                         {"last_step_cu_seqlens", trainer.step_documents()}});
    }
    nlohmann::json res = {{"name", fmt::format("train_step/{}/L{}/{}/sp{}/seq{}", cfg.name, cfg.layers,
                                               seqpar::to_string(plan.method), plan.sp, plan.seq_len)},
                          {"attention_engine", be.attention_engine()},
                          {"losses", losses},
                          {"peak_memory_bytes", be.memory().peak_bytes()},
                          {"peak_memory_bytes_per_rank", peaks},
                          {"memory", be.memory().parts_at_peak_json()}};
    // Per rank, the last step: forward attention calls and their unmasked (query, key) pairs times
    // the call's heads (H/U), every layer (twice under full checkpointing); counted: core's
    // count_batch_work for the same sequences and balancer.
    nlohmann::json attn = nlohmann::json::array();
    for (std::size_t r = 0; r < attn_pairs.size(); ++r)
      attn.push_back({{"rank", r}, {"pairs", static_cast<std::int64_t>(attn_pairs[r])},
                      {"calls", static_cast<std::int64_t>(attn_calls[r])},
                      {"counted_pairs", static_cast<std::int64_t>(attn_counted[r])}});
    res["attention_per_rank"] = attn;
    if (!samples.empty()) {
      const seqpar::Stats stt = seqpar::summarize(samples);
      const double tf = flops / stt.median / plan.gpus / 1e12;
      res["time_s"] = stt.median;
      res["samples_s"] = samples;
      res["stats"] = seqpar::to_json(stt, "_s");
      res["step_time_s"] = stt.median;
      res["tokens_per_s_per_gpu"] = tokens / stt.median / plan.gpus;
      res["tflops_per_gpu"] = tf;
      res["mfu"] = peak_flops > 0 ? nlohmann::json(tf * 1e12 / peak_flops) : nlohmann::json(nullptr);
    }
    if (o.validate)
      res["validation"] = {
          {"passed", total_failures == 0},
          {"rule", "sharded_error <= factor * unsharded_error_per_term + floor, per tensor; factor = "
                   "rounding_growth * (1 + 4 / sqrt(terms)), floor = 12 * sqrt(step_tokens) * accumulation_roundoff"},
          {"error", "relative RMS: ||x - reference|| / ||reference|| over the tensor; for the loss the error per "
                    "term is the RMS of the per-token loss errors over |reference loss|"},
          {"sharded", fmt::format("{} back end, {} precision, the plan", o.run.backend, o.precision)},
          {"unsharded", fmt::format("{} back end, {} precision, sp = 1", o.run.backend, o.precision)},
          {"reference", "cpu back end, fp32, sp = 1"},
          {"precision", o.precision},
          {"arithmetic", rule.arithmetic.name},
          {"rounding_growth", rule.arithmetic.rounding_growth},
          {"accumulation_roundoff", rule.arithmetic.accumulation_roundoff},
          {"step_tokens", rule.step_tokens},
          {"error_factor", o.rule.error_factor ? nlohmann::json(*o.rule.error_factor) : nlohmann::json(nullptr)},
          {"error_atol", o.rule.error_atol ? nlohmann::json(*o.rule.error_atol) : nlohmann::json(nullptr)},
          {"closest_to_bound", {{"step", worst_step}, {"check", check_json(*worst)},
                                {"explanation", st::explain(*worst, rule)}}},
          {"failures", total_failures},
          {"steps", validation}};
    for (const char* k : {"step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu"})
      if (res.contains(k)) doc[k] = res[k];
    doc["peak_memory_bytes"] = res["peak_memory_bytes"];
    doc["memory"] = res["memory"];
    doc["results"] = nlohmann::json::array({res});
    seqpar::write_json_file(o.run.json_path, doc);
  }
  return total_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"seqpar-train: one Llama-style training step per iteration under a sequence-parallel plan"};
  Options o;
  o.model.add(app);
  o.run.add(app);
  o.run.add_memory(app);
  app.add_option("--steps", o.steps, "training steps");
  app.add_option("--warmup", o.warmup, "steps left out of the timing");
  app.add_option("--lr", o.lr, "AdamW learning rate");
  app.add_flag("--validate", o.validate,
               "each step, compare the loss and every gradient with the unsharded step (SP = 1, same back end and "
               "precision) and an fp32 CPU reference; exit 1 when the sharded step is less accurate than allowed");
  app.add_option("--precision", o.precision,
                 "bf16 (default): mixed precision: activations, GEMM operands and attention in bf16 with fp32 "
                 "accumulation, fp32 master weights, gradients and AdamW (the CPU back end stores and rounds the "
                 "same way); fp32: plain fp32 (CPU back end only)");
  app.add_option("--error-factor", o.rule.error_factor,
                 "validation, for experiments: replaces the derived factor (2 x (1 + 4/sqrt(n)) for n terms) by "
                 "which the sharded step's error may exceed the unsharded step's per term");
  app.add_option("--error-atol", o.rule.error_atol,
                 "validation, for experiments: replaces the derived floor (12 x sqrt(tokens of the step) x the "
                 "accumulation's unit roundoff)");
  app.add_option("--rtol", o.removed_rtol)->group("");  // removed: refused with a message
  app.add_option("--atol", o.removed_atol)->group("");
  app.add_option("--gpu", o.gpu, "GPU preset whose bf16 peak is the MFU denominator (default: the preset of the device in use; MFU is null on the CPU)");
  seqpar::add_workload_flags(&app, o.docs, true, "each sequence of the step takes sampled sequence (id mod --doc-batches)");
  app.add_option("--trace", o.trace,
                 "write the last step's measured timeline as a Chrome trace event file (open in ui.perfetto.dev); "
                 "with more than one rank, one file per rank: FILE.rank<r>.json");
  st::LaunchChecks checks;  // --comm-timeout, and the options every MPI rank must share
  checks.add(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return seqpar::usage_exit(app, e);
  }
  try {
    check_options(o);
    if (o.validate && o.run.comm == "loopback")
      throw seqpar::Error("--validate needs real peers: the loopback proxy does not compute the sharded result");
    const st::ModelConfig cfg = o.model.resolve();
    const seqpar::comm::Backend kind = seqpar::comm::parse_backend(o.run.comm);
    const bool launched = kind == seqpar::comm::Backend::mpi || kind == seqpar::comm::Backend::nccl;
    const int local_world = o.run.gpus > 0 ? o.run.gpus : o.run.sp;
    // Plans are checked before any rank starts, so bad input fails once, cleanly.
    if (!launched) {
      const seqpar::Plan plan = o.run.plan(local_world);
      st::check_ulysses_heads(cfg.heads, cfg.kv_heads, plan.ulysses_degree);
      st::check_window(cfg, plan);
      check_sizes(o, cfg, plan);
    }
    // Parsed values; -J is left out (only rank 0 writes it).
    checks.same_options = st::run_options_json(o.run, cfg);
    checks.same_options.update({{"--steps", o.steps}, {"--warmup", o.warmup}, {"--lr", o.lr},
                                {"--validate", o.validate}, {"--precision", o.precision},
                                {"--error-factor", o.rule.error_factor.value_or(0)},
                                {"--error-atol", o.rule.error_atol.value_or(-1)}, {"--gpu", o.gpu},
                                {"--documents", o.docs.documents}, {"--packing", o.docs.packing},
                                {"--doc-seed", o.docs.seed}, {"--doc-batches", o.docs.batches},
                                {"--balancer", o.docs.balancer}});
    return st::launch_ranks(&argc, &argv, o.run, local_world, checks,
                            [&](seqpar::comm::Communicator& world, st::Backend& be) {
                              const seqpar::Plan plan = o.run.plan(world.size());
                              st::check_ulysses_heads(cfg.heads, cfg.kv_heads, plan.ulysses_degree);
                              st::check_window(cfg, plan);
                              check_sizes(o, cfg, plan);
                              return run_rank(o, cfg, plan, world, be, argc, argv);
                            });
  } catch (const seqpar::Error& e) {
    std::fprintf(stderr, "seqpar-train: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    // Anything else (a JSON library error, bad_alloc) is still reported, never an abort.
    std::fprintf(stderr, "seqpar-train: internal error: %s\n", e.what());
    return 3;
  }
}

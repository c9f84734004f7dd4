// seqpar-train: the end-to-end training step of a Llama-style decoder under a sequence-parallel
// plan (launched by mpirun/srun, one rank per GPU; or virtual ranks / the loopback proxy).
// Prints per-step time, tokens/s, TFLOP/s, MFU and peak memory; -J writes measurement JSON with
// the plan fields of `seqpar simulate --json`; --validate compares every step with SP = 1.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <mutex>

#include "seqpar/bench/environment.hpp"
#include "seqpar/common/error.hpp"
#include "seqpar/common/stats.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/train/launch.hpp"
#include "seqpar/train/trainer.hpp"

namespace st = seqpar::train;

namespace {

struct Options {
  st::ModelOptions model;
  st::RunOptions run;
  int steps = 5, warmup = 1;
  float lr = 1e-3f;
  bool validate = false;
  double rtol = 1e-4, atol = 1e-7;
  std::string gpu;  // preset whose bf16 peak gives MFU
};

int run_rank(const Options& o, const st::ModelConfig& cfg, const seqpar::sim::Plan& plan,
             seqpar::comm::Communicator& world, st::Backend& be, int argc, char** argv) {
  st::TrainSetup s;
  s.model = cfg;
  s.seq_len = plan.seq_len;
  s.ulysses = plan.ulysses_degree;
  s.ring = plan.ring_degree;
  s.zigzag = plan.zigzag();
  s.micro_batch = plan.micro_batch;
  s.opt.lr = o.lr;
  s.seed = o.run.seed;
  const bool lead = world.rank() == 0;
  const bool proxy = world.backend() == seqpar::comm::Backend::loopback;

  st::Trainer trainer(be, &world, s);
  std::unique_ptr<st::Backend> ref_be;
  std::unique_ptr<st::Trainer> ref;
  if (o.validate) {
    ref_be = st::make_backend(o.run.backend);
    ref = std::make_unique<st::Trainer>(*ref_be, nullptr, st::reference_setup(s, plan.dp()));
  }
  const double tokens = static_cast<double>(plan.seq_len) * plan.micro_batch * plan.dp();
  const double flops = st::model_flops(cfg, static_cast<std::int64_t>(plan.micro_batch) * plan.dp(), plan.seq_len);
  // The MFU denominator: the --gpu preset, else the preset of the device this runs on.
  double peak_flops = 0;
  if (!o.gpu.empty()) {
    peak_flops = seqpar::sim::load_gpu(o.gpu).bf16_flops;
  } else if (be.on_gpu()) {
    const nlohmann::json gpu = seqpar::bench::environment_info()["gpu"];
    if (gpu.is_object())
      if (auto sys = seqpar::sim::system_for_device_name(gpu["name"].get<std::string>()))
        peak_flops = seqpar::sim::load_system(*sys).gpu.bf16_flops;
  }

  if (lead)
    std::printf("# seqpar-train: %s, %s, world %d, backend %s, comm %s\n# model %s: %d layers, hidden %d, heads %d/%d kv, params %lld\n",
                seqpar::sim::describe(plan).c_str(), st::mode_name(world.backend()).c_str(),
                world.size(), o.run.backend.c_str(), o.run.comm.c_str(), cfg.name.c_str(),
                cfg.layers, cfg.hidden, cfg.heads, cfg.kv_heads,
                static_cast<long long>(cfg.total_params()));
  if (lead)
    std::printf("%6s %12s %12s %14s %12s %8s %14s%s\n", "step", "loss", "time_ms", "tokens/s/gpu",
                "TFLOP/s/gpu", "MFU", "peak_MiB", o.validate ? "   ref_loss  worst_rel_diff" : "");
  std::vector<double> samples, losses;
  nlohmann::json validation = nlohmann::json::array();
  int failures = 0;
  be.memory().reset_peak();
  for (int i = 0; i < o.steps; ++i) {
    st::StepResult r;
    if (!o.validate) {
      r = trainer.step();
    } else {
      r = trainer.compute_gradients();
      const st::StepResult rr = ref->compute_gradients();
      const st::ValidationReport rep = st::compare_step(trainer.model(), r.loss, trainer.grads_host(),
                                                        rr.loss, ref->grads_host(), o.rtol, o.atol);
      for (const st::Mismatch& m : rep.failures)
        std::fprintf(stderr, "rank %d step %d: MISMATCH %s: max abs diff %.3g (rel %.3g)\n",
                     world.rank(), i + 1, m.what.c_str(), m.max_abs_diff, m.max_rel_diff);
      failures += static_cast<int>(rep.failures.size());
      validation.push_back({{"step", i + 1}, {"loss", r.loss}, {"reference_loss", rr.loss},
                            {"worst_rel_diff", rep.worst_rel}, {"worst", rep.worst_what},
                            {"mismatches", rep.failures.size()}});
      trainer.optimizer_step();
      ref->optimizer_step();
      if (lead)
        std::printf("%6d %12.6f %12s %14s %12s %8s %14s %10.6f %15.3g (%s)\n", i + 1, r.loss, "-",
                    "-", "-", "-", "-", rr.loss, rep.worst_rel, rep.worst_what.c_str());
      losses.push_back(r.loss);
      continue;
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
  const double total_failures = proxy ? failures : st::sum_over(world, be, failures);
  const std::vector<double> peaks = st::gather_over(world, be, static_cast<double>(be.memory().peak_bytes()));
  if (o.validate && lead)
    std::printf("# validate: %s (%g mismatches over all ranks and %d steps; rtol %g, atol %g)\n",
                total_failures == 0 ? "PASS" : "FAIL", total_failures, o.steps, o.rtol, o.atol);

  if (lead && !o.run.json_path.empty()) {
    nlohmann::json doc = st::measurement_document(argc, argv, "seqpar-train",
                                                  st::mode_name(world.backend()), be.on_gpu());
    nlohmann::json mc = {{"name", cfg.name}, {"layers", cfg.layers}, {"hidden", cfg.hidden},
                         {"heads", cfg.heads}, {"kv_heads", cfg.kv_heads}, {"head_dim", cfg.head_dim},
                         {"ffn_hidden", cfg.ffn}, {"vocab", cfg.vocab},
                         {"tied_embeddings", cfg.tied_embeddings}, {"params", cfg.total_params()}};
    doc["config"] = {{"model", mc}, {"steps", o.steps}, {"warmup", o.warmup}, {"lr", o.lr},
                     {"seed", o.run.seed}, {"backend", o.run.backend}, {"comm", o.run.comm},
                     {"world_size", world.size()}, {"validate", o.validate}, {"dtype", "f32"},
                     {"kv_replication", trainer.model().attention().kv_replication()}};
    doc["plan"] = seqpar::sim::to_json(plan);
    nlohmann::json res = {{"name", fmt::format("train_step/{}/L{}/{}/sp{}/seq{}", cfg.name, cfg.layers,
                                               seqpar::sim::to_string(plan.method), plan.sp, plan.seq_len)},
                          {"losses", losses},
                          {"peak_memory_bytes", be.memory().peak_bytes()},
                          {"peak_memory_bytes_per_rank", peaks},
                          {"memory", be.memory().parts_at_peak_json()}};
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
    if (o.validate) res["validation"] = {{"passed", total_failures == 0}, {"rtol", o.rtol},
                                          {"atol", o.atol}, {"steps", validation}};
    for (const char* k : {"step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu"})
      if (res.contains(k)) doc[k] = res[k];
    doc["peak_memory_bytes"] = res["peak_memory_bytes"];
    doc["memory"] = res["memory"];
    doc["results"] = nlohmann::json::array({res});
    seqpar::bench::write_json_file(o.run.json_path, doc);
  }
  return total_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"seqpar-train: one Llama-style training step per iteration under a sequence-parallel plan"};
  Options o;
  o.model.add(app);
  o.run.add(app);
  app.add_option("--steps", o.steps, "training steps");
  app.add_option("--warmup", o.warmup, "steps left out of the timing");
  app.add_option("--lr", o.lr, "AdamW learning rate");
  app.add_flag("--validate", o.validate,
               "compare loss and every gradient with the unsharded step (SP = 1) each step; exit 1 on a mismatch");
  app.add_option("--rtol", o.rtol, "validation: tolerance relative to each tensor's largest gradient");
  app.add_option("--atol", o.atol, "validation: absolute tolerance");
  app.add_option("--gpu", o.gpu, "GPU preset whose bf16 peak is the MFU denominator (default: the preset of the device in use; MFU is null on the CPU)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (o.steps < 1) throw seqpar::Error(fmt::format("--steps = {}: must be >= 1", o.steps));
    if (o.warmup < 0 || (!o.validate && o.warmup >= o.steps))
      throw seqpar::Error(fmt::format("--warmup = {} with --steps = {}: at least one step must be timed",
                                      o.warmup, o.steps));
    if (o.validate && o.run.comm == "loopback")
      throw seqpar::Error("--validate needs real peers: the loopback proxy does not compute the sharded result");
    const st::ModelConfig cfg = o.model.resolve();
    const seqpar::comm::Backend kind = seqpar::comm::parse_backend(o.run.comm);
    const bool launched = kind == seqpar::comm::Backend::mpi || kind == seqpar::comm::Backend::nccl;
    const int local_world = o.run.gpus > 0 ? o.run.gpus : o.run.sp;
    // Plans are checked before any rank starts, so bad input fails once, cleanly.
    if (!launched) {
      const seqpar::sim::Plan plan = o.run.plan(local_world);
      st::check_ulysses_heads(cfg.heads, cfg.kv_heads, plan.ulysses_degree);
    }
    return st::launch_ranks(&argc, &argv, o.run, local_world,
                            [&](seqpar::comm::Communicator& world, st::Backend& be) {
                              const seqpar::sim::Plan plan = o.run.plan(world.size());
                              st::check_ulysses_heads(cfg.heads, cfg.kv_heads, plan.ulysses_degree);
                              return run_rank(o, cfg, plan, world, be, argc, argv);
                            });
  } catch (const seqpar::Error& e) {
    std::fprintf(stderr, "seqpar-train: error: %s\n", e.what());
    return 2;
  }
}

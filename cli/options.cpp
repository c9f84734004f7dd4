#include "options.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "app.hpp"
#include "commands.hpp"
#include "seqpar/core/checked.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/core/measurement.hpp"
#include "seqpar/core/run_info.hpp"
#include "seqpar/sim/validity.hpp"
#include "seqpar/sim/attention_kernels.hpp"
#include "seqpar/sim/limits.hpp"
#include "seqpar/sim/presets.hpp"

namespace seqpar::cli {

void add_common(CLI::App* app, CommonOptions& o) {
  app->add_option("--model", o.model, "Model preset name or path to a model JSON file")->capture_default_str();
  app->add_option("--system", o.system, "System preset name or path to a system/profile JSON file")->capture_default_str();
  add_attention_kernel(app, o.attention_kernel);
  add_framework(app, o.framework);
  app->add_flag("--json", o.json, "Print JSON instead of tables");
}

void add_framework(CLI::App* app, std::string& framework) {
  std::string names;  // the built-in profiles, as `seqpar presets --kind framework` lists them
  for (const sim::PresetEntry& e : sim::builtin_presets())
    if (e.kind == "framework") names += (names.empty() ? "" : ", ") + std::string(e.name);
  app->add_option("--framework", framework,
                  fmt::format("Training framework whose memory inventory, time terms and attention kernel to use: a "
                              "preset ({}; `seqpar presets --kind framework`) or a path to a framework JSON file "
                              "(default: the one a calibrated --system or the documents read name, else "
                              "deepspeed-alst)",
                              names));
}

void add_attention_kernel(CLI::App* app, std::string& kernel) {
  app->add_option("--attention-kernel", kernel,
                  "Attention kernel whose figures the GPU preset uses, e.g. flash-attention-2, flash-attention-3, cudnn "
                  "(default: the preset's; `seqpar presets` shows each GPU's)");
}

CLI::Validator at_most(const char* field, std::int64_t max) {
  return CLI::Validator(
      [field, max](std::string& text) {
        normalize_count_text(text, field, max);  // empty, negative and zero: for CLI11 and the plan rules
        return std::string();
      },
      "");
}

void add_search(CLI::App* app, SearchOptions& o) {
  app->add_option("--gpus", o.gpus, "Total GPUs")->capture_default_str()->transform(at_most("gpus", sim::limits::kMaxGpus));
  app->add_option("--method", o.method, "Only this method (default: all)");
  app->add_option("--sp", o.sp, "Only this SP degree (default: every divisor of --gpus / --tp)")
      ->transform(at_most("sp", sim::limits::kMaxGpus));
  app->add_option("--tp", o.tp,
                  "Only this tensor-parallel degree (default: 1, 2, 4, 8, ... up to the GPUs of a node, each dividing "
                  "the GPUs, the heads and the MLP width)")
      ->transform(at_most("tp", sim::limits::kMaxGpus));
  app->add_option("--pp", o.pp,
                  "Only this number of pipeline stages (default: with a global batch, 1 and every divisor of the GPUs "
                  "a TP group leaves that splits the layers; without one, 1)")
      ->transform(at_most("pp", sim::limits::kMaxGpus));
  app->add_option("--vp", o.vp,
                  "Only this number of virtual stages per rank (default: every one that splits a structure's layers)")
      ->transform(at_most("vp", sim::limits::kMaxGpus));
  app->add_option("--ep", o.ep,
                  "Only this expert-parallel degree (default: a MoE model tries 1 and every power of two dividing "
                  "its experts and the data x sequence parallel ranks; a dense model 1)")
      ->transform(at_most("ep", sim::limits::kMaxGpus));
  app->add_option("--ulysses-degree", o.ulysses_degree, "Only hybrids with this Ulysses degree (needs hybrid among the methods)")
      ->transform(at_most("ulysses_degree", sim::limits::kMaxGpus));
  app->add_option("--micro-batch", o.micro_batch,
                  "Sequences per SP group per micro-step (default: 1, or with a global batch every one that fills it)")
      ->transform(at_most("micro_batch", sim::limits::kMaxMicroBatch));
  add_batch(app, o.batch);
  seqpar::add_precision_flags(app, o.precision, true);
}

sim::SearchSpace search_space(const SearchOptions& o, const MemoryFlags& m, const sim::System& s) {
  sim::SearchSpace space;
  if (!o.method.empty()) space.methods = {seqpar::parse_method(o.method)};
  if (o.sp) space.sp = {*o.sp};
  if (o.tp) space.tp = {*o.tp};
  if (o.pp) space.pp = {*o.pp};
  if (o.vp) space.vp = {*o.vp};
  if (o.ep) space.ep = {*o.ep};
  space.ulysses_degree = o.ulysses_degree;
  space.memory = m.fixed_over(sim::default_memory_options(s.profile));
  space.micro_batch = o.micro_batch;
  space.global_batch = global_batch(o.batch);
  space.precisions = o.precision.searched(sim::fp8_candidates(s));
  sim::check_search(o.gpus, space);
  return space;
}

void add_plan(CLI::App* app, PlanOptions& o) {
  app->add_option("--method", o.method, method_names(" | "))->capture_default_str();
  app->add_option("--sp", o.sp,
                  "Sequence-parallel degree P (default: U x R when both are given, else every GPU --tp leaves)")
      ->transform(at_most("sp", sim::limits::kMaxGpus));
  app->add_option("--tp", o.tp,
                  "Tensor-parallel degree (Megatron-style, with sequence parallelism in the norm regions; GPUs = tp x "
                  "sp x dp)")
      ->capture_default_str()
      ->transform(at_most("tp", sim::limits::kMaxGpus));
  app->add_option("--pp", o.pp,
                  "Pipeline stages (1F1B; layers / pp each, or (layers + 2) / pp with the first and last one fewer; "
                  "the embedding on the first, the LM head on the last; ranks ordered [TP, CP, PP, DP]; GPUs = tp x "
                  "sp x pp x dp)")
      ->capture_default_str()
      ->transform(at_most("pp", sim::limits::kMaxGpus));
  app->add_option("--vp", o.vp,
                  "Virtual stages per rank (interleaved 1F1B; needs --pp > 1, layers (or layers + 2) divisible by "
                  "pp x vp, micro-batches a multiple of pp)")
      ->capture_default_str()
      ->transform(at_most("vp", sim::limits::kMaxGpus));
  app->add_option("--ep", o.ep,
                  "Expert-parallel degree (mixture-of-experts models: the routed experts split over ep of the data x "
                  "sequence parallel ranks, as Megatron-Core lays them out)")
      ->capture_default_str()
      ->transform(at_most("ep", sim::limits::kMaxGpus));
  app->add_option("--ulysses-degree", o.ulysses_degree, "Ulysses degree U (hybrid: inside a node by default)")
      ->transform(at_most("ulysses_degree", sim::limits::kMaxGpus));
  app->add_option("--ring-degree", o.ring_degree, "Ring degree R (P = U x R)")
      ->transform(at_most("ring_degree", sim::limits::kMaxGpus));
  app->add_option("--placement", o.placement,
                  "ulysses-inner (Ulysses groups inside nodes, rings across) | ring-inner (the reverse)")
      ->capture_default_str();
  app->add_option("--micro-batch", o.micro_batch, "Sequences per SP group per micro-step")
      ->capture_default_str()
      ->transform(at_most("micro_batch", sim::limits::kMaxMicroBatch));
  app->add_option("--grad-accum-steps", o.grad_accum_steps,
                  "Micro-steps per optimizer step (gradient accumulation; the optimizer steps once)")
      ->capture_default_str()
      ->transform(at_most("grad_accum_steps", sim::limits::kMaxGradAccumSteps));
  seqpar::add_precision_flags(app, o.precision, false);
}

void add_memory(CLI::App* app, MemoryFlags& m) { seqpar::add_memory_flags(app, m); }

sim::Model load_model(const CommonOptions& o) { return sim::load_model(o.model); }
sim::System load_system(const std::string& name) { return sim::load_system(name); }
sim::System load_system(const CommonOptions& o) {
  sim::System s = o.framework.empty() ? sim::load_system(o.system, o.attention_kernel)
                                      : sim::load_system_with_framework(o.system, o.attention_kernel, o.framework);
  s.framework_why = !o.framework.empty()     ? "--framework"
                    : s.framework_calibrated ? "the calibrated profile's"
                                             : "the default; --framework names another";
  return s;
}

std::string inferred_text(const sim::System& s) {
  auto why = [](const std::string& w) { return w.empty() ? std::string() : " (" + w + ")"; };
  return fmt::format("framework {}{}, attention kernel {}{}", s.profile.name, why(s.framework_why),
                     s.gpu.attention_kernel.empty() ? "as the GPU preset's figures describe" : s.gpu.attention_kernel,
                     why(s.attention_kernel_why));
}

std::string precision_text(const sim::SearchSpace& space, const sim::System& s, const seqpar::PrecisionFlags& f) {
  auto label = [](const seqpar::Precision& x) {
    return x.any_fp8() ? fmt::format("fp8={} ({})", seqpar::fp8_parts_text(x), seqpar::to_string(x.recipe))
                       : std::string("bf16");
  };
  if (!f.allow_fp8) {
    const seqpar::Precision& x = space.precisions.front();
    return x.any_fp8() ? "precision: " + label(x) + " (--fp8)" : std::string();
  }
  if (space.precisions.size() == 1)
    return fmt::format("precision: bf16 only: --allow-fp8 finds no FP8 here ({})",
                       s.gpu.fp8_flops <= 0 ? fmt::format("GPU '{}' has no FP8 figures", s.gpu.name)
                                            : fmt::format("framework '{}' trains in bf16 only", s.profile.name));
  std::string list;
  for (const seqpar::Precision& x : space.precisions) list += (list.empty() ? "" : ", ") + label(x);
  return "precision: searched " + list + " (--allow-fp8)";
}

sim::System load_system(const CommonOptions& o, const sim::Model& m, int pp) {
  sim::System s = load_system(o);
  if (pp > 1 && o.framework.empty() && !s.framework_calibrated && !s.profile.runs_pipeline_parallel) {
    const std::string defaulted = s.profile.name;
    s = sim::load_system_with_framework(o.system, o.attention_kernel, "megatron-core");
    s.framework_why = fmt::format("inferred: --pp {} runs pipeline stages, which {} has none of; --framework names "
                                  "another", pp, defaulted);
  }
  if (std::string why = sim::profile_mismatch(m, s); !why.empty()) throw Error(why);
  return s;
}

seqpar::Plan make_plan(const PlanOptions& o, const MemoryFlags& m, int gpus, std::int64_t seq_len, const sim::System& s) {
  seqpar::Plan p = seqpar::plan_from_flags(o, gpus, seq_len, s.gpus_per_node);
  p.mem = m.options_over(sim::default_memory_options(s.profile));
  return p;
}

std::int64_t parse_seq_len(const std::string& text, const char* field) {
  const std::int64_t n = parse_count(text, field, sim::limits::kMaxSeqLen);
  require_range(field, n, 1, sim::limits::kMaxSeqLen);
  return n;
}

nlohmann::json document(const std::string& program) {
  nlohmann::json j = run_info(invocation().argc, invocation().argv);
  j["kind"] = "prediction";
  j["program"] = program;
  j["mode"] = to_string(Mode::modelled);
  return j;
}

void print_json(const nlohmann::json& j) {
  if (!capture_json(j)) fmt::print("{}\n", dump_json(j));
}

void print_json_file(const std::string& path) {
  if (capturing()) {
    capture_json(read_json_file(path));
    return;
  }
  std::ifstream in(path, std::ios::binary);
  std::fflush(stdout);  // fmt::print writes through C stdio: keep the order
  if (!(std::cout << in.rdbuf() << std::flush)) throw Error(fmt::format("out: cannot print '{}'", path));
}

}  // namespace seqpar::cli

namespace seqpar::cli {
void no_answer(bool some_plan_valid) { throw CLI::RuntimeError(some_plan_valid ? 1 : 2); }

void guarded(bool json, const std::string& program, const std::function<void()>& body) {
  auto fail = [&](const std::string& message) {
    if (!json) throw Error(message);
    nlohmann::json j = document(program);
    j["valid"] = false;
    j["errors"] = {message};
    print_json(j);
    capture_is_error();
    throw CLI::RuntimeError(2);
  };
  try {
    body();
  } catch (const Error& e) {
    fail(e.what());
  } catch (const nlohmann::json::exception& e) {
    // Readers turn the JSON library's errors into seqpar::Error naming the file and field; one
    // that slipped past them is still bad input, reported, not an abort.
    fail(fmt::format("{}: {}", program, e.what()));
  }
}
}  // namespace seqpar::cli

// seqpar presets: the built-in GPUs, systems and models, with their key figures.
#include <fmt/format.h>

#include "commands.hpp"
#include "options.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/attention_kernels.hpp"
#include "seqpar/sim/presets.hpp"
#include "table.hpp"

namespace seqpar::cli {

void add_presets_command(CLI::App& app) {
  struct Opts {
    bool json = false;
    std::string kind;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("presets", "List the built-in GPUs, systems and models");
  cmd->add_flag("--json", o->json, "Print the preset documents (with their sources) as JSON");
  cmd->add_option("--kind", o->kind, "Only this kind: gpu, system, model or framework");
  cmd->callback([o] {
    guarded(o->json, "seqpar presets", [&] {
      if (!o->kind.empty() && o->kind != "gpu" && o->kind != "system" && o->kind != "model" && o->kind != "framework")
        throw Error(fmt::format("kind: '{}' is not one of gpu, system, model, framework", o->kind));
      const auto& all = sim::builtin_presets();
      if (o->json) {
        nlohmann::json j = document("seqpar presets");
        j["kind"] = "presets";
        j["presets"] = nlohmann::json::array();
        for (const auto& p : all)
          if (o->kind.empty() || p.kind == o->kind)
            j["presets"].push_back({{"kind", p.kind}, {"name", p.name}, {"document", p.document}});
        print_json(j);
        return;
      }
      if (o->kind.empty() || o->kind == "gpu") {
        Table t({"gpu", "memory GiB", "bf16 TFLOP/s", "HBM GB/s", "attention kernels (default first)", "description"});
        for (const auto& p : all)
          if (p.kind == "gpu") {
            sim::Gpu g = sim::gpu_from_json(p.document, p.name);
            std::string kernels;
            for (const auto& k : sim::attention_kernel_names(p.document)) kernels += (kernels.empty() ? "" : ", ") + k;
            t.add({p.name, gib(g.memory_bytes), fmt::format("{:.0f}", g.bf16_flops / 1e12),
                   fmt::format("{:.0f}", g.hbm_bytes_per_s / 1e9), kernels.empty() ? "-" : kernels, p.description});
          }
        fmt::print("GPUs\n{}\n", t.str());
      }
      if (o->kind.empty() || o->kind == "system") {
        Table t({"system", "gpu", "GPUs/node", "intra link", "intra GB/s", "NIC GB/s/GPU", "description"});
        for (const auto& p : all)
          if (p.kind == "system") {
            sim::System s = sim::system_from_json(p.document, p.name);
            t.add({p.name, s.gpu.name, std::to_string(s.gpus_per_node),
                   s.intra.kind == sim::LinkKind::pcie ? "pcie" : "nvswitch",
                   fmt::format("{:.0f}", s.intra.bytes_per_s / 1e9), fmt::format("{:.1f}", s.inter.bytes_per_s / 1e9),
                   p.description});
          }
        fmt::print("Systems (achievable rates: nominal x efficiency)\n{}\n", t.str());
      }
      if (o->kind.empty() || o->kind == "model") {
        Table t({"model", "params", "layers", "hidden", "heads", "kv heads", "ffn", "vocab", "block"});
        for (const auto& p : all)
          if (p.kind == "model") {
            sim::Model m = sim::model_from_json(p.document, p.name);
            t.add({p.name, fmt::format("{:.2f}B", double(m.total_params()) / 1e9), std::to_string(m.layers),
                   std::to_string(m.hidden), std::to_string(m.heads), std::to_string(m.kv_heads),
                   std::to_string(m.ffn_hidden), std::to_string(m.vocab),
                   fmt::format("{} {} {}", sim::to_string(m.mlp), sim::to_string(m.norm), sim::to_string(m.positions))});
          }
        fmt::print("Models\n{}\n", t.str());
      }
      if (o->kind.empty() || o->kind == "framework") {
        Table t({"framework", "state bytes/param", "gradients", "MLPs", "description"});
        for (const auto& p : all)
          if (p.kind == "framework") {
            const sim::Framework f = sim::framework_from_json(p.document, p.name);
            double per_param = 0;
            for (const sim::StateTerm& st : f.states) per_param += st.bytes_per_param;
            const std::string mlps = sim::to_string(f.mlp_kinds);
            t.add({p.name, fmt::format("{:g}", per_param), f.gradients_during_backward ? "during backward" : "kept",
                   mlps.empty() ? "any (fc1)" : mlps, p.description});
          }
        fmt::print("Frameworks (memory inventories: seqpar presets --kind framework --json)\n{}\n", t.str());
      }
      fmt::print("Every figure's source: seqpar presets --json\n");
    });
  });
}

}  // namespace seqpar::cli

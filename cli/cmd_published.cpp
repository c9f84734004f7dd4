// seqpar published: the simulator's prediction of each published run (sim/published/runs.json, or
// a file of the same schema) beside the published figure, with the error and, for a known miss,
// the finding that explains it.
#include <fmt/format.h>

#include "commands.hpp"
#include "options.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/sim/published.hpp"
#include "table.hpp"

namespace seqpar::cli {

void add_published_command(CLI::App& app) {
  struct Opts {
    bool json = false;
    std::string file;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("published", "Predictions beside published measurements (ALST, ring-flash-attention, DeepSpeed-Ulysses, USP, Megatron-LM, WLB-LLM), with errors");
  cmd->add_flag("--json", o->json, "Print JSON instead of tables");
  cmd->add_option("--runs", o->file, "A JSON file of runs in the schema of sim/published/runs.json (default: the built-in runs)");
  cmd->callback([o] {
    guarded(o->json, "seqpar published", [&] {
      const std::vector<sim::PublishedRun> runs =
          o->file.empty() ? sim::builtin_published_runs() : sim::published_runs_from_json(read_json_file(o->file), o->file);
      std::vector<sim::PublishedComparison> cs;
      for (const auto& r : runs) cs.push_back(sim::compare_published(r));
      if (o->json) {
        nlohmann::json j = document("seqpar published");
        j["band"] = sim::kPublishedBand;
        j["runs"] = nlohmann::json::array();
        for (const auto& c : cs)
          j["runs"].push_back({{"id", c.run.id}, {"source", c.run.source}, {"configuration", c.run.configuration},
                               {"system", c.run.system}, {"attention_kernel", c.run.attention_kernel},
                               {"plan", to_json(c.run.plan)},
                               {"measure", to_string(c.run.measure)}, {"published", c.published},
                               {"baseline", c.run.baseline ? nlohmann::json{{"label", c.run.baseline->label},
                                                                            {"plan", to_json(c.run.baseline->plan)},
                                                                            {"published", c.run.baseline->published},
                                                                            {"run_published", c.run.published}}
                                                           : nlohmann::json(nullptr)},
                               {"documents", c.run.documents.empty() ? nlohmann::json(nullptr)
                                                                    : nlohmann::json{{"spec", c.run.documents},
                                                                                     {"packing", c.run.packing},
                                                                                     {"seed", c.run.doc_seed},
                                                                                     {"batches", c.run.doc_batches},
                                                                                     {"balancer", to_string(c.run.balancer)},
                                                                                     {"baseline_balancer", to_string(c.run.baseline_balancer)},
                                                                                     {"micro_batches", c.run.micro_batches}}},
                               {"predicted", c.errors.empty() ? nlohmann::json(c.predicted) : nlohmann::json(nullptr)},
                               {"error", c.errors.empty() ? nlohmann::json(c.error) : nlohmann::json(nullptr)},
                               {"in_band", c.in_band}, {"errors", c.errors},
                               {"status", c.run.expect_in_band ? "in_band" : "open_finding"}, {"finding", c.run.finding}});
        // A run with its own band (the check's stated one) says so; the others use "band" above.
        for (std::size_t i = 0; i < cs.size(); ++i)
          if (!cs[i].run.band_source.empty()) {
            j["runs"][i]["band"] = cs[i].run.band;
            j["runs"][i]["band_source"] = cs[i].run.band_source;
          }
        print_json(j);
        return;
      }
      Table t({"run", "measure", "published", "predicted", "error", "band"});
      for (const auto& c : cs)
        t.add({c.run.id, std::string(to_string(c.run.measure)), fmt::format("{:.4g}", c.published),
               c.errors.empty() ? fmt::format("{:.4g}", c.predicted) : "rejected",
               c.errors.empty() ? fmt::format("{:+.1f}%", 100 * c.error) : "-",
               c.errors.empty() ? fmt::format("{}{}", c.in_band ? "in" : "OUT",
                                              c.run.band_source.empty() ? std::string()
                                                                        : fmt::format(" ({:.0f}%)", 100 * c.run.band))
                                : "-"});
      fmt::print("predicted vs published (band {:.0f}% unless a run states its own)\n{}\n", 100 * sim::kPublishedBand,
                 t.str());
      for (const auto& c : cs) {
        fmt::print("{}: {}\n  {}\n", c.run.id, c.run.source, c.run.configuration);
        if (!c.run.attention_kernel.empty()) fmt::print("  attention kernel: {}\n", c.run.attention_kernel);
        if (c.run.baseline)
          fmt::print("  ratio to {}: published {:.4g} / {:.4g}\n", c.run.baseline->label, c.run.published,
                     c.run.baseline->published);
        if (!c.run.documents.empty())
          fmt::print("  workload: --documents {} --packing {} --doc-seed {} --doc-batches {}{}\n", c.run.documents,
                     c.run.packing, c.run.doc_seed, c.run.doc_batches,
                     c.run.measure == sim::PublishedMeasure::packing_imbalance
                         ? fmt::format("; {} micro-batches a global batch", c.run.micro_batches)
                         : fmt::format("; balancer {} over {}", to_string(c.run.balancer),
                                       to_string(c.run.baseline_balancer)));
        for (const auto& e : c.errors) fmt::print("  rejected: {}\n", e);
        if (!c.run.finding.empty()) fmt::print("  finding: {}\n", c.run.finding);
      }
    });
  });
}

}  // namespace seqpar::cli

// `seqpar report FILE.json... --out DIR`: Markdown and one self-contained HTML report (plots
// embedded) from any mix of prediction, measurement, sweep and Google Benchmark JSON.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/reports/report.hpp"
#include "seqpar/reports/validation_verdict.hpp"
#include "table.hpp"

namespace seqpar::cli {

namespace {

struct ReportArgs {
  std::vector<std::string> files;
  seqpar::reports::ReportOptions options;
  bool no_plots = false;
  bool json = false;
};

// seqpar-train beside bench_torch_step, printed as well as written: the figure issue 15 asks for.
std::string peer_table(const nlohmann::json& rows) {
  auto cell = [](const nlohmann::json& side, const char* key, auto format) -> std::string {
    return side.is_object() && side[key].is_number() ? format(side[key].get<double>()) : "-";
  };
  auto ratio = [](const nlohmann::json& r, const char* key) -> std::string {
    return r[key].is_number() ? fmt::format("{:.2f}", r[key].get<double>()) : "-";
  };
  Table t({"model", "plan", "seq", "seqpar step", "torch step", "ratio", "seqpar TFLOP/s", "torch TFLOP/s", "ratio",
           "seqpar GiB", "torch GiB", "ratio"});
  auto tflops = [](double v) { return fmt::format("{:.1f}", v); };
  for (const auto& r : rows)
    t.add({r["model"].get<std::string>(), r["plan_label"].get<std::string>(),
           seqpar::format_count(static_cast<std::int64_t>(r["seq_len"].get<double>())), cell(r["seqpar"], "step_time_s", seconds),
           cell(r["pytorch"], "step_time_s", seconds), ratio(r, "step_time_ratio"),
           cell(r["seqpar"], "tflops_per_gpu", tflops), cell(r["pytorch"], "tflops_per_gpu", tflops),
           ratio(r, "tflops_ratio"), cell(r["seqpar"], "peak_memory_bytes", gib),
           cell(r["pytorch"], "peak_memory_bytes", gib), ratio(r, "peak_memory_ratio")});
  return "seqpar-train against PyTorch (ratios seqpar / PyTorch; '-': no such measurement in the inputs)\n" + t.str();
}

// Each measured training step beside the simulator's prediction (per rank) with the error, then the
// largest errors: the fidelity figure issue 16 asks for, printed last so it is what a reader sees.
std::string step_table(const nlohmann::json& sc) {
  auto pct = [](const nlohmann::json& v) { return v.is_number() ? fmt::format("{:+.1f}%", v.get<double>() * 100) : "-"; };
  auto bytes = [](const nlohmann::json& v) { return v.is_number() ? gib(v.get<double>()) : std::string("-"); };
  Table t({"step", "plan", "seq", "mode", "predicted", "measured", "error", "pred GiB", "meas GiB", "error"});
  for (const auto& r : sc["rows"])
    t.add({r["name"].get<std::string>(), r["plan_label"].get<std::string>(),
           seqpar::format_count(static_cast<std::int64_t>(r["seq_len"].get<double>())), r["mode"].get<std::string>(),
           seconds(r["predicted_step_time_s"].get<double>()), seconds(r["measured_step_time_s"].get<double>()),
           pct(r["time_error"]), bytes(r["predicted_peak_memory_bytes"]), bytes(r["measured_peak_memory_bytes"]),
           pct(r["memory_error"])});
  auto abs_pct = [](const nlohmann::json& v) { return v.is_number() ? fmt::format("{:.1f}%", v.get<double>() * 100) : "- (no peak measured)"; };
  std::string ran;
  for (const auto& rt : sc["runtimes"]) ran += "  " + rt["text"].get<std::string>() + "\n";
  return fmt::format("training steps, predicted on '{}' (per rank) against measured (error = predicted / measured - 1)\n"
                     "predicted as they ran:\n{}{}largest |error|: step time {}, peak memory {}\n",
                     sc["system"].get<std::string>(), ran, t.str(), abs_pct(sc["max_abs_time_error"]),
                     abs_pct(sc["max_abs_memory_error"]));
}

// The seqpar-train --validate verdicts, the failed count in the first line.
std::string verdict_table(const nlohmann::json& rows) {
  Table t({"plan", "seq", "arithmetic", "verdict", "failed", "steps", "closest check", "used", "source"});
  int failed = 0;
  for (const auto& v : rows) {
    const nlohmann::json& c = v["closest"];
    failed += v["passed"].get<bool>() ? 0 : 1;
    const std::string overrides = v["overrides"].get<std::string>();
    t.add({v["plan_label"].get<std::string>(),
           seqpar::format_count(static_cast<std::int64_t>(v["plan"]["seq_len"].get<double>())),
           v["arithmetic"].get<std::string>(),
           std::string(v["passed"].get<bool>() ? "PASS" : "FAIL") + (overrides.empty() ? "" : " (" + overrides + ")"),
           fmt::format("{:.0f}", v["failures"].get<double>()), std::to_string(v["steps"].get<std::int64_t>()),
           c["name"].get<std::string>(),
           seqpar::reports::allowance_used_text(c),
           v["source"].get<std::string>()});
  }
  return fmt::format("validation verdicts (seqpar-train --validate): {} of {} FAIL (used: the closest check's sharded "
                     "error / allowed error)\n{}", failed, rows.size(), t.str());
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Write report.md, report.html (self-contained, plots embedded) and report-data.json from prediction "
                "and measurement JSON");
  cmd->add_option("files", args->files, "JSON files: seqpar simulate/sweep/advise output, benchmark -J output "
                                        "(seqpar-train --validate: its verdict), scripts/sweep.py results, Google "
                                        "Benchmark output")->required();
  cmd->add_option("--out", args->options.out_dir, "output directory (created)")->required();
  cmd->add_option("--title", args->options.title, "report title")->capture_default_str();
  cmd->add_option("--python", args->options.python, "Python interpreter with matplotlib")->capture_default_str();
  cmd->add_option("--plots-dir", args->options.plots_dir,
                  "the folder of the plot scripts, seqpar's reports/plots/ (default: $SEQPAR_PLOTS_DIR, else the source tree "
                  "seqpar was built from)");
  cmd->add_option("--system", args->options.system,
                  "system preset name or calibrated profile (seqpar calibrate) to predict measured training steps on "
                  "(default: the preset of the GPU the steps ran on)");
  cmd->add_option("--framework", args->options.framework,
                  "framework profile to predict the measured training steps with (a preset or a path; default: the "
                  "one each step's document names: seqpar-train's program, bench_torch_step's implementation, a "
                  "minimal step's \"framework\"; else a calibrated --system's, else deepspeed-alst)");
  cmd->add_flag("--no-plots", args->no_plots, "tables only");
  cmd->add_flag("--json", args->json, "print the written files and warnings as JSON");
  cmd->callback([args] {
    using namespace seqpar::reports;
    args->options.plots = !args->no_plots;
    // One file given twice (or by two paths) would count each of its points, runs and verdicts twice.
    for (std::size_t i = 0; i < args->files.size(); ++i)
      for (std::size_t k = 0; k < i; ++k) {
        std::error_code ec;
        if (std::filesystem::equivalent(args->files[k], args->files[i], ec))
          throw Error(fmt::format("files: '{}' and '{}' are the same file; give each input once (its points would "
                                  "count twice)", args->files[k], args->files[i]));
      }
    std::vector<InputDocument> inputs;
    for (const auto& f : args->files) inputs.push_back({f, load_report_json_file(f)});
    ReportOutput out = write_report(inputs, args->options);
    for (const auto& w : out.warnings) std::cerr << "warning: " << w << "\n";
    if (args->json) {
      nlohmann::json j = {{"markdown", out.markdown_path}, {"html", out.html_path}, {"data", out.data_path},
                          {"images", out.images}, {"warnings", out.warnings},
                          {"peer_comparisons", out.peer_comparisons}, {"step_comparisons", out.step_comparisons},
                          {"validations", out.validations}};
      std::cout << dump_json(j) << "\n";
      return;
    }
    std::cout << fmt::format("wrote {}\n      {}\n      {}\n      {} plots\n", out.markdown_path, out.html_path,
                             out.data_path, out.images.size());
    if (!out.validations.empty()) std::cout << verdict_table(out.validations);
    if (!out.peer_comparisons.empty()) std::cout << peer_table(out.peer_comparisons);
    if (!out.step_comparisons["rows"].empty()) std::cout << step_table(out.step_comparisons);
  });
}

}  // namespace seqpar::cli

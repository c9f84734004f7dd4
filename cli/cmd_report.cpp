// `seqpar report FILE.json... --out DIR`: Markdown and one self-contained HTML report (plots
// embedded) from any mix of prediction, measurement, sweep and Google Benchmark JSON.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "seqpar/core/json_io.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/reports/report.hpp"

namespace seqpar::cli {

namespace {

struct ReportArgs {
  std::vector<std::string> files;
  seqpar::reports::ReportOptions options;
  bool no_plots = false;
  bool json = false;
};

}  // namespace

void add_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Write report.md, report.html (self-contained, plots embedded) and report-data.json from prediction "
                "and measurement JSON");
  cmd->add_option("files", args->files, "JSON files: seqpar simulate/sweep/advise output, benchmark -J output, "
                                        "scripts/sweep.py results, Google Benchmark output")->required();
  cmd->add_option("--out", args->options.out_dir, "output directory (created)")->required();
  cmd->add_option("--title", args->options.title, "report title")->capture_default_str();
  cmd->add_option("--python", args->options.python, "Python interpreter with matplotlib")->capture_default_str();
  cmd->add_option("--plots-dir", args->options.plots_dir,
                  "the folder of the plot scripts, seqpar's reports/plots/ (default: $SEQPAR_PLOTS_DIR, else the source tree "
                  "seqpar was built from)");
  cmd->add_flag("--no-plots", args->no_plots, "tables only");
  cmd->add_flag("--json", args->json, "print the written files and warnings as JSON");
  cmd->callback([args] {
    using namespace seqpar::reports;
    args->options.plots = !args->no_plots;
    std::vector<InputDocument> inputs;
    for (const auto& f : args->files) inputs.push_back({f, load_json_file(f)});
    ReportOutput out = write_report(inputs, args->options);
    for (const auto& w : out.warnings) std::cerr << "warning: " << w << "\n";
    if (args->json) {
      nlohmann::json j = {{"markdown", out.markdown_path}, {"html", out.html_path}, {"data", out.data_path},
                          {"images", out.images}, {"warnings", out.warnings}};
      std::cout << dump_json(j) << "\n";
      return;
    }
    std::cout << fmt::format("wrote {}\n      {}\n      {}\n      {} plots\n", out.markdown_path, out.html_path,
                             out.data_path, out.images.size());
  });
}

}  // namespace seqpar::cli

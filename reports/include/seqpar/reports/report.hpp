// `seqpar report`: inputs -> tidy data (report-data.json) -> figure specs drawn by the matplotlib
// scripts in reports/plots/ -> report.md (PNG files beside it) and one self-contained report.html.
#pragma once
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "seqpar/reports/calibrate.hpp"
#include "seqpar/reports/report_document.hpp"

namespace seqpar::reports {

struct ReportOptions {
  std::string out_dir;
  std::string title = "seqpar report";
  bool plots = true;                // false: tables only, each figure replaced by a note
  std::string python = "python3";
  std::string plots_dir;            // empty: $SEQPAR_PLOTS_DIR, else the source tree's reports/plots/
  std::string system;               // measured training steps are predicted on it; empty: the measured GPU's preset
  std::string framework;            // ... with this framework profile; empty: the one each step's document names
};

struct ReportOutput {
  std::string markdown_path, html_path, data_path;
  std::vector<std::string> images;    // PNG files written
  std::vector<std::string> warnings;  // plots that could not be drawn, and why
  // seqpar-train beside bench_torch_step (report-data.json's "peer_comparisons"), for the command's own output.
  nlohmann::json peer_comparisons = nlohmann::json::array();
  // Measured training steps beside the simulator (report-data.json's "step_comparisons": step_comparison.hpp).
  nlohmann::json step_comparisons;
  // The seqpar-train --validate verdicts (report-data.json's "validations": validation_verdict.hpp).
  nlohmann::json validations = nlohmann::json::array();
};

// The figures to draw for this data (type, drawer, file, title, and the series to plot); each kind
// and the script that draws it are listed in figure_kinds.hpp (reports/plots/<drawer>). Bounded
// whatever the sweep: at most six GPU counts are drawn (figure_gpu_counts_text says which).
nlohmann::json plan_figures(const nlohmann::json& data);
// Which GPU counts the figures show where the data has more than they draw ("" when all).
std::string figure_gpu_counts_text(const nlohmann::json& data);

// Sections, tables and figure references; figures whose file is not in `drawn` become a note.
Document build_document(const nlohmann::json& data, const nlohmann::json& figures, const std::set<std::string>& drawn,
                        const std::string& title);

// Where the plot scripts (reports/plots/) lie: options.plots_dir, $SEQPAR_PLOTS_DIR, or the source tree it was built from.
std::string resolve_plots_dir(const std::string& configured);

ReportOutput write_report(const std::vector<InputDocument>& inputs, const ReportOptions& options);

}  // namespace seqpar::reports

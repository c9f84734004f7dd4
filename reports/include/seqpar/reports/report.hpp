// `seqpar report`: inputs -> tidy data (report-data.json) -> figure specs drawn by the matplotlib
// scripts in scripts/plots/ -> report.md (PNG files beside it) and one self-contained report.html.
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
  std::string scripts_dir;          // empty: $SEQPAR_SCRIPTS_DIR, else the source tree's scripts/
};

struct ReportOutput {
  std::string markdown_path, html_path, data_path;
  std::vector<std::string> images;    // PNG files written
  std::vector<std::string> warnings;  // plots that could not be drawn, and why
};

// The figures to draw for this data (type, file, title, and the series to plot); see
// scripts/plots/render.py for the spec of each type.
nlohmann::json plan_figures(const nlohmann::json& data);

// Sections, tables and figure references; figures whose file is not in `drawn` become a note.
Document build_document(const nlohmann::json& data, const nlohmann::json& figures, const std::set<std::string>& drawn,
                        const std::string& title);

// Where scripts/ lies: options.scripts_dir, $SEQPAR_SCRIPTS_DIR, or the source tree it was built from.
std::string resolve_scripts_dir(const std::string& configured);

ReportOutput write_report(const std::vector<InputDocument>& inputs, const ReportOptions& options);

}  // namespace seqpar::reports

// The kinds of report figure, each with the Python script in reports/plots/ that draws it. The C++
// side (plan_figures) writes figure specs only through this table; reports/plots/render.py
// dispatches on the same names. scripts/tests/test_plots.py reads this table and fails when a kind
// has no drawer or a drawer has no kind, so a new figure kind is one entry here plus its script.
#pragma once
#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace seqpar::reports {

struct FigureKind {
  std::string_view type;    // the spec's "type"
  std::string_view drawer;  // the script in reports/plots/ that draws it (its "draw(spec, path)")
};

inline constexpr FigureKind kLinesFigure{"lines", "lines.py"};                 // panels of x-y lines
inline constexpr FigureKind kStackedBarsFigure{"stacked_bars", "stacked_bars.py"};  // stacked bars per category
inline constexpr FigureKind kParityFigure{"parity", "parity.py"};              // predicted against measured
inline constexpr std::array<FigureKind, 3> kFigureKinds{kLinesFigure, kStackedBarsFigure, kParityFigure};

// The start of a spec of this kind: its type, its drawer (reports/plots/<drawer>), report section and PNG file name.
inline nlohmann::json figure_spec(const FigureKind& kind, const std::string& section, const std::string& file) {
  return {{"type", std::string(kind.type)},
          {"drawer", "reports/plots/" + std::string(kind.drawer)},
          {"section", section},
          {"file", file}};
}

}  // namespace seqpar::reports

// The JSON form of a GPU preset's calibrated efficiency curves (hardware.hpp), read by the preset
// loader and written by `seqpar calibrate`, so the two share one definition of the fields:
//   "gemm_exponent": 3.05 (or {"value": 3.05, "source": "..."}; optional, default 1)
//   "attention_curves": [{"op": "fwd" | "bwd", "head_dim": 128, "causal": true,
//                         "efficiency": 0.05, "half_tokens": 1556, "exponent": 0.9, "source": "..."}]
// head_dim and causal may be left out when the measurements did not record them.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "seqpar/sim/hardware.hpp"

namespace seqpar::sim {

// Bounds of a curve's figures; the exponent's keep L^p finite and the curve monotone.
inline constexpr double kMinCurveExponent = 0.1, kMaxCurveExponent = 10;

// Reads the optional fields above from a GPU object into `g`; seqpar::Error naming `what`, the
// field and the rule for a malformed one (efficiency outside (0, 1], unknown op, ...).
void read_efficiency_curves(const nlohmann::json& gpu, std::string_view what, Gpu& g);

// A number, or a figure {"value": number, "source": ...}, finite and within [lo, hi]; the rule
// every optional calibrated figure is read by. seqpar::Error naming `what` and `key` otherwise.
double bounded_figure(const nlohmann::json& obj, const char* key, std::string_view what, double lo, double hi);

nlohmann::json attention_curve_json(const AttentionCurve& c, const std::string& source);

}  // namespace seqpar::sim

#include "seqpar/sim/efficiency_curves.hpp"

#include <fmt/format.h>

#include <cmath>

#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"

namespace seqpar::sim {

using nlohmann::json;

namespace {

constexpr double kMaxHeadDim = 65536;  // far beyond any real kernel; keeps the int conversion defined

// A number, or a figure {"value": number, "source": ...}, finite and within [lo, hi].
double bounded(const json& obj, const char* key, std::string_view what, double lo, double hi) {
  auto it = obj.find(key);
  if (it == obj.end()) throw Error(fmt::format("{}: missing field '{}'", what, key));
  const json* v = &*it;
  if (v->is_object()) {
    auto vi = v->find("value");
    if (vi == v->end()) throw Error(fmt::format("{}: field '{}' has no \"value\"", what, key));
    v = &*vi;
  }
  if (!v->is_number()) throw Error(fmt::format("{}: field '{}' must be a number", what, key));
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    throw Error(fmt::format("{}: field '{}' must be between {} and {} (got {})", what, key, format_number(lo),
                            format_number(hi), format_number(x)));
  return x;
}

EfficiencyCurve read_curve(const json& j, std::string_view what) {
  EfficiencyCurve c;
  c.efficiency = bounded(j, "efficiency", what, 0, 1);
  if (!(c.efficiency > 0)) throw Error(fmt::format("{}: field 'efficiency' must be in (0, 1] (got 0)", what));
  c.half_tokens = bounded(j, "half_tokens", what, 0, 1e9);
  c.exponent = bounded(j, "exponent", what, kMinCurveExponent, kMaxCurveExponent);
  return c;
}

}  // namespace

double bounded_figure(const json& obj, const char* key, std::string_view what, double lo, double hi) {
  return bounded(obj, key, what, lo, hi);
}

void read_efficiency_curves(const json& gpu, std::string_view what, Gpu& g) {
  if (gpu.contains("gemm_exponent"))
    g.gemm_exponent = bounded(gpu, "gemm_exponent", what, kMinCurveExponent, kMaxCurveExponent);
  auto it = gpu.find("attention_curves");
  if (it == gpu.end()) return;
  if (!it->is_array()) throw Error(fmt::format("{}: field 'attention_curves' must be a list", what));
  g.attention_curves.clear();
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& e = (*it)[i];
    const std::string w = fmt::format("{}: attention_curves[{}]", what, i);
    if (!e.is_object()) throw Error(fmt::format("{}: expected an object", w));
    AttentionCurve c;
    auto op = e.find("op");
    if (op == e.end() || !op->is_string() || (*op != "fwd" && *op != "bwd"))
      throw Error(fmt::format("{}: field 'op' must be \"fwd\" or \"bwd\"", w));
    c.backward = *op == "bwd";
    if (e.contains("head_dim")) {
      const double d = bounded(e, "head_dim", w, 1, kMaxHeadDim);
      if (d != std::floor(d)) throw Error(fmt::format("{}: field 'head_dim' must be a whole number (got {:g})", w, d));
      c.head_dim = static_cast<int>(d);
    }
    if (auto ca = e.find("causal"); ca != e.end()) {
      if (!ca->is_boolean()) throw Error(fmt::format("{}: field 'causal' must be true or false", w));
      c.causal = ca->get<bool>();
    }
    c.curve = read_curve(e, w);
    g.attention_curves.push_back(c);
  }
}

json attention_curve_json(const AttentionCurve& c, const std::string& source) {
  json j = {{"op", c.backward ? "bwd" : "fwd"}};
  if (c.head_dim > 0) j["head_dim"] = c.head_dim;
  if (c.causal) j["causal"] = *c.causal;
  j["efficiency"] = c.curve.efficiency;
  j["half_tokens"] = c.curve.half_tokens;
  j["exponent"] = c.curve.exponent;
  j["source"] = source;
  return j;
}

}  // namespace seqpar::sim

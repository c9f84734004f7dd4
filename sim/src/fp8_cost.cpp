#include "seqpar/sim/fp8_cost.hpp"

#include <fmt/format.h>

#include "element_bytes.hpp"
#include "seqpar/sim/compute_cost.hpp"
#include "seqpar/sim/framework_terms.hpp"
#include "seqpar/sim/moe_cost.hpp"

namespace seqpar::sim {

double fp8_cast_bytes_per_element(Fp8Recipe r) {
  switch (r) {
    // Transformer Engine's cast_transpose: one read of bf16, the FP8 value and its transpose
    // written in the same pass, the amax reduced inside it (the scale comes from the history).
    case Fp8Recipe::delayed: return kBf16 + 2 * kFp8;
    // The same after one more read for this tensor's own amax (Float8CurrentScaling, torchao's tensorwise).
    case Fp8Recipe::current: return 2 * kBf16 + 2 * kFp8;
    // Row-wise scales for one operand and column-wise for its transpose: each an amax read and a
    // cast pass (torchao's rowwise recipe quantizes the two layouts separately).
    case Fp8Recipe::rowwise: return 2 * (2 * kBf16 + kFp8);
    // MXFP8: the 32-element block's amax is local, so one read writes both layouts and a scale byte per block each.
    case Fp8Recipe::mxfp8: return kBf16 + 2 * kFp8 + 2 * kFp8 / 32;
  }
  return 0;
}

double linear_gemm_time(const System& s, const Plan& p, double flops, double tokens, int launches) {
  if (!p.precision.has(Fp8Part::gemm) || s.gpu.fp8_flops <= 0) return framework_gemm_time(s, flops, tokens, launches);
  return fp8_gemm_time(s.gpu, flops, tokens, launches, s.framework.gemm_step_efficiency);
}

Fp8CastBytes fp8_activation_cast_bytes(const Model& m, const Plan& p, double tokens) {
  if (!p.precision.has(Fp8Part::gemm)) return {};
  const double q = double(m.heads) * m.head_dim, kv = double(m.kv_heads) * m.head_dim;
  const double tp = p.tp > 0 ? p.tp : 1, per = fp8_cast_bytes_per_element(p.precision.recipe);
  // Inputs of QKV, the projection, fc1, fc2; gradients of their outputs. A rank holds 1/tp of each
  // (sequence-parallel shards of the hidden ones, its columns of the others).
  const double inputs = m.hidden + q + m.hidden + m.mlp_width();
  const double grads = (q + 2 * kv) + m.hidden + (m.moe() ? 2 * m.mlp_width() : double(m.fc1_columns())) + m.hidden;
  return {per * tokens * inputs / tp, per * tokens * grads / tp};
}

double fp8_weight_cast_bytes(const Model& m, const Plan& p) {
  if (!p.precision.has(Fp8Part::gemm) || p.precision.has(Fp8Part::weights)) return 0;
  const double tp = p.tp > 0 ? p.tp : 1;
  // A MoE rank casts its own experts (1/ep of them: moe_cost.hpp).
  if (m.moe()) return fp8_cast_bytes_per_element(p.precision.recipe) * double(m.layers) * moe_layer_params_per_rank(m, p);
  return fp8_cast_bytes_per_element(p.precision.recipe) * double(m.layers) * double(m.params_per_layer()) / tp;
}

double parameter_gather_bytes_per_param(const Plan& p) { return p.precision.has(Fp8Part::weights) ? kFp8 : kBf16; }

double forward_activation_bytes_scale(const Plan& p) { return p.precision.has(Fp8Part::comm) ? kFp8 / kBf16 : 1.0; }

namespace {
std::string rate_text(double flops_per_s, double efficiency) {
  return fmt::format("{:.0f} TFLOP/s peak x {:.2f}", flops_per_s / 1e12, efficiency);
}
}  // namespace

nlohmann::json fp8_json(const System& s, const Plan& p) {
  const Precision& x = p.precision;
  nlohmann::json j = {{"parts", fp8_parts_text(x)}};
  if (!x.any_fp8()) return j;
  const Gpu& g = s.gpu;
  j["recipe"] = std::string(to_string(x.recipe));
  j["framework"] = s.profile.name;
  j["framework_source"] = s.profile.fp8_source;
  j["gemm"] = x.has(Fp8Part::gemm) ? nlohmann::json{{"dtype", "fp8"}, {"peak_tflops", g.fp8_flops / 1e12},
                                                  {"efficiency", g.fp8_gemm_efficiency}}
                                   : nlohmann::json{{"dtype", "bf16"}};
  const bool attention = x.has(Fp8Part::attention);
  j["attention_forward"] = attention && g.fp8_attention_fwd_efficiency > 0 ? "fp8" : "bf16";
  j["attention_backward"] = attention && g.fp8_attention_bwd_efficiency > 0 ? "fp8" : "bf16";
  j["cast_bytes_per_element"] = x.has(Fp8Part::gemm) ? fp8_cast_bytes_per_element(x.recipe) : 0.0;
  j["parameter_gather_bytes_per_param"] = parameter_gather_bytes_per_param(p);
  j["forward_activation_bytes_scale"] = forward_activation_bytes_scale(p);
  return j;
}

std::vector<std::string> fp8_lines(const System& s, const Plan& p) {
  const Precision& x = p.precision;
  if (!x.any_fp8()) return {};
  const Gpu& g = s.gpu;
  std::vector<std::string> out;
  out.push_back(fmt::format("FP8: {} ({} scaling), framework {}", fp8_parts_text(x), to_string(x.recipe), s.profile.name));
  out.push_back(x.has(Fp8Part::gemm)
                    ? fmt::format("  linear layers: FP8 GEMMs at {}, operands cast at {:g} bytes per element (the LM "
                                  "head stays bf16)",
                                  rate_text(g.fp8_flops, g.fp8_gemm_efficiency), fp8_cast_bytes_per_element(x.recipe))
                    : "  linear layers: bf16");
  if (x.has(Fp8Part::attention)) {
    auto dir = [&](double eff) {
      return eff > 0 ? "FP8 at " + rate_text(g.fp8_flops, eff) : std::string("bf16 (the kernel has no FP8 path here)");
    };
    out.push_back(fmt::format("  attention ({}): forward {}; backward {}", g.attention_kernel,
                              dir(g.fp8_attention_fwd_efficiency), dir(g.fp8_attention_bwd_efficiency)));
  } else {
    out.push_back("  attention: bf16");
  }
  out.push_back(fmt::format("  parameter all-gather: {:g} byte(s) per parameter ({}); gradients reduce in bf16",
                            parameter_gather_bytes_per_param(p), x.has(Fp8Part::weights) ? "FP8" : "bf16"));
  out.push_back(fmt::format("  sequence-parallel activations: forward {}, backward bf16",
                            x.has(Fp8Part::comm) ? "FP8" : "bf16"));
  return out;
}

}  // namespace seqpar::sim

#include "seqpar/sim/moe_cost.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "element_bytes.hpp"
#include "seqpar/sim/fp8_cost.hpp"

namespace seqpar::sim {

namespace {
// Forward FLOPs over `tokens` rows of a SwiGLU MLP of width `ffn` (gate, up, down).
double swiglu_flops(const Model& m, double tokens, double ffn) { return 2.0 * tokens * 3.0 * m.hidden * ffn; }
double router_flops(const Model& m, double tokens) { return 2.0 * tokens * m.hidden * double(m.experts.routed); }
double shared_flops(const Model& m, double tokens) {
  return swiglu_flops(m, tokens, double(m.experts.shared) * m.experts.shared_ffn);
}
// A dense layer's MLP, as compute_cost's mlp_gemm_flops counts it for a dense model.
double dense_flops(const Model& m, double tokens) {
  return 2.0 * tokens * (m.mlp == MlpKind::swiglu ? 3.0 : 2.0) * m.hidden * m.ffn_hidden;
}
}  // namespace

double moe_mlp_flops(const Model& m, double tokens) {
  const double moe_layer = swiglu_flops(m, tokens, double(m.experts.top_k) * m.experts.ffn) +
                           shared_flops(m, tokens) + router_flops(m, tokens);
  return (double(m.layers - m.moe_layers()) * dense_flops(m, tokens) + double(m.moe_layers()) * moe_layer) / m.layers;
}

Placement place_ep_group(const System& s, const Plan& p) {
  return place_group(s, std::max(1, p.ep), std::max(1, p.tp), p.gpus);
}

std::string expert_parallel_refusal(const Model& m, const Plan& p) {
  if (p.ep == 1) return {};
  if (!m.moe())
    return fmt::format("ep: model '{}' has no experts; expert parallelism (ep {}) needs a mixture-of-experts model",
                       m.name, p.ep);
  if (m.experts.routed % p.ep != 0)
    return fmt::format("ep: the {} routed experts of model '{}' are not divisible by ep {} (each EP rank holds a whole "
                       "number of experts)", m.experts.routed, m.name, p.ep);
  return {};
}

double moe_layer_params_per_rank(const Model& m, const Plan& p) {
  const double tp = std::max(1, p.tp), ep = std::max(1, p.ep), experts = double(m.routed_expert_params_total());
  return ((double(m.layer_params_total()) - experts) / tp + experts / (tp * ep)) / m.layers;
}

double moe_local_mlp_columns(const Model& m, const Plan& p) {
  const Experts& e = m.experts;
  const double moe_layer = double(e.routed) / std::max(1, p.ep) * e.ffn + double(e.shared) * e.shared_ffn;
  return (double(m.layers - m.moe_layers()) * m.ffn_hidden + double(m.moe_layers()) * moe_layer) / m.layers;
}

double moe_dispatch_bytes_per_layer(const Model& m, const Plan& p, double tokens) {
  const double rows = tokens / std::max(1, p.tp) * m.experts.top_k;
  const double per_moe_layer = rows * (kBf16 * m.hidden + kF32 + 4.0);  // tokens; fp32 probability, int32 index
  return per_moe_layer * m.moe_layers() / m.layers;
}

MoeCost moe_layer_cost(const Model& m, const System& s, const Plan& p, double tokens) {
  MoeCost c;
  const double T = tokens, tp = std::max(1, p.tp), ep = std::max(1, p.ep), L = m.layers;
  const Experts& e = m.experts;
  const double moe_layers = m.moe_layers(), dense_layers = L - moe_layers;
  const double per_rank_experts = double(e.routed) / ep;
  c.load = p.ep > 1 ? (e.imbalance + per_rank_experts - 1.0) / per_rank_experts : 1.0;
  c.rows_per_expert = T * e.top_k * ep / e.routed;

  auto layer = [&](double flops_scale, int launch_scale) {
    double t = linear_gemm_time(s, p, flops_scale * router_flops(m, T) / tp, T, launch_scale);
    if (e.shared > 0) t += linear_gemm_time(s, p, flops_scale * shared_flops(m, T) / tp, T, 3 * launch_scale);
    const double routed = flops_scale * swiglu_flops(m, T, double(e.top_k) * e.ffn) / tp * c.load;
    t += linear_gemm_time(s, p, routed, c.rows_per_expert, 3 * launch_scale);
    return t;
  };
  auto dense = [&](double flops_scale, int launch_scale) {
    return linear_gemm_time(s, p, flops_scale * dense_flops(m, T) / tp, T, 3 * launch_scale);
  };
  c.mlp_fwd_s = (moe_layers * layer(1, 1) + (dense_layers > 0 ? dense_layers * dense(1, 1) : 0.0)) / L;
  c.mlp_bwd_s = (moe_layers * layer(2, 2) + (dense_layers > 0 ? dense_layers * dense(2, 2) : 0.0)) / L;

  if (p.ep > 1) {
    c.all_to_all_bytes = T / tp * e.top_k * m.hidden * kBf16;
    c.all_to_all_s = collective_time(s, Collective::all_to_all, c.all_to_all_bytes, place_ep_group(s, p));
    // Dispatch and combine in each pass.
    c.all_to_all_fwd_s = c.all_to_all_bwd_s = 2.0 * c.all_to_all_s * moe_layers / L;
  }
  return c;
}

}  // namespace seqpar::sim

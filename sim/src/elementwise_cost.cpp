#include "seqpar/sim/elementwise_cost.hpp"

#include "seqpar/sim/attention_cost.hpp"
#include "seqpar/sim/compute_cost.hpp"
#include "seqpar/sim/framework_terms.hpp"
#include "seqpar/sim/fp8_cost.hpp"
#include "seqpar/sim/memory_cost.hpp"

namespace seqpar::sim {

ElementwiseCost layer_elementwise_cost(const Model& m, const System& s, const Plan& p) {
  const AttentionShapes a = attention_shapes(m, p);
  const double T = a.batch * a.local_tokens, tp = p.tp > 0 ? p.tp : 1;
  const Framework& f = s.profile;
  // The share of the norm regions a rank runs beyond its 1/tp: none with sequence parallelism.
  const double whole = f.tp_sequence_parallel ? 0.0 : 1.0 - 1.0 / tp;
  const double norms = layer_norm_region_bytes_per_token(m) * T * whole;
  double fwd = layer_elementwise_bytes_per_token(m) * T / tp + norms, bwd = 2 * fwd;
  const std::array<double, kWidths> w = rank_widths(m, f, p);
  for (const ElementwiseTerm& e : f.layer_elementwise) {
    double values = 0;
    for (std::size_t i = 0; i < w.size(); ++i) values += e.per_token[i] * w[i];
    fwd += e.forward_bytes * values * T;
    bwd += e.backward_bytes * values * T;
  }
  // FP8 GEMMs' operand casts (fp8_cost.hpp): inputs forward, output gradients backward.
  const Fp8CastBytes casts = fp8_activation_cast_bytes(m, p, T);
  fwd += casts.fwd;
  bwd += casts.bwd;
  ElementwiseCost c;
  c.fwd_s = framework_memory_bound_time(s, fwd);
  c.bwd_s = framework_memory_bound_time(s, bwd);
  c.fp8_cast_fwd_s = framework_memory_bound_time(s, casts.fwd);
  c.fp8_cast_bwd_s = framework_memory_bound_time(s, casts.bwd);
  // Selective recompute rebuilds the norms (whole on every rank without sequence parallelism too)
  // and the activation.
  const double selective_norms = selective_recompute_norm_bytes_per_token(m) * T * whole;
  c.selective_s = framework_memory_bound_time(s, selective_recompute_bytes_per_token(m) * T / tp + selective_norms);
  return c;
}

}  // namespace seqpar::sim

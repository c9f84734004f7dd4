#include "seqpar/sim/document_cost.hpp"

#include <fmt/format.h>

#include "seqpar/core/error.hpp"
#include "seqpar/sim/methods.hpp"

namespace seqpar::sim {

Balancer native_balancer(const Plan& p) {
  return method_entry(p.method).ring_layout == RingLayout::zigzag ? Balancer::zigzag : Balancer::contiguous;
}

std::vector<Balancer> balancers_for(const Plan& p) {
  if (p.ring_degree < 2) return {native_balancer(p)};
  switch (p.method) {
    case Method::ring:
    case Method::allgather_contiguous:
    case Method::ulysses: return {native_balancer(p)};
    case Method::hybrid: return {Balancer::zigzag, Balancer::contiguous, Balancer::per_document, Balancer::balanced};
    case Method::ring_zigzag:
    case Method::allgather: break;
  }
  return {Balancer::zigzag, Balancer::per_document, Balancer::balanced};
}

namespace {

SpShape shape_of(const Plan& p) {
  return SpShape{p.ulysses_degree, p.ring_degree, kv_all_gather(p)};
}

// a / b, where a step the reference leaves empty (no unmasked pair for any rank) keeps the
// workload's absolute count against the reference's whole-step figure: never a division by zero.
double ratio(double a, double b, double fallback_b) {
  if (b > 0) return a / b;
  return fallback_b > 0 ? a / fallback_b : (a > 0 ? 1.0 : 0.0);
}

}  // namespace

DocumentCosts document_costs(const SampledWorkload& w, const Plan& p, Balancer b) {
  if (w.seq_len != p.seq_len)
    throw Error(fmt::format("documents: the workload was sampled for {}-token sequences, the plan runs {}", w.seq_len,
                            p.seq_len));
  DocumentCosts c;
  c.balancer = b;
  WorkOptions opt;
  opt.q_rows = opt.k_rows = kDocumentTileRows;
  const SpShape shape = shape_of(p);
  c.work = count_workload_work(w, shape, b, opt);
  // One causal sequence filling seq_len: the workload the simulator has always assumed.
  SampledWorkload one;
  one.seq_len = p.seq_len;
  one.batches.push_back(PackedBatch{{0, p.seq_len}, {0}, {1}});
  one.drawn = {p.seq_len};
  c.reference = count_workload_work(one, shape, native_balancer(p), opt);
  const std::size_t steps = c.work.step_max_tiles.size();
  double ref_mean = 0;
  for (double t : c.reference.step_max_tiles) ref_mean += t;
  ref_mean /= double(std::max<std::size_t>(1, c.reference.step_max_tiles.size()));
  c.step_factor.resize(steps);
  for (std::size_t s = 0; s < steps; ++s)
    c.step_factor[s] = ratio(c.work.step_max_tiles[s], s < c.reference.step_max_tiles.size() ? c.reference.step_max_tiles[s] : 0,
                             ref_mean);
  c.token_factor = c.reference.max_rank_tokens > 0
                       ? double(c.work.max_rank_tokens) / double(c.reference.max_rank_tokens)
                       : 1.0;
  c.work_ratio = c.reference.total_pairs > 0 ? c.work.total_pairs / c.reference.total_pairs : 1.0;
  return c;
}

}  // namespace seqpar::sim

#include "seqpar/sim/document_cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <cmath>

#include "seqpar/core/checked.hpp"
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

// The length whose even share over the ring ranks is `max_rank_tokens` (DocumentCosts::memory_seq_len).
std::int64_t memory_seq_len_of(std::int64_t max_rank_tokens, const Plan& p) {
  return std::max(p.seq_len, checked_mul<std::int64_t>(max_rank_tokens, p.ring_degree, "padded tokens x ring_degree"));
}

void check_sampled_for(const SampledWorkload& w, const Plan& p) {
  if (w.seq_len != p.seq_len)
    throw Error(fmt::format("documents: the workload was sampled for {}-token sequences, the plan runs {}", w.seq_len,
                            p.seq_len));
}

}  // namespace

std::optional<std::int64_t> even_share_memory_seq_len(const Plan& p, Balancer b) {
  if (!holds_even_share(b)) return std::nullopt;
  const std::int64_t one_document[] = {0, p.seq_len};  // the rules and the share depend on N alone
  return memory_seq_len_of(fullest_rank_tokens(one_document, p.ulysses_degree, p.ring_degree, b), p);
}

std::int64_t document_memory_seq_len(const SampledWorkload& w, const Plan& p, Balancer b) {
  check_sampled_for(w, p);
  std::int64_t most = 0;
  for (const PackedBatch& batch : w.batches)
    most = std::max(most, fullest_rank_tokens(batch.cu_seqlens, p.ulysses_degree, p.ring_degree, b));
  return memory_seq_len_of(most, p);
}

std::vector<TileCost> varlen_tile_cost(const VarlenAttention& v) {
  std::vector<TileCost> out;
  if (!v.measured()) return out;
  // Useful FLOPs per charged tile, in pairs: a causal document of L tokens has causal_pairs(L) over
  // the tiles doc_work counts for it; without a mask L^2 over the whole grid.
  auto density = [&](std::int64_t L) {
    if (v.causal) {
      WorkOptions opt;
      opt.q_rows = opt.k_rows = kDocumentTileRows;
      const std::int64_t cu[] = {0, L};
      const BatchWork one = count_batch_work(cu, SpShape{}, Balancer::contiguous, opt);
      return double(one.total_pairs) / double(one.ranks.front().tiles);
    }
    const double t = std::ceil(double(L) / kDocumentTileRows);
    return double(L) * double(L) / (t * t);
  };
  const std::size_t last = v.lengths.size() - 1;
  const double long_tile = density(v.lengths[last]) / v.flops_per_s[last];
  for (std::size_t i = 0; i < v.lengths.size(); ++i)
    out.push_back({v.lengths[i], density(v.lengths[i]) / v.flops_per_s[i] / long_tile});
  return out;
}

DocumentCosts document_costs(const SampledWorkload& w, const Plan& p, Balancer b, const Gpu& gpu) {
  check_sampled_for(w, p);
  DocumentCosts c;
  c.balancer = b;
  WorkOptions opt;
  opt.q_rows = opt.k_rows = kDocumentTileRows;
  opt.tile_cost = varlen_tile_cost(gpu.varlen);
  c.varlen_measured = gpu.varlen.measured();
  c.varlen_source = gpu.varlen.source;
  const SpShape shape = shape_of(p);
  c.work = count_workload_work(w, shape, b, opt);
  // One causal sequence filling seq_len: the workload the simulator has always assumed.
  SampledWorkload one;
  one.seq_len = p.seq_len;
  one.batches.push_back(PackedBatch{{0, p.seq_len}, {0}, {1}});
  one.drawn = {p.seq_len};
  c.reference = count_workload_work(one, shape, native_balancer(p), opt);
  // Per step the slowest rank's weighted tiles (= its tiles without a varlen measurement).
  const std::vector<double>&work = c.work.step_max_cost, &ref = c.reference.step_max_cost;
  const std::size_t steps = work.size();
  double ref_mean = 0;
  for (double t : ref) ref_mean += t;
  ref_mean /= double(std::max<std::size_t>(1, ref.size()));
  c.step_factor.resize(steps);
  for (std::size_t s = 0; s < steps; ++s) c.step_factor[s] = ratio(work[s], s < ref.size() ? ref[s] : 0, ref_mean);
  if (c.varlen_measured) {
    auto weighted_over_tiles = [](const WorkloadWork& x) {
      double cost = 0;
      for (double t : x.step_max_cost) cost += t;
      return x.sum_step_max_tiles > 0 ? cost / x.sum_step_max_tiles : 1.0;
    };
    c.short_document_factor = weighted_over_tiles(c.work) / weighted_over_tiles(c.reference);
  }
  c.token_factor = c.reference.max_rank_tokens > 0
                       ? double(c.work.max_rank_tokens) / double(c.reference.max_rank_tokens)
                       : 1.0;
  c.memory_seq_len = memory_seq_len_of(c.work.max_rank_tokens, p);
  c.work_ratio = c.reference.total_pairs > 0 ? c.work.total_pairs / c.reference.total_pairs : 1.0;
  // Whatever the plan's stages: the costs are shared by the structures with the same degrees.
  if (const WorkRatios r = work_ratios(w); r.mean > 0) c.heaviest_work_factor = r.max / r.mean;
  return c;
}

}  // namespace seqpar::sim

#include "documents.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "seqpar/core/parse.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/methods.hpp"
#include "table.hpp"

namespace seqpar::cli {

std::optional<SampledWorkload> sample_documents(const DocumentOptions& o, std::int64_t seq_len) {
  const std::optional<Workload> w = o.workload();
  if (!w) return std::nullopt;
  return sample_workload(*w, seq_len);
}

Balancer plan_balancer(const DocumentOptions& o, const seqpar::Plan& p) {
  return o.balancer.empty() ? sim::native_balancer(p) : parse_balancer(o.balancer);
}

namespace {

std::string balancer_label(const DocumentRow& r) {
  return r.plan.method == Method::ulysses ? std::string("- (by heads)") : to_string(r.balancer);
}

}  // namespace

std::vector<DocumentRow> document_rows(const sim::Model& m, const sim::System& s, const seqpar::Plan& p,
                                       const SampledWorkload& w) {
  std::vector<DocumentRow> rows;
  for (const Method method : kAllMethods) {
    seqpar::Plan q = p;
    q.method = method;
    if (method == p.method) {
      // The plan's own degrees (a hybrid's U x R as given).
    } else {
      q.ulysses_degree = q.ring_degree = 0;
      q = normalized(q, s.gpus_per_node);
      // A hybrid of one group or of groups of one is the Ulysses or ring row already shown.
      if (method == Method::hybrid && (q.ulysses_degree == 1 || q.ring_degree == 1)) continue;
    }
    for (const Balancer b : sim::balancers_for(q)) {
      DocumentRow row;
      row.plan = q;
      row.balancer = b;
      row.uniform = sim::simulate(m, s, q);
      if (!row.uniform.valid) {
        row.refused = row.uniform.errors.empty() ? "invalid plan" : row.uniform.errors.front();
      } else {
        try {
          row.costs = sim::document_costs(w, q, b, s.gpu);
          row.docs = sim::simulate(m, s, q, *row.costs);
        } catch (const Error& e) {
          row.refused = e.what();
        }
      }
      rows.push_back(std::move(row));
      if (!rows.back().refused.empty() && method != Method::hybrid) break;  // a plan rule refuses every balancer
    }
  }
  return rows;
}

namespace {
std::string lengths(const LengthStats& l) {
  return fmt::format("{} documents, mean {:.0f}, std {:.0f}, p50 {:.0f}, p95 {:.0f}, max {:.0f} tokens", l.count, l.mean,
                     l.stddev, l.p50, l.p95, l.max);
}
nlohmann::json lengths_json(const LengthStats& l) {
  return {{"count", l.count}, {"mean", l.mean}, {"std", l.stddev}, {"p50", l.p50}, {"p95", l.p95}, {"max", l.max}};
}
}  // namespace

std::vector<double> rank_work(const sim::DocumentCosts& c) {
  const std::vector<double>& v = c.work.rank_tiles;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= double(std::max<std::size_t>(1, v.size()));
  std::vector<double> out;
  for (double x : v) out.push_back(mean > 0 ? x / mean : 0.0);
  return out;
}

void print_workload_summary(const DocumentOptions& o, const SampledWorkload& w) {
  const WorkloadSummary sum = summarize(w);
  fmt::print("workload: --documents {}, packing {}, seed {}, {} sequences of {} tokens sampled\n", o.documents,
             o.packing, o.seed, w.batches.size(), format_count(w.seq_len));
  fmt::print("  drawn:  {}\n", lengths(sum.drawn));
  fmt::print("  packed: {} (pieces the mask sees; {:.1f} per sequence)\n", lengths(sum.pieces),
             sum.pieces_per_batch_mean);
  fmt::print("  attention work under the document mask: {:.4f} of one full causal sequence (min {:.4f}, max {:.4f})\n",
             sum.work_ratio_mean, sum.work_ratio_min, sum.work_ratio_max);
}

void print_workload(const DocumentOptions& o, const SampledWorkload& w, const seqpar::Plan& p,
                    const sim::DocumentCosts& c) {
  print_workload_summary(o, w);
  if (p.ring_degree > 1 || p.ulysses_degree > 1) {
    const std::vector<double> ranks = rank_work(c);
    std::string list;
    if (ranks.size() <= 16) {
      for (double r : ranks) list += fmt::format("{}{:.2f}", list.empty() ? "" : " ", r);
    } else {
      list = fmt::format("min {:.2f}, max {:.2f} over {} ring ranks", *std::min_element(ranks.begin(), ranks.end()),
                         *std::max_element(ranks.begin(), ranks.end()), ranks.size());
    }
    fmt::print("  load balancer {}: per ring rank attention work (tiles, over the mean): {}\n", to_string(c.balancer),
               list);
    fmt::print("  slowest rank / mean: {:.3f} (p95 over sequences {:.3f}); tokens of the fullest rank {:.3f}x N/R\n",
               c.work.imbalance_tiles_mean, c.work.imbalance_tiles_p95, c.token_factor);
  }
}

void print_short_documents(const sim::Gpu& g, const sim::DocumentCosts* c) {
  const std::string kernel = g.attention_kernel.empty() ? std::string("the attention kernel") : g.attention_kernel;
  if (!g.varlen.measured()) {
    fmt::print("  short documents: whole {}x{} tiles charged; {} on {}: {}\n\n", sim::kDocumentTileRows,
               sim::kDocumentTileRows, kernel, g.name, g.varlen.source);
    return;
  }
  std::string points;
  for (const TileCost& t : sim::varlen_tile_cost(g.varlen))
    points += fmt::format("{}{}: {:.2f}", points.empty() ? "" : ", ", format_count(t.rows), t.cost);
  fmt::print("  short documents: whole {}x{} tiles charged, each costing, for a piece of this many query rows, "
             "(x a long document's tile) {}", sim::kDocumentTileRows, sim::kDocumentTileRows, points);
  if (c) fmt::print("; at this mix and balancer it multiplies the slowest ranks' kernel time by {:.3f}", c->short_document_factor);
  fmt::print("\n    ({} on {}: {})\n\n", kernel, g.name, g.varlen.source);
}

nlohmann::json short_documents_json(const sim::Gpu& g, const sim::DocumentCosts* c) {
  nlohmann::json j = {{"tile_rows", sim::kDocumentTileRows}, {"attention_kernel", g.attention_kernel},
                      {"measured", g.varlen.measured()}, {"source", g.varlen.source}};
  nlohmann::json curve = nlohmann::json::array();
  for (const TileCost& t : sim::varlen_tile_cost(g.varlen)) curve.push_back({{"rows", t.rows}, {"tile_cost", t.cost}});
  j["tile_cost"] = curve;
  if (c) j["factor"] = c->short_document_factor;
  return j;
}

void print_document_rows(const std::vector<DocumentRow>& rows) {
  // Ranks by step time, under the workload and under one causal sequence.
  std::vector<const DocumentRow*> ok;
  for (const DocumentRow& r : rows)
    if (r.refused.empty()) ok.push_back(&r);
  auto rank_of = [&](const DocumentRow& row, bool docs) {
    int k = 1;
    const double t = docs ? row.docs.step_time_s : row.uniform.step_time_s;
    for (const DocumentRow* o : ok) k += (docs ? o->docs.step_time_s : o->uniform.step_time_s) < t;
    return k;
  };
  Table t({"method", "balancer", "slowest/mean", "p95", "attention", "step time", "tokens/s/GPU", "rank",
           "rank, one sequence"});
  for (const DocumentRow& r : rows) {
    if (!r.refused.empty()) {
      t.add({seqpar::describe_structure(r.plan), balancer_label(r), "-", "-", "-", "-", "-", "-", r.refused});
      continue;
    }
    t.add({seqpar::describe_structure(r.plan), balancer_label(r), fmt::format("{:.3f}", r.costs->work.imbalance_tiles_mean),
           fmt::format("{:.3f}", r.costs->work.imbalance_tiles_p95),
           seconds(r.docs.time.attention), seconds(r.docs.step_time_s),
           format_rate(r.docs.tokens_per_s_per_gpu), fmt::format("{}", rank_of(r, true)),
           fmt::format("{}", rank_of(r, false))});
  }
  fmt::print("methods x load balancers under this workload (slowest/mean: the slowest ring rank's attention tiles "
             "over the mean, mean and p95 over the sampled sequences):\n{}\n",
             t.str());
}

nlohmann::json workload_summary_json(const DocumentOptions& o, const SampledWorkload& w) {
  const WorkloadSummary sum = summarize(w);
  return {{"documents", o.documents},
          {"packing", o.packing},
          {"seed", o.seed},
          {"batches", w.batches.size()},
          {"drawn", lengths_json(sum.drawn)},
          {"pieces", lengths_json(sum.pieces)},
          {"pieces_per_sequence", sum.pieces_per_batch_mean},
          {"work_ratio", {{"mean", sum.work_ratio_mean}, {"min", sum.work_ratio_min}, {"max", sum.work_ratio_max}}}};
}

nlohmann::json workload_json(const DocumentOptions& o, const SampledWorkload& w, const sim::DocumentCosts& c) {
  nlohmann::json j = workload_summary_json(o, w);
  j.update(nlohmann::json{
          {"balancer", to_string(c.balancer)},
          {"rank_work", rank_work(c)},
          {"imbalance", {{"mean", c.work.imbalance_tiles_mean}, {"p95", c.work.imbalance_tiles_p95}}},
          {"step_factor", c.step_factor},
          {"token_factor", c.token_factor},
          {"tile_rows", sim::kDocumentTileRows}});
  return j;
}

nlohmann::json document_rows_json(const std::vector<DocumentRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const DocumentRow& r : rows) {
    nlohmann::json j = {{"plan", seqpar::describe_structure(r.plan)}, {"method", seqpar::to_string(r.plan.method)},
                        {"balancer", r.plan.method == Method::ulysses ? "heads" : to_string(r.balancer)}};
    if (!r.refused.empty()) {
      j["refused"] = r.refused;
    } else {
      j["imbalance"] = {{"mean", r.costs->work.imbalance_tiles_mean}, {"p95", r.costs->work.imbalance_tiles_p95}};
      j["step_time_s"] = r.docs.step_time_s;
      j["tokens_per_s_per_gpu"] = r.docs.tokens_per_s_per_gpu;
      j["attention_s"] = r.docs.time.attention;
      j["one_sequence_step_time_s"] = r.uniform.step_time_s;
      j["one_sequence_tokens_per_s_per_gpu"] = r.uniform.tokens_per_s_per_gpu;
      j["fits"] = r.docs.fits;
      j["one_sequence_fits"] = r.uniform.fits;
      j["ring_degree"] = r.plan.ring_degree;
      j["work_ratio"] = r.costs->work_ratio;
      j["rank_work"] = rank_work(*r.costs);  // each ring rank's tiles over the mean
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace seqpar::cli

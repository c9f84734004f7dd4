#include "seqpar/sim/sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "seqpar/core/error.hpp"
#include "seqpar/sim/validity.hpp"

namespace seqpar::sim {

namespace {

// One structure's point: its best fitting memory options (and batch fill), else the closest set
// (with the reasons it does not fit), else the structure itself with the rules it breaks or why it
// cannot reach the global batch.
Result structure_point(const Model& m, const System& s, const Plan& st, const SearchSpace& space,
                       const DocumentCosts* docs = nullptr) {
  StructureOutcome oc = best_plan_for(m, s, st, space, docs);
  Result r;
  if (oc.best) return std::move(*oc.best);
  if (oc.closest) {
    r = std::move(*oc.closest);
  } else {
    r.plan = st;
    if (space.memory) r.plan.mem = *space.memory;
    r.capacity_bytes = s.gpu.memory_bytes;
  }
  r.errors = std::move(oc.reasons);
  return r;
}

bool fits(const Result& r) { return r.valid && r.fits; }

// Whether `r` should replace `held` as its (TP, method, SP degree)'s point: a fitting plan by the
// advisor's ranking; among plans that do not fit, the valid one closest to fitting.
bool replaces(const Result& r, const Result& held) {
  if (fits(r)) return !fits(held) || ranks_before(r, held);
  return !fits(held) && r.valid && (!held.valid || r.peak_memory_bytes() < held.peak_memory_bytes());
}

// One structure's point under documents in balancer `b`'s layout: a plan rule first (as without
// documents), else the balancer's rule, else best_plan_for with the layout's counts.
SweepPoint document_point(const Model& m, const System& s, const Plan& st, const SearchSpace& space,
                          const SampledWorkload& w, Balancer b) {
  SweepPoint pt{s.name, st.gpus, st.seq_len, {}, std::nullopt, std::nullopt};
  std::vector<std::string> errors;
  if (check_plan(m, s, st, errors)) {  // a plan rule: structure_point names it, as advise does
    try {
      pt.documents = document_costs(w, st, b, s.gpu);
    } catch (const Error& e) {
      pt.result.plan = st;
      if (space.memory) pt.result.plan.mem = *space.memory;
      pt.result.capacity_bytes = s.gpu.memory_bytes;
      pt.result.errors = {fmt::format("balancer {}: {}", to_string(b), e.what())};
    }
  }
  if (pt.documents || pt.result.errors.empty()) pt.result = structure_point(m, s, st, space, pt.documents ? &*pt.documents : nullptr);
  pt.result.balancer = b;
  if (pt.documents && pt.result.valid) pt.one_sequence = simulate(m, s, pt.result.plan);
  return pt;
}

// One cell's points (one per TP degree, method, SP degree and, under documents, load balancer) in
// `points` (emptied first), and the cell with its choice.
SweepCell search_cell(const Model& m, const System& s, int gpus, std::int64_t seq_len, const SearchSpace& space,
                      const SampledWorkload* w, const std::vector<Balancer>& only, std::vector<SweepPoint>& points) {
  points.clear();
  std::map<std::tuple<int, Method, int, int>, std::size_t> slot;  // the balancer as its index, -1 without documents
  auto keep = [&](SweepPoint pt, int balancer) {
    const Plan& st = pt.result.plan;
    const auto [it, added] = slot.try_emplace({st.tp, st.method, st.sp, balancer}, points.size());
    if (added) {
      points.push_back(std::move(pt));
    } else if (replaces(pt.result, points[it->second].result)) {
      points[it->second] = std::move(pt);
    }
  };
  for (const Plan& st : structures(m, s, gpus, seq_len, space)) {
    if (!w) {
      keep({s.name, gpus, seq_len, structure_point(m, s, st, space), std::nullopt, std::nullopt}, -1);
      continue;
    }
    // `only` narrows the structures that have a choice of balancer; one without runs in its own layout.
    const std::vector<Balancer> choice = balancers_for(st);
    for (const Balancer b : choice) {
      if (choice.size() > 1 && !only.empty() && std::find(only.begin(), only.end(), b) == only.end()) continue;
      keep(document_point(m, s, st, space, *w, b), int(b));
    }
  }
  SweepCell cell{s.name, gpus, seq_len, std::nullopt, false};
  const SweepPoint* best = nullptr;
  for (const SweepPoint& pt : points) {
    cell.any_valid = cell.any_valid || pt.result.valid;
    if (fits(pt.result) && (!best || ranks_before(pt.result, best->result))) best = &pt;
  }
  if (best) cell.best = *best;
  return cell;
}

}  // namespace

Sweep run_sweep(const Model& m, const std::vector<System>& systems, const std::vector<int>& gpus,
                const std::vector<std::int64_t>& seq_lens, const SearchSpace& space, const SweepDocuments* documents,
                const std::function<void(std::size_t, std::size_t)>& on_cell,
                const std::function<void(const SweepPoint&)>& on_point) {
  // In 64 bits: three list lengths, each far below 2^21.
  const std::uint64_t cells = std::uint64_t{systems.size()} * gpus.size() * seq_lens.size();
  if (cells > kMaxSweepCells)
    throw Error(fmt::format("sweep: {} system{} x {} GPU counts x {} sequence lengths = {} cells, above the limit of {} "
                            "cells a sweep searches (each cell is a whole advise); split the grid into sweeps of at "
                            "most {} cells",
                            systems.size(), systems.size() == 1 ? "" : "s", gpus.size(), seq_lens.size(), cells,
                            kMaxSweepCells, kMaxSweepCells));
  for (std::size_t i = 0; i < systems.size(); ++i)
    for (std::size_t k = 0; k < i; ++k)
      if (systems[i].name == systems[k].name)
        throw Error(fmt::format("system: two systems are named '{}'; give each its own \"name\"", systems[i].name));
  for (int g : gpus) check_search(g, space);  // every constraint is honoured, or an error before any work

  Sweep out;
  if (documents)
    for (std::int64_t n : seq_lens) out.workloads.push_back(sample_workload(documents->workload, n));
  const std::vector<Balancer> every;
  std::vector<SweepPoint> cell_points;
  for (const System& s : systems)
    for (int g : gpus)
      for (std::size_t i = 0; i < seq_lens.size(); ++i) {
        const std::int64_t n = seq_lens[i];
        const SampledWorkload* w = documents ? &out.workloads[i] : nullptr;
        out.cells.push_back(search_cell(m, s, g, n, space, w, documents ? documents->only : every, cell_points));
        for (SweepPoint& pt : cell_points) {
          if (on_point)
            on_point(pt);
          else
            out.points.push_back(std::move(pt));
        }
        if (on_cell) on_cell(out.cells.size(), static_cast<std::size_t>(cells));
      }
  return out;
}

}  // namespace seqpar::sim

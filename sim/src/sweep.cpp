#include "seqpar/sim/sweep.hpp"

#include <fmt/format.h>

#include <map>
#include <tuple>
#include <utility>

#include "seqpar/core/error.hpp"

namespace seqpar::sim {

namespace {

// One structure's point: its best fitting memory options (and batch fill), else the closest set
// (with the reasons it does not fit), else the structure itself with the rules it breaks or why it
// cannot reach the global batch.
Result structure_point(const Model& m, const System& s, const Plan& st, const SearchSpace& space) {
  StructureOutcome oc = best_plan_for(m, s, st, space);
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

// Appends one cell's points (one per TP degree, method and SP degree) and returns the index of its choice.
std::optional<std::size_t> search_cell(const Model& m, const System& s, int gpus, std::int64_t seq_len,
                                       const SearchSpace& space, std::vector<SweepPoint>& points) {
  const std::size_t first = points.size();
  std::map<std::tuple<int, Method, int>, std::size_t> slot;
  for (const Plan& st : structures(m, s, gpus, seq_len, space)) {
    Result r = structure_point(m, s, st, space);
    const auto [it, added] = slot.try_emplace({st.tp, st.method, st.sp}, points.size());
    if (added) {
      points.push_back({s.name, gpus, seq_len, std::move(r)});
    } else if (replaces(r, points[it->second].result)) {
      points[it->second].result = std::move(r);
    }
  }
  std::optional<std::size_t> best;
  for (std::size_t i = first; i < points.size(); ++i)
    if (fits(points[i].result) && (!best || ranks_before(points[i].result, points[*best].result))) best = i;
  return best;
}

}  // namespace

Sweep run_sweep(const Model& m, const std::vector<System>& systems, const std::vector<int>& gpus,
                const std::vector<std::int64_t>& seq_lens, const SearchSpace& space) {
  for (std::size_t i = 0; i < systems.size(); ++i)
    for (std::size_t k = 0; k < i; ++k)
      if (systems[i].name == systems[k].name)
        throw Error(fmt::format("system: two systems are named '{}'; give each its own \"name\"", systems[i].name));
  for (int g : gpus) check_search(g, space);  // every constraint is honoured, or an error before any work

  Sweep out;
  for (const System& s : systems)
    for (int g : gpus)
      for (std::int64_t n : seq_lens) out.cells.push_back({s.name, g, n, search_cell(m, s, g, n, space, out.points)});
  return out;
}

}  // namespace seqpar::sim

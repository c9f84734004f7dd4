// The sweep search: a grid of systems x GPU counts x sequence lengths, each cell searched over one
// SearchSpace (TP degrees, methods, SP degrees, memory options). Each (TP, method, SP degree) of a cell keeps one
// point (a hybrid its best Ulysses x Ring split), and each cell names its chosen plan. Both
// choices use the advisor's own ranking (ranks_before), so a sweep cell and `seqpar advise` on
// the same inputs choose the same plan.
// Under a packed-document workload (core/workload.hpp), sampled once per length of the grid, each
// (TP, method, SP degree, load balancer) keeps one point, the balancers those advise compares
// (document_cost.hpp: balancers_for), and each point carries its layout's counts.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "seqpar/core/workload.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/document_cost.hpp"

namespace seqpar::sim {

struct SweepPoint {
  std::string system;
  int gpus = 0;
  std::int64_t seq_len = 0;
  Result result;  // the memory options best_plan_for chooses, else the closest to fitting, else invalid (errors say why)
  // Under documents: the counts of the point's layout (result.balancer names it); empty where the
  // balancer cannot lay the sequence out (result.errors says why) or without documents.
  std::optional<DocumentCosts> documents;
  // Under documents, where the point is valid: its plan with one causal sequence filling the
  // length (no document mask), the ranking the workload is read against.
  std::optional<Result> one_sequence;
};

struct SweepCell {
  std::string system;
  int gpus = 0;
  std::int64_t seq_len = 0;
  std::optional<SweepPoint> best;  // the chosen plan's point; empty: nothing valid fits
  bool any_valid = false;          // some point of the cell is valid (without a best: none fits)
};

struct Sweep {
  // In grid order: system, GPUs, length, then the advisor's structure order. Empty when run_sweep
  // hands each point to its `on_point` instead (a grid's points then never sit in memory together).
  std::vector<SweepPoint> points;
  std::vector<SweepCell> cells;  // one per (system, GPUs, length), in the same order
  std::vector<SampledWorkload> workloads;  // under documents: the workload at each length, in seq_lens order
};

// The sweep's packed-document workload: the distribution, sampled at each length, and the load
// balancers to run (empty: every one balancers_for compares; else, of a structure with a choice of
// balancers, only these; a structure with none to choose, as Ulysses, runs in its own layout).
struct SweepDocuments {
  Workload workload;
  std::vector<Balancer> only;
};

// The most cells (systems x GPU counts x lengths) one sweep searches: each cell is a whole advise
// (tens of plans, each with its memory options), kept in memory and written to the JSON, CSV and
// report. A thousand is far beyond any grid a plan is read from (the comm command caps its sizes
// at the same figure); a larger grid is refused before any work, to be split.
inline constexpr std::size_t kMaxSweepCells = 1000;

// Throws seqpar::Error when the grid has more than kMaxSweepCells cells, a GPU count breaks the
// search's constraints (check_search) or two systems share a name (points are keyed by it), before
// simulating anything. `on_cell` (optional) hears each cell done: (cells done, cells in all).
// `on_point` (optional) takes each point as its cell is done, in grid order, and Sweep::points stays
// empty; without it the points are kept there.
Sweep run_sweep(const Model& m, const std::vector<System>& systems, const std::vector<int>& gpus,
                const std::vector<std::int64_t>& seq_lens, const SearchSpace& space,
                const SweepDocuments* documents = nullptr,
                const std::function<void(std::size_t, std::size_t)>& on_cell = {},
                const std::function<void(const SweepPoint&)>& on_point = {});

}  // namespace seqpar::sim

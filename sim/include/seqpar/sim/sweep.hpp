// The sweep search: a grid of systems x GPU counts x sequence lengths, each cell searched over one
// SearchSpace (TP degrees, methods, SP degrees, memory options). Each (TP, method, SP degree) of a cell keeps one
// point (a hybrid its best Ulysses x Ring split), and each cell names its chosen plan. Both
// choices use the advisor's own ranking (ranks_before), so a sweep cell and `seqpar advise` on
// the same inputs choose the same plan.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "seqpar/sim/advisor.hpp"

namespace seqpar::sim {

struct SweepPoint {
  std::string system;
  int gpus = 0;
  std::int64_t seq_len = 0;
  Result result;  // the memory options best_plan_for chooses, else the closest to fitting, else invalid (errors say why)
};

struct SweepCell {
  std::string system;
  int gpus = 0;
  std::int64_t seq_len = 0;
  std::optional<std::size_t> best;  // index into Sweep::points of the chosen plan; empty: nothing valid fits
};

struct Sweep {
  std::vector<SweepPoint> points;  // in grid order: system, GPUs, length, then the advisor's structure order
  std::vector<SweepCell> cells;    // one per (system, GPUs, length), in the same order
};

// Throws seqpar::Error when a GPU count breaks the search's constraints (check_search) or two
// systems share a name (points are keyed by it), before simulating anything.
Sweep run_sweep(const Model& m, const std::vector<System>& systems, const std::vector<int>& gpus,
                const std::vector<std::int64_t>& seq_lens, const SearchSpace& space);

}  // namespace seqpar::sim

// The sweep chooses each cell's plan through the advisor's ranking: where two structures tie on
// throughput, the smaller peak memory wins in both, whichever the search meets first.
#include <gtest/gtest.h>

#include <algorithm>

#include "seqpar/core/error.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/sweep.hpp"

namespace seqpar::sim {
namespace {

// A system whose host optimizer step is so slow that, with the optimizer offloaded, it rounds
// every other part of the step away: two plans with the same tokens per GPU then tie exactly on
// throughput, while their peak memory still differs.
System optimizer_bound_system() {
  System s = load_system("dgx-h100");
  s.name = "optimizer-bound";
  s.host_adam_params_per_s = 1e-12;
  return s;
}

MemoryOptions offloaded_optimizer() {
  MemoryOptions mem;
  mem.zero = 3;
  mem.checkpoint = Checkpoint::full;
  mem.offload_optimizer = true;
  mem.tiled_loss = true;  // so the peak falls in the layer backward, where the methods' buffers differ
  return mem;
}

Result at(const Model& m, const System& s, Method method, int sp, std::int64_t n) {
  Plan p;
  p.method = method;
  p.gpus = p.sp = sp;
  p.seq_len = n;
  p.ulysses_degree = method == Method::ulysses ? sp : 1;
  p.ring_degree = method == Method::ulysses ? 1 : sp;
  p.mem = offloaded_optimizer();
  return simulate(m, s, p);
}

TEST(Sweep, ChoosesTheAdvisorsPlanWhenMemoryBreaksAThroughputTie) {
  // Not llama3-8b: its Ulysses all-to-all buffers happen to equal the ring's K,V buffers exactly.
  const Model m = load_model("llama2-7b");
  const System s = optimizer_bound_system();
  const std::int64_t n = 1 << 18;
  const Result u = at(m, s, Method::ulysses, 8, n), r = at(m, s, Method::ring, 8, n);
  // The tie this test needs: equal throughput, different memory, both fitting.
  ASSERT_TRUE(u.valid && u.fits && r.valid && r.fits) << (u.errors.empty() ? "" : u.errors[0]);
  ASSERT_EQ(u.tokens_per_s_per_gpu, r.tokens_per_s_per_gpu);
  ASSERT_NE(u.peak_memory_bytes(), r.peak_memory_bytes());
  const Method low = u.peak_memory_bytes() < r.peak_memory_bytes() ? Method::ulysses : Method::ring;
  const Method high = low == Method::ulysses ? Method::ring : Method::ulysses;

  // The search meets the plan with more memory first, so ranking by throughput alone keeps it.
  SearchSpace space;
  space.methods = {high, low};
  space.sp = {8};
  space.memory = offloaded_optimizer();
  const Advice a = advise(m, s, 8, n, space);
  ASSERT_NE(a.best(), nullptr);
  EXPECT_EQ(a.best()->plan.method, low);

  const Sweep sw = run_sweep(m, {s}, {8}, {n}, space);
  ASSERT_EQ(sw.cells.size(), 1u);
  ASSERT_TRUE(sw.cells[0].best);
  EXPECT_EQ(sw.cells[0].best->result.plan, a.best()->plan);
}

TEST(Sweep, EachCellChoosesWhatAdviseChooses) {
  const Model m = load_model("llama3-8b");
  const std::vector<System> systems{load_system("dgx-h100"), optimizer_bound_system()};
  const std::vector<int> gpus{8, 16};
  const std::vector<std::int64_t> lens{1 << 15, 1 << 20};
  const SearchSpace space;
  const Sweep sw = run_sweep(m, systems, gpus, lens, space);
  ASSERT_EQ(sw.cells.size(), systems.size() * gpus.size() * lens.size());
  std::size_t i = 0;
  for (const System& s : systems)
    for (int g : gpus)
      for (std::int64_t n : lens) {
        const SweepCell& c = sw.cells[i++];
        EXPECT_EQ(c.system, s.name);
        EXPECT_EQ(c.gpus, g);
        EXPECT_EQ(c.seq_len, n);
        const Advice a = advise(m, s, g, n, space);
        ASSERT_EQ(c.best.has_value(), a.best() != nullptr) << s.name << " " << g << " " << n;
        if (c.best) {
          EXPECT_EQ(c.best->result.plan, a.best()->plan) << s.name << " " << g << " " << n;
        }
      }
}

// Streaming the points (on_point) hands over exactly the points a kept sweep holds, in its order,
// keeps none, and chooses the same plan per cell; a cell's best is one of its own points.
TEST(Sweep, StreamedPointsAreTheKeptPointsInGridOrder) {
  const Model m = load_model("llama3-8b");
  const std::vector<System> systems{load_system("dgx-h100"), load_system("l20-pcie")};
  const std::vector<int> gpus{8, 24};
  const std::vector<std::int64_t> lens{3 << 13, 1 << 22};
  const Sweep kept = run_sweep(m, systems, gpus, lens, SearchSpace{});
  std::vector<SweepPoint> heard;
  std::size_t cells_heard = 0;
  const Sweep streamed = run_sweep(
      m, systems, gpus, lens, SearchSpace{}, nullptr, [&](std::size_t done, std::size_t) { cells_heard = done; },
      [&](const SweepPoint& pt) { heard.push_back(pt); });
  EXPECT_TRUE(streamed.points.empty());
  EXPECT_EQ(cells_heard, systems.size() * gpus.size() * lens.size());
  ASSERT_EQ(heard.size(), kept.points.size());
  ASSERT_GT(heard.size(), streamed.cells.size());  // several structures a cell
  for (std::size_t i = 0; i < heard.size(); ++i) {
    EXPECT_EQ(heard[i].system, kept.points[i].system) << i;
    EXPECT_EQ(heard[i].gpus, kept.points[i].gpus) << i;
    EXPECT_EQ(heard[i].seq_len, kept.points[i].seq_len) << i;
    EXPECT_EQ(heard[i].result.plan, kept.points[i].result.plan) << i;
    EXPECT_EQ(heard[i].result.step_time_s, kept.points[i].result.step_time_s) << i;
  }
  ASSERT_EQ(streamed.cells.size(), kept.cells.size());
  int with_best = 0, valid_without_best = 0;
  for (std::size_t c = 0; c < kept.cells.size(); ++c) {
    const SweepCell& a = kept.cells[c];
    const SweepCell& b = streamed.cells[c];
    EXPECT_EQ(a.any_valid, b.any_valid);
    ASSERT_EQ(a.best.has_value(), b.best.has_value()) << c;
    const bool valid_here = std::any_of(kept.points.begin(), kept.points.end(), [&](const SweepPoint& p) {
      return p.system == a.system && p.gpus == a.gpus && p.seq_len == a.seq_len && p.result.valid;
    });
    EXPECT_EQ(a.any_valid, valid_here) << c;
    if (!a.best) {
      valid_without_best += a.any_valid;
      continue;
    }
    ++with_best;
    EXPECT_EQ(a.best->result.plan, b.best->result.plan) << c;
    EXPECT_EQ(a.best->system, a.system);
    EXPECT_EQ(a.best->seq_len, a.seq_len);
    EXPECT_TRUE(a.best->result.valid && a.best->result.fits);
  }
  EXPECT_GT(with_best, 0);
  EXPECT_GT(valid_without_best, 0);  // the L20s at 4M: valid plans, none fits
}

TEST(Sweep, RefusesTwoSystemsWithOneNameAndBrokenConstraintsBeforeSimulating) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  EXPECT_THROW(run_sweep(m, {s, s}, {8}, {1 << 15}, SearchSpace{}), Error);
  SearchSpace space;
  space.methods = {Method::ring};
  space.ulysses_degree = 2;  // only hybrids have a free Ulysses degree
  EXPECT_THROW(run_sweep(m, {s}, {8}, {1 << 15}, space), Error);
}

}  // namespace
}  // namespace seqpar::sim

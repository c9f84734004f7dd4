// Speed of the analytical simulator: 100,000 varied plans per iteration, and the latency of
// `advise` and `maxlen` at cluster sizes. Single-threaded, as the figures in the README are per core.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sim_cases.hpp"

namespace {

using namespace seqpar::sim;
using bench::Case;

void BM_Simulate100kPlans(benchmark::State& state) {
  std::vector<Model> models;
  std::vector<System> systems;
  bench::load_presets(models, systems);
  const std::vector<Case> cases = bench::make_cases(100000, models, systems);
  double sink = 0;
  for (auto _ : state) {
    for (const Case& c : cases) sink += simulate(*c.model, *c.system, c.plan).step_time_s;
    benchmark::DoNotOptimize(sink);
  }
  state.SetItemsProcessed(state.iterations() * std::int64_t(cases.size()));
  state.counters["plans_per_iteration"] = double(cases.size());
}
BENCHMARK(BM_Simulate100kPlans)->Unit(benchmark::kMillisecond);

// `advise` at 1M tokens on dgx-h100 nodes, every TP degree, method, SP degree and memory set.
void advise_1m(benchmark::State& state, const char* model) {
  const Model m = load_model(model);
  const System s = load_system("dgx-h100");
  const int gpus = int(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(advise(m, s, gpus, std::int64_t{1} << 20, SearchSpace{}).ranked.size());
  state.counters["gpus"] = gpus;
}
void BM_Advise(benchmark::State& state) { advise_1m(state, "llama3-8b"); }
BENCHMARK(BM_Advise)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);
// Issue 33's case: Llama-3-70B on 1,024 H100s.
void BM_Advise70B(benchmark::State& state) { advise_1m(state, "llama3-70b"); }
BENCHMARK(BM_Advise70B)->Arg(1024)->Unit(benchmark::kMillisecond);

void BM_MaxLen(benchmark::State& state) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  const int gpus = int(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(advise_max_seq_len(m, s, gpus, SearchSpace{}).max_seq_len);
  state.counters["gpus"] = gpus;
}
BENCHMARK(BM_MaxLen)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

// The machine's own speed, for the CI gate (`seqpar gate --reference`): fixed work that uses no
// seqpar code (a seeded shuffle, a sort, a pass of divisions and square roots over 64K doubles), so
// the gate compares the simulator's times in units of this machine's, and a VM that runs 2x slower
// today does not read as a 2x regression. About the size of one advise call.
void BM_MachineReference(benchmark::State& state) {
  std::vector<double> v(1 << 16);
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  for (double& d : v) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64: the same numbers every run
    d = double(x >> 11) * 0x1.0p-53;
  }
  for (auto _ : state) {
    std::vector<double> w = v;
    std::sort(w.begin(), w.end());
    double acc = 0;
    for (int pass = 0; pass < 8; ++pass)
      for (const double d : w) acc += std::sqrt(d + pass) / (1.0 + d);
    benchmark::DoNotOptimize(acc);
  }
}
BENCHMARK(BM_MachineReference)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

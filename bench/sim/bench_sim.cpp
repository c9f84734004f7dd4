// Speed of the analytical simulator: 100,000 varied plans per iteration, and the latency of
// `advise` and `maxlen` at cluster sizes. Single-threaded, as the figures in the README are per core.
#include <benchmark/benchmark.h>

#include <random>

#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/simulate.hpp"

namespace {

using namespace seqpar::sim;

struct Case {
  const Model* model;
  const System* system;
  Plan plan;
};

// Every preset model and system, methods, SP degrees, lengths from 4K to 4M and all memory sets,
// drawn with a fixed seed so every run times the same plans.
std::vector<Case> make_cases(std::size_t n, std::vector<Model>& models, std::vector<System>& systems) {
  for (const auto& p : builtin_presets()) {
    if (p.kind == "model") models.push_back(load_model(p.name));
    if (p.kind == "system") systems.push_back(load_system(p.name));
  }
  std::mt19937_64 rng(42);
  auto pick = [&](auto& v) -> decltype(v[0])& { return v[rng() % v.size()]; };
  const Method methods[] = {Method::ulysses, Method::ring, Method::ring_zigzag, Method::hybrid};
  std::vector<Case> cases;
  cases.reserve(n);
  while (cases.size() < n) {
    Case c{&pick(models), &pick(systems), {}};
    Plan& p = c.plan;
    p.method = methods[rng() % 4];
    p.gpus = 1 << (3 + rng() % 8);             // 8 .. 1024
    p.sp = 1 << (1 + rng() % 6);               // 2 .. 64
    if (p.sp > p.gpus) p.sp = p.gpus;
    p.seq_len = std::int64_t{4096} << (rng() % 11);  // 4K .. 4M
    p.mem = memory_option_sets()[rng() % memory_option_sets().size()];
    p = normalized(p, c.system->gpus_per_node);
    cases.push_back(c);
  }
  return cases;
}

void BM_Simulate100kPlans(benchmark::State& state) {
  std::vector<Model> models;
  std::vector<System> systems;
  const std::vector<Case> cases = make_cases(100000, models, systems);
  double sink = 0;
  for (auto _ : state) {
    for (const Case& c : cases) sink += simulate(*c.model, *c.system, c.plan).step_time_s;
    benchmark::DoNotOptimize(sink);
  }
  state.SetItemsProcessed(state.iterations() * std::int64_t(cases.size()));
  state.counters["plans_per_iteration"] = double(cases.size());
}
BENCHMARK(BM_Simulate100kPlans)->Unit(benchmark::kMillisecond);

void BM_Advise(benchmark::State& state) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  const int gpus = int(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(advise(m, s, gpus, std::int64_t{1} << 20, SearchSpace{}).ranked.size());
  state.counters["gpus"] = gpus;
}
BENCHMARK(BM_Advise)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

void BM_MaxLen(benchmark::State& state) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  const int gpus = int(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(advise_max_seq_len(m, s, gpus, SearchSpace{}).max_seq_len);
  state.counters["gpus"] = gpus;
}
BENCHMARK(BM_MaxLen)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

// The planner's per-plan path allocates nothing: simulate() on a valid plan, as advise and maxlen
// call it hundreds of thousands of times, makes no heap allocation once its per-placement link
// loads are derived (the first call for each). Global operator new is replaced in this executable
// by one that counts, so the test sees every allocation, the standard library's included.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <new>
#include <string>
#include <vector>

#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/attention_kernels.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/simulate.hpp"
#include "fixtures.hpp"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace seqpar::sim {
namespace {

struct Case {
  const Model* model;
  const System* system;
  Plan plan;
};

// Every method at SP 2 and 16 (hybrids U2xR8 and U8xR2 and ring-inner) and SP 1, TP 1, 2 and 8,
// every memory set the advisor searches, and one accumulation plan each, on an NVLink and a PCIe
// system under every framework profile, for a GQA Llama, a GELU LayerNorm GPT and a mixture of
// experts (EP 1 and 8).
std::vector<Case> cases(const std::vector<Model>& models, const std::vector<System>& systems) {
  std::vector<Case> out;
  for (const Model& m : models)
    for (const System& s : systems)
      for (const int tp : {1, 2, 8})
        for (const int sp : {1, 2, 16})
          for (const Method method : kAllMethods)
            for (const int u : {0, 2, 8})
              for (const GroupPlacement where : {GroupPlacement::ulysses_inner, GroupPlacement::ring_inner}) {
                if ((u != 0 || where == GroupPlacement::ring_inner) && (method != Method::hybrid || sp < 16)) continue;
                Plan p;
                p.method = method;
                p.gpus = 64;
                p.tp = tp;
                p.sp = sp;
                p.seq_len = 128 * 1024;
                p.ulysses_degree = u;
                p.ring_degree = 0;
                p.placement = where;
                p = normalized(p, s.gpus_per_node);
                // A mixture of experts also with its experts split 8 ways (moe_cost.hpp).
                for (const int ep : {1, 8}) {
                  if (ep > 1 && !m.moe()) continue;
                  p.ep = ep;
                  for (const MemoryOptions& mem : memory_option_sets()) {
                    p.mem = mem;
                    p.grad_accum_steps = 1;
                    out.push_back({&m, &s, p});
                  }
                  p.grad_accum_steps = 4;
                  out.push_back({&m, &s, p});
                }
              }
  return out;
}

TEST(NoAllocation, SimulateAllocatesNothingPerPlanAfterWarmUp) {
  const std::vector<Model> models = {load_model("llama3-8b"), load_model("gpt-1.3b"), load_model("qwen3-30b-a3b")};
  std::vector<System> systems;
  for (const char* f :
       {"deepspeed-alst", "megatron-core", "hf-transformers", "seqpar-train", "megatron-lm-2021", "torchtitan"})
    for (const char* s : {"dgx-h100", "l20-pcie"}) systems.push_back(load_system(s, "", load_framework(f)));
  std::vector<Case> all = cases(models, systems);

  // Warm-up: each placement's per-byte link loads are derived once; invalid plans (their error
  // messages are strings) and plans the frameworks do not run are left out.
  std::vector<Case> valid;
  std::map<std::string, int> kinds;  // how many valid plans of each kind are checked
  for (std::size_t i = 0; i < all.size(); i += std::size_t(testing::sample_stride())) {
    const Case& c = all[i];
    const Result r = simulate(*c.model, *c.system, c.plan);
    if (!r.valid) continue;
    valid.push_back(c);
    const Plan& p = c.plan;
    ++kinds["method " + std::string(to_string(p.method))];
    ++kinds["tp " + std::to_string(p.tp)];
    ++kinds["ep " + std::to_string(p.ep)];
    ++kinds["zero " + std::to_string(p.mem.zero)];
    ++kinds["checkpoint " + std::string(to_string(p.mem.checkpoint))];
    ++kinds["placement " + std::string(to_string(p.placement))];
    for (const auto& [on, name] : {std::pair{p.mem.offload_checkpoints, "offload checkpoints"},
                                   {p.mem.offload_optimizer, "offload optimizer"},
                                   {p.mem.offload_params, "offload params"}, {p.mem.tiled_mlp, "tiled mlp"},
                                   {p.mem.tiled_loss, "tiled loss"}, {p.grad_accum_steps > 1, "accumulation"},
                                   {r.fits, "fits"}, {!r.fits, "does not fit"}})
      if (on) ++kinds[name];
    ++kinds["peak in " + std::string(r.memory.peak_phase)];
  }
  // Every kind is there, several times over.
  for (const char* kind :
       {"method ulysses", "method ring", "method ring-zigzag", "method hybrid", "method allgather",
        "method allgather-contiguous", "tp 1", "tp 2", "tp 8", "ep 1", "ep 8", "zero 0", "zero 1", "zero 2", "zero 3",
        "checkpoint none", "checkpoint selective", "checkpoint full", "placement ring-inner", "offload checkpoints",
        "offload optimizer", "offload params", "tiled mlp", "tiled loss", "accumulation", "fits", "does not fit",
        "peak in layer-backward", "peak in loss", "peak in optimizer"})
    EXPECT_GE(kinds[kind], 10) << kind;

  double sink = 0;
  long before = g_allocations.load();
  for (const Case& c : valid) sink += simulate(*c.model, *c.system, c.plan).step_time_s;
  EXPECT_EQ(g_allocations.load() - before, 0) << "simulate(), over " << valid.size() << " valid plans";
  EXPECT_GT(sink, 0);

  // The halves the advisor calls, on each structure's costs.
  before = g_allocations.load();
  for (const Case& c : valid) {
    Result r = simulate_time(*c.model, *c.system, c.plan, structure_costs(*c.model, *c.system, c.plan));
    add_memory(*c.model, *c.system, r);
    sink += r.peak_memory_bytes();
  }
  EXPECT_EQ(g_allocations.load() - before, 0) << "simulate_time() and add_memory(), over " << valid.size() << " plans";

  // The advisor's search of one structure's memory options (best_memory_options: every set timed,
  // the fastest few estimated) on the structures that fit: after a warm-up, nothing either.
  std::vector<Case> fitting;
  for (const Case& c : valid)
    if (c.plan.mem == memory_option_sets().front() && best_memory_options(*c.model, *c.system, c.plan, std::nullopt).best)
      fitting.push_back(c);
  // (Under the sanitizers' sample, every 8th case: the threshold scales with it.)
  EXPECT_GE(fitting.size(), 640u / std::size_t(testing::sample_stride())) << fitting.size() << " structures fit";
  before = g_allocations.load();
  for (const Case& c : fitting) sink += best_memory_options(*c.model, *c.system, c.plan, std::nullopt).best->mfu;
  EXPECT_EQ(g_allocations.load() - before, 0) << "best_memory_options(), over " << fitting.size() << " structures";

  // The named terms are still there for those who show them (the table, --json's memory_terms).
  const Case& c = valid.front();
  EXPECT_FALSE(memory_terms(*c.model, *c.system, simulate(*c.model, *c.system, c.plan)).empty());
}

}  // namespace
}  // namespace seqpar::sim

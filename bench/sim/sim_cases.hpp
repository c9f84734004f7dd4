// The varied plans the simulator's speed is timed on (seqpar-bench-sim) and its outputs are checked
// on (seqpar-sim-digest): drawn with fixed seeds, so every run sees the same plans.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/attention_kernels.hpp"
#include "seqpar/sim/framework.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/simulate.hpp"

namespace seqpar::sim::bench {

struct Case {
  const Model* model;
  const System* system;
  Plan plan;
};

// The dense presets added beside the MoE ones (issue 37) for TRL's ratios; left out as the MoE
// models are (tests/sim/test_moe.cpp checks them), so the plans stay the history's.
inline bool added_with_moe(const std::string& name) {
  return name == "qwen3-0.6b" || name == "qwen3-8b" || name == "qwen3-32b";
}

// Every preset model and system. Models with attention kinds (sliding-window layers: gemma3-27b,
// mistral-7b-v0.1) are left out: the plans, and so the benchmark's history and the digest, stay
// those of the full-attention models; tests/sim/test_attention_kinds.cpp checks the kinds. So is
// llama3-405b (added with pipeline stages, which these plans do not use; tests/sim/test_pipeline.cpp
// checks it): a new model would redraw every plan after it. Mixture-of-experts models (and the
// dense presets added with them) are left out the same way.
inline void load_presets(std::vector<Model>& models, std::vector<System>& systems) {
  for (const auto& p : builtin_presets()) {
    if (p.kind == "model") {
      Model m = load_model(p.name);
      if (m.layer_kinds.empty() && !m.moe() && !added_with_moe(p.name) && m.name != "llama3-405b")
        models.push_back(std::move(m));
    }
    if (p.kind == "system") systems.push_back(load_system(p.name));
  }
}

// BM_Simulate100kPlans's plans: every preset model and system, the first four methods, SP degrees,
// lengths from 4K to 4M and all memory sets. Changing them changes what the benchmark's history means.
inline std::vector<Case> make_cases(std::size_t n, const std::vector<Model>& models, const std::vector<System>& systems) {
  std::mt19937_64 rng(42);
  auto pick = [&](const auto& v) -> decltype(v[0])& { return v[rng() % v.size()]; };
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

// Every preset system under every framework profile, with the attention kernel the framework
// picks (as the commands load them).
inline std::vector<System> systems_with_frameworks() {
  std::vector<System> out;
  for (const auto& f : {"deepspeed-alst", "hf-transformers", "megatron-core", "megatron-lm-2021", "seqpar-train"}) {
    const Framework fw = load_framework(f);
    for (const auto& p : builtin_presets())
      if (p.kind == "system") out.push_back(load_system(p.name, "", fw));
  }
  return out;
}

// What make_cases leaves out: every method, TP degrees 1-8, hybrid placements, micro-batches and
// gradient accumulation, SP 1, and every framework profile (`systems`: systems_with_frameworks()).
inline std::vector<Case> make_wide_cases(std::size_t n, const std::vector<Model>& models,
                                         const std::vector<System>& systems) {
  std::mt19937_64 rng(7);
  auto pick = [&](const auto& v) -> decltype(v[0])& { return v[rng() % v.size()]; };
  std::vector<Case> cases;
  cases.reserve(n);
  while (cases.size() < n) {
    Case c{&pick(models), &pick(systems), {}};
    Plan& p = c.plan;
    p.method = kAllMethods[rng() % kAllMethods.size()];
    p.tp = 1 << (rng() % 4);                   // 1 .. 8
    p.sp = 1 << (rng() % 7);                   // 1 .. 64
    p.gpus = p.tp * p.sp << (rng() % 5);       // dp 1 .. 16
    p.ulysses_degree = p.ring_degree = 0;      // derived by normalized(); a hybrid's U fills a node
    if (p.method == Method::hybrid && p.sp >= 4 && rng() % 2 == 0) p.ulysses_degree = 2;
    p.seq_len = std::int64_t{2048} << (rng() % 11);  // 2K .. 2M
    p.micro_batch = 1 + int(rng() % 3);
    p.grad_accum_steps = 1 << (rng() % 3);
    if (rng() % 4 == 0) p.placement = GroupPlacement::ring_inner;
    p.mem = memory_option_sets()[rng() % memory_option_sets().size()];
    p = normalized(p, c.system->gpus_per_node);
    cases.push_back(c);
  }
  return cases;
}

}  // namespace seqpar::sim::bench

// Test helper: the plans of every method (core's kAllMethods, with the degree rule of its entry in
// the simulator's method table, so a method added there is validated without a change here) as
// training setups, for
// the validation tests on the CPU (test_validation.cpp) and on the GPU (test_validation_gpu.cpp).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "seqpar/core/plan_validity.hpp"
#include "seqpar/sim/methods.hpp"
#include "seqpar/train/trainer.hpp"

namespace seqpar::train::testing {

// 8 query heads over 2 KV heads: Ulysses 4 and 8 replicate the KV heads, and Ulysses 2 and 4 leave
// each rank more than one query head (what the transposed all-to-all needs to be a bug).
inline ModelConfig matrix_model() {
  return {.layers = 2, .hidden = 32, .heads = 8, .kv_heads = 2, .head_dim = 8, .ffn = 64,
      .vocab = 64, .layer_kinds = {}};
}

// A plan of the simulator's method table (sim::method_table: every method, with its degree rule),
// as the step runs it.
struct PlanCase {
  seqpar::Plan plan;
  std::string label;  // "ring-zigzag sp=4", "hybrid U2xR2"
};

// Every method (core's kAllMethods) at each SP degree, in every Ulysses x Ring split its entry in the
// simulator's method table tries; dp data-parallel groups of them. Plans the rules refuse are left out.
inline std::vector<PlanCase> table_plans(const std::vector<int>& degrees, const ModelConfig& m, std::int64_t seq_len,
                                         int dp = 1) {
  std::vector<PlanCase> out;
  for (const seqpar::Method method : seqpar::kAllMethods)
    for (const int sp : degrees)
      for (const auto& [u, r] : sim::method_entry(method).splits(sp, std::nullopt)) {
        seqpar::Plan p;
        p.method = method;
        p.sp = sp;
        p.gpus = sp * dp;
        p.ulysses_degree = u;
        p.ring_degree = r;
        p.seq_len = seq_len;
        p.micro_batch = 2;
        p.mem = train_memory_default();
        std::vector<std::string> errors;
        if (!seqpar::check_plan_structure(p, errors) || !seqpar::check_heads(m.heads, m.kv_heads, u, errors)) continue;
        out.push_back({p, seqpar::describe_structure(p)});
      }
  return out;
}

// The model with every layer a sliding-window layer of `window` tokens (seqpar-train's --window).
inline ModelConfig windowed(ModelConfig m, std::int64_t window) {
  m.layer_kinds.assign(static_cast<std::size_t>(m.layers), sim::AttentionKind::sliding);
  m.sliding_window = window;
  return m;
}

inline TrainSetup setup_of(const seqpar::Plan& p, const ModelConfig& m, Fault fault = Fault::none) {
  TrainSetup s;
  s.model = m;
  apply_plan(s, p);
  s.fault = fault;
  return s;
}

inline FaultSite site_of(const TrainSetup& s) {
  FaultSite f{s.ulysses, s.ring, step_balancer(s) == Balancer::zigzag && s.ring > 1, s.model.heads, s.model.kv_heads,
              s.kv == KvExchange::all_gather};
  f.documents = s.documents.has_value();
  f.per_document = step_balancer(s) == Balancer::per_document;
  f.window = s.model.sliding_layers() > 0 && s.model.sliding_window < s.seq_len;
  return f;
}

}  // namespace seqpar::train::testing

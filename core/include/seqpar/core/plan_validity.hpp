// The rules a plan must obey that need no model or system (docs/ARCHITECTURE.md, Conventions): positive sizes
// within limits, GPUs divisible into the degrees, U x R = P, the method's degrees, sequence
// divisibility, memory options; and the head rules, over plain head counts. In core so that the
// simulator (sim::check_plan) and the training step (train::check_ulysses_heads, RunOptions::plan)
// apply the same rules, each written once. Memory fit is not a validity rule.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "seqpar/core/plan.hpp"

namespace seqpar {

// Appends one message per broken rule to `errors`, each naming the field and the rule; returns
// true when the plan's structure is valid. Cheap when it is valid (no allocation).
bool check_plan_structure(const Plan& p, std::vector<std::string>& errors);

// The rules between memory options (offloading needs full checkpointing), part of
// check_plan_structure; for a program that has memory options but builds no plan of its own.
bool check_memory_combination(const MemoryOptions& m, std::vector<std::string>& errors);

// The head rules of Ulysses: query heads divisible by U; KV heads either divisible by U (split)
// or dividing U (replicated). Appends one message per broken rule; returns true when both hold.
// A U below 1 is itself reported (it is the structure rules' to name in a full plan check).
bool check_heads(int heads, int kv_heads, int ulysses_degree, std::vector<std::string>& errors);
// The same under tensor parallelism first: query heads divisible by tp; KV heads divisible by tp,
// or dividing it (Megatron-Core then replicates each KV head on tp / kv_heads ranks); then the
// Ulysses rules over the heads one TP rank holds (heads / tp, kv_heads_per_tp_rank).
bool check_heads(int heads, int kv_heads, int tp, int ulysses_degree, std::vector<std::string>& errors);
// The KV heads one TP rank holds: kv_heads / tp, or 1 when tp > kv_heads (replicated).
int kv_heads_per_tp_rank(int kv_heads, int tp);

// The sequence granularity of a plan: seq_len must be a multiple of it (P, or 2P for zigzag; times tp).
std::int64_t seq_granularity(const Plan& p);

}  // namespace seqpar

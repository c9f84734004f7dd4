// The sequence-parallel methods as the simulator sees them, one table entry each: the degree
// rule (which Ulysses x Ring splits of an SP degree the search tries), the search's validity
// hook (what the method can and cannot run), and the hook the attention cost model calls (how a
// ring shards the sequence, which decides the critical rank's work per ring step; the memory
// model sees it through attention_shapes). Adding a method is one entry in methods.cpp (plus its
// name in core/plan.hpp and its SP attention in train/); nothing in sim switches on Method.
#pragma once
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "seqpar/core/plan.hpp"

namespace seqpar::sim {

// How a ring shards the sequence over its R ranks.
enum class RingLayout {
  none,        // no ring: R = 1 always
  contiguous,  // rank r holds chunk r; causal work is imbalanced (the last rank does the most)
  zigzag,      // rank r holds chunks r and 2R-1-r of 2R; causal work is balanced
};

struct MethodEntry {
  Method method;
  std::string_view name;  // the method's name (core's to_string), for messages
  // Degree rule: the (U, R) splits of an SP degree P > 1 that the search tries. `fixed_u` is the
  // search's --ulysses-degree, honoured only by methods with a free Ulysses degree.
  std::vector<std::pair<int, int>> (*splits)(int P, std::optional<int> fixed_u);
  // Validity hooks of the search: whether U is free (else --ulysses-degree would be ignored), and
  // whether the method runs at sp = 1 (data parallelism only, where every such method is one plan).
  bool free_ulysses_degree;
  bool runs_at_sp1;
  // Attention-cost hook: the ring's sharding; none when the method has no ring.
  RingLayout ring_layout;
};

// The divisors of n >= 1, ascending: the SP degrees of n GPUs, the Ulysses degrees of P.
std::vector<int> divisors(int n);

// Every method, in the order searches list them.
const std::vector<MethodEntry>& method_table();
// Every method of the table, for a search over all of them.
std::vector<Method> all_methods();
// The entry of `m`; every Method has one (a test checks it).
const MethodEntry& method_entry(Method m);

// The attention cost's question of a plan: is its ring sharded in zigzag, so that with a causal
// mask every ring step after the diagonal costs half a block on every rank?
inline bool zigzag_ring(const Plan& p) {
  return method_entry(p.method).ring_layout == RingLayout::zigzag && p.ring_degree > 1;
}

}  // namespace seqpar::sim

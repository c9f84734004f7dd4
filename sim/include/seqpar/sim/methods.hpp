// The sequence-parallel methods as the simulator sees them, one table entry each: the degree
// rule (which Ulysses x Ring splits of an SP degree the search tries), the search's validity
// hook (what the method can and cannot run), and the hooks the attention cost model calls (how a
// ring shards the sequence, which decides the critical rank's work; how K,V cross the ring group,
// by send/recv hops or by one all-gather; the memory model sees both through attention_shapes). Adding a method is one entry in methods.cpp (plus its
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

// How K,V cross the ring group.
enum class KvExchange {
  ring_hops,   // R-1 send/recv hops overlapped with the block in hand; dK,dV travel back around
  all_gather,  // one all-gather of the whole sequence's K,V (again in the backward) and one
               // reduce-scatter of dK,dV, exposed (Transformer Engine: "KV all-gather between CP
               // ranks is exposed"); each query chunk is one kernel call over its key prefix
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
  // Attention-cost hooks: the ring's sharding (none when the method has no ring), and how K,V
  // cross the ring group.
  RingLayout ring_layout;
  KvExchange kv_exchange;
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
// Does the plan's ring group gather K,V in one all-gather rather than pass them around in hops?
inline bool kv_all_gather(const Plan& p) {
  return method_entry(p.method).kv_exchange == KvExchange::all_gather && p.ring_degree > 1;
}

}  // namespace seqpar::sim

#include "seqpar/sim/methods.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "seqpar/core/error.hpp"

namespace seqpar::sim {

namespace {

std::vector<std::pair<int, int>> all_ulysses(int P, std::optional<int>) { return {{P, 1}}; }
std::vector<std::pair<int, int>> all_ring(int P, std::optional<int>) { return {{1, P}}; }

std::vector<std::pair<int, int>> every_split(int P, std::optional<int> fixed_u) {
  // A fixed U is kept even when it does not divide P, so the plan's rejection says why (U x R != P).
  if (fixed_u) return {{*fixed_u, std::max(1, P / *fixed_u)}};
  std::vector<std::pair<int, int>> out;
  for (int u : divisors(P))
    if (u > 1 && u < P) out.emplace_back(u, P / u);
  return out;
}

}  // namespace

std::vector<int> divisors(int n) {
  std::vector<int> low, high;
  for (int d = 1; d <= n / d; ++d)  // d <= n / d: no d * d to overflow
    if (n % d == 0) {
      low.push_back(d);
      if (d != n / d) high.push_back(n / d);
    }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

const std::vector<MethodEntry>& method_table() {
  static const std::vector<MethodEntry> table = {
      {Method::ulysses, to_string(Method::ulysses), all_ulysses, false, true, RingLayout::none, KvExchange::ring_hops},
      {Method::ring, to_string(Method::ring), all_ring, false, true, RingLayout::contiguous, KvExchange::ring_hops},
      {Method::ring_zigzag, to_string(Method::ring_zigzag), all_ring, false, true, RingLayout::zigzag,
       KvExchange::ring_hops},
      {Method::hybrid, to_string(Method::hybrid), every_split, true, false, RingLayout::zigzag, KvExchange::ring_hops},
      {Method::allgather, to_string(Method::allgather), all_ring, false, true, RingLayout::zigzag,
       KvExchange::all_gather},
      {Method::allgather_contiguous, to_string(Method::allgather_contiguous), all_ring, false, true,
       RingLayout::contiguous, KvExchange::all_gather},
  };
  return table;
}

std::vector<Method> all_methods() {
  std::vector<Method> out;
  for (const MethodEntry& e : method_table()) out.push_back(e.method);
  return out;
}

const MethodEntry& method_entry(Method m) {
  static const std::vector<MethodEntry>& table = method_table();  // one guard, not a call and a guard
  // The table lists the methods in their enum's order: one look, else a search.
  if (const auto k = static_cast<std::size_t>(m); k < table.size() && table[k].method == m) return table[k];
  for (const MethodEntry& e : table)
    if (e.method == m) return e;
  throw Error(fmt::format("method: {} has no entry in the simulator's method table (sim/src/methods.cpp)", int(m)));
}

}  // namespace seqpar::sim

// The simulator's method table: one entry per method, consistent with the plan vocabulary of
// core, and degree rules that always give U x R = P.
#include <gtest/gtest.h>

#include "seqpar/core/error.hpp"
#include "seqpar/core/plan.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/methods.hpp"
#include "seqpar/sim/presets.hpp"

namespace seqpar::sim {
namespace {

TEST(MethodTable, EveryMethodHasOneEntryNamedAsInCore) {
  const std::vector<MethodEntry>& table = method_table();
  ASSERT_EQ(table.size(), kAllMethods.size());
  for (Method m : kAllMethods) {
    const MethodEntry& e = method_entry(m);
    EXPECT_EQ(e.method, m);
    EXPECT_EQ(e.name, to_string(m));
    EXPECT_EQ(parse_method(e.name), m);
    int entries = 0;
    for (const MethodEntry& x : table) entries += x.method == m;
    EXPECT_EQ(entries, 1) << e.name;
  }
  EXPECT_EQ(SearchSpace{}.methods, all_methods());
  EXPECT_EQ(all_methods(), std::vector<Method>(kAllMethods.begin(), kAllMethods.end()));  // core's order
}

// The table's K,V exchange and core's kv_allgather (which the training step reads) must agree.
TEST(MethodTable, KvExchangeAgreesWithCore) {
  for (const MethodEntry& e : method_table()) {
    EXPECT_EQ(e.kv_exchange == KvExchange::all_gather, kv_allgather(e.method)) << e.name;
    Plan p;
    p.method = e.method;
    p.ring_degree = 1;
    EXPECT_FALSE(kv_all_gather(p)) << e.name << ": a group of one rank gathers nothing";
  }
}

// The table's ring layout and core's Plan::zigzag() (which decides the sequence granularity) must
// agree, or the cost model would balance a ring the plan does not shard in zigzag.
TEST(MethodTable, RingLayoutAgreesWithThePlansZigzag) {
  for (const MethodEntry& e : method_table()) {
    Plan p;
    p.method = e.method;
    EXPECT_EQ(e.ring_layout == RingLayout::zigzag, p.zigzag()) << e.name;
    p.ring_degree = 1;
    EXPECT_FALSE(zigzag_ring(p)) << e.name << ": a ring of one rank has no layout";
  }
}

TEST(MethodTable, DegreeRulesSplitPIntoUTimesR) {
  for (const MethodEntry& e : method_table())
    for (int P = 2; P <= 64; ++P) {
      const auto splits = e.splits(P, std::nullopt);
      if (!e.free_ulysses_degree) {
        EXPECT_EQ(splits.size(), 1u) << e.name;
      }
      for (const auto& [u, r] : splits) {
        EXPECT_EQ(u * r, P) << e.name << " P=" << P;
        // No ring: all of P is Ulysses. A ring without a free U: all of P is the ring.
        const int expect_r = e.ring_layout == RingLayout::none ? 1 : e.free_ulysses_degree ? r : P;
        EXPECT_EQ(r, expect_r) << e.name << " P=" << P;
      }
    }
  // Hybrid: every proper split of 8, and a fixed U as given.
  const auto h = method_entry(Method::hybrid).splits(8, std::nullopt);
  EXPECT_EQ(h, (std::vector<std::pair<int, int>>{{2, 4}, {4, 2}}));
  EXPECT_EQ(method_entry(Method::hybrid).splits(8, 4), (std::vector<std::pair<int, int>>{{4, 2}}));
  EXPECT_EQ(method_entry(Method::ulysses).splits(8, 4), (std::vector<std::pair<int, int>>{{8, 1}}));
}

TEST(MethodTable, DivisorsAreAscendingAndComplete) {
  EXPECT_EQ(divisors(1), std::vector<int>{1});
  EXPECT_EQ(divisors(12), (std::vector<int>{1, 2, 3, 4, 6, 12}));
  EXPECT_EQ(divisors(49), (std::vector<int>{1, 7, 49}));
  EXPECT_EQ(divisors(97), (std::vector<int>{1, 97}));
}

// The search's validity hooks: a Ulysses degree needs a method with a free U, and a search at
// sp 1 needs a method that runs there.
TEST(MethodTable, SearchHooksRefuseWhatNoListedMethodCanRun) {
  SearchSpace space;
  space.methods = {Method::ulysses, Method::ring};
  space.ulysses_degree = 2;
  EXPECT_THROW(check_search(8, space), Error);
  space.methods.push_back(Method::hybrid);
  EXPECT_NO_THROW(check_search(8, space));
  SearchSpace sp1;
  sp1.methods = {Method::hybrid};
  sp1.sp = {1};
  EXPECT_THROW(check_search(8, sp1), Error);
  sp1.methods = {Method::hybrid, Method::ring_zigzag};
  EXPECT_NO_THROW(check_search(8, sp1));
}

}  // namespace
}  // namespace seqpar::sim

#include <gtest/gtest.h>

#include "seqpar/core/error.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/validity.hpp"

namespace seqpar::sim {
namespace {

TEST(Advisor, RanksFittingPlansByThroughputAndExplainsRejections) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  const Advice a = advise(m, s, 64, 1 << 20, SearchSpace{});
  ASSERT_NE(a.best(), nullptr);
  for (std::size_t i = 0; i < a.ranked.size(); ++i) {
    EXPECT_TRUE(a.ranked[i].valid && a.ranked[i].fits);
    if (i) {
      EXPECT_GE(a.ranked[i - 1].tokens_per_s_per_gpu, a.ranked[i].tokens_per_s_per_gpu);
    }
  }
  // Ulysses at 64 cannot split 32 heads; single-GPU sequences of 1M do not fit.
  bool heads = false, fit = false;
  for (const Rejection& r : a.rejected) {
    ASSERT_FALSE(r.reasons.empty());
    for (const auto& why : r.reasons) {
      heads |= why.find("heads: 32 query heads") != std::string::npos;
      fit |= why.find("does not fit") != std::string::npos;
    }
  }
  EXPECT_TRUE(heads);
  EXPECT_TRUE(fit);
  // Every structure is either ranked or rejected.
  EXPECT_EQ(a.ranked.size() + a.rejected.size(), structures(m, s, 64, 1 << 20, SearchSpace{}).size());
}

// The best plan may run lighter memory options up to the tie (kMemoryTieTolerance) slower than
// the fastest set: never slower than that against any fixed choice.
TEST(Advisor, TheBestIsWithinTheTieOfEveryFixedChoice) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  const Advice a = advise(m, s, 16, 1 << 18, SearchSpace{});
  ASSERT_NE(a.best(), nullptr);
  for (const MemoryOptions& mem : memory_option_sets()) {
    Plan p;
    p.method = Method::ring_zigzag;
    p.gpus = 16;
    p.seq_len = 1 << 18;
    p.sp = p.ring_degree = 16;
    p.mem = mem;
    const Result r = simulate(m, s, p);
    if (r.valid && r.fits) {
      EXPECT_LE(r.tokens_per_s_per_gpu * (1 - kMemoryTieTolerance), a.best()->tokens_per_s_per_gpu * (1 + 1e-12));
    }
  }
}

TEST(Advisor, FixedMemoryOptionsAreKept) {
  SearchSpace space;
  MemoryOptions fixed;
  fixed.checkpoint = Checkpoint::full;
  fixed.zero = 2;
  space.memory = fixed;
  const Advice a = advise(load_model("llama3-8b"), load_system("dgx-h100"), 8, 1 << 17, space);
  ASSERT_NE(a.best(), nullptr);
  for (const Result& r : a.ranked) EXPECT_EQ(r.plan.mem, fixed);
}

TEST(MaxLen, IsTheLongestFittingMultipleOfTheGranularity) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  Plan p;
  p.method = Method::ring_zigzag;
  p.gpus = p.sp = p.ring_degree = 8;
  p.mem.checkpoint = Checkpoint::full;
  p.mem.zero = 3;
  const std::int64_t n = max_seq_len(m, s, p);
  ASSERT_GT(n, 0);
  EXPECT_EQ(n % seq_granularity(p), 0);
  p.seq_len = n;
  EXPECT_TRUE(simulate(m, s, p).fits);
  p.seq_len = n + seq_granularity(p);
  EXPECT_FALSE(simulate(m, s, p).fits);
}

TEST(MaxLen, GrowsWithGpusAndWithMemoryOptions) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  const MaxLenAdvice eight = advise_max_seq_len(m, s, 8, SearchSpace{});
  const MaxLenAdvice thirtytwo = advise_max_seq_len(m, s, 32, SearchSpace{});
  ASSERT_TRUE(eight.result && thirtytwo.result);
  EXPECT_GT(thirtytwo.max_seq_len, eight.max_seq_len);
  EXPECT_TRUE(eight.result->fits);
  EXPECT_EQ(eight.result->plan.seq_len, eight.max_seq_len);
  SearchSpace plain;
  plain.memory = MemoryOptions{};
  const MaxLenAdvice without = advise_max_seq_len(m, s, 8, plain);
  EXPECT_LT(without.max_seq_len, eight.max_seq_len);
}

void expect_search_error(int gpus, const SearchSpace& space, const std::string& needle) {
  try {
    check_search(gpus, space);
    ADD_FAILURE() << "no error for '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  // advise and maxlen refuse the same space the same way (nothing silently dropped).
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  EXPECT_THROW(advise(m, s, gpus, 1 << 16, space), Error) << needle;
  EXPECT_THROW(advise_max_seq_len(m, s, gpus, space), Error) << needle;
}

TEST(Search, ConstraintsOutsideTheirRangeAreErrors) {
  SearchSpace space;
  space.ulysses_degree = -4;
  expect_search_error(8, space, "ulysses_degree: -4 must be at least 1");
  expect_search_error(2147483647, SearchSpace{}, "gpus: 2147483647 is above the limit of 1048576");
  space = SearchSpace{};
  space.sp = {0};
  expect_search_error(8, space, "sp: 0 must be at least 1");
  space = SearchSpace{};
  space.micro_batch = 0;
  expect_search_error(8, space, "micro_batch: 0 must be at least 1");
}

TEST(Search, ConstraintsThatWouldBeIgnoredAreErrors) {
  SearchSpace space;
  space.methods = {Method::ulysses, Method::ring};
  space.ulysses_degree = 4;  // only hybrids have a free Ulysses degree
  expect_search_error(8, space, "does not include hybrid");
  space = SearchSpace{};
  space.methods = {Method::hybrid};
  space.sp = {1};
  expect_search_error(8, space, "hybrid needs an SP degree of at least 2");
  space = SearchSpace{};
  space.sp = {4, 4};
  expect_search_error(8, space, "sp: 4 is listed twice");
  space = SearchSpace{};
  space.methods = {Method::ring, Method::ring};
  expect_search_error(8, space, "method: ring is listed twice");
}

TEST(Search, AFixedHybridSplitIsAnsweredWithThatSplitOrNotAtAll) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  SearchSpace space;
  space.methods = {Method::hybrid};
  space.ulysses_degree = 3;  // 32 heads and 8 GPUs: no valid hybrid has U = 3
  const MaxLenAdvice none = advise_max_seq_len(m, s, 8, space);
  EXPECT_EQ(none.max_seq_len, 0);  // not the data-parallel-only plan's length
  EXPECT_FALSE(none.result.has_value());
  ASSERT_FALSE(none.rejected.empty());
  for (const Rejection& r : none.rejected) {
    EXPECT_EQ(r.plan.method, Method::hybrid);
    EXPECT_EQ(r.plan.ulysses_degree, 3);
    EXPECT_FALSE(r.reasons.empty());
  }
  space.ulysses_degree = 2;
  const MaxLenAdvice two = advise_max_seq_len(m, s, 8, space);
  ASSERT_TRUE(two.result.has_value());
  EXPECT_EQ(two.result->plan.method, Method::hybrid);
  EXPECT_EQ(two.result->plan.ulysses_degree, 2);
  const Advice a = advise(m, s, 8, 1 << 15, space);
  ASSERT_FALSE(a.ranked.empty());
  for (const Result& r : a.ranked) {
    EXPECT_EQ(r.plan.method, Method::hybrid);
    EXPECT_EQ(r.plan.ulysses_degree, 2);
  }
}

TEST(Search, TheDataParallelOnlyPlanStandsForEveryMethodButHybrid) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  SearchSpace space;
  space.methods = {Method::ring_zigzag};
  bool dp_only = false;
  for (const Plan& p : structures(m, s, 4, 1 << 16, space)) {
    dp_only |= p.sp == 1;
    if (p.sp > 1) {
      EXPECT_EQ(p.method, Method::ring_zigzag);
    }
  }
  EXPECT_TRUE(dp_only);
  space.methods = {Method::hybrid};
  for (const Plan& p : structures(m, s, 4, 1 << 16, space)) EXPECT_EQ(p.method, Method::hybrid) << describe(p);
  // Divisors of a large GPU count, all of them, ascending.
  space = SearchSpace{};
  space.methods = {Method::ulysses};
  space.tp = {1};  // the SP degrees alone (TP's own degrees: tests/sim/test_tensor_parallel.cpp)
  std::vector<int> sps;
  for (const Plan& p : structures(m, s, 1 << 20, 1 << 20, space)) sps.push_back(p.sp);
  ASSERT_EQ(sps.size(), 21u);
  for (std::size_t i = 0; i < sps.size(); ++i) EXPECT_EQ(sps[i], 1 << i);
}

}  // namespace
}  // namespace seqpar::sim

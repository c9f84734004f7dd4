#include <gtest/gtest.h>

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

TEST(Advisor, TheBestIsAtLeastAsFastAsEveryFixedChoice) {
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
      EXPECT_LE(r.tokens_per_s_per_gpu, a.best()->tokens_per_s_per_gpu * (1 + 1e-12));
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

}  // namespace
}  // namespace seqpar::sim

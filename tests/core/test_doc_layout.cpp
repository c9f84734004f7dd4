// fullest_rank_tokens against place_documents: the tokens-only placement the memory estimate asks at
// every length maxlen tries must be the layout's own fullest rank, for every balancer, on random
// packed sequences at awkward sizes and degrees, and refuse what place_documents refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "seqpar/core/doc_layout.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/rng.hpp"
#include "test_helpers.hpp"

namespace seqpar {
namespace {

using core_test::random_cu;

constexpr Balancer kBalancers[] = {Balancer::contiguous, Balancer::zigzag, Balancer::per_document, Balancer::balanced};

TEST(DocLayout, FullestRankTokensIsTheLayoutsFullestRank) {
  Rng rng(0xd0c5);
  int compared = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int u = int(rng.between(1, 3)), r = int(rng.between(1, 13));
    // Lengths divisible by 2 x U x R (every balancer lays them out) and, every third, not.
    std::int64_t n = 2 * std::int64_t(u) * r * rng.between(1, 60);
    if (trial % 3 == 0) n += rng.between(1, 5);
    const auto cu = random_cu(rng, n);
    for (Balancer b : kBalancers) {
      std::int64_t most = -1;
      bool refused = false;
      try {
        for (const RankHold& h : place_documents(cu, u, r, b).ranks) most = std::max(most, h.tokens);
      } catch (const Error&) {
        refused = true;
      }
      if (refused) {
        EXPECT_THROW(fullest_rank_tokens(cu, u, r, b), Error) << to_string(b) << " n " << n;
        continue;
      }
      EXPECT_EQ(fullest_rank_tokens(cu, u, r, b), most) << to_string(b) << " U " << u << " R " << r << " n " << n;
      ++compared;
    }
  }
  EXPECT_GT(compared, 800);  // most draws are laid out, so the equality above is what was tested
}

// Contiguous and zigzag hold N / R a rank whatever the documents: what lets maxlen skip sampling them.
TEST(DocLayout, EvenShareBalancersHoldTheSameTokensWhateverTheDocuments) {
  Rng rng(11);
  for (Balancer b : kBalancers) {
    const std::int64_t n = 2 * 3 * 4 * 25;
    const std::int64_t one[] = {0, n};
    const std::int64_t alone = fullest_rank_tokens(one, 3, 4, b);
    bool same = true;
    for (int trial = 0; trial < 20; ++trial) same = same && fullest_rank_tokens(random_cu(rng, n), 3, 4, b) == alone;
    EXPECT_EQ(same, holds_even_share(b)) << to_string(b);
  }
}

// Thousands of ring ranks: the tokens alone, without 2R runs a document (the layout at R = 4096 over a
// thousand documents would hold eight million runs).
TEST(DocLayout, FullestRankTokensAtThousandsOfRanks) {
  const int R = 4096;
  std::vector<std::int64_t> cu = {0};
  for (int d = 0; d < 1000; ++d) cu.push_back(cu.back() + 1 + (d * 7919) % 3000);
  // Per-document: every document padded to a multiple of 2R and cut in 2R chunks; two a rank.
  std::int64_t per_document = 0;
  for (std::size_t d = 0; d + 1 < cu.size(); ++d) {
    const std::int64_t len = cu[d + 1] - cu[d], padded = (len + 2 * R - 1) / (2 * R) * (2 * R);
    per_document += padded / R;
  }
  EXPECT_EQ(fullest_rank_tokens(cu, 1, R, Balancer::per_document), per_document);
  EXPECT_GE(fullest_rank_tokens(cu, 1, R, Balancer::balanced), 3000 / 2);  // at least one whole document
  EXPECT_THROW(fullest_rank_tokens(cu, 1, 0, Balancer::balanced), Error);
}

}  // namespace
}  // namespace seqpar

// Token sharding of every method: each position held exactly once, zigzag pairs chunks r and
// 2R-1-r, hybrid splits a ring shard over the Ulysses ranks in order, labels cross shard edges.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/kernels/block_mask.hpp"
#include "seqpar/train/seq_layout.hpp"
#include "seqpar/train/trainer.hpp"

namespace seqpar::train {
namespace {

void expect_partition(const SeqLayout& l) {
  std::set<int> seen;
  const int p = l.ulysses() * l.ring();
  for (int s = 0; s < p; ++s) {
    const auto pos = l.positions(s);
    ASSERT_EQ(static_cast<int>(pos.size()), l.local_len());
    for (int x : pos) EXPECT_TRUE(seen.insert(x).second) << "position " << x << " twice";
  }
  EXPECT_EQ(static_cast<std::int64_t>(seen.size()), l.seq_len());
}

TEST(SeqLayout, EveryMethodPartitionsTheSequence) {
  expect_partition(SeqLayout(64, 4, 1, false));
  expect_partition(SeqLayout(64, 1, 4, false));
  expect_partition(SeqLayout(64, 1, 4, true));
  expect_partition(SeqLayout(64, 2, 2, true));
  expect_partition(SeqLayout(48, 3, 2, true));  // pieces straddle zigzag chunks
}

TEST(SeqLayout, ZigzagHoldsChunksRAnd2RMinus1MinusR) {
  const SeqLayout l(16, 1, 4, true);  // 8 chunks of 2
  EXPECT_EQ(l.positions(0), (std::vector<int>{0, 1, 14, 15}));
  EXPECT_EQ(l.positions(3), (std::vector<int>{6, 7, 8, 9}));
  const auto segs = l.group_segments(3);
  ASSERT_EQ(segs.size(), 1u);  // chunks 3 and 4 are adjacent: one run
  EXPECT_EQ(segs[0].pos, 6);
  EXPECT_EQ(segs[0].len, 4);
}

TEST(SeqLayout, HybridSplitsTheRingShardOverUlyssesRanksInOrder) {
  const SeqLayout l(16, 2, 2, true);  // ring chunks of 4: group 0 holds 0-3 and 12-15
  EXPECT_EQ(l.positions(0), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(l.positions(1), (std::vector<int>{12, 13, 14, 15}));
  EXPECT_EQ(l.positions(2), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(l.positions(3), (std::vector<int>{8, 9, 10, 11}));
}

TEST(SeqLayout, RejectsIndivisibleLengths) {
  EXPECT_THROW(SeqLayout(30, 4, 1, false), Error);
  EXPECT_THROW(SeqLayout(12, 1, 4, true), Error);  // 12 % (2*4) != 0
  EXPECT_THROW(SeqLayout(0, 1, 1, false), Error);
}

TEST(SyntheticData, IsADeterministicBigram) {
  const int n = 32, vocab = 50;
  const auto seq = synthetic_sequence(7, 0, n, vocab);
  for (int i = 1; i < n; ++i) EXPECT_EQ(seq[i], (5 * seq[i - 1] + 3) % vocab);
  EXPECT_EQ(synthetic_sequence(7, 0, n, vocab), seq);
  EXPECT_NE(synthetic_sequence(7, 1, n, vocab), seq);
}

// Every rank's label of the token at global position p is token p + 1 of the whole sequence,
// also when p + 1 lives on another rank (zigzag: the ends of both chunks); the last has none.
TEST(SyntheticData, LabelsCrossShardBoundaries) {
  TrainSetup s;
  s.model.layers = 1;
  s.model.hidden = 16;
  s.model.heads = 2;
  s.model.kv_heads = 2;
  s.model.head_dim = 8;
  s.model.ffn = 16;
  s.model.vocab = 40;
  s.seq_len = 32;
  s.micro_batch = 2;
  s.ring = 4;
  s.zigzag = true;
  auto comms = comm::make_virtual_world(4, false);
  std::vector<std::vector<int>> labels(4), positions(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r)
    threads.emplace_back([&, r] {
      auto be = make_cpu_backend();
      Trainer t(*be, comms[static_cast<std::size_t>(r)].get(), s);
      labels[static_cast<std::size_t>(r)] = t.labels();
      positions[static_cast<std::size_t>(r)] = t.positions();
    });
  for (auto& th : threads) th.join();
  int unlabeled = 0;
  for (int r = 0; r < 4; ++r) {
    const auto& pos = positions[static_cast<std::size_t>(r)];
    const auto& lab = labels[static_cast<std::size_t>(r)];
    ASSERT_EQ(pos.size(), 16u);  // 2 sequences x 8 tokens
    for (std::size_t k = 0; k < pos.size(); ++k) {
      const auto seq = synthetic_sequence(s.seed, static_cast<std::int64_t>(k / 8), s.seq_len, s.model.vocab);
      if (pos[k] + 1 == s.seq_len) {
        EXPECT_EQ(lab[k], -1);
        ++unlabeled;
      } else {
        EXPECT_EQ(lab[k], seq[static_cast<std::size_t>(pos[k]) + 1]) << "rank " << r << " position " << pos[k];
      }
    }
  }
  EXPECT_EQ(unlabeled, 2);  // the last token of each sequence
  EXPECT_EQ(positions[0][3], 3);  // rank 0 holds chunk 0 (0-3) and chunk 7 (28-31)
  EXPECT_EQ(positions[0][4], 28);
}

// The cuDNN engine runs full, causal-aligned and empty blocks; the CUDA back end falls back to
// seqpar's kernel for any other ("general"). Every block a ring step computes (the group's query
// segments against each source group's key segments, skipping the causal future as SpAttention
// does) must be one of the three, for contiguous and zigzag rings, hybrids and odd chunk counts.
TEST(SeqLayout, RingBlocksAreNeverGeneral) {
  int blocks = 0;
  for (bool zigzag : {false, true})
    for (int u : {1, 2})
      for (int r : {1, 2, 3, 4, 8})
        for (std::int64_t n : {std::int64_t{48} * u * r, std::int64_t{160} * u * r}) {
          const SeqLayout l(n, u, r, zigzag);
          for (int g = 0; g < r; ++g)
            for (int src = 0; src < r; ++src)
              for (const Segment& qs : l.group_segments(g))
                for (const Segment& ks : l.group_segments(src)) {
                  if (ks.pos > qs.pos + qs.len - 1) continue;  // skipped: entirely in the causal future
                  ref::AttentionShape s;
                  s.heads = s.kv_heads = 1;
                  s.head_dim = 8;
                  s.seq_q = qs.len;
                  s.seq_k = ks.len;
                  s.causal = true;
                  s.q_offset = qs.pos;
                  s.k_offset = ks.pos;
                  const kernels::BlockMask m = kernels::classify_block_mask(s);
                  EXPECT_NE(m, kernels::BlockMask::general)
                      << "n " << n << " U" << u << "xR" << r << (zigzag ? " zigzag" : "") << ": group " << g
                      << " segment at " << qs.pos << " against group " << src << " segment at " << ks.pos;
                  ++blocks;
                }
        }
  EXPECT_GT(blocks, 100);
}

}  // namespace
}  // namespace seqpar::train

// classify_block_mask against the mask itself: for random shapes and offsets, the kind it names must
// describe every (row, key) pair exactly, and `general` must be none of the other kinds.
#include <gtest/gtest.h>

#include <random>

#include "seqpar/core/error.hpp"
#include "seqpar/kernels/block_mask.hpp"

namespace seqpar {
namespace {

using kernels::BlockMask;

// Whether `kind` describes the visibility of every pair of `s`.
bool describes(BlockMask kind, const ref::AttentionShape& s) {
  for (int i = 0; i < s.seq_q; ++i)
    for (int j = 0; j < s.seq_k; ++j) {
      const bool seen = ref::visible(s, i, j);
      bool want = false;
      switch (kind) {
        case BlockMask::full: want = true; break;
        case BlockMask::none: want = false; break;
        case BlockMask::causal_top: want = j <= i; break;
        case BlockMask::causal_bottom: want = j <= i + s.seq_k - s.seq_q; break;
        case BlockMask::general: return false;
      }
      if (seen != want) return false;
    }
  return true;
}

TEST(BlockMask, KindDescribesEveryPair) {
  std::mt19937 gen(2024);
  std::uniform_int_distribution<int> len(1, 40), off(-60, 60);
  int seen[5] = {};
  for (int trial = 0; trial < 4000; ++trial) {
    ref::AttentionShape s;
    s.seq_q = len(gen);
    s.seq_k = len(gen);
    s.heads = s.kv_heads = 1;
    s.head_dim = 8;
    s.causal = trial % 7 != 0;
    s.q_offset = 100 + off(gen);
    s.k_offset = 100 + (trial % 3 == 0 ? s.q_offset - 100 : off(gen));
    const BlockMask kind = kernels::classify_block_mask(s);
    ++seen[static_cast<int>(kind)];
    if (kind == BlockMask::general) {
      for (BlockMask other : {BlockMask::full, BlockMask::none, BlockMask::causal_top})
        EXPECT_FALSE(describes(other, s)) << "sq " << s.seq_q << " sk " << s.seq_k << " d " << s.q_offset - s.k_offset
                                          << " is " << kernels::to_string(other) << " but was called general";
      if (s.seq_q <= s.seq_k) {
        EXPECT_FALSE(describes(BlockMask::causal_bottom, s));
      }
    } else {
      EXPECT_TRUE(describes(kind, s)) << "sq " << s.seq_q << " sk " << s.seq_k << " d " << s.q_offset - s.k_offset
                                      << " called " << kernels::to_string(kind);
    }
  }
  for (int k = 0; k < 5; ++k) EXPECT_GT(seen[k], 0) << "kind " << kernels::to_string(static_cast<BlockMask>(k)) << " never drawn";
}

TEST(BlockMask, RingStepsAreNeverGeneral) {
  // Contiguous and zigzag ring steps: query chunk a, key chunk b of equal length c.
  const int c = 16;
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      ref::AttentionShape s;
      s.seq_q = s.seq_k = c;
      s.heads = s.kv_heads = 1;
      s.head_dim = 8;
      s.causal = true;
      s.q_offset = std::int64_t{a} * c;
      s.k_offset = std::int64_t{b} * c;
      const BlockMask want = a == b ? BlockMask::causal_top : (a > b ? BlockMask::full : BlockMask::none);
      EXPECT_EQ(kernels::classify_block_mask(s), want) << "chunks " << a << ", " << b;
    }
}

TEST(BlockMask, BadShapeThrows) {
  ref::AttentionShape s;
  s.seq_q = 0;
  EXPECT_THROW(kernels::classify_block_mask(s), Error);
}

}  // namespace
}  // namespace seqpar

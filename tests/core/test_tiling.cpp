// ALST's TiledMLP tile rule (core/tiling.hpp), shared by the training step and the simulator.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "seqpar/core/tiling.hpp"

namespace seqpar {
namespace {

TEST(Tiling, AlstCutsASequenceIntoCeilSeqOverHiddenEqualTiles) {
  EXPECT_EQ(alst_tile_count(16384, 4096), 4);
  EXPECT_EQ(alst_tile_tokens(16384, 4096), 4096);  // 4 tiles of hidden rows
  EXPECT_EQ(alst_tile_count(10000, 4096), 3);
  EXPECT_EQ(alst_tile_tokens(10000, 4096), 3334);  // 3 tiles of equal size, the last 3332
  EXPECT_EQ(alst_tile_count(4097, 4096), 2);
  EXPECT_EQ(alst_tile_tokens(4097, 4096), 2049);   // just past hidden: two halves
  EXPECT_EQ(alst_tile_tokens(100, 4096), 100);     // shorter than hidden: one tile
  EXPECT_EQ(alst_tile_count(100, 4096), 1);
}

TEST(Tiling, TilesCoverTheSequenceAndNeverExceedHidden) {
  for (std::int64_t n : {1, 2, 31, 32, 33, 64, 255, 256, 257, 1000, 524288})
    for (std::int64_t h : {1, 7, 32, 4096}) {
      const std::int64_t t = alst_tile_tokens(n, h), k = alst_tile_count(n, h);
      EXPECT_LE(t, h) << n << " " << h;
      EXPECT_GE(t * k, n) << n << " " << h;        // the tiles cover the sequence
      EXPECT_LT(t * (k - 1), n) << n << " " << h;  // and none is empty
    }
}

TEST(Tiling, DegenerateAndHugeInputs) {
  EXPECT_EQ(alst_tile_tokens(0, 4096), 1);
  EXPECT_EQ(alst_tile_tokens(100, 0), 100);
  EXPECT_EQ(alst_tile_count(100, 0), 1);
  const std::int64_t big = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(alst_tile_count(big, big), 1);  // no overflow in the ceiling
  EXPECT_EQ(alst_tile_tokens(big, 1), 1);
}

}  // namespace
}  // namespace seqpar

// RankLayout: the SP x DP mapping, the groups it names and the degrees it rejects.
#include <gtest/gtest.h>

#include <set>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::comm {
namespace {

TEST(RankLayout, UlyssesGroupsAreAdjacentRanks) {
  auto l = RankLayout::make(16, 4, 2);  // sp 8, dp 2
  EXPECT_EQ(l.sp, 8);
  EXPECT_EQ(l.dp, 2);
  EXPECT_EQ(l.ulysses_group(5), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(l.ring_group(5), (std::vector<int>{1, 5}));
  EXPECT_EQ(l.sp_group(9), (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(l.dp_group(9), (std::vector<int>{1, 9}));
  EXPECT_EQ(l.ulysses_index(13), 1);
  EXPECT_EQ(l.ring_index(13), 1);
  EXPECT_EQ(l.dp_index(13), 1);
}

TEST(RankLayout, GroupsPartitionTheWorld) {
  for (auto [world, u, r] : {std::tuple{8, 2, 2}, {12, 3, 2}, {6, 1, 3}, {4, 4, 1}}) {
    auto l = RankLayout::make(world, u, r);
    using Fn = std::vector<int> (RankLayout::*)(int) const;
    for (Fn fn : {&RankLayout::sp_group, &RankLayout::ulysses_group, &RankLayout::ring_group,
                  &RankLayout::dp_group}) {
      std::set<int> seen;
      for (int w = 0; w < world; ++w) {
        auto g = (l.*fn)(w);
        // w belongs to its group, and every member names the same group.
        EXPECT_NE(std::find(g.begin(), g.end(), w), g.end());
        for (int m : g) EXPECT_EQ((l.*fn)(m), g);
        seen.insert(g.begin(), g.end());
      }
      EXPECT_EQ(static_cast<int>(seen.size()), world);
    }
  }
}

TEST(RankLayout, RejectsDegreesThatDoNotDivideTheRanks) {
  try {
    RankLayout::make(6, 4, 1);
    FAIL() << "expected seqpar::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SP degree 4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("does not divide the 6 ranks"), std::string::npos);
  }
  EXPECT_THROW(RankLayout::make(8, 0, 2), Error);
  EXPECT_THROW(RankLayout::make(8, 2, -1), Error);
  EXPECT_THROW(RankLayout::make(0, 1, 1), Error);
}

TEST(Types, NamesRoundTrip) {
  for (DType dt : {DType::fp32, DType::fp64, DType::bf16, DType::fp16, DType::i32, DType::i64,
                   DType::u8})
    EXPECT_EQ(parse_dtype(to_string(dt)), dt);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_dtype("float"), DType::fp32);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_THROW(parse_dtype("fp8"), Error);
  EXPECT_EQ(parse_backend("virtual"), Backend::virtual_ranks);
  EXPECT_THROW(parse_backend("gloo"), Error);
}

}  // namespace
}  // namespace seqpar::comm

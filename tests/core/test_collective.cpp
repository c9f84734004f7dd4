// seqpar::Collective: the nccl-tests names round-trip, the bus factors are nccl-tests', and an
// unknown name is an error naming the field.
#include <gtest/gtest.h>

#include <string>

#include "seqpar/core/collective.hpp"
#include "seqpar/core/error.hpp"

using seqpar::Collective;

TEST(Collective, NamesRoundTrip) {
  for (Collective c : seqpar::all_collectives) EXPECT_EQ(seqpar::parse_collective(seqpar::to_string(c)), c);
  EXPECT_EQ(seqpar::to_string(Collective::all_to_all), "alltoall");
  EXPECT_EQ(seqpar::to_string(Collective::reduce_scatter), "reducescatter");
}

TEST(Collective, NcclTestsBusFactors) {
  EXPECT_DOUBLE_EQ(seqpar::bus_factor(Collective::all_reduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(seqpar::bus_factor(Collective::all_gather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(seqpar::bus_factor(Collective::reduce_scatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(seqpar::bus_factor(Collective::all_to_all, 2), 0.5);
  EXPECT_DOUBLE_EQ(seqpar::bus_factor(Collective::send_recv, 8), 1.0);
  EXPECT_DOUBLE_EQ(seqpar::bus_factor(Collective::all_reduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(seqpar::bus_factor(Collective::send_recv, 1), 1.0);
}

TEST(Collective, UnknownNamesTheField) {
  try {
    seqpar::parse_collective("broadcast", "--op");
    FAIL() << "broadcast was accepted";
  } catch (const seqpar::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--op"), std::string::npos) << what;
    EXPECT_NE(what.find("broadcast"), std::string::npos) << what;
  }
}

// The measurement header and mode names: one writer for every measuring program.
#include <gtest/gtest.h>

#include <string>

#include "seqpar/core/error.hpp"
#include "seqpar/core/measurement.hpp"
#include "seqpar/core/run_info.hpp"

using seqpar::Mode;

TEST(Measurement, ModeNamesRoundTrip) {
  for (Mode m : seqpar::all_modes) EXPECT_EQ(seqpar::parse_mode(seqpar::to_string(m)), m);
  EXPECT_STREQ(seqpar::to_string(Mode::real_ranks), "real-ranks");
  EXPECT_STREQ(seqpar::to_string(Mode::virtual_ranks), "virtual-ranks");
  EXPECT_STREQ(seqpar::to_string(Mode::single_rank_proxy), "single-rank-proxy");
  EXPECT_STREQ(seqpar::to_string(Mode::modelled), "modelled");
}

TEST(Measurement, UnknownModeNamesTheField) {
  try {
    seqpar::parse_mode("real_ranks", "results[0].mode");
    FAIL() << "real_ranks was accepted";
  } catch (const seqpar::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("results[0].mode"), std::string::npos) << what;
    EXPECT_NE(what.find("real-ranks"), std::string::npos) << what;
  }
}

TEST(Measurement, HeaderCarriesRunInfoKindProgramModeDevice) {
  const char* argv[] = {"seqpar-bench-x", "--json", "out.json"};
  const auto doc = seqpar::measurement_header(3, argv, "seqpar-bench-x", Mode::virtual_ranks, false);
  EXPECT_EQ(doc.at("kind"), "measurement");
  EXPECT_EQ(doc.at("program"), "seqpar-bench-x");
  EXPECT_EQ(doc.at("mode"), "virtual-ranks");
  EXPECT_EQ(doc.at("device"), "cpu");
  EXPECT_EQ(doc.at("schema_version"), seqpar::kSchemaVersion);
  EXPECT_EQ(doc.at("command"), seqpar::command_line(3, argv));
  for (const char* key : {"tool_version", "host", "created_utc"}) EXPECT_TRUE(doc.contains(key)) << key;
  EXPECT_EQ(seqpar::measurement_header(1, argv, "p", Mode::real_ranks, true).at("device"), "gpu");
}

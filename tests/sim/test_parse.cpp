#include <gtest/gtest.h>

#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"

namespace seqpar {
namespace {

TEST(ParseCount, AcceptsPlainAndBinarySuffixes) {
  EXPECT_EQ(parse_count("131072", "seq_len"), 131072);
  EXPECT_EQ(parse_count("128K", "seq_len"), 131072);
  EXPECT_EQ(parse_count("128k", "seq_len"), 131072);
  EXPECT_EQ(parse_count("1M", "seq_len"), 1048576);
  EXPECT_EQ(parse_count(" 4G ", "size"), std::int64_t{4} << 30);
}

TEST(ParseCount, RejectsBadInputNamingTheField) {
  for (const char* bad : {"", "abc", "12Q", "-5", "0", "1.5K", "K", "99999999999999999999"}) {
    try {
      parse_count(bad, "seq_len");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("seq_len"), std::string::npos) << e.what();
    }
  }
}

// A rate below one token a second is not "0 tok/s" (llama3-8b at 512G tokens on a million
// GB200s: 0.00186 tokens/s per GPU printed as 0 in the sweep's table and the report's Answer).
TEST(FormatRate, WholeFromAHundredElseThreeSignificantDigits) {
  EXPECT_EQ(format_rate(5123.4), "5123");
  EXPECT_EQ(format_rate(100.0), "100");
  EXPECT_EQ(format_rate(99.94), "99.9");
  EXPECT_EQ(format_rate(0.001861426733573664), "0.00186");
  EXPECT_EQ(format_rate(0.0), "0");
}

TEST(SplitList, SplitsAndRejectsEmptyItems) {
  EXPECT_EQ(split_list("a, b,c", "x"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_THROW(split_list("a,,b", "x"), Error);
  EXPECT_THROW(split_list("", "x"), Error);
}

TEST(FormatCount, RoundTripsPowersOfTwo) {
  EXPECT_EQ(format_count(131072), "128K");
  EXPECT_EQ(format_count(1 << 20), "1M");
  EXPECT_EQ(format_count(1000), "1000");
  EXPECT_EQ(format_count(3 << 20), "3M");
}

}  // namespace
}  // namespace seqpar

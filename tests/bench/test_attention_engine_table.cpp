// seqpar-bench-attention --attention both: the side-by-side table pairs the two engines' rows of
// one shape, gives the ratio of their times, and shows a failed or missing engine as "-".
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "seqpar/bench/attention_engine_table.hpp"

namespace seqpar::bench {
namespace {

nlohmann::json row(const std::string& engine, const std::string& op, int seq, bool causal, double time_s,
                   double tflops) {
  return {{"name", "attention_" + op + "/" + engine}, {"attention_engine", engine}, {"op", op}, {"dtype", "bf16"},
          {"head_dim", 128}, {"causal", causal}, {"seq_len", seq}, {"batch", 1}, {"heads", 16}, {"kv_heads", 16},
          {"time_s", time_s}, {"tflops", tflops}};
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(AttentionEngineTable, PairsEnginesOfOneShapeWithTheRatio) {
  const nlohmann::json results = {row("seqpar", "fwd", 4096, false, 0.004, 40.0),
                                  row("seqpar", "fwd", 4096, true, 0.002, 40.0),
                                  row("cudnn", "fwd", 4096, false, 0.0005, 320.0),
                                  row("cudnn", "fwd", 4096, true, 0.001, 80.0)};
  const auto l = lines(attention_engine_table(results));
  ASSERT_EQ(l.size(), 4u);  // comment, header, two shapes
  EXPECT_NE(l[1].find("cudnn/seqpar"), std::string::npos) << l[1];
  // full mask: 4 ms vs 0.5 ms is 8x; the causal shape pairs its own rows (2 ms vs 1 ms: 2x).
  EXPECT_NE(l[2].find("full"), std::string::npos) << l[2];
  EXPECT_NE(l[2].find("4.000"), std::string::npos) << l[2];
  EXPECT_NE(l[2].find("0.500"), std::string::npos) << l[2];
  EXPECT_NE(l[2].find("8.00x"), std::string::npos) << l[2];
  EXPECT_NE(l[3].find("causal"), std::string::npos) << l[3];
  EXPECT_NE(l[3].find("2.00x"), std::string::npos) << l[3];
}

TEST(AttentionEngineTable, FailedOrMissingEngineHasNoRatio) {
  nlohmann::json failed = {{"name", "attention_bwd/cudnn"}, {"attention_engine", "cudnn"}, {"op", "bwd"},
                           {"dtype", "bf16"},  {"head_dim", 128}, {"causal", false}, {"seq_len", 1024},
                           {"batch", 1},       {"heads", 16},     {"kv_heads", 16},  {"error", "out of memory"}};
  const nlohmann::json results = {row("seqpar", "bwd", 1024, false, 0.001, 50.0), failed,
                                  row("seqpar", "fwd", 2048, false, 0.001, 50.0)};
  const auto l = lines(attention_engine_table(results));
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l[2].find("x"), std::string::npos) << l[2];  // no ratio where cuDNN failed
  EXPECT_NE(l[2].find("-"), std::string::npos) << l[2];
  EXPECT_EQ(l[3].find("x"), std::string::npos) << l[3];  // nor where it did not run
}

}  // namespace
}  // namespace seqpar::bench

// The report's one-line answers and method comparison (method_comparison.hpp) on hand-made points:
// the wording of issue 28's example, each method's best against the overall best, what does not fit.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "seqpar/reports/method_comparison.hpp"

using nlohmann::json;
using seqpar::reports::method_comparison;

namespace {

json point(const std::string& method, int sp, int u, int r, double rate, bool fits, double peak_gib,
           const std::string& ckpt = "selective") {
  const json plan = {{"method", method}, {"gpus", 64}, {"seq_len", 131072}, {"sp", sp}, {"ulysses_degree", u},
                     {"ring_degree", r}, {"zero", 1}, {"checkpoint", ckpt}, {"tiled_mlp", false}};
  return {{"origin", "prediction"}, {"system", "dgx-h100"}, {"model", "llama3-8b"}, {"source", "S1"},
          {"plan", plan}, {"plan_label", method}, {"valid", true}, {"fits", fits},
          {"tokens_per_s_per_gpu", fits ? json(rate) : json(nullptr)}, {"peak_memory_bytes", peak_gib * (1 << 30)},
          {"memory_capacity_bytes", 80.0 * (1 << 30)}};
}

TEST(MethodComparison, OneLinePerCellInTheIssuesWords) {
  const json points = {point("ulysses", 8, 8, 1, 1000, true, 70), point("ulysses", 4, 4, 1, 900, true, 75),
                       point("ring-zigzag", 8, 1, 8, 930, true, 60, "none"), point("hybrid", 8, 4, 2, 970, true, 65)};
  const json cells = method_comparison(points);
  ASSERT_EQ(cells.size(), 1u);
  EXPECT_EQ(cells[0]["answer"], "128K on 64 GPUs: Ulysses 8 x DP 8, selective checkpointing, 1.00; ring-zigzag 8: 0.93; "
                                "hybrid 4x2: 0.97");
  ASSERT_EQ(cells[0]["methods"].size(), 3u);
  EXPECT_EQ(cells[0]["methods"][0]["plan"]["sp"], 8);  // Ulysses' fastest of its two degrees
  EXPECT_DOUBLE_EQ(cells[0]["methods"][1]["relative"].get<double>(), 0.93);
  EXPECT_EQ(cells[0]["best"]["method"], "ulysses");
}

TEST(MethodComparison, WhatDoesNotFitIsSaidAndAPlanOverCapacityIsNeverTheBest) {
  json points = {point("ulysses", 8, 8, 1, 2000, false, 90), point("ring-zigzag", 8, 1, 8, 800, true, 79, "full")};
  json cells = method_comparison(points);
  ASSERT_EQ(cells.size(), 1u);
  EXPECT_EQ(cells[0]["answer"], "128K on 64 GPUs: ring-zigzag 8 x DP 8, full checkpointing, 1.00; ulysses: does not fit");
  EXPECT_TRUE(cells[0]["methods"][0]["relative"].is_null());
  EXPECT_DOUBLE_EQ(cells[0]["methods"][0]["peak_memory_bytes"].get<double>(), 90.0 * (1 << 30));
  // Nothing fits: the leanest plan and how far over it is.
  points = {point("ulysses", 8, 8, 1, 0, false, 95), point("hybrid", 8, 4, 2, 0, false, 85)};
  cells = method_comparison(points);
  EXPECT_EQ(cells[0]["answer"], "128K on 64 GPUs: no plan fits (the leanest, hybrid 4x2, needs 85.0 of 80.0 GiB per GPU)");
  EXPECT_TRUE(cells[0]["best"].is_null());
  // SP 1 is data parallelism alone, whatever method the plan names.
  points = {point("ulysses", 1, 1, 1, 500, true, 60, "full")};
  EXPECT_EQ(method_comparison(points)[0]["answer"], "128K on 64 GPUs: DP 64 only (no SP), full checkpointing, 1.00");
}

// Tensor parallelism takes its share of the GPUs before DP does, and the words name it first.
TEST(MethodComparison, TensorParallelPlansCountTheirTpGroup) {
  json tp = point("ulysses", 4, 4, 1, 1000, true, 60);
  tp["plan"]["tp"] = 2;
  json no_sp = point("ulysses", 1, 1, 1, 900, true, 70);
  no_sp["plan"]["tp"] = 8;
  json cells = method_comparison(json{tp, no_sp});
  EXPECT_EQ(cells[0]["answer"], "128K on 64 GPUs: TP 2 x Ulysses 4 x DP 8, selective checkpointing, 1.00; TP 8, no SP: 0.90");
  cells = method_comparison(json{no_sp});
  EXPECT_EQ(cells[0]["answer"], "128K on 64 GPUs: TP 8 x DP 8 (no SP), selective checkpointing, 1.00");
}

}  // namespace

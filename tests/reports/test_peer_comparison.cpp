// seqpar-train beside bench_torch_step in `seqpar report`: runs pair by model shape, plan (checkpointing
// included), sequence length and GPU, with ratios seqpar / PyTorch; runs without a peer stay as rows.
#include <gtest/gtest.h>

#include <algorithm>

#include "seqpar/core/error.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/reports/peer_comparison.hpp"
#include "seqpar/reports/report.hpp"
#include "seqpar/reports/report_data.hpp"

using namespace seqpar::reports;
using nlohmann::json;

namespace {

// The fixtures' GPU is made up, so `seqpar report` needs the system to predict their steps on.
const std::string kSystem = "dgx-h100";

std::string fixture(const std::string& name) {
  return std::string(SEQPAR_SOURCE_DIR) + "/tests/reports/fixtures/peer/" + name;
}
InputDocument load(const std::string& name) { return {name, load_json_file(fixture(name))}; }

std::vector<InputDocument> all_fixtures() {
  return {load("seqpar_train_16k.json"), load("seqpar_train_16k_full.json"), load("torch_step_16k.json"),
          load("torch_step_32k.json")};
}

const Section* section_titled(const Document& d, const std::string& title) {
  for (const auto& s : d.sections)
    if (s.title == title) return &s;
  return nullptr;
}

}  // namespace

TEST(PeerComparison, PairsTheSameCaseWithRatiosAndKeepsUnmatchedRuns) {
  const json rows = gather_report_data(all_fixtures(), kSystem)["peer_comparisons"];
  ASSERT_EQ(rows.size(), 3u);
  // seqpar-train at 16K without checkpointing meets bench_torch_step at 16K (named differently: shapes decide).
  const json& both = rows[0];
  EXPECT_EQ(both["plan_label"], "dp-only sp=1");
  EXPECT_EQ(both["seq_len"], 16384);
  EXPECT_EQ(both["seqpar"]["source"], "S1");  // the report's source ids, in input order
  EXPECT_EQ(both["pytorch"]["source"], "S3");
  EXPECT_DOUBLE_EQ(both["step_time_ratio"].get<double>(), 1.0 / 0.5);
  EXPECT_DOUBLE_EQ(both["tflops_ratio"].get<double>(), 100.0 / 200.0);
  EXPECT_DOUBLE_EQ(both["peak_memory_ratio"].get<double>(), 40.0 / 50.0);
  // Full checkpointing is another plan: no PyTorch peer in the inputs.
  const json& seqpar_only = rows[1];
  EXPECT_EQ(seqpar_only["plan_label"], "dp-only sp=1 ckpt=full");
  EXPECT_TRUE(seqpar_only["pytorch"].is_null());
  EXPECT_TRUE(seqpar_only["step_time_ratio"].is_null());
  EXPECT_TRUE(seqpar_only["peak_memory_ratio"].is_null());
  // The 32K PyTorch run matches no seqpar-train run: a row of its own, after the seqpar rows.
  const json& torch_only = rows[2];
  EXPECT_TRUE(torch_only["seqpar"].is_null());
  EXPECT_EQ(torch_only["seq_len"], 32768);
  EXPECT_TRUE(torch_only["tflops_ratio"].is_null());
}

TEST(PeerComparison, ADifferentShapeOrGpuDoesNotPair) {
  std::vector<InputDocument> in = {load("seqpar_train_16k.json"), load("torch_step_16k.json")};
  ASSERT_EQ(gather_report_data(in, kSystem)["peer_comparisons"].size(), 1u);
  InputDocument other_shape = in[1];
  other_shape.doc["config"]["model"]["ffn_hidden"] = 11008;
  EXPECT_EQ(gather_report_data({in[0], other_shape}, kSystem)["peer_comparisons"].size(), 2u);
  InputDocument other_gpu = in[1];
  other_gpu.doc["environment"]["gpu"]["name"] = "Another GPU";
  EXPECT_EQ(gather_report_data({in[0], other_gpu}, kSystem)["peer_comparisons"].size(), 2u);
  // Checkpointing is part of the plan.
  InputDocument checkpointed = in[1];
  checkpointed.doc["plan"]["checkpoint"] = "full";
  EXPECT_EQ(gather_report_data({in[0], checkpointed}, kSystem)["peer_comparisons"].size(), 2u);
}

TEST(PeerComparison, OnePeerPairsOnce) {
  // Two seqpar-train runs of the same case and one PyTorch run: the first pairs, the second stays alone.
  const json rows =
      gather_report_data({load("seqpar_train_16k.json"), load("seqpar_train_16k.json"), load("torch_step_16k.json")}, kSystem)
          ["peer_comparisons"];
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_FALSE(rows[0]["pytorch"].is_null());
  EXPECT_TRUE(rows[1]["pytorch"].is_null());
}

TEST(PeerComparison, MissingPeakMemoryGivesNoRatio) {
  InputDocument torch = load("torch_step_16k.json");
  torch.doc["peak_memory_bytes"] = nullptr;  // as bench_torch_step writes it for a CPU run
  torch.doc["results"][0]["peak_memory_bytes"] = nullptr;
  const json rows = gather_report_data({load("seqpar_train_16k.json"), torch}, kSystem)["peer_comparisons"];
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0]["peak_memory_ratio"].is_null());
  EXPECT_TRUE(rows[0]["step_time_ratio"].is_number());
}

TEST(PeerComparison, MalformedInputNamesFileAndField) {
  InputDocument no_plan = load("torch_step_32k.json");
  no_plan.doc.erase("plan");
  try {
    gather_report_data({no_plan}, kSystem);
    FAIL() << "a training step without a plan was accepted";
  } catch (const seqpar::Error& e) {
    EXPECT_NE(std::string(e.what()).find("torch_step_32k.json: results[0]: a training-step measurement needs a 'plan'"),
              std::string::npos)
        << e.what();
  }
  InputDocument bad_model = load("seqpar_train_16k.json");
  bad_model.doc["config"]["model"]["hidden"] = "wide";
  try {
    gather_report_data({bad_model}, kSystem);
    FAIL() << "a non-numeric model size was accepted";
  } catch (const seqpar::Error& e) {
    EXPECT_NE(std::string(e.what()).find("seqpar_train_16k.json: results[0]: model"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("hidden"), std::string::npos) << e.what();
  }
}

TEST(PeerComparison, TheReportSetsThemSideBySide) {
  const json data = gather_report_data(all_fixtures(), kSystem);
  const Document doc = build_document(data, plan_figures(data), {}, "t");
  const Section* s = section_titled(doc, "seqpar-train against PyTorch");
  ASSERT_NE(s, nullptr);
  const Table* t = nullptr;
  for (const auto& b : s->blocks)
    if (b.kind == Block::Kind::table) t = &b.table;
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->rows.size(), 3u);
  auto col = [&](const std::string& name) {
    return static_cast<std::size_t>(std::find(t->header.begin(), t->header.end(), name) - t->header.begin());
  };
  ASSERT_LT(col("step ratio"), t->header.size());
  EXPECT_EQ(t->rows[0][col("step ratio")], "2.00");
  EXPECT_EQ(t->rows[0][col("memory ratio")], "0.80");
  EXPECT_EQ(t->rows[0][col("seqpar peak")], "40.0 GiB");
  EXPECT_EQ(t->rows[1][col("PyTorch step")], "-");
  EXPECT_EQ(t->rows[2][col("seqpar step")], "-");
  EXPECT_EQ(t->rows[2][col("PyTorch source")], "S4");
  const std::string md = render_markdown(doc);
  EXPECT_NE(md.find("## seqpar-train against PyTorch"), std::string::npos);
  EXPECT_NE(md.find("2 run(s) above have no measurement of the other program"), std::string::npos);
}

TEST(PeerComparison, NoTrainingStepsSaysSo) {
  const std::string attention = std::string(SEQPAR_SOURCE_DIR) + "/tests/reports/fixtures/attention.json";
  const json data = gather_report_data({{"attention.json", load_json_file(attention)}}, kSystem);
  EXPECT_TRUE(data["peer_comparisons"].empty());
  const Document doc = build_document(data, plan_figures(data), {}, "t");
  const Section* s = section_titled(doc, "seqpar-train against PyTorch");
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->blocks.size(), 1u);
  EXPECT_NE(s->blocks[0].text.find("no side-by-side"), std::string::npos);
}

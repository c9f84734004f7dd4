// The report's packed-document section (document_comparison.hpp): the workload as the input states
// it, the ranking under it beside one causal sequence's (where it turns over, the answer says so),
// the per-rank work figure a line per balancer, and malformed workload fields named.
#include <gtest/gtest.h>

#include <random>

#include "seqpar/core/error.hpp"
#include "seqpar/reports/document_comparison.hpp"
#include "seqpar/reports/report.hpp"
#include "seqpar/reports/report_data.hpp"

using namespace seqpar::reports;
using nlohmann::json;

namespace {

// One point of a `seqpar sweep --documents` document, as cli/cmd_sweep.cpp writes it.
json point(const std::string& method, int sp, int u, int r, const std::string& balancer, double rate, double one_rate,
           double imbalance, json rank_work, bool fits = true) {
  json plan = {{"method", method}, {"gpus", 8}, {"seq_len", 131072}, {"sp", sp}, {"tp", 1},
               {"ulysses_degree", u}, {"ring_degree", r}, {"zero", 1}, {"checkpoint", "none"}};
  return {{"system", {{"name", "dgx-h100"}, {"gpu", "h100-sxm"}}},
          {"model", {{"name", "llama3-8b"}}},
          {"plan", plan},
          {"valid", true},
          {"fits", fits},
          {"balancer", balancer},
          {"step_time_s", 131072.0 / 8 / rate},
          {"tokens_per_s_per_gpu", rate},
          {"documents",
           {{"balancer", balancer},
            {"imbalance", {{"mean", imbalance}, {"p95", imbalance + 0.1}}},
            {"work_ratio", 0.3},
            {"token_factor", 1.0},
            {"rank_work", rank_work},
            {"one_sequence", {{"step_time_s", 131072.0 / 8 / one_rate}, {"tokens_per_s_per_gpu", one_rate}, {"fits", true}}}}}};
}

json workload(const std::string& spec) {
  return {{"seq_len", 131072}, {"documents", spec}, {"packing", "fill"}, {"seed", 1}, {"batches", 16},
          {"drawn", {{"count", 222}, {"mean", 9531.0}, {"std", 23879.0}, {"p50", 3250}, {"p95", 37015}, {"max", 293699}}},
          {"pieces_per_sequence", 14.8},
          {"work_ratio", {{"mean", 0.3027}, {"min", 0.0731}, {"max", 1.0}}}};
}

json sweep(json results, const std::string& spec = "lognormal:8:1.5") {
  return {{"kind", "prediction"}, {"program", "seqpar sweep"}, {"results", std::move(results)},
          {"workloads", json::array({workload(spec)})}};
}

}  // namespace

TEST(ReportDocuments, TheRankingUnderTheWorkloadBesideOneSequencesTurnsOver) {
  // Fresh rates each run: Ulysses fastest under the workload, the zigzag ring fastest on one sequence.
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> u(1000, 2000);
  const double ring_one = u(rng), uly_one = ring_one * 0.8, uly = u(rng) + 2000, zig = uly * 0.7, per = uly * 0.9;
  const json doc = sweep({point("ulysses", 8, 8, 1, "contiguous", uly, uly_one, 1.0, {1.0}),
                          point("ring-zigzag", 8, 1, 8, "zigzag", zig, ring_one, 1.4, {0.8, 0.9, 1.0, 1.0, 1.0, 1.0, 1.1, 1.2}),
                          point("ring-zigzag", 8, 1, 8, "per-document", per, ring_one, 1.01,
                                {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0})});
  const json data = gather_report_data({{"sweep.json", doc}});
  ASSERT_EQ(data["documents"].size(), 1u);
  const json& e = data["documents"][0];
  EXPECT_EQ(e["workload"]["documents"], "lognormal:8:1.5");
  EXPECT_DOUBLE_EQ(e["workload"]["work_ratio_mean"].get<double>(), 0.3027);
  ASSERT_EQ(e["rows"].size(), 3u);
  EXPECT_EQ(e["rows"][0]["structure"], "ulysses sp=8");
  EXPECT_EQ(e["rows"][0]["balancer"], "heads");
  EXPECT_EQ(e["rows"][0]["rank"], 1);
  EXPECT_EQ(e["rows"][0]["one_sequence_rank"], 3);
  EXPECT_EQ(e["rows"][1]["balancer"], "per-document");
  EXPECT_EQ(e["rows"][1]["one_sequence_rank"], 1);  // the same plan on one sequence: tied with zigzag
  EXPECT_EQ(e["rows"][2]["rank"], 3);
  EXPECT_EQ(e["rows"][2]["one_sequence_rank"], 1);
  const std::string answer = e["answer"];
  EXPECT_NE(answer.find("the ranking turns over: under the workload ulysses sp=8 (heads) is fastest (#3 on one causal "
                        "sequence)"), std::string::npos) << answer;
  // The two points of one plan keep two labels in the plan lists.
  int labelled = 0;
  for (const json& p : data["points"]) labelled += p["plan_label"].get<std::string>().find("balancer=per-document") != std::string::npos;
  EXPECT_EQ(labelled, 1);

  // The figure: the ring structure, a line per balancer over its 8 ranks, the slowest in each label.
  const json figs = plan_figures(data);
  const auto f = std::find_if(figs.begin(), figs.end(), [](const json& x) { return x["section"] == "documents"; });
  ASSERT_NE(f, figs.end());
  ASSERT_EQ((*f)["panels"].size(), 1u) << "the fastest ring structure under the workload and on one sequence: one";
  const json& series = (*f)["panels"][0]["series"];
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0]["label"], "per-document (slowest 1.01x)");
  EXPECT_EQ(series[1]["label"], "zigzag (slowest 1.40x)");
  EXPECT_EQ(series[1]["x"].size(), 8u);
  EXPECT_EQ((*f)["hline"]["y"], 1.0);

  const std::string md = render_markdown(build_document(data, figs, {}, "t"));
  EXPECT_NE(md.find("## Packed documents: the ranking under the workload against one causal sequence"), std::string::npos);
  EXPECT_NE(md.find("Workload --documents lognormal:8:1.5 (packing fill): 222 documents drawn, length mean 9531 tokens, "
                    "std 23879; 14.8 pieces per sequence; attention work under the document mask 0.303"),
            std::string::npos) << md;
  EXPECT_NE(md.find("| 1 | ulysses sp=8 (heads) |"), std::string::npos);
}

TEST(ReportDocuments, OneDocumentASequenceRanksAsOneSequenceDoes) {
  // Every document fills the sequence: each plan's rate is its one-sequence rate, the ranks agree.
  const json doc = sweep({point("ulysses", 8, 8, 1, "contiguous", 1500, 1500, 1.0, {1.0}),
                          point("ring-zigzag", 8, 1, 8, "zigzag", 1400, 1400, 1.0, json::array())},
                         "fixed:131072");
  const json e = gather_report_data({{"sweep.json", doc}})["documents"][0];
  for (const json& r : e["rows"]) EXPECT_EQ(r["rank"], r["one_sequence_rank"]);
  EXPECT_NE(e["answer"].get<std::string>().find("ulysses sp=8 (heads) is fastest both under the workload and on one "
                                                "causal sequence"), std::string::npos) << e["answer"];
}

TEST(ReportDocuments, PlansThatDoNotFitAreNotRankedAndAWorkloadWithoutFieldsIsNamed) {
  const json doc = sweep({point("ulysses", 8, 8, 1, "contiguous", 3000, 1500, 1.0, {1.0}, false),
                          point("ring-zigzag", 8, 1, 8, "zigzag", 1400, 1400, 1.2, {0.9, 1.1})});
  const json e = gather_report_data({{"sweep.json", doc}})["documents"][0];
  EXPECT_EQ(e["rows"][0]["structure"], "ring-zigzag sp=8");
  EXPECT_EQ(e["rows"][0]["rank"], 1);
  EXPECT_EQ(e["rows"][1]["rank"], 0) << "a plan that does not fit has no rank";
  json bad = doc;
  bad["workloads"][0].erase("drawn");
  try {
    (void)gather_report_data({{"bad.json", bad}});
    FAIL() << "no error";
  } catch (const seqpar::Error& err) {
    EXPECT_NE(std::string(err.what()).find("bad.json: workloads[0]"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("drawn"), std::string::npos) << err.what();
  }
  // A document without a workload has no entry, and the section says so.
  const json plain = gather_report_data({{"p.json", json{{"kind", "prediction"}, {"results", json::array()}}}});
  EXPECT_TRUE(plain["documents"].empty());
  const std::string md = render_markdown(build_document(plain, json::array(), {}, "t"));
  EXPECT_NE(md.find("No input was run under a packed-document workload"), std::string::npos);
}

TEST(ReportDocuments, AdviseUnderAWorkloadIsRankedBesideThePlainAdviseGivenWithIt) {
  auto ranked = [](std::vector<json> points, bool documents) {
    json doc = {{"kind", "prediction"}, {"program", "seqpar advise"}, {"system", {{"name", "dgx-h100"}}},
                {"model", {{"name", "llama3-8b"}}}, {"gpus", 8}, {"seq_len", 131072}, {"ranked", json::array()}};
    for (json& p : points) {
      p.erase("documents");
      if (!documents) p.erase("balancer");
      doc["ranked"].push_back(p);
    }
    if (documents) doc["workload"] = workload("lognormal:8:1.5");
    return doc;
  };
  const json with = ranked({point("ulysses", 8, 8, 1, "contiguous", 3000, 0, 1, {}),
                            point("ring-zigzag", 8, 1, 8, "per-document", 2500, 0, 1, {})},
                           true);
  const json without = ranked({point("ring-zigzag", 8, 1, 8, "zigzag", 1800, 0, 1, {}),
                               point("ulysses", 8, 8, 1, "contiguous", 1700, 0, 1, {})},
                              false);
  // Alone: the workload's ranking, and the answer says what to give for the other.
  const json alone = gather_report_data({{"advise-docs.json", with}})["documents"];
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_NE(alone[0]["answer"].get<std::string>().find("give the same advise without --documents"), std::string::npos);
  // With the plain advise: each structure's one-sequence rate, and the turn-over.
  const json both = gather_report_data({{"advise-docs.json", with}, {"advise.json", without}})["documents"];
  ASSERT_EQ(both.size(), 1u);
  const json& rows = both[0]["rows"];
  EXPECT_EQ(rows[0]["structure"], "ulysses sp=8");
  EXPECT_EQ(rows[0]["one_sequence_tokens_per_s_per_gpu"], 1700.0);
  EXPECT_EQ(rows[0]["one_sequence_rank"], 2);
  EXPECT_EQ(rows[1]["one_sequence_rank"], 1);
  EXPECT_TRUE(rows[1]["imbalance_mean"].is_null());
  EXPECT_NE(both[0]["answer"].get<std::string>().find("the ranking turns over"), std::string::npos) << both[0]["answer"];
}

// The report's step-time table names where each predicted plan's groups sit (issue 27, part 4)
// and labels a plan that accumulates gradients (part 3), from the simulator's own documents.
#include <gtest/gtest.h>

#include "seqpar/reports/calibrate.hpp"
#include "seqpar/reports/report.hpp"
#include "seqpar/reports/report_data.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/result_json.hpp"
#include "seqpar/sim/simulate.hpp"

using namespace seqpar::reports;
using nlohmann::json;

TEST(ReportPlacement, TheStepTableShowsEachPlansPlacementAndAccumulation) {
  const seqpar::sim::Model m = seqpar::sim::load_model("llama3-8b");
  const seqpar::sim::System s = seqpar::sim::load_system("a800-nvlink");
  json ranked = json::array();
  for (auto [u, r] : {std::pair{8, 2}, {1, 16}}) {
    seqpar::Plan p;
    p.method = u > 1 ? seqpar::Method::hybrid : seqpar::Method::ring_zigzag;
    p.gpus = p.sp = 16;
    p.seq_len = 1 << 16;
    p.ulysses_degree = u;
    p.ring_degree = r;
    p.grad_accum_steps = 4;
    ranked.push_back(seqpar::sim::to_json(m, s, seqpar::sim::simulate(m, s, p)));
  }
  const json doc = {{"schema_version", 1}, {"kind", "prediction"}, {"program", "seqpar advise"},
                    {"mode", "modelled"}, {"ranked", ranked}};
  const json data = gather_report_data({InputDocument{"advise.json", doc}});
  ASSERT_EQ(data["points"].size(), 2u);
  EXPECT_EQ(data["points"][0]["placement"], "U8 in a node; R2 over 2 nodes (1/node), 2 crossing flows per NIC");
  EXPECT_EQ(data["points"][1]["placement"], "R16 over 2 nodes (8/node), 1 crossing flow per NIC");
  EXPECT_NE(data["points"][0]["plan_label"].get<std::string>().find("ga=4"), std::string::npos);
  const std::string md = render_markdown(build_document(data, json::array(), {}, "t"));
  EXPECT_NE(md.find("| placement |"), std::string::npos) << md;
  EXPECT_NE(md.find("R16 over 2 nodes (8/node), 1 crossing flow per NIC"), std::string::npos);
}

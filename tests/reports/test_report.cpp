#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "seqpar/core/error.hpp"
#include "seqpar/reports/base64.hpp"
#include "seqpar/reports/figure_kinds.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/reports/report.hpp"
#include "seqpar/reports/report_data.hpp"

using namespace seqpar::reports;
using nlohmann::json;

namespace {

std::string fixture(const std::string& name) { return std::string(SEQPAR_SOURCE_DIR) + "/tests/reports/fixtures/" + name; }
InputDocument load(const std::string& name) { return {name, load_json_file(fixture(name))}; }

}  // namespace

TEST(ReportData, NormalisesSweepMeasurementsAndProvenance) {
  json d = gather_report_data({load("sweep.json"), load("train.json"), load("attention.json")});
  ASSERT_EQ(d["sources"].size(), 3u);
  EXPECT_EQ(d["sources"][0]["mode"], "modelled");
  EXPECT_EQ(d["sources"][1]["mode"], "real-ranks");
  EXPECT_EQ(d["sources"][1]["versions"]["nccl_version"], "2.21.5");
  EXPECT_NE(d["sources"][1]["command"].get<std::string>().find("seqpar-train"), std::string::npos);
  EXPECT_EQ(d["points"].size(), 104u + 2u);
  EXPECT_EQ(d["best"].size(), 16u);
  EXPECT_EQ(d["benchmarks"].size(), 8u);
  // Both training-step plans match a predicted plan on dgx-h100 (the only H100 system).
  ASSERT_EQ(d["comparisons"].size(), 2u);
  const json& c = d["comparisons"][0];
  EXPECT_EQ(c["system"], "dgx-h100");
  EXPECT_NEAR(c["error"].get<double>(), 1 / 1.08 - 1, 1e-9);
  EXPECT_EQ(c["measurement_mode"], "real-ranks");
}

TEST(ReportData, ReadsTheSimulatorsOwnOutput) {
  json d = gather_report_data({load("seqpar-sweep.json"), load("seqpar-simulate.json"), load("seqpar-advise.json")});
  json sweep = load_json_file(fixture("seqpar-sweep.json"));
  json advise = load_json_file(fixture("seqpar-advise.json"));
  EXPECT_EQ(d["points"].size(), sweep["results"].size() + 1 + advise["ranked"].size());
  EXPECT_EQ(d["best"].size(), sweep["best"].size());
  for (const auto& p : d["points"]) {
    EXPECT_EQ(p["mode"], "modelled");
    EXPECT_FALSE(p["plan_label"].get<std::string>().empty());
    if (p["valid"].get<bool>()) {
      EXPECT_GT(p["step_time_s"].get<double>(), 0);
      EXPECT_FALSE(p["time"].empty());
      EXPECT_FALSE(p["memory"].empty());
    }
  }
  std::set<std::string> sections;
  for (const auto& f : plan_figures(d)) sections.insert(f["section"].get<std::string>());
  for (const char* s : {"relative", "memory_capacity", "throughput", "step_time", "memory", "systems"})
    EXPECT_TRUE(sections.count(s)) << s;
}

TEST(ReportData, PlanLabels) {
  EXPECT_EQ(plan_label({{"method", "hybrid"}, {"sp", 8}, {"ulysses_degree", 4}, {"ring_degree", 2}}), "hybrid U4xR2");
  EXPECT_EQ(plan_label({{"method", "ulysses"}, {"sp", 8}, {"checkpoint", "full"}, {"tiled_mlp", true}}),
            "ulysses sp=8 ckpt=full +tiled-mlp");
  // The structure comes from core's describe_structure: one spelling of SP = 1 everywhere.
  EXPECT_EQ(plan_label({{"method", "ring"}, {"sp", 1}, {"ring_degree", 1}}), "dp-only sp=1");
  EXPECT_EQ(structure_label({{"method", "ring-zigzag"}, {"sp", 4}, {"checkpoint", "full"}}), "ring-zigzag sp=4");
}

TEST(ReportData, BadInputNamesFileAndField) {
  InputDocument sweep = load("sweep.json");
  sweep.doc["results"][5]["plan"].erase("seq_len");
  try {
    gather_report_data({sweep});
    FAIL();
  } catch (const seqpar::Error& e) {
    EXPECT_NE(std::string(e.what()).find("sweep.json: results[5]: plan: missing field 'seq_len'"), std::string::npos) << e.what();
  }
  InputDocument bad = load("train.json");
  bad.doc["kind"] = "forecast";
  EXPECT_THROW(gather_report_data({bad}), seqpar::Error);
  InputDocument nostep = load("sweep.json");
  nostep.doc["results"][0]["step_time_s"] = "fast";
  EXPECT_THROW(gather_report_data({nostep}), seqpar::Error);
  // Claims that contradict their numbers (issue 35, case 6): a negative size, a plan said to fit
  // whose peak is above the capacity.
  auto message = [](const InputDocument& d) {
    try {
      gather_report_data({d});
    } catch (const seqpar::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  InputDocument negative = load("sweep.json");
  negative.doc["results"][0]["peak_memory_bytes"] = -5;
  EXPECT_NE(message(negative).find("results[0]: field 'peak_memory_bytes' is -5: a time, rate or size is never negative"),
            std::string::npos)
      << message(negative);
  InputDocument over = load("sweep.json");
  std::size_t k = 0;
  while (k < over.doc["results"].size() && !over.doc["results"][k].value("fits", false)) ++k;
  ASSERT_LT(k, over.doc["results"].size());
  over.doc["results"][k]["peak_memory_bytes"] = 139.9 * 1024 * 1024 * 1024;
  over.doc["results"][k]["memory_capacity_bytes"] = 80.0 * 1024 * 1024 * 1024;
  EXPECT_NE(message(over).find("field 'fits' is true but peak_memory_bytes 139.9 GiB is above memory_capacity_bytes "
                               "80.0 GiB"),
            std::string::npos)
      << message(over);
  // More claims that no run can make (issue 35, tried again): a method no program runs, an MFU
  // above the GPU's peak, a valid plan that takes no time, a schema newer than this reader.
  auto refused = [&](const char* field_path, const json& value, const std::string& needle) {
    InputDocument d = load("sweep.json");
    d.doc[json::json_pointer(field_path)] = value;
    EXPECT_NE(message(d).find(needle), std::string::npos) << field_path << ": " << message(d);
  };
  std::size_t v = 0;
  {
    const InputDocument s = load("sweep.json");
    while (v < s.doc["results"].size() && !s.doc["results"][v].value("valid", false)) ++v;
    ASSERT_LT(v, s.doc["results"].size());
  }
  const std::string pv = "/results/" + std::to_string(v);
  refused("/results/0/plan/method", "warp", "results[0]: plan: method: unknown method 'warp'");
  refused("/results/0/mfu", 1e308, "results[0]: field 'mfu' is 1e+308: a model FLOPs utilisation is a share");
  refused("/results/0/mfu", 1.5, "field 'mfu' is 1.5");
  refused((pv + "/step_time_s").c_str(), 0, "results[" + std::to_string(v) + "]: a valid point needs a positive number in 'step_time_s' (got 0)");
  refused("/schema_version", 99, "schema_version 99 is newer than this seqpar reads");
  refused("/schema_version", "1", "field 'schema_version' must be a whole number from 1, got \"1\"");
  refused("/schema_version", 0, "field 'schema_version' must be a whole number from 1, got 0");
  // A timed result's time_s is the median of its samples_s (attention.json's first: 5 samples, the
  // middle one 1.3839e-05 s); a time that is not contradicts them, named.
  InputDocument slow = load("attention.json");
  slow.doc["results"][0]["time_s"] = 2e-5;
  EXPECT_NE(message(slow).find("attention.json: results[0]: field 'time_s' is 2e-05 s but the median of its 5 samples_s "
                               "is 1.38391e-05 s"),
            std::string::npos)
      << message(slow);
  InputDocument current = load("sweep.json");  // this seqpar's own version reads
  current.doc["schema_version"] = 1;
  EXPECT_EQ(message(current), "no error");
}

// Every spec names a kind of the table in figure_kinds.hpp and that kind's drawer in reports/plots/;
// scripts/tests/test_plots.py checks the table against the drawers.
TEST(ReportFigures, EverySpecNamesAKnownKindAndItsDrawer) {
  json d = gather_report_data({load("sweep.json"), load("train.json")});
  std::set<std::string> kinds_seen;
  for (const auto& f : plan_figures(d)) {
    const std::string type = f["type"].get<std::string>();
    auto kind = std::find_if(kFigureKinds.begin(), kFigureKinds.end(), [&](const FigureKind& k) { return k.type == type; });
    ASSERT_NE(kind, kFigureKinds.end()) << type;
    EXPECT_EQ(f["drawer"], "reports/plots/" + std::string(kind->drawer)) << type;
    kinds_seen.insert(type);
  }
  EXPECT_EQ(kinds_seen.size(), kFigureKinds.size());  // the sweep and a matching measurement use every kind
}

// A report's own report-data.json, read back beside the results it was made from (a folder of
// results read whole), is named and left out: its points would count twice.
TEST(ReportData, AReportsOwnDataIsNamedAndNotReadAgain) {
  const json once = gather_report_data({load("sweep.json")});
  json own = once;
  own["kind"] = "report-data";  // as report_build.cpp writes it
  const json twice = gather_report_data({load("sweep.json"), InputDocument{"out/report-data.json", own}});
  EXPECT_EQ(twice["points"].size(), once["points"].size());
  ASSERT_EQ(twice["skipped"].size(), 1u);
  EXPECT_EQ(twice["skipped"][0]["file"], "out/report-data.json");
  EXPECT_NE(twice["skipped"][0]["why"].get<std::string>().find("seqpar report's own data"), std::string::npos);
}

TEST(ReportFigures, SweepAloneGivesTheRequiredSections) {
  json d = gather_report_data({load("sweep.json")});
  json figs = plan_figures(d);
  std::set<std::string> sections;
  for (const auto& f : figs) sections.insert(f["section"].get<std::string>());
  for (const char* s : {"relative", "memory_capacity", "throughput", "step_time", "memory", "systems"})
    EXPECT_TRUE(sections.count(s)) << s;
  EXPECT_FALSE(sections.count("validation"));
  for (const auto& f : figs) {
    EXPECT_NE(f["caption"].get<std::string>().find("S1"), std::string::npos);  // every plot names its source
    if (f["section"] == "memory" || f["section"] == "memory_capacity" || f["section"] == "relative") {
      EXPECT_TRUE(f.contains("hline")) << f["file"];
    }
    if (f["section"] == "relative") {
      EXPECT_EQ(f["hline"]["y"], 1.0);
      EXPECT_EQ(f["xscale"], "log2");
    }
  }
  Document doc = build_document(d, figs, {}, "t");
  std::string md = render_markdown(doc);
  EXPECT_EQ(md.find("## Answer: the best plan at each length and GPU count"), md.find("## "));  // the first section
  EXPECT_NE(md.find("- 128K on 16 GPUs: "), std::string::npos);
  EXPECT_NE(md.find("## Best plan over sequence length and GPU count"), std::string::npos);
  EXPECT_NE(md.find("none fits"), std::string::npos);
  EXPECT_NE(md.find("No measurement in the inputs matches"), std::string::npos);  // empty section: one-line note
  EXPECT_NE(md.find("seqpar sweep --system"), std::string::npos);                // the command behind the numbers
}

TEST(ReportRender, HtmlIsSelfContained) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "seqpar_test_report_render";
  fs::create_directories(dir);
  std::string png = std::string("\x89PNG\r\n\x1a\n", 8) + "payload";
  { std::ofstream(dir / "a.png", std::ios::binary) << png; }
  Document doc{"T <1>", {}};
  Section s;
  s.title = "S";
  s.paragraph("a & b");
  s.add_table({{"h|1"}, {{"x"}}});
  s.image("a.png", "cap");
  s.image("missing.png", "cap2");
  doc.sections.push_back(s);
  std::string html = render_html(doc, dir.string());
  EXPECT_NE(html.find("data:image/png;base64," + base64_encode(png)), std::string::npos);
  EXPECT_NE(html.find("T &lt;1&gt;"), std::string::npos);
  EXPECT_NE(html.find("missing.png is missing"), std::string::npos);
  EXPECT_EQ(html.find("http"), std::string::npos);
  EXPECT_NE(render_markdown(doc).find("| h\\|1 |"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Base64, Rfc4648Vectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
}

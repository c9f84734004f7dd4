// Measured training steps beside the simulator in `seqpar report` (reports/step_comparison): the
// H100 seqpar-train steps (SP = 1 and the single-rank proxy of Ulysses 8) and synthetic ones are
// predicted by simulate() on the system, per rank, with the error; a step without a peak shows
// time only; the system comes from --system or the measured GPU, else the flag is named.
#ifdef SEQPAR_TEST_WITH_SIM
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/core/plan.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/reports/report.hpp"
#include "seqpar/reports/report_data.hpp"
#include "seqpar/sim/attention_kernels.hpp"
#include "seqpar/sim/comm_cost.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/simulate.hpp"

using namespace seqpar::reports;
using nlohmann::json;

namespace {

InputDocument h100(const std::string& name) {
  const std::string path = std::string(SEQPAR_SOURCE_DIR) + "/tests/reports/fixtures/h100-2026-11/" + name;
  return {name, load_json_file(path)};
}

// Llama-3-8B shapes with the layers and vocabulary the steps ran with.
seqpar::sim::Model model(int layers, int vocab) {
  json shape = seqpar::sim::preset_document("model", "llama3-8b");
  shape["layers"] = layers;
  shape["vocab"] = vocab;
  return seqpar::sim::model_from_json(shape, "test model");
}

// The simulator asked directly, as the test's own reference: the step as it ran (step_system.hpp):
// the framework and its attention kernel on `system`, and for a single-rank proxy (seqpar-train's
// --comm loopback) the loopback copies in place of links.
seqpar::sim::Result direct(const seqpar::sim::Model& m, const std::string& system, const json& plan,
                           const std::string& framework = std::string(seqpar::sim::kDefaultFramework),
                           bool loopback = false) {
  seqpar::sim::System sys = seqpar::sim::load_system(system, "", seqpar::sim::load_framework(framework));
  if (loopback) sys = seqpar::sim::loopback_system(sys);
  seqpar::sim::Result r = seqpar::sim::simulate(m, sys, seqpar::normalized(seqpar::plan_from_json(plan), sys.gpus_per_node));
  EXPECT_TRUE(r.valid);
  return r;
}

json plan(const std::string& method, int gpus, int sp, std::int64_t seq_len) {
  return {{"method", method}, {"gpus", gpus}, {"sp", sp}, {"seq_len", seq_len}};
}

std::string message_of(const std::vector<InputDocument>& in, const std::string& system = "") {
  try {
    gather_report_data(in, system);
  } catch (const seqpar::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

}  // namespace

TEST(StepComparison, H100StepsBesideTheSimulatorPerRank) {
  const std::vector<InputDocument> in = {h100("train_sp1.json"), h100("train_proxy.json")};
  const json data = gather_report_data(in);  // the system from the measured GPU (an H100)
  const json& sc = data["step_comparisons"];
  const std::string system = *seqpar::sim::system_for_device_name("NVIDIA H100 80GB HBM3");
  EXPECT_EQ(sc["system"], system);
  ASSERT_EQ(sc["rows"].size(), 2u);
  double max_time = 0, max_memory = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const json& doc = in[i].doc;
    const json& row = sc["rows"][i];
    // The proxy's document records the plan it stands for (U8 on 8 GPUs): predicted as that plan's
    // rank, with seqpar-train's framework (its program) and the loopback copies it ran on.
    const seqpar::sim::Result r = direct(model(4, 32000), system, doc["plan"], "seqpar-train", true);
    const double measured_t = doc["step_time_s"].get<double>(), measured_m = doc["peak_memory_bytes"].get<double>();
    EXPECT_EQ(row["file"], in[i].file);
    EXPECT_EQ(row["source"], i == 0 ? "S1" : "S2");
    EXPECT_EQ(row["mode"], "single-rank-proxy");
    EXPECT_EQ(row["seq_len"], doc["plan"]["seq_len"]);
    EXPECT_DOUBLE_EQ(row["predicted_step_time_s"].get<double>(), r.step_time_s);
    EXPECT_DOUBLE_EQ(row["measured_step_time_s"].get<double>(), measured_t);
    EXPECT_NEAR(row["time_error"].get<double>(), r.step_time_s / measured_t - 1, 1e-12);
    EXPECT_DOUBLE_EQ(row["predicted_peak_memory_bytes"].get<double>(), r.memory.allocated_bytes());
    EXPECT_NEAR(row["memory_error"].get<double>(), r.memory.allocated_bytes() / measured_m - 1, 1e-12);
    max_time = std::max(max_time, std::fabs(r.step_time_s / measured_t - 1));
    max_memory = std::max(max_memory, std::fabs(r.memory.allocated_bytes() / measured_m - 1));
  }
  EXPECT_EQ(sc["rows"][1]["gpus"], 8);
  // What ran them is said once: seqpar-train (its program), its kernel on the H100 (these older
  // documents do not record their engine), on the GPU's preset.
  ASSERT_EQ(sc["runtimes"].size(), 1u);
  EXPECT_EQ(sc["runtimes"][0]["framework"], "seqpar-train");
  EXPECT_EQ(sc["runtimes"][0]["framework_from"], "program seqpar-train");
  EXPECT_EQ(sc["runtimes"][0]["attention_kernel"], "cudnn");
  EXPECT_EQ(sc["runtimes"][0]["steps"], 2);
  EXPECT_NE(sc["rows"][1]["plan_label"].get<std::string>().find("ulysses sp=8"), std::string::npos) << sc["rows"][1];
  EXPECT_NEAR(sc["max_abs_time_error"].get<double>(), max_time, 1e-12);
  EXPECT_NEAR(sc["max_abs_memory_error"].get<double>(), max_memory, 1e-12);
  // The steps are no longer listed as plain benchmark rows.
  for (const auto& b : data["benchmarks"]) EXPECT_EQ(b["name"].get<std::string>().find("train_step/"), std::string::npos);
}

TEST(StepComparison, TheReportShowsTheTableAndTheLargestErrors) {
  const json data = gather_report_data({h100("train_sp1.json"), h100("train_proxy.json")}, "dgx-h100");
  const Document doc = build_document(data, plan_figures(data), {}, "t");
  const std::string md = render_markdown(doc);
  EXPECT_NE(md.find("## Training steps: predicted against measured"), std::string::npos);
  EXPECT_NE(md.find("train_step/llama3-8b/L4/ulysses/sp8/seq131072"), std::string::npos);
  const json& sc = data["step_comparisons"];
  EXPECT_NE(md.find(fmt::format("Largest |error|: step time {:.1f}%, peak memory {:.1f}%",
                                sc["max_abs_time_error"].get<double>() * 100,
                                sc["max_abs_memory_error"].get<double>() * 100)),
            std::string::npos) << md;
  EXPECT_NE(md.find("single-rank proxy"), std::string::npos);
}

TEST(StepComparison, SyntheticStepsOnAGivenSystemAndTimeOnlyWithoutPeak) {
  // The minimal step format: a "steps" array sharing its model; the second step records no peak.
  const json p1 = plan("ulysses", 8, 8, 65536), p2 = plan("ring-zigzag", 8, 8, 65536);
  const json doc = {{"model", "llama3-8b"}, {"layers", 2}, {"vocab", 32000}, {"gpu_name", "made-up GPU"},
                    {"steps", json::array({json{{"plan", p1}, {"step_time_s", 2.0}, {"peak_memory_bytes", 3e10}},
                                           json{{"plan", p2}, {"step_time_s", 4.0}, {"name", "zigzag"}}})}};
  const json sc = gather_report_data({{"steps.json", doc}}, "dgx-h100")["step_comparisons"];
  ASSERT_EQ(sc["rows"].size(), 2u);
  const seqpar::sim::Result r1 = direct(model(2, 32000), "dgx-h100", p1), r2 = direct(model(2, 32000), "dgx-h100", p2);
  EXPECT_NEAR(sc["rows"][0]["time_error"].get<double>(), r1.step_time_s / 2.0 - 1, 1e-12);
  EXPECT_NEAR(sc["rows"][0]["memory_error"].get<double>(), r1.memory.allocated_bytes() / 3e10 - 1, 1e-12);
  EXPECT_EQ(sc["rows"][1]["name"], "zigzag");
  EXPECT_NEAR(sc["rows"][1]["time_error"].get<double>(), r2.step_time_s / 4.0 - 1, 1e-12);
  EXPECT_TRUE(sc["rows"][1]["measured_peak_memory_bytes"].is_null());
  EXPECT_TRUE(sc["rows"][1]["memory_error"].is_null());
  EXPECT_NEAR(sc["max_abs_time_error"].get<double>(),
              std::max(std::fabs(r1.step_time_s / 2.0 - 1), std::fabs(r2.step_time_s / 4.0 - 1)), 1e-12);
  EXPECT_NEAR(sc["max_abs_memory_error"].get<double>(), std::fabs(r1.memory.allocated_bytes() / 3e10 - 1), 1e-12);
  // A system named explicitly wins over the GPU's preset, and a different one changes the prediction.
  const json other = gather_report_data({{"steps.json", doc}}, "dgx-a100-80g")["step_comparisons"];
  EXPECT_EQ(other["system"], "dgx-a100-80g");
  EXPECT_NE(other["rows"][0]["predicted_step_time_s"], sc["rows"][0]["predicted_step_time_s"]);
  // Only steps without a peak: the memory summary is null, and the report says '-'.
  json time_only = doc;
  time_only["steps"] = json::array({doc["steps"][1]});
  const json t = gather_report_data({{"t.json", time_only}}, "dgx-h100");
  EXPECT_TRUE(t["step_comparisons"]["max_abs_memory_error"].is_null());
  const std::string md = render_markdown(build_document(t, plan_figures(t), {}, "t"));
  EXPECT_NE(md.find("only its time is compared"), std::string::npos);
}

TEST(StepComparison, NoStepsNoRows) {
  const std::string attention = std::string(SEQPAR_SOURCE_DIR) + "/tests/reports/fixtures/attention.json";
  const json sc = gather_report_data({{"attention.json", load_json_file(attention)}})["step_comparisons"];
  EXPECT_TRUE(sc["rows"].empty());
  EXPECT_TRUE(sc["system"].is_null());
}

TEST(StepComparison, BadInputNamesTheFileAndField) {
  json doc = h100("train_sp1.json").doc;
  doc["step_time_s"] = -1;
  std::string m = message_of({{"bad_time.json", doc}});
  EXPECT_NE(m.find("bad_time.json"), std::string::npos) << m;
  EXPECT_NE(m.find("step_time_s"), std::string::npos) << m;
  doc = h100("train_sp1.json").doc;
  doc["peak_memory_bytes"] = "lots";
  m = message_of({{"bad_peak.json", doc}});
  EXPECT_NE(m.find("bad_peak.json"), std::string::npos) << m;
  EXPECT_NE(m.find("peak_memory_bytes"), std::string::npos) << m;
  doc = h100("train_sp1.json").doc;
  doc["plan"].erase("method");
  doc["results"][0].erase("plan");
  m = message_of({{"bad_plan.json", doc}});
  EXPECT_NE(m.find("bad_plan.json"), std::string::npos) << m;
  EXPECT_NE(m.find("method"), std::string::npos) << m;
  // No system and a GPU no preset matches: the flag is named.
  doc = h100("train_sp1.json").doc;
  doc["environment"]["gpu"]["name"] = "Made-up GPU 9000";
  m = message_of({{"unknown_gpu.json", doc}});
  EXPECT_NE(m.find("unknown_gpu.json"), std::string::npos) << m;
  EXPECT_NE(m.find("Made-up GPU 9000"), std::string::npos) << m;
  EXPECT_NE(m.find("--system"), std::string::npos) << m;
  m = message_of({h100("train_sp1.json")}, "no-such-system");
  EXPECT_NE(m.find("--system no-such-system"), std::string::npos) << m;
  // The step's figures are its one result's (1.170034801 s; 40713453584 bytes, the one rank's peak):
  // a copy that differs contradicts it, named.
  doc = h100("train_sp1.json").doc;
  doc["step_time_s"] = 2.0;
  m = message_of({{"two_times.json", doc}});
  EXPECT_NE(m.find("two_times.json: field 'step_time_s' is 2 s but results[0] step_time_s is 1.17003 s"),
            std::string::npos) << m;
  doc = h100("train_sp1.json").doc;
  doc["peak_memory_bytes"] = 1e9;
  m = message_of({{"two_peaks.json", doc}});
  EXPECT_NE(m.find("two_peaks.json: field 'peak_memory_bytes' is 1e+09 but results[0] peak_memory_bytes is "
                   "4.07135e+10"),
            std::string::npos) << m;
  doc = h100("train_sp1.json").doc;
  doc["results"][0]["peak_memory_bytes_per_rank"] = {40713453584.0, 5e10};
  m = message_of({{"ranks.json", doc}});
  EXPECT_NE(m.find("ranks.json: results[0]: field 'peak_memory_bytes' is 4.07135e+10 but the largest of "
                   "peak_memory_bytes_per_rank is 5e+10"),
            std::string::npos) << m;
  // A plan the simulator refuses on the system: the step is named.
  doc = h100("train_sp1.json").doc;
  doc["plan"] = plan("ulysses", 8, 8, 65536);
  doc["plan"]["sp"] = 64;
  doc["plan"]["gpus"] = 64;
  m = message_of({{"huge.json", doc}}, "dgx-h100");
  EXPECT_NE(m.find("huge.json"), std::string::npos) << m;
}

#endif  // SEQPAR_TEST_WITH_SIM

// seqpar-train's framework profile holds its time terms as data fitted once from the committed H100
// steps (sim/presets/frameworks/seqpar-train.json, "time"), and the commands predict those steps as
// they ran with no option but the files (issue 33): this suite refits the terms, holds the profile
// to the fit, checks every held-out step, and runs `seqpar report`'s own comparison on the 22 steps.
#ifdef SEQPAR_TEST_WITH_SIM
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "seqpar/reports/json_input.hpp"
#include "seqpar/reports/report_data.hpp"
#include "seqpar/reports/step_fit.hpp"
#include "seqpar/reports/step_input.hpp"
#include "seqpar/reports/step_system.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/attention_kernels.hpp"
#include "seqpar/sim/presets.hpp"

namespace seqpar::reports {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kH100 = fs::path(SEQPAR_SOURCE_DIR) / "reports/results/h100";

// The 22 committed seqpar-train steps on one H100: the fidelity phase's 15, the training phase's 4
// (repeats of four fidelity configurations) and the three maxlen probes (cold single steps).
std::vector<InputDocument> committed_steps() {
  std::vector<InputDocument> docs;
  for (const char* folder : {"fidelity/steps", "train", "maxlen/bisect"})
    for (const auto& e : fs::directory_iterator(kH100 / folder)) {
      const std::string name = e.path().filename().string();
      if (e.path().extension() != ".json" || (std::string(folder) == "train" && name.rfind("train_", 0) != 0)) continue;
      docs.push_back({e.path().string(), load_json_file(e.path().string())});
    }
  std::sort(docs.begin(), docs.end(), [](const auto& a, const auto& b) { return a.file < b.file; });
  return docs;
}

std::vector<MeasuredStep> steps_of(const std::vector<InputDocument>& docs) {
  std::vector<MeasuredStep> out;
  for (const auto& d : docs)
    for (auto& s : read_step_document(d.doc, d.file, d.file).steps) out.push_back(std::move(s));
  return out;
}

}  // namespace

// The steps name their program and engine: each is seqpar-train with cuDNN, and the report predicts
// all 22 with that profile and kernel on dgx-h100, every step within 5% of its time and 3% of its
// peak, with no option but the system (the "done when").
TEST(SeqparTrainProfile, TheReportPredictsTheCommittedStepsAsTheyRan) {
  const std::vector<InputDocument> docs = committed_steps();
  ASSERT_EQ(docs.size(), 22u);
  const json data = gather_report_data(docs, "dgx-h100");
  const json& sc = data["step_comparisons"];
  ASSERT_EQ(sc["rows"].size(), 22u);
  ASSERT_EQ(sc["runtimes"].size(), 1u) << sc["runtimes"];
  EXPECT_EQ(sc["runtimes"][0]["framework"], "seqpar-train");
  EXPECT_EQ(sc["runtimes"][0]["framework_from"], "program seqpar-train");
  EXPECT_EQ(sc["runtimes"][0]["attention_kernel"], "cudnn");
  EXPECT_EQ(sc["runtimes"][0]["attention_kernel_from"], "the step's: its config.attention_engine");
  for (const auto& row : sc["rows"]) {
    EXPECT_LE(std::fabs(row["time_error"].get<double>()), 0.05) << row["file"] << " " << row["name"];
    EXPECT_LE(std::fabs(row["memory_error"].get<double>()), 0.03) << row["file"] << " " << row["name"];
  }
  EXPECT_LE(sc["max_abs_time_error"].get<double>(), 0.05);
  EXPECT_LE(sc["max_abs_memory_error"].get<double>(), 0.03);
}

// The profile's time terms are the fit of those steps (refitted here from neutral priors), and each
// step predicted by the terms fitted without it stays within 5% of its time.
TEST(SeqparTrainProfile, TimeTermsAreTheFitOfTheCommittedStepsAndHoldOutWithinFivePercent) {
  const sim::Framework profile = sim::load_framework("seqpar-train");
  sim::System base = sim::load_system("dgx-h100", "", profile);
  ASSERT_EQ(base.gpu.attention_kernel, "cudnn");
  base.framework = {};  // neutral priors: the fit must find the profile's values itself
  std::vector<std::string> notes;
  const std::vector<MeasuredStep> steps = distinct_steps(base, steps_of(committed_steps()), notes);
  ASSERT_EQ(steps.size(), 18u);
  const StepFit fit = fit_framework_terms(base, steps);
  for (const sim::FrameworkTermSpec& t : sim::kFrameworkTerms) {
    if (t.target != sim::FrameworkTarget::step_time) continue;
    const double fitted = fit.terms.*t.field, kept = profile.time.*t.field;
    EXPECT_NEAR(kept, fitted, 1e-3 * std::max(1e-3, std::fabs(fitted))) << t.key;
  }
  const json rows = step_rows(base, fit, steps);
  for (const auto& row : rows)
    EXPECT_LE(std::fabs(row["loo_time_error"].get<double>()), 0.05) << row["name"] << " " << row["plan"];
  // Every time term the profile gives says where it comes from.
  for (const sim::FrameworkTermSpec& t : sim::kFrameworkTerms) {
    if (t.target != sim::FrameworkTarget::step_time) continue;
    const auto it = std::find_if(profile.time_sources.begin(), profile.time_sources.end(),
                                 [&](const auto& kv) { return kv.first == t.key; });
    ASSERT_NE(it, profile.time_sources.end()) << t.key;
    EXPECT_FALSE(it->second.empty()) << t.key;
  }
}

// `seqpar maxlen --framework seqpar-train` for the 4-layer ALST step on one H100: the framework
// names its engine, so no --attention-kernel is needed, and the answer lies in the bracket the
// bisected steps measured (524,288 ran; the line through the peaks reaches the device at 561,869).
TEST(SeqparTrainProfile, MaxlenOfTheAlstStepIsInTheMeasuredBracket) {
  const sim::Model m = sim::load_model((kH100 / "maxlen/llama3-8b-4l.json").string());
  const sim::System s = sim::load_system("dgx-h100", "", sim::load_framework("seqpar-train"));
  Plan p;
  p.method = Method::ulysses;
  p.gpus = p.sp = p.ulysses_degree = p.ring_degree = 1;
  p.mem.zero = 0;
  p.mem.checkpoint = Checkpoint::full;
  p.mem.offload_checkpoints = p.mem.tiled_mlp = p.mem.tiled_loss = true;
  const sim::MaxLenSearch found = sim::max_seq_len_search(m, s, p);
  EXPECT_GE(found.max_seq_len, 497'000);
  EXPECT_LE(found.max_seq_len, 562'000);
  EXPECT_EQ(found.limit, sim::LengthLimit::gpu_memory) << found.limit_why;
}

}  // namespace seqpar::reports
#endif

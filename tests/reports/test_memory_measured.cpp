// The simulator's memory model against measured steps on an H100 (and one H200 run), with no calibration: seqpar-train's
// own steps category by category (the committed one-step runs of the maxlen search and the
// fidelity phase's steps, each with the step's own breakdown), the longest length the step fits,
// and the nine Hugging Face Transformers steps on the hf-transformers profile
// (reports/results/h100/, README there).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "seqpar/reports/calibrate.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/reports/step_fit.hpp"
#include "seqpar/reports/step_input.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/attention_kernels.hpp"
#include "seqpar/sim/memory_cost.hpp"
#include "seqpar/sim/presets.hpp"

namespace seqpar::reports {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kResults = fs::path(SEQPAR_SOURCE_DIR) / "reports/results/h100";

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

MeasuredStep read_step(const fs::path& file) {
  const json doc = load_json_file(file.string());
  StepDocument d = read_step_document(doc, file.string(), file.filename().string());
  EXPECT_EQ(d.steps.size(), 1u) << file;
  return d.steps.front();
}

// seqpar-train on the H100 as it ran there: the cuDNN engine (its workspace figures are the H100
// preset's, measured from these steps at SP 1), seqpar-train's framework profile.
sim::System seqpar_train_on_h100() { return sim::load_system("dgx-h100", "cudnn", sim::load_framework("seqpar-train")); }

TEST(MemoryMeasured, SeqparTrainOnH100CategoryByCategory) {
  std::vector<fs::path> files = files_in(kResults / "maxlen/bisect");
  for (const fs::path& f : files_in(kResults / "fidelity/steps")) files.push_back(f);
  ASSERT_EQ(files.size(), 18u);
  const sim::System sys = seqpar_train_on_h100();
  for (const fs::path& file : files) {
    const MeasuredStep s = read_step(file);
    const json measured = load_json_file(file.string())["memory"];
    const Plan p = normalized(s.plan, sys.gpus_per_node);
    const sim::MemoryEstimate e = sim::estimate_memory(s.model, sys, p);
    const sim::MemoryBreakdown& b = e.peak;
    const std::pair<const char*, double> parts[] = {
        {"parameters_bytes", b.parameters},   {"gradients_bytes", b.gradients}, {"optimizer_states_bytes", b.optimizer_states},
        {"activations_bytes", b.activations}, {"checkpoints_bytes", b.checkpoints},
        {"attention_buffers_bytes", b.attention_buffers}, {"logits_bytes", b.logits}, {"working_bytes", b.working}};
    for (const auto& [key, predicted] : parts) {
      const double got = measured.at(key).get<double>();
      // A loopback proxy measures ring rank 0's shapes; under zigzag the last ring rank holds two
      // adjacent chunks as one segment, so its attention calls (and cuDNN's workspace for them)
      // are twice as long. The prediction is that rank's: the one that decides whether it fits.
      if (std::string(key) == "attention_buffers_bytes" && p.ring_degree > 1) {
        EXPECT_GE(predicted, 0.98 * got) << file.filename() << ": " << key;
        EXPECT_LE(predicted, 2.02 * got) << file.filename() << ": " << key;
        continue;
      }
      EXPECT_NEAR(predicted, got, 0.02 * got) << file.filename() << ": " << key;
    }
    // The peak within 1%: for the ring proxies without the attention buffers (the rank apart).
    const double ab_gap = p.ring_degree > 1 ? b.attention_buffers - measured.at("attention_buffers_bytes").get<double>() : 0;
    EXPECT_NEAR(e.allocated_bytes() - ab_gap, s.peak_memory_bytes, 0.01 * s.peak_memory_bytes) << file.filename() << ": peak";
  }
}

// The maxlen search on the H100 (reports/results/h100/maxlen/NOTES.md): 524,288 tokens ran; the
// three runs' peaks and the failed allocations lie on one line that reaches the device's memory at
// 561,869 tokens, so the longest length that fits lies between the two. The prediction must fit
// (at least the length that ran) and stay below the bound.
TEST(MemoryMeasured, SeqparTrainMaxlenOnH100LiesInTheMeasuredBracket) {
  const MeasuredStep s = read_step(kResults / "maxlen/bisect/alst_524288.json");
  const sim::System sys = seqpar_train_on_h100();
  Plan p = normalized(s.plan, sys.gpus_per_node);
  const std::int64_t n = sim::max_seq_len(s.model, sys, p);
  EXPECT_GE(n, 524'288);
  EXPECT_LE(n, 561'869);
}

// The maxlen search on an H200 without checkpointing (reports/results/h200/maxlen/NOTES.md): one
// step at 188,837 tokens ran, 194,560 ran out of memory. That one step peaked before its backward
// first allocated the cuDNN workspace that training keeps between calls (256 bytes of attention
// buffers at the peak, the forward's); every other category is the model's within 2%. The prediction, which holds the workspace
// at the peak as a second step does, must fit within 3% below the run and stay below the failure.
TEST(MemoryMeasured, SeqparTrainWithoutCheckpointingOnH200) {
  const fs::path file = fs::path(SEQPAR_SOURCE_DIR) / "reports/results/h200/maxlen/probes/maxlen_188837.json";
  const MeasuredStep s = read_step(file);
  const json measured = load_json_file(file.string())["memory"];
  const sim::System sys = sim::load_system("hgx-h200", "cudnn", sim::load_framework("seqpar-train"));
  const Plan p = normalized(s.plan, sys.gpus_per_node);
  const sim::MemoryEstimate e = sim::estimate_memory(s.model, sys, p);
  const sim::MemoryBreakdown& b = e.peak;
  const std::pair<const char*, double> parts[] = {
      {"parameters_bytes", b.parameters},   {"gradients_bytes", b.gradients}, {"optimizer_states_bytes", b.optimizer_states},
      {"activations_bytes", b.activations}, {"working_bytes", b.working}};
  for (const auto& [key, predicted] : parts)
    EXPECT_NEAR(predicted, measured.at(key).get<double>(), 0.02 * measured.at(key).get<double>()) << key;
  EXPECT_LE(measured.at("attention_buffers_bytes").get<double>(), 256.0);  // the forward's workspace alone
  EXPECT_NEAR(e.allocated_bytes() - b.attention_buffers, s.peak_memory_bytes, 0.01 * s.peak_memory_bytes);
  const std::int64_t n = sim::max_seq_len(s.model, sys, p);
  EXPECT_GE(n, std::int64_t(0.97 * 188'837));
  EXPECT_LT(n, 194'560);
}

TEST(MemoryMeasured, HuggingFaceStepsWithinFivePercentUncalibrated) {
  const sim::System sys = sim::load_system("dgx-h100", "", sim::load_framework("hf-transformers"));
  const std::vector<fs::path> files = files_in(kResults / "hf");
  ASSERT_EQ(files.size(), 9u);
  double sum = 0;
  for (const fs::path& file : files) {
    const MeasuredStep s = read_step(file);
    const double predicted = sim::estimate_memory(s.model, sys, normalized(s.plan, sys.gpus_per_node)).allocated_bytes();
    const double error = predicted / s.peak_memory_bytes - 1;
    EXPECT_LE(std::fabs(error), 0.05) << file.filename() << ": predicted " << predicted << ", measured " << s.peak_memory_bytes;
    sum += std::fabs(error);
  }
  EXPECT_LE(sum / double(files.size()), 0.02) << "mean |error|";
}

// Calibrated from four of the Hugging Face steps that span the set (8K and 16K tokens without
// checkpointing, 64K with full checkpointing, and Llama-2's MHA at 16K), over the hf-transformers
// inventory, the other five: peak memory within 5% each and 3% on average, step time within 5%,
// and every fitted term physical. Four, not three: the steps run PyTorch SDPA's cuDNN back end on
// the H100 (the hf-transformers profile's kernel there), and their time needs three terms (a fixed
// overhead, the attention kernels' and the memory-bound work's efficiency in the steps), which
// three steps cannot determine; from three, the held-out steps miss by up to 5.9% (README,
// Calibrating from training steps). The framework is the one the steps name.
TEST(MemoryMeasured, HuggingFaceStepsCalibratedFromFourPredictTheOtherFive) {
  const std::vector<fs::path> files = files_in(kResults / "hf");
  ASSERT_EQ(files.size(), 9u);
  const std::vector<std::string> fitted = {"hf_00_llama3-8b_L4_s16384_none.json", "hf_04_llama3-8b_L4_s8192_none.json",
                                           "hf_05_llama3-8b_L4_s65536_full.json", "hf_06_llama2-7b_L4_s16384_none.json"};
  std::vector<InputDocument> inputs;
  std::vector<fs::path> held_out;
  for (const fs::path& f : files) {
    if (std::find(fitted.begin(), fitted.end(), f.filename().string()) != fitted.end())
      inputs.push_back({f.string(), load_json_file(f.string())});
    else
      held_out.push_back(f);
  }
  ASSERT_EQ(inputs.size(), 4u);
  const CalibrationResult r = calibrate(inputs, {}, sim_preset_lookup());
  const json& terms = r.profile.at("framework");
  EXPECT_EQ(terms.at("profile").at("name"), "hf-transformers");
  EXPECT_EQ(r.profile.at("calibration").at("fits").at("framework").at("attention_kernel"), "cudnn");
  for (const char* key : {"reserve_bytes", "bytes_per_token", "step_overhead_s"}) EXPECT_GE(terms.at(key).get<double>(), 0) << key;
  EXPECT_GT(terms.at("memory_bound_efficiency").get<double>(), 0);
  EXPECT_LE(terms.at("memory_bound_efficiency").get<double>(), 1);
  const sim::System sys = sim::system_from_json(r.profile, "calibrated profile", "");
  double memory_sum = 0;
  for (const fs::path& file : held_out) {
    const MeasuredStep s = read_step(file);
    const StepPrediction p = predict_step(sys, s);
    const double memory = p.peak_memory_bytes / s.peak_memory_bytes - 1, time = p.step_time_s / s.step_time_s - 1;
    EXPECT_LE(std::fabs(memory), 0.05) << file.filename() << ": peak memory";
    EXPECT_LE(std::fabs(time), 0.05) << file.filename() << ": step time";
    memory_sum += std::fabs(memory);
  }
  EXPECT_LE(memory_sum / double(held_out.size()), 0.03) << "mean |peak memory error|";
}

}  // namespace
}  // namespace seqpar::reports

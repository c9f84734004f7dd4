// Calibration from measured training steps (reports/step_input, step_fit; sim/framework_terms):
// the terms are recovered from steps the simulator generated with them, a "framework" (the
// simulator plus hidden terms) is predicted from three of its steps, absent terms change nothing,
// bad input is named, and seqpar-train's own document is read.
#ifdef SEQPAR_TEST_WITH_SIM
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/reports/calibrate.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/reports/step_fit.hpp"
#include "seqpar/reports/step_input.hpp"
#include "seqpar/sim/compute_cost.hpp"
#include "seqpar/sim/framework_terms.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/simulate.hpp"

using namespace seqpar::reports;
using nlohmann::json;

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

// The hidden framework: well away from the defaults in every term.
seqpar::sim::FrameworkTerms hidden_terms() {
  seqpar::sim::FrameworkTerms f;
  f.memory_bound_efficiency = 0.45;
  f.step_overhead_s = 0.06;
  f.reserve_bytes = 2.5 * kGiB;
  f.bytes_per_token = 4.0 * 32000;  // fp32 logits of a 32000-entry vocabulary
  return f;
}

seqpar::Plan sp1_plan(std::int64_t seq_len, seqpar::Checkpoint ckpt) {
  seqpar::Plan p;
  p.gpus = 1;
  p.sp = 1;
  p.seq_len = seq_len;
  p.mem.zero = 0;
  p.mem.checkpoint = ckpt;
  return p;
}

// A step of the synthetic framework in the minimal format, its time and memory off by up to
// `noise` (relative), drawn from `rng`.
json framework_step(const seqpar::Plan& plan, double noise, std::mt19937& rng) {
  seqpar::sim::System sys = seqpar::sim::load_system("dgx-h100");
  sys.framework = hidden_terms();
  json doc = {{"model", "llama3-8b"}, {"layers", 4}, {"vocab", 32000}, {"plan", seqpar::to_json(plan)}};
  const seqpar::sim::Model m = seqpar::sim::model_from_json(
      [] { json j = seqpar::sim::preset_document("model", "llama3-8b"); j["layers"] = 4; j["vocab"] = 32000; return j; }(),
      "test model");
  const seqpar::sim::Result r = seqpar::sim::simulate(m, sys, seqpar::normalized(plan, sys.gpus_per_node));
  EXPECT_TRUE(r.valid);
  std::uniform_real_distribution<double> u(-noise, noise);
  doc["step_time_s"] = r.step_time_s * (1 + u(rng));
  doc["peak_memory_bytes"] = r.peak_memory_bytes() * (1 + u(rng));
  return doc;
}

CalibrationResult calibrate_steps(const std::vector<json>& docs) {
  std::vector<InputDocument> in;
  for (std::size_t i = 0; i < docs.size(); ++i) in.push_back({"step" + std::to_string(i) + ".json", docs[i]});
  return calibrate(in, {"dgx-h100", "", "auto"}, sim_preset_lookup());
}

MeasuredStep read_one(const json& doc) { return read_step_document(doc, "s.json", "s.json").steps.at(0); }

std::string error_of(const json& doc) {
  try {
    read_step_document(doc, "s.json", "s.json");
  } catch (const seqpar::Error& e) {
    return e.what();
  }
  return "no error";
}

using seqpar::Checkpoint;

}  // namespace

TEST(StepCalibration, RecoversKnownTermsFromNoisySimulatedSteps) {
  std::mt19937 rng(7);
  std::vector<json> docs;
  for (std::int64_t s : {4096, 8192, 16384, 32768})
    for (Checkpoint c : {Checkpoint::none, Checkpoint::selective, Checkpoint::full})
      docs.push_back(framework_step(sp1_plan(s, c), 0.002, rng));
  const CalibrationResult r = calibrate_steps(docs);
  const json& f = r.profile["framework"];
  const auto h = hidden_terms();
  EXPECT_NEAR(f["memory_bound_efficiency"].get<double>(), h.memory_bound_efficiency, 0.05 * h.memory_bound_efficiency);
  EXPECT_NEAR(f["step_overhead_s"].get<double>(), h.step_overhead_s, 0.01);
  EXPECT_NEAR(f["reserve_bytes"].get<double>(), h.reserve_bytes, 0.3 * kGiB);
  EXPECT_NEAR(f["bytes_per_token"].get<double>(), h.bytes_per_token, 0.1 * h.bytes_per_token);
  EXPECT_NE(f["source"].get<std::string>().find("12 training steps"), std::string::npos) << f.dump();
  ASSERT_EQ(r.steps.size(), 12u);
  EXPECT_EQ(r.profile["calibration"]["steps"], r.steps);
  EXPECT_TRUE(r.profile["calibration"]["fits"].contains("framework"));
  for (const auto& row : r.steps) {
    EXPECT_LE(std::fabs(row["loo_time_error"].get<double>()), 0.02) << row.dump();
    EXPECT_LE(std::fabs(row["loo_memory_error"].get<double>()), 0.02) << row.dump();
  }
}

// The goal: three steps of one framework at different lengths and checkpointing predict
// its other steps on the same GPU within 5% (time) and 3% (peak memory), through the profile as
// `seqpar simulate --system PROFILE.json` loads it.
TEST(StepCalibration, ThreeStepsPredictTheFrameworksOtherSteps) {
  std::mt19937 rng(11);
  const CalibrationResult r = calibrate_steps({framework_step(sp1_plan(8192, Checkpoint::none), 0.003, rng),
                                               framework_step(sp1_plan(16384, Checkpoint::selective), 0.003, rng),
                                               framework_step(sp1_plan(32768, Checkpoint::full), 0.003, rng)});
  const seqpar::sim::System profile = seqpar::sim::system_from_json(r.profile, "profile");
  for (std::int64_t s : {2048, 12288, 24576, 65536})
    for (Checkpoint c : {Checkpoint::none, Checkpoint::selective, Checkpoint::full}) {
      std::mt19937 none(0);
      const MeasuredStep truth = read_one(framework_step(sp1_plan(s, c), 0.0, none));
      const StepPrediction p = predict_step(profile, truth);
      EXPECT_LE(std::fabs(p.step_time_s / truth.step_time_s - 1), 0.05) << s << " " << seqpar::to_string(c);
      EXPECT_LE(std::fabs(p.peak_memory_bytes / truth.peak_memory_bytes - 1), 0.03) << s << " " << seqpar::to_string(c);
    }
  // Without the fitted terms the same profile misses: the goal needs them.
  seqpar::sim::System bare = profile;
  bare.framework = {};
  std::mt19937 none(0);
  const MeasuredStep far = read_one(framework_step(sp1_plan(65536, Checkpoint::full), 0.0, none));
  EXPECT_GT(std::fabs(predict_step(bare, far).step_time_s / far.step_time_s - 1), 0.05);
}

TEST(StepCalibration, AbsentTermsLeaveEveryPredictionAsTheKernelModelGivesIt) {
  const seqpar::sim::System sys = seqpar::sim::load_system("dgx-h100");
  const seqpar::sim::Model m = seqpar::sim::load_model("llama3-8b");
  for (Checkpoint c : {Checkpoint::none, Checkpoint::selective, Checkpoint::full}) {
    seqpar::Plan p = sp1_plan(32768, c);
    p.gpus = 8;
    p.sp = 8;
    p.mem.zero = 3;
    const seqpar::sim::Result r = seqpar::sim::simulate(m, sys, seqpar::normalized(p, sys.gpus_per_node));
    ASSERT_TRUE(r.valid);
    const auto& t = r.time;
    // Today's sums, bit for bit.
    EXPECT_EQ(r.step_time_s, t.compute + t.exposed_comm + t.optimizer + t.exposed_offload);
    EXPECT_EQ(r.memory.peak.reserved, sys.gpu.reserved_bytes);
    const double T = 32768.0 / 8;
    EXPECT_EQ(t.elementwise, m.layers * 3 * seqpar::sim::memory_bound_time(
                                 sys.gpu, seqpar::sim::layer_elementwise_bytes_per_token(m) * T));
  }
  // A profile whose "framework" is empty loads as one without it.
  json doc = seqpar::sim::preset_document("system", "dgx-h100");
  doc["framework"] = json::object();
  const seqpar::sim::System with_empty = seqpar::sim::system_from_json(doc, "doc");
  EXPECT_EQ(with_empty.framework.memory_bound_efficiency, 1.0);
  EXPECT_EQ(with_empty.framework.step_overhead_s, 0.0);
  EXPECT_EQ(with_empty.framework.reserve_bytes, 0.0);
  EXPECT_EQ(with_empty.framework.bytes_per_token, 0.0);
}

TEST(StepCalibration, TermsEnterTheStepWhereTheirNamesSay) {
  json doc = seqpar::sim::preset_document("system", "dgx-h100");
  const seqpar::sim::System base = seqpar::sim::system_from_json(doc, "base");
  doc["framework"] = {{"memory_bound_efficiency", 0.5}, {"step_overhead_s", {{"value", 0.25}, {"source", "test"}}},
                      {"reserve_bytes", 1e9}, {"bytes_per_token", 1000}};
  const seqpar::sim::System fw = seqpar::sim::system_from_json(doc, "fw");
  const seqpar::sim::Model m = seqpar::sim::load_model("llama3-8b");
  const seqpar::Plan p = seqpar::normalized(sp1_plan(8192, Checkpoint::none), 8);
  const auto a = seqpar::sim::simulate(m, base, p), b = seqpar::sim::simulate(m, fw, p);
  EXPECT_DOUBLE_EQ(b.time.elementwise, 2 * a.time.elementwise);
  EXPECT_DOUBLE_EQ(b.time.optimizer, 2 * a.time.optimizer);
  EXPECT_DOUBLE_EQ(b.step_time_s - a.step_time_s, a.time.elementwise + a.time.optimizer + 0.25);
  EXPECT_DOUBLE_EQ(b.peak_memory_bytes() - a.peak_memory_bytes(), 1e9 + 1000 * 8192.0);
  doc["framework"]["memory_bound_efficiency"] = 1.5;
  try {
    seqpar::sim::system_from_json(doc, "fw.json");
    FAIL() << "an efficiency above 1 was accepted";
  } catch (const seqpar::Error& e) {
    EXPECT_NE(std::string(e.what()).find("fw.json: framework: field 'memory_bound_efficiency'"), std::string::npos) << e.what();
  }
}

TEST(StepCalibration, BadStepInputNamesTheFileAndField) {
  const json good = {{"model", "llama3-8b"}, {"layers", 4}, {"plan", seqpar::to_json(sp1_plan(8192, Checkpoint::none))},
                     {"step_time_s", 1.0}, {"peak_memory_bytes", 4e10}};
  EXPECT_EQ(error_of(good), "no error");
  auto without = [&](const char* key) { json d = good; d.erase(key); return d; };
  EXPECT_NE(error_of(without("model")).find("s.json: missing field 'model'"), std::string::npos);
  EXPECT_NE(error_of(without("peak_memory_bytes")).find("s.json"), std::string::npos);
  EXPECT_NE(error_of(without("peak_memory_bytes")).find("peak_memory_bytes"), std::string::npos);
  json d = good;
  d["step_time_s"] = -1;
  EXPECT_NE(error_of(d).find("s.json: field 'step_time_s' must be a positive number"), std::string::npos) << error_of(d);
  d = good;
  d["model"] = "no-such-model";
  EXPECT_NE(error_of(d).find("s.json: model: unknown model preset 'no-such-model'"), std::string::npos) << error_of(d);
  d = good;
  d["layers"] = 0;
  EXPECT_NE(error_of(d).find("s.json: model: field 'layers'"), std::string::npos) << error_of(d);
  d = good;
  d["plan"]["checkpoint"] = "sometimes";
  EXPECT_NE(error_of(d).find("s.json: "), std::string::npos);
  EXPECT_NE(error_of(d).find("checkpoint"), std::string::npos) << error_of(d);
  d = good;
  d["dtype"] = "int3";
  EXPECT_NE(error_of(d).find("s.json: dtype"), std::string::npos) << error_of(d);
  d = json{{"model", "llama3-8b"}, {"steps", json::array({good, json{{"plan", good["plan"]}, {"step_time_s", 1.0}}})}};
  EXPECT_NE(error_of(d).find("s.json: steps[1]"), std::string::npos) << error_of(d);
  EXPECT_NE(error_of(d).find("peak_memory_bytes"), std::string::npos) << error_of(d);
  // A plan the simulator refuses is named with the step when fitted.
  d = good;
  d["plan"]["gpus"] = 3;
  d["plan"]["sp"] = 3;
  try {
    calibrate_steps({d});
    FAIL() << "a plan of 3 GPUs over 32 heads was accepted";
  } catch (const seqpar::Error& e) {
    EXPECT_NE(std::string(e.what()).find("step0.json"), std::string::npos) << e.what();
  }
}

TEST(StepCalibration, ReadsSeqparTrainsOwnDocument) {
  const std::string path = std::string(SEQPAR_SOURCE_DIR) + "/tests/reports/fixtures/h100-2026-11/train_sp1.json";
  const json doc = load_json_file(path);
  ASSERT_TRUE(is_step_document(doc));
  const StepDocument d = read_step_document(doc, "train_sp1.json", "train_sp1.json");
  ASSERT_EQ(d.steps.size(), 1u);
  const MeasuredStep& s = d.steps[0];
  EXPECT_EQ(d.gpu_name.value_or(""), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(s.name, "train_step/llama3-8b/L4/ulysses/sp1/seq16384");
  EXPECT_EQ(s.model.layers, 4);
  EXPECT_EQ(s.model.vocab, 32000);
  EXPECT_EQ(s.model.hidden, 4096);
  EXPECT_EQ(s.plan.seq_len, 16384);
  EXPECT_EQ(s.dtype, "fp32");
  EXPECT_DOUBLE_EQ(s.step_time_s, 1.170034801);
  EXPECT_DOUBLE_EQ(s.peak_memory_bytes, 40713453584.0);
  // The simulator predicts it (a valid plan on the H100), and calibrate says why an fp32 step is not fitted.
  EXPECT_GT(predict_step(seqpar::sim::load_system("dgx-h100"), s).step_time_s, 0);
  std::mt19937 rng(3);
  std::vector<InputDocument> in = {{"train_sp1.json", doc},
                                   {"a.json", framework_step(sp1_plan(8192, Checkpoint::none), 0, rng)}};
  const CalibrationResult r = calibrate(in, {}, sim_preset_lookup());
  EXPECT_EQ(r.steps.size(), 1u);
  bool noted = false;
  for (const auto& n : r.notes) noted = noted || (n.find("train_sp1.json") != n.npos && n.find("fp32") != n.npos);
  EXPECT_TRUE(noted);
  // A simulator prediction carries step_time_s and plan too, but is not a measured step.
  EXPECT_FALSE(is_step_document(json{{"kind", "prediction"}, {"plan", json::object()}, {"step_time_s", 1}}));
}
#endif

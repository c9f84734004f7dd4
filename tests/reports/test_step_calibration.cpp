// Calibration from measured training steps (reports/step_input, step_fit; sim/framework_terms):
// the terms are recovered from steps the simulator generated with them, a "framework" (the
// simulator plus hidden terms) is predicted from three of its steps, absent terms change nothing,
// bad input is named, and seqpar-train's own document is read; then the committed H100 steps
// (reports/results/h100): any three calibrate with every term physical, and hostile inputs (copies,
// impossible speeds or peaks, two GPUs, CPU steps in a "steps" array) are merged or refused.
#ifdef SEQPAR_TEST_WITH_SIM
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/reports/calibrate.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/reports/step_fit.hpp"
#include "seqpar/reports/step_input.hpp"
#include "seqpar/sim/attention_kernels.hpp"
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
  f.attention_step_efficiency = 0.8;
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
json framework_step(const seqpar::Plan& plan, double noise, std::mt19937& rng,
                    const seqpar::sim::FrameworkTerms& terms = hidden_terms()) {
  // As calibrate predicts steps that name no framework: the default one, with its kernel.
  seqpar::sim::System sys =
      seqpar::sim::load_system("dgx-h100", "", seqpar::sim::load_framework(seqpar::sim::kDefaultFramework));
  sys.framework = terms;
  json doc = {{"model", "llama3-8b"}, {"layers", 4}, {"vocab", 32000}, {"plan", seqpar::to_json(plan)}};
  const seqpar::sim::Model m = seqpar::sim::model_from_json(
      [] { json j = seqpar::sim::preset_document("model", "llama3-8b"); j["layers"] = 4; j["vocab"] = 32000; return j; }(),
      "test model");
  const seqpar::sim::Result r = seqpar::sim::simulate(m, sys, seqpar::normalized(plan, sys.gpus_per_node));
  EXPECT_TRUE(r.valid);
  std::uniform_real_distribution<double> u(-noise, noise);
  doc["step_time_s"] = r.step_time_s * (1 + u(rng));
  // A measured peak is what the framework's allocator handed out (no device reserve).
  doc["peak_memory_bytes"] = r.memory.allocated_bytes() * (1 + u(rng));
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
  EXPECT_NEAR(f["attention_step_efficiency"].get<double>(), h.attention_step_efficiency, 0.02);
  EXPECT_NEAR(f["step_overhead_s"].get<double>(), h.step_overhead_s, 0.01);
  EXPECT_NEAR(f["reserve_bytes"].get<double>(), h.reserve_bytes, 0.3 * kGiB);
  EXPECT_NEAR(f["bytes_per_token"].get<double>(), h.bytes_per_token, 0.1 * h.bytes_per_token);
  EXPECT_NE(f["source"].get<std::string>().find("12 distinct training steps"), std::string::npos) << f.dump();
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
// `seqpar simulate --system PROFILE.json` loads it. Three steps fit two time terms, the first two
// of kFrameworkTerms (a fixed overhead, the attention kernels' efficiency in the steps): the
// hidden framework here differs from the priors in those and in both memory terms.
TEST(StepCalibration, ThreeStepsPredictTheFrameworksOtherSteps) {
  std::mt19937 rng(11);
  seqpar::sim::FrameworkTerms two = hidden_terms();
  two.memory_bound_efficiency = 1;
  const CalibrationResult r = calibrate_steps({framework_step(sp1_plan(8192, Checkpoint::none), 0.003, rng, two),
                                               framework_step(sp1_plan(16384, Checkpoint::selective), 0.003, rng, two),
                                               framework_step(sp1_plan(32768, Checkpoint::full), 0.003, rng, two)});
  const seqpar::sim::System profile = seqpar::sim::system_from_json(r.profile, "profile", "");
  for (std::int64_t s : {2048, 12288, 24576, 65536})
    for (Checkpoint c : {Checkpoint::none, Checkpoint::selective, Checkpoint::full}) {
      std::mt19937 none(0);
      const MeasuredStep truth = read_one(framework_step(sp1_plan(s, c), 0.0, none, two));
      const StepPrediction p = predict_step(profile, truth);
      EXPECT_LE(std::fabs(p.step_time_s / truth.step_time_s - 1), 0.05) << s << " " << seqpar::to_string(c);
      EXPECT_LE(std::fabs(p.peak_memory_bytes / truth.peak_memory_bytes - 1), 0.03) << s << " " << seqpar::to_string(c);
    }
  // Without the fitted terms the same profile misses: the goal needs them.
  seqpar::sim::System bare = profile;
  bare.framework = {};
  std::mt19937 none(0);
  const MeasuredStep far = read_one(framework_step(sp1_plan(65536, Checkpoint::full), 0.0, none, two));
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
    // The layers' memory-bound work, and the loss's over its logits at the framework profile's bytes.
    const double loss = seqpar::sim::memory_bound_time(sys.gpu, sys.profile.loss_elementwise_bytes_per_logit * T * m.vocab);
    EXPECT_DOUBLE_EQ(t.elementwise, m.layers * 3 * seqpar::sim::memory_bound_time(
                                        sys.gpu, seqpar::sim::layer_elementwise_bytes_per_token(m) * T) + loss);
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

namespace {

// The committed steps of one folder of reports/results/h100, each as calibrate reads its file.
std::vector<InputDocument> committed_steps(const std::string& folder) {
  namespace fs = std::filesystem;
  std::vector<InputDocument> docs;
  for (const auto& e : fs::directory_iterator(fs::path(SEQPAR_SOURCE_DIR) / "reports/results/h100" / folder))
    if (e.path().extension() == ".json") docs.push_back({e.path().filename().string(), load_json_file(e.path().string())});
  std::sort(docs.begin(), docs.end(), [](const InputDocument& a, const InputDocument& b) { return a.file < b.file; });
  return docs;
}

std::string calibrate_error(const std::vector<InputDocument>& in, const CalibrateOptions& opt = {}) {
  try {
    calibrate(in, opt, sim_preset_lookup());
  } catch (const seqpar::Error& e) {
    return e.what();
  }
  return "no error";
}

bool noted(const CalibrationResult& r, const std::string& a, const std::string& b = "") {
  for (const auto& n : r.notes)
    if (n.find(a) != n.npos && n.find(b) != n.npos) return true;
  return false;
}

// Every framework term of a profile inside the range the profile loader accepts (non-negative
// memory, an efficiency in (0, 1]); the profile loads and predicts every step finitely.
void expect_physical(const CalibrationResult& r, const std::string& what) {
  const json& f = r.profile["framework"];
  for (const auto& t : seqpar::sim::kFrameworkTerms) {
    const double v = f[t.key].get<double>();
    EXPECT_GE(v, t.lo) << what << ": " << t.key;
    EXPECT_LE(v, t.hi) << what << ": " << t.key;
  }
  EXPECT_GE(f["reserve_bytes"].get<double>(), 0) << what;
  EXPECT_GE(f["bytes_per_token"].get<double>(), 0) << what;
  EXPECT_NO_THROW(seqpar::sim::system_from_json(r.profile, what)) << what;
  for (const auto& row : r.steps)
    for (const char* k : {"predicted_step_time_s", "predicted_peak_memory_bytes", "loo_predicted_step_time_s",
                          "loo_predicted_peak_memory_bytes"})
      EXPECT_TRUE(row[k].is_number() && std::isfinite(row[k].get<double>()) && row[k].get<double>() > 0)
          << what << ": " << row.dump();
}

}  // namespace

// The fidelity phase's failure (issue 25): three SP = 1 steps gave a reserve the simulator then
// refused (-1.33 GB), and another three a reserve of -2.89 GiB. Every three of the 15 committed
// seqpar-train steps, and of the 9 Hugging Face steps, now calibrate, with every term physical;
// where the steps have one per-rank token count, bytes_per_token is named as undetermined and
// keeps its prior.
TEST(StepCalibration, AnyThreeCommittedH100StepsCalibrateWithPhysicalTerms) {
  for (const char* folder : {"fidelity/steps", "hf"}) {
    const std::vector<InputDocument> all = committed_steps(folder);
    ASSERT_GE(all.size(), 9u) << folder;
    int one_count = 0;
    for (std::size_t i = 0; i < all.size(); ++i)
      for (std::size_t j = i + 1; j < all.size(); ++j)
        for (std::size_t k = j + 1; k < all.size(); ++k) {
          const std::vector<InputDocument> three = {all[i], all[j], all[k]};
          const std::string what = all[i].file + " " + all[j].file + " " + all[k].file;
          CalibrationResult r;
          try {
            r = calibrate(three, {}, sim_preset_lookup());
          } catch (const seqpar::Error& e) {
            ADD_FAILURE() << what << ": " << e.what();
            continue;
          }
          ASSERT_EQ(r.steps.size(), 3u) << what;
          expect_physical(r, what);
          std::set<double> tokens;
          for (const auto& in : three) {
            const MeasuredStep s = read_one(in.doc);
            tokens.insert(double(s.plan.seq_len) / s.plan.sp);
          }
          const json& terms = r.profile["calibration"]["fits"]["framework"]["terms"];
          if (tokens.size() == 1) {
            ++one_count;
            EXPECT_FALSE(terms["bytes_per_token"]["determined"].get<bool>()) << what;
            EXPECT_EQ(r.profile["framework"]["bytes_per_token"].get<double>(), 0) << what;
            EXPECT_TRUE(noted(r, "bytes_per_token not fitted", "one per-rank token count")) << what;
          }
        }
    if (std::string(folder) == "fidelity/steps") {
      EXPECT_GT(one_count, 0);  // SP=1 8K beside the two SP=4 32K steps
    }
  }
}

namespace {

// Sets a committed step's measured figure (step_time_s or peak_memory_bytes) where the document
// writes it: at the top, in its one result, and for the peak in the one rank's (the reader checks
// that they agree).
void set_measured(InputDocument& d, const char* key, double v) {
  d.doc[key] = v;
  if (!d.doc.contains("results")) return;
  json& r = d.doc["results"][0];
  if (r.contains(key)) r[key] = v;
  if (std::string(key) == "peak_memory_bytes" && r.contains("peak_memory_bytes_per_rank"))
    r["peak_memory_bytes_per_rank"] = json::array({v});
}

InputDocument committed(const std::string& file) {
  for (auto& d : committed_steps("fidelity/steps"))
    if (d.file == file) return d;
  ADD_FAILURE() << "no committed step " << file;
  return {};
}

json framework_of(const CalibrationResult& r) {
  json f = r.profile["framework"];
  f.erase("source");
  return f;
}

}  // namespace

// A copy adds no information: the same step given once, twice or a hundred times fits the same
// terms (before, one copy gave efficiency 1.000 and a hundred 0.205), the merge is noted, and the
// leave-one-out of a copied step is the fit on the other steps alone (before, 0.00%: a copy stayed in).
TEST(StepCalibration, CopiesOfAStepAreFittedOnceAndLeftOutTogether) {
  const InputDocument a = committed("sp1_8K_none.json"), b = committed("sp1_16K_full.json"),
                      c = committed("sp1_32K_none.json");
  const CalibrationResult once = calibrate({a}, {}, sim_preset_lookup());
  std::vector<InputDocument> hundred(100, a);
  const CalibrationResult many = calibrate(hundred, {}, sim_preset_lookup());
  EXPECT_EQ(framework_of(once), framework_of(many));
  EXPECT_TRUE(noted(many, "sp1_8K_none.json", "the same step given 100 times"));
  EXPECT_EQ(many.steps.size(), 1u);

  const CalibrationResult three = calibrate({a, b, c}, {}, sim_preset_lookup());
  std::vector<InputDocument> skewed(50, a);
  skewed.push_back(b);
  skewed.push_back(c);
  const CalibrationResult weighted = calibrate(skewed, {}, sim_preset_lookup());
  EXPECT_EQ(framework_of(three), framework_of(weighted));
  ASSERT_EQ(weighted.steps.size(), 3u);
  // (loaded as the commands load it: its framework's attention kernel, as the steps ran)
  const seqpar::sim::System others =
      seqpar::sim::system_from_json(calibrate({b, c}, {}, sim_preset_lookup()).profile, "b+c", "");
  const StepPrediction loo = predict_step(others, read_one(a.doc));
  EXPECT_DOUBLE_EQ(weighted.steps[0]["loo_predicted_step_time_s"].get<double>(), loo.step_time_s);
  EXPECT_DOUBLE_EQ(weighted.steps[0]["loo_predicted_peak_memory_bytes"].get<double>(), loo.peak_memory_bytes);
  EXPECT_GT(std::fabs(weighted.steps[0]["loo_time_error"].get<double>()), 1e-4);

  // Two measurements of one configuration are one point at their median, and say so.
  InputDocument again = a;
  again.file = "again.json";
  set_measured(again, "step_time_s", a.doc["step_time_s"].get<double>() * 1.02);
  const CalibrationResult two = calibrate({a, again, b, c}, {}, sim_preset_lookup());
  EXPECT_EQ(two.steps.size(), 3u);
  EXPECT_TRUE(noted(two, "again.json", "2 measurements of one configuration"));
  EXPECT_DOUBLE_EQ(two.steps[0]["measured_step_time_s"].get<double>(), a.doc["step_time_s"].get<double>() * 1.01);
}

// Steps no GPU can produce are refused, naming the file and the rule, not fitted (before: a time
// residual of 99999900% and a 200 GB peak on an 80 GB card were accepted).
TEST(StepCalibration, StepsBeyondTheGpuAreRefusedNamingTheFileAndRule) {
  const InputDocument a = committed("sp1_8K_none.json"), b = committed("sp1_16K_full.json");
  InputDocument fast = a;
  fast.file = "fast.json";
  set_measured(fast, "step_time_s", a.doc["step_time_s"].get<double>() / 1000);
  const std::string too_fast = calibrate_error({fast, b});
  EXPECT_NE(too_fast.find("fast.json"), std::string::npos) << too_fast;
  EXPECT_NE(too_fast.find("above the h100-sxm GPU's bf16 peak of 989.4 TFLOP/s"), std::string::npos) << too_fast;
  InputDocument big = a;
  big.file = "big.json";
  set_measured(big, "peak_memory_bytes", 200e9);
  const std::string too_big = calibrate_error({b, big});
  EXPECT_NE(too_big.find("big.json"), std::string::npos) << too_big;
  EXPECT_NE(too_big.find("above the h100-sxm GPU's memory of 80.00 GiB"), std::string::npos) << too_big;
}

// Impossible steps (issue 35, case 5): a peak below the weights the plan keeps is refused; a step far
// from the base's prediction is left out of the fit and named, not allowed to move the terms; a base
// system of another GPU than the steps' is refused; one GPU written in two spellings is one GPU.
TEST(StepCalibration, ImpossibleStepsAndAnotherGpusBaseAreRefusedOrLeftOut) {
  const InputDocument a = committed("sp1_8K_none.json"), b = committed("sp1_16K_full.json"),
                      c = committed("sp1_32K_full.json");
  InputDocument tiny = a;
  tiny.file = "tiny.json";
  set_measured(tiny, "peak_memory_bytes", 1);
  const std::string e = calibrate_error({tiny, b, c});
  EXPECT_NE(e.find("tiny.json"), std::string::npos) << e;
  EXPECT_NE(e.find("below the"), std::string::npos) << e;
  EXPECT_NE(e.find("of parameters the plan keeps on each GPU"), std::string::npos) << e;

  const CalibrationResult clean = calibrate({a, b, c}, {"dgx-h100", "", "auto"}, sim_preset_lookup());
  InputDocument slow = a;
  slow.file = "slow.json";
  set_measured(slow, "step_time_s", 100000.0);
  const CalibrationResult r = calibrate({slow, b, c}, {"dgx-h100", "", "auto"}, sim_preset_lookup());
  EXPECT_TRUE(noted(r, "slow.json", "outlier, left out of the fit")) << (r.notes.empty() ? "" : r.notes.back());
  EXPECT_EQ(r.steps.size(), 2u);
  // The two steps left give the terms two steps give, whatever the outlier said.
  const CalibrationResult two = calibrate({b, c}, {"dgx-h100", "", "auto"}, sim_preset_lookup());
  EXPECT_EQ(r.profile["framework"]["memory_bound_efficiency"], two.profile["framework"]["memory_bound_efficiency"]);
  EXPECT_EQ(clean.steps.size(), 3u);

  InputDocument a100 = a;
  a100.file = "a100.json";
  a100.doc["environment"]["gpu"]["name"] = "NVIDIA A100-SXM4-80GB";
  const std::string wrong = calibrate_error({a100}, {"dgx-h100"});
  EXPECT_NE(wrong.find("ran on 'NVIDIA A100-SXM4-80GB' (gpu preset a100-80g), but --base-system dgx-h100 has gpu "
                       "h100-sxm"),
            std::string::npos)
      << wrong;

  json spaced = b.doc;
  spaced["environment"]["gpu"]["name"] = "nvidia  H100 80GB   hbm3";
  EXPECT_EQ(calibrate_error({a, {"spaced.json", spaced}, c}), "no error");
}

// One profile, one GPU: steps of two GPUs are refused with both named, --base-system or not (before,
// the base followed whichever file came first).
TEST(StepCalibration, StepsOfTwoGpusAreRefused) {
  const InputDocument h100 = committed("sp1_8K_none.json");
  json other = {{"model", "llama3-8b"}, {"layers", 4}, {"vocab", 32000}, {"gpu_name", "NVIDIA A100-SXM4-80GB"},
                {"plan", seqpar::to_json(sp1_plan(8192, Checkpoint::full))}, {"step_time_s", 0.5},
                {"peak_memory_bytes", 3e10}};
  for (const std::string base : {"", "dgx-h100"}) {
    const std::string e = calibrate_error({h100, {"a100.json", other}}, {base});
    EXPECT_NE(e.find("2 different GPUs"), std::string::npos) << e;
    EXPECT_NE(e.find("'NVIDIA A100-SXM4-80GB' (a100.json)"), std::string::npos) << e;
    EXPECT_NE(e.find("'NVIDIA H100 80GB HBM3' (sp1_8K_none.json)"), std::string::npos) << e;
  }
  // The same GPU named in every file is one GPU.
  other["gpu_name"] = "NVIDIA H100 80GB HBM3";
  EXPECT_EQ(calibrate_error({h100, {"h100.json", other}}), "no error");
}

// A step says where it ran inside a "steps" array as it does in its own file: CPU steps there are
// skipped with a note like CPU documents (before, they were fitted into the GPU profile).
TEST(StepCalibration, CpuStepsInsideAStepsArrayAreSkipped) {
  std::mt19937 rng(5);
  json gpu8 = framework_step(sp1_plan(8192, Checkpoint::none), 0, rng),
       gpu16 = framework_step(sp1_plan(16384, Checkpoint::full), 0, rng),
       cpu = framework_step(sp1_plan(32768, Checkpoint::none), 0, rng);
  cpu["device"] = "cpu";
  cpu["step_time_s"] = 1000.0;
  for (json* s : {&gpu8, &gpu16, &cpu}) s->erase("model");
  const json doc = {{"model", "llama3-8b"}, {"gpu_name", "NVIDIA H100 80GB HBM3"}, {"steps", {gpu8, gpu16, cpu}}};
  const CalibrationResult r = calibrate({{"mixed.json", doc}}, {}, sim_preset_lookup());
  EXPECT_EQ(r.steps.size(), 2u);
  EXPECT_TRUE(noted(r, "mixed.json", "skipped: 1 step measured on device 'cpu'"));
  json all_cpu = doc;
  all_cpu["device"] = "cpu";
  for (auto& s : all_cpu["steps"]) s.erase("device");
  EXPECT_NE(calibrate_error({{"cpu.json", all_cpu}}, {"dgx-h100"}).find("nothing to fit"), std::string::npos);
}

// What the steps cannot determine keeps the base system's value (its prior), and the notes say so:
// three steps at one per-rank token count cannot separate a per-token term from a reserve.
TEST(StepCalibration, UndeterminedTermsKeepTheBasesValueAndSaySo) {
  json base = seqpar::sim::preset_document("system", "dgx-h100");
  base["framework"] = {{"bytes_per_token", 1000.0}, {"profile", "seqpar-train"}};
  const PresetLookup lookup = [&](const std::string& kind, const std::string& name) {
    return kind == "system" && name == "fw-base" ? base : sim_preset_lookup()(kind, name);
  };
  // 8K tokens per rank each: SP = 1 at 8K, SP = 4 at 32K (Ulysses and zigzag).
  const CalibrationResult r = calibrate({committed("sp1_8K_none.json"), committed("ulysses4_32K_none.json"),
                                         committed("zigzag4_32K_none.json")}, {"fw-base"}, lookup);
  const json& f = r.profile["framework"];
  EXPECT_EQ(f["bytes_per_token"].get<double>(), 1000.0);
  // The framework the terms are fitted over stays, whole (its document), with the kernel the steps ran.
  EXPECT_EQ(f["profile"]["name"].get<std::string>(), "seqpar-train");
  EXPECT_EQ(f["profile"]["attention_kernel"]["value"].get<std::string>(), "cudnn");
  EXPECT_TRUE(noted(r, "bytes_per_token not fitted, held at its prior 1000", "one per-rank token count"));
  const std::string src = f["source"].get<std::string>();
  EXPECT_NE(src.find("bytes_per_token", src.find("held at the base's: ")), std::string::npos) << src;
  // One step: one term per quantity, the others held and named.
  const CalibrationResult one = calibrate({committed("sp1_8K_none.json")}, {"fw-base"}, lookup);
  EXPECT_EQ(one.profile["framework"]["memory_bound_efficiency"].get<double>(), 1.0);
  EXPECT_TRUE(noted(one, "memory_bound_efficiency not fitted", "one step fits one time term"));
}
#endif

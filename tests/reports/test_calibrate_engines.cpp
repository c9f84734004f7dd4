// seqpar calibrate fits the attention rows of one engine: seqpar-bench-attention --attention both
// writes seqpar's and cuDNN's rows (field "attention_engine") into one file, and a curve fitted to
// both would describe neither kernel. Default cudnn when measured; --attention-engine chooses.
#include <gtest/gtest.h>

#include <string>

#include "seqpar/core/error.hpp"
#include "seqpar/reports/calibrate.hpp"
#include "seqpar/reports/json_input.hpp"

using namespace seqpar::reports;
using nlohmann::json;

namespace {

json file_lookup(const std::string& kind, const std::string& name) {
  return load_json_file(std::string(SEQPAR_SOURCE_DIR) + "/sim/presets/" + kind + "s/" + name + ".json");
}

double overhead_s() { return file_lookup("gpu", "h100-sxm")["kernel_overhead_us"]["value"].get<double>() * 1e-6; }
double peak_tflops() { return file_lookup("gpu", "h100-sxm")["bf16_tflops"]["value"].get<double>(); }

// Forward d128 causal rows of one engine, timed as the simulator models them (efficiency x L / (L + half)).
void add_rows(json& doc, const std::string& engine, double efficiency, double half) {
  for (double L = 1024; L <= 65536; L *= 2) {
    const double flops = 4 * L * L * 16 * 128 * 0.5;
    const double t = flops / (peak_tflops() * 1e12 * efficiency * L / (L + half)) + overhead_s();
    doc["results"].push_back({{"name", "attention_fwd/" + engine + "/bf16/d128/causal/seq" + std::to_string(int(L))},
                              {"backend", "seqpar"}, {"attention_engine", engine}, {"op", "fwd"}, {"dtype", "bf16"},
                              {"head_dim", 128}, {"causal", true}, {"seq_len", L}, {"flops", flops}, {"time_s", t},
                              {"tflops", flops / t / 1e12}});
  }
}

// A file as `seqpar-bench-attention --attention both` writes it: seqpar slow, cuDNN fast.
json both_engines() {
  json d = {{"schema_version", 1}, {"tool_version", "test"}, {"command", "seqpar-bench-attention --attention both -J x"},
            {"host", "h"}, {"created_utc", "2026-11-23T00:00:00Z"}, {"kind", "measurement"},
            {"program", "seqpar-bench-attention"}, {"mode", "single-rank-proxy"}, {"device", "gpu"},
            {"environment", {{"gpu", {{"name", "NVIDIA H100 80GB HBM3"}}}}}, {"config", json::object()},
            {"results", json::array()}};
  add_rows(d, "seqpar", 0.05, 2000);
  add_rows(d, "cudnn", 0.70, 1500);
  return d;
}

double fwd_efficiency(const CalibrationResult& r) {
  return r.profile["gpu"]["attention_fwd_efficiency"]["value"].get<double>();
}

bool noted(const CalibrationResult& r, const std::string& text) {
  for (const auto& n : r.notes)
    if (n.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(CalibrateEngines, DefaultFitsCudnnAloneAndNamesTheOther) {
  const CalibrationResult r = calibrate({{"both.json", both_engines()}}, {}, file_lookup);
  EXPECT_NEAR(fwd_efficiency(r), 0.70, 0.01);
  EXPECT_EQ(r.profile["calibration"]["fits"]["attention_engine"], "cudnn");
  for (const auto& row : r.rows) EXPECT_NE(row["name"].get<std::string>().find("/cudnn/"), std::string::npos) << row;
  EXPECT_LT(r.max_abs_residual, 0.01);  // one engine's rows: the curve reproduces each
  EXPECT_TRUE(noted(r, "engine 'seqpar' not fitted"));
}

TEST(CalibrateEngines, ChosenEngineIsFittedAlone) {
  CalibrateOptions opt;
  opt.attention_engine = "seqpar";
  const CalibrationResult r = calibrate({{"both.json", both_engines()}}, opt, file_lookup);
  EXPECT_NEAR(fwd_efficiency(r), 0.05, 0.002);
  EXPECT_EQ(r.profile["calibration"]["fits"]["attention_engine"], "seqpar");
  EXPECT_LT(r.max_abs_residual, 0.01);
  EXPECT_TRUE(noted(r, "engine 'cudnn' not fitted"));
}

TEST(CalibrateEngines, RowsWithoutAnEngineAreSeqparsAndABadChoiceIsNamed) {
  json d = both_engines();
  json seqpar_only = d;
  seqpar_only["results"] = json::array();
  for (auto row : d["results"])
    if (row["attention_engine"] == "seqpar") {
      row.erase("attention_engine");  // files from before the field existed
      seqpar_only["results"].push_back(row);
    }
  const CalibrationResult r = calibrate({{"old.json", seqpar_only}}, {}, file_lookup);
  EXPECT_NEAR(fwd_efficiency(r), 0.05, 0.002);
  CalibrateOptions opt;
  opt.attention_engine = "cudnn";
  try {
    calibrate({{"old.json", seqpar_only}}, opt, file_lookup);
    FAIL() << "a missing engine was accepted";
  } catch (const seqpar::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--attention-engine cudnn: no attention rows of that engine in old.json"),
              std::string::npos) << e.what();
  }
  opt.attention_engine = "flash";
  try {
    calibrate({{"both.json", d}}, opt, file_lookup);
    FAIL() << "an unknown engine was accepted";
  } catch (const seqpar::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--attention-engine 'flash' must be seqpar or cudnn"), std::string::npos) << e.what();
  }
}

// The profile's default attention figures are the calibrated engine's, and say so: the kernel is
// named for the engine, and the base preset's default kernel stays selectable by its name.
TEST(CalibrateEngines, TheProfileNamesTheCalibratedKernelAndKeepsThePresetsDefault) {
  const json base = file_lookup("gpu", "h100-sxm");
  ASSERT_TRUE(base.contains("attention_kernel")) << "the H100 preset names its default kernel";
  const std::string preset_default = base["attention_kernel"].get<std::string>();
  CalibrateOptions opt;
  opt.attention_engine = "seqpar";
  const CalibrationResult r = calibrate({{"both.json", both_engines()}}, opt, file_lookup);
  const json& gpu = r.profile["gpu"];
  EXPECT_EQ(gpu["attention_kernel"], "seqpar");
  ASSERT_TRUE(gpu["attention_kernels"].contains(preset_default)) << gpu.dump();
  EXPECT_EQ(gpu["attention_kernels"][preset_default]["attention_fwd_efficiency"], base["attention_fwd_efficiency"]);
  EXPECT_FALSE(gpu["attention_kernels"].contains("seqpar"));
  // Calibrating cuDNN replaces the preset's uncalibrated cuDNN entry.
  const CalibrationResult c = calibrate({{"both.json", both_engines()}}, {}, file_lookup);
  EXPECT_EQ(c.profile["gpu"]["attention_kernel"], "cudnn");
  EXPECT_FALSE(c.profile["gpu"]["attention_kernels"].contains("cudnn"));
  EXPECT_TRUE(c.profile["gpu"]["attention_kernels"].contains(preset_default));
}

// The attention kernel's workspace comes from the engine's own size queries (the rows'
// workspace_bytes), as seqpar-bench-attention records them: rows sized as cuDNN 9.19 sizes its
// backward (4 bytes x rows x (2 x head_dim + 1)) and an unmasked forward (4 x rows x head_dim), at
// two head dimensions, give back a = 2, b = 1 and the forward's 1; the memory model then uses them.
TEST(CalibrateEngines, WorkspaceFiguresComeFromTheEnginesOwnSizes) {
  json d = both_engines();
  for (const int head_dim : {64, 128})
    for (const bool bwd : {false, true})
      for (double L = 2048; L <= 8192; L *= 2) {
        const double rows = 1 * 16 * L, flops = 4 * L * L * 16 * head_dim * (bwd ? 2.5 : 1);
        // cuDNN 9.19's own sizes (reports/results/h200/check/engines_workspace.json): the backward
        // 4 x rows x (2 d + 1) bytes, the forward 256 bytes whatever the shape.
        const double ws = bwd ? 4 * rows * (2 * head_dim + 1) : 256;
        d["results"].push_back({{"name", "ws/" + std::to_string(head_dim) + (bwd ? "/bwd/" : "/fwd/") + std::to_string(int(L))},
                                {"backend", "seqpar"}, {"attention_engine", "cudnn"}, {"op", bwd ? "bwd" : "fwd"},
                                {"dtype", "bf16"}, {"head_dim", head_dim}, {"causal", false}, {"seq_len", L},
                                {"batch", 1}, {"heads", 16}, {"flops", flops}, {"time_s", flops / 400e12},
                                {"tflops", 400.0}, {"workspace_bytes", ws}});
      }
  const CalibrationResult r = calibrate({{"attn.json", d}}, {"dgx-h100"}, file_lookup);
  const json& g = r.profile["gpu"];
  EXPECT_NEAR(g["attention_bwd_workspace_per_head_dim"]["value"].get<double>(), 2.0, 1e-9);
  EXPECT_NEAR(g["attention_bwd_workspace_per_row"]["value"].get<double>(), 1.0, 1e-9);
  // The forward figure is not the engine's workspace (the ring step's bf16 staging of fp32 operands,
  // measured from steps): the engine's tiny forward workspace leaves the base's figure as it was.
  EXPECT_FALSE(g.contains("attention_fwd_workspace_per_head_dim"));
  EXPECT_LT(r.profile["calibration"]["fits"]["attention_workspace"]["fwd_engine_per_head_dim_max"].get<double>(), 0.01);
  EXPECT_NE(g["attention_bwd_workspace_per_head_dim"]["source"].get<std::string>().find("own workspace sizes"),
            std::string::npos);
  // seqpar's engine rows carry none: a profile fitted to them keeps the base's figures.
  const CalibrationResult s = calibrate({{"attn.json", both_engines()}}, {"dgx-h100", "", "auto", "seqpar"}, file_lookup);
  EXPECT_FALSE(s.profile["gpu"].contains("attention_bwd_workspace_per_head_dim"));
}

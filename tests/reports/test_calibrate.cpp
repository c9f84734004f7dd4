#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "seqpar/core/error.hpp"
#include "seqpar/reports/calibrate.hpp"
#include "seqpar/reports/json_input.hpp"
#ifdef SEQPAR_TEST_WITH_SIM
#include "seqpar/sim/compute_cost.hpp"
#include "seqpar/sim/presets.hpp"
#endif

using namespace seqpar::reports;
using nlohmann::json;

namespace {

// Presets straight from the source tree, so this test does not depend on how sim embeds them.
json file_lookup(const std::string& kind, const std::string& name) {
  return load_json_file(std::string(SEQPAR_SOURCE_DIR) + "/sim/presets/" + kind + "s/" + name + ".json");
}

json doc_header(const std::string& program, const std::string& mode) {
  return {{"schema_version", 1}, {"tool_version", "test"}, {"command", program + " -J out.json"}, {"host", "node1"},
          {"created_utc", "2024-01-01T00:00:00Z"}, {"kind", "measurement"}, {"program", program}, {"mode", mode},
          {"device", "gpu"}, {"environment", {{"gpu", {{"name", "NVIDIA H100 80GB HBM3"}}}, {"gpu_count", 8}}},
          {"config", json::object()}, {"results", json::array()}};
}

// Collective rows from t = latency + bus_bytes / bw, with relative noise.
json comm_doc(int nodes, int ranks, double bw, double latency, double noise, unsigned seed) {
  json d = doc_header("seqpar-bench-comm", "real-ranks");
  d["layout"] = {{"world", ranks}, {"sp", ranks}, {"ulysses", ranks}, {"ring", 1}, {"dp", 1}, {"nodes", nodes}};
  std::mt19937 rng(seed);
  std::normal_distribution<double> n(0, noise);
  double factor = (ranks - 1.0) / ranks;
  for (double bytes = 1024; bytes <= double(1 << 30); bytes *= 2) {
    double t = (latency + bytes * factor / bw) * (1 + n(rng));
    double algbw = bytes / t / 1e9;
    d["results"].push_back({{"name", "alltoall/" + std::to_string(bytes)}, {"op", "alltoall"}, {"size_bytes", bytes},
                            {"time_s", t}, {"samples_s", {t}}, {"algbw_gbps", algbw}, {"busbw_gbps", algbw * factor},
                            {"ranks", ranks}});
  }
  return d;
}

// The base preset's kernel overhead: the simulator adds it to every kernel call, so synthetic
// measurements made from the model carry it too.
double overhead_s() { return file_lookup("gpu", "h100-sxm")["kernel_overhead_us"]["value"].get<double>() * 1e-6; }

// Attention (d128, causal) and GEMM rows timed as the simulator models them: flops over
// peak x eff x L / (L + L_half), plus the kernel overhead, with relative noise on the kernel rate.
json attention_doc(double peak_tflops, double eff_fwd, double eff_bwd, double half, double noise, unsigned seed) {
  json d = doc_header("seqpar-bench-attention", "single-rank-proxy");
  std::mt19937 rng(seed);
  std::normal_distribution<double> n(0, noise);
  for (double L = 1024; L <= 65536; L *= 2)
    for (auto [op, eff] : {std::pair{"fwd", eff_fwd}, {"bwd", eff_bwd}}) {
      const double flops = 4 * L * L * 16 * 128 * 0.5 * (std::string(op) == "bwd" ? 2.5 : 1.0);
      const double rate = peak_tflops * 1e12 * eff * L / (L + half) * (1 + n(rng));
      const double t = flops / rate + overhead_s();
      d["results"].push_back({{"name", std::string("attention_") + op + "/bf16/d128/causal/seq" + std::to_string(int(L))},
                              {"op", op}, {"dtype", "bf16"}, {"head_dim", 128}, {"causal", true}, {"seq_len", L},
                              {"batch", 1}, {"heads", 16}, {"flops", flops}, {"time_s", t}, {"tflops", flops / t / 1e12}});
    }
  for (double m = 64; m <= 16384; m *= 2) {
    double rate = peak_tflops * 1e12 * 0.75 * m / (m + 300) * (1 + n(rng));
    double k = 4096, nn = 4096;
    d["results"].push_back({{"name", "gemm/m" + std::to_string(int(m))}, {"op", "gemm"}, {"m", m}, {"n", nn}, {"k", k},
                            {"time_s", 2 * m * nn * k / rate + overhead_s()}});
  }
  return d;
}

double value(const json& fig) { return fig["value"].get<double>(); }

}  // namespace

TEST(Calibrate, RecoversKnownParametersFromNoisySyntheticMeasurements) {
  std::vector<InputDocument> in = {{"intra.json", comm_doc(1, 8, 370e9, 9e-6, 0.03, 1)},
                                   {"inter.json", comm_doc(2, 16, 42e9, 22e-6, 0.03, 2)},
                                   {"attn.json", attention_doc(989.4, 0.66, 0.48, 1800, 0.02, 3)}};
  CalibrationResult r = calibrate(in, {}, file_lookup);
  const json& p = r.profile;
  EXPECT_EQ(p["name"], "dgx-h100-calibrated");  // base chosen from the measured GPU name
  EXPECT_NEAR(value(p["intra_node"]["bandwidth_gbps"]) / 370, 1, 0.05);
  EXPECT_NEAR(value(p["intra_node"]["latency_us"]) / 9, 1, 0.2);
  EXPECT_EQ(value(p["intra_node"]["efficiency"]), 1.0);
  EXPECT_NEAR(value(p["inter_node"]["bandwidth_gbps"]) / 42, 1, 0.05);
  EXPECT_NEAR(value(p["inter_node"]["latency_us"]) / 22, 1, 0.2);
  const json& g = p["gpu"];
  ASSERT_TRUE(g.is_object());
  EXPECT_NEAR(value(g["attention_fwd_efficiency"]), 0.66, 0.03);
  EXPECT_NEAR(value(g["attention_bwd_efficiency"]), 0.48, 0.03);
  EXPECT_NEAR(value(g["attention_half_tokens"]) / 1800, 1, 0.25);
  EXPECT_NEAR(value(g["gemm_efficiency"]), 0.75, 0.03);
  EXPECT_NEAR(value(g["gemm_half_tokens"]) / 300, 1, 0.25);
  // Fitted figures name their inputs; the rest keep the base preset's sources.
  std::string src = p["intra_node"]["bandwidth_gbps"]["source"];
  EXPECT_NE(src.find("fitted by seqpar calibrate from intra.json"), std::string::npos) << src;
  EXPECT_NE(src.find("residual"), std::string::npos);
  json base_gpu = file_lookup("gpu", "h100-sxm");
  EXPECT_EQ(g["bf16_tflops"], base_gpu["bf16_tflops"]);
  EXPECT_EQ(g["memory_gib"], base_gpu["memory_gib"]);
  EXPECT_EQ(p["gpus_per_node"], file_lookup("system", "dgx-h100")["gpus_per_node"]);
#ifdef SEQPAR_TEST_WITH_SIM
  seqpar::sim::System s = seqpar::sim::system_from_json(p, "calibrated profile");
  EXPECT_NEAR(s.intra.bytes_per_s / 370e9, 1, 0.05);
  EXPECT_NEAR(s.gpu.attention_fwd_efficiency, 0.66, 0.03);
#endif
}

TEST(Calibrate, KeepsBaseFiguresWhenOnlyAttentionIsMeasured) {
  CalibrationResult r = calibrate({{"attn.json", attention_doc(989.4, 0.6, 0.45, 1000, 0.0, 4)}},
                                  {"dgx-h100", "my-h100", "auto"}, file_lookup);
  json base = file_lookup("system", "dgx-h100");
  EXPECT_EQ(r.profile["name"], "my-h100");
  EXPECT_EQ(r.profile["intra_node"], base["intra_node"]);
  EXPECT_EQ(r.profile["inter_node"], base["inter_node"]);
  EXPECT_NEAR(value(r.profile["gpu"]["attention_fwd_efficiency"]), 0.6, 1e-3);
}

TEST(Calibrate, UsesOnlySeqparsOwnAttentionKernels) {
  json d = attention_doc(989.4, 0.6, 0.45, 1000, 0.0, 9);
  json sdpa = attention_doc(989.4, 0.8, 0.6, 500, 0.0, 10)["results"];
  for (auto& r : sdpa) {
    r["backend"] = "sdpa-flash";
    d["results"].push_back(r);
  }
  CalibrationResult r = calibrate({{"a.json", d}}, {}, file_lookup);
  EXPECT_NEAR(value(r.profile["gpu"]["attention_fwd_efficiency"]), 0.6, 1e-3);
  bool noted = false;
  for (const auto& n : r.notes) noted |= n.find("sdpa-flash") != std::string::npos;
  EXPECT_TRUE(noted);
}

// FP8 GEMM rows (seqpar-bench-gemm --dtype fp8) run about twice as fast: fitted into the bf16 curve they
// would push its efficiency past 1 or bend it; they get their own curve against the FP8 peak, and
// row-wise rows (another recipe) are skipped with a note.
TEST(Calibrate, FitsTheGemmCurveFromBf16RowsOnly) {
  json d = attention_doc(989.4, 0.6, 0.45, 1000, 0.0, 11);
  const json bf16 = d["results"];
  for (const auto& r : bf16) {
    if (r["op"] != "gemm") continue;
    json fp8 = r;
    fp8["dtype"] = "fp8_e4m3";
    fp8["scaling"] = "tensor";
    fp8["time_s"] = r["time_s"].get<double>() / 2;  // twice the rate: the same share of twice the peak
    fp8.erase("tflops");
    d["results"].push_back(fp8);
    fp8["scaling"] = "row";
    fp8["time_s"] = r["time_s"].get<double>() * 2;  // would drag the per-tensor curve down if fitted with it
    d["results"].push_back(fp8);
  }
  CalibrationResult r = calibrate({{"g.json", d}}, {}, file_lookup);
  EXPECT_NEAR(value(r.profile["gpu"]["gemm_efficiency"]), 0.75, 0.03);
  // The FP8 curve: the same efficiency of the FP8 peak (1,978.9 = 2 x 989.4).
  ASSERT_TRUE(r.profile["gpu"].contains("fp8_gemm_efficiency")) << r.profile["gpu"].dump();
  EXPECT_NEAR(value(r.profile["gpu"]["fp8_gemm_efficiency"]), 0.75, 0.03);
  bool noted = false;
  for (const auto& n : r.notes) noted |= n.find("fp8_e4m3 with row-wise scales") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(Calibrate, SkipsProxyCommunicationAndNamesWhy) {
  json proxy = comm_doc(1, 8, 370e9, 9e-6, 0.0, 5);
  proxy["mode"] = "single-rank-proxy";
  try {
    calibrate({{"proxy.json", proxy}}, {}, file_lookup);
    FAIL() << "expected nothing to fit";
  } catch (const seqpar::Error& e) {
    EXPECT_NE(std::string(e.what()).find("nothing to fit in proxy.json"), std::string::npos) << e.what();
  }
}

TEST(Calibrate, BadInputIsAClearError) {
  json d = comm_doc(1, 8, 370e9, 9e-6, 0.0, 6);
  d["results"][2].erase("size_bytes");
  try {
    calibrate({{"c.json", d}}, {}, file_lookup);
    FAIL();
  } catch (const seqpar::Error& e) {
    EXPECT_NE(std::string(e.what()).find("c.json: results[2]: missing field 'size_bytes'"), std::string::npos) << e.what();
  }
  json unknown_gpu = attention_doc(989.4, 0.6, 0.45, 1000, 0.0, 7);
  unknown_gpu["environment"]["gpu"]["name"] = "Mystery GPU";
  EXPECT_THROW(calibrate({{"a.json", unknown_gpu}}, {}, file_lookup), seqpar::Error);
  // Faster than the base GPU's peak: the wrong base, said so.
  EXPECT_THROW(calibrate({{"a.json", attention_doc(989.4, 1.5, 1.2, 1000, 0.0, 8)}}, {}, file_lookup), seqpar::Error);
  EXPECT_THROW(calibrate({{"a.json", json{{"kind", "other"}}}}, {}, file_lookup), seqpar::Error);
}

TEST(Calibrate, DefaultBaseFromGpuName) {
  EXPECT_EQ(seqpar::sim::system_for_device_name("NVIDIA H100 80GB HBM3"), "dgx-h100");
  EXPECT_EQ(seqpar::sim::system_for_device_name("NVIDIA A100-SXM4-40GB"), "dgx-a100-40g");
  EXPECT_EQ(seqpar::sim::system_for_device_name("NVIDIA L20"), "l20-pcie");
  EXPECT_FALSE(seqpar::sim::system_for_device_name("Radeon"));
}

namespace {

// Every JSON file of the H100 measurement set (tests/reports/fixtures/h100-2026-11/README.md).
std::vector<InputDocument> h100_inputs() {
  namespace fs = std::filesystem;
  std::vector<InputDocument> in;
  const fs::path dir = fs::path(SEQPAR_SOURCE_DIR) / "tests/reports/fixtures/h100-2026-11";
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") in.push_back({e.path().filename().string(), load_json_file(e.path().string())});
  std::sort(in.begin(), in.end(), [](const auto& a, const auto& b) { return a.file < b.file; });
  return in;
}

bool any_note(const CalibrationResult& r, const std::string& a, const std::string& b) {
  for (const auto& n : r.notes)
    if (n.find(a) != std::string::npos && n.find(b) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(CalibrateRealH100, FitsEveryFileWithEfficienciesInRangeAndEachRowWithinFivePercent) {
  std::vector<InputDocument> in = h100_inputs();
  ASSERT_EQ(in.size(), 9u);
  CalibrationResult r = calibrate(in, {}, file_lookup);  // was: "fitted gemm_efficiency 1.331 exceeds 1"
  const json& g = r.profile["gpu"];
  for (const char* key : {"gemm_efficiency", "attention_fwd_efficiency", "attention_bwd_efficiency"}) {
    EXPECT_GT(value(g[key]), 0) << key;
    EXPECT_LE(value(g[key]), 1) << key;
  }
  // 794 TFLOP/s at best of 989.4: the GEMM ceiling is about 0.8 of peak, and steep (p near 3).
  EXPECT_NEAR(value(g["gemm_efficiency"]), 0.8, 0.05);
  EXPECT_GT(value(g["gemm_exponent"]), 2);
  // One attention curve per (direction, head dim, mask) measured: 2 x 2 x 2.
  ASSERT_EQ(g["attention_curves"].size(), 8u);
  for (const auto& c : g["attention_curves"]) {
    EXPECT_GT(c["efficiency"].get<double>(), 0) << c.dump();
    EXPECT_LE(c["efficiency"].get<double>(), 1) << c.dump();
  }
  // Every fitted row (5 GEMMs, 32 attention calls of seqpar's kernels), within 5%.
  ASSERT_EQ(r.rows.size(), 37u);
  for (const auto& row : r.rows) EXPECT_LE(std::fabs(row["residual"].get<double>()), 0.05) << row.dump();
  EXPECT_LE(r.max_abs_residual, 0.05);
  EXPECT_EQ(r.profile["calibration"]["rows"], r.rows);
  // What was not fitted is said, file by file.
  EXPECT_TRUE(any_note(r, "attn_sdpa.json", "sdpa-flash"));
  EXPECT_TRUE(any_note(r, "reshard.json", "rows not fitted"));
  EXPECT_TRUE(any_note(r, "train_sp1.json", "step not fitted: measured in fp32"));
  EXPECT_TRUE(any_note(r, "layer.json", "without an op"));
}

#ifdef SEQPAR_TEST_WITH_SIM
TEST(CalibrateRealH100, ProfileLoadsAsSystemAndReproducesTheRowsThroughTheSimulator) {
  CalibrationResult r = calibrate(h100_inputs(), {}, seqpar::reports::sim_preset_lookup());
  // Written and loaded back as `--system PROFILE.json` is.
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("seqpar-test-h100-profile-" + std::to_string(std::random_device{}()) + ".json")).string();
  std::ofstream(path) << r.profile.dump(2);
  const seqpar::sim::System s = seqpar::sim::load_system(path);
  std::filesystem::remove(path);
  EXPECT_EQ(s.gpu.attention_curves.size(), 8u);
  // Recompute each row's prediction here from the measured row, independently of calibrate's own.
  json gemm = load_json_file(std::string(SEQPAR_SOURCE_DIR) + "/tests/reports/fixtures/h100-2026-11/gemm.json");
  for (const auto& row : gemm["results"]) {
    const double flops = row["flops"].get<double>(), t = seqpar::sim::gemm_time(s.gpu, flops, row["m"].get<double>(), 1);
    EXPECT_NEAR(flops / t / 1e12 / row["tflops"].get<double>(), 1, 0.05) << row["name"];
  }
  json attn = load_json_file(std::string(SEQPAR_SOURCE_DIR) + "/tests/reports/fixtures/h100-2026-11/attn_seqpar.json");
  for (const auto& row : attn["results"]) {
    const double flops = row["flops"].get<double>();
    const double t = seqpar::sim::attention_time(s.gpu, flops, row["seq_len"].get<double>(), row["op"] == "bwd",
                                                 {row["head_dim"].get<int>(), row["causal"].get<bool>()});
    EXPECT_NEAR(flops / t / 1e12 / row["tflops"].get<double>(), 1, 0.05) << row["name"];
  }
  // The curve for a shape that was not measured is the nearest one: head dim 96 is nearer 128 (by
  // ratio) than 64.
  const auto c96 = seqpar::sim::attention_curve(s.gpu, false, {96, true});
  const auto c128 = seqpar::sim::attention_curve(s.gpu, false, {128, true});
  EXPECT_EQ(c96.efficiency, c128.efficiency);
  EXPECT_NE(c128.efficiency, seqpar::sim::attention_curve(s.gpu, false, {128, false}).efficiency);
}
#endif

TEST(CalibrateRealH100, RatesAbovePeakAreTheWrongBaseNotAFitToClip) {
  // The same H100 rows against an A100 preset: the documents name their H100, so the base is refused.
  try {
    calibrate(h100_inputs(), {"dgx-a100-80g", "", "auto"}, file_lookup);
    FAIL() << "expected the A100 base for H100 measurements to be refused";
  } catch (const seqpar::Error& e) {
    EXPECT_NE(std::string(e.what()).find("but --base-system dgx-a100-80g has gpu a100-80g"), std::string::npos)
        << e.what();
  }
  // Without the GPU's name the rates say it (312 TFLOP/s peak): cuBLAS's 794 TFLOP/s cannot be.
  std::vector<InputDocument> unnamed = h100_inputs();
  for (auto& d : unnamed)
    if (d.doc.contains("environment") && d.doc["environment"].contains("gpu")) d.doc["environment"]["gpu"].erase("name");
  try {
    calibrate(unnamed, {"dgx-a100-80g", "", "auto"}, file_lookup);
    FAIL() << "expected the rates above peak to be refused";
  } catch (const seqpar::Error& e) {
    EXPECT_NE(std::string(e.what()).find("above the base GPU's peak"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--base-system"), std::string::npos) << e.what();
  }
}

// The attention kernel as a named choice (sim/attention_kernels.hpp): a GPU preset's figures per
// kernel family, chosen with --attention-kernel or a published run's "attention_kernel". The
// figures compared here are read from the preset documents, not written into the test.
#include <gtest/gtest.h>

#include <string>

#include "cli_runner.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/attention_kernels.hpp"
#include "seqpar/sim/compute_cost.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/published.hpp"

namespace seqpar::sim {
namespace {

using nlohmann::json;

double figure(const std::string& gpu, const std::string& kernel, const char* key) {
  return preset_document("gpu", gpu)["attention_kernels"][kernel][key]["value"].get<double>();
}

std::string error_of(const std::string& system, const std::string& kernel) {
  try {
    (void)load_system(system, kernel);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(AttentionKernels, DefaultIsThePresetsOwnFiguresAndNamed) {
  // The preset as written: its default kernel's figures.
  const System plain = load_system("dgx-h100");
  const std::string preset_default = preset_document("gpu", "h100-sxm")["attention_kernel"].get<std::string>();
  const System named = load_system("dgx-h100", preset_default);
  EXPECT_EQ(named.gpu.attention_kernel, preset_default);
  EXPECT_EQ(named.gpu.attention_fwd_efficiency, plain.gpu.attention_fwd_efficiency);
  EXPECT_EQ(named.gpu.attention_bwd_efficiency, plain.gpu.attention_bwd_efficiency);
  EXPECT_EQ(named.attention_kernel_why, "as asked (--attention-kernel)");
  // Asking for none is the system's framework's kernel (the default framework, DeepSpeed ALST,
  // runs FlashAttention-2), not the preset's own default.
  const System def = load_system("dgx-h100", "");
  EXPECT_EQ(def.profile.name, kDefaultFramework);
  EXPECT_EQ(def.gpu.attention_kernel, "flash-attention-2");
  EXPECT_DOUBLE_EQ(def.gpu.attention_fwd_efficiency, figure("h100-sxm", "flash-attention-2", "attention_fwd_efficiency"));
  EXPECT_EQ(def.attention_kernel_why, "deepspeed-alst runs it");
  // The A100 presets' own figures are FlashAttention-2's.
  EXPECT_EQ(load_system("dgx-a100-40g", "").gpu.attention_kernel, "flash-attention-2");
}

// A framework names its attention kernel per GPU (framework.hpp: AttentionChoice), so --framework
// alone predicts the kernel it runs: PyTorch's SDPA (Hugging Face) and Transformer Engine
// (Megatron-Core) pick cuDNN on Hopper and FlashAttention-2 on Ampere; seqpar-train runs cuDNN, and
// on a GPU preset without cuDNN figures the preset's default is used and the reason says so.
TEST(AttentionKernels, AFrameworkPicksItsKernelByComputeCapability) {
  struct Case {
    const char *system, *framework, *kernel, *why;
  };
  const Case cases[] = {
      {"dgx-h100", "hf-transformers", "cudnn", "hf-transformers runs it on compute capability 9.0"},
      {"hgx-h200", "hf-transformers", "cudnn", "hf-transformers runs it on compute capability 9.0"},
      {"dgx-a100-80g", "hf-transformers", "flash-attention-2", "hf-transformers runs it"},
      {"l20-pcie", "hf-transformers", "flash-attention-2", "hf-transformers runs it"},
      {"dgx-h100", "megatron-core", "cudnn", "megatron-core runs it on compute capability 9.0"},
      {"dgx-a100-80g", "megatron-core", "flash-attention-2", "megatron-core runs it"},
      {"dgx-h100", "seqpar-train", "cudnn", "seqpar-train runs it"},
      {"dgx-a100-80g", "seqpar-train", "flash-attention-2",
       "the GPU preset's default: seqpar-train runs cudnn, for which gpu 'a100-80g' has no figures"},
      {"dgx-h100", "deepspeed-alst", "flash-attention-2", "deepspeed-alst runs it"},
  };
  for (const Case& c : cases) {
    const System s = load_system(c.system, "", load_framework(c.framework));
    EXPECT_EQ(s.gpu.attention_kernel, c.kernel) << c.system << " " << c.framework;
    EXPECT_EQ(s.attention_kernel_why, c.why) << c.system << " " << c.framework;
  }
  // --attention-kernel still wins.
  const System asked = load_system("dgx-h100", "flash-attention-3", load_framework("hf-transformers"));
  EXPECT_EQ(asked.gpu.attention_kernel, "flash-attention-3");
  EXPECT_DOUBLE_EQ(asked.gpu.attention_fwd_efficiency, load_system("dgx-h100").gpu.attention_fwd_efficiency);
}

// A framework file's kernel choices are checked: a name, a list of choices, each with a kernel and
// compute capabilities in CUDA's "major.minor" spelling.
TEST(AttentionKernels, AFrameworksKernelChoicesAreChecked) {
  json f = preset_document("framework", "hf-transformers");
  auto message = [&](const json& choice) {
    json g = f;
    g["attention_kernel"] = choice;
    try {
      (void)framework_from_json(g, "fw.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(json::array()).find("fw.json: attention_kernel: must be a kernel name or an object"), std::string::npos);
  EXPECT_NE(message(json{{"choices", json::array()}}).find("field 'choices' must be a non-empty list"), std::string::npos);
  EXPECT_NE(message(json{{"choices", {{{"kernel", "cudnn"}, {"compute_capability", {"9"}}}}}}).find("\"major.minor\""),
            std::string::npos);
  EXPECT_NE(message(json{{"choices", {{{"compute_capability", {"9.0"}}}}}}).find("choices[0].kernel: must be the name"),
            std::string::npos);
  EXPECT_EQ(message(json{{"choices", {{{"kernel", "cudnn"}, {"compute_capability", {"9.0"}}}}}}), "no error");
  EXPECT_EQ(message("cudnn"), "no error");
}

TEST(AttentionKernels, ChosenKernelCarriesItsFigures) {
  for (const char* k : {"flash-attention-2", "cudnn"}) {
    const System s = load_system("dgx-h100", k);
    EXPECT_EQ(s.gpu.attention_kernel, k);
    EXPECT_DOUBLE_EQ(s.gpu.attention_fwd_efficiency, figure("h100-sxm", k, "attention_fwd_efficiency"));
    EXPECT_DOUBLE_EQ(s.gpu.attention_bwd_efficiency, figure("h100-sxm", k, "attention_bwd_efficiency"));
    EXPECT_EQ(s.gpu.bf16_flops, load_system("dgx-h100").gpu.bf16_flops);  // only attention changes
    EXPECT_EQ(s.gpu.gemm_efficiency, load_system("dgx-h100").gpu.gemm_efficiency);
  }
}

// FlashAttention-2 against cuDNN: the kernel time (launch overhead aside) scales by the inverse
// ratio of their figures, in both directions.
TEST(AttentionKernels, Fa2VersusCudnnScalesAttentionTimeByTheirFigures) {
  const Gpu fa2 = load_system("dgx-h100", "flash-attention-2").gpu;
  const Gpu cudnn = load_system("dgx-h100", "cudnn").gpu;
  const double flops = attention_flops(1, 16384, 16384, 32, 128);
  for (bool bwd : {false, true}) {
    const char* key = bwd ? "attention_bwd_efficiency" : "attention_fwd_efficiency";
    const double t_fa2 = attention_time(fa2, flops, 16384, bwd, {128, true}) - fa2.kernel_overhead_s;
    const double t_cudnn = attention_time(cudnn, flops, 16384, bwd, {128, true}) - cudnn.kernel_overhead_s;
    EXPECT_NEAR(t_fa2 / t_cudnn, figure("h100-sxm", "cudnn", key) / figure("h100-sxm", "flash-attention-2", key), 1e-12)
        << key;
    EXPECT_GT(t_fa2, t_cudnn) << key;
  }
}

// A kernel that materialises the scores (standard attention) takes the same time per score at any
// head dimension: its FLOP efficiency scales with head_dim over the figure's. A model with heads of
// 64 has twice the scores of one with heads of 128 at the same width, and its attention takes twice
// as long, where a flash kernel's takes the same (its time follows the FLOPs).
TEST(AttentionKernels, ScoreBoundKernelTakesTheSameTimePerScoreAtAnyHeadDim) {
  json doc = preset_document("gpu", "a100-80g");
  doc["attention_kernels"]["standard"] = {{"attention_fwd_efficiency", 0.14}, {"attention_bwd_efficiency", 0.12},
                                          {"attention_score_bound_head_dim", 128}};
  const Gpu g = gpu_from_json(gpu_document_with_attention_kernel(doc, "standard", "gpu.json"), "gpu.json");
  ASSERT_EQ(g.attention_score_bound_head_dim, 128);
  for (bool bwd : {false, true}) {
    const double eff = bwd ? 0.12 : 0.14;
    EXPECT_DOUBLE_EQ(attention_curve(g, bwd, {128, true}).efficiency, eff);
    EXPECT_DOUBLE_EQ(attention_curve(g, bwd, {96, true}).efficiency, eff * 96 / 128);
    EXPECT_DOUBLE_EQ(attention_curve(g, bwd, {0, true}).efficiency, eff);  // head dim not given
    auto per_score = [&](const Gpu& gpu, int d) {  // 2048 hidden over heads of d, batch 8 at 2K
      const double heads = 2048.0 / d, flops = attention_flops(8, 2048, 2048, heads, d);
      return (attention_time(gpu, flops, 2048, bwd, {d, true}) - gpu.kernel_overhead_s) / (8 * heads * 2048.0 * 2048);
    };
    EXPECT_NEAR(per_score(g, 64) / per_score(g, 128), 1.0, 1e-12);
    const Gpu flash = load_system("dgx-a100-80g").gpu;
    EXPECT_EQ(flash.attention_score_bound_head_dim, 0);
    EXPECT_NEAR(per_score(flash, 64) / per_score(flash, 128), 0.5, 1e-12);
  }
  // The figure belongs to its kernel: choosing one without it drops the default's.
  doc["attention_score_bound_head_dim"] = 128;
  doc["attention_kernels"]["fused"] = {{"attention_fwd_efficiency", 0.5}, {"attention_bwd_efficiency", 0.4}};
  EXPECT_FALSE(gpu_document_with_attention_kernel(doc, "fused", "gpu.json").contains("attention_score_bound_head_dim"));
  doc["attention_kernels"]["standard"]["attention_score_bound_head_dim"] = -1;
  EXPECT_THROW((void)gpu_from_json(gpu_document_with_attention_kernel(doc, "standard", "gpu.json"), "gpu.json"), Error);
}

// a100-80g's standard-attention kernels are score-bound at FlashAttention-2's figure's head dim, and
// Megatron-LM 2021's (megatron-unfused) moves the benchmark's bytes per score in the forward and 17
// against 14 in the backward (its attention dropout): the figures say so.
TEST(AttentionKernels, A100StandardAttentionKernelsAreScoreBound) {
  for (const char* k : {"pytorch-unfused", "megatron-unfused"}) {
    EXPECT_EQ(figure("a100-80g", k, "attention_score_bound_head_dim"), 128) << k;
    EXPECT_EQ(load_system("dgx-a100-80g", k).gpu.attention_score_bound_head_dim, 128) << k;
  }
  EXPECT_DOUBLE_EQ(figure("a100-80g", "megatron-unfused", "attention_fwd_efficiency"),
                   figure("a100-80g", "pytorch-unfused", "attention_fwd_efficiency"));
  EXPECT_NEAR(figure("a100-80g", "megatron-unfused", "attention_bwd_efficiency"),
              figure("a100-80g", "pytorch-unfused", "attention_bwd_efficiency") * 14 / 17, 0.0005);
}

TEST(AttentionKernels, UnknownKernelIsRefusedNamingThePresetsKernels) {
  const std::string e = error_of("dgx-h100", "fa9");
  EXPECT_NE(e.find("unknown attention kernel 'fa9'"), std::string::npos) << e;
  for (const char* k : {"flash-attention-3 (default)", "flash-attention-2", "cudnn"})
    EXPECT_NE(e.find(k), std::string::npos) << e;
  // No cuDNN figure with a source for the A100 presets: absent, so refused.
  const std::string a = error_of("dgx-a100-80g", "cudnn");
  EXPECT_NE(a.find("unknown attention kernel 'cudnn'"), std::string::npos) << a;
  EXPECT_NE(a.find("flash-attention-2 (default)"), std::string::npos) << a;
}

TEST(AttentionKernels, DocumentRulesNameTheField) {
  json g = preset_document("gpu", "h100-sxm");
  g["attention_kernels"]["fa-x"] = {{"attention_fwd_efficiency", 0.5}};
  try {
    (void)gpu_document_with_attention_kernel(g, "fa-x", "gpu.json");
    ADD_FAILURE() << "a kernel without a backward figure was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpu.json: attention_kernels.fa-x: missing field 'attention_bwd_efficiency'"),
              std::string::npos)
        << e.what();
  }
  g["attention_kernels"]["fa-x"]["attention_bwd_efficiency"] = 7.0;  // above 1: gpu_from_json's range rule
  EXPECT_THROW((void)gpu_from_json(gpu_document_with_attention_kernel(g, "fa-x", "gpu.json"), "gpu.json"), Error);
  json no_default = preset_document("gpu", "h100-sxm");
  no_default.erase("attention_kernel");
  EXPECT_THROW((void)gpu_document_with_attention_kernel(no_default, "cudnn", "gpu.json"), Error);
  // Calibrated curves were measured on the default kernel: another kernel drops them.
  json cal = preset_document("gpu", "h100-sxm");
  cal["attention_curves"] = json::array();
  EXPECT_FALSE(gpu_document_with_attention_kernel(cal, "cudnn", "gpu.json").contains("attention_curves"));
  EXPECT_TRUE(gpu_document_with_attention_kernel(cal, "", "gpu.json").contains("attention_curves"));
}

TEST(AttentionKernels, PublishedRunRefusesAnUnknownKernel) {
  const json j = json::parse(R"({"runs": [{"id": "x", "source": "s", "configuration": "c", "model": "llama3-8b",
    "system": "dgx-h100", "attention_kernel": "fa9", "plan": {"method": "ulysses", "gpus": 1, "seq_len": 4096, "sp": 1},
    "measure": "step_time_s", "published": 1.0, "status": "in_band"}]})");
  try {
    (void)published_runs_from_json(j, "runs.json");
    ADD_FAILURE() << "unknown kernel accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run 'x': "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("unknown attention kernel 'fa9'"), std::string::npos) << e.what();
  }
}

TEST(AttentionKernels, CliOptionOnSimulateAdviseMaxlenSweep) {
  const auto fa2 = testing::seqpar("simulate --seq-len 32K --sp 8 --gpus 8 --attention-kernel flash-attention-2 --json");
  ASSERT_EQ(fa2.code, 0) << fa2.err;
  const auto cudnn = testing::seqpar("simulate --seq-len 32K --sp 8 --gpus 8 --attention-kernel cudnn --json");
  ASSERT_EQ(cudnn.code, 0) << cudnn.err;
  const json a = fa2.json(), b = cudnn.json();
  EXPECT_EQ(a["system"]["attention_kernel"], "flash-attention-2");
  EXPECT_EQ(b["system"]["attention_kernel"], "cudnn");
  EXPECT_GT(a["step_time_s"].get<double>(), b["step_time_s"].get<double>());
  const auto presets = testing::seqpar("presets --kind gpu");  // each GPU's kernels, default first
  ASSERT_EQ(presets.code, 0) << presets.err;
  EXPECT_NE(presets.out.find("flash-attention-3, cudnn, flash-attention-2"), std::string::npos) << presets.out;
  for (const char* cmd : {"simulate --seq-len 32K", "advise --seq-len 32K", "maxlen", "sweep --seq-len 32K --out /tmp"}) {
    const auto r = testing::seqpar(std::string(cmd) + " --attention-kernel fa9");
    EXPECT_EQ(r.code, 2) << cmd;
    EXPECT_NE(r.err.find("unknown attention kernel 'fa9'"), std::string::npos) << cmd << ": " << r.err;
  }
}

}  // namespace
}  // namespace seqpar::sim

// The simulator against published runs. The maximum-length test checks the memory model; the
// runs in sim/published/runs.json (ALST Table 1 step times, ring-flash-attention's benchmark,
// DeepSpeed-Ulysses' throughput) check the time model: every run marked in_band must be predicted
// within kPublishedBand, and every open finding must still miss (so the data is updated the day
// the model term is fixed). The figures and their sources live in the data file, not here.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "cli_runner.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/attention_kernels.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/published.hpp"
#include "seqpar/sim/simulate.hpp"

namespace seqpar::sim {
namespace {

// Bekman et al., "Arctic Long Sequence Training" (arXiv:2506.13996, 2025) trained Llama-3-8B with
// Ulysses SP, ZeRO-3, offloaded checkpoints and optimizer, TiledMLP and tiled loss on H100 80 GB:
// 500K tokens on 1 GPU, 3.7M on one 8-GPU node, 15M on 4 nodes (snowflakedb/ArcticTraining,
// projects/sequence-parallelism/run-h100-sp{1,8,32}-llama-8b.yml; the 1-GPU recipe also offloads
// the parameters, offload_param). With the framework those runs used (deepspeed-alst: DeepSpeed
// ZeRO-3 bf16, Liger kernels, FlashAttention-2), each published length fits, and maxlen is at most
// 10% below it: a planner that says "does not fit" where ALST trained would send users away.
TEST(Published, AlstMaximumSequenceLengthsOnH100) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100", "", load_framework("deepspeed-alst"));
  ASSERT_EQ(s.gpu.attention_kernel, "flash-attention-2");  // the framework's kernel
  for (auto [gpus, published] : {std::pair{1, std::int64_t{500'000}}, {8, std::int64_t{3'700'000}}, {32, std::int64_t{15'000'000}}}) {
    Plan p;
    p.method = Method::ulysses;
    p.gpus = p.sp = p.ulysses_degree = gpus;
    p.mem = {3, Checkpoint::full, true, true, true, true};
    p.mem.offload_params = gpus == 1;
    const std::int64_t gran = seq_granularity(p);
    p.seq_len = (published + gran - 1) / gran * gran;
    const Result at_published = simulate(m, s, p);
    EXPECT_TRUE(at_published.valid && at_published.fits)
        << gpus << " GPUs: " << published << " tokens predicted not to fit: peak "
        << at_published.peak_memory_bytes() / (1 << 30) << " GiB of " << at_published.capacity_bytes / (1 << 30);
    const double predicted = double(max_seq_len(m, s, p));
    EXPECT_GE(predicted, 0.9 * double(published)) << gpus << " GPUs: maxlen " << predicted << " tokens, published " << published;
  }
}

// What ended ALST's lengths (issue 33): not host memory for Llama-8B (about 1.1 TB offloaded at
// 3.7M on a node of 2 TB), but Liger-Kernel's RMSNorm and RoPE, which before 0.6.1 computed their
// row offsets in 32 bits: a rank's [1, S, 4096] hidden tensor of 2^31 elements is 524,288 tokens,
// where the 1-GPU recipe's 555,000 crashed ("an illegal memory access"; Liger-Kernel issue 803,
// fixed in PR 804; ArcticTraining run-h100-sp1-llama-8b.yml). With that limit, as the paper's
// software had it, on deepspeed-alst: maxlen ends on the rule, not on memory, and names it; on 8
// GPUs at 8 x 524,288 = 4,194,304 tokens, 13% above the published 3.7M (the recipe's 3.8M).
TEST(Published, AlstLengthsEndOnLigersThirtyTwoBitRowOffsets) {
  const Model m = load_model("llama3-8b");
  nlohmann::json fw = preset_document("framework", "deepspeed-alst");
  fw["index_limits"] = nlohmann::json::array(
      {{{"tensor", "hidden"}, {"max_elements", 2147483648.0}, {"kernel", "Liger-Kernel's RMSNorm and RoPE before 0.6.1"},
        {"source", "Liger-Kernel issue 803 and PR 804"}}});
  const System s = load_system("dgx-h100", "", framework_from_json(fw, "deepspeed-alst as ALST's paper ran it"));
  for (auto [gpus, published] : {std::pair{1, std::int64_t{500'000}}, {8, std::int64_t{3'700'000}}}) {
    Plan p;
    p.method = Method::ulysses;
    p.gpus = p.sp = p.ulysses_degree = gpus;
    p.mem = {3, Checkpoint::full, true, true, true, true};
    p.mem.offload_params = gpus == 1;
    const MaxLenSearch found = max_seq_len_search(m, s, p);
    EXPECT_EQ(found.max_seq_len, std::int64_t{524'288} * gpus) << gpus << " GPUs";
    EXPECT_EQ(found.limit, LengthLimit::rule) << gpus << " GPUs: " << found.limit_why;
    EXPECT_NE(found.limit_why.find("Liger-Kernel's RMSNorm and RoPE before 0.6.1"), std::string::npos) << found.limit_why;
    EXPECT_LE(double(found.max_seq_len), 1.15 * double(published)) << gpus << " GPUs";
    // Host memory is checked and holds: the offloaded checkpoints and states of one node at that length.
    p.seq_len = found.max_seq_len;
    const Result r = simulate(m, s, p);
    EXPECT_GT(r.host_node_bytes, 0);
    EXPECT_TRUE(r.host_fits) << r.host_node_bytes / (1 << 30) << " GiB of " << r.host_capacity_bytes / (1 << 30);
  }
  // Without the limit (Liger 0.6.1 and later, the built-in profile) the 8-GPU length is memory's.
  Plan p;
  p.method = Method::ulysses;
  p.gpus = p.sp = p.ulysses_degree = 8;
  p.mem = {3, Checkpoint::full, true, true, true, true};
  const MaxLenSearch current = max_seq_len_search(m, load_system("dgx-h100", "", load_framework("deepspeed-alst")), p);
  EXPECT_EQ(current.limit, LengthLimit::gpu_memory) << current.limit_why;
  EXPECT_GT(current.max_seq_len, std::int64_t{524'288} * 8);
}

// Host memory ends a length where the offloaded bytes outgrow the node: the same plan on a node
// with a quarter of DGX H100's 2 TB.
TEST(Published, HostMemoryEndsALengthWhereTheNodeIsSmall) {
  const Model m = load_model("llama3-8b");
  nlohmann::json sys = preset_document("system", "dgx-h100");
  sys["host_memory_gib"] = 512;
  const System s = system_from_json(sys, "small host", "", load_framework("deepspeed-alst"));
  Plan p;
  p.method = Method::ulysses;
  p.gpus = p.sp = p.ulysses_degree = 8;
  p.mem = {3, Checkpoint::full, true, true, true, true};
  const MaxLenSearch found = max_seq_len_search(m, s, p);
  EXPECT_EQ(found.limit, LengthLimit::host_memory) << found.limit_why;
  EXPECT_NE(found.limit_why.find("of the node's 512.0 GiB"), std::string::npos) << found.limit_why;
  p.seq_len = found.max_seq_len;
  EXPECT_TRUE(simulate(m, s, p).fits);
  p.seq_len += seq_granularity(p);
  const Result over = simulate(m, s, p);
  EXPECT_TRUE(over.gpu_fits);
  EXPECT_FALSE(over.host_fits);
  EXPECT_FALSE(over.fits);
}

TEST(Published, EveryRunIsPredictedAndInBandUnlessAnOpenFinding) {
  const std::vector<PublishedRun> runs = builtin_published_runs();
  ASSERT_FALSE(runs.empty());
  for (const PublishedRun& run : runs) {
    const PublishedComparison c = compare_published(run);
    ASSERT_TRUE(c.errors.empty()) << run.id << ": the simulator rejects the published configuration: " << c.errors.front();
    ASSERT_GT(c.predicted, 0) << run.id;
    const std::string line = run.id + ": predicted " + std::to_string(c.predicted) + " " +
                             std::string(to_string(run.measure)) + ", published " + std::to_string(c.published) +
                             ", error " + std::to_string(100 * c.error) + "%";
    if (run.expect_in_band)
      EXPECT_TRUE(c.in_band) << line << " (outside the " << 100 * run.band << "% band)";
    else
      EXPECT_FALSE(c.in_band) << line << ": now inside the band; mark it in_band in sim/published/runs.json "
                              << "and drop it from the README's open findings";
    std::printf("%s\n", line.c_str());
  }
}

// The DeepSpeed-Ulysses blog reports each length at "the sequence parallelism degree and
// micro-batch size that produced the best performance (measured as TFLOPs)" without naming them,
// so each dsu- run's plan must be the simulator's best Ulysses plan that fits (within 1%, for
// near-ties): a plan picked to land in the band, or left behind by a model change, fails here.
TEST(Published, DeepSpeedUlyssesRunsUseTheBestPlanThatFits) {
  int checked = 0;
  for (const PublishedRun& run : builtin_published_runs()) {
    if (run.id.rfind("dsu-", 0) != 0) continue;
    ++checked;
    const PublishedComparison recorded = compare_published(run);
    ASSERT_TRUE(recorded.errors.empty()) << run.id << ": " << recorded.errors.front();
    EXPECT_TRUE(recorded.fits) << run.id << ": the recorded plan does not fit";
    double best = 0;
    std::string best_plan;
    for (int sp = 2; sp <= run.plan.gpus; sp *= 2) {  // Ulysses needs SP > 1
      for (int mb = 1; mb <= 16; mb *= 2) {
        PublishedRun alt = run;
        alt.plan.sp = alt.plan.ulysses_degree = sp;
        alt.plan.micro_batch = mb;
        const PublishedComparison c = compare_published(alt);
        if (!c.errors.empty() || !c.fits || c.predicted <= best) continue;
        best = c.predicted;
        best_plan = "Ulysses " + std::to_string(sp) + ", micro-batch " + std::to_string(mb);
      }
    }
    EXPECT_GE(recorded.predicted, 0.99 * best) << run.id << ": recorded plan predicts " << recorded.predicted
                                               << " TFLOP/s, the best plan (" << best_plan << ") " << best;
  }
  EXPECT_EQ(checked, 3) << "the three DeepSpeed-Ulysses runs (16K, 32K, 64K)";
}
}  // namespace
}  // namespace seqpar::sim

namespace seqpar::sim {
namespace {

nlohmann::json one_run() {
  return nlohmann::json::parse(R"({"runs": [{"id": "x", "source": "s", "configuration": "c", "model": "llama3-8b",
    "system": "dgx-h100", "plan": {"method": "ulysses", "gpus": 1, "seq_len": 8192, "sp": 1},
    "measure": "attention_iterations_per_s", "published": 10, "status": "in_band"}]})");
}

std::string error_of(const nlohmann::json& j) {
  try {
    published_runs_from_json(j, "runs.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Published, MalformedRunsNameTheRunAndTheField) {
  EXPECT_EQ(published_runs_from_json(one_run(), "runs.json").size(), 1u);
  auto j = one_run();
  j["runs"][0]["status"] = "open_finding";  // an open finding must say why it misses
  EXPECT_NE(error_of(j).find("run 'x': field 'finding'"), std::string::npos) << error_of(j);
  j = one_run();
  j["runs"][0]["published"] = -1;
  EXPECT_NE(error_of(j).find("run 'x': field 'published' must be a positive number"), std::string::npos) << error_of(j);
  j = one_run();
  j["runs"][0]["measure"] = "tokens";
  EXPECT_NE(error_of(j).find("field 'measure' is 'tokens'"), std::string::npos) << error_of(j);
  j = one_run();
  j["runs"].push_back(j["runs"][0]);
  EXPECT_NE(error_of(j).find("run id 'x' appears twice"), std::string::npos) << error_of(j);
}

// WLB-LLM's CP sharding speed-ups (document_layer_speedup): one document a sequence leaves the two
// shardings the same layout, so the speed-up is exactly 1; a mix of lengths on the per-sequence
// sharding loads one rank most, so per-document sharding is faster; the workload's fields go with
// the measure alone and are checked when read.
TEST(Published, DocumentLayerSpeedupComparesTheTwoShardingsOfOneLayer) {
  std::vector<PublishedRun> runs;
  for (const PublishedRun& r : builtin_published_runs())
    if (r.measure == PublishedMeasure::document_layer_speedup) runs.push_back(r);
  ASSERT_EQ(runs.size(), 2u);
  for (PublishedRun r : runs) {  // a copy: each is changed below
    EXPECT_EQ(r.balancer, Balancer::per_document);
    EXPECT_EQ(r.baseline_balancer, Balancer::zigzag);
    const PublishedComparison c = compare_published(r);
    ASSERT_TRUE(c.errors.empty()) << c.errors.front();
    EXPECT_GT(c.predicted, 1.05) << r.id;
    r.documents = "fixed:" + std::to_string(r.plan.seq_len);
    r.doc_seed = ::testing::UnitTest::GetInstance()->random_seed();
    EXPECT_EQ(compare_published(r).predicted, 1.0) << r.id << ": one document a sequence";
    r.baseline_balancer = Balancer::per_document;
    r.documents = "uniform:100:9000";
    EXPECT_EQ(compare_published(r).predicted, 1.0) << r.id << ": a balancer against itself";
  }
  nlohmann::json j = one_run();
  j["runs"][0]["documents"] = {{"spec", "fixed:1K"}};
  EXPECT_NE(error_of(j).find("field 'documents' goes with measures document_layer_speedup and packing_imbalance"),
            std::string::npos)
      << error_of(j);
  j["runs"][0]["measure"] = "document_layer_speedup";
  j["runs"][0]["balancer"] = "per-document";
  j["runs"][0]["baseline_balancer"] = "diagonal";
  EXPECT_NE(error_of(j).find("baseline_balancer"), std::string::npos) << error_of(j);
  j["runs"][0]["baseline_balancer"] = "zigzag";
  j["runs"][0]["documents"] = {{"spec", "lognormal:x:1"}};
  EXPECT_NE(error_of(j).find("run 'x': documents: "), std::string::npos) << error_of(j);
}

// WLB-LLM's packing imbalance degree (packing_imbalance): equal micro-batches give exactly 1;
// balanced packing over more global batches never leaves it higher on the built-in runs (the
// trend of the paper's Table 2); micro_batches is checked when read.
TEST(Published, PackingImbalanceIsTheLargestMicroBatchOverTheMean) {
  std::vector<PublishedRun> runs;
  for (const PublishedRun& r : builtin_published_runs())
    if (r.measure == PublishedMeasure::packing_imbalance) runs.push_back(r);
  ASSERT_EQ(runs.size(), 5u);
  std::vector<double> got;
  for (const PublishedRun& r : runs) {
    const PublishedComparison c = compare_published(r);
    ASSERT_TRUE(c.errors.empty()) << c.errors.front();
    EXPECT_GT(c.predicted, 1.0) << r.id;
    got.push_back(c.predicted);
  }
  for (std::size_t i = 2; i < got.size(); ++i) EXPECT_LT(got[i], got[i - 1]) << runs[i].id;
  PublishedRun same = runs.front();
  same.documents = "fixed:" + std::to_string(same.plan.seq_len / 8);
  same.doc_seed = ::testing::UnitTest::GetInstance()->random_seed();
  EXPECT_DOUBLE_EQ(compare_published(same).predicted, 1.0) << "every micro-batch alike";
  nlohmann::json j = one_run();
  j["runs"][0]["measure"] = "packing_imbalance";
  j["runs"][0]["documents"] = {{"spec", "fixed:1K"}, {"batches", 8}};
  j["runs"][0]["micro_batches"] = 3;
  EXPECT_NE(error_of(j).find("field 'micro_batches' must be a whole number from 2 that divides documents.batches (8)"),
            std::string::npos)
      << error_of(j);
}

// The share divides one GPU's rate: ring-flash-attention's 'theoretic flash_attn' column.
TEST(Published, ShareDividesTheAttentionRate) {
  PublishedRun run = published_runs_from_json(one_run(), "runs.json").front();
  const double whole = compare_published(run).predicted;
  run.share = 8;
  EXPECT_DOUBLE_EQ(compare_published(run).predicted, whole / 8);
}

// Megatron-DeepSpeed's throughput_calculator by hand for GPT-7B at 16K with checkpointing.
TEST(Published, MegatronFlopsFormula) {
  const double h = 4096, s = 16384, L = 32, V = 50257;
  const double expected = 24 * 4 * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
  EXPECT_DOUBLE_EQ(megatron_flops_per_sequence(32, 4096, 50257, s, true), expected);
  EXPECT_DOUBLE_EQ(megatron_flops_per_sequence(32, 4096, 50257, s, false), expected * 3 / 4);
}

// `seqpar published` shows every built-in run with the library's prediction and error, and names
// the file and field of a malformed --runs file.
TEST(Published, CliShowsPredictionBesidePublished) {
  const auto r = testing::seqpar("published --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = r.json();
  const auto runs = builtin_published_runs();
  ASSERT_EQ(j["runs"].size(), runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto c = compare_published(runs[i]);
    EXPECT_EQ(j["runs"][i]["id"], runs[i].id);
    EXPECT_DOUBLE_EQ(j["runs"][i]["predicted"].get<double>(), c.predicted);
    EXPECT_DOUBLE_EQ(j["runs"][i]["error"].get<double>(), c.error);
  }
  const auto table = testing::seqpar("published");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find(runs.front().id), std::string::npos);
  EXPECT_NE(table.out.find(runs.front().source), std::string::npos);
  const auto bad = testing::seqpar("published --runs /nonexistent/runs.json");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("/nonexistent/runs.json"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace seqpar::sim

namespace seqpar::sim {
namespace {

// USP (arXiv:2405.07719, Table 6): SP over all 16 GPUs of two 8x A800 nodes at 64K and 80K, each
// hybrid's measured throughput against pure ring. The runs (sim/published/runs.json) hold each
// ratio within the band; here the ranking the paper measured: every hybrid beats pure ring, and
// U2xR8 trails U8xR2 and U4xR4 (measured by 5% or more at both lengths; U8xR2 and U4xR4 differ by
// 1%, within the noise, so their order is not pinned).
TEST(Published, UspRanksTheHybridsAbovePureRingAsMeasured) {
  std::map<std::int64_t, std::map<std::string, PublishedComparison>> by_len;
  for (const PublishedRun& run : builtin_published_runs())
    if (run.id.rfind("usp-", 0) == 0) {
      const PublishedComparison c = compare_published(run);
      ASSERT_TRUE(c.errors.empty()) << run.id;
      by_len[run.plan.seq_len][fmt::format("U{}R{}", run.plan.ulysses_degree, run.plan.ring_degree)] = c;
    }
  ASSERT_EQ(by_len.size(), 2u);
  for (auto& [n, runs] : by_len) {
    ASSERT_EQ(runs.size(), 3u) << n;
    for (auto& [name, c] : runs) {
      EXPECT_GT(c.published, 1.0) << name;
      EXPECT_GT(c.predicted, 1.0) << n << " " << name << ": the hybrid is predicted no faster than pure ring";
      EXPECT_TRUE(c.in_band) << n << " " << name;
    }
    for (const char* faster : {"U8R2", "U4R4"}) {
      ASSERT_GT(runs[faster].published, runs["U2R8"].published * 1.05) << "the paper's gap this test pins";
      EXPECT_GT(runs[faster].predicted, runs["U2R8"].predicted) << n << " " << faster;
    }
  }
}

nlohmann::json ratio_run() {
  nlohmann::json j = nlohmann::json::parse(R"({"runs": [{"id": "r", "source": "s", "configuration": "c",
    "model": "llama3-8b", "system": "a800-nvlink",
    "plan": {"method": "hybrid", "gpus": 16, "seq_len": 65536, "sp": 16, "ulysses_degree": 8, "ring_degree": 2, "zero": 1},
    "measure": "throughput_ratio", "published": 220,
    "baseline": {"label": "ring", "published": 200,
                 "plan": {"method": "ring-zigzag", "gpus": 16, "seq_len": 65536, "sp": 16, "ulysses_degree": 1, "ring_degree": 16, "zero": 1}},
    "status": "in_band"}]})");
  return j;
}

TEST(Published, ThroughputRatiosCompareStepTimesAtTheSameBatch) {
  PublishedRun run = published_runs_from_json(ratio_run(), "runs.json").front();
  const PublishedComparison c = compare_published(run);
  ASSERT_TRUE(c.errors.empty());
  EXPECT_DOUBLE_EQ(c.published, 220.0 / 200.0);
  const System s = load_system("a800-nvlink");
  const Model m = load_model("llama3-8b");
  EXPECT_DOUBLE_EQ(c.predicted, simulate(m, s, run.baseline->plan).step_time_s / simulate(m, s, run.plan).step_time_s);

  // A system patch changes the preset where the source's hardware differs.
  auto j = ratio_run();
  j["runs"][0]["system_patch"] = {{"inter_node", {{"nics_per_node", {{"value", 8}, {"source", "s"}}}}}};
  const PublishedRun patched = published_runs_from_json(j, "runs.json").front();
  EXPECT_EQ(published_system(patched).nics_per_node, 8);
  EXPECT_NE(compare_published(patched).predicted, c.predicted);

  auto error_with = [](const std::function<void(nlohmann::json&)>& change) {
    auto k = ratio_run();
    change(k["runs"][0]);
    return error_of(k);
  };
  EXPECT_NE(error_with([](auto& r) { r.erase("baseline"); }).find("field 'baseline' goes with measures throughput_ratio "
                                                               "and step_time_ratio"),
            std::string::npos);
  // A baseline model only where the ratio is of step times; a band only with whose it is.
  EXPECT_NE(error_with([](auto& r) { r["baseline"]["model"] = "llama2-7b"; }).find("goes with measure step_time_ratio"),
            std::string::npos);
  EXPECT_NE(error_with([](auto& r) { r["band"] = 0.15; }).find("field 'band_source' must be a non-empty string"),
            std::string::npos);
  EXPECT_NE(error_with([](auto& r) { r["band"] = 1.5; }).find("field 'band' must be a number between 0 and 1"),
            std::string::npos);
  EXPECT_NE(error_with([](auto& r) { r["measure"] = "step_time_s"; }).find("field 'baseline'"), std::string::npos);
  EXPECT_NE(error_with([](auto& r) { r["baseline"]["plan"]["seq_len"] = 32768; }).find("run 'r': baseline: the plan must"),
            std::string::npos);
  EXPECT_NE(error_with([](auto& r) { r["baseline"]["published"] = 0; }).find("baseline: field 'published'"),
            std::string::npos);
  EXPECT_NE(error_with([](auto& r) { r["system_patch"] = 3; }).find("field 'system_patch' must be an object"),
            std::string::npos);
  EXPECT_NE(error_with([](auto& r) { r["system_patch"] = {{"gpus_per_node", {{"value", -1}}}}; }).find("run 'r':"),
            std::string::npos);
}

// Step-time ratios across models (TRL's 1M-token runs, issue 37): the run's step over its baseline's,
// each on its own model, against the published seconds' ratio; the run's own band decides.
TEST(Published, StepTimeRatiosCompareTwoModelsAtTheSamePlan) {
  auto j = ratio_run();
  nlohmann::json& r = j["runs"][0];
  r["measure"] = "step_time_ratio";
  r["published"] = 30;
  r["baseline"]["published"] = 10;
  r["baseline"]["model"] = "llama3-70b";
  r["baseline"]["plan"] = r["plan"];
  r["band"] = 0.05;
  r["band_source"] = "a test";
  const PublishedRun run = published_runs_from_json(j, "runs.json").front();
  const PublishedComparison c = compare_published(run);
  ASSERT_TRUE(c.errors.empty());
  EXPECT_DOUBLE_EQ(c.published, 3.0);
  const System s = load_system("a800-nvlink");
  EXPECT_DOUBLE_EQ(c.predicted, simulate(load_model("llama3-8b"), s, run.plan).step_time_s /
                                    simulate(load_model("llama3-70b"), s, run.plan).step_time_s);
  EXPECT_EQ(c.in_band, std::abs(c.predicted / 3.0 - 1.0) <= 0.05);
  EXPECT_DOUBLE_EQ(run.band, 0.05);
}

// The MoE checks of issue 37 are in the built-in runs, in band with the bands the issue states.
TEST(Published, MoeChecksOfIssue37AreInTheirBands) {
  int prime_rl = 0, trl = 0;
  for (const PublishedRun& run : builtin_published_runs()) {
    const bool p = run.id.rfind("prime-rl-2418-", 0) == 0, t = run.id.rfind("trl-6845-", 0) == 0;
    if (!p && !t) continue;
    EXPECT_DOUBLE_EQ(run.band, p ? 0.15 : 0.05) << run.id;
    const PublishedComparison c = compare_published(run);
    ASSERT_TRUE(c.errors.empty()) << run.id << ": " << c.errors.front();
    EXPECT_TRUE(c.in_band) << run.id << ": predicted " << c.predicted << " against " << c.published;
    (p ? prime_rl : trl) += 1;
  }
  EXPECT_EQ(prime_rl, 4);  // Ulysses and ring at CP 2 and 4, each against no CP
  EXPECT_EQ(trl, 3);       // Qwen3-0.6B, Qwen3-30B-A3B and Qwen3-32B, each against Qwen3-8B
}

}  // namespace
}  // namespace seqpar::sim

namespace seqpar::sim {
namespace {

// Narayanan et al. (SC21, arXiv:2104.04473) Table 1, the rows without pipeline parallelism: GPT
// 1.7B to 18.4B at tensor-parallel sizes 1, 2, 4, 8 on DGX A100 nodes, 135-142 TFLOP/s per GPU.
// The runs (sim/published/runs.json) hold each figure and each row's finding. This is TP's own
// check: the throughput at t over the t = 1 row's, where what the rows share cancels, against the
// table's nearly flat ratios, within 5%. With the 2021 code's replicated norm regions and its
// score-bound attention counted (the megatron-lm-2021 profile, a100-80g's megatron-unfused) the
// model runs ahead of the table as t grows (+2.6%, +6.6%, +9.0% at t = 2, 4, 8): t = 4 and 8 are
// open findings of this check, outside 5% and inside the published band, so the day a term that
// grows with t is modelled (per-rank GEMM shapes, the all-reduce's bandwidth at these sizes; the
// 18.4B row's finding) this fails until they are moved in. Before, the ratios held within 2.4%
// because the two missing terms cancelled; with FlashAttention-2's figures for the unfused
// attention the ratio fell to 0.83 at t = 8.
TEST(Published, MegatronTensorParallelScalingFollowsTheTable) {
  constexpr double kRatioBand = 0.05;
  std::map<int, PublishedComparison> by_tp;
  for (const PublishedRun& run : builtin_published_runs())
    if (run.id.rfind("megatron-sc21-", 0) == 0) {
      const PublishedComparison c = compare_published(run);
      ASSERT_TRUE(c.errors.empty()) << run.id << ": " << c.errors.front();
      EXPECT_TRUE(c.fits) << run.id << ": ran on 80 GB, predicted not to fit";
      by_tp[run.plan.tp] = c;
    }
  ASSERT_EQ(by_tp.size(), 4u) << "Table 1's rows at t = 1, 2, 4, 8";
  const PublishedComparison& base = by_tp.at(1);
  for (const auto& [tp, c] : by_tp) {
    // The per-GPU figure shares each sequence's FLOPs over its tp x sp GPUs.
    const Model m = model_from_json(c.run.model, c.run.id);
    const Result r = simulate(m, published_system(c.run), c.run.plan);
    const double flops = megatron_flops_per_sequence(m.layers, m.hidden, m.vocab, 2048, true);
    EXPECT_NEAR(c.predicted, flops * c.run.plan.micro_batch * c.run.plan.grad_accum_steps / tp / r.step_time_s / 1e12,
                1e-9 * c.predicted);
    if (tp > 1) {
      EXPECT_GT(r.time.tp_comm, 0) << c.run.id;  // the all-reduces are counted
    }
    const double predicted = c.predicted / base.predicted, published = c.published / base.published;
    const double error = (predicted - published) / published;
    const std::string line = fmt::format("t = {}: predicted {:.3f} of t = 1's throughput, published {:.3f}", tp,
                                         predicted, published);
    if (tp == 4 || tp == 8) {  // open findings of this check
      EXPECT_GT(std::abs(error), kRatioBand) << line << ": now inside 5%; make it a check again";
      EXPECT_LE(std::abs(error), kPublishedBand) << line;
    } else {
      EXPECT_LE(std::abs(error), kRatioBand) << line;
    }
    std::printf("tp %d: %.1f TFLOP/s predicted, %.1f published (%+.1f%%); ratio to tp 1 %.3f predicted, %.3f published (%+.1f%%)\n",
                tp, c.predicted, c.published, 100 * c.error, predicted, published, 100 * error);
  }
}

// A run's framework profile reaches the system it is predicted on.
TEST(Published, FrameworkFieldPutsTheProfileOnTheSystem) {
  auto j = one_run();
  j["runs"][0]["framework"] = "megatron-core";
  const PublishedRun run = published_runs_from_json(j, "runs.json").front();
  EXPECT_EQ(published_system(run).profile.name, "megatron-core");
  EXPECT_NE(published_system(published_runs_from_json(one_run(), "runs.json").front()).profile.name, "megatron-core");
  j["runs"][0]["framework"] = "no-such-framework";
  EXPECT_NE(error_of(j).find("run 'x':"), std::string::npos) << error_of(j);
}

}  // namespace
}  // namespace seqpar::sim

namespace seqpar::sim {
namespace {
// NeMo's model FLOPs per token are inferred, not printed: the formula must give back the 24.07
// summary's own TFLOP/s from its own tokens/s (both columns of two rows), and the causal variant must not.
TEST(PublishedNemo, FlopsPerTokenReproduceTheSummarysOwnColumns) {
  const Model l2 = load_model("llama2-7b"), l3 = load_model("llama3-8b");
  EXPECT_NEAR(16934 * nemo_flops_per_token(l2, 4096) / 1e12, 780, 780 * 0.002);
  EXPECT_NEAR(12273 * nemo_flops_per_token(l3, 8192) / 1e12, 711, 711 * 0.002);
  const double causal = 12273 * (nemo_flops_per_token(l3, 8192) - 6.0 * 8192 * l3.hidden * l3.layers) / 1e12;
  EXPECT_GT(std::abs(causal - 711) / 711, 0.05);
}

// The FP8 rows' GEMM time is the layers' FLOPs at the H100's split-accumulator FP8 rate (Bekman's
// best-shape torch._scaled_mm, 0.71 of 1,978.9 TFLOP/s: the mode of Transformer Engine's dgrad and
// wgrad GEMMs), the LM head in bf16. Derived by hand for nemo-2407-llama2-7b-fp8: Llama-2-7B
// (hidden 4096, 32 heads of 128 with as many KV heads, SwiGLU 11008, 32 layers, vocabulary 32000),
// T = 4096 tokens a micro-step, 16 micro-steps (GBS 128 over DP 8).
//   FP8 forward FLOPs a layer F = QKV 2T·4096·12288 + projection 2T·4096·4096 + MLP 3 x 2T·4096·11008
//     = 412,316,860,416 + 137,438,953,472 + 1,108,101,562,368 = 1,657,857,376,256; backward 2F.
//   Rate: 1,978.9e12 x 0.71 x (T/256) / (1 + T/256) = 16/17 of it (the FP8 curve's half point, 256).
//   Launches: 7 + 14 a layer at 5 us (kernel_overhead_us).
//   LM head, bf16: H = 2T·4096·32000 forward, 2H backward, at 989.4e12 x 0.70 x 16/17, 1 + 2 launches.
// At the former 0.81 the same sum is 1.82 s, not 2.06 s: the test fails if the figure reverts.
TEST(PublishedNemo, Fp8GemmTimeIsTheSplitAccumulatorRate) {
  const auto runs = builtin_published_runs();
  const auto it = std::find_if(runs.begin(), runs.end(), [](const PublishedRun& r) { return r.id == "nemo-2407-llama2-7b-fp8"; });
  ASSERT_NE(it, runs.end());
  const Result r = simulate(load_model("llama2-7b"), published_system(*it), it->plan);
  ASSERT_TRUE(r.valid);
  const double F = 1'657'857'376'256.0, H = 2.0 * 4096 * 4096 * 32000, launch = 5e-6;
  const double fp8_rate = 1978.9e12 * 0.71 * 16 / 17, bf16_rate = 989.4e12 * 0.70 * 16 / 17;
  const double per_micro_step = 32 * (3 * F / fp8_rate + 21 * launch) + 3 * H / bf16_rate + 3 * launch;
  EXPECT_NEAR(r.time.gemm, 16 * per_micro_step, 1e-9 * r.time.gemm);
  EXPECT_NEAR(r.time.gemm, 2.059, 0.001);  // the sum above, evaluated
}
}  // namespace
}  // namespace seqpar::sim

namespace seqpar::sim {
namespace {
// Llama 3 405B's Table 4 (arXiv 2407.21783; issue 38): the three pipelined rows, each within the
// band, and what separates the two 8K rows is the pipeline: the same structure with half the
// micro-batches per pipeline (32 -> 16), so the bubble (PP - 1) / (V x N) doubles, 15/128 -> 15/64;
// the published throughput falls 7% (430 -> 400). Per GPU the throughput is N / (N + 15/4)
// micro-batch times, so the bubble alone makes it fall by (32 / 35.75) / (16 / 19.75) = 1.105;
// what runs once per step (the data-parallel gradient traffic, the optimizer) spread over half the
// micro-batches adds a little more, never less.
TEST(PublishedPipeline, Llama3Table4RowsAndTheirBubble) {
  std::map<std::string, PublishedComparison> by_id;
  for (const PublishedRun& run : builtin_published_runs())
    if (run.id.rfind("llama3-405b-table4-", 0) == 0) by_id.emplace(run.id, compare_published(run));
  ASSERT_EQ(by_id.size(), 3u);
  for (const auto& [id, c] : by_id) {
    ASSERT_TRUE(c.errors.empty()) << id << ": " << c.errors.front();
    EXPECT_TRUE(c.fits) << id;
    EXPECT_TRUE(c.in_band) << id << ": " << c.predicted << " against " << c.published;
    EXPECT_GT(c.run.plan.pp, 1) << id;
  }
  const double fall = by_id.at("llama3-405b-table4-8k-8192gpus").predicted /
                      by_id.at("llama3-405b-table4-8k-16384gpus").predicted;
  const double bubble_only = (32 / 35.75) / (16 / 19.75);
  EXPECT_GT(fall, bubble_only - 1e-9);
  EXPECT_LT(fall, bubble_only * 1.02);  // the once-a-step costs are a small part of a 16-micro-batch step
}
}  // namespace
}  // namespace seqpar::sim

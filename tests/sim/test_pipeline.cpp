// Pipeline parallelism (issue 38): the stage split, the schedules' bubble and micro-batches in
// flight, the sends between stages, the per-stage memory with its peak stage, how the pipeline
// composes with the step, and the rules; every figure derived by hand in its comment.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "fixtures.hpp"
#include <fmt/format.h>

#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/attention_kernels.hpp"
#include "seqpar/sim/document_cost.hpp"
#include "seqpar/sim/memory_cost.hpp"
#include "seqpar/sim/pipeline_cost.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/simulate.hpp"
#include "seqpar/sim/validity.hpp"

namespace seqpar::sim {
namespace {

// Megatron-Core runs pipeline stages (the default framework, deepspeed-alst, has none).
System megatron(const char* system = "dgx-h100") { return load_system_with_framework(system, "", "megatron-core"); }

Plan staged(Method method, int gpus, std::int64_t seq, int tp, int sp, int pp, int vp, int micro_batches) {
  Plan p = testing::plan(method, gpus, seq, sp, method == Method::ulysses ? sp : 1, method == Method::ulysses ? 1 : sp, tp);
  p.pp = pp;
  p.vp = vp;
  p.grad_accum_steps = micro_batches;
  return p;
}

TEST(PipelineSplit, EvenWhereTheStagesDivideTheLayers) {
  const Model m = load_model("llama3-70b");  // 80 layers
  const Plan p = staged(Method::ulysses, 64, 8192, 8, 1, 4, 1, 8);
  EXPECT_EQ(stage_split(m, p), StageSplit::even);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(stage_layer_count(m, p, i), 20);  // 80 / 4
}

TEST(PipelineSplit, Llama3s405BDropsALayerFromEachEnd) {
  // 126 layers over 16 stages: 126 / 16 is not whole, (126 + 2) / 16 = 8 is; the first and last
  // stages run 7 (arXiv 2407.21783 Sec. 3.3.2), 7 + 14 x 8 + 7 = 126.
  const Model m = load_model("llama3-405b");
  ASSERT_EQ(m.layers, 126);
  Plan p = staged(Method::allgather, 16384, 131072, 8, 16, 16, 1, 16);
  EXPECT_EQ(stage_split(m, p), StageSplit::ends_lighter);
  EXPECT_EQ(stage_layer_count(m, p, 0), 7);
  for (int i = 1; i < 15; ++i) EXPECT_EQ(stage_layer_count(m, p, i), 8);
  EXPECT_EQ(stage_layer_count(m, p, 15), 7);
  // Four virtual stages of 128 / 64 = 2 layers each: 8 per stage, the ends' first / last chunk 1.
  p.vp = 4;
  EXPECT_EQ(stage_layer_count(m, p, 0), 7);
  EXPECT_EQ(stage_layer_count(m, p, 7), 8);
  // Eight of 1 layer: the first stage's first virtual stage is the embedding alone; still 7.
  p.vp = 8;
  EXPECT_EQ(stage_split(m, p), StageSplit::ends_lighter);
  EXPECT_EQ(stage_layer_count(m, p, 0), 7);
  EXPECT_EQ(stage_layers(m, p), 8);  // a middle stage's
  // Two stages of 32 virtual stages (128 / 64 = 2 layers each): both are ends, 64 - 1 = 63 each;
  // stage_layers counts 63, not (126 + 2) / 2 = 64.
  p.pp = 2;
  p.vp = 32;
  EXPECT_EQ(stage_split(m, p), StageSplit::ends_lighter);
  EXPECT_EQ(stage_layer_count(m, p, 0), 63);
  EXPECT_EQ(stage_layer_count(m, p, 1), 63);
  EXPECT_EQ(stage_layers(m, p), 63);
}

TEST(PipelineSplit, TheStagesRunEveryLayerOnce) {
  // Whatever the split, the stages' layers add up to the model's, for every valid pp x vp.
  for (const char* name : {"llama3-8b", "llama3-70b", "llama3-405b", "gpt-1.3b"}) {
    const Model m = load_model(name);
    for (int pp = 2; pp <= 32; ++pp)
      for (int vp = 1; vp <= 8; ++vp) {
        const Plan p = staged(Method::ulysses, pp, 4096, 1, 1, pp, vp, pp * 2);
        if (stage_split(m, p) == StageSplit::none) continue;
        int sum = 0, fewest = m.layers;
        for (int i = 0; i < pp; ++i) {
          sum += stage_layer_count(m, p, i);
          fewest = std::min(fewest, stage_layer_count(m, p, i));
        }
        EXPECT_EQ(sum, m.layers) << name << " pp " << pp << " vp " << vp;
        EXPECT_GE(fewest, 1) << name << " pp " << pp << " vp " << vp;
        // stage_layers is the most any stage runs.
        int most = 0;
        for (int i = 0; i < pp; ++i) most = std::max(most, stage_layer_count(m, p, i));
        EXPECT_EQ(stage_layers(m, p), most) << name << " pp " << pp << " vp " << vp;
      }
  }
}

TEST(PipelineSplit, NoSplitIsRefusedWithTheRule) {
  // 126 over 5 stages: 126 % 5 = 1 and 128 % 5 = 3.
  const Model m = load_model("llama3-405b");
  const Plan p = staged(Method::ulysses, 40, 8192, 8, 1, 5, 1, 10);
  EXPECT_EQ(stage_split(m, p), StageSplit::none);
  std::vector<std::string> errors;
  EXPECT_FALSE(check_plan(m, megatron(), p, errors));
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors.front().find("layers: 126 layers are not divisible by pp 5 x vp 1, nor are 128"), std::string::npos)
      << errors.front();
}

TEST(PipelineSchedule, BubbleAndMicroBatchesInFlight) {
  // 1F1B, p = 4, m = 16: bubble (p - 1) / m = 3 / 16; stage i holds min(p - i, m) = 4, 3, 2, 1.
  Plan p = staged(Method::ulysses, 32, 8192, 8, 1, 4, 1, 16);
  const Model m = load_model("llama3-70b");
  const PipelineCost c = pipeline_cost(m, megatron(), p);
  EXPECT_DOUBLE_EQ(c.bubble_slots, 3.0);
  EXPECT_DOUBLE_EQ(c.bubble_fraction, 3.0 / 16);
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(in_flight_micro_batches(p, i), 4 - i);
  // Fewer micro-batches than stages: no stage holds more than m = 2.
  p.grad_accum_steps = 2;
  EXPECT_DOUBLE_EQ(in_flight_micro_batches(p, 0), 2);
  EXPECT_DOUBLE_EQ(in_flight_micro_batches(p, 3), 1);
  // Interleaved, p = 4, v = 2, m = 8: bubble (p - 1) / (m v) = 3 / 16; Megatron's warm-up at stage
  // 0 is (4 - 0 - 1) x 2 + (2 - 1) x 4 = 10 chunks, plus one in its first backward = 11 chunks of
  // half a stage = 5.5 micro-batches' worth; at stage 3, 0 + 4 + 1 = 5 chunks = 2.5.
  p.vp = 2;
  p.grad_accum_steps = 8;
  const PipelineCost ci = pipeline_cost(m, megatron(), p);
  EXPECT_DOUBLE_EQ(ci.bubble_slots, 1.5);
  EXPECT_DOUBLE_EQ(ci.bubble_fraction, 3.0 / 16);
  EXPECT_DOUBLE_EQ(in_flight_micro_batches(p, 0), 5.5);
  EXPECT_DOUBLE_EQ(in_flight_micro_batches(p, 3), 2.5);
}

TEST(PipelineSends, BoundaryActivationBetweenNodes) {
  // Llama 3 405B at 128K, TP 8 x CP 16: a rank's boundary activation is 131072 / (16 x 8) = 1024
  // tokens x 16384 hidden x 2 bytes = 32 MiB. Stages are tp x sp = 128 ranks apart: on other
  // nodes of 8 GPUs, so the send crosses the NIC.
  const Model m = load_model("llama3-405b");
  const System s = megatron();
  const Plan p = staged(Method::allgather, 16384, 131072, 8, 16, 16, 1, 16);
  const PipelineCost c = pipeline_cost(m, s, p);
  EXPECT_DOUBLE_EQ(c.send_bytes, 33554432.0);
  const Placement g = place_pp_group(s, p);
  EXPECT_EQ(g.size, 16);
  EXPECT_EQ(g.stride, 128);
  EXPECT_GT(c.send_s, c.send_bytes / s.intra.bytes_per_s);  // slower than NVLink: on the NIC
  // Each of the m + (p - 1) / v = 16 + 15 slots sends forward and back (v = 1): 62 sends.
  EXPECT_NEAR(c.comm_s, 62 * c.send_s, 1e-12 * c.comm_s);
}

TEST(PipelineStep, TheBubbleIsTheSlowestStagesMicroBatchTimesTheFillAndDrain) {
  // No offload and no step overhead (dgx-h100's default profile has none): the bubble is (p - 1) /
  // v micro-batch times of the pacing stage's kernels, exposed attention and TP communication.
  const Model m = load_model("llama3-70b");
  const System s = megatron();
  for (int vp : {1, 5}) {
    Plan p = staged(Method::ulysses, 256, 32768, 8, 4, 4, vp, 16);
    p.mem.checkpoint = Checkpoint::selective;
    const Result r = simulate(m, s, p);
    ASSERT_TRUE(r.valid) << (r.errors.empty() ? "" : r.errors.front());
    const double k = 16, slots = 3.0 / vp;
    const double per_micro = (r.time.compute + r.time.exposed_attention_comm + r.time.tp_comm) / k;
    EXPECT_NEAR(r.time.pipeline_bubble, slots * per_micro, 1e-9 * r.time.pipeline_bubble) << "vp " << vp;
    // Throughput: the k micro-batches' tokens shared by the tp x pp ranks of a pipeline.
    EXPECT_NEAR(r.tokens_per_s_per_gpu * r.step_time_s, k * (32768.0 / 4) / (8 * 4), 1e-6);
    // 20 layers a stage (80 / 4), with the LM head on the last: it paces.
    EXPECT_EQ(r.figures.layers, 20);
  }
}

TEST(PipelineStep, WithoutStagesNothingChanges) {
  // pp = 1: no bubble, no sends, no stage memory; the step adds up as before.
  const Model m = load_model("llama3-8b");
  const Result r = simulate(m, megatron(), testing::plan(Method::ulysses, 8, 65536, 8, 8, 1));
  ASSERT_TRUE(r.valid);
  EXPECT_EQ(r.time.pipeline_bubble, 0);
  EXPECT_EQ(r.time.pp_comm, 0);
  EXPECT_EQ(r.memory.peak_stage, 0);
  EXPECT_EQ(r.figures.layers, 32);
}

TEST(PipelineMemory, ThePeakStageIsNamed) {
  // 1F1B with an even split (llama3-70b, 20 layers a stage): the first stage holds the most
  // micro-batches in flight (4 of them) and the embedding: the peak. Each later stage holds one
  // fewer, so the peaks fall stage by stage but for the last, which also holds the logits.
  const Model m = load_model("llama3-70b");
  const System s = megatron();
  Plan p = staged(Method::ulysses, 64, 8192, 8, 1, 4, 1, 16);
  p.mem.checkpoint = Checkpoint::selective;
  const Result r = simulate(m, s, p);
  ASSERT_TRUE(r.valid);
  EXPECT_EQ(r.memory.peak_stage, 0);
  const std::vector<StageMemory> st = stage_memories(m, s, p);
  ASSERT_EQ(st.size(), 4u);
  EXPECT_DOUBLE_EQ(st[0].in_flight, 4);
  EXPECT_GT(st[0].peak_bytes, st[1].peak_bytes);
  EXPECT_GT(st[1].peak_bytes, st[2].peak_bytes);
  EXPECT_DOUBLE_EQ(r.peak_memory_bytes(), st[0].peak_bytes);
  // Llama 3 405B, 1F1B over 16 stages: stage 0 holds 16 micro-batches of 7 layers (112 layer-
  // micro-batches), stage 1 15 of 8 (120): the second stage is the peak.
  const Model big = load_model("llama3-405b");
  Plan q = staged(Method::allgather, 16384, 131072, 8, 16, 16, 1, 16);
  q.mem.checkpoint = Checkpoint::selective;
  const Result rb = simulate(big, s, q);
  ASSERT_TRUE(rb.valid) << (rb.errors.empty() ? "" : rb.errors.front());
  EXPECT_EQ(rb.memory.peak_stage, 1);
  const std::vector<StageMemory> sb = stage_memories(big, s, q);
  ASSERT_EQ(sb.size(), 16u);
  EXPECT_DOUBLE_EQ(rb.peak_memory_bytes(), sb[1].peak_bytes);
  for (const StageMemory& x : sb) EXPECT_LE(x.peak_bytes, sb[1].peak_bytes) << "stage " << x.stage;
}

TEST(PipelineRules, EachIsRefusedWithItsRule) {
  const Model m = load_model("llama3-70b");
  const System s = megatron();
  auto first_error = [&](const Plan& p) {
    std::vector<std::string> errors;
    (void)check_plan(m, s, p, errors);
    return errors.empty() ? std::string() : errors.front();
  };
  Plan p = staged(Method::ulysses, 64, 8192, 8, 1, 4, 1, 8);
  p.pp = 1;
  p.vp = 2;  // nothing to interleave
  EXPECT_EQ(first_error(p).rfind("vp: 2 virtual stages per rank", 0), 0u) << first_error(p);
  p = staged(Method::ulysses, 60, 8192, 8, 1, 4, 1, 8);  // 60 % (8 x 1 x 4) != 0
  EXPECT_EQ(first_error(p).rfind("gpus: 60 GPUs are not divisible by tp 8 x sp 1 x pp 4", 0), 0u) << first_error(p);
  p = staged(Method::ulysses, 64, 8192, 8, 1, 4, 2, 6);  // interleaved: 6 micro-batches, not a multiple of 4
  EXPECT_EQ(first_error(p).rfind("grad_accum_steps: 6 micro-batches per pipeline are not a multiple of pp 4", 0), 0u)
      << first_error(p);
}

TEST(PipelineCli, GlobalBatchSetsTheMicroBatchesPerPipeline) {
  // 16M tokens at 128K: 128 sequences over dp = 16384 / (8 x 16 x 16) = 8: 16 micro-batches each.
  const std::string base =
      "simulate --model llama3-405b --gpus 16384 --tp 8 --sp 16 --pp 16 --vp 4 --method allgather --seq-len 128K "
      "--framework megatron-core --checkpoint selective --global-batch-tokens 16M";
  const seqpar::testing::CliRun r = seqpar::testing::seqpar(base + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = r.json();
  EXPECT_EQ(j["plan"]["grad_accum_steps"], 16);
  EXPECT_EQ(j["plan"]["pp"], 16);
  EXPECT_EQ(j["pipeline"]["schedule"], "interleaved-1f1b");
  EXPECT_EQ(j["memory_stages"].size(), 16u);
  EXPECT_EQ(j["memory_peak_stage"], 1);
  // An explicit --grad-accum-steps that disagrees is refused, naming both.
  const seqpar::testing::CliRun bad = seqpar::testing::seqpar(base + " --grad-accum-steps 4");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("grad_accum_steps: 4 micro-steps disagree with the global batch, which needs 16"),
            std::string::npos) << bad.err;
  // A batch the replicas cannot share: 12 sequences over dp 8.
  const seqpar::testing::CliRun uneven = seqpar::testing::seqpar(
      "simulate --model llama3-405b --gpus 16384 --tp 8 --sp 16 --pp 16 --method allgather --seq-len 128K "
      "--global-batch 12");
  EXPECT_EQ(uneven.code, 2);
  EXPECT_NE(uneven.err.find("gpus 16384 / (tp 8 x sp 16 x pp 16)"), std::string::npos) << uneven.err;
}

// Issue 38's command as written: no --vp and no memory flags. Megatron's bare defaults (plain
// 1F1B, no recomputation) do not fit at 128K; simulate sets the pipeline up as advise would (the
// fastest interleaving of vp_degrees, the lightest memory options that fit within the tie), says
// so, and its answer is exactly the plan given with those flags spelled out.
TEST(PipelineCli, WithoutVpOrMemoryFlagsThePipelineIsSetUpAsAdviseWould) {
  const std::string base =
      "simulate --model llama3-405b --gpus 16384 --tp 8 --sp 16 --pp 16 --method allgather --seq-len 131072 "
      "--global-batch-tokens 16777216";
  const seqpar::testing::CliRun r = seqpar::testing::seqpar(base + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = r.json();
  EXPECT_TRUE(j["fits"].get<bool>());
  ASSERT_TRUE(j.contains("inferred"));
  const std::string why = j["inferred"];
  EXPECT_EQ(why.rfind("inferred: vp=", 0), 0u) << why;
  EXPECT_NE(why.find("the fastest of vp 1, 2, 4, 8"), std::string::npos) << why;
  const int vp = j["plan"]["vp"];
  EXPECT_GT(vp, 1);  // plain 1F1B's bubble (15 / 16 of the step) loses to every interleaving
  const std::string spelled = fmt::format("{} --vp {} --zero {} --checkpoint {} --json", base, vp,
                                          j["plan"]["zero"].get<int>(), j["plan"]["checkpoint"].get<std::string>());
  const seqpar::testing::CliRun explicit_run = seqpar::testing::seqpar(spelled);
  ASSERT_EQ(explicit_run.code, 0) << explicit_run.err;
  const nlohmann::json e = explicit_run.json();
  EXPECT_FALSE(e.contains("inferred"));  // nothing left to infer
  EXPECT_EQ(e["tokens_per_s_per_gpu"], j["tokens_per_s_per_gpu"]);
  EXPECT_EQ(e["peak_memory_bytes"], j["peak_memory_bytes"]);
  // Every other interleaving, with the same memory options, is no faster.
  for (const int other : vp_degrees(load_model("llama3-405b"), 16)) {
    const seqpar::testing::CliRun o = seqpar::testing::seqpar(
        fmt::format("{} --vp {} --zero {} --checkpoint {} --json", base, other, j["plan"]["zero"].get<int>(),
                    j["plan"]["checkpoint"].get<std::string>()));
    ASSERT_EQ(o.code, 0) << o.err;
    EXPECT_LE(o.json()["tokens_per_s_per_gpu"].get<double>(), j["tokens_per_s_per_gpu"].get<double>()) << "vp " << other;
  }
  // The bare defaults, asked for: plain 1F1B without recomputation does not fit.
  const seqpar::testing::CliRun bare = seqpar::testing::seqpar(base + " --vp 1 --zero 1 --checkpoint none --json");
  ASSERT_EQ(bare.code, 0) << bare.err;
  EXPECT_FALSE(bare.json()["fits"].get<bool>());
  EXPECT_FALSE(bare.json().contains("inferred"));
  // The human output says what it inferred before the plan.
  const seqpar::testing::CliRun human = seqpar::testing::seqpar(base);
  ASSERT_EQ(human.code, 0) << human.err;
  EXPECT_EQ(human.out.rfind("inferred: vp=", 0), 0u) << human.out.substr(0, 200);
}

}  // namespace
}  // namespace seqpar::sim

namespace seqpar::sim {
namespace {
// Packed documents under stages (issue 38, part 3): micro-batch j's stage time t_j differs with
// its documents, and a pipeline of p identical stages runs sum_j t_j + (p - 1) max_j t_j (a
// proportionate flow shop; (p - 1) / v with v virtual stages). The micro-batches run at the mean
// sequence's attention, the fill and drain at the heaviest sampled one's: the bubble grows by
// (max / mean - 1) of a micro-batch's attention kernels, per bubble slot.
TEST(PipelineDocuments, TheHeaviestMicroBatchPacesTheFillAndDrain) {
  const Model m = load_model("llama3-70b");
  const System s = megatron();
  Plan p = staged(Method::ulysses, 64, 131072, 8, 2, 4, 1, 16);
  p.mem.checkpoint = Checkpoint::selective;
  const SampledWorkload w = sample_workload(make_workload("lognormal:8.5:1.3", "fill", 7, 16), p.seq_len);
  const WorkRatios ratios = work_ratios(w);
  ASSERT_GT(ratios.max, ratios.mean * 1.5);  // a skewed mix: the check below would pass trivially at 1
  const DocumentCosts d = document_costs(w, p, Balancer::contiguous, s.gpu);
  EXPECT_DOUBLE_EQ(d.heaviest_work_factor, ratios.max / ratios.mean);
  const Result r = simulate(m, s, p, d);
  ASSERT_TRUE(r.valid) << (r.errors.empty() ? "" : r.errors.front());
  const double k = 16, slots = 3;
  const double mean_micro = (r.time.compute + r.time.exposed_attention_comm + r.time.tp_comm) / k;
  const AttentionCost& at = r.figures.attention;
  const double heavier = (d.heaviest_work_factor - 1) * r.figures.layers * (at.fwd_kernel_s + at.bwd_kernel_s);
  EXPECT_NEAR(r.time.pipeline_bubble, slots * (mean_micro + heavier), 1e-9 * r.time.pipeline_bubble);
  // Without stages the factor changes nothing (no bubble); with equal sequences it is 1.
  const SampledWorkload even = sample_workload(make_workload("fixed:16K", "fill", 7, 4), p.seq_len);
  EXPECT_DOUBLE_EQ(document_costs(even, p, Balancer::contiguous, s.gpu).heaviest_work_factor, 1.0);
}
}  // namespace
}  // namespace seqpar::sim

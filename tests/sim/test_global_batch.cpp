// A fixed global batch (issue 27, part 3): gradient accumulation in the step time (what runs per
// micro-step and what once per optimizer step, by ZeRO stage), how advise, maxlen and sweep fill
// the batch with dp x micro-batch x accumulation, and why a plan cannot reach it.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <unistd.h>

#include "cli_runner.hpp"
#include "fixtures.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/limits.hpp"
#include "seqpar/core/trace.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/comm_cost.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/simulate.hpp"
#include "seqpar/sim/step_trace.hpp"
#include "seqpar/sim/sweep.hpp"
#include "seqpar/sim/validity.hpp"

namespace seqpar::sim {
namespace {

using testing::plan;

bool has(const std::vector<std::string>& v, const std::string& text) {
  for (const auto& s : v)
    if (s.find(text) != std::string::npos) return true;
  return false;
}

Plan accumulating(Plan p, int zero, int k) {
  p.mem.zero = zero;
  p.grad_accum_steps = k;
  return p;
}

// One micro-step's work repeats k times; by ZeRO stage the data-parallel traffic repeats too
// (ZeRO-2/3) or runs once under the last backward (ZeRO-0/1); the optimizer runs once.
TEST(GradAccum, EachMicroStepRepeatsItsPassesAndTheOptimizerRunsOnce) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  const Plan base = plan(Method::ulysses, 16, 1 << 16, 8, 8, 1);  // dp 2 over two nodes
  const Placement world = place_group(s, 16, 1);
  const double grads = 2.0 * double(m.total_params());
  for (int zero : {0, 1, 2, 3}) {
    const Result one = simulate(m, s, accumulating(base, zero, 1)), four = simulate(m, s, accumulating(base, zero, 4));
    ASSERT_TRUE(one.valid && four.valid) << zero;
    const TimeBreakdown &a = one.time, &b = four.time;
    EXPECT_DOUBLE_EQ(b.compute, 4 * a.compute);
    EXPECT_DOUBLE_EQ(b.attention_comm, 4 * a.attention_comm);
    EXPECT_DOUBLE_EQ(b.exposed_attention_comm, 4 * a.exposed_attention_comm);
    EXPECT_DOUBLE_EQ(b.optimizer, a.optimizer) << "the optimizer steps once";
    EXPECT_NEAR(four.step_time_s, b.compute + b.exposed_comm + b.optimizer + b.exposed_offload, 1e-9 * four.step_time_s);
    EXPECT_NEAR(four.tokens_per_s_per_gpu, 4 * (double(1 << 16) / 8) / four.step_time_s, 1e-9 * four.tokens_per_s_per_gpu);
    EXPECT_NEAR(four.model_flops_per_gpu, 4 * one.model_flops_per_gpu, 1e-9 * four.model_flops_per_gpu);
    // The gradient traffic: once (ZeRO-0/1) or every micro-step (ZeRO-2: a reduce-scatter per
    // micro-step, the parameter all-gather once after the optimizer).
    const double rs = collective_time(s, Collective::reduce_scatter, grads, world);
    const double ag = collective_time(s, Collective::all_gather, grads, world);
    switch (zero) {
      case 0: EXPECT_DOUBLE_EQ(b.dp_comm, a.dp_comm); break;
      case 1: EXPECT_DOUBLE_EQ(b.dp_comm, rs + ag); break;
      case 2: EXPECT_NEAR(b.dp_comm, 4 * rs + ag, 1e-12); break;
      default: EXPECT_NEAR(b.dp_comm, 4 * (ag + ag + rs), 1e-12); break;
    }
    // More micro-steps never lower the throughput: what runs once is spread over more tokens.
    EXPECT_GE(four.tokens_per_s_per_gpu, one.tokens_per_s_per_gpu * (1 - 1e-12)) << zero;
  }
}

TEST(GradAccum, TheTimelineDrawsEveryMicroStepAndEndsAtTheOptimizerStep) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  for (int zero : {1, 3}) {
    Plan p = accumulating(plan(Method::hybrid, 16, 1 << 16, 8, 4, 2), zero, 3);
    p.mem.checkpoint = Checkpoint::full;
    const Result r = simulate(m, s, p);
    ASSERT_TRUE(r.valid);
    const trace::Trace t = step_trace(r, 1, "plan");  // throws when the layout misses the step time
    int reductions = 0, last_micro_step = 0;
    for (const trace::Slice& sl : t.slices()) {
      if (sl.name.find("bwd gradient reduction") != std::string::npos) ++reductions;
      if (sl.name.rfind("m2 ", 0) == 0) ++last_micro_step;
    }
    EXPECT_EQ(reductions, zero >= 2 ? 3 : 1) << "ZeRO-" << zero;
    EXPECT_GT(last_micro_step, 0);
  }
  Plan many = plan(Method::ulysses, 8, 1 << 14, 8, 8, 1);
  many.grad_accum_steps = 65;
  EXPECT_THROW(step_trace(simulate(m, s, many), 1, "plan"), Error);
}

TEST(GradAccum, IsAPlanFieldWithItsLimits) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  Plan p = plan(Method::ulysses, 8, 1 << 14, 8, 8, 1);
  for (int bad : {0, -2, limits::kMaxGradAccumSteps + 1}) {
    p.grad_accum_steps = bad;
    std::vector<std::string> errors;
    EXPECT_FALSE(check_plan(m, s, p, errors)) << bad;
    EXPECT_TRUE(has(errors, "grad_accum_steps")) << bad;
  }
  p.grad_accum_steps = 6;
  p.micro_batch = 2;
  const nlohmann::json j = to_json(p);
  EXPECT_EQ(j.at("grad_accum_steps"), 6);
  EXPECT_EQ(plan_from_json(j), p);
  EXPECT_EQ(p.global_batch_sequences(), 1 * 2 * 6);
  EXPECT_NE(describe(p).find("mb=2 ga=6"), std::string::npos) << describe(p);
  nlohmann::json old = j;
  old.erase("grad_accum_steps");  // documents written before the field read as no accumulation
  EXPECT_EQ(plan_from_json(old).grad_accum_steps, 1);
}

TEST(GlobalBatch, FillsAreDpTimesMicroBatchTimesAccumulation) {
  Plan st = plan(Method::ulysses, 16, 1 << 15, 4, 4, 1);  // dp 4
  std::string why;
  const std::vector<Plan> fills = batch_fills(st, 8, std::nullopt, why);
  ASSERT_EQ(fills.size(), 2u);
  EXPECT_EQ(fills[0].micro_batch, 2);  // fewest micro-steps first
  EXPECT_EQ(fills[0].grad_accum_steps, 1);
  EXPECT_EQ(fills[1].micro_batch, 1);
  EXPECT_EQ(fills[1].grad_accum_steps, 2);
  for (const Plan& f : fills) EXPECT_EQ(f.global_batch_sequences(), 8);
  const std::vector<Plan> fixed = batch_fills(st, 8, 1, why);
  ASSERT_EQ(fixed.size(), 1u);
  EXPECT_EQ(fixed[0].grad_accum_steps, 2);

  why.clear();
  EXPECT_TRUE(batch_fills(st, 2, std::nullopt, why).empty());  // more replicas than sequences
  EXPECT_NE(why.find("cannot reach dp 4 replicas"), std::string::npos) << why;
  EXPECT_NE(why.find("raise sp to 8"), std::string::npos) << why;
  why.clear();
  EXPECT_TRUE(batch_fills(st, 6, std::nullopt, why).empty());
  EXPECT_NE(why.find("do not split evenly over dp 4"), std::string::npos) << why;
  why.clear();
  EXPECT_TRUE(batch_fills(st, 8, 3, why).empty());
  EXPECT_NE(why.find("not a multiple of micro_batch 3"), std::string::npos) << why;
  why.clear();
  EXPECT_TRUE(batch_fills(st, std::int64_t{4} << 34, 1, why).empty());  // 2^34 micro-steps per replica
  EXPECT_NE(why.find("micro-steps"), std::string::npos) << why;

  why.clear();
  EXPECT_EQ(global_sequences(GlobalBatch{1 << 20, 0}, 1 << 16, why), 16);
  EXPECT_FALSE(global_sequences(GlobalBatch{1000000, 0}, 1 << 16, why));
  EXPECT_NE(why.find("not a whole number of 65536-token sequences"), std::string::npos) << why;
  EXPECT_EQ(global_sequences(GlobalBatch{0, 3}, 1 << 16, why), 3);
}

TEST(GlobalBatch, TheSearchRefusesABatchGivenTwiceOrOutOfRange) {
  // The search's check and simulate's (check_global_batch alone) give the same answer.
  auto error_of = [](GlobalBatch b) {
    SearchSpace space;
    space.global_batch = b;
    std::string search = "no error", alone = "no error";
    try {
      check_search(8, space);
    } catch (const Error& e) {
      search = e.what();
    }
    try {
      check_global_batch(b);
    } catch (const Error& e) {
      alone = e.what();
    }
    EXPECT_EQ(search, alone);
    return search;
  };
  EXPECT_NE(error_of({1 << 20, 4}).find("global_batch: give the batch of one optimizer step once"), std::string::npos);
  EXPECT_NE(error_of({0, 0}).find("global_batch: give the batch"), std::string::npos);
  EXPECT_NE(error_of({-5, 0}).find("global_batch_tokens"), std::string::npos);
  EXPECT_NE(error_of({limits::kMaxGlobalBatchTokens + 1, 0}).find("global_batch_tokens"), std::string::npos);
  EXPECT_NE(error_of({0, limits::kMaxGlobalBatchSequences + 1}).find("global_batch:"), std::string::npos);
  EXPECT_EQ(error_of({1 << 20, 0}), "no error");
}

// The example: at 512K tokens per step on 8 GPUs, one 512K sequence per step. Without a
// batch the advisor may rank data parallelism without SP (8 sequences per step) beside SP 8 (one);
// with it, only plans that run one sequence per step are compared.
TEST(GlobalBatch, AdviseComparesOnlyPlansThatRunTheBatch) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  const std::int64_t n = 512 * 1024;
  SearchSpace space;
  const Advice free = advise(m, s, 8, n, space);
  bool dp_only_ranked = false;
  for (const Result& r : free.ranked) dp_only_ranked |= r.plan.sp == 1;
  EXPECT_TRUE(dp_only_ranked) << "without a batch, 8 sequences per step stand beside one";

  space.global_batch = GlobalBatch{n, 0};
  const Advice fixed = advise(m, s, 8, n, space);
  ASSERT_NE(fixed.best(), nullptr);
  for (const Result& r : fixed.ranked) {
    EXPECT_EQ(r.plan.global_batch_sequences(), 1) << describe(r.plan);
    EXPECT_EQ(std::int64_t{r.plan.tp} * r.plan.sp, 8) << describe(r.plan);  // one sequence over all 8 GPUs
  }
  bool dp_only_rejected = false;
  for (const Rejection& r : fixed.rejected)
    if (r.plan.sp == 1 && r.plan.tp == 1) dp_only_rejected = has(r.reasons, "cannot reach dp 8 replicas");
  EXPECT_TRUE(dp_only_rejected);
  EXPECT_EQ(fixed.ranked.size() + fixed.rejected.size(), structures(m, s, 8, n, space).size());

  // A batch of tokens that is no whole number of sequences is an input error, not a plan's.
  space.global_batch = GlobalBatch{n + 1, 0};
  EXPECT_THROW(advise(m, s, 8, n, space), Error);
}

// 4M tokens at 128K on 64 GPUs: 32 sequences. Every ranked plan runs exactly those, and the best is
// as fast as each way of filling its own structure, up to the tie its memory options may give up
// (kMemoryTieTolerance).
TEST(GlobalBatch, AdviseFillsTheBatchWithTheFastestMicroBatchAndAccumulation) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  SearchSpace space;
  space.global_batch = GlobalBatch{std::int64_t{4} << 20, 0};
  space.methods = {Method::ulysses};
  const Advice a = advise(m, s, 64, 128 * 1024, space);
  ASSERT_NE(a.best(), nullptr);
  bool accumulates = false;
  for (const Result& r : a.ranked) {
    EXPECT_EQ(r.plan.global_batch_sequences(), 32) << describe(r.plan);
    accumulates |= r.plan.grad_accum_steps > 1;
  }
  EXPECT_TRUE(accumulates) << "some plan of 64 GPUs must accumulate to run 32 sequences";
  const Result& best = *a.best();
  std::string why;
  Plan st = best.plan;
  for (const Plan& f : batch_fills(st, 32, std::nullopt, why)) {
    const StructureOutcome o = best_memory_options(m, s, f, std::nullopt);
    if (o.best) {
      EXPECT_GE(best.tokens_per_s_per_gpu, o.best->tokens_per_s_per_gpu * (1 - kMemoryTieTolerance)) << describe(f);
    }
  }
}

TEST(GlobalBatch, MaxLenSplitsTheTokensIntoEqualSequences) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  SearchSpace space;
  const std::int64_t tokens = std::int64_t{4} << 20;
  space.global_batch = GlobalBatch{tokens, 0};
  const MaxLenAdvice a = advise_max_seq_len(m, s, 8, space);
  ASSERT_GT(a.max_seq_len, 0);
  ASSERT_TRUE(a.result);
  EXPECT_EQ(a.result->plan.global_batch_sequences() * a.result->plan.seq_len, tokens);
  for (const auto& [p, n] : a.per_structure) {
    if (n == 0) continue;
    EXPECT_EQ(p.global_batch_sequences() * n, tokens) << describe(p);
    EXPECT_LE(n, a.max_seq_len);
  }
  // With sequences fixed, the length is free and each replica accumulates its share.
  space.global_batch = GlobalBatch{0, 16};
  const MaxLenAdvice b = advise_max_seq_len(m, s, 8, space);
  ASSERT_TRUE(b.result);
  EXPECT_EQ(b.result->plan.global_batch_sequences(), 16);
  // Three sequences cannot be shared by 2 or 4 replicas: only dp 1 reaches them.
  space.global_batch = GlobalBatch{0, 3};
  const MaxLenAdvice c = advise_max_seq_len(m, s, 8, space);
  for (const auto& [p, n] : c.per_structure) EXPECT_TRUE(p.dp() == 1) << describe(p);
  bool said = false;
  for (const Rejection& r : c.rejected) said |= has(r.reasons, "global batch: 3 sequences");
  EXPECT_TRUE(said);
}

TEST(GlobalBatch, SweepCellsRunTheBatchOrSayWhyNot) {
  const Model m = load_model("llama3-8b");
  const std::vector<System> systems = {load_system("dgx-h100")};
  SearchSpace space;
  space.global_batch = GlobalBatch{std::int64_t{1} << 20, 0};
  // 1M tokens: 8 sequences of 128K, 2 of 512K, and no whole number of 384K ones.
  const Sweep sw = run_sweep(m, systems, {8}, {128 * 1024, 512 * 1024, 384 * 1024}, space);
  for (const SweepPoint& pt : sw.points) {
    const Result& r = pt.result;
    if (pt.seq_len == 384 * 1024) {
      EXPECT_TRUE(has(r.errors, "not a whole number")) << describe(r.plan);
    } else if (r.valid && r.fits && r.errors.empty()) {
      EXPECT_EQ(r.plan.global_batch_sequences() * pt.seq_len, std::int64_t{1} << 20) << describe(r.plan);
    }
  }
  for (const SweepCell& c : sw.cells) EXPECT_EQ(c.best.has_value(), c.seq_len != 384 * 1024) << c.seq_len;
}

// The flags from the command line, as a user gives them.
TEST(GlobalBatchCli, AdviseMaxlenSweepAndSimulateTakeTheBatch) {
  using seqpar::testing::seqpar;
  auto r = seqpar("advise --gpus 8 --seq-len 512K --global-batch-tokens 512K --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = r.json();
  EXPECT_EQ(j["global_batch"]["tokens"], 512 * 1024);
  EXPECT_EQ(j["global_batch"]["sequences"], 1);
  for (const auto& p : j["ranked"]) {
    EXPECT_EQ(p["global_batch_sequences"], 1);
    EXPECT_EQ(p["global_batch_tokens"], 512 * 1024);
    EXPECT_TRUE(p["plan"].contains("grad_accum_steps"));
  }
  r = seqpar("advise --gpus 8 --seq-len 128K --global-batch 16 --method ulysses --sp 8");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("global batch 16 sequences per optimizer step"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dp x mb x ga"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("optimizer step"), std::string::npos) << r.out;

  r = seqpar("maxlen --gpus 8 --global-batch-tokens 4M --method ulysses --json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = r.json();
  EXPECT_EQ(j["plan"]["seq_len"].get<std::int64_t>() * j["result"]["global_batch_sequences"].get<std::int64_t>(),
            std::int64_t{4} << 20);

  r = seqpar("simulate --gpus 16 --seq-len 64K --sp 8 --grad-accum-steps 4 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.json()["plan"]["grad_accum_steps"], 4);
  EXPECT_EQ(r.json()["global_batch_sequences"], 8);

  const std::string dir = "/tmp/seqpar_batch_sweep_" + std::to_string(::getpid());
  r = seqpar("sweep --gpus 8 --seq-len 128K,512K --global-batch-tokens 1M --out " + dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("global batch 1M tokens"), std::string::npos) << r.out;
  const std::string csv = seqpar::testing::slurp(dir + "/sweep.csv");
  EXPECT_EQ(csv.rfind("system,gpus,seq_len,method,sp,tp,ulysses_degree,ring_degree,micro_batch,grad_accum_steps,", 0), 0u);
  std::filesystem::remove_all(dir);
}

TEST(GlobalBatchCli, ABadBatchIsAUsageError) {
  using seqpar::testing::seqpar;
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {"advise --seq-len 64K --global-batch-tokens 100000", "not a whole number of 65536-token sequences"},
           {"advise --seq-len 64K --global-batch-tokens 1M --global-batch 4", "global_batch: give the batch"},
           {"advise --seq-len 64K --global-batch 0", "global_batch"},
           {"maxlen --global-batch-tokens 12Q", "global_batch_tokens"},
           {"sweep --seq-len 64K --global-batch -3 --out /tmp/seqpar_never", "global_batch"},
           {"simulate --seq-len 64K --grad-accum-steps 0", "grad_accum_steps"}}) {
    const auto r = seqpar(args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_LT(r.code, 128) << args;
    EXPECT_NE((r.err + r.out).find(needle), std::string::npos) << args << "\n" << r.out << r.err;
  }
}

}  // namespace
}  // namespace seqpar::sim

// The validation rule (validation.hpp) on virtual ranks with bf16 emulation on the CPU: every
// method passes as written and fails with each planted sharding bug (fault.hpp). Also the rule's
// arithmetic (NaN and inf never pass), its option checks, and the bf16 emulation itself.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/train/trainer.hpp"
#include "seqpar/train/validation.hpp"
#include "virtual_ranks.hpp"

namespace seqpar::train {
namespace {

TrainSetup tiny(int u, int r, bool zigzag, Fault fault, KvExchange kv = KvExchange::ring_hops) {
  TrainSetup s;
  s.model.layers = 2;
  s.model.hidden = 32;
  s.model.heads = 4;
  s.model.kv_heads = 2;
  s.model.head_dim = 8;
  s.model.ffn = 64;
  s.model.vocab = 64;
  s.seq_len = 32;
  s.micro_batch = 2;
  s.ulysses = u;
  s.ring = r;
  s.zigzag = zigzag;
  s.kv = kv;
  s.fault = fault;
  return s;
}

StepValues unsharded_step(const TrainSetup& s, int dp, Precision p) {
  auto be = make_cpu_backend(p);
  Trainer t(*be, nullptr, reference_setup(s, dp));
  const StepResult r = t.compute_gradients();
  return {r.loss, t.grads_host()};
}

// One step of `s` on `world` virtual ranks in bf16 emulation, checked on every rank against the
// bf16 unsharded step and the fp32 reference with the default rule.
std::vector<ValidationReport> validate_on_virtual_ranks(const TrainSetup& s, int world) {
  const int dp = world / (s.ulysses * s.ring);
  const StepValues unsharded = unsharded_step(s, dp, Precision::bf16);
  const StepValues reference = unsharded_step(s, dp, Precision::fp32);
  std::vector<ValidationReport> reports(static_cast<std::size_t>(world));
  const std::vector<std::string> errors =
      testing::on_virtual_ranks(s, world, Precision::bf16, [&](int r, Backend&, Trainer& t) {
        const StepResult st = t.compute_gradients();
        reports[static_cast<std::size_t>(r)] =
            compare_step(t.model().tensors(), {st.loss, t.grads_host()}, unsharded, reference, ValidationRule{});
      });
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
  return reports;
}

std::string describe(const ValidationReport& rep) {
  std::string out;
  for (const TensorCheck& t : rep.tensors)
    if (!t.ok)
      out += t.what + ": sharded " + std::to_string(t.sharded_error) + " unsharded " +
             std::to_string(t.unsharded_error) + "\n";
  return out;
}

struct Method {
  const char* name;
  int u, r;
  bool zigzag;
  int world;
  KvExchange kv = KvExchange::ring_hops;
};
// Ulysses 4 replicates the 2 KV heads; hybrid runs a ring of Ulysses pairs; ring 2 on 4 ranks
// adds data parallelism; all-gather KV with both load balancers, and with data parallelism.
const Method kMethods[] = {{"ulysses", 2, 1, false, 2},     {"ulysses_kv_replicated", 4, 1, false, 4},
                           {"ring", 1, 4, false, 4},        {"ring_zigzag", 1, 4, true, 4},
                           {"hybrid_2x2", 2, 2, true, 4},   {"ring_zigzag_dp2", 1, 2, true, 4},
                           {"allgather", 1, 4, true, 4, KvExchange::all_gather},
                           {"allgather_contiguous", 1, 4, false, 4, KvExchange::all_gather},
                           {"allgather_dp2", 1, 2, true, 4, KvExchange::all_gather}};

class EveryMethod : public ::testing::TestWithParam<Method> {};

TEST_P(EveryMethod, PassesWithoutAFaultInBf16) {
  const Method m = GetParam();
  const auto reports = validate_on_virtual_ranks(tiny(m.u, m.r, m.zigzag, Fault::none, m.kv), m.world);
  for (std::size_t r = 0; r < reports.size(); ++r) {
    EXPECT_TRUE(reports[r].ok()) << "rank " << r << "\n" << describe(reports[r]);
    // bf16 emulation gives the rule a real baseline: the unsharded step is not exact.
    double largest = 0;
    for (const TensorCheck& t : reports[r].tensors) largest = std::max(largest, t.unsharded_error);
    EXPECT_GT(largest, 1e-4) << "rank " << r << ": bf16 emulation left the unsharded step exact";
  }
}

TEST_P(EveryMethod, FailsWithALabelOffByOneAtAShardEdge) {
  const Method m = GetParam();
  const auto reports = validate_on_virtual_ranks(tiny(m.u, m.r, m.zigzag, Fault::label_off_by_one, m.kv), m.world);
  for (std::size_t r = 0; r < reports.size(); ++r) {
    EXPECT_FALSE(reports[r].ok()) << "rank " << r;
    bool lm_head_failed = false;  // the wrong label's row of the LM head
    for (const TensorCheck& t : reports[r].tensors) lm_head_failed |= t.what == "grad lm_head" && !t.ok;
    EXPECT_TRUE(lm_head_failed) << "rank " << r;
  }
}

TEST_P(EveryMethod, FailsWithAKvBlockFromTheWrongStep) {
  const Method m = GetParam();
  const auto reports = validate_on_virtual_ranks(tiny(m.u, m.r, m.zigzag, Fault::kv_wrong_block, m.kv), m.world);
  for (std::size_t r = 0; r < reports.size(); ++r) {
    EXPECT_FALSE(reports[r].ok()) << "rank " << r;
    // Attention's own weights see it, not only what follows.
    bool wq_failed = false;
    for (const TensorCheck& t : reports[r].tensors)
      if (t.what == "grad layers.0.wq" || t.what == "grad layers.1.wq") wq_failed |= !t.ok;
    EXPECT_TRUE(wq_failed) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Validation, EveryMethod, ::testing::ValuesIn(kMethods),
                         [](const ::testing::TestParamInfo<Method>& i) { return std::string(i.param.name); });

TEST(Validation, FaultsNeverReachTheReference) {
  const TrainSetup s = tiny(1, 4, true, Fault::kv_wrong_block);
  EXPECT_EQ(reference_setup(s, 1).fault, Fault::none);
}

std::vector<ParamTensor> two_tensors() { return {{"a", 0, 2, true}, {"b", 2, 2, false}}; }

TEST(ValidationRule, PassesWithinTheFactorAndFailsBeyondIt) {
  const StepValues ref{1.0, {1.0f, 1.0f, 1.0f, 1.0f}};
  const StepValues unsharded{1.0, {1.01f, 1.0f, 1.0f, 1.0f}};
  const StepValues good{1.0, {1.0f, 1.015f, 1.0f, 1.0f}}, bad{1.0, {1.0f, 1.0f, 1.0f, 1.03f}};
  const ValidationReport ok = compare_step(two_tensors(), good, unsharded, ref, ValidationRule{});
  EXPECT_TRUE(ok.ok()) << describe(ok);
  EXPECT_NEAR(ok.tensors[1].ratio, 1.5, 1e-3);
  const ValidationReport fail = compare_step(two_tensors(), bad, unsharded, ref, ValidationRule{});
  ASSERT_EQ(fail.failures(), 1);
  EXPECT_EQ(fail.worst().what, "grad b");  // exact in the unsharded step: only atol allowed
  EXPECT_TRUE(std::isinf(fail.tensors[2].ratio));
}

TEST(ValidationRule, NanAndInfinityNeverPass) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const StepValues ref{1.0, {1.0f, 1.0f, 1.0f, 1.0f}};
  for (const float x : {nan, inf}) {
    const StepValues broken{1.0, {x, 1.0f, 1.0f, 1.0f}};
    EXPECT_FALSE(compare_step(two_tensors(), broken, ref, ref, ValidationRule{}).tensors[1].ok) << x;
    // A broken unsharded step must not widen the bound to infinity either.
    EXPECT_FALSE(compare_step(two_tensors(), ref, broken, ref, ValidationRule{}).tensors[1].ok) << x;
    EXPECT_FALSE(compare_step(two_tensors(), ref, ref, broken, ValidationRule{}).ok()) << x;
  }
  const StepValues nan_loss{std::nan(""), {1.0f, 1.0f, 1.0f, 1.0f}};
  EXPECT_FALSE(compare_step(two_tensors(), nan_loss, ref, ref, ValidationRule{}).tensors[0].ok);
}

TEST(ValidationRule, RejectsNonFiniteOrNegativeKnobs) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (const double f : {nan, inf, -1.0, 0.5}) EXPECT_THROW(check_rule({f, 1e-5}), Error) << f;
  for (const double a : {nan, inf, -1.0}) EXPECT_THROW(check_rule({2.0, a}), Error) << a;
  EXPECT_NO_THROW(check_rule({1.0, 0.0}));
}

TEST(Bf16Emulation, RoundsAttentionWhereTheCudaKernelsDo) {
  AttnShape s;
  s.seq_q = s.seq_k = 5;
  s.heads = s.kv_heads = 1;
  s.head_dim = 4;
  s.causal = true;
  std::vector<float> q(20), k(20), v(20);
  for (std::size_t i = 0; i < q.size(); ++i) {
    q[i] = 0.1f + 0.013f * static_cast<float>(i);
    k[i] = 0.3f - 0.011f * static_cast<float>(i);
    v[i] = 1.0f + 0.0007f * static_cast<float>(i);
  }
  std::vector<float> o32(20), o16(20), lse(5);
  make_cpu_backend(Precision::fp32)->attention_forward(s, q.data(), k.data(), v.data(), o32.data(), lse.data());
  auto be = make_cpu_backend();
  EXPECT_EQ(be->precision(), Precision::fp32);
  be->set_precision(Precision::bf16);
  be->attention_forward(s, q.data(), k.data(), v.data(), o16.data(), lse.data());
  for (std::size_t i = 0; i < o16.size(); ++i) {
    float r = o16[i];
    round_to_bf16(&r, 1);
    EXPECT_EQ(r, o16[i]) << "output " << i << " is not a bf16 value";
    EXPECT_NEAR(o16[i], o32[i], 0.02f * std::abs(o32[i]));
  }
  EXPECT_NE(o16, o32);
  float x = 1.0f + 1.0f / 256.0f;  // halfway between two bf16 values: ties to even (1.0)
  round_to_bf16(&x, 1);
  EXPECT_EQ(x, 1.0f);
  EXPECT_THROW(parse_precision("fp16"), Error);
}

}  // namespace
}  // namespace seqpar::train

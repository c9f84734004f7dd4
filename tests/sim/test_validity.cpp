// Every bad plan (README, "Bad input never yields a number") gives a message naming the field and the rule, and no numbers.
#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/limits.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/result_json.hpp"
#include "seqpar/sim/simulate.hpp"
#include "seqpar/sim/validity.hpp"

namespace seqpar::sim {
namespace {

using testing::plan;

void expect_invalid(const Model& m, const Plan& p, const std::string& field, const std::string& rule) {
  const System s = load_system("dgx-h100");
  const Result r = simulate(m, s, p);
  EXPECT_FALSE(r.valid) << describe(p);
  bool named = false;
  for (const auto& e : r.errors) named |= e.rfind(field + ":", 0) == 0 && e.find(rule) != std::string::npos;
  EXPECT_TRUE(named) << "no error starting with '" << field << ":' containing '" << rule << "'; got "
                     << nlohmann::json(r.errors).dump();
  const nlohmann::json j = to_json(m, s, r);
  EXPECT_FALSE(j["valid"].get<bool>());
  EXPECT_TRUE(j["step_time_s"].is_null());
  EXPECT_TRUE(j["peak_memory_bytes"].is_null());
}

TEST(Validity, HeadsMustDivideByTheUlyssesDegree) {
  expect_invalid(load_model("llama3-8b"), plan(Method::ulysses, 64, 1 << 20, 64, 64, 1), "heads", "not divisible");
  expect_invalid(load_model("qwen2-7b"), plan(Method::ulysses, 8, 1 << 20, 8, 8, 1), "heads", "28 query heads");
}

TEST(Validity, KvHeadsMustSplitOrReplicateEvenly) {
  Model m = load_model("llama3-8b");
  m.heads = 24;
  m.kv_heads = 8;
  expect_invalid(m, plan(Method::ulysses, 12, 12 * 1024, 12, 12, 1), "kv_heads", "neither divides");
  // Replication (P % kv == 0) and splitting (kv % P == 0) are both fine.
  const System s = load_system("dgx-h100");
  EXPECT_TRUE(simulate(load_model("llama3-8b"), s, plan(Method::ulysses, 16, 1 << 16, 16, 16, 1)).valid);
  EXPECT_TRUE(simulate(load_model("llama3-8b"), s, plan(Method::ulysses, 4, 1 << 16, 4, 4, 1)).valid);
}

TEST(Validity, SequenceMustDivideIntoShards) {
  const Model m = load_model("llama3-8b");
  expect_invalid(m, plan(Method::ulysses, 8, 1001, 8, 8, 1), "seq_len", "pad the sequence to 1008");
  expect_invalid(m, plan(Method::ring_zigzag, 8, 8 * 1001, 8, 1, 8), "seq_len", "2 x sp chunks");
  expect_invalid(m, plan(Method::hybrid, 8, 8 * 1001, 8, 4, 2), "seq_len", "not divisible by 16");
}

TEST(Validity, GpusMustDivideIntoTheDegrees) {
  const Model m = load_model("llama3-8b");
  expect_invalid(m, plan(Method::ulysses, 12, 1 << 16, 8, 8, 1), "gpus", "not divisible by sp 8");
  expect_invalid(m, plan(Method::hybrid, 8, 1 << 16, 8, 4, 4), "sp", "ulysses_degree 4 x ring_degree 4");
  expect_invalid(m, plan(Method::ulysses, 8, 1 << 16, 8, 4, 2), "ring_degree", "has no ring");
  expect_invalid(m, plan(Method::ring, 8, 1 << 16, 8, 2, 4), "ulysses_degree", "no Ulysses part");
}

TEST(Validity, ZeroAndNegativeSizesAreRejected) {
  const Model m = load_model("llama3-8b");
  expect_invalid(m, plan(Method::ulysses, 0, 1 << 16, 1, 1, 1), "gpus", "at least 1");
  expect_invalid(m, plan(Method::ulysses, 8, 0, 8, 8, 1), "seq_len", "positive");
  expect_invalid(m, plan(Method::ulysses, 8, -4096, 8, 8, 1), "seq_len", "positive");
  expect_invalid(m, plan(Method::ulysses, 8, 1 << 16, 0, 0, 1), "sp", "at least 1");
  expect_invalid(m, plan(Method::ulysses, 8, 1 << 16, -8, 8, 1), "sp", "at least 1");
  Plan mb = plan(Method::ulysses, 8, 1 << 16, 8, 8, 1);
  mb.micro_batch = 0;
  expect_invalid(m, mb, "micro_batch", "at least 1");
  Plan z = plan(Method::ulysses, 8, 1 << 16, 8, 8, 1);
  z.mem.zero = 4;
  expect_invalid(m, z, "zero", "does not exist");
}

TEST(Validity, OffloadedCheckpointsNeedFullCheckpointing) {
  Plan p = plan(Method::ulysses, 8, 1 << 16, 8, 8, 1);
  p.mem.offload_checkpoints = true;
  expect_invalid(load_model("llama3-8b"), p, "offload_checkpoints", "--checkpoint full");
}

TEST(Validity, SizesAboveTheLimitsAreRejectedNamingTheBound) {
  const Model m = load_model("llama3-8b");
  const int big = limits::kMaxGpus + 1;
  expect_invalid(m, plan(Method::ulysses, big, 1 << 16, 1, 1, 1), "gpus", "above the limit of 1048576");
  expect_invalid(m, plan(Method::ulysses, 8, limits::kMaxSeqLen + 8, 8, 8, 1), "seq_len", "above the limit of 1099511627776");
  expect_invalid(m, plan(Method::hybrid, 8, 1 << 16, 8, 4, big), "ring_degree", "above the limit of 1048576");
  Plan mb = plan(Method::ulysses, 8, 1 << 16, 8, 8, 1);
  mb.micro_batch = limits::kMaxMicroBatch + 1;
  expect_invalid(m, mb, "micro_batch", "above the limit of 65536");
}

TEST(Validity, TheDegreeProductDoesNotWrap) {
  // 65536 x 65537 = 2^32 + 65536: in 32 bits that is sp 65536, which would pass as valid.
  const Model m = load_model("llama3-8b");
  expect_invalid(m, plan(Method::hybrid, 1 << 16, std::int64_t{1} << 30, 1 << 16, 1 << 16, (1 << 16) + 1), "sp",
                 "must equal ulysses_degree 65536 x ring_degree 65537");
  // The fuzzer's case: U 4 x R 1073741825 (= 4 in 32 bits) with sp 4.
  expect_invalid(m, plan(Method::hybrid, 4, 1 << 16, 4, 4, 1073741825), "ring_degree", "above the limit");
}

TEST(ModelParams, CountBeyond64BitsIsAnErrorNotAWrappedNumber) {
  Model m = load_model("llama3-8b");
  const std::int64_t ok = m.total_params();
  EXPECT_GT(ok, 7'000'000'000);
  m.layers = 1 << 14;
  m.hidden = 1 << 20;
  m.heads = m.kv_heads = 1 << 16;
  m.head_dim = 1 << 16;  // q = 2^32 per token: 2^14 layers x 2^54 per layer does not fit in 64 bits
  EXPECT_THROW(m.total_params(), Error);
}

}  // namespace
}  // namespace seqpar::sim

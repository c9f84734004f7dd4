// Up-front size limits of the training step (size_limits.hpp): huge sizes are errors naming the
// fields and the bound before anything is allocated; the estimate tracks the counting allocator.
#include <gtest/gtest.h>

#include <string>

#include "seqpar/core/error.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/train/model_config.hpp"
#include "seqpar/train/size_limits.hpp"
#include "seqpar/train/trainer.hpp"

namespace seqpar::train {
namespace {

std::string error_of(const TrainSetup& s) {
  try {
    check_step_sizes(s);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SizeLimits, TheDefaultStepPasses) { EXPECT_EQ(error_of(TrainSetup{}), ""); }

// The step builds a Llama block: a model preset of another block is refused, naming the field,
// rather than trained as a different model under its name.
TEST(SizeLimits, OnlyLlamaStyleBlocksBecomeTrainingSteps) {
  auto refusal = [](const sim::Model& m) -> std::string {
    try {
      from_sim(m);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  const sim::Model llama = sim::load_model("llama3-8b");
  EXPECT_EQ(refusal(llama), "");
  EXPECT_NE(refusal(sim::load_model("gpt-1.3b")).find("mlp must be swiglu"), std::string::npos);
  sim::Model m = llama;
  m.norm = sim::NormKind::layernorm;
  EXPECT_NE(refusal(m).find("model 'llama3-8b': norm must be rmsnorm"), std::string::npos) << refusal(m);
  m = llama;
  m.positions = sim::PositionKind::learned;
  EXPECT_NE(refusal(m).find("model 'llama3-8b': positions must be rope"), std::string::npos) << refusal(m);
  m = llama;
  m.attention_sinks = true;  // gpt-oss's: the step's softmax has no sink logit
  EXPECT_NE(refusal(m).find("model 'llama3-8b': attention sinks are simulator-only"), std::string::npos) << refusal(m);
  // Experts were dropped silently before: Mixtral trained as a dense Llama of its ffn_hidden.
  EXPECT_NE(refusal(sim::load_model("mixtral-8x7b")).find("model 'mixtral-8x7b': mixture of experts (8 routed experts, "
                                                          "top 2) is simulator-only"),
            std::string::npos)
      << refusal(sim::load_model("mixtral-8x7b"));
  for (const char* moe : {"qwen3-30b-a3b", "glm-4.5-air", "gpt-oss-120b", "deepseek-v3"})
    EXPECT_NE(refusal(sim::load_model(moe)), "") << moe;
}

TEST(SizeLimits, HugeSizesNameTheirFieldsAndTheBound) {
  TrainSetup s;
  s.model.hidden = 1 << 30;  // the embedding alone: 256 x 2^30 parameters x 16 bytes = 4 TiB
  std::string e = error_of(s);
  EXPECT_NE(e.find("above the limit of 1 TiB"), std::string::npos) << e;
  // MLP weights, 2 layers x 3 x 2^30 x 128 parameters, are the largest part (1.5 of 4.5 TiB).
  EXPECT_NE(e.find("the largest part is MLP weights"), std::string::npos) << e;
  EXPECT_NE(e.find("--hidden x --ffn-hidden"), std::string::npos) << e;
  EXPECT_NE(e.find("(reduce those sizes)"), std::string::npos) << e;  // --sp does not shard weights

  s = TrainSetup{};
  s.model.layers = 1 << 30;
  e = error_of(s);
  EXPECT_NE(e.find("the largest part is MLP weights with their gradients and AdamW states (16 bytes x --layers"),
            std::string::npos) << e;

  s = TrainSetup{};
  s.model.vocab = 1 << 30;
  e = error_of(s);
  EXPECT_NE(e.find("the largest part is embedding and LM head weights"), std::string::npos) << e;
  EXPECT_NE(e.find("--vocab x --hidden"), std::string::npos) << e;

  s = TrainSetup{};
  s.model.vocab = 1 << 30;
  s.seq_len = 1 << 20;  // logits: 2^20 tokens x 2^30 vocabulary
  e = error_of(s);
  EXPECT_NE(e.find("logits (--micro-batch x --seq-len / sp x --vocab)"), std::string::npos) << e;
  EXPECT_NE(e.find("(reduce those sizes or raise --sp)"), std::string::npos) << e;

  s = TrainSetup{};
  s.seq_len = std::int64_t{1} << 32;  // positions are int
  e = error_of(s);
  EXPECT_NE(e.find("--seq-len: 4294967296 is above the limit of 2147483647"), std::string::npos) << e;

  s = TrainSetup{};
  s.seq_len = 1 << 30;
  s.micro_batch = 4;
  e = error_of(s);
  EXPECT_NE(e.find("--micro-batch x --seq-len / sp: 4294967296 is above the limit of 2147483647"),
            std::string::npos) << e;

  s = TrainSetup{};
  s.model.heads = 1 << 20;
  s.model.kv_heads = 1;
  s.model.head_dim = 1 << 12;
  e = error_of(s);
  EXPECT_NE(e.find("--heads x --head-dim: 4294967296 is above the limit of 2147483647"), std::string::npos) << e;

  s = TrainSetup{};
  s.model.hidden = s.model.ffn = s.model.vocab = s.model.layers = 2147483647;  // past 64 bits
  e = error_of(s);
  EXPECT_NE(e.find("does not fit in 64 bits"), std::string::npos) << e;
  EXPECT_NE(e.find("1 TiB"), std::string::npos) << e;
}

TEST(SizeLimits, TheTrainerRefusesBeforeAllocating) {
  TrainSetup s;
  s.model.ffn = 1 << 30;
  auto be = make_cpu_backend();
  EXPECT_THROW(Trainer(*be, nullptr, s), Error);
  EXPECT_EQ(be->memory().peak_bytes(), 0);
}

// ALST's memory features are what make million-token ranks possible: a Llama-3-8B-shaped rank of
// ALST's 3.7M tokens over 8 GPUs (462K tokens) is refused without them and accepted with them.
TEST(SizeLimits, MemoryFeaturesAreCountedSoAlstScaleRanksPass) {
  TrainSetup s;
  s.model.layers = 32;
  s.model.hidden = 4096;
  s.model.heads = 32;
  s.model.kv_heads = 8;
  s.model.head_dim = 128;
  s.model.ffn = 14336;
  s.model.vocab = 128256;
  s.seq_len = 3700000 / 8 * 8;
  s.ulysses = 8;
  EXPECT_THROW(check_step_sizes(s), Error);
  s.mem.checkpoint = seqpar::Checkpoint::full;
  s.mem.offload_checkpoints = true;
  s.mem.tiled_mlp = true;
  s.mem.tiled_loss = true;
  EXPECT_NO_THROW(check_step_sizes(s));
  const StepFootprint with = estimate_footprint(s);
  s.mem.tiled_loss = false;
  EXPECT_LT(with.logits_bytes, estimate_footprint(s).logits_bytes);
}

TEST(SizeLimits, TheEstimateTracksTheMeasuredPeak) {
  for (const int ffn : {128, 1024}) {
    TrainSetup s;
    s.model.ffn = ffn;
    s.seq_len = 256;
    s.micro_batch = 2;
    auto be = make_cpu_backend();
    Trainer t(*be, nullptr, s);
    t.step();
    const double measured = static_cast<double>(be->memory().peak_bytes());
    const double estimated = static_cast<double>(estimate_footprint(s).total_bytes());
    EXPECT_GT(estimated, 0.5 * measured) << "ffn " << ffn;
    EXPECT_LT(estimated, 2.0 * measured) << "ffn " << ffn;
  }
}

#if defined(__SANITIZE_ADDRESS__)
#define SEQPAR_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SEQPAR_UNDER_ASAN 1
#endif
#endif

TEST(SizeLimits, OutOfMemoryIsAnErrorNamingTheAllocation) {
#ifdef SEQPAR_UNDER_ASAN
  GTEST_SKIP() << "AddressSanitizer aborts on an impossible allocation instead of failing it";
#endif
  auto be = make_cpu_backend();
  try {
    be->allocate(std::int64_t{1} << 62, MemCategory::logits);
    FAIL() << "a 4 EiB allocation succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of host memory: allocating 4611686018427387904 bytes for logits"),
              std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace seqpar::train

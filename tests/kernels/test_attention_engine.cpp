// The attention engine vocabulary (attention_engine.hpp): spellings round-trip, bad values name the
// flag and the accepted values, and the default rule is "cudnn where available, else seqpar".
#include <gtest/gtest.h>

#include <string>

#include "seqpar/core/error.hpp"
#include "seqpar/kernels/attention_engine.hpp"

namespace seqpar {
namespace {

using kernels::AttentionEngine;
using kernels::EngineAvailability;

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(AttentionEngine, SpellingsRoundTrip) {
  for (AttentionEngine e : {AttentionEngine::seqpar, AttentionEngine::cudnn})
    EXPECT_EQ(kernels::parse_attention_engine(kernels::to_string(e), "--attention"), e);
  EXPECT_STREQ(kernels::to_string(AttentionEngine::seqpar), "seqpar");
  EXPECT_STREQ(kernels::to_string(AttentionEngine::cudnn), "cudnn");
}

TEST(AttentionEngine, UnknownValueNamesFlagAndAcceptedValues) {
  const std::string msg = error_of([] { kernels::parse_attention_engine("flash", "--attention"); });
  EXPECT_NE(msg.find("--attention 'flash'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("accepted: seqpar, cudnn"), std::string::npos) << msg;
  // Case matters: the JSON field is written in one spelling.
  EXPECT_THROW(kernels::parse_attention_engine("cuDNN", "--attention"), Error);
  EXPECT_THROW(kernels::parse_attention_engine("", "--attention"), Error);
}

TEST(AttentionEngine, DefaultIsCudnnWhereAvailable) {
  EXPECT_EQ(kernels::default_attention_engine(EngineAvailability{true, ""}), AttentionEngine::cudnn);
  EXPECT_EQ(kernels::default_attention_engine(EngineAvailability{false, "no CUDA device"}), AttentionEngine::seqpar);
}

TEST(AttentionEngine, ChooseTakesTheRequestOrTheDefault) {
  const EngineAvailability have{true, ""}, lack{false, "cuDNN was not found when this build was configured"};
  EXPECT_EQ(kernels::choose_attention_engine(std::nullopt, have, "--attention"), AttentionEngine::cudnn);
  EXPECT_EQ(kernels::choose_attention_engine(std::nullopt, lack, "--attention"), AttentionEngine::seqpar);
  EXPECT_EQ(kernels::choose_attention_engine(AttentionEngine::seqpar, have, "--attention"), AttentionEngine::seqpar);
  EXPECT_EQ(kernels::choose_attention_engine(AttentionEngine::seqpar, lack, "--attention"), AttentionEngine::seqpar);
  EXPECT_EQ(kernels::choose_attention_engine(AttentionEngine::cudnn, have, "--attention"), AttentionEngine::cudnn);
}

TEST(AttentionEngine, CudnnWhereAbsentSaysWhy) {
  const EngineAvailability lack{false, "no CUDA device"};
  const std::string msg =
      error_of([&] { kernels::choose_attention_engine(AttentionEngine::cudnn, lack, "--attention"); });
  EXPECT_NE(msg.find("--attention cudnn"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no CUDA device"), std::string::npos) << msg;
}

}  // namespace
}  // namespace seqpar

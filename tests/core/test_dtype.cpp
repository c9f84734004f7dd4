// seqpar::DType: one spelling per type that round-trips, sizes, the aliases users typed before
// the vocabulary was unified, and errors naming the field.
#include <gtest/gtest.h>

#include <string>

#include "seqpar/core/dtype.hpp"
#include "seqpar/core/error.hpp"

using seqpar::DType;

TEST(DType, SpellingsRoundTripAndAreDistinct) {
  for (DType a : seqpar::all_dtypes) {
    EXPECT_EQ(seqpar::parse_dtype(seqpar::to_string(a)), a);
    for (DType b : seqpar::all_dtypes) {
      if (a != b) { EXPECT_STRNE(seqpar::to_string(a), seqpar::to_string(b)); }
    }
  }
}

TEST(DType, Sizes) {
  EXPECT_EQ(seqpar::dtype_size(DType::bf16), 2u);
  EXPECT_EQ(seqpar::dtype_size(DType::fp16), 2u);
  EXPECT_EQ(seqpar::dtype_size(DType::fp32), 4u);
  EXPECT_EQ(seqpar::dtype_size(DType::fp64), 8u);
  EXPECT_EQ(seqpar::dtype_size(DType::i32), 4u);
  EXPECT_EQ(seqpar::dtype_size(DType::i64), 8u);
  EXPECT_EQ(seqpar::dtype_size(DType::u8), 1u);
}

TEST(DType, OlderAndNcclTestsSpellingsStayAccepted) {
  EXPECT_EQ(seqpar::parse_dtype("f32"), DType::fp32);
  EXPECT_EQ(seqpar::parse_dtype("f16"), DType::fp16);
  EXPECT_EQ(seqpar::parse_dtype("f64"), DType::fp64);
  EXPECT_EQ(seqpar::parse_dtype("float"), DType::fp32);
  EXPECT_EQ(seqpar::parse_dtype("half"), DType::fp16);
  EXPECT_EQ(seqpar::parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(seqpar::parse_dtype("double"), DType::fp64);
  EXPECT_EQ(seqpar::parse_dtype("int32"), DType::i32);
  EXPECT_EQ(seqpar::parse_dtype("int64"), DType::i64);
  EXPECT_EQ(seqpar::parse_dtype("uint8"), DType::u8);
}

TEST(DType, UnknownNamesTheField) {
  try {
    seqpar::parse_dtype("fp8", "--dtype");
    FAIL() << "fp8 was accepted";
  } catch (const seqpar::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--dtype"), std::string::npos) << what;
    EXPECT_NE(what.find("fp8"), std::string::npos) << what;
    EXPECT_NE(what.find("bf16"), std::string::npos) << what;
  }
  EXPECT_THROW(seqpar::parse_dtype(""), seqpar::Error);
  EXPECT_THROW(seqpar::parse_dtype("FP32"), seqpar::Error);
}

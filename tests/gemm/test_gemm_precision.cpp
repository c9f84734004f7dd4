// seqpar-bench-gemm's precisions and row fields (bench/gemm/gemm_precision.hpp): --dtype and --fp8-scaling
// parsing and their errors, FP8's TN layout, and the JSON fields of bf16 and FP8 rows.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "seqpar/bench/gemm_precision.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/presets.hpp"

namespace seqpar::bench {
namespace {

std::string error_of(const std::string& dtypes, const std::string& scalings, const std::string& library) {
  try {
    parse_gemm_precisions(dtypes, scalings, library);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GemmPrecision, ParsesDtypesAndScalingsInOrder) {
  const auto p = parse_gemm_precisions("bf16,fp8", "tensor,row", "lt");
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].label(), "bf16");
  EXPECT_EQ(p[1].label(), "fp8_e4m3_tensor");
  EXPECT_EQ(p[2].label(), "fp8_e4m3_row");
  EXPECT_EQ(p[2].dtype(), "fp8_e4m3");
  EXPECT_EQ(parse_gemm_precisions("fp8", "row", "lt").size(), 1u);
  EXPECT_EQ(parse_gemm_precisions("bf16", "tensor", "gemmex").size(), 1u);  // scalings unused without fp8
}

TEST(GemmPrecision, ErrorsNameTheOption) {
  EXPECT_NE(error_of("fp16", "tensor", "lt").find("--dtype: unknown type 'fp16'"), std::string::npos);
  EXPECT_NE(error_of("fp8", "block", "lt").find("--fp8-scaling: 'block'"), std::string::npos);
  EXPECT_NE(error_of("fp8", "tensor", "gemmex").find("--library gemmex"), std::string::npos);
  EXPECT_NE(error_of("bf16,bf16", "tensor", "lt").find("--dtype: 'bf16' given twice"), std::string::npos);
  EXPECT_NE(error_of("fp8", "row,row", "lt").find("--fp8-scaling: 'row' given twice"), std::string::npos);
}

TEST(GemmPrecision, Bf16RowsKeepTheirFields) {
  const auto shapes = layer_gemms(sim::load_model("llama3-8b"), 2048, {"fwd", "dx", "dw"});
  for (const GemmShape& s : shapes) {
    const nlohmann::json f = gemm_row_fields(s, GemmPrecision{}, "cublasLt");
    std::set<std::string> keys;
    for (auto it = f.begin(); it != f.end(); ++it) keys.insert(it.key());
    EXPECT_EQ(keys, (std::set<std::string>{"op", "gemm", "m", "n", "k", "dtype", "accumulate", "trans_a", "trans_b",
                                           "backend", "library", "flops", "tokens"}));
    EXPECT_EQ(f["dtype"], "bf16");
    EXPECT_EQ(f["trans_a"], s.trans_a);
    EXPECT_EQ(f["trans_b"], s.trans_b);
    EXPECT_EQ(f["flops"].get<double>(), 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k));
  }
}

TEST(GemmPrecision, Fp8RowsRunTNAndSaySo) {
  const auto shapes = layer_gemms(sim::load_model("llama3-8b"), 4096, {"fwd", "dx", "dw"});
  for (const GemmShape& s : shapes) {
    const nlohmann::json f = gemm_row_fields(s, {true, Fp8Scaling::row}, "cublasLt");
    SCOPED_TRACE(s.op);
    EXPECT_EQ(f["dtype"], "fp8_e4m3");
    EXPECT_EQ(f["output"], "bf16");
    EXPECT_EQ(f["accumulate"], "fp32");
    EXPECT_EQ(f["scaling"], "row");
    EXPECT_EQ(f["fast_accum"], false);
    EXPECT_EQ(f["trans_a"], false);
    EXPECT_EQ(f["trans_b"], true);
    EXPECT_EQ(f["m"], s.m);
    EXPECT_EQ(f["n"], s.n);
    EXPECT_EQ(f["k"], s.k);
    EXPECT_EQ(f["tokens"], 4096);
    EXPECT_EQ(f["flops"].get<double>(), s.flops());
    // The forward is already TN; dX and dW need the transposed FP8 copies.
    EXPECT_EQ(f["transposed_copies"], s.op.ends_with("_fwd") ? false : true);
  }
  const GemmShape sq = square_gemm(1024);
  EXPECT_FALSE(gemm_row_fields(sq, {true, Fp8Scaling::tensor}, "cublasLt").contains("tokens"));
}

}  // namespace
}  // namespace seqpar::bench

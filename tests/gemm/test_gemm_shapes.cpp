// The GEMM shape lists of seqpar-bench-gemm: a model's layer GEMMs (forward, dX, dW) and the square sizes.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "seqpar/bench/gemm_shapes.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/presets.hpp"

namespace seqpar::bench {
namespace {

std::map<std::string, GemmShape> by_op(const std::vector<GemmShape>& shapes) {
  std::map<std::string, GemmShape> out;
  for (const GemmShape& s : shapes) EXPECT_TRUE(out.emplace(s.op, s).second) << "duplicate op " << s.op;
  return out;
}

TEST(GemmShapes, Llama3_8bForwardShapes) {
  const auto g = by_op(layer_gemms(sim::load_model("llama3-8b"), 4096, {"fwd"}));
  ASSERT_EQ(g.size(), 5u);
  const GemmShape& qkv = g.at("qkv_fwd");
  EXPECT_EQ(qkv.m, 4096);
  EXPECT_EQ(qkv.n, 4096 + 2 * 1024);  // 32 query heads and 2 x 8 KV heads of 128
  EXPECT_EQ(qkv.k, 4096);
  EXPECT_TRUE(qkv.trans_b);
  EXPECT_FALSE(qkv.trans_a);
  EXPECT_EQ(g.at("attn_out_fwd").n, 4096);
  EXPECT_EQ(g.at("attn_out_fwd").k, 4096);
  EXPECT_EQ(g.at("mlp_up_gate_fwd").n, 2 * 14336);  // SwiGLU: up and gate in one GEMM
  EXPECT_EQ(g.at("mlp_up_gate_fwd").k, 4096);
  EXPECT_EQ(g.at("mlp_down_fwd").n, 4096);
  EXPECT_EQ(g.at("mlp_down_fwd").k, 14336);
  EXPECT_EQ(g.at("lm_head_fwd").n, 128256);
  EXPECT_EQ(g.at("lm_head_fwd").k, 4096);
  EXPECT_EQ(gemm_name(qkv, "bf16"), "gemm/bf16/qkv_fwd/m4096n6144k4096");
}

TEST(GemmShapes, BackwardGemmsTransposeTheForward) {
  const auto g = by_op(layer_gemms(sim::load_model("llama3-8b"), 2048));
  ASSERT_EQ(g.size(), 15u);
  for (const char* layer : {"qkv", "attn_out", "mlp_up_gate", "mlp_down", "lm_head"}) {
    const std::string l = layer;
    const GemmShape &f = g.at(l + "_fwd"), &dx = g.at(l + "_dx"), &dw = g.at(l + "_dw");
    // dX[t,in] = dY[t,out] W[out,in]
    EXPECT_EQ(dx.m, f.m) << l;
    EXPECT_EQ(dx.n, f.k) << l;
    EXPECT_EQ(dx.k, f.n) << l;
    EXPECT_FALSE(dx.trans_a || dx.trans_b) << l;
    // dW[out,in] = dY[t,out]^T X[t,in]: the reduction runs over the tokens
    EXPECT_EQ(dw.m, f.n) << l;
    EXPECT_EQ(dw.n, f.k) << l;
    EXPECT_EQ(dw.k, 2048) << l;
    EXPECT_TRUE(dw.trans_a) << l;
    EXPECT_FALSE(dw.trans_b) << l;
    for (const GemmShape* s : {&f, &dx, &dw}) {
      EXPECT_EQ(s->tokens, 2048) << s->op;
      EXPECT_DOUBLE_EQ(s->flops(), f.flops()) << s->op;
    }
  }
}

TEST(GemmShapes, GeluModelHasOneUpProjection) {
  sim::Model m = sim::load_model("llama3-8b");
  m.mlp = sim::MlpKind::gelu;
  const auto g = by_op(layer_gemms(m, 256, {"fwd"}));
  ASSERT_TRUE(g.count("mlp_up_fwd"));
  EXPECT_EQ(g.at("mlp_up_fwd").n, 14336);
  EXPECT_EQ(g.count("mlp_up_gate_fwd"), 0u);
}

TEST(GemmShapes, FlopsAreTwoMnk) {
  const GemmShape s = square_gemm(1024);
  EXPECT_EQ(s.m, 1024);
  EXPECT_EQ(s.n, 1024);
  EXPECT_EQ(s.k, 1024);
  EXPECT_DOUBLE_EQ(s.flops(), 2.0 * 1024 * 1024 * 1024);
  EXPECT_EQ(gemm_name(s, "bf16"), "gemm/bf16/square/m1024n1024k1024");
}

TEST(GemmShapes, BadInputIsRejectedWithTheField) {
  const sim::Model m = sim::load_model("llama3-8b");
  EXPECT_THROW(layer_gemms(m, 0), Error);
  EXPECT_THROW(layer_gemms(m, -5), Error);
  EXPECT_THROW(square_gemm(0), Error);
  try {
    layer_gemms(m, 256, {"fwd", "bwd"});
    FAIL() << "unknown pass accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'bwd'"), std::string::npos) << e.what();
  }
  sim::Model broken = m;
  broken.kv_heads = 0;
  try {
    layer_gemms(broken, 256);
    FAIL() << "kv_heads = 0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kv_heads"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace seqpar::bench

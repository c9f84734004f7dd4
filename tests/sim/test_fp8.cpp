// FP8 in the plan (core/precision.hpp) and its cost table (sim/fp8_cost.hpp): parsing and JSON,
// the validity rules, the GEMM, cast, attention, communication and memory terms against hand
// arithmetic on the round fixtures and the presets, and the search's FP8 candidates.
#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/attention_kernels.hpp"
#include "seqpar/sim/compute_cost.hpp"
#include "seqpar/sim/fp8_cost.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/simulate.hpp"

namespace seqpar::sim {
namespace {

using testing::plan;

Precision fp8(std::string_view parts, Fp8Recipe r = Fp8Recipe::delayed) { return {parse_fp8_parts(parts), r}; }

// The round system with FP8 figures and a framework that runs every part.
System fp8_system() {
  System s = testing::round_system();
  s.gpu.fp8_flops = 200e12;
  s.gpu.fp8_gemm_efficiency = 0.5;
  s.gpu.fp8_gemm_half_tokens = s.gpu.gemm_half_tokens;
  s.gpu.fp8_attention_fwd_efficiency = 0.4;
  s.gpu.compute_capability = "9.0";
  s.profile.fp8_parts = 0xF;
  s.profile.fp8_recipes = {Fp8Recipe::delayed, Fp8Recipe::current};
  s.profile.fp8_weight_cache_bytes_per_param = 2;
  return s;
}

TEST(Fp8Vocabulary, PartsParseAndPrintInOneOrder) {
  EXPECT_EQ(fp8_parts_text(fp8("attention,gemm")), "gemm,attention");
  EXPECT_EQ(fp8_parts_text(fp8("all")), "gemm,attention,weights,comm");
  EXPECT_EQ(fp8_parts_text(fp8("none")), "none");
  EXPECT_FALSE(fp8("").any_fp8());
  EXPECT_THROW(parse_fp8_parts("gemm,gemm"), Error);
  EXPECT_THROW(parse_fp8_parts("gemm,"), Error);
  EXPECT_THROW(parse_fp8_parts("gemms"), Error);
  EXPECT_THROW(parse_fp8_recipe("tensorwise"), Error);
  EXPECT_EQ(parse_fp8_recipe("mxfp8"), Fp8Recipe::mxfp8);
}

TEST(Fp8Vocabulary, PlanJsonRoundTripsAndOlderDocumentsReadAsBf16) {
  Plan p = plan(Method::ring_zigzag, 8, 8192, 2, 1, 2);
  p.precision = fp8("gemm,weights", Fp8Recipe::current);
  const nlohmann::json j = to_json(p);
  EXPECT_EQ(j["fp8"], "gemm,weights");
  EXPECT_EQ(j["fp8_recipe"], "current");
  EXPECT_EQ(plan_from_json(j), p);
  nlohmann::json old = j;
  old.erase("fp8");
  old.erase("fp8_recipe");
  EXPECT_FALSE(plan_from_json(old).precision.any_fp8());
  EXPECT_NE(describe(p).find("fp8=gemm,weights/current"), std::string::npos) << describe(p);
  old["fp8"] = "gemm,bogus";
  EXPECT_THROW(plan_from_json(old), Error);
}

TEST(Fp8Validity, GpuFrameworkRecipeAndKernelRulesNameTheirInput) {
  const Model m = testing::tiny_model();
  Plan p = plan(Method::ulysses, 4, 64, 2, 2, 1);
  p.precision = fp8("gemm");
  std::vector<std::string> errors;
  EXPECT_TRUE(check_plan(m, fp8_system(), p, errors)) << (errors.empty() ? "" : errors[0]);

  System no_fp8 = fp8_system();
  no_fp8.gpu.fp8_flops = 0;
  errors.clear();
  EXPECT_FALSE(check_plan(m, no_fp8, p, errors));
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors[0].find("no FP8"), std::string::npos) << errors[0];

  System bf16_only = fp8_system();
  bf16_only.profile.fp8_parts = 0;
  errors.clear();
  EXPECT_FALSE(check_plan(m, bf16_only, p, errors));

  System gemm_only = fp8_system();
  gemm_only.profile.fp8_parts = static_cast<std::uint8_t>(Fp8Part::gemm);
  Plan q = p;
  q.precision = fp8("gemm,comm");
  errors.clear();
  EXPECT_FALSE(check_plan(m, gemm_only, q, errors));
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors.back().find("comm"), std::string::npos) << errors.back();

  q.precision = fp8("gemm", Fp8Recipe::mxfp8);  // Hopper has no MXFP8, and the framework lists no such recipe
  errors.clear();
  EXPECT_FALSE(check_plan(m, fp8_system(), q, errors));
  EXPECT_EQ(errors.size(), 2u);

  System no_fp8_attention = fp8_system();
  no_fp8_attention.gpu.fp8_attention_fwd_efficiency = 0;
  q.precision = fp8("attention");
  errors.clear();
  EXPECT_FALSE(check_plan(m, no_fp8_attention, q, errors));
}

TEST(Fp8Cost, LinearGemmsRunAtTheFp8RateAndTheHeadStaysBf16) {
  const System s = fp8_system();
  const Model m = testing::tiny_model();
  Plan bf16 = plan(Method::ulysses, 4, 1 << 12, 2, 2, 1);
  Plan p = bf16;
  p.precision = fp8("gemm");
  const double flops = 1e12, tokens = 1e6;  // far above the half point: both curves at their plateau
  const double t16 = linear_gemm_time(s, bf16, flops, tokens, 1), t8 = linear_gemm_time(s, p, flops, tokens, 1);
  // bf16: 100 TFLOP/s x 0.5; FP8: 200 TFLOP/s x 0.5, with the curve's L/(L+h) at 1e6 tokens.
  const double curve = tokens / (tokens + s.gpu.gemm_half_tokens);
  EXPECT_NEAR(t16, flops / (100e12 * 0.5 * curve), 1e-12);
  EXPECT_NEAR(t8, flops / (200e12 * 0.5 * curve), 1e-12);
  // In a whole step: GEMM time falls, the head's share (bf16 in both) does not.
  const Result r16 = simulate(m, s, bf16), r8 = simulate(m, s, p);
  ASSERT_TRUE(r16.valid && r8.valid);
  EXPECT_LT(r8.time.gemm, r16.time.gemm);
  EXPECT_NEAR(r8.figures.head_fwd_s, r16.figures.head_fwd_s, 1e-15);
}

TEST(Fp8Cost, CastBytesFollowTheRecipeAndTheOperands) {
  const Model m = testing::tiny_model();  // hidden 8, q 8, kv 8, ffn 16 (SwiGLU: fc1 32)
  Plan p = plan(Method::ulysses, 4, 64, 2, 2, 1);
  EXPECT_EQ(fp8_activation_cast_bytes(m, p, 100).fwd, 0.0);  // bf16: no casts
  p.precision = fp8("gemm");
  const Fp8CastBytes c = fp8_activation_cast_bytes(m, p, 100);
  // Delayed scaling: read 2 bytes, write the FP8 value and its transpose (4 bytes per element).
  EXPECT_DOUBLE_EQ(c.fwd, 4.0 * 100 * (8 + 8 + 8 + 16));
  EXPECT_DOUBLE_EQ(c.bwd, 4.0 * 100 * ((8 + 2 * 8) + 8 + 32 + 8));
  p.precision.recipe = Fp8Recipe::current;  // one more 2-byte read for the tensor's own amax
  EXPECT_DOUBLE_EQ(fp8_activation_cast_bytes(m, p, 100).fwd, 6.0 * 100 * 40);
  p.tp = 2;
  EXPECT_DOUBLE_EQ(fp8_activation_cast_bytes(m, p, 100).fwd, 3.0 * 100 * 40);
  // Weights once per step, with their transposes; none where they are kept in FP8.
  p.tp = 1;
  EXPECT_DOUBLE_EQ(fp8_weight_cast_bytes(m, p), 6.0 * m.layers * double(m.params_per_layer()));
  p.precision = fp8("gemm,weights");
  EXPECT_EQ(fp8_weight_cast_bytes(m, p), 0.0);
  for (Fp8Recipe r : {Fp8Recipe::delayed, Fp8Recipe::current, Fp8Recipe::rowwise, Fp8Recipe::mxfp8})
    EXPECT_GE(fp8_cast_bytes_per_element(r), 4.0) << to_string(r);
}

TEST(Fp8Cost, AttentionInFp8UsesTheKernelsFp8FigureInEachDirectionItHas) {
  Gpu g = fp8_system().gpu;
  const AttentionKernel bf16{128, true, false}, in_fp8{128, true, true};
  const double tokens = 1e9;  // the plateau
  EXPECT_NEAR(attention_rate(g, tokens, false, in_fp8), 200e12 * 0.4, 1e3);
  // No FP8 backward figure: the backward runs at the bf16 rate.
  EXPECT_DOUBLE_EQ(attention_rate(g, tokens, true, in_fp8), attention_rate(g, tokens, true, bf16));
  g.fp8_attention_bwd_efficiency = 0.3;
  EXPECT_NEAR(attention_rate(g, tokens, true, in_fp8), 200e12 * 0.3, 1e3);
}

TEST(Fp8Cost, ParameterGatherAndForwardActivationsHalveOnlyWhereTheirPartIsFp8) {
  const System s = fp8_system();
  const Model m = testing::tiny_model();
  Plan base = plan(Method::ring_zigzag, 8, 1 << 14, 4, 1, 4);
  base.precision = fp8("gemm");
  Plan weights = base, comm = base;
  weights.precision = fp8("gemm,weights");
  comm.precision = fp8("gemm,comm");
  const StructureCosts cb = structure_costs(m, s, base), cw = structure_costs(m, s, weights),
                       cc = structure_costs(m, s, comm);
  EXPECT_LT(cw.zero_all_gather_s, cb.zero_all_gather_s);
  EXPECT_DOUBLE_EQ(cw.zero_reduce_scatter_s, cb.zero_reduce_scatter_s);  // gradients stay bf16
  EXPECT_LT(cc.attention.fwd_comm_s, cb.attention.fwd_comm_s);
  EXPECT_DOUBLE_EQ(cc.attention.bwd_comm_s, cb.attention.bwd_comm_s);
}

TEST(Fp8Memory, WeightCopiesScalesAndFp8SavedInputsFromTheProfile) {
  const Model m = load_model("llama3-8b");
  System s = load_system_with_framework("dgx-h100", "", "megatron-core");
  Plan bf16 = plan(Method::ring_zigzag, 8, 8192, 2, 1, 2);
  bf16.mem.zero = 1;
  Plan p = bf16;
  p.precision = fp8("gemm");
  const Result r16 = simulate(m, s, bf16), r8 = simulate(m, s, p);
  ASSERT_TRUE(r16.valid && r8.valid) << (r8.errors.empty() ? "" : r8.errors[0]);
  // Parameters: + 2 bytes per layer parameter (FP8 copy and transpose) + the scales.
  const double layer_params = double(m.layers) * double(m.params_per_layer());
  const double scales = 4.0 * 12 * m.layers * (s.profile.fp8_amax_history + 1);
  EXPECT_NEAR(r8.memory.peak.parameters - r16.memory.peak.parameters, 2.0 * layer_params + scales, 1.0);
  // Activations: three GEMM inputs kept in FP8 (-1 byte each of hidden, hidden, ffn) and the
  // projection's own FP8 input (+1 byte of q), per token per layer, on 4,096 tokens of the rank.
  const double per_token = -(m.hidden + m.hidden + double(m.ffn_hidden)) + double(m.heads) * m.head_dim;
  const double expected = per_token * 4096 * m.layers;
  EXPECT_NEAR(r8.memory.peak.activations - r16.memory.peak.activations, expected, std::abs(expected) * 1e-9 + 1);
}

TEST(Fp8Search, AllowFp8AddsTheFrameworksSetsAndAdviseCanChooseThem) {
  const Model m = load_model("llama3-8b");
  const System s = load_system_with_framework("dgx-h100", "", "megatron-core");
  const std::vector<Precision> c = fp8_candidates(s);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(fp8_parts_text(c[0]), "gemm,weights");
  EXPECT_EQ(fp8_parts_text(c[1]), "gemm,attention,weights");
  EXPECT_EQ(c[0].recipe, Fp8Recipe::delayed);
  // The default framework runs no FP8: nothing to add.
  EXPECT_TRUE(fp8_candidates(load_system("dgx-h100")).empty());
  SearchSpace space;
  space.methods = {Method::ulysses};
  space.precisions = {Precision{}};
  for (const Precision& x : c) space.precisions.push_back(x);
  SearchSpace bf16_only;
  bf16_only.methods = {Method::ulysses};
  const std::size_t n1 = structures(m, s, 8, 32768, bf16_only).size();
  EXPECT_EQ(structures(m, s, 8, 32768, space).size(), 3 * n1);
  const Advice a = advise(m, s, 8, 32768, space);
  ASSERT_NE(a.best(), nullptr);
  EXPECT_TRUE(a.best()->plan.precision.any_fp8()) << describe(a.best()->plan);
}

}  // namespace
}  // namespace seqpar::sim

// Attention kinds (README "Attention kinds"): sliding-window layers as model data, their per-rank
// work and bytes under every SP method against hand-derived counts, the methods refused for them,
// and the model without kinds unchanged.
#include <gtest/gtest.h>

#include <string>

#include "fixtures.hpp"
#include "seqpar/core/doc_work.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/attention_cost.hpp"
#include "seqpar/sim/compute_cost.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/result_json.hpp"
#include "seqpar/sim/simulate.hpp"
#include "seqpar/sim/window_cost.hpp"

namespace seqpar::sim {
namespace {

using testing::plan;

Model sliding(Model m, std::int64_t window) {
  m.layer_kinds.assign(static_cast<std::size_t>(m.layers), AttentionKind::sliding);
  m.sliding_window = window;
  return m;
}

TEST(AttentionKinds, PresetsLoadWithEveryFigureSourced) {
  const Model g = load_model("gemma3-27b");
  EXPECT_EQ(g.layers, 62);
  EXPECT_EQ(g.sliding_window, 1024);
  // Layer i is full when (i + 1) % 6 == 0: layers 5, 11, ..., 59 -> 10 full, 52 sliding.
  EXPECT_EQ(g.sliding_layers(), 52);
  EXPECT_EQ(g.layer_kinds[5], AttentionKind::full);
  EXPECT_EQ(g.layer_kinds[0], AttentionKind::sliding);
  EXPECT_NE(g.sources.at("sliding_window").find("text_config.sliding_window"), std::string::npos);
  EXPECT_NE(g.sources.at("sliding_window_pattern").find("Gemma3TextConfig"), std::string::npos);
  const Model mi = load_model("mistral-7b-v0.1");
  EXPECT_EQ(mi.sliding_layers(), 32);
  EXPECT_EQ(mi.sliding_window, 4096);
  for (const char* k : {"layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "sliding_window"})
    EXPECT_TRUE(mi.sources.count(k)) << k;
  // A result's model reads back with its kinds.
  const Model back = model_from_json(to_json(g), "round trip");
  EXPECT_EQ(back.layer_kinds, g.layer_kinds);
  EXPECT_EQ(back.sliding_window, g.sliding_window);
  // A model without kinds writes none (its JSON is main's).
  EXPECT_FALSE(to_json(load_model("llama3-8b")).contains("layer_types"));
}

TEST(AttentionKinds, BadKindsAreRefusedByName) {
  nlohmann::json j = to_json(load_model("llama3-8b"));
  auto refused = [&](nlohmann::json bad, const std::string& words) {
    try {
      model_from_json(bad, "m");
      ADD_FAILURE() << "accepted " << bad.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  nlohmann::json a = j;
  a["sliding_window_pattern"] = 6;
  refused(a, "sliding layers need 'sliding_window'");
  nlohmann::json b = j;
  b["layer_types"] = {"full_attention"};
  refused(b, "one attention type per layer (32 layers)");
  nlohmann::json c = j;
  c["sliding_window"] = 0;
  refused(c, "'sliding_window' must be at least 1");
  nlohmann::json d = j;
  d["sliding_window"] = 128;
  d["sliding_window_pattern"] = 2;
  d["layer_types"] = nlohmann::json::array();
  refused(d, "give one of");
}

// Tiny model (2 heads of 4, head_dim 4), N = 16, W = 4. A query at position q sees min(q + 1, 4)
// keys: 1 + 2 + 3 + 4 for q = 0..3, then 4 each for 12 more: 10 + 48 = 58 pairs per head.
TEST(AttentionKinds, UlyssesBandByHand) {
  const System s = testing::round_system();
  const Model full = testing::tiny_model();
  const Model band = sliding(full, 4);
  EXPECT_EQ(band_pairs_between(0, 16, 4), 58);
  EXPECT_EQ(band_pairs(16, 4), 58);  // core's count of the same
  const Plan p = plan(Method::ulysses, 2, 16, 2, 2, 1);
  const AttentionCost f = attention_layer_cost(full, s, p), w = attention_layer_cost(band, s, p);
  // Model FLOPs per GPU: 58 pairs x 4 d (16) x 2 heads / sp 2 = 928.
  EXPECT_DOUBLE_EQ(w.model_flops_fwd, 928);
  // The kernel: 58 pairs against the full layer's N^2 / 2 = 128 at the same (causal) rate on the
  // round GPU (no launch overhead): 58 / 128 of its time.
  EXPECT_NEAR(w.fwd_kernel_s / f.fwd_kernel_s, 58.0 / 128.0, 1e-12);
  EXPECT_NEAR(w.bwd_kernel_s / f.bwd_kernel_s, 58.0 / 128.0, 1e-12);
  // The all-to-alls are the full layer's: q, k, v and the output of every token.
  EXPECT_EQ(w.a2a_qkv_s, f.a2a_qkv_s);
  EXPECT_EQ(w.a2a_o_s, f.a2a_o_s);
  EXPECT_NEAR(w.fwd_s - w.fwd_kernel_s, f.fwd_s - f.fwd_kernel_s, 1e-15);
}

// All-gather (head/tail), R = 2, N = 16, W = 4: four chunks of 4. Chunk 0 holds 1+2+3+4 = 10 pairs,
// chunks 1-3 hold 4 x 4 = 16 each. Rank 0 holds chunks 0 and 3 (26), rank 1 chunks 1 and 2 (32):
// rank 1 is the slowest. Core's mask count says the same.
TEST(AttentionKinds, AllGatherBandByHand) {
  EXPECT_EQ(band_pairs_between(0, 4, 4), 10);
  EXPECT_EQ(band_pairs_between(4, 4, 4), 16);
  WorkOptions opt;
  opt.window = 4;
  const std::vector<std::int64_t> cu = {0, 16};
  const BatchWork bw = count_batch_work(cu, {1, 2, true}, Balancer::zigzag, opt);
  EXPECT_EQ(bw.ranks[0].pairs, 26);
  EXPECT_EQ(bw.ranks[1].pairs, 32);
  // The gather still moves the whole sequence: 16 tokens x 3 bytes a token each step.
  opt.kv_bytes_per_token = 3;
  EXPECT_EQ(count_batch_work(cu, {1, 2, true}, Balancer::zigzag, opt).at(1, 0).kv_bytes, 48);

  const System s = testing::round_system();
  const Model full = testing::tiny_model(), band = sliding(full, 4);
  const Plan p = plan(Method::allgather, 2, 16, 2, 1, 2);
  const AttentionCost f = attention_layer_cost(full, s, p), w = attention_layer_cost(band, s, p);
  // Bytes: the gather and the dK,dV reduce-scatter are the full layer's (Transformer Engine
  // gathers all of K,V and slices each chunk's window).
  EXPECT_EQ(w.kv_gather_s, f.kv_gather_s);
  EXPECT_EQ(w.dkv_scatter_s, f.dkv_scatter_s);
  // Kernels: rank 1's two calls (chunks of 4 rows) of 16 pairs each on both heads (U = 1, tp = 1),
  // 4 d = 16 FLOPs a pair: 2 calls x 16 x 2 x 16 = 512 FLOPs each, at the causal kernel's rate.
  const AttentionKernel k{4, true, false};
  const double one = attention_time(s.gpu, 512, 4, false, k, s.framework.attention_step_efficiency);
  EXPECT_NEAR(w.fwd_kernel_s, 2 * one, 1e-15);
  EXPECT_LT(w.fwd_kernel_s, f.fwd_kernel_s);
}

// A window as long as the sequence is full causal attention: the simulation is the plain model's,
// bit for bit, under every method.
TEST(AttentionKinds, WindowOfTheWholeSequenceIsFullAttention) {
  const System s = load_system("dgx-h100");
  const Model plain = load_model("llama3-8b");
  for (const Plan& p : {plan(Method::ulysses, 8, 1 << 16, 8, 8, 1), plan(Method::ring_zigzag, 8, 1 << 16, 8, 1, 8),
                        plan(Method::hybrid, 8, 1 << 16, 8, 2, 4), plan(Method::allgather, 8, 1 << 16, 8, 1, 8)}) {
    nlohmann::json a = to_json(plain, s, simulate(plain, s, p));
    const Model wide = sliding(plain, 1 << 16);
    nlohmann::json b = to_json(wide, s, simulate(wide, s, p));
    a.erase("model");
    b.erase("model");
    EXPECT_EQ(a, b) << to_string(p.method);
    EXPECT_TRUE(b["valid"].get<bool>());
  }
}

// The methods no implementation serves for a window are refused with the rule; the others run.
TEST(AttentionKinds, MethodsWithoutAWindowImplementationAreRefused) {
  const System s = load_system("dgx-h100");
  const Model m = load_model("mistral-7b-v0.1");
  for (Method meth : {Method::ring, Method::ring_zigzag, Method::hybrid, Method::allgather_contiguous}) {
    const int u = meth == Method::hybrid ? 2 : 1;
    const Result r = simulate(m, s, plan(meth, 8, 1 << 16, 8, u, 8 / u));
    EXPECT_FALSE(r.valid) << to_string(meth);
    bool named = false;
    for (const std::string& e : r.errors)
      named |= e.rfind("method: model 'mistral-7b-v0.1' has 32 sliding-window layers (window 4096 < seq_len 65536)", 0) == 0 &&
               e.find(std::string(to_string(meth)) + ": no implementation") != std::string::npos;
    EXPECT_TRUE(named) << nlohmann::json(r.errors).dump();
  }
  for (Method meth : {Method::ulysses, Method::allgather}) {
    const int u = meth == Method::ulysses ? 8 : 1;
    EXPECT_TRUE(simulate(m, s, plan(meth, 8, 1 << 16, 8, u, 8 / u)).valid) << to_string(meth);
  }
  // At 4096 tokens or fewer the window is the whole sequence: every method runs.
  EXPECT_TRUE(simulate(m, s, plan(Method::ring, 8, 4096, 8, 1, 8)).valid);
  EXPECT_EQ(window_refusal(Method::ulysses), "");
  EXPECT_NE(window_refusal(Method::ring).find("attn_forward_func_with_cp"), std::string::npos);
}

// Local and global layers: the layer's cost is the mean of its kinds' (simulate() sums L layers).
TEST(AttentionKinds, MixedLayersAreTheMeanOfTheirKinds) {
  const System s = testing::round_system();
  const Model full = testing::tiny_model();  // 2 layers
  const Model all_band = sliding(full, 4);
  Model mixed = all_band;
  mixed.layer_kinds[1] = AttentionKind::full;
  const Plan p = plan(Method::ulysses, 2, 16, 2, 2, 1);
  const AttentionCost f = attention_layer_cost(full, s, p), w = attention_layer_cost(all_band, s, p),
                      x = attention_layer_cost(mixed, s, p);
  EXPECT_DOUBLE_EQ(x.fwd_kernel_s, 0.5 * f.fwd_kernel_s + 0.5 * w.fwd_kernel_s);
  EXPECT_DOUBLE_EQ(x.model_flops_fwd, 0.5 * f.model_flops_fwd + 0.5 * w.model_flops_fwd);
  // Gemma 3 at 128K on 8 H100 under Ulysses: faster than the same model with every layer full.
  const System h = load_system("dgx-h100");
  const Model g = load_model("gemma3-27b");
  Model g_full = g;
  g_full.layer_kinds.clear();
  g_full.sliding_window = 0;
  const Plan u = plan(Method::ulysses, 8, 1 << 17, 8, 8, 1);
  const Result rg = simulate(g, h, u), rf = simulate(g_full, h, u);
  ASSERT_TRUE(rg.valid) << nlohmann::json(rg.errors).dump();
  EXPECT_LT(rg.step_time_s, rf.step_time_s);
}

}  // namespace
}  // namespace seqpar::sim

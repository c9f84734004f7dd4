// Attention sinks (README "Attention sinks"): the parameter count against a hand count, the methods
// refused for them with their rule, the rest of a step unchanged, and the Hugging Face config of
// gpt-oss read with them.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "fixtures.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/attention_sinks.hpp"
#include "seqpar/sim/hf_config.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/result_json.hpp"
#include "seqpar/sim/simulate.hpp"
#include "seqpar/sim/validity.hpp"

namespace seqpar::sim {
namespace {

using nlohmann::json;
using testing::plan;

Model without_sinks(Model m) {
  m.attention_sinks = false;
  return m;
}

// gpt-oss-120b: 36 layers of 64 query heads, one sink logit per head and layer (transformers'
// GptOssAttention.sinks of shape [num_attention_heads]): 36 x 64 = 2,304 parameters, all of them
// active (every token's softmax uses its layer's). The tiny model: 2 heads, 2 layers: 2 and 4.
TEST(Sinks, ParametersAreOneLogitPerHeadAndLayer) {
  const Model o = load_model("gpt-oss-120b");
  ASSERT_TRUE(o.attention_sinks);
  const Model plain = without_sinks(o);
  EXPECT_EQ(o.sink_params(), 64);
  EXPECT_EQ(plain.sink_params(), 0);
  EXPECT_EQ(o.attention_params() - plain.attention_params(), 64);
  EXPECT_EQ(o.layer_params_total() - plain.layer_params_total(), 2304);
  EXPECT_EQ(o.total_params() - plain.total_params(), 2304);
  EXPECT_EQ(o.active_params() - plain.active_params(), 2304);
  EXPECT_EQ(o.active_params(false) - plain.active_params(false), 2304);
  // The model card's totals still hold (test_moe.cpp checks them at 1%): 2,304 of 116.83B.
  Model t = testing::tiny_model();
  ASSERT_EQ(t.heads, 2);
  const std::int64_t before = t.total_params(), layer_before = t.params_per_layer();
  t.attention_sinks = true;
  EXPECT_EQ(t.params_per_layer() - layer_before, 2);
  EXPECT_EQ(t.total_params() - before, std::int64_t{2} * t.layers);
}

// Transformer Engine's attn_forward_func_with_cp: a learnable softmax under a2a with FusedAttention
// (cuDNN) only; ring-flash-attention and PyTorch's SDPA-based context parallel take no sink. So at
// SP 8: ulysses with the cudnn kernel serves; ulysses with FlashAttention is refused for the kernel,
// every other method for the method; SP 1 has no rule.
TEST(Sinks, MethodsWithoutAnImplementationAreRefused) {
  const System flash = testing::with_kernel("hgx-h200", "flash-attention-3");
  const System cudnn = testing::with_kernel("hgx-h200", "cudnn");
  const Model m = load_model("gpt-oss-120b");
  auto at8 = [](Method meth) { return testing::plan_all_sp(meth, 8, 1 << 16); };
  const std::string head = "method: model 'gpt-oss-120b' has attention sinks (one learned logit per head in every "
                           "layer's softmax); ";
  auto expect_refused = [&](const System& s, Method meth, const std::string& words) {
    const Plan p = at8(meth);
    const std::string why = sinks_method_error(m, s, p);
    EXPECT_EQ(why.rfind(head + std::string(to_string(meth)) + ": no implementation seqpar knows", 0), 0u) << why;
    EXPECT_NE(why.find(words), std::string::npos) << why;
    EXPECT_NE(why.find("cp_comm_type = 'a2a'!"), std::string::npos) << why;  // TE's own assertion, quoted
    const Result r = simulate(m, s, p);
    EXPECT_FALSE(r.valid) << to_string(meth);
    bool listed = false;
    for (const std::string& e : r.errors) listed |= e == why;
    EXPECT_TRUE(listed) << json(r.errors).dump();
  };
  expect_refused(flash, Method::ulysses, "with the flash-attention-3 attention kernel");
  for (const System* s : {&flash, &cudnn})
    for (Method meth : {Method::ring, Method::ring_zigzag, Method::hybrid, Method::allgather,
                        Method::allgather_contiguous})
      expect_refused(*s, meth, "ring-flash-attention's ring and zigzag functions take no sink");
  EXPECT_EQ(sinks_method_error(m, cudnn, at8(Method::ulysses)), "");
  EXPECT_EQ(sinks_refusal(Method::ulysses, "cudnn"), "");
  // No context parallelism: the method's name means nothing.
  for (Method meth : {Method::ulysses, Method::ring})
    EXPECT_EQ(sinks_method_error(m, flash, plan(meth, 8, 1 << 16, 1, 1, 1)), "") << to_string(meth);
  // A model without sinks meets no such rule.
  for (Method meth : kAllMethods) EXPECT_EQ(sinks_method_error(without_sinks(m), flash, at8(meth)), "");
}

// The sinks' work and bytes are not added (attention_sinks.hpp: H logits per query against H x keys
// scores; H / U values a layer in Ulysses' split): with and without sinks a step's FLOPs, kernels
// and attention and expert communication are the same bits; memory grows by the sinks' states only: 2,304 parameters at
// most 20 bytes each (bf16 weight and gradient, fp32 master, gradient and two Adam moments) whatever
// the sharding, so by more than 0 and at most 46,080 bytes.
TEST(Sinks, OnlyTheParametersChangeTheStep) {
  const System s = testing::with_kernel("hgx-h200", "cudnn");
  const Model m = load_model("gpt-oss-120b");
  Plan p = plan(Method::ulysses, 8, 1 << 16, 8, 8, 1);
  p.ep = 8;
  const Result with = simulate(m, s, p), plain = simulate(without_sinks(m), s, p);
  ASSERT_TRUE(with.valid) << json(with.errors).dump();
  ASSERT_TRUE(plain.valid);
  EXPECT_EQ(with.model_flops_per_gpu, plain.model_flops_per_gpu);
  // Every time but those that scale with the parameters (the gradients' reduction over the SP ranks
  // and the optimizer, and the sums holding them), bit for bit; those grow by under 1e-5.
  const json tw = to_json(m, s, with)["time"], tp = to_json(without_sinks(m), s, plain)["time"];
  ASSERT_EQ(tw.size(), tp.size());
  const std::set<std::string> by_params = {"dp_comm_s", "exposed_dp_comm_s", "optimizer_s", "comm_s", "exposed_comm_s"};
  for (const auto& [k, v] : tw.items()) {
    if (!by_params.count(k)) {
      EXPECT_EQ(v, tp[k]) << k;
      continue;
    }
    EXPECT_GT(v.get<double>(), tp[k].get<double>()) << k;
    EXPECT_LT(v.get<double>(), tp[k].get<double>() * (1 + 1e-5)) << k;
  }
  const double grew = with.peak_memory_bytes() - plain.peak_memory_bytes();
  EXPECT_GT(grew, 0.0);
  EXPECT_LE(grew, 2304.0 * 20);
}

// A model's JSON carries the switch and reads back; a model without sinks has no key (its JSON is
// unchanged); a switch that is not a boolean is refused by name.
TEST(Sinks, PresetKeyRoundTripsAndIsChecked) {
  const Model o = load_model("gpt-oss-120b");
  const json j = to_json(o);
  EXPECT_EQ(j["attention_sinks"], true);
  EXPECT_EQ(model_from_json(j, "round trip").total_params(), o.total_params());
  EXPECT_TRUE(o.sources.count("attention_sinks"));
  EXPECT_FALSE(to_json(load_model("llama3-8b")).contains("attention_sinks"));
  json bad = j;
  bad["attention_sinks"] = "yes";
  try {
    model_from_json(bad, "sinks test");
    ADD_FAILURE() << "accepted a string switch";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("field 'attention_sinks' must be true or false"), std::string::npos)
        << e.what();
  }
}

// gpt-oss's config has no key for its sinks: the family has them (transformers' GptOssAttention);
// Mixtral's, the same experts' spelling, has none.
TEST(Sinks, HfConfigOfGptOssHasThem) {
  const json gpt_oss = {{"model_type", "gpt_oss"}, {"num_hidden_layers", 2}, {"hidden_size", 64},
                        {"num_attention_heads", 8}, {"num_key_value_heads", 2}, {"head_dim", 16},
                        {"intermediate_size", 64}, {"vocab_size", 100}, {"num_local_experts", 4},
                        {"num_experts_per_tok", 2}, {"tie_word_embeddings", false}};
  const json p = model_preset_from_hf_config(gpt_oss, "gpt-oss-tiny/config.json");
  EXPECT_EQ(p["attention_sinks"], true);
  EXPECT_NE(p["sources"]["attention_sinks"].get<std::string>().find("GptOssAttention"), std::string::npos);
  const Model m = model_from_json(p, "gpt-oss-tiny");
  EXPECT_TRUE(m.attention_sinks);
  EXPECT_EQ(m.sink_params(), 8);
  json mixtral = gpt_oss;
  mixtral["model_type"] = "mixtral";
  EXPECT_FALSE(model_preset_from_hf_config(mixtral, "mixtral-tiny/config.json").contains("attention_sinks"));
}

}  // namespace
}  // namespace seqpar::sim

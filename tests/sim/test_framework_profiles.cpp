// Framework profiles (sim/presets/frameworks/): the loader's refusals, the hf-transformers and
// torchtitan profiles against the tables PyTorch itself gave (derived/hf-llama.json,
// derived/torchtitan-llama3.json), and maxlen over a memory curve that falls where the tile count
// steps up.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_runner.hpp"
#include "fixtures.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/framework.hpp"
#include "seqpar/sim/memory_cost.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/simulate.hpp"
#include "seqpar/sim/validity.hpp"

namespace seqpar::sim {
namespace {

using nlohmann::json;

json minimal_profile() {
  return json::parse(R"({"name": "t", "states": [{"name": "w", "part": "parameters", "bytes_per_param": 2}],
    "layer": [{"name": "x", "per_token": {"hidden": 1}, "bytes": 2, "until": "qkv"}]})");
}

void expect_refused(const json& doc, const std::string& needle) {
  try {
    framework_from_json(doc, "profile.json");
    ADD_FAILURE() << "accepted; expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("profile.json"), std::string::npos) << e.what();
  }
}

TEST(FrameworkProfiles, MalformedProfilesAreRefusedNamingTheField) {
  EXPECT_NO_THROW(framework_from_json(minimal_profile(), "profile.json"));
  json j = minimal_profile();
  j["layer"][0]["per_token"] = {{"hiden", 1}};
  expect_refused(j, "unknown symbol 'hiden'");
  j = minimal_profile();
  j["layer"][0]["bytes"] = -2;
  expect_refused(j, "'bytes'");
  j = minimal_profile();
  j["layer"][0]["until"] = "loss";
  expect_refused(j, "field 'until' must be one of mlp, attention, qkv");
  j = minimal_profile();
  j["layer"][0]["when"] = {{"tiled", true}};
  expect_refused(j, "when: unknown field \"tiled\" (known: checkpoint, tiled_mlp,");
  j = minimal_profile();
  j["layer"][0]["when"] = {{"checkpoint", {"some"}}};
  expect_refused(j, "checkpoint");
  j = minimal_profile();
  j["layer"][0].erase("per_token");
  expect_refused(j, "give its size");
  j = minimal_profile();
  j.erase("states");
  expect_refused(j, "'states'");
  j = minimal_profile();
  j["gradients"] = "sometimes";
  expect_refused(j, "field 'gradients' must be one of persistent, during_backward");
  j = minimal_profile();
  j["states"][0]["zero_stage"] = 4;
  expect_refused(j, "zero_stage");
  j = minimal_profile();
  j["allocator"] = {{"fragmentation", 1.5}};
  expect_refused(j, "fragmentation");
  EXPECT_THROW(load_framework("pytorch-lightning"), Error);
  j = minimal_profile();
  j["mlp"] = {"relu"};
  expect_refused(j, "field 'mlp' lists \"relu\"");
  j = minimal_profile();
  j["mlp"] = "swiglu";
  expect_refused(j, "field 'mlp' must be a non-empty list");
}

// A profile is user-written data: every field it may hold is known, a misspelt one is refused with
// the nearest known name (it would otherwise drop a setting silently), the saved tensors are
// required, and a preset of another kind is named as what it is.
TEST(FrameworkProfiles, UnknownFieldsEmptyLayersAndOtherPresetsAreRefused) {
  json j = minimal_profile();
  j["allocater"] = {{"reserve_bytes", 2e10}};
  expect_refused(j, "unknown field \"allocater\" (did you mean 'allocator'?");
  j = minimal_profile();
  j["allocator"] = {{"reserve_byte", 2e10}};
  expect_refused(j, "allocator: unknown field \"reserve_byte\" (did you mean 'reserve_bytes'?");
  j = minimal_profile();
  j["layer"][0]["untill"] = "mlp";
  expect_refused(j, "did you mean 'until'?");
  j = minimal_profile();
  j["states"][0]["zero"] = 3;
  expect_refused(j, "states[0]: unknown field \"zero\"");
  j = minimal_profile();
  j["time"] = {{"step_overhead", 0.1}};
  expect_refused(j, "did you mean 'step_overhead_s'?");
  j = minimal_profile();
  j["vendor"] = "x";  // nothing near it: no suggestion, the known fields listed
  expect_refused(j, "unknown field \"vendor\" (known: name,");
  j = minimal_profile();
  j["layer"] = json::array();
  expect_refused(j, "field 'layer' must be a non-empty list");
  j = minimal_profile();
  j.erase("layer");
  expect_refused(j, "field 'layer' must be a non-empty list");
  // A name labels the tables ("framework  (--framework)" before): empty or blank is refused, as a
  // model's, a GPU's or a system's is.
  for (const char* blank : {"", "  "}) {
    j = minimal_profile();
    j["name"] = blank;
    expect_refused(j, "field 'name' is empty; give the preset a name");
  }
  expect_refused(preset_document("model", "llama3-8b"), "is a model preset, not a framework profile: give it to --model");
  expect_refused(preset_document("gpu", "h100-sxm"), "is a GPU preset, not a framework profile");
  expect_refused(preset_document("system", "dgx-h100"), "is a system preset, not a framework profile: give it to --system");
  // Every built-in profile passes its own checks.
  for (const char* name :
       {"deepspeed-alst", "hf-transformers", "megatron-core", "megatron-lm-2021", "seqpar-train", "torchtitan"})
    EXPECT_NO_THROW(load_framework(name)) << name;
}

// A profile calibrated over a custom framework file carries that profile whole: naming it later (by
// name, or by the same file) predicts with it, never with a built-in that shares its name; a file
// that shares the name but differs is refused.
TEST(FrameworkProfiles, ACalibratedProfileKeepsTheFrameworkItWasFittedOver) {
  const std::string dir = ::testing::TempDir() + "/calibrated_framework";
  std::filesystem::create_directories(dir);
  const std::string root = std::string(SEQPAR_PRESETS_DIR) + "/../..";
  const std::string step = root + "/reports/results/h100/hf/hf_04_llama3-8b_L4_s8192_none.json";
  auto write = [&](const std::string& name, const json& doc) {
    std::ofstream(dir + "/" + name) << doc.dump(2);
    return dir + "/" + name;
  };
  auto peak = [&](const std::string& args) {
    const auto r = seqpar::testing::seqpar("simulate --model llama3-8b --seq-len 8K --gpus 1 --json " + args);
    EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
    return r.code == 0 ? r.json()["peak_memory_bytes"].get<double>() : -1.0;
  };
  json custom = preset_document("framework", "seqpar-train");
  custom["name"] = "my-fw";
  const std::string custom_file = write("myfw.json", custom);
  const std::string p1 = dir + "/p1.json";
  auto c = seqpar::testing::seqpar("calibrate --framework " + custom_file + " " + step + " --out " + p1);
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(peak("--system " + p1 + " --framework my-fw"), peak("--system " + p1));
  EXPECT_EQ(peak("--system " + p1 + " --framework " + custom_file), peak("--system " + p1));
  // A file reusing a built-in's name, with 20 GB more reserve than the built-in.
  json twin = preset_document("framework", "seqpar-train");
  twin["allocator"]["reserve_bytes"] = 2e10;
  const std::string twin_file = write("twin.json", twin);
  const std::string p2 = dir + "/p2.json";
  c = seqpar::testing::seqpar("calibrate --framework " + twin_file + " " + step + " --out " + p2);
  ASSERT_EQ(c.code, 0) << c.err;
  const double own = peak("--system " + p2);
  EXPECT_EQ(peak("--system " + p2 + " --framework seqpar-train"), own);
  twin["allocator"]["reserve_bytes"] = 3e10;
  write("twin.json", twin);
  const auto r = seqpar::testing::seqpar("simulate --model llama3-8b --seq-len 8K --gpus 1 --system " + p2 +
                                         " --framework " + twin_file);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("differs from it"), std::string::npos) << r.err;
}

// A framework's own per-layer kernels (time.layer_elementwise) add their bytes to the elementwise
// time, forward and backward as given, over the rank's widths; a malformed one is refused.
TEST(FrameworkProfiles, LayerElementwiseKernelsAddTheirBytes) {
  json j = minimal_profile();
  j["time"]["layer_elementwise"] = json::parse(
      R"([{"name": "mask", "per_token": {"hidden": 2}, "forward_bytes": 1, "backward_bytes": 3, "source": "s"}])");
  System plain = testing::round_system(), with = plain;
  plain.profile = framework_from_json(minimal_profile(), "profile.json");
  with.profile = framework_from_json(j, "profile.json");
  ASSERT_EQ(with.profile.layer_elementwise.size(), 1u);
  const Model m = testing::tiny_model();  // hidden 8
  const Plan p = testing::plan(Method::ulysses, 1, 64, 1, 1, 1, 1);
  const Result a = simulate(m, plain, p), b = simulate(m, with, p);
  ASSERT_TRUE(a.valid && b.valid);
  const double values = 2.0 * m.hidden * 64, hbm = plain.gpu.hbm_bytes_per_s;
  EXPECT_NEAR(b.figures.elementwise_fwd_s - a.figures.elementwise_fwd_s, values * 1 / hbm, 1e-15);
  EXPECT_NEAR(b.figures.elementwise_bwd_s - a.figures.elementwise_bwd_s, values * 3 / hbm, 1e-15);
  EXPECT_NEAR(b.time.elementwise - a.time.elementwise, m.layers * values * 4 / hbm, 1e-15);
  j["time"]["layer_elementwise"][0]["per_token"] = {{"hiden", 1}};
  expect_refused(j, "unknown symbol 'hiden'");
  j["time"]["layer_elementwise"][0].erase("per_token");
  expect_refused(j, "layer_elementwise[0]: give its size");
  j["time"]["layer_elementwise"] = json::parse(R"([{"name": "x", "per_token": {"hidden": 1}, "forward_bytes": -1}])");
  expect_refused(j, "forward_bytes");
}

// megatron-lm-2021's kernels beyond the model's elementwise bytes, counted by hand for a GPT block
// (MHA, ffn = 4h) without TP, per token and layer: forward, the two dropout masks (1 byte each),
// the QKV bias add (read and write 3h) and the context transpose (read and write h): 2h + 12h + 4h;
// backward, the masks read (2h), the two replicated biases' and the two LayerNorms' weight
// gradients (a read of h each: 4h + 4h), the QKV bias gradient (6h), the transpose (4h), the fc1
// bias gradient (a read of 4h: 8h). Its attention kernel is a100-80g's megatron-unfused.
TEST(FrameworkProfiles, MegatronLm2021KernelsCountedByHand) {
  const Model gpt = load_model("gpt-1.3b");
  ASSERT_EQ(gpt.heads * gpt.head_dim, gpt.hidden);
  ASSERT_EQ(gpt.ffn_hidden, 4 * gpt.hidden);
  const Framework f = load_framework("megatron-lm-2021");
  Framework bare = f;
  bare.layer_elementwise.clear();
  System with = load_system("dgx-a100-80g", "", f), without = with;
  EXPECT_EQ(with.gpu.attention_kernel, "megatron-unfused");
  without.profile = bare;
  const Plan p = testing::plan(Method::ulysses, 8, 2048, 1, 1, 1, 1);
  const Result a = simulate(gpt, without, p), b = simulate(gpt, with, p);
  ASSERT_TRUE(a.valid && b.valid) << (a.errors.empty() ? b.errors : a.errors).front();
  const double h = gpt.hidden, bytes = 2048 * h / with.gpu.hbm_bytes_per_s;
  EXPECT_NEAR(b.figures.elementwise_fwd_s - a.figures.elementwise_fwd_s, 18 * bytes, 1e-9 * bytes);
  EXPECT_NEAR(b.figures.elementwise_bwd_s - a.figures.elementwise_bwd_s, 28 * bytes, 1e-9 * bytes);
  // The 2021 code has no gated MLP: a SwiGLU model is refused rather than counted as GELU.
  std::vector<std::string> e;
  EXPECT_FALSE(check_plan(load_model("llama3-8b"), with, p, e));
}

// megatron-core's --zero 3 is Megatron-FSDP: each layer's weights are gathered around its compute
// with the next layer's prefetched, so the layer phase holds two whole layers of bf16 weights (per
// TP rank) beyond a profile that gathered none: 2 x 2 bytes x layer parameters / tp.
TEST(FrameworkProfiles, MegatronCoreZero3HoldsTwoGatheredLayers) {
  const Model m = load_model("llama3-70b");
  const Framework f = load_framework("megatron-core");
  EXPECT_EQ(f.zero3_gathered_layers, 2);
  Framework none = f;
  none.zero3_gathered_layers = 0;
  System with = load_system("dgx-h100", "", f), without = with;
  without.profile = none;
  Plan p = testing::plan(Method::ulysses, 64, 8192, 1, 1, 1, 8);
  p.mem.zero = 3;
  const Result a = simulate(m, without, p), b = simulate(m, with, p);
  ASSERT_TRUE(a.valid && b.valid) << (a.errors.empty() ? b.errors : a.errors).front();
  const double gathered = 2.0 * 2.0 * double(m.params_per_layer()) / 8;
  EXPECT_NEAR(b.memory.layer_phase_bytes - a.memory.layer_phase_bytes, gathered, 1e-6 * gathered);
}

// The widths that depend on the block's kind: fc1 (the first MLP GEMM's output) is gate and up
// for SwiGLU, the up projection alone for GELU; rope is RoPE's table width, none for learned
// positions. A profile derived from one MLP kind refuses the other rather than guess a fit.
TEST(FrameworkProfiles, BlockKindWidthsAndTheProfilesMlpKinds) {
  json j = minimal_profile();
  j["layer"] = json::parse(R"([{"name": "fc1 out", "per_token": {"fc1": 1}, "bytes": 2, "until": "mlp"},
                                {"name": "rope tables", "per_token": {"rope": 2}, "bytes": 4, "until": "qkv"}])");
  System s = testing::round_system();
  s.profile = framework_from_json(j, "profile.json");
  Model m = testing::tiny_model();  // SwiGLU, ffn 16, head_dim 4, RoPE
  const Plan p = testing::plan(Method::ulysses, 1, 64, 1, 1, 1, 1);
  const double swiglu = stored_bytes_per_token(m, s, p, Checkpoint::none);
  EXPECT_DOUBLE_EQ(swiglu, 2.0 * 2 * m.ffn_hidden + 4.0 * 2 * m.head_dim);
  m.mlp = MlpKind::gelu;
  m.positions = PositionKind::learned;
  EXPECT_DOUBLE_EQ(stored_bytes_per_token(m, s, p, Checkpoint::none), 2.0 * m.ffn_hidden);
  // hf-transformers is LlamaMLP's inventory: a GELU model is refused, naming the rule.
  s.profile = load_framework("hf-transformers");
  ASSERT_EQ(s.profile.mlp_kinds, std::vector<MlpKind>{MlpKind::swiglu});
  std::vector<std::string> e;
  EXPECT_FALSE(check_plan(m, s, p, e));
  ASSERT_FALSE(e.empty());
  EXPECT_NE(e.back().find("mlp: model 'tiny' has a gelu MLP, but framework profile 'hf-transformers' counts the "
                          "saved tensors of a swiglu MLP only"),
            std::string::npos)
      << e.back();
  e.clear();
  m.mlp = MlpKind::swiglu;
  EXPECT_TRUE(check_plan(m, s, p, e)) << e.front();
  // The profiles that count either kind through fc1 take both.
  for (const char* f : {"seqpar-train", "deepspeed-alst", "megatron-core"}) EXPECT_TRUE(load_framework(f).mlp_kinds.empty()) << f;
}

// A profile may give its ring implementation's backward buffers: megatron-core's are Transformer
// Engine's P2P ring (bf16: K,V and dK,dV double-buffered, dQ, one step's gradients), less than
// seqpar-train's (fp32 dK,dV and dQ accumulators: here 1.46 times as much), which profiles without
// the list keep.
TEST(FrameworkProfiles, RingBackwardBuffersAreTheFrameworksOwn) {
  const Model m = load_model("llama3-8b");
  System s = load_system("dgx-h100");
  s.profile = load_framework("megatron-core");
  ASSERT_TRUE(s.profile.ring_backward_given);
  const Plan p = testing::plan(Method::ring_zigzag, 4, 1 << 18, 4, 1, 4, 1);
  auto method_bytes = [&](const System& sys) { return attention_method_buffer_bytes(m, sys, p); };
  const double T = (1 << 18) / 4, q = double(m.heads) * m.head_dim, kv = double(m.kv_heads) * m.head_dim;
  const double te = method_bytes(s);
  EXPECT_DOUBLE_EQ(te, attention_kernel_workspace_bytes(m, s, p) + 2.0 * T * (8 * kv + q + q + 2 * kv));
  System seq = s;
  seq.profile.ring_backward_given = false;  // seqpar-train's buffers
  EXPECT_GT(method_bytes(seq), 1.4 * te);
  EXPECT_FALSE(load_framework("seqpar-train").ring_backward_given);
  json j = minimal_profile();
  j["attention"] = {{"ring_backward", json::parse(R"([{"name": "x", "per_token": {"kvv": 1}, "bytes": 2}])")}};
  expect_refused(j, "unknown symbol 'kvv'");
}

// `seqpar presets` shows both sides of that rule: each model's block, each profile's MLP kinds.
TEST(FrameworkProfiles, PresetsListEachModelsBlockAndEachProfilesMlps) {
  auto line_of = [](const std::string& text, const std::string& first) {
    std::size_t at = text.find("\n" + first + " ");
    return at == std::string::npos ? std::string() : text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  };
  const seqpar::testing::CliRun models = seqpar::testing::seqpar("presets --kind model");
  ASSERT_EQ(models.code, 0) << models.err;
  EXPECT_NE(line_of(models.out, "gpt-1.3b").find("gelu layernorm learned"), std::string::npos) << models.out;
  EXPECT_NE(line_of(models.out, "llama3-8b").find("swiglu rmsnorm rope"), std::string::npos) << models.out;
  const seqpar::testing::CliRun frameworks = seqpar::testing::seqpar("presets --kind framework");
  ASSERT_EQ(frameworks.code, 0) << frameworks.err;
  EXPECT_NE(line_of(frameworks.out, "hf-transformers").find(" swiglu "), std::string::npos) << frameworks.out;
  EXPECT_NE(line_of(frameworks.out, "megatron-core").find("any (fc1)"), std::string::npos) << frameworks.out;
}

// Values per token of the layer inventory by width symbol, as bytes (no tiling, SP 1): what the
// derived table's layer_totals.per_token_bytes holds for that checkpoint mode.
std::map<std::string, double> layer_bytes_by_symbol(const Framework& f, Checkpoint mode = Checkpoint::none) {
  std::map<std::string, double> out;
  Plan p;
  p.gpus = p.sp = 1;
  p.mem.checkpoint = mode;
  for (const TensorTerm& t : f.layer) {
    if (!t.when.holds(p)) continue;
    for (int i = 0; i < kWidths; ++i)
      if (t.per_token[static_cast<std::size_t>(i)] > 0)
        out[std::string(to_string(static_cast<Width>(i)))] += t.per_token[static_cast<std::size_t>(i)] * t.bytes;
    for (int i = 0; i < kConstants; ++i)
      if (t.constant[static_cast<std::size_t>(i)] > 0)
        out[std::string(to_string(static_cast<Constant>(i)))] += t.constant[static_cast<std::size_t>(i)] * t.bytes;
  }
  return out;
}

// The profile is written from the table PyTorch gave (scripts/derive_saved_tensors.py): its layer
// holds, symbol by symbol, what the table says an autocast layer saves (kv_attention is kv at SP 1).
TEST(FrameworkProfiles, HfTransformersLayerIsTheDerivedTable) {
  const json table = read_json_file(std::string(SEQPAR_PRESETS_DIR) + "/frameworks/derived/hf-llama.json");
  const Framework f = load_framework("hf-transformers");
  for (const json& c : table.at("configurations")) {
    if (c.at("precision") != "fp32-params-autocast-bf16") continue;
    if (c.at("checkpoint") == "full") {
      ASSERT_EQ(c.at("layer").size(), 1u);
      EXPECT_DOUBLE_EQ(f.checkpoint_bytes, c.at("layer")[0].at("bytes").get<double>());
      continue;
    }
    std::map<std::string, double> want;
    for (const auto& [k, v] : c.at("layer_totals").at("per_token_bytes").items()) want[k] = v.get<double>();
    for (const auto& [k, v] : c.at("layer_totals").at("per_layer_bytes").items()) want[k] = v.get<double>();
    std::map<std::string, double> got = layer_bytes_by_symbol(f);
    got["kv"] += got["kv_attention"];
    got.erase("kv_attention");
    EXPECT_EQ(got, want);
  }
}

// The torchtitan profile is the table torchtitan's own Llama gave on the CPU
// (derived/torchtitan-llama3.json), per checkpoint mode, with the two corrections the profile names
// and no other: (1) CUDA runs nn.RMSNorm as the fused kernel, which saves its bf16 input and the
// fp32 rstd, where the CPU's composite saves an fp32 copy of the input and the fp32 x * rsqrt (the
// rsqrt, the same size as rstd, stays); (2) flex attention saves max_scores (fp32 per head and
// token) beside the log-sum-exp, which the SDPA kernel standing in for it on the CPU does not. A
// change to either file, or to a term's condition, fails here.
TEST(FrameworkProfiles, TorchtitanLayerIsTheDerivedTable) {
  const json table = read_json_file(std::string(SEQPAR_PRESETS_DIR) + "/frameworks/derived/torchtitan-llama3.json");
  const Framework f = load_framework("torchtitan");
  int seen = 0;
  for (const json& c : table.at("configurations")) {
    const std::string mode = c.at("checkpoint");
    ++seen;
    if (mode == "full") {  // the checkpoint alone: one bf16 hidden-wide input per layer
      ASSERT_EQ(c.at("layer").size(), 1u);
      EXPECT_EQ(c.at("layer")[0].at("per_token"), json({{"hidden", 1}}));
      EXPECT_DOUBLE_EQ(f.checkpoint_bytes, c.at("layer")[0].at("bytes").get<double>());
      continue;
    }
    std::map<std::string, double> want;
    for (const auto& [k, v] : c.at("layer_totals").at("per_token_bytes").items()) want[k] = v.get<double>();
    ASSERT_FALSE(c.at("layer_totals").contains("per_layer_bytes")) << mode << ": no weight copies kept in bf16";
    int norms = 0;
    for (const json& e : c.at("layer")) {  // (1): the composite's fp32 copies out, the fused kernel's bf16 input in
      const std::string module = e.at("module");
      if (module.size() < 4 || module.compare(module.size() - 4, 4, "norm") != 0) continue;
      if (e.at("op") == "rsqrt") ++norms;
      if (e.at("dtype") == "float32" && (e.at("op") == "_to_copy" || e.at("op") == "mul"))
        want["hidden"] -= e.at("per_token").at("hidden").get<double>() * e.at("bytes").get<double>();
    }
    want["hidden"] += 2.0 * norms;
    EXPECT_EQ(norms, mode == "none" ? 2 : 0) << mode << ": selective checkpointing recomputes the norms";
    want["heads"] += 4;  // (2)
    std::map<std::string, double> got = layer_bytes_by_symbol(f, mode == "none" ? Checkpoint::none : Checkpoint::selective);
    got["kv"] += got["kv_attention"];
    got.erase("kv_attention");
    EXPECT_EQ(got, want) << mode;
  }
  EXPECT_EQ(seen, 3);
  // By hand, none: per norm 2 (input) + 2 (output) bytes x hidden; q, k, v, out 2 bytes each; lse
  // and max_scores 4 + 4 per head; RoPE rows 4 x head_dim; gate, SiLU, up, product 4 x 2 x ffn.
  EXPECT_EQ(layer_bytes_by_symbol(f),
            (std::map<std::string, double>{{"ffn", 8}, {"head_dim", 4}, {"heads", 8}, {"hidden", 8},
                                           {"kv_attention", 4}, {"one", 8}, {"q", 4}}));
}

// Where the two frameworks really differ, the profiles do: torchtitan computes in bf16 under FSDP2
// where Transformers keeps an fp32 residual stream under autocast (its norms save 4-byte values,
// torchtitan's fused norm 2-byte ones); flex attention keeps max_scores beside the log-sum-exp;
// torchtitan's complex RoPE saves its cache rows in every layer where Transformers shares one
// cos/sin table; torchtitan keeps its gradients between steps (zero_grad(set_to_none=False)); and
// its loss runs in 8 chunks, so the logits of one chunk are live at a time (8K tokens: 1,024 rows
// x 128,256 logits x 14 bytes = 1,838,678,016 bytes, where Transformers' unchunked loss holds
// 8,192 rows of them).
TEST(FrameworkProfiles, TorchtitanDiffersFromTransformersWhereTheFrameworksDo) {
  const Framework tt = load_framework("torchtitan"), hf = load_framework("hf-transformers");
  auto hf_bytes = layer_bytes_by_symbol(hf), tt_bytes = layer_bytes_by_symbol(tt);
  EXPECT_EQ(hf_bytes["hidden"], 4 + 4 + 3 * 2 + 4 + 4 + 2 * 2);  // hf-transformers.json's fp32 and autocast copies
  EXPECT_EQ(tt_bytes["hidden"], 8);
  EXPECT_EQ(hf_bytes["heads"], 4);
  EXPECT_EQ(tt_bytes["heads"], 8);
  EXPECT_EQ(hf_bytes["head_dim"], 0);
  EXPECT_EQ(tt_bytes["head_dim"], 4);
  EXPECT_TRUE(hf.gradients_during_backward);
  EXPECT_FALSE(tt.gradients_during_backward);
  EXPECT_EQ(hf.loss_chunks, 1);
  EXPECT_EQ(tt.loss_chunks, 8);
  const Model m = load_model("llama3-8b");
  Plan p = testing::plan(Method::ulysses, 8, 0, 8, 8, 1);
  p.seq_len = 8192 * 8;  // 8,192 tokens a rank
  p.mem.checkpoint = Checkpoint::none;
  p.mem.zero = 3;
  const MemoryEstimate t = estimate_memory(m, load_system("dgx-h100", "", tt), p);
  EXPECT_DOUBLE_EQ(t.loss_logits_bytes, 1024.0 * 128256 * 14);
  const MemoryEstimate h = estimate_memory(m, load_system("dgx-h100", "", hf), p);
  EXPECT_GE(h.loss_logits_bytes, 8192.0 * 128256 * 10);
}

// --framework torchtitan everywhere a framework is taken: simulate, advise, maxlen and sweep run
// with it, each answering with the torchtitan profile's plan (ZeRO-3: FSDP2 shards everything).
TEST(FrameworkProfiles, TorchtitanRunsInEveryCommand) {
  auto run = [](const std::string& args) {
    const auto r = seqpar::testing::seqpar(args + " --framework torchtitan --json");
    EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
    return r.code == 0 ? r.json() : json();
  };
  const json sim = run("simulate --model llama3-8b --seq-len 64K --gpus 8 --sp 8 --method allgather");
  EXPECT_EQ(sim["plan"]["zero"], 3) << sim["plan"];
  EXPECT_GT(sim["peak_memory_bytes"].get<double>(), 0);
  const json adv = run("advise --model llama3-8b --seq-len 64K --gpus 8");
  ASSERT_FALSE(adv["ranked"].empty());
  for (const auto& row : adv["ranked"]) {
    EXPECT_EQ(row["plan"]["zero"], 3) << row["plan"];
    // PyTorch's context parallelism all-gathers K and V for flex attention: no Ulysses, no ring
    if (row["plan"]["sp"] > 1) {
      EXPECT_EQ(row["plan"]["method"], "allgather") << row["plan"];
    }
  }
  const json ml = run("maxlen --model llama3-8b --gpus 8");
  EXPECT_GT(ml["max_seq_len"].get<std::int64_t>(), 65536);
  EXPECT_EQ(ml["plan"]["zero"], 3);
  // torchtitan has none of ALST's memory features: maxlen and advise search without them (maxlen
  // would otherwise offload checkpoints and tile the loss), and a plan asking for one is refused.
  for (const char* option : {"offload_checkpoints", "tiled_mlp", "tiled_loss", "offload_optimizer"}) {
    EXPECT_EQ(ml["plan"][option], false) << option;
    for (const auto& row : adv["ranked"]) EXPECT_EQ(row["plan"][option], false) << option << row["plan"];
  }
  const auto tiled = seqpar::testing::seqpar(
      "simulate --model llama3-8b --seq-len 64K --gpus 8 --method allgather --framework torchtitan --tiled-loss --json");
  EXPECT_NE((tiled.out + tiled.err).find("tiled_loss: framework 'torchtitan' has no tiled loss (it runs its loss in 8 "
                                         "chunks)"),
            std::string::npos)
      << tiled.out << tiled.err;
  const auto ulysses = seqpar::testing::seqpar(
      "simulate --model llama3-8b --seq-len 64K --gpus 8 --method ulysses --framework torchtitan --json");
  EXPECT_NE((ulysses.out + ulysses.err)
                .find("method: framework 'torchtitan' runs its sequence parallelism as allgather only, not ulysses"),
            std::string::npos)
      << ulysses.out << ulysses.err;
  // Without --method simulate takes the framework's own (the CLI's default, ulysses, is not
  // torchtitan's) and says so; the same plan as naming it.
  const json bare = run("simulate --model llama3-8b --seq-len 64K --gpus 8");
  EXPECT_EQ(bare["plan"]["method"], "allgather") << bare["plan"];
  EXPECT_NE(bare.value("inferred_method", "").find("framework torchtitan runs its sequence parallelism as allgather only"),
            std::string::npos)
      << bare;
  EXPECT_EQ(bare["step_time_s"], sim["step_time_s"]);
  EXPECT_FALSE(sim.contains("inferred_method"));
}

// One token more can add a tile and shrink every tile: with tiled loss the logits of one tile
// dominate this model's peak, so the curve saws. maxlen's answer and its gaps against every
// length, one by one.
// A profile says which memory options and parallelism its framework runs ("runs"): seqpar-train has
// no ZeRO beyond stage 0, no offloaded optimizer or parameters and no tensor parallelism, so a plan
// asking for them is not one of its plans, its default plan uses ZeRO 0, and advise and maxlen search
// only what it runs (maxlen over every option would otherwise offload its optimizer: 769,634 tokens
// for the 4-layer ALST step, which seqpar-train cannot run).
TEST(FrameworkProfiles, APlanOfAFrameworkUsesOnlyWhatItRuns) {
  const System s = load_system("dgx-h100", "", load_framework("seqpar-train"));
  const Model m = load_model("llama3-8b");
  Plan p = normalized(Plan{}, s.gpus_per_node);
  p.seq_len = 8192;
  p.gpus = p.sp = p.ulysses_degree = 8;
  p.mem = default_memory_options(s.profile);
  EXPECT_EQ(p.mem.zero, 0);
  std::vector<std::string> errors;
  EXPECT_TRUE(check_plan(m, s, p, errors)) << (errors.empty() ? "" : errors.front());
  auto refused = [&](Plan q, const std::string& needle) {
    std::vector<std::string> e;
    EXPECT_FALSE(check_plan(m, s, q, e));
    ASSERT_FALSE(e.empty());
    EXPECT_NE(e.front().find(needle), std::string::npos) << e.front();
  };
  Plan z = p;
  z.mem.zero = 3;
  refused(z, "zero: framework 'seqpar-train' runs ZeRO stage 0 only, not 3");
  Plan o = p;
  o.mem.offload_optimizer = true;
  refused(o, "offload_optimizer: framework 'seqpar-train' keeps the optimizer on the GPU");
  Plan t = p;
  t.tp = 2;
  t.sp = t.ulysses_degree = 4;
  refused(t, "tp: framework 'seqpar-train' has no tensor parallelism");
  // Frameworks that run them keep them.
  EXPECT_EQ(default_memory_options(load_framework("deepspeed-alst")).zero, MemoryOptions{}.zero);
  // The CLI: the default plan runs, maxlen without memory flags stays inside what seqpar-train runs.
  const std::string four_layers = std::string(SEQPAR_PRESETS_DIR) + "/../../reports/results/h100/maxlen/llama3-8b-4l.json";
  const auto r = seqpar::testing::seqpar("maxlen --model " + four_layers + " --framework seqpar-train --gpus 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["max_seq_len"], 541520);
  EXPECT_EQ(j["plan"]["zero"], 0);
  EXPECT_EQ(j["plan"]["offload_optimizer"], false);
  EXPECT_EQ(j["limit"]["kind"], "gpu-memory");
  const auto a = seqpar::testing::seqpar("advise --framework seqpar-train --seq-len 32K --gpus 8 --json --model " +
                                         four_layers);
  ASSERT_EQ(a.code, 0) << a.err;
  const json advice = json::parse(a.out);  // held: a range-for over a temporary's member dangles in C++20
  for (const auto& row : advice["ranked"]) {
    EXPECT_EQ(row["plan"]["zero"], 0) << row["plan"];
    EXPECT_EQ(row["plan"]["tp"], 1) << row["plan"];
  }
}

TEST(MaxLen, TiledCurveThatFallsIsSearchedToItsLongestFittingLength) {
  Model m = testing::tiny_model();  // hidden 8
  m.vocab = 65536;
  m.layers = 1;
  System s = testing::round_system();
  use_framework(s, load_framework("seqpar-train"));
  Plan p;
  p.gpus = p.sp = 1;
  p.mem.zero = 0;
  p.mem.tiled_loss = true;
  auto fits = [&](std::int64_t n) {
    Plan q = p;
    q.seq_len = n;
    return simulate(m, s, q).fits;
  };
  // Tiles of at most 8 tokens (hidden 8): 16 tokens are two tiles of 8, 17 three of 6, 24 three of
  // 8, 25 four of 7 ... A capacity of 16 tokens' peak: one 8-token tile too many beyond it, but runs
  // that start with a shorter tile fit again, up to 49 tokens (seven tiles of 7).
  Plan at = p;
  at.seq_len = 16;
  s.gpu.memory_bytes = simulate(m, s, at).peak_memory_bytes();
  const MaxLenSearch r = max_seq_len_search(m, s, p);
  std::int64_t longest = 0;
  std::vector<LengthGap> gaps;
  for (std::int64_t n = 1; n <= 4000; ++n) {
    if (fits(n)) {
      longest = n;
    } else if (!gaps.empty() && gaps.back().last == n - 1) {
      gaps.back().last = n;
    } else {
      gaps.push_back({n, n});
    }
  }
  ASSERT_LT(longest, 4000);
  while (!gaps.empty() && gaps.back().first > longest) gaps.pop_back();
  ASSERT_FALSE(gaps.empty()) << "the case has no gap below its maximum: it tests nothing";
  EXPECT_EQ(r.max_seq_len, longest);
  EXPECT_EQ(r.gap_count, std::int64_t(gaps.size()));
  ASSERT_EQ(r.gaps.size(), std::min(gaps.size(), kMaxGapsListed));
  for (std::size_t i = 0; i < r.gaps.size(); ++i) {
    EXPECT_EQ(r.gaps[i].first, gaps[i].first) << i;
    EXPECT_EQ(r.gaps[i].last, gaps[i].last) << i;
  }
}

// The issue's case: Llama-3-70B on 8 L20s with tiled loss, where 65,544 tokens peak lower than
// 65,536 (8,193 local tokens make two tiles of 4,097 where 8,192 made one), and the Llama-3-8B
// case on 4 A100-40GB that the old search stopped short of.
TEST(MaxLen, TheIssuesCasesNoLongerStopAtTheFirstLengthThatDoesNotFit) {
  const Model m70 = load_model("llama3-70b");
  const System l20 = load_system("l20-pcie");
  Plan p = testing::plan(Method::ulysses, 8, 65536, 8, 8, 1);
  p.mem = {3, Checkpoint::full, true, true, false, true};
  const double before = simulate(m70, l20, p).peak_memory_bytes();
  p.seq_len = 65544;
  EXPECT_LT(simulate(m70, l20, p).peak_memory_bytes(), before);
  const Model m8 = load_model("llama3-8b");
  const System a100 = load_system("dgx-a100-40g");
  Plan q = testing::plan(Method::ulysses, 4, 0, 4, 4, 1);
  q.mem = {3, Checkpoint::full, false, false, false, true};
  const MaxLenSearch r = max_seq_len_search(m8, a100, q);
  q.seq_len = r.max_seq_len;
  EXPECT_TRUE(simulate(m8, a100, q).fits);
  q.seq_len = r.max_seq_len + seq_granularity(q);
  EXPECT_FALSE(simulate(m8, a100, q).fits);
  for (const LengthGap& g : r.gaps) {
    q.seq_len = g.first;
    EXPECT_FALSE(simulate(m8, a100, q).fits) << g.first;
    q.seq_len = g.first - seq_granularity(q);
    EXPECT_TRUE(simulate(m8, a100, q).fits) << g.first;
  }
}

}  // namespace
}  // namespace seqpar::sim

// The interface keeps its word (issue 28): each bad input the README promises to refuse is fed to the
// seqpar program as a user would, and the message and the exit status are checked (2: bad input, 1:
// an invalid plan). A wrapped number never reaches a message; limits print as whole numbers under
// the user's own field name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli_runner.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/presets.hpp"

namespace {

using nlohmann::json;
using seqpar::testing::CliRun;
using seqpar::testing::seqpar;

// Runs `args`, expects exit status `code` and `needle` in what it printed (stderr, or stdout with --json).
CliRun expect_exit(const std::string& args, int code, const std::string& needle) {
  const CliRun r = seqpar(args);
  EXPECT_EQ(r.code, code) << args << "\nstdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_NE((r.err + r.out).find(needle), std::string::npos) << args << "\nstdout: " << r.out << "\nstderr: " << r.err;
  return r;
}

class CliBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("seqpar_bad_input_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const auto path = dir_ / name;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  // A Llama-3-8B config.json with `key` set to the JSON `value` (null: removed).
  std::string hf_config(const std::string& key, const std::string& value) {
    json j = json::parse(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
      "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
      "tie_word_embeddings": false, "transformers_version": "4.40.0", "vocab_size": 128256})");
    if (value == "null") j.erase(key);
    else j[key] = json::parse(value);
    return write("hf/" + key + "/config.json", j.dump());
  }
  std::filesystem::path dir_;
};

TEST_F(CliBadInput, UsageErrorsExitTwoNotTheParsersOwnCodes) {
  // CLI11 exits 104-109 for these by itself; the README promises 2 for every usage error.
  expect_exit("simulate --seq-len 1K --no-such-flag", 2, "--no-such-flag");
  expect_exit("no-such-command", 2, "unknown subcommand 'no-such-command'; the subcommands are presets, simulate");
  expect_exit("", 2, "A subcommand is required");
  expect_exit("simulate", 2, "--seq-len is required");
  expect_exit("simulate --seq-len", 2, "--seq-len");
  expect_exit("simulate --seq-len 1K extra", 2, "extra");
  expect_exit("advise --seq-len 1K --top many", 2, "--top");
  expect_exit("simulate --seq-len 1K --zero many", 2, "--zero");
  expect_exit("simulate --seq-len 1K --gpus abc", 2, "gpus: 'abc' is not a count");
  expect_exit("gate only-one.json", 2, "new is required");
  expect_exit("report --out /tmp/never", 2, "files is required");
  // --help and --version still exit 0.
  EXPECT_EQ(seqpar("--version").code, 0);
  EXPECT_EQ(seqpar("advise --help").code, 0);
}

TEST_F(CliBadInput, SizesAboveTheLimitsFailAsBadInputInEverySubcommand) {
  for (const std::string sub : {"simulate --seq-len 1M", "advise --seq-len 1M", "maxlen", "comm --size 1M"}) {
    expect_exit(sub + " --gpus 2147483647", 2, "gpus: 2147483647 is above the limit of 1048576");
    // Beyond int: CLI11 said "Could not convert"; the limit is the rule the user broke.
    expect_exit(sub + " --gpus 99999999999", 2, "gpus: 99999999999 is above the limit of 1048576");
  }
  expect_exit("sweep --gpus 99999999999 --seq-len 1M --out " + (dir_ / "never").string(), 2,
              "gpus: 99999999999 is above the limit of 1048576");
  expect_exit("simulate --seq-len 1M --sp 4294967296", 2, "sp: 4294967296 is above the limit of 1048576");
  expect_exit("simulate --seq-len 1M --method hybrid --ring-degree 2097152", 2,
              "ring_degree: 2097152 is above the limit of 1048576");
  expect_exit("simulate --seq-len 1M --micro-batch 1M", 2, "micro_batch: 1048576 is above the limit of 65536");
  expect_exit("advise --seq-len 1M --ulysses-degree 3G", 2, "ulysses_degree: 3221225472 is above the limit of 1048576");
  // One message, not one per derived degree.
  const CliRun one = seqpar("simulate --seq-len 1M --gpus 2147483647");
  EXPECT_EQ(one.err.find("sp:"), std::string::npos) << one.err;
  for (const std::string sub : {"simulate", "advise"}) {
    expect_exit(sub + " --seq-len 2T", 2, "seq_len: 2199023255552 is above the limit of 1099511627776");
    expect_exit(sub + " --seq-len 99999999999999999999", 2,
                "seq_len: 99999999999999999999 is above the limit of 1099511627776");
    expect_exit(sub + " --seq-len 9999999999T", 2, "seq_len: 9999999999T is above the limit of 1099511627776");
  }
  expect_exit("sweep --seq-len 32K,2T --out " + (dir_ / "never").string(), 2,
              "seq_len: 2199023255552 is above the limit of 1099511627776");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "never"));
  // With --json the message is a document's error (valid false), exit 2 all the same.
  const CliRun j = expect_exit("simulate --seq-len 2T --json", 2, "is above the limit");
  EXPECT_FALSE(j.json()["valid"].get<bool>());
}

TEST_F(CliBadInput, AWrappedNumberNeverReachesAMessage) {
  // 2^40 GPUs in a step: read as an int it was 0, and the message said "gpus: 0 must be at least 1".
  json plan = {{"method", "ulysses"}, {"gpus", 1099511627776LL}, {"seq_len", 4096}, {"sp", 1}};
  json step = {{"model", "llama3-8b"}, {"plan", plan}, {"step_time_s", 1.0}, {"peak_memory_bytes", 1e10}};
  CliRun r = expect_exit("calibrate " + write("wrapped.json", step.dump()) + " --base-system dgx-h100 --out " +
                             (dir_ / "p.json").string(), 2,
                         "plan: field 'gpus': 1099511627776 is above the limit of 1048576");
  EXPECT_EQ(r.err.find("gpus: 0"), std::string::npos) << r.err;
  step["plan"]["gpus"] = 8.5;  // truncated to 8 before
  expect_exit("calibrate " + write("fraction.json", step.dump()) + " --base-system dgx-h100 --out " +
                  (dir_ / "p.json").string(), 2, "plan: field 'gpus' must be a whole number (got 8.5)");
  step["plan"]["gpus"] = 1;
  step["plan"]["seq_len"] = 18446744073709551615ULL;  // 2^64 - 1: an unsigned JSON integer
  expect_exit("calibrate " + write("huge_seq.json", step.dump()) + " --base-system dgx-h100 --out " +
                  (dir_ / "p.json").string(), 2, "plan: field 'seq_len': 18446744073709551615 is above the limit of 1099511627776");
  step["plan"]["seq_len"] = 4096;
  step["plan"]["micro_batch"] = -4294967295LL;  // -1 in 32 bits
  expect_exit("calibrate " + write("negative.json", step.dump()) + " --base-system dgx-h100 --out " +
                  (dir_ / "p.json").string(), 2, "plan: field 'micro_batch': -4294967295 must be at least 1");
}

TEST_F(CliBadInput, LimitsPrintAsWholeNumbersUnderTheUsersFieldName) {
  json model = seqpar::sim::preset_document("model", "llama3-8b");
  model["ffn_hidden"] = 5000000;
  CliRun r = expect_exit("simulate --seq-len 64K --model " + write("model.json", model.dump()), 2,
                         "field 'ffn_hidden': 5000000 is above the limit of 4194304");
  EXPECT_EQ(r.err.find("e+"), std::string::npos) << r.err;
  model["ffn_hidden"] = 0.5;
  expect_exit("simulate --seq-len 64K --model " + write("model2.json", model.dump()), 2,
              "field 'ffn_hidden' must be a whole number (got 0.5)");
  // A Hugging Face config: the config's own key, not the preset's name for it.
  r = expect_exit("simulate --seq-len 64K --model " + hf_config("intermediate_size", "5000000"), 2,
                  "field 'intermediate_size': 5000000 is above the limit of 4194304");
  EXPECT_EQ(r.err.find("ffn_hidden"), std::string::npos) << r.err;
  expect_exit("simulate --seq-len 64K --model " + hf_config("vocab_size", "3e7"), 2,
              "field 'vocab_size': 30000000 is above the limit of 16777216");
  expect_exit("simulate --seq-len 64K --model " + hf_config("num_hidden_layers", "true"), 2,
              "field 'num_hidden_layers' must be a number (got true)");
}

TEST_F(CliBadInput, HuggingFaceConfigsWithoutModelTypeOrWithBadLayerTypes) {
  expect_exit("simulate --seq-len 64K --model " + hf_config("model_type", "null"), 2, "missing field 'model_type'");
  expect_exit("simulate --seq-len 64K --model " + hf_config("layer_types", "\"full_attention\""), 2,
              "field 'layer_types' must be a list with one attention type per layer (got \"full_attention\")");
  expect_exit("simulate --seq-len 64K --model " + hf_config("layer_types", R"({"0": "full_attention"})"), 2,
              "field 'layer_types' must be a list");
  expect_exit("simulate --seq-len 64K --model " + hf_config("layer_types", R"(["full_attention", "full_attention"])"), 2,
              "field 'layer_types' lists 2 layers, but 'num_hidden_layers' is 32");
  expect_exit("simulate --seq-len 64K --model " + hf_config("layer_types", "[1]"), 2, "field 'layer_types' has 1");
  // Every layer full attention, listed once each: accepted.
  json full = json::array();
  for (int i = 0; i < 32; ++i) full.push_back("full_attention");
  EXPECT_EQ(seqpar("simulate --seq-len 64K --model " + hf_config("layer_types", full.dump())).code, 0);
}

TEST_F(CliBadInput, DuplicateJsonKeysAreRefused) {
  const std::string model = seqpar::sim::preset_document("model", "llama3-8b").dump();
  // {"layers": 32, ..., "layers": 4}: the parser kept the last value without a word.
  const std::string twice = model.substr(0, model.size() - 1) + ", \"layers\": 4}";
  expect_exit("simulate --seq-len 64K --model " + write("twice.json", twice), 2,
              "malformed JSON: the key 'layers' appears twice in the top-level object");
  json sys = seqpar::sim::preset_document("system", "dgx-h100");
  sys["gpu"] = seqpar::sim::preset_document("gpu", "h100-sxm");
  std::string text = sys.dump();
  const std::string gpu_key = "\"memory_gib\":";
  text.insert(text.find(gpu_key), "\"memory_gib\": 1000, ");
  expect_exit("advise --seq-len 64K --system " + write("sys.json", text), 2,
              "the key 'memory_gib' appears twice in the object at gpu");
  expect_exit("report " + write("dup_report.json", R"({"kind": "prediction", "kind": "measurement"})") + " --out " +
                  (dir_ / "r").string(), 2, "the key 'kind' appears twice");
}

TEST_F(CliBadInput, AReserveAboveTheMemoryIsRefused) {
  json sys = seqpar::sim::preset_document("system", "dgx-h100");
  json gpu = seqpar::sim::preset_document("gpu", "h100-sxm");
  gpu["reserved_gib"] = 100;
  sys["gpu"] = gpu;
  expect_exit("simulate --seq-len 64K --system " + write("reserve.json", sys.dump()), 2,
              "field 'reserved_gib' (100 GiB) must be below 'memory_gib' (80 GiB)");
}

TEST_F(CliBadInput, AGateThatCouldNeverFailIsRefused) {
  json doc = {{"kind", "measurement"}, {"program", "p"}, {"mode", "real-ranks"}, {"device", "gpu"},
              {"results", {{{"name", "a"}, {"time_s", 1e-3}, {"samples_s", {1e-3, 1.1e-3, 0.9e-3, 1e-3, 1e-3}}}}}};
  const std::string base = write("base.json", doc.dump());
  expect_exit("gate " + base + " " + base + " --min-effect inf", 2, "--min-effect inf would never fail the gate");
  expect_exit("gate " + base + " " + base + " --min-effect nan", 2, "--min-effect nan is not a number");
  expect_exit("gate " + base + " " + base + " --min-effect -1", 2, "--min-effect -1 is negative");
  expect_exit("gate " + base + " " + base + " --noise-factor inf", 2, "--noise-factor inf would never fail the gate");
  expect_exit("gate " + base + " " + base + " --min-effect 1e308", 2, "--min-effect 1e+308 is above 1000");
  expect_exit("gate " + base + " " + base + " --noise-factor 1001", 2, "--noise-factor 1001 is above 1000");
  EXPECT_EQ(seqpar("gate " + base + " " + base + " --min-effect 1000").code, 0);
  // A time_s of 0 beside positive samples contradicts them (it was ignored).
  json zero = doc;
  zero["results"][0]["time_s"] = 0;
  expect_exit("gate " + base + " " + write("zero.json", zero.dump()), 2, "times must be positive seconds, got time_s 0");
  // A byte that is not UTF-8 is escaped, not echoed raw to the terminal.
  expect_exit("simulate --seq-len \"$(printf '8K\\377')\"", 2, "'8K\\xFF'");
  EXPECT_EQ(seqpar("gate " + base + " " + base + " --min-effect 0.1").code, 0);
  // --time names one of Google Benchmark's two times; a measurement document has only the wall clock.
  expect_exit("gate " + base + " " + base + " --time wall", 2, "--time: wall not in {real,cpu}");
  expect_exit("gate " + base + " " + base + " --time cpu", 2, "--time cpu compares Google Benchmark's cpu_time");
}

TEST_F(CliBadInput, TraceAndPlacementAreRefusedWhereTheyWouldDoNothing) {
  expect_exit("simulate --seq-len 64K --trace ''", 2, "trace: empty value");
  expect_exit("simulate --seq-len 64K --trace '' --json", 2, "trace: empty value");
  expect_exit("simulate --seq-len 64K --method ulysses --placement ring-inner", 2,
              "placement: ring-inner places a hybrid's Ulysses and ring groups; method ulysses has one group");
  expect_exit("simulate --seq-len 64K --method ring-zigzag --placement ring-inner --json", 2, "--method hybrid only");
  // The default placement on any method, and ring-inner on a hybrid, are fine.
  EXPECT_EQ(seqpar("simulate --seq-len 64K --method ring --placement ulysses-inner").code, 0);
  EXPECT_EQ(seqpar("simulate --seq-len 64K --gpus 16 --method hybrid --ulysses-degree 4 --placement ring-inner").code, 0);
}

// A preset of one kind given where another belongs is named as what it is, with the flag it belongs
// to (the kind read from its keys), not as its first "unknown field".
TEST_F(CliBadInput, APresetGivenToTheWrongFlagIsNamedAsWhatItIs) {
  const std::string model = write("model.json", seqpar::sim::preset_document("model", "llama3-8b").dump());
  const std::string gpu = write("gpu.json", seqpar::sim::preset_document("gpu", "h100-sxm").dump());
  const std::string system = write("system.json", seqpar::sim::preset_document("system", "dgx-h100").dump());
  const std::string fw = write("fw.json", seqpar::sim::preset_document("framework", "seqpar-train").dump());
  const std::string hf = hf_config("vocab_size", "128256");
  expect_exit("simulate --seq-len 8K --system " + model, 2, model + " is a model preset, not a system preset: give it to --model");
  expect_exit("simulate --seq-len 8K --system " + gpu, 2,
              gpu + " is a GPU preset, not a system preset: give it as a system's \"gpu\"");
  expect_exit("simulate --seq-len 8K --system " + fw, 2,
              fw + " is a framework profile, not a system preset: give it to --framework");
  expect_exit("simulate --seq-len 8K --system " + hf, 2, hf + " is a Hugging Face model config, not a system preset");
  expect_exit("simulate --seq-len 8K --model " + system, 2, system + " is a system preset, not a model preset: give it to --system");
  expect_exit("simulate --seq-len 8K --model " + gpu, 2, gpu + " is a GPU preset, not a model preset");
  expect_exit("simulate --seq-len 8K --model " + fw, 2, fw + " is a framework profile, not a model preset");
  expect_exit("maxlen --framework " + model, 2, model + " is a model preset, not a framework profile: give it to --model");
  expect_exit("maxlen --framework " + hf, 2, hf + " is a Hugging Face model config, not a framework profile");
  expect_exit("sweep --seq-len 8K --system dgx-h100," + model + " --out " + (dir_ / "sw").string(), 2,
              model + " is a model preset, not a system preset");
  // A system whose "gpu" names a model file: named under the system and its field.
  json sys = seqpar::sim::preset_document("system", "dgx-h100");
  sys["gpu"] = model;
  expect_exit("simulate --seq-len 8K --system " + write("sysgpu.json", sys.dump()), 2,
              "gpu: " + model + " is a model preset, not a GPU preset: give it to --model");
  // What seqpar writes (a measured step here: its 'framework' key is also a calibrated system's) is
  // named as a seqpar document, not guessed a preset; and so is a prediction.
  const std::string step = write("step.json", R"({"name": "hf llama3-8b", "gpu_name": "NVIDIA H100 80GB HBM3",
    "framework": "hf-transformers", "dtype": "bf16", "model": "llama3-8b", "plan": {"method": "ulysses", "gpus": 1,
    "seq_len": 8192, "sp": 1}, "step_time_s": 0.2, "peak_memory_bytes": 1e10})");
  expect_exit("simulate --seq-len 8K --model " + step, 2, step + " is a seqpar document (it has 'plan'), not a model preset");
  const std::string prediction = write("prediction.json", seqpar("simulate --seq-len 8K --json").out);
  expect_exit("simulate --seq-len 8K --system " + prediction, 2, " is a seqpar document (it has 'plan'), not a system preset");
  // The calibrator reads its base system as a document (reports' sim_preset_lookup): the same rule.
  try {
    (void)seqpar::sim::preset_document("system", model);
    ADD_FAILURE() << "no error";
  } catch (const seqpar::Error& e) {
    EXPECT_NE(std::string(e.what()).find(model + " is a model preset, not a system preset"), std::string::npos) << e.what();
  }
  // Keys of two kinds, as many of each: no guess, the foreign key named.
  expect_exit("maxlen --framework " + write("tie.json", R"({"name": "x", "hidden": 1, "gpus_per_node": 8})"), 2,
              "tie.json: unknown field \"gpus_per_node\"");
  // A system with one misspelt key is still a system: the unknown field is named, with its nearest.
  sys = seqpar::sim::preset_document("system", "dgx-h100");
  sys["gpu_per_node"] = sys["gpus_per_node"];
  sys.erase("gpus_per_node");
  expect_exit("simulate --seq-len 8K --system " + write("typo.json", sys.dump()), 2, "did you mean 'gpus_per_node'?");
}

// Found by trying more bad inputs in the same spirit.
TEST_F(CliBadInput, MoreInputsThatWereMishandled) {
  // A directory read as JSON said "unexpected end of input".
  expect_exit("simulate --seq-len 64K --model " + dir_.string(), 2, dir_.string() + ": is a directory, not a JSON file");
  // --top -1 printed an empty table and "(N more ...)".
  expect_exit("advise --seq-len 64K --top -1", 2, "top: -1 must be at least 0");
  // An empty preset name printed "llama3-8b on  (8 GPUs ...)".
  json sys = seqpar::sim::preset_document("system", "dgx-h100");
  sys["name"] = "";
  expect_exit("simulate --seq-len 64K --system " + write("noname.json", sys.dump()), 2, "field 'name' is empty");
  // A config's grouped-query mismatch named the preset's fields (heads, kv_heads), not the config's.
  const CliRun r = expect_exit("simulate --seq-len 64K --model " + hf_config("num_key_value_heads", "5"), 2,
                               "num_attention_heads 32 is not a multiple of num_key_value_heads 5");
  EXPECT_EQ(r.err.find("kv_heads 5"), std::string::npos) << r.err;
  // A sweep cell whose plans all break a rule said "does not fit"; with no valid point at all the
  // sweep exits 2 (README "Exit codes").
  const CliRun sw = seqpar("sweep --seq-len 32K --gpus 8 --sp 3 --out " + (dir_ / "sp3").string());
  EXPECT_EQ(sw.code, 2) << sw.err;
  EXPECT_NE(sw.out.find("no valid plan"), std::string::npos) << sw.out;
  EXPECT_EQ(sw.out.find("does not fit"), std::string::npos) << sw.out;
}

// An empty value was taken for "not given" (--framework '' used the default framework, --method ''
// every method, presets --kind '' every kind) or for 0 (--gpus '' was an invalid plan, exit 1).
TEST_F(CliBadInput, AnEmptyValueIsBadInputInEveryOption) {
  const std::string never = " --out " + (dir_ / "never").string();
  const std::pair<std::string, std::string> cases[] = {
      {"simulate --seq-len 64K --framework ''", "framework"},
      {"simulate --seq-len 64K --attention-kernel ''", "attention_kernel"},
      {"simulate --seq-len 64K --gpus ''", "gpus"},
      {"advise --seq-len 64K --method ''", "method"},
      {"advise --seq-len 64K --global-batch ''", "global_batch"},
      {"maxlen --framework ' '", "framework"},
      {"sweep --seq-len 64K --framework ''" + never, "framework"},
      {"presets --kind ''", "kind"},
      {"calibrate some.json --base-system ''" + never, "base_system"},
  };
  for (const auto& [args, field] : cases)
    expect_exit(args, 2, field + ": empty value; give one, or leave the option out for its default");
  expect_exit("calibrate '' --out " + (dir_ / "never").string(), 2, "files: empty value");
  expect_exit("simulate --seq-len 64K --framework '' --json", 2, "framework: empty value");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "never"));
}

// main's options take the same treatment as the rest: limits, counts, and presets named in the message.
TEST_F(CliBadInput, FrameworkAndBatchOptionsKeepTheRules) {
  expect_exit("simulate --seq-len 64K --framework no-such", 2,
              "unknown framework preset 'no-such'; built-in frameworks: deepspeed-alst, hf-transformers");
  expect_exit("maxlen --framework " + dir_.string(), 2, dir_.string() + ": is a directory, not a JSON file");
  expect_exit("simulate --seq-len 64K --offload-params=maybe", 2, "--offload-params");
  expect_exit("simulate --seq-len 64K --grad-accum-steps 99999999999", 2,
              "grad_accum_steps: 99999999999 is above the limit of 65536");
  expect_exit("advise --seq-len 64K --global-batch-tokens 1000T", 2,
              "global_batch_tokens: 1099511627776000 is above the limit of 17592186044416");
  expect_exit("advise --seq-len 64K --global-batch 99999999999999999999999", 2, "global_batch: '99999999999999999999999' is too large");
  expect_exit("sweep --seq-len 64K --global-batch 0 --out " + (dir_ / "never").string(), 2, "global_batch: 0 must be positive");
  expect_exit("simulate --seq-len 64K --method allgather --placement ring-inner", 2, "--method hybrid only");
  // --tp as the other degrees.
  expect_exit("simulate --seq-len 64K --tp 99999999999", 2, "tp: 99999999999 is above the limit of 1048576");
  expect_exit("advise --seq-len 64K --tp 2147483647", 2, "tp: 2147483647 is above the limit of 1048576");
  expect_exit("sweep --seq-len 64K --tp 99999999999 --out " + (dir_ / "never").string(), 2,
              "tp: 99999999999 is above the limit of 1048576");
  expect_exit("simulate --seq-len 64K --tp ''", 2, "tp: empty value");
  // A profile derived from a SwiGLU block is refused for a GELU model once, up front, in every
  // subcommand that predicts memory (not as one rejection per searched plan).
  const std::string mismatch = "mlp: model 'gpt-1.3b' has a gelu MLP, but framework profile 'hf-transformers' counts "
                               "the saved tensors of a swiglu MLP only";
  const std::vector<std::string> commands = {"simulate --seq-len 64K", "advise --seq-len 64K", "maxlen",
                                             "sweep --seq-len 64K --out " + (dir_ / "never").string()};
  for (const std::string& cmd : commands) {
    const CliRun r = expect_exit(cmd + " --model gpt-1.3b --framework hf-transformers", 2, mismatch);
    EXPECT_EQ(r.err.find("rejected"), std::string::npos) << cmd;
  }
  expect_exit("simulate --seq-len 64K --model gpt-1.3b --framework megatron-core --gpus 8 --sp 8 --method ulysses", 0,
              "gpt-1.3b");
}

TEST_F(CliBadInput, MaxlenPerPlanHoldsEachPlansLength) {
  const CliRun r = seqpar("maxlen --gpus 8 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = r.json();
  ASSERT_FALSE(j["per_plan"].empty());
  for (const auto& p : j["per_plan"]) {
    if (p["max_seq_len"].get<std::int64_t>() > 0) EXPECT_EQ(p["plan"]["seq_len"], p["max_seq_len"]) << p.dump();
    else EXPECT_TRUE(p["plan"]["seq_len"].is_null()) << p.dump();
  }
  EXPECT_EQ(j["plan"]["seq_len"], j["max_seq_len"]);
}

// Issue 35 tried again: a name nested in a file is refused under that file's name, a sweep whose
// every point is invalid says why (as advise does) instead of exiting 2 after a table of "no valid
// plan", and --framework over steps that name another framework says what it replaced.
TEST_F(CliBadInput, NestedNamesAndInvalidGridsSayWhichInputAndWhy) {
  json system = json::parse(seqpar::sim::preset_document("system", "dgx-h100").dump());
  system["name"] = "mine";
  system["gpu"] = "h100-sxn";
  const std::string sys = write("mine.json", system.dump());
  expect_exit("simulate --seq-len 8K --system " + sys, 2, sys + ": gpu: unknown gpu preset 'h100-sxn'");

  // A step as reports/results/h100/hf/hf_04_llama3-8b_L4_s8192_none.json has it.
  json step = json::parse(R"({"name": "hf 8K", "gpu_name": "NVIDIA H100 80GB HBM3", "framework": "hf-transformers",
    "model": {"name": "llama3-8b", "layers": 4, "hidden": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128,
              "ffn_hidden": 14336, "vocab": 32000, "mlp": "swiglu", "norm": "rmsnorm", "tied_embeddings": false},
    "plan": {"method": "ulysses", "gpus": 1, "seq_len": 8192, "sp": 1, "zero": 0, "checkpoint": "none"},
    "step_time_s": 0.137037810999999, "peak_memory_bytes": 27102324224})");
  const std::string out = " --out " + (dir_ / "p.json").string();
  step["framework"] = "hf-transformer";
  const std::string typo = write("typo.json", step.dump());
  expect_exit("calibrate " + typo + out, 2,
              typo + ": framework (the document's 'framework'): unknown framework preset 'hf-transformer'");
  step["framework"] = "seqpar-train";
  expect_exit("calibrate --framework hf-transformers " + write("other.json", step.dump()) + out, 0,
              "--framework hf-transformers replaces the framework 'seqpar-train' that 1 of 1 steps name");
  step["framework"] = "hf-transformers";  // the same framework: nothing replaced, no note
  const CliRun same = expect_exit("calibrate --framework hf-transformers " + write("same.json", step.dump()) + out, 0,
                                  "written to");
  EXPECT_EQ(same.out.find("replaces"), std::string::npos) << same.out;

  // --tp 3 on 8 GPUs: no point is valid; the reasons as advise groups them, bounded by --rejected.
  const std::string never = " --out " + (dir_ / "sweep").string();
  CliRun r = expect_exit("sweep --seq-len 8K --tp 3" + never, 2, "no point of the grid is a valid plan");
  EXPECT_NE(r.err.find("gpus: 8 GPUs are not divisible by tp 3 x sp 1"), std::string::npos) << r.err;
  r = expect_exit("sweep --seq-len 8K --tp 3 --json --rejected 1" + never, 2, "more reasons");
  EXPECT_NE(r.err.find("--rejected N"), std::string::npos) << r.err;
  EXPECT_FALSE(r.json()["results"].empty());  // stdout stays the document
  // Valid points that do not fit: exit 1, and no such message.
  r = expect_exit("sweep --seq-len 16M --gpus 1" + never, 1, "does not fit");
  EXPECT_EQ(r.err.find("no point of the grid"), std::string::npos) << r.err;
  expect_exit("sweep --seq-len 8K --rejected -1" + never, 2, "rejected");
}

// The same document given twice to report (or by two paths) counted each of its points twice.
TEST_F(CliBadInput, AReportInputGivenTwiceIsRefused) {
  const std::string grid = (dir_ / "grid").string();
  ASSERT_EQ(seqpar("sweep --seq-len 8K --out " + grid).code, 0);
  const std::string doc = grid + "/sweep.json";
  const std::string out = " --out " + (dir_ / "report").string();
  expect_exit("report " + doc + " " + doc + out, 2, "are the same file; give each input once");
  expect_exit("report " + doc + " " + grid + "/../grid/sweep.json" + out, 2, "are the same file");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "report"));
  EXPECT_EQ(seqpar("report " + doc + out + " --no-plots").code, 0);
}

// The workload's seed and batch count: "-1" was read as the seed 18446744073709551615 and 2^64 as
// another; a batch count beyond int was CLI11's "Could not convert".
TEST_F(CliBadInput, WorkloadSeedsAndBatchCountsAreNeverWrapped) {
  const std::string docs = "simulate --seq-len 32K --documents fixed:4K";
  expect_exit(docs + " --doc-seed -1", 2, "doc-seed: -1 is negative; give a whole number from 0");
  expect_exit(docs + " --doc-seed 18446744073709551616", 2,
              "doc-seed: 18446744073709551616 is above the limit of 18446744073709551615");
  expect_exit(docs + " --doc-batches 99999999999", 2, "doc-batches: 99999999999 is above the limit of 65536");
  expect_exit(docs + " --doc-batches 0", 2, "doc-batches: 0 must be at least 1");
  expect_exit(docs + " --doc-seed -01", 2, "doc-seed: -01 is negative");
  expect_exit(docs + " --doc-seed -", 2, "doc-seed: - is negative");
  // "-0" is 0, as --gpus -0 and --top -0 read it: the same stream as --doc-seed 0.
  auto answer = [&](const std::string& seed) {  // the prediction, less the run's command line and clock
    const CliRun r = seqpar(docs + " --doc-seed " + seed + " --json");
    EXPECT_EQ(r.code, 0) << seed << ": " << r.err;
    json j = json::parse(r.out, nullptr, false);
    if (j.is_object()) j.erase("command"), j.erase("created_utc");
    return j.dump();
  };
  const std::string zero = answer("0");
  EXPECT_NE(zero.find("\"seed\":0"), std::string::npos);
  for (const char* minus_zero : {"-0", "-00"}) EXPECT_TRUE(answer(minus_zero) == zero) << minus_zero;
  // Decimal, as --gpus reads its digits: 010 is ten (CLI11 read it as octal 8), and a sign, a base
  // prefix, a suffix or an exponent is refused.
  EXPECT_TRUE(answer("010") == answer("10"));
  EXPECT_FALSE(answer("10") == answer("8"));
  for (const char* odd : {"+8", "0x8", "0o10", "4K", "1e3", "5.0"})
    expect_exit(docs + " --doc-seed " + odd, 2,
                "doc-seed: '" + std::string(odd) + "' is not a whole number; expected decimal digits");
  const CliRun top = seqpar(docs + " --doc-seed 18446744073709551615 --json");
  ASSERT_EQ(top.code, 0) << top.err;
  EXPECT_NE(top.out.find("18446744073709551615"), std::string::npos);  // the seed given, kept whole
}

}  // namespace

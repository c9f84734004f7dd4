// The seqpar CLI as users call it: the JSON contracts (docs/ARCHITECTURE.md, README), and bad input giving a clear
// message naming the field with a non-zero exit (never a crash, never a number).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <map>
#include <set>
#include <sstream>

#include "cli_runner.hpp"
#include "seqpar/sim/presets.hpp"

namespace {

using seqpar::testing::CliRun;
using seqpar::testing::seqpar;
using seqpar::testing::slurp;

void expect_error(const std::string& args, const std::string& needle) {
  const CliRun r = seqpar(args);
  EXPECT_NE(r.code, 0) << args;
  EXPECT_LT(r.code, 128) << args << ": crashed";
  EXPECT_NE((r.err + r.out).find(needle), std::string::npos) << args << "\nstdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_EQ(r.out.find("step time"), std::string::npos) << args << ": printed numbers for a bad input";
}

// " and N other plan(s)": how the rejected list counts the plans sharing a reason with the first.
std::string fmt_other(int n) { return " and " + std::to_string(n) + (n == 1 ? " other plan: " : " other plans: "); }

TEST(Cli, SimulateJsonHasTheContractKeys) {
  const CliRun r = seqpar("simulate --model llama3-8b --system dgx-h100 --gpus 16 --seq-len 256K --method hybrid --sp 16 --ulysses-degree 8 --checkpoint full --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = r.json();
  for (const char* k : {"schema_version", "tool_version", "command", "valid", "errors", "step_time_s", "tokens_per_s_per_gpu",
                        "tflops_per_gpu", "mfu", "fits", "peak_memory_bytes", "memory", "time", "plan"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"compute_s", "comm_s", "exposed_comm_s", "attention_s"}) EXPECT_TRUE(j["time"].contains(k)) << k;
  double sum = 0;
  for (const auto& [k, v] : j["memory"].items()) {
    EXPECT_TRUE(k.size() > 6 && k.substr(k.size() - 6) == "_bytes") << k;
    sum += v.get<double>();
  }
  EXPECT_NEAR(sum, j["peak_memory_bytes"].get<double>(), 1.0);
  EXPECT_EQ(j["plan"]["ulysses_degree"], 8);
  EXPECT_EQ(j["plan"]["ring_degree"], 2);
  EXPECT_EQ(j["plan"]["checkpoint"], "full");
  EXPECT_NE(j["command"].get<std::string>().find("--seq-len 256K"), std::string::npos);
}

TEST(Cli, AdviseMaxlenAndCommJsonHaveTheContractKeys) {
  CliRun r = seqpar("advise --gpus 32 --seq-len 512K --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = r.json();
  for (const char* k : {"method", "sp", "ulysses_degree", "ring_degree", "zero", "checkpoint", "offload_checkpoints",
                        "offload_optimizer", "tiled_mlp", "tiled_loss"})
    EXPECT_TRUE(j["best"].contains(k)) << k;
  EXPECT_FALSE(j["ranked"].empty());
  EXPECT_TRUE(j["rejected"].is_array());

  // --tp 1: a TP plan without SP (tp=8 sp=1) would stand for every method, as sp=1 does.
  r = seqpar("maxlen --gpus 8 --method ring-zigzag --tp 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = r.json();
  EXPECT_GT(j["max_seq_len"].get<long>(), 0);
  EXPECT_EQ(j["plan"]["method"], "ring-zigzag");

  r = seqpar("comm --system dgx-h100 --op alltoall --gpus 8 --size 1G --json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = r.json();
  EXPECT_GT(j["time_s"].get<double>(), 0);
  EXPECT_NEAR(j["busbw_gbps"].get<double>(), j["algbw_gbps"].get<double>() * 7 / 8, 1e-9);
}

TEST(Cli, AllGatherIsAMethodOfEverySubcommand) {
  CliRun r = seqpar("simulate --gpus 16 --seq-len 128K --method allgather --sp 8 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = r.json();
  EXPECT_TRUE(j["valid"].get<bool>());
  EXPECT_EQ(j["plan"]["method"], "allgather");
  EXPECT_EQ(j["plan"]["ulysses_degree"], 1);
  EXPECT_EQ(j["plan"]["ring_degree"], 8);
  EXPECT_EQ(j["plan"]["dp"], 2);
  EXPECT_GT(j["time"]["exposed_comm_s"].get<double>(), 0);
  r = seqpar("maxlen --gpus 8 --method allgather-contiguous --tp 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.json()["plan"]["method"], "allgather-contiguous");
  r = seqpar("advise --gpus 16 --seq-len 32K --method allgather --sp 8 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.json()["best"]["method"], "allgather");
  EXPECT_EQ(r.json()["best"]["ring_degree"], 8);
  // Invalid plans exit 2 naming the rule, as an unknown name does (listing the methods).
  r = seqpar("simulate --gpus 8 --seq-len 1000 --method allgather --sp 8");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("head/tail load balancing splits it into 2 x sp chunks"), std::string::npos) << r.err;
  r = seqpar("simulate --gpus 8 --seq-len 64K --method allgather --sp 8 --ulysses-degree 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("method allgather has no Ulysses part"), std::string::npos) << r.err;
  expect_error("simulate --seq-len 64K --method all-gather", "allgather or allgather-contiguous");
}

TEST(Cli, SweepWritesJsonAndCsv) {
  const auto dir = std::filesystem::temp_directory_path() / ("seqpar_sweep_" + std::to_string(getpid()));
  const CliRun r = seqpar("sweep --system dgx-h100,l20-pcie --gpus 8,16 --seq-len 32K,1M --method ulysses,ring-zigzag,hybrid --out " + dir.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp((dir / "sweep.json").string()));
  EXPECT_EQ(j["best"].size(), 2u * 2 * 2);
  EXPECT_GT(j["results"].size(), 20u);
  const std::string csv = slurp((dir / "sweep.csv").string());
  EXPECT_EQ(csv.rfind("system,gpus,seq_len,method,sp", 0), 0u);
  EXPECT_NE(r.out.find("advised plan"), std::string::npos);
  // sweep.json is written one point at a time (no document of every point in memory); it is the
  // document --json prints, byte for byte, with and without a workload (whose "workloads" list
  // follows "results").
  for (const std::string extra : {"", " --documents lognormal:8:1 --doc-batches 2"}) {
    const CliRun js = seqpar("sweep --system dgx-h100,l20-pcie --gpus 8,16 --seq-len 32K,1M --method ulysses,hybrid --json" +
                             extra + " --out " + dir.string());
    ASSERT_EQ(js.code, 0) << js.err;
    // EXPECT_TRUE, not EXPECT_EQ: gtest's diff of two 3 MB strings would run for minutes.
    EXPECT_TRUE(slurp((dir / "sweep.json").string()) == js.out) << extra;
    EXPECT_EQ(nlohmann::json::parse(js.out).contains("workloads"), !extra.empty());
  }
  const CliRun none = seqpar("sweep --gpus 8 --seq-len 8K --tp 3 --json --out " + dir.string());
  EXPECT_EQ(none.code, 2);
  EXPECT_TRUE(slurp((dir / "sweep.json").string()) == none.out);
  std::filesystem::remove_all(dir);
}

TEST(Cli, BadInputNamesTheFieldAndExitsNonZero) {
  expect_error("simulate --model nope --seq-len 1K", "unknown model preset 'nope'");
  expect_error("simulate --system nope --seq-len 1K", "unknown system preset 'nope'");
  expect_error("simulate --seq-len 12Q", "seq_len");
  expect_error("simulate --seq-len 0", "seq_len");
  expect_error("simulate --seq-len 1001 --gpus 8", "seq_len: 1001 is not divisible by 8");
  expect_error("simulate --seq-len 128K --gpus 0", "gpus");
  expect_error("simulate --seq-len 128K --gpus 12 --sp 8", "gpus: 12 GPUs are not divisible by sp 8");
  expect_error("simulate --seq-len 128K --gpus 64 --sp 64", "heads: 32 query heads");
  expect_error("simulate --seq-len 128K --method spiral", "method");
  expect_error("simulate --seq-len 128K --checkpoint sometimes", "checkpoint");
  expect_error("simulate --seq-len 128K --zero 7", "zero");
  expect_error("simulate --seq-len 128K --micro-batch -1", "micro_batch");
  expect_error("simulate --seq-len 128K --sp -8", "sp");
  expect_error("simulate --seq-len 128K --offload-checkpoints", "offload_checkpoints");
  expect_error("advise --seq-len 128K --gpus -4", "gpus");
  expect_error("comm --op bogus --size 1M", "op");
  expect_error("comm --op alltoall --size 0", "size");
  expect_error("sweep --seq-len 32K,,64K --out /tmp/x", "seq_len");
  expect_error("simulate --model /nonexistent/m.json --seq-len 1K", "/nonexistent/m.json");
  const std::string bad = "/tmp/seqpar_bad_" + std::to_string(getpid()) + ".json";
  std::ofstream(bad) << "{ not json";
  expect_error("simulate --model " + bad + " --seq-len 1K", "malformed JSON");
  std::filesystem::remove(bad);
}

TEST(Cli, BadInputWithJsonGivesValidFalse) {
  CliRun r = seqpar("simulate --seq-len 128K --gpus 64 --sp 64 --json");
  EXPECT_EQ(r.code, 2);
  auto j = r.json();
  EXPECT_FALSE(j["valid"].get<bool>());
  EXPECT_FALSE(j["errors"].empty());
  EXPECT_TRUE(j["step_time_s"].is_null());
  r = seqpar("simulate --model nope --seq-len 1K --json");
  EXPECT_EQ(r.code, 2);
  j = r.json();
  EXPECT_FALSE(j["valid"].get<bool>());
  EXPECT_NE(j["errors"][0].get<std::string>().find("nope"), std::string::npos);
}

// JSON-library failures on user input (issue 12): each aborted the program before.
class CliJsonInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("seqpar_cli_json_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(CliJsonInput, InvalidUtf8InAFileNameWithJsonOutput) {
  // The name lands in "command" and in the error message; dump() threw type_error.316 on it.
  const std::string missing = (dir_ / "m\xff.json").string();
  CliRun r = seqpar("simulate --model '" + missing + "' --seq-len 128K --json");
  EXPECT_EQ(r.code, 2) << r.err;
  nlohmann::json j;
  ASSERT_NO_THROW(j = r.json()) << r.out;
  EXPECT_FALSE(j["valid"].get<bool>());
  EXPECT_NE(j["errors"][0].get<std::string>().find("cannot open"), std::string::npos) << j["errors"];

  const std::string model = write("ok\xfe.json", seqpar::sim::preset_document("model", "llama3-8b").dump());
  r = seqpar("simulate --model '" + model + "' --seq-len 128K --json");
  EXPECT_EQ(r.code, 0) << r.err;
  ASSERT_NO_THROW(j = r.json()) << r.out;
  EXPECT_TRUE(j["valid"].get<bool>());
  EXPECT_NE(j["command"].get<std::string>().find("ok\xef\xbf\xbd.json"), std::string::npos) << j["command"];
}

TEST_F(CliJsonInput, NumbersBeyondDoubleRangeNameTheFile) {
  nlohmann::json gpu = seqpar::sim::preset_document("gpu", "h100-sxm");
  nlohmann::json sys = seqpar::sim::preset_document("system", "dgx-h100");
  std::string text = gpu.dump();
  const std::string from = "\"value\":989.4";
  ASSERT_NE(text.find(from), std::string::npos) << text;
  text.replace(text.find(from), from.size(), "\"value\":1e400");
  sys["gpu"] = write("gpu.json", text);
  const std::string system = write("system.json", sys.dump());
  CliRun r = seqpar("simulate --system " + system + " --seq-len 128K");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("gpu.json: malformed JSON: a number is out of range"), std::string::npos) << r.err;
  r = seqpar("advise --system " + system + " --seq-len 128K --json");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.json()["errors"][0].get<std::string>().find("gpu.json"), std::string::npos) << r.out;
}

TEST_F(CliJsonInput, DeepNestingIsAnErrorNotAStackOverflow) {
  const std::string deep = write("deep.json", "{\"name\": \"x\", \"layers\": " + std::string(100000, '[') +
                                                  std::string(100000, ']') + "}");
  CliRun r = seqpar("simulate --model " + deep + " --seq-len 128K --json");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.json()["errors"][0].get<std::string>().find("deep.json: malformed JSON: nested deeper than 256"),
            std::string::npos) << r.out;
  r = seqpar("maxlen --model " + deep);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("deep.json"), std::string::npos) << r.err;
}

TEST_F(CliJsonInput, ImpossibleFiguresAreRejectedAtLoad) {
  nlohmann::json gpu = seqpar::sim::preset_document("gpu", "h100-sxm");
  gpu["bf16_tflops"]["value"] = 1e-320;  // loaded before, and gave valid: true with absurd times
  nlohmann::json sys = seqpar::sim::preset_document("system", "dgx-h100");
  sys["gpu"] = gpu;
  const CliRun r = seqpar("simulate --system " + write("tiny.json", sys.dump()) + " --seq-len 128K --json");
  EXPECT_EQ(r.code, 2) << r.err;
  const auto j = r.json();
  EXPECT_FALSE(j["valid"].get<bool>());
  EXPECT_NE(j["errors"][0].get<std::string>().find("'bf16_tflops' must be between"), std::string::npos) << r.out;
}

TEST(Cli, EverySubcommandHasHelp) {
  for (const char* sub : {"presets", "simulate", "advise", "maxlen", "comm", "sweep"}) {
    const CliRun r = seqpar(std::string(sub) + " --help");
    EXPECT_EQ(r.code, 0) << sub;
    EXPECT_NE(r.out.find("--json"), std::string::npos) << sub;
  }
}

// Issue 12, item 4: sizes that overflowed, unbounded ranges, ignored constraints, one plan rule.
TEST(CliLimits, OverflowingSizesAreErrorsNamingTheBound) {
  expect_error("advise --gpus 2147483647 --seq-len 1M", "gpus: 2147483647 is above the limit of 1048576");
  expect_error("maxlen --gpus 2147483647", "gpus: 2147483647 is above the limit of 1048576");
  expect_error("comm --gpus 2147483647 --size 1M", "gpus: 2147483647 is above the limit of 1048576");
  expect_error("sweep --gpus 2147483647 --seq-len 1M --out /tmp/seqpar_never_written", "gpus: 2147483647 is above the limit");
  expect_error("simulate --seq-len 2T", "seq_len: 2199023255552 is above the limit of 1099511627776");
  // Bad input like every other limit (exit 2), with --json as a document: never a negative node count.
  const CliRun big = seqpar("simulate --gpus 2147483647 --seq-len 1M --json");
  EXPECT_EQ(big.code, 2) << big.err;
  EXPECT_FALSE(big.json()["valid"].get<bool>()) << big.out;
  EXPECT_EQ(big.json()["errors"][0], "gpus: 2147483647 is above the limit of 1048576") << big.out;
  // 4 x 1073741825 is 4 in 32 bits: this passed as a valid plan.
  const CliRun r = seqpar("simulate --seq-len 128K --method hybrid --ulysses-degree 4 --ring-degree 1073741825 --json");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_FALSE(r.json()["valid"].get<bool>());
  EXPECT_NE(r.out.find("above the limit of 1048576"), std::string::npos) << r.out;
  // A model whose parameter count does not fit in 64 bits (2^14 layers of 2^54 parameters).
  const std::string model = "/tmp/seqpar_huge_model_" + std::to_string(getpid()) + ".json";
  std::ofstream(model) << R"({"name": "huge", "layers": 16384, "hidden": 1048576, "heads": 65536, "kv_heads": 65536,
                               "head_dim": 65536, "ffn_hidden": 4096, "vocab": 32000})";
  expect_error("simulate --model " + model + " --seq-len 128K", "parameter count");
  std::filesystem::remove(model);
}

TEST(CliLimits, SizeRangesHaveAtMostAThousandRows) {
  expect_error("comm -b 1 -e 1T -f 1.0000001", "-f: -b 1 to -e 1099511627776 gives 277258886 sizes, more than the limit of 1000");
  const CliRun r = seqpar("comm --op allgather -b 1K -e 1M -f 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = r.json()["results"];
  ASSERT_EQ(rows.size(), 11u);
  EXPECT_EQ(rows.front()["bytes"], 1024);
  EXPECT_EQ(rows.back()["bytes"], 1 << 20);
}

// One exit rule for every command (README "Exit codes"): 2 for input that can never be valid (a
// flag's value, a plan that breaks a rule, a grid with no valid point), 1 for a valid question
// without an answer (nothing fits), 0 for an answer, a plan predicted not to fit included.
TEST(Cli, ExitCodesFollowOneRuleInEveryCommand) {
  const std::pair<std::string, int> cases[] = {
      {"simulate --seq-len 8K --zero 4", 2},
      {"simulate --seq-len 8K --checkpoint bogus", 2},
      {"simulate --seq-len 8K --micro-batch 0", 2},
      {"simulate --seq-len 8K --tp 3", 2},
      {"simulate --seq-len 4M --gpus 1", 0},  // answered: it does not fit
      {"maxlen --micro-batch 0", 2},
      {"maxlen --method hybrid --ulysses-degree 3", 2},
      {"maxlen --model llama3-70b --gpus 1 --zero 0", 1},
      {"advise --seq-len 8K --tp 3", 2},
      {"advise --seq-len 16M --gpus 1", 1},
      {"advise --seq-len 8K", 0},
      {"sweep --seq-len 8K --micro-batch 0 --out " + ::testing::TempDir() + "/exit0", 2},
      {"sweep --seq-len 8K --tp 3 --out " + ::testing::TempDir() + "/exit1", 2},
      {"sweep --seq-len 8K --sp 3 --out " + ::testing::TempDir() + "/exit2", 2},
      {"sweep --seq-len 8K --global-batch-tokens 12K --out " + ::testing::TempDir() + "/exit3", 2},
      {"sweep --seq-len 16M --gpus 1 --out " + ::testing::TempDir() + "/exit4", 1},
      {"sweep --seq-len 8K --gpus 8 --out " + ::testing::TempDir() + "/exit5", 0},
  };
  for (const auto& [args, code] : cases) {
    const CliRun r = seqpar(args);
    EXPECT_EQ(r.code, code) << args << "\n" << r.err;
  }
}

// A grid is bounded (issue 35, cases 3 and 4): above kMaxSweepCells cells it is refused before any
// work, naming the product and the limit; a sweep of many GPU counts reports in seconds, its
// figures drawn for six counts that the report names, every count in the tables.
TEST(CliLimits, SweepGridsAndTheirReportsAreBounded) {
  std::string thousand;
  for (int g = 1; g <= 1001; ++g) thousand += (g > 1 ? "," : "") + std::to_string(g);
  CliRun r = seqpar("sweep --seq-len 32K --gpus " + thousand + " --out " + ::testing::TempDir() + "/huge");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("1 system x 1001 GPU counts x 1 sequence lengths = 1001 cells, above the limit of 1000"),
            std::string::npos)
      << r.err;
  std::string counts;
  for (int g = 8; g <= 8 * 40; g += 8) counts += (g > 8 ? "," : "") + std::to_string(g);
  const std::string dir = ::testing::TempDir() + "/forty";
  r = seqpar("sweep --seq-len 32K,64K --method ulysses,ring-zigzag --gpus " + counts + " --out " + dir);
  ASSERT_EQ(r.code, 0) << r.err;
  r = seqpar("report " + dir + "/sweep.json --no-plots --json --out " + dir + "/report");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string md = seqpar::testing::slurp(dir + "/report/report.md");
  EXPECT_NE(md.find("The figures show 6 of the 40 GPU counts (8, 64, 128, 192, 256, 320: the smallest, the largest"),
            std::string::npos);
  const nlohmann::json figures = nlohmann::json::parse(seqpar::testing::slurp(dir + "/report/report-data.json"))["figures"];
  std::set<std::string> panels;
  for (const auto& f : figures)
    if (f.contains("panels"))
      for (const auto& p : f["panels"])
        if (const std::string t = p["title"].get<std::string>(); t.ends_with(" GPUs")) panels.insert(t);  // per GPU count
  EXPECT_LE(figures.size(), 30u);
  EXPECT_LE(panels.size(), 6u);
  EXPECT_NE(md.find("| 320 "), std::string::npos);  // the tables hold the counts the figures leave out
}

TEST(CliLimits, SearchConstraintsAreHonouredOrRefused) {
  expect_error("advise --seq-len 128K --ulysses-degree -4", "ulysses_degree: -4 must be at least 1");
  expect_error("maxlen --sp 0", "sp: 0 must be at least 1");
  expect_error("advise --seq-len 128K --method ulysses --ulysses-degree 4", "does not include hybrid");
  expect_error("maxlen --method hybrid --sp 1", "hybrid needs an SP degree of at least 2");
  // No hybrid on 8 GPUs has U = 3: the answer says so instead of offering a data-parallel plan.
  CliRun r = seqpar("maxlen --method hybrid --ulysses-degree 3 --json");
  EXPECT_EQ(r.code, 2) << r.out;
  auto j = r.json();
  EXPECT_FALSE(j["valid"].get<bool>());
  EXPECT_TRUE(j["plan"].is_null());
  ASSERT_FALSE(j["rejected"].empty());
  for (const auto& rej : j["rejected"]) {
    EXPECT_EQ(rej["plan"]["method"], "hybrid");
    EXPECT_EQ(rej["plan"]["ulysses_degree"], 3);
  }
  r = seqpar("maxlen --method hybrid --ulysses-degree 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = r.json();
  EXPECT_EQ(j["plan"]["method"], "hybrid");
  EXPECT_EQ(j["plan"]["ulysses_degree"], 2);
  r = seqpar("advise --seq-len 64K --gpus 8 --sp 4 --micro-batch 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = r.json();
  ASSERT_FALSE(j["ranked"].empty());
  for (const auto& p : j["ranked"]) {
    EXPECT_EQ(p["plan"]["sp"], 4);
    EXPECT_EQ(p["plan"]["micro_batch"], 2);
  }
}

// advise's human "rejected:" list groups the plans by reason and prints at most --rejected reasons
// (at 16,384 GPUs the search rejects thousands of plans); --json keeps every rejected plan.
TEST(CliLimits, RejectedListIsGroupedByReasonAndCapped) {
  const std::string args = "advise --model llama3-70b --gpus 256 --seq-len 32K --global-batch-tokens 4M";
  CliRun r = seqpar(args + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  // The reasons in the order the search met them, and how many plans give each.
  std::vector<std::string> reasons;
  std::map<std::string, int> plans;
  int total = 0;
  const auto j = r.json();
  for (const auto& rej : j["rejected"])
    for (const auto& why : rej["reasons"]) {
      if (plans[why.get<std::string>()]++ == 0) reasons.push_back(why.get<std::string>());
      ++total;
    }
  // 4M / 32K = 128 sequences: dp-only cannot reach dp 256 (1 plan, 1 reason). At tp t = 1, 2, 4, 8
  // a TP rank holds h = 64 / t query heads, and the Ulysses degrees 2h and 4h = 256 / t (the largest
  // SP the GPUs leave) do not divide them: degree 2h in ulysses sp=2h and in hybrid U2h x R2 (plain
  // and ring-inner), 3 plans; degree 4h in ulysses sp=4h alone, 1 plan (a hybrid needs R >= 2).
  // Each (t, degree) is its own reason: 1 + 4 x 2 = 9 reasons, 1 + 4 x (3 + 1) = 17 plans.
  ASSERT_EQ(reasons.size(), 9u);
  ASSERT_EQ(total, 17);
  auto lines_of = [](const std::string& out) {
    std::vector<std::string> lines;
    std::istringstream in(out.substr(out.find("\nrejected:\n") + 11));
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  };
  r = seqpar(args);
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 9u) << r.out;  // the default 15 holds all 9: no "more" line
  for (std::size_t i = 0; i < lines.size(); ++i) {
    EXPECT_NE(lines[i].find(": " + reasons[i]), std::string::npos) << lines[i];
    const int n = plans[reasons[i]];
    if (n == 1) {
      EXPECT_EQ(lines[i].find(" other plan"), std::string::npos) << lines[i];
    } else {
      EXPECT_NE(lines[i].find(fmt_other(n - 1)), std::string::npos) << lines[i];
    }
  }
  r = seqpar(args + " --rejected 3");
  ASSERT_EQ(r.code, 0) << r.err;
  lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  // The first 3 reasons cover 1 + 3 + 1 plans: the 6 others, 12 plans.
  EXPECT_EQ(lines[3], "(6 more reasons, of 12 plans; --rejected N or --json for all)");
  expect_error(args + " --rejected -1", "rejected: -1 must be at least 0");
}

TEST(CliLimits, SweepRefusesDuplicateListItems) {
  const std::string out = "/tmp/seqpar_sweep_dup_" + std::to_string(getpid());
  expect_error("sweep --system dgx-h100,dgx-h100 --seq-len 32K --out " + out, "system: 'dgx-h100' is listed twice");
  expect_error("sweep --seq-len 1K,1024 --out " + out, "seq_len: '1K' and '1024' are the same value");
  expect_error("sweep --gpus 8,16,8 --seq-len 32K --out " + out, "gpus: '8' is listed twice");
  expect_error("sweep --sp 2,2 --seq-len 32K --out " + out, "sp: '2' is listed twice");
  expect_error("sweep --method ring,ulysses,ring --seq-len 32K --out " + out, "method: 'ring' is listed twice");
  expect_error("sweep --method ring --ulysses-degree 2 --seq-len 32K --out " + out, "does not include hybrid");
  // Two files that name the same system would have their points mixed up under one name.
  const CliRun presets = seqpar("presets --kind system --json");
  ASSERT_EQ(presets.code, 0) << presets.err;
  const nlohmann::json all = presets.json();
  nlohmann::json doc;
  for (const auto& p : all["presets"])
    if (p["name"] == "dgx-h100") doc = p["document"];
  ASSERT_FALSE(doc.is_null());
  const std::string a = out + "_a.json", b = out + "_b.json";
  std::ofstream(a) << doc.dump();
  doc["gpus_per_node"] = 4;
  std::ofstream(b) << doc.dump();
  expect_error("sweep --system " + a + "," + b + " --seq-len 32K --out " + out,
               "system: '" + a + "' and '" + b + "' both name the system 'dgx-h100'");
  std::filesystem::remove(a);
  std::filesystem::remove(b);
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(CliPlan, SpIsInferredFromTheDegreesAsInEveryProgram) {
  CliRun r = seqpar("simulate --gpus 8 --seq-len 64K --method hybrid --ulysses-degree 2 --ring-degree 2 --json");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  auto j = r.json();
  EXPECT_EQ(j["plan"]["sp"], 4);
  EXPECT_EQ(j["plan"]["dp"], 2);
  r = seqpar("simulate --gpus 8 --seq-len 64K --method ulysses --ulysses-degree 4 --json");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.json()["plan"]["sp"], 4);
  // A given degree is kept, and the rule it breaks is named.
  expect_error("simulate --gpus 8 --seq-len 64K --method ulysses --sp 8 --ulysses-degree 1",
               "sp: 8 must equal ulysses_degree 1 x ring_degree 1");
  expect_error("simulate --gpus 8 --seq-len 64K --method hybrid --sp 8 --ulysses-degree 3",
               "ring_degree: sp 8 is not divisible by ulysses_degree 3");
}

TEST(CliPlan, PlacementIsRecordedAndChangesTheCost) {
  // Two 8-GPU nodes, U4xR4: ring-inner sends the all-to-alls across the nodes instead of the ring.
  const std::string base = "simulate --system a800-nvlink --gpus 16 --seq-len 64K --method hybrid --ulysses-degree 4 --json";
  CliRun u = seqpar(base);
  CliRun r = seqpar(base + " --placement ring-inner");
  ASSERT_EQ(u.code, 0) << u.out << u.err;
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(u.json()["plan"]["placement"], "ulysses-inner");
  EXPECT_EQ(r.json()["plan"]["placement"], "ring-inner");
  EXPECT_NE(u.json()["step_time_s"], r.json()["step_time_s"]);
  // The groups' placement is in the output, and the two are different points.
  EXPECT_EQ(u.json()["groups"]["ulysses"]["nodes"], 1);
  EXPECT_EQ(u.json()["groups"]["ring"]["nodes"], 2);
  EXPECT_EQ(r.json()["groups"]["ulysses"]["nodes"], 2);
  EXPECT_EQ(r.json()["groups"]["ring"]["nodes"], 1);
  EXPECT_EQ(r.json()["system"]["nics_per_node"], 4);
  EXPECT_NE(u.json()["name"], r.json()["name"]);
  expect_error("simulate --gpus 16 --seq-len 64K --method hybrid --placement sideways",
               "placement: unknown value 'sideways'; expected ulysses-inner or ring-inner");
}

}  // namespace

// The seqpar CLI as users call it: JSON contracts of DESIGN.md §5, and bad input giving a clear
// message naming the field with a non-zero exit (never a crash, never a number).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace {

struct CliRun {
  int code = -1;
  std::string out, err;
  nlohmann::json json() const { return nlohmann::json::parse(out); }
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

CliRun seqpar(const std::string& args) {
  const std::string base = "/tmp/seqpar_cli_test_" + std::to_string(getpid());
  const std::string cmd = std::string(SEQPAR_CLI) + " " + args + " >" + base + ".out 2>" + base + ".err";
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(base + ".out");
  r.err = slurp(base + ".err");
  std::filesystem::remove(base + ".out");
  std::filesystem::remove(base + ".err");
  return r;
}

void expect_error(const std::string& args, const std::string& needle) {
  const CliRun r = seqpar(args);
  EXPECT_NE(r.code, 0) << args;
  EXPECT_LT(r.code, 128) << args << ": crashed";
  EXPECT_NE((r.err + r.out).find(needle), std::string::npos) << args << "\nstdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_EQ(r.out.find("step time"), std::string::npos) << args << ": printed numbers for a bad input";
}

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

  r = seqpar("maxlen --gpus 8 --method ring-zigzag --json");
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
  EXPECT_EQ(r.code, 1);
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

TEST(Cli, EverySubcommandHasHelp) {
  for (const char* sub : {"presets", "simulate", "advise", "maxlen", "comm", "sweep"}) {
    const CliRun r = seqpar(std::string(sub) + " --help");
    EXPECT_EQ(r.code, 0) << sub;
    EXPECT_NE(r.out.find("--json"), std::string::npos) << sub;
  }
}

}  // namespace

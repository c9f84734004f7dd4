// The benchmark harness's host path, as the GPU programs use it but with host timers: benchmarks
// registered through the real Recorder, run by Google Benchmark, and their results and measurement
// JSON checked. Only the kernel launch itself is left to the GPU machines.
#include <benchmark/benchmark.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "seqpar/bench/gbench_harness.hpp"
#include "seqpar/bench/timer.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"

namespace seqpar::bench {
namespace {

using nlohmann::json;

// A timer whose "elapsed time" is whatever the last launch said it took, so medians and rates are
// exact; it logs what the Recorder did, in order.
struct Script {
  double next_s = 0;
  std::vector<std::string> log;
};

class ScriptedTimer final : public Timer {
 public:
  explicit ScriptedTimer(std::shared_ptr<Script> script) : script_(std::move(script)) {}
  void settle() override { script_->log.push_back("settle"); }
  void start() override { script_->log.push_back("start"); }
  double stop_seconds() override {
    script_->log.push_back("stop");
    return script_->next_s;
  }

 private:
  std::shared_ptr<Script> script_;
};

// Keeps what Google Benchmark reports of each run (its own default display may serve only one run
// per process), so the counters the Recorder sets are checked too.
class CapturingReporter final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& reported) override {
    for (const Run& r : reported)
      if (r.run_type == Run::RT_Iteration) this->runs.push_back(r);
  }
  std::vector<Run> runs;
};

// Google Benchmark keeps its flags between Initialize calls in one process, so every run names its
// repetitions and filter.
std::vector<benchmark::BenchmarkReporter::Run> run(int repetitions = 1, const std::string& filter = ".") {
  CapturingReporter reporter;
  run_registered_benchmarks({"--benchmark_repetitions=" + std::to_string(repetitions), "--benchmark_filter=" + filter},
                            "test_gbench_harness", &reporter);
  return reporter.runs;
}

// The samples a launch taking seconds(rep) gives over `iterations` timed repetitions.
json samples_of(const std::function<double(int)>& seconds, int iterations) {
  json out = json::array();
  for (int rep = 0; rep < iterations; ++rep) out.push_back(seconds(rep));
  return out;
}

class RecorderTest : public ::testing::Test {
 protected:
  void SetUp() override { benchmark::ClearRegisteredBenchmarks(); }
  void TearDown() override { benchmark::ClearRegisteredBenchmarks(); }

  TimerFactory scripted() {
    return [s = script_] { return std::make_unique<ScriptedTimer>(s); };
  }
  // A setup whose launch takes `seconds(rep)` by the scripted timer and logs "launch<rep>".
  Recorder::Setup timed_setup(std::function<double(int)> seconds, json fields = json::object()) {
    return [s = script_, seconds, fields] {
      s->log.push_back("setup");
      Recorder::Launch launch = [s, seconds](int rep) {
        s->log.push_back("launch" + std::to_string(rep));
        s->next_s = seconds(rep);
      };
      return Recorder::Prepared{launch, fields};
    };
  }
  static Recorder::Rates flops_rate(double flops) {
    // A non-number next to the rate: it goes into the results, never into Google Benchmark's counters.
    return [flops](double median_s) { return json{{"tflops", flops / median_s / 1e12}, {"unit_note", "per GPU"}}; };
  }

  std::shared_ptr<Script> script_ = std::make_shared<Script>();
};

TEST_F(RecorderTest, RecordsEverySampleTheMedianRatesAndFieldsInRegistrationOrder) {
  Recorder rec(scripted());
  const auto rising = [](int rep) { return (rep + 1) * 1e-3; };
  const auto falling = [](int rep) { return (10 - rep) * 1e-3; };
  rec.add("first", timed_setup(rising, {{"op", "fwd"}, {"seq_len", 4096}}), flops_rate(6e9), TimingOptions{2, 5});
  rec.add("second", timed_setup(falling), flops_rate(8e9), TimingOptions{0, 5});
  const auto runs = run();

  const json r = rec.results();
  ASSERT_EQ(r.size(), 2u) << r.dump(2);
  EXPECT_EQ(r[0]["name"], "first");
  EXPECT_EQ(r[0]["samples_s"], samples_of(rising, 5));
  EXPECT_DOUBLE_EQ(r[0]["time_s"].get<double>(), 3e-3);
  EXPECT_DOUBLE_EQ(r[0]["tflops"].get<double>(), 6e9 / 3e-3 / 1e12);
  EXPECT_EQ(r[0]["unit_note"], "per GPU");
  EXPECT_EQ(r[0]["op"], "fwd");
  EXPECT_EQ(r[0]["seq_len"], 4096);
  EXPECT_FALSE(r[0].contains("error"));

  EXPECT_EQ(r[1]["name"], "second");
  EXPECT_EQ(r[1]["samples_s"], samples_of(falling, 5));
  EXPECT_DOUBLE_EQ(r[1]["time_s"].get<double>(), 8e-3);
  EXPECT_DOUBLE_EQ(r[1]["tflops"].get<double>(), 8e9 / 8e-3 / 1e12);

  // Google Benchmark's rows: manual time, the fixed iteration count, the numeric rates as counters.
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].benchmark_name(), "first/iterations:5/manual_time");
  EXPECT_EQ(runs[0].iterations, 5);
  EXPECT_NEAR(runs[0].real_accumulated_time, 15e-3, 1e-12);
  ASSERT_EQ(runs[0].counters.count("tflops"), 1u);
  EXPECT_DOUBLE_EQ(runs[0].counters.at("tflops").value, 6e9 / 3e-3 / 1e12);
  EXPECT_EQ(runs[0].counters.count("unit_note"), 0u);
  EXPECT_DOUBLE_EQ(runs[1].counters.at("tflops").value, 8e9 / 8e-3 / 1e12);

  // Warm-up launches, then the timer settles, then each timed launch sits between start and stop.
  const std::vector<std::string> first_run(script_->log.begin(), script_->log.begin() + 19);
  EXPECT_EQ(first_run, (std::vector<std::string>{"setup", "launch0", "launch1", "settle", "start", "launch0", "stop",
                                                 "start", "launch1", "stop", "start", "launch2", "stop", "start",
                                                 "launch3", "stop", "start", "launch4", "stop"}));
}

TEST_F(RecorderTest, ThrowingSetupBecomesAnErrorEntryWithoutNumbers) {
  Recorder rec(scripted());
  rec.add("broken", [] () -> Recorder::Prepared { throw Error("--seq-lens: 3 buffers do not fit"); },
          flops_rate(1e9), TimingOptions{1, 3});
  rec.add("fine", timed_setup([](int) { return 2e-3; }), flops_rate(1e9), TimingOptions{1, 3});
  const auto runs = run();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_TRUE(runs[0].error_occurred);
  EXPECT_EQ(runs[0].error_message, "--seq-lens: 3 buffers do not fit");
  EXPECT_FALSE(runs[1].error_occurred);

  const json r = rec.results();
  ASSERT_EQ(r.size(), 2u) << r.dump(2);
  EXPECT_EQ(r[0], json({{"name", "broken"}, {"error", "--seq-lens: 3 buffers do not fit"}}));
  EXPECT_EQ(r[1]["name"], "fine");
  EXPECT_DOUBLE_EQ(r[1]["time_s"].get<double>(), 2e-3);
}

TEST_F(RecorderTest, LaunchThrowingMidRunBecomesAnErrorAndKeepsNoPartialSamples) {
  Recorder rec(scripted());
  rec.add("fails_at_rep_2",
          [s = script_] {
            Recorder::Launch launch = [s](int rep) {
              if (rep == 2) throw Error("launch failed: invalid argument");
              s->next_s = 1e-3;
            };
            return Recorder::Prepared{launch, json::object()};
          },
          flops_rate(1e9), TimingOptions{0, 5});
  run();

  const json r = rec.results();
  ASSERT_EQ(r.size(), 1u) << r.dump(2);
  EXPECT_EQ(r[0], json({{"name", "fails_at_rep_2"}, {"error", "launch failed: invalid argument"}}));
}

TEST_F(RecorderTest, RepetitionsArePooledUnderOneName) {
  Recorder rec(scripted());
  const auto rising = [](int rep) { return (rep + 1) * 1e-3; };
  rec.add("pooled", timed_setup(rising), flops_rate(1e9), TimingOptions{1, 4});
  EXPECT_EQ(run(3).size(), 3u);

  const json r = rec.results();
  ASSERT_EQ(r.size(), 1u) << r.dump(2);
  EXPECT_EQ(r[0]["name"], "pooled");
  // Each repetition is a fresh run (setup, warm-up, timer) whose samples join the earlier ones.
  json pooled = samples_of(rising, 4);
  for (int k = 0; k < 2; ++k)
    for (const json& x : samples_of(rising, 4)) pooled.push_back(x);
  EXPECT_EQ(r[0]["samples_s"], pooled);
  EXPECT_DOUBLE_EQ(r[0]["time_s"].get<double>(), 2.5e-3);
  EXPECT_DOUBLE_EQ(r[0]["tflops"].get<double>(), 1e9 / 2.5e-3 / 1e12);
  EXPECT_EQ(std::count(script_->log.begin(), script_->log.end(), "setup"), 3);
  EXPECT_EQ(std::count(script_->log.begin(), script_->log.end(), "settle"), 3);
}

TEST_F(RecorderTest, BenchmarksFilteredOutAreLeftOutOfTheResults) {
  Recorder rec(scripted());
  rec.add("attention_fwd", timed_setup([](int) { return 1e-3; }), flops_rate(1e9), TimingOptions{0, 2});
  rec.add("attention_bwd", timed_setup([](int) { return 1e-3; }), flops_rate(1e9), TimingOptions{0, 2});
  run(1, "^attention_bwd");

  const json r = rec.results();
  ASSERT_EQ(r.size(), 1u) << r.dump(2);
  EXPECT_EQ(r[0]["name"], "attention_bwd");
}

TEST_F(RecorderTest, ZeroMedianIsAnErrorRatherThanAnInfiniteRate) {
  Recorder rec(scripted());
  rec.add("too_fast", timed_setup([](int) { return 0.0; }), flops_rate(1e9), TimingOptions{0, 3});
  run();

  const json r = rec.results();
  ASSERT_EQ(r.size(), 1u) << r.dump(2);
  EXPECT_EQ(r[0]["name"], "too_fast");
  ASSERT_TRUE(r[0].contains("error")) << r.dump(2);
  EXPECT_NE(r[0]["error"].get<std::string>().find("not positive"), std::string::npos);
  EXPECT_FALSE(r[0].contains("tflops"));
}

TEST_F(RecorderTest, HostTimerTimesWallClockOfTheLaunch) {
  Recorder rec(host_timers());
  rec.add("sleep_2ms",
          [] {
            Recorder::Launch launch = [](int) { std::this_thread::sleep_for(std::chrono::milliseconds(2)); };
            return Recorder::Prepared{launch, json::object()};
          },
          [](double median_s) { return json{{"per_s", 1 / median_s}}; }, TimingOptions{1, 3});
  run();

  const json r = rec.results();
  ASSERT_EQ(r.size(), 1u) << r.dump(2);
  ASSERT_EQ(r[0]["samples_s"].size(), 3u);
  for (const json& s : r[0]["samples_s"]) EXPECT_GE(s.get<double>(), 2e-3);
  EXPECT_LT(r[0]["time_s"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(r[0]["per_s"].get<double>(), 1 / r[0]["time_s"].get<double>());
}

TEST_F(RecorderTest, NoTimerFactoryIsRefused) {
  EXPECT_THROW(Recorder rec(TimerFactory{}), Error);
}

TEST_F(RecorderTest, ImpossibleTimingOptionsAreRefusedNamingTheBenchmark) {
  Recorder rec(scripted());
  try {
    rec.add("attention_fwd", timed_setup([](int) { return 1e-3; }), flops_rate(1e9), TimingOptions{1, 0});
    FAIL() << "expected seqpar::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attention_fwd: timed repetitions must be positive"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(rec.add("b", timed_setup([](int) { return 1e-3; }), flops_rate(1e9), TimingOptions{-1, 3}), Error);
  EXPECT_EQ(rec.results(), json::array());
}

TEST_F(RecorderTest, UnrecognisedFlagIsAnErrorAndLeavesNothingRegistered) {
  {
    Recorder gone(scripted());
    gone.add("gone", timed_setup([](int) { return 1e-3; }), flops_rate(1e9), TimingOptions{0, 2});
    CapturingReporter reporter;
    EXPECT_THROW(run_registered_benchmarks({"--benchmark_no_such_flag=1"}, "test_gbench_harness", &reporter), InputError);
  }
  // Had "gone" stayed registered, this run would call into the destroyed Recorder.
  Recorder rec(scripted());
  rec.add("kept", timed_setup([](int) { return 1e-3; }), flops_rate(1e9), TimingOptions{0, 2});
  run();
  const json r = rec.results();
  ASSERT_EQ(r.size(), 1u) << r.dump(2);
  EXPECT_EQ(r[0]["name"], "kept");
  EXPECT_EQ(std::count(script_->log.begin(), script_->log.end(), "setup"), 1);
}

// main()'s exit codes (the README's rule): input that can never be valid exits 2, a run that fails
// exits 1. Without a device no Error comes after the device check, so a seqpar::Error is the input's.
int throws_input(int, char**) { throw InputError("--benchmark_nope: unrecognised"); }
int throws_error(int, char**) { throw Error("--iters must be positive"); }
int throws_other(int, char**) { throw std::runtime_error("cuBLAS workspace lost"); }
int answers(int, char**) { return 0; }

TEST(HarnessMain, InputExits2AndARunThatFailsExits1) {
  char name[] = "test";
  char* argv[] = {name, nullptr};
  EXPECT_EQ(harness_main("test", 1, argv, throws_input), 2);
  EXPECT_EQ(harness_main("test", 1, argv, throws_error), 2);
  EXPECT_EQ(harness_main("test", 1, argv, throws_other), 1);
  EXPECT_EQ(harness_main("test", 1, argv, answers), 0);
}

TEST_F(RecorderTest, WritesTheMeasurementDocument) {
  Recorder rec(scripted());
  rec.add("gemm/bf16/1024", timed_setup([](int rep) { return (rep + 2) * 1e-4; }, {{"m", 1024}}), flops_rate(2e9),
          TimingOptions{1, 3});
  run();

  const std::string path = ::testing::TempDir() + "seqpar_test_gbench_harness.json";
  // argv is bytes, not text: an invalid UTF-8 argument must not stop the document from being written.
  const char* argv[] = {"seqpar-bench-gemm", "--sizes", "1K", "-J", "caf\xe9.json"};
  const json config = {{"sizes", "1K"}, {"iterations", 3}};
  write_measurement(path, 5, argv, "seqpar-bench-gemm", Mode::real_ranks, config, rec.results());

  const json doc = read_json_file(path);
  std::filesystem::remove(path);
  EXPECT_EQ(doc["kind"], "measurement");
  EXPECT_EQ(doc["program"], "seqpar-bench-gemm");
  EXPECT_EQ(doc["mode"], "real-ranks");
  EXPECT_EQ(doc["device"], "gpu");
  EXPECT_EQ(doc["config"], config);
  EXPECT_TRUE(doc["environment"].is_object());
  EXPECT_TRUE(doc.contains("schema_version"));
  EXPECT_NE(doc["command"].get<std::string>().find("seqpar-bench-gemm --sizes 1K -J"), std::string::npos);
  EXPECT_NE(doc["command"].get<std::string>().find("caf\xef\xbf\xbd.json"), std::string::npos)
      << "the invalid byte is written as U+FFFD";
  ASSERT_EQ(doc["results"].size(), 1u);
  EXPECT_EQ(doc["results"][0]["name"], "gemm/bf16/1024");
  EXPECT_EQ(doc["results"][0]["m"], 1024);
  EXPECT_DOUBLE_EQ(doc["results"][0]["time_s"].get<double>(), 3e-4);
  EXPECT_DOUBLE_EQ(doc["results"][0]["tflops"].get<double>(), 2e9 / 3e-4 / 1e12);
}

TEST(WriteMeasurement, UnwritablePathIsAnErrorNamingIt) {
  const char* argv[] = {"prog"};
  try {
    write_measurement("/nonexistent-seqpar-dir/out.json", 1, argv, "prog", Mode::real_ranks, json::object(),
                      json::array());
    FAIL() << "expected seqpar::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("-J /nonexistent-seqpar-dir/out.json: cannot open"), std::string::npos)
        << e.what();
  }
}

TEST(HarnessArgs, BenchmarkFlagsGoToGoogleBenchmarkTheRestToTheProgram) {
  const char* argv[] = {"prog", "--iters", "3", "--benchmark_filter=fwd", "-J", "out.json",
                        "--benchmark_repetitions=5"};
  const SplitArgs split = split_benchmark_args(7, argv);
  EXPECT_EQ(split.own, (std::vector<std::string>{"--iters", "3", "-J", "out.json"}));
  EXPECT_EQ(split.gbench, (std::vector<std::string>{"--benchmark_filter=fwd", "--benchmark_repetitions=5"}));
}

TEST(HarnessArgs, TimingOptionsAreParsedAndChecked) {
  auto parse = [](std::vector<const char*> args, TimingOptions& timing) {
    CLI::App app{"test", "prog"};
    std::string json_path;
    add_harness_options(app, timing, json_path);
    args.insert(args.begin(), "prog");
    return parse_harness_args(app, split_benchmark_args(static_cast<int>(args.size()), args.data()), timing);
  };
  TimingOptions timing;
  EXPECT_EQ(parse({"--warmup", "0", "--iters", "7"}, timing), -1);
  EXPECT_EQ(timing.warmup, 0);
  EXPECT_EQ(timing.iterations, 7);
  TimingOptions bad;
  try {
    parse({"--iters", "0"}, bad);
    FAIL() << "expected seqpar::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--iters must be positive"), std::string::npos) << e.what();
  }
  TimingOptions negative;
  EXPECT_THROW(parse({"--warmup", "-1"}, negative), Error);
}

TEST(HarnessMain, InputErrorExitsTwoWithTheProgramName) {
  char prog[] = "prog";
  char* argv[] = {prog, nullptr};
  ::testing::internal::CaptureStderr();
  const int rc = harness_main("seqpar-bench-x", 1, argv, [](int, char**) -> int { throw Error("--heads: 0 must be positive"); });
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 2);  // raised before the device check: the input
  EXPECT_EQ(err, "seqpar-bench-x: --heads: 0 must be positive\n");
}

}  // namespace
}  // namespace seqpar::bench

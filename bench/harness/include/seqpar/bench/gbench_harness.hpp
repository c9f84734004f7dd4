// The shared driver of the microbenchmarks built on Google Benchmark (seqpar-bench-attention,
// -gemm, -reshard): manual timing with warm-up, every repetition kept as a sample, and the
// MEASUREMENT JSON written with -J. This is the host part: it builds without CUDA and its tests run
// in CI. The timing source is a Timer (timer.hpp): CUDA events in the GPU programs
// (gpu_timer.hpp), steady_clock in the host tests. Device buffers and L2 rotation are in
// device_memory.hpp (CUDA builds).
#pragma once
#include <CLI/CLI.hpp>
#include <benchmark/benchmark.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "seqpar/core/measurement.hpp"
#include "seqpar/bench/timer.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/progress.hpp"

namespace seqpar::bench {

struct TimingOptions {
  int warmup = 3;       // untimed launches before the timed ones
  int iterations = 10;  // timed repetitions (each one a sample)
};

// Collects the results of all registered benchmarks for the JSON document.
class Recorder {
 public:
  // Every benchmark is timed with a timer from `make_timer` (gpu_timers() for GPU work). There is
  // no default: a host clock around an asynchronous GPU launch would time only the launch.
  explicit Recorder(TimerFactory make_timer);
  // Google Benchmark keeps the registered bodies, which point at this object: it must stay where it
  // is until run_registered_benchmarks() has returned.
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Registers `name` with Google Benchmark. `setup` runs once when the benchmark starts and returns the
  // launch function (called with the repetition index, to pick the rotated buffers) and the result's extra
  // fields; `rates` turns the median time into counters and fields (for example tflops, algbw_gbps).
  using Launch = std::function<void(int repetition)>;
  struct Prepared {
    Launch launch;
    nlohmann::json fields;  // extra result fields (units in the keys)
  };
  using Setup = std::function<Prepared()>;
  using Rates = std::function<nlohmann::json(double median_s)>;
  void add(const std::string& name, Setup setup, Rates rates, const TimingOptions& timing);

  // One entry per benchmark that ran, in registration order; samples of repeated runs
  // (--benchmark_repetitions) are pooled under the one name. A benchmark that failed (its setup or a
  // launch threw, or its median is not a positive time, so no rate could be computed) is
  // {"name", "error"} and has no numbers.
  nlohmann::json results() const;

 private:
  struct Entry {
    std::string name;
    Rates rates;
    std::vector<double> samples;
    nlohmann::json fields;
    std::string error;
    bool ran = false;
  };
  // After a benchmark's first run: the shape list's progress line (seqpar::Progress, on a terminal only).
  void count_finished(Entry& entry);
  TimerFactory make_timer_;
  std::vector<Entry> entries_;  // registration order; Google Benchmark runs them after all are added
  std::unique_ptr<Progress> progress_;  // made at the first run, when every benchmark is registered
  std::int64_t finished_ = 0;
};

// The MEASUREMENT JSON of the team contract (run_info fields, kind, program, mode, device, environment,
// config, results), written to `path`. Throws seqpar::Error when the file cannot be written.
void write_measurement(const std::string& path, int argc, const char* const* argv, const std::string& program,
                       Mode mode, const nlohmann::json& config, const nlohmann::json& results);

// Splits argv into the program's own options and Google Benchmark's (--benchmark_*), so both parsers see theirs.
struct SplitArgs {
  std::vector<std::string> own, gbench;
};
SplitArgs split_benchmark_args(int argc, const char* const* argv);

// Initialises Google Benchmark with its own flags, runs everything registered, shuts it down, and
// clears the registry (the registered bodies point into their Recorder, which may go away next).
// `display` null: Google Benchmark's own display (honours --benchmark_format), which Google
// Benchmark 1.7 frees after the run, so it serves one call per process, as in the programs. Tests,
// which run many times in one process, pass a reporter of their own.
void run_registered_benchmarks(const std::vector<std::string>& gbench_args, const char* argv0,
                               benchmark::BenchmarkReporter* display = nullptr);

// What every single-GPU harness program shares: --warmup, --iters and -J FILE on its command line;
// parsing its own arguments (returns -1 to go on, else the exit code: 0 after --help); the device
// check (prints "<program>: no usable CUDA device: <why>" and returns false); and main(), where an
// exception prints "<program>: <what>" and exits 2 for input (a seqpar::Error before the device
// check, or an InputError: an unknown --benchmark_ flag) and 1 for a run that failed.
void add_harness_options(CLI::App& app, TimingOptions& timing, std::string& json_path);
int parse_harness_args(CLI::App& app, const SplitArgs& args, const TimingOptions& timing);
bool device_or_explain(const char* program);
int harness_main(const char* program, int argc, char** argv, int (*run)(int, char**));

}  // namespace seqpar::bench

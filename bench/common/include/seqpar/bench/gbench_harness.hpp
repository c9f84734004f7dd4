// The shared driver of the GPU microbenchmarks built on Google Benchmark (seqpar-bench-attention,
// seqpar-bench-reshard): CUDA-event manual timing with warm-up, every repetition kept as a sample,
// input rotation against L2 reuse, and the MEASUREMENT JSON written with -J.
#pragma once
#include <CLI/CLI.hpp>
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "seqpar/common/error.hpp"

namespace seqpar::bench {

// A cudaMalloc'd buffer, freed on destruction.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(std::size_t bytes);
  ~DeviceMemory();
  DeviceMemory(DeviceMemory&& other) noexcept;
  DeviceMemory& operator=(DeviceMemory&& other) noexcept;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// How many copies of a working set of `bytes` to rotate through so that consecutive repetitions do not
// hit in L2: enough to cover twice the L2 size, at least 1, at most `max_copies`.
int rotation_copies(std::size_t bytes, int max_copies = 16);

struct TimingOptions {
  int warmup = 3;       // untimed launches before the timed ones
  int iterations = 10;  // timed repetitions (each one a sample)
};

// Collects the results of all registered benchmarks for the JSON document.
class Recorder {
 public:
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
  void add(const std::string& name, Setup setup, Rates rates, const TimingOptions& timing,
           cudaStream_t stream = nullptr);

  // One entry per benchmark that ran, in registration order; samples of repeated runs
  // (--benchmark_repetitions) are pooled under the one name.
  nlohmann::json results() const;

 private:
  struct Entry {
    std::string name;
    Rates rates;
    std::vector<double> samples;
    nlohmann::json fields;
    std::string error;
  };
  std::vector<Entry> entries_;  // registration order; Google Benchmark runs them after all are added
};

// The MEASUREMENT JSON of the team contract (run_info fields, kind, program, mode, device, environment,
// config, results), written to `path`. Throws seqpar::Error when the file cannot be written.
void write_measurement(const std::string& path, int argc, const char* const* argv, const std::string& program,
                       const std::string& mode, const nlohmann::json& config, const nlohmann::json& results);

// Splits argv into the program's own options and Google Benchmark's (--benchmark_*), so both parsers see theirs.
struct SplitArgs {
  std::vector<std::string> own, gbench;
};
SplitArgs split_benchmark_args(int argc, const char* const* argv);

// Initialises Google Benchmark with its own flags, runs everything registered, shuts it down.
void run_registered_benchmarks(const std::vector<std::string>& gbench_args, const char* argv0);

// What every single-GPU harness program shares: --warmup, --iters and -J FILE on its command line;
// parsing its own arguments (returns -1 to go on, else the exit code: 0 after --help); the device
// check (prints "<program>: no usable CUDA device: <why>" and returns false); and main(), where an
// exception prints "<program>: <what>" and exits 1.
void add_harness_options(CLI::App& app, TimingOptions& timing, std::string& json_path);
int parse_harness_args(CLI::App& app, const SplitArgs& args, const TimingOptions& timing);
bool device_or_explain(const char* program);
int harness_main(const char* program, int argc, char** argv, int (*run)(int, char**));

}  // namespace seqpar::bench

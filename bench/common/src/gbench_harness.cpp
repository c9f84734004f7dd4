#include "seqpar/bench/gbench_harness.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <utility>

#include "seqpar/bench/environment.hpp"
#include "seqpar/bench/gpu_timer.hpp"
#include "seqpar/common/cuda_check.hpp"
#include "seqpar/common/run_info.hpp"
#include "seqpar/common/stats.hpp"

namespace seqpar::bench {

DeviceMemory::DeviceMemory(std::size_t bytes) : bytes_(bytes) {
  SEQPAR_CUDA_CHECK(cudaMalloc(&ptr_, bytes ? bytes : 1));
}
DeviceMemory::~DeviceMemory() {
  if (ptr_) cudaFree(ptr_);
}
DeviceMemory::DeviceMemory(DeviceMemory&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  if (this != &other) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

int rotation_copies(std::size_t bytes, int max_copies) {
  int device = 0, l2 = 0;
  SEQPAR_CUDA_CHECK(cudaGetDevice(&device));
  SEQPAR_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  if (bytes == 0) return 1;
  const std::size_t want = (2 * static_cast<std::size_t>(l2) + bytes - 1) / bytes;
  return static_cast<int>(std::clamp<std::size_t>(want, 1, static_cast<std::size_t>(max_copies)));
}

void Recorder::add(const std::string& name, Setup setup, Rates rates, const TimingOptions& timing,
                   cudaStream_t stream) {
  const std::size_t index = entries_.size();
  entries_.push_back(Entry{name, std::move(rates), {}, nlohmann::json::object(), {}});
  auto body = [this, index, setup = std::move(setup), timing, stream](benchmark::State& state) {
    Entry& entry = entries_[index];
    try {
      Prepared prep = setup();
      for (int w = 0; w < timing.warmup; ++w) prep.launch(w);
      SEQPAR_CUDA_CHECK(cudaStreamSynchronize(stream));
      GpuTimer timer(stream);
      std::vector<double> samples;
      int rep = 0;
      for (auto _ : state) {
        timer.start();
        prep.launch(rep++);
        const double s = timer.stop_seconds();
        state.SetIterationTime(s);
        samples.push_back(s);
      }
      entry.samples.insert(entry.samples.end(), samples.begin(), samples.end());
      entry.fields = prep.fields;
      for (const auto& [key, value] : entry.rates(summarize(samples).median).items())
        if (value.is_number()) state.counters[key] = value.get<double>();
    } catch (const std::exception& e) {
      entry.error = e.what();
      state.SkipWithError(e.what());
    }
  };
  benchmark::RegisterBenchmark(name.c_str(), body)
      ->UseManualTime()
      ->Iterations(timing.iterations)
      ->Unit(benchmark::kMillisecond);
}

nlohmann::json Recorder::results() const {
  nlohmann::json out = nlohmann::json::array();
  for (const Entry& e : entries_) {
    if (!e.error.empty()) {
      out.push_back({{"name", e.name}, {"error", e.error}});
      continue;
    }
    if (e.samples.empty()) continue;  // filtered out
    const double median = summarize(e.samples).median;
    nlohmann::json r = {{"name", e.name}, {"time_s", median}, {"samples_s", e.samples}};
    r.update(e.fields);
    r.update(e.rates(median));
    out.push_back(std::move(r));
  }
  return out;
}

void write_measurement(const std::string& path, int argc, const char* const* argv, const std::string& program,
                       const std::string& mode, const nlohmann::json& config, const nlohmann::json& results) {
  nlohmann::json doc = run_info(argc, argv);
  doc["kind"] = "measurement";
  doc["program"] = program;
  doc["mode"] = mode;
  doc["device"] = "gpu";
  doc["environment"] = environment_info();
  doc["config"] = config;
  doc["results"] = results;
  write_json_file(path, doc);
}

SplitArgs split_benchmark_args(int argc, const char* const* argv) {
  SplitArgs split;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    (arg.rfind("--benchmark_", 0) == 0 ? split.gbench : split.own).push_back(std::move(arg));
  }
  return split;
}

void run_registered_benchmarks(const std::vector<std::string>& gbench_args, const char* argv0) {
  std::vector<std::string> storage{argv0};
  storage.insert(storage.end(), gbench_args.begin(), gbench_args.end());
  std::vector<char*> args;
  for (auto& s : storage) args.push_back(s.data());
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data()))
    throw Error("unrecognised --benchmark_ option (see --help for the accepted flags)");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}

void add_harness_options(CLI::App& app, TimingOptions& timing, std::string& json_path) {
  app.add_option("--warmup", timing.warmup, "Untimed launches before timing")->capture_default_str();
  app.add_option("--iters", timing.iterations, "Timed repetitions (samples)")->capture_default_str();
  app.add_option("-J,--json", json_path, "Write the measurement JSON to FILE");
}

int parse_harness_args(CLI::App& app, const SplitArgs& args, const TimingOptions& timing) {
  std::vector<std::string> own(args.own.rbegin(), args.own.rend());  // CLI11 parses a reversed vector
  try {
    app.parse(own);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (timing.iterations <= 0 || timing.warmup < 0) throw Error("--iters must be positive and --warmup non-negative");
  return -1;
}

bool device_or_explain(const char* program) {
  std::string why;
  if (cuda_device_available(&why)) return true;
  std::cerr << program << ": no usable CUDA device: " << why << '\n';
  return false;
}

int harness_main(const char* program, int argc, char** argv, int (*run)(int, char**)) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return 1;
  }
}

}  // namespace seqpar::bench

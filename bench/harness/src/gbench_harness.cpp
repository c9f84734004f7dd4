#include "seqpar/bench/gbench_harness.hpp"

#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <utility>

#include "seqpar/comm/environment.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/core/measurement.hpp"
#include "seqpar/core/stats.hpp"
#include "seqpar/core/usage_exit.hpp"

namespace seqpar::bench {

Recorder::Recorder(TimerFactory make_timer) : make_timer_(std::move(make_timer)) {
  if (!make_timer_) throw Error("Recorder: no timer factory given");
}

void Recorder::add(const std::string& name, Setup setup, Rates rates, const TimingOptions& timing) {
  // Google Benchmark aborts the process on a non-positive iteration count; say which benchmark instead.
  if (timing.iterations <= 0 || timing.warmup < 0)
    throw Error(fmt::format("{}: timed repetitions must be positive and warm-up launches non-negative "
                            "(got {} and {})", name, timing.iterations, timing.warmup));
  const std::size_t index = entries_.size();
  entries_.push_back(Entry{name, std::move(rates), {}, nlohmann::json::object(), {}});
  // The body finds its entry by index: entries_ may reallocate while later benchmarks are added.
  auto body = [this, index, setup = std::move(setup), timing](benchmark::State& state) {
    Entry& entry = entries_[index];
    try {
      Prepared prep = setup();
      const std::unique_ptr<Timer> timer = make_timer_();
      for (int w = 0; w < timing.warmup; ++w) prep.launch(w);
      timer->settle();
      std::vector<double> samples;
      int rep = 0;
      for (auto _ : state) {
        timer->start();
        prep.launch(rep++);
        const double s = timer->stop_seconds();
        state.SetIterationTime(s);
        samples.push_back(s);
      }
      entry.samples.insert(entry.samples.end(), samples.begin(), samples.end());
      entry.fields = prep.fields;
      // Held in a named object: a range-for over items() of the returned temporary would iterate
      // a destroyed object (C++20 extends only the lifetime of the outermost temporary).
      const nlohmann::json counters = entry.rates(summarize(samples).median);
      for (const auto& [key, value] : counters.items())
        if (value.is_number()) state.counters[key] = value.get<double>();
    } catch (const std::exception& e) {
      entry.error = e.what();
      state.SkipWithError(e.what());
    }
    count_finished(entry);
  };
  benchmark::RegisterBenchmark(name.c_str(), body)
      ->UseManualTime()
      ->Iterations(timing.iterations)
      ->Unit(benchmark::kMillisecond);
}

void Recorder::count_finished(Entry& entry) {
  if (entry.ran) return;  // a repetition (--benchmark_repetitions) of a benchmark counted already
  entry.ran = true;
  // Counted against every registered benchmark: a --benchmark_filter run ends before the total.
  if (!progress_) progress_ = std::make_unique<Progress>("benchmarks", static_cast<std::int64_t>(entries_.size()));
  progress_->update(++finished_);
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
    // A zero median (work below the timer's resolution) would make every rate infinite, which JSON
    // writes as null: say so instead of writing a number.
    if (!(median > 0)) {
      out.push_back({{"name", e.name},
                     {"error", fmt::format("median time {} s is not positive (below the timer's resolution?): "
                                           "no rate computed", median)}});
      continue;
    }
    nlohmann::json r = {{"name", e.name}, {"time_s", median}, {"samples_s", e.samples}};
    r.update(e.fields);
    r.update(e.rates(median));
    out.push_back(std::move(r));
  }
  return out;
}

void write_measurement(const std::string& path, int argc, const char* const* argv, const std::string& program,
                       Mode mode, const nlohmann::json& config, const nlohmann::json& results) {
  nlohmann::json doc = measurement_header(argc, argv, program, mode, /*on_gpu=*/true);
  doc["environment"] = comm::environment_info();
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

void run_registered_benchmarks(const std::vector<std::string>& gbench_args, const char* argv0,
                               benchmark::BenchmarkReporter* display) {
  // On every way out, bad flags included, the registry is emptied: its bodies point into their Recorder.
  struct ClearRegistry {
    ~ClearRegistry() { benchmark::ClearRegisteredBenchmarks(); }
  } clear_registry;
  std::vector<std::string> storage{argv0};
  storage.insert(storage.end(), gbench_args.begin(), gbench_args.end());
  std::vector<char*> args;
  for (auto& s : storage) args.push_back(s.data());
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data()))
    throw InputError("unrecognised --benchmark_ option (see --help for the accepted flags)");
  if (display)
    benchmark::RunSpecifiedBenchmarks(display);
  else
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
    return usage_exit(app, e);
  }
  if (timing.iterations <= 0 || timing.warmup < 0) throw Error("--iters must be positive and --warmup non-negative");
  return -1;
}

namespace {
// Set once the device is open: an Error raised before it is the input's (every check of the options
// comes first), after it a failure of the run.
bool device_reached = false;
}  // namespace

bool device_or_explain(const char* program) {
  std::string why;
  if (comm::cuda_device_available(&why)) return device_reached = true;
  std::cerr << program << ": no usable CUDA device: " << why << '\n';
  return false;
}

int harness_main(const char* program, int argc, char** argv, int (*run)(int, char**)) {
  // The README's rule: 2 for input that can never be valid, 1 for a run that failed.
  try {
    return run(argc, argv);
  } catch (const InputError& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return 2;
  } catch (const Error& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return device_reached ? 1 : 2;
  } catch (const std::exception& e) {
    std::cerr << program << ": " << e.what() << '\n';
    return 1;
  }
}

}  // namespace seqpar::bench

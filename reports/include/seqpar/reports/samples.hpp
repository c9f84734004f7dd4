// Per-benchmark timing samples read from seqpar measurement JSON (results[].samples_s) or Google
// Benchmark JSON (one entry per repetition), in seconds, for the regression gate.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace seqpar::reports {

struct BenchmarkSamples {
  std::string name;
  std::vector<double> samples_s;
};

struct SampleSet {
  std::string source;  // file name, for messages
  std::string format;  // "seqpar" or "google-benchmark"
  std::vector<BenchmarkSamples> benchmarks;  // in document order, names unique

  const BenchmarkSamples* find(std::string_view name) const;
};

// Which of Google Benchmark's times a sample is: the wall clock (real_time) or the benchmark
// thread's CPU time (cpu_time). On a machine shared with other work (a CI runner that also builds)
// the wall clock counts the time others took the core; the CPU time leaves it out.
enum class Clock { real, cpu };
const char* to_string(Clock c);  // "real", "cpu"

// seqpar: each result's samples_s (time_s alone when a result has no samples). Google Benchmark:
// entries with run_type "iteration" grouped by run_name (real_time, or cpu_time with Clock::cpu,
// scaled by time_unit); a benchmark reported only as aggregates contributes its median aggregate
// as a single sample; entries with error_occurred are left out. Collections (sweep.py) contribute
// every document. Throws seqpar::Error naming `where` and the field for malformed input, and for
// Clock::cpu on a document without CPU times (seqpar measurement JSON records wall-clock samples).
SampleSet read_samples(const nlohmann::json& doc, const std::string& where, Clock clock = Clock::real);

// A seqpar result's time_s is the median of its samples_s (every writer's rule: bench/harness,
// seqpar-train, the peer scripts): where it has both and they disagree, seqpar::Error naming
// `where` and the field, as for a sample that is not a number. Either absent: nothing to compare.
void check_time_is_median(const nlohmann::json& result, std::string_view where);

}  // namespace seqpar::reports

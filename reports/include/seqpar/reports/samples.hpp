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

// seqpar: each result's samples_s (time_s alone when a result has no samples). Google Benchmark:
// entries with run_type "iteration" grouped by run_name (real_time scaled by time_unit); a
// benchmark reported only as aggregates contributes its median aggregate as a single sample;
// entries with error_occurred are left out. Collections (sweep.py) contribute every document.
// Throws seqpar::Error naming `where` and the field for malformed input.
SampleSet read_samples(const nlohmann::json& doc, const std::string& where);

}  // namespace seqpar::reports

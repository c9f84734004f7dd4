// The CI performance gate: baseline against new timing samples, benchmark by benchmark, with a
// noise-aware decision (enough repetitions, Mann-Whitney U, a minimum effect size).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "seqpar/reports/samples.hpp"

namespace seqpar::reports {

struct GateOptions {
  double alpha = 0.05;        // significance level of the Mann-Whitney U test
  double min_effect = 0.05;   // smallest relative change of the median that counts (0.05 = 5%)
  // The change must also be at least this many times the run-to-run spread (robust relative
  // standard deviation, 1.4826 * MAD / median, of the noisier run): a shift buried in the noise
  // of a single run is not called, even when enough repetitions make it significant.
  double noise_factor = 1.5;
  int min_repetitions = 5;    // fewer samples on either side: not judged
  bool allow_missing = false; // a benchmark absent from the new run fails the gate unless set
};

enum class Verdict { same, faster, slower, too_few_repetitions, missing_in_new, new_benchmark };
const char* to_string(Verdict v);

struct GateRow {
  std::string name;
  Verdict verdict = Verdict::same;
  int base_count = 0, new_count = 0;
  double base_median_s = 0, new_median_s = 0;
  double change = 0;    // new median / baseline median - 1 (positive: slower)
  double p_value = 1;
  double noise = 0;     // relative spread of the noisier run
  bool exact_p = false;
};

struct GateResult {
  GateOptions options;
  std::vector<GateRow> rows;
  int count(Verdict v) const;
  // A regression, or (unless allow_missing) a benchmark missing from the new run.
  bool failed() const;
};

GateResult compare(const SampleSet& baseline, const SampleSet& current, const GateOptions& options);

// Human table: benchmark, baseline and new medians, change %, p-value, verdict; then a summary line.
std::string format_table(const GateResult& r);
nlohmann::json to_json(const GateResult& r);

}  // namespace seqpar::reports

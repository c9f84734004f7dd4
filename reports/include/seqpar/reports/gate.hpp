// The CI performance gate: baseline against new timing samples, benchmark by benchmark, with a
// noise-aware decision (Mann-Whitney U and a minimum effect size; the medians alone when the
// samples are too few for the test). It fails closed: nothing compared, or a benchmark on one
// side only, fails unless explicitly allowed.
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
  // standard deviation, 1.4826 * MAD / median, of the noisier run): a shift buried in the noise of
  // a single run is not called, even when enough repetitions make it significant.
  double noise_factor = 1.5;
  // Fewer samples on either side, or too few for the U test to reach p < alpha at all: the row is
  // judged by the median rule alone (see Rule), never waved through.
  int min_repetitions = 5;
  bool allow_missing = false; // a benchmark absent from the new run fails the gate unless set
  bool allow_new = false;     // a benchmark without a baseline fails the gate unless set
};

enum class Verdict { same, faster, slower, missing_in_new, new_benchmark };
const char* to_string(Verdict v);

// How a compared row was decided. The U test needs enough samples to be able to reject at alpha;
// below that (or below min_repetitions) a regression must still fail the gate, so the row falls
// back to the medians: slower when the new median exceeds the baseline's by more than
// max(min_effect, noise_factor x noise), with no significance claimed.
enum class Rule { none, mann_whitney, median };
const char* to_string(Rule r);

struct GateRow {
  std::string name;
  Verdict verdict = Verdict::same;
  Rule rule = Rule::none;  // none: not compared (missing on one side)
  std::string rule_note;   // why the median rule was used
  int base_count = 0, new_count = 0;
  double base_median_s = 0, new_median_s = 0;
  double change = 0;    // new median / baseline median - 1 (positive: slower)
  double p_value = 1;
  double min_p_value = 1;  // the smallest p-value the U test could give with these sample counts
  double noise = 0;     // relative spread of the noisier run
  bool exact_p = false;
};

struct GateResult {
  GateOptions options;
  std::vector<GateRow> rows;
  int count(Verdict v) const;
  int count(Rule r) const;
  int compared() const;  // rows present on both sides
  // Why the gate fails, one line each; empty when it passes: a regression, nothing compared at
  // all, a benchmark missing from the new run (unless allow_missing), a benchmark without a
  // baseline (unless allow_new).
  std::vector<std::string> failures() const;
  bool failed() const { return !failures().empty(); }
};

GateResult compare(const SampleSet& baseline, const SampleSet& current, const GateOptions& options);

// A shared VM's speed drifts by more than the regressions a gate must catch (2.3x over a day on
// CI's 2-vCPU machines). With a reference benchmark in both runs (fixed work that shares no code
// with what is measured), the new run is put on the baseline machine's clock: every new sample
// times the baseline's reference median over the new run's, and the reference itself is taken
// out of both sets. Throws seqpar::Error naming the file when either side lacks it or its median is
// not positive.
struct ReferenceScale {
  std::string name;
  double base_median_s = 0, new_median_s = 0;
  double factor = 1;  // base_median_s / new_median_s: applied to the new samples
};
ReferenceScale scale_to_reference(SampleSet& baseline, SampleSet& current, const std::string& reference);

// Human table: benchmark, baseline and new medians, change %, p-value, verdict; then a summary line.
std::string format_table(const GateResult& r);
nlohmann::json to_json(const GateResult& r);

}  // namespace seqpar::reports

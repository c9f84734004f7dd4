#include "seqpar/reports/gate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "seqpar/core/error.hpp"
#include "seqpar/core/stats.hpp"
#include "seqpar/reports/mann_whitney.hpp"

namespace seqpar::reports {

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::same: return "same";
    case Verdict::faster: return "faster";
    case Verdict::slower: return "SLOWER";
    case Verdict::missing_in_new: return "MISSING in new run";
    case Verdict::new_benchmark: return "NEW (no baseline)";
  }
  return "?";
}

const char* to_string(Rule r) {
  switch (r) {
    case Rule::none: return "none";
    case Rule::mann_whitney: return "mann_whitney";
    case Rule::median: return "median";
  }
  return "?";
}

int GateResult::count(Verdict v) const {
  return static_cast<int>(std::count_if(rows.begin(), rows.end(), [v](const GateRow& r) { return r.verdict == v; }));
}

int GateResult::count(Rule rule) const {
  return static_cast<int>(std::count_if(rows.begin(), rows.end(), [rule](const GateRow& r) { return r.rule == rule; }));
}

int GateResult::compared() const { return count(Rule::mann_whitney) + count(Rule::median); }

std::vector<std::string> GateResult::failures() const {
  std::vector<std::string> out;
  // An empty comparison proves nothing: a broken benchmark job that writes no results must not pass.
  if (compared() == 0) out.push_back("no benchmark was compared (none is present in both files)");
  if (int n = count(Verdict::slower)) out.push_back(fmt::format("{} benchmark(s) slower", n));
  if (int n = count(Verdict::missing_in_new); n && !options.allow_missing)
    out.push_back(fmt::format("{} baseline benchmark(s) missing from the new run (--allow-missing accepts this)", n));
  if (int n = count(Verdict::new_benchmark); n && !options.allow_new)
    out.push_back(fmt::format("{} benchmark(s) in the new run without a baseline (--allow-new accepts this)", n));
  return out;
}

namespace {

// 1.4826 * MAD / median: the relative standard deviation for normal data, robust to outliers.
double relative_spread(const std::vector<double>& v, double median) {
  if (v.size() < 2 || median <= 0) return 0;
  std::vector<double> dev;
  for (double x : v) dev.push_back(std::fabs(x - median));
  return 1.4826 * summarize(dev).median / median;
}

void validate(const GateOptions& o) {
  if (!(o.alpha > 0 && o.alpha < 1)) throw Error(fmt::format("--alpha {} must lie strictly between 0 and 1", o.alpha));
  // Each threshold's own fault named: a negative one is no threshold, NaN is no number, and an
  // infinite one would never fail the gate.
  auto threshold = [](const char* flag, double v, const char* what) {
    if (std::isnan(v)) throw Error(fmt::format("{} nan is not a number; give {}", flag, what));
    if (v < 0) throw Error(fmt::format("{} {:g} is negative; give {}", flag, v, what));
    if (std::isinf(v)) throw Error(fmt::format("{} inf would never fail the gate; give {}", flag, what));
    // Above this a run must be a thousand times slower to fail ("1e+308" printed as "inf%" before).
    constexpr double kMostThreshold = 1000;
    if (v > kMostThreshold)
      throw Error(fmt::format("{} {:g} is above {:g}: a gate that fails only a run {:g} times slower never fails; "
                              "give {}", flag, v, kMostThreshold, kMostThreshold, what));
  };
  threshold("--min-effect", o.min_effect, "a finite non-negative fraction (0.05 = 5%)");
  threshold("--noise-factor", o.noise_factor, "a finite non-negative factor");
  if (o.min_repetitions < 2) throw Error(fmt::format("--min-repetitions {} must be at least 2", o.min_repetitions));
}

}  // namespace

ReferenceScale scale_to_reference(SampleSet& baseline, SampleSet& current, const std::string& reference) {
  ReferenceScale r;
  r.name = reference;
  auto median_of = [&](SampleSet& set) {
    auto it = std::find_if(set.benchmarks.begin(), set.benchmarks.end(),
                           [&](const BenchmarkSamples& b) { return b.name == reference; });
    if (it == set.benchmarks.end())
      throw Error(fmt::format("{}: --reference: no benchmark named '{}' (the machine's reference must run on both sides)",
                              set.source, reference));
    const double m = it->samples_s.empty() ? 0.0 : summarize(it->samples_s).median;
    if (!(m > 0))
      throw Error(fmt::format("{}: --reference '{}': its median time {} is not positive", set.source, reference, m));
    set.benchmarks.erase(it);
    return m;
  };
  r.base_median_s = median_of(baseline);
  r.new_median_s = median_of(current);
  r.factor = r.base_median_s / r.new_median_s;
  for (BenchmarkSamples& b : current.benchmarks)
    for (double& x : b.samples_s) x *= r.factor;
  return r;
}

GateResult compare(const SampleSet& baseline, const SampleSet& current, const GateOptions& options) {
  validate(options);
  GateResult r;
  r.options = options;
  for (const auto& base : baseline.benchmarks) {
    GateRow row;
    row.name = base.name;
    row.base_count = static_cast<int>(base.samples_s.size());
    row.base_median_s = summarize(base.samples_s).median;
    const BenchmarkSamples* cur = current.find(base.name);
    if (!cur) {
      row.verdict = Verdict::missing_in_new;
      r.rows.push_back(row);
      continue;
    }
    row.new_count = static_cast<int>(cur->samples_s.size());
    row.new_median_s = summarize(cur->samples_s).median;
    row.change = row.new_median_s / row.base_median_s - 1.0;
    row.noise = std::max(relative_spread(base.samples_s, row.base_median_s),
                         relative_spread(cur->samples_s, row.new_median_s));
    const double threshold = std::max(options.min_effect, options.noise_factor * row.noise);
    row.min_p_value = min_attainable_p_value(row.base_count, row.new_count);
    if (row.base_count < options.min_repetitions || row.new_count < options.min_repetitions ||
        !(row.min_p_value < options.alpha)) {
      row.rule = Rule::median;
      row.rule_note = row.min_p_value < options.alpha
                          ? fmt::format("fewer than --min-repetitions {} samples", options.min_repetitions)
                          : fmt::format("the U test cannot reach p < {} with {}/{} samples (smallest p {:.3g})",
                                        options.alpha, row.base_count, row.new_count, row.min_p_value);
      row.verdict = row.change > threshold ? Verdict::slower : row.change < -threshold ? Verdict::faster : Verdict::same;
      r.rows.push_back(row);
      continue;
    }
    row.rule = Rule::mann_whitney;
    MannWhitney mw = mann_whitney_u(cur->samples_s, base.samples_s);
    row.p_value = mw.p_value;
    row.exact_p = mw.exact;
    bool significant = mw.p_value < options.alpha && std::fabs(row.change) >= threshold;
    row.verdict = !significant ? Verdict::same : (row.change > 0 ? Verdict::slower : Verdict::faster);
    r.rows.push_back(row);
  }
  for (const auto& cur : current.benchmarks) {
    if (baseline.find(cur.name)) continue;
    GateRow row;
    row.name = cur.name;
    row.verdict = Verdict::new_benchmark;
    row.new_count = static_cast<int>(cur.samples_s.size());
    row.new_median_s = summarize(cur.samples_s).median;
    r.rows.push_back(row);
  }
  return r;
}

namespace {

std::string format_time(double s) {
  if (s <= 0) return "-";
  if (s < 1e-6) return fmt::format("{:.1f} ns", s * 1e9);
  if (s < 1e-3) return fmt::format("{:.2f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.3f} s", s);
}

bool tested(const GateRow& row) { return row.rule == Rule::mann_whitney; }

std::string verdict_text(const GateRow& row) {
  std::string v = to_string(row.verdict);
  if (row.rule == Rule::median) v += fmt::format(" (median rule: {})", row.rule_note);
  return v;
}

}  // namespace

std::string format_table(const GateResult& r) {
  std::size_t w = 9;
  for (const auto& row : r.rows) w = std::max(w, row.name.size());
  std::string out = fmt::format("{:<{}}  {:>12}  {:>12}  {:>8}  {:>7}  {:>9}  {:>7}  {}\n", "benchmark", w,
                                "baseline", "new", "change", "noise", "p-value", "n", "verdict");
  for (const auto& row : r.rows) {
    bool both = row.base_count > 0 && row.new_count > 0;
    std::string change = both ? fmt::format("{:+.1f}%", row.change * 100) : "-";
    std::string noise = both ? fmt::format("{:.1f}%", row.noise * 100) : "-";
    std::string p = tested(row) ? fmt::format("{:.3g}", row.p_value) : "-";
    out += fmt::format("{:<{}}  {:>12}  {:>12}  {:>8}  {:>7}  {:>9}  {:>7}  {}\n", row.name, w,
                       format_time(row.base_median_s), format_time(row.new_median_s), change, noise, p,
                       fmt::format("{}/{}", row.base_count, row.new_count), verdict_text(row));
  }
  out += fmt::format(
      "\n{} compared: {} same, {} faster, {} slower; {} by the median rule (too few samples for the U test); "
      "{} missing in the new run; {} without a baseline.\nDecision rule: slower/faster when the Mann-Whitney U "
      "p-value < {} and |change| >= max({:.1f}%, {} x noise); with fewer than {} samples on a side, or too few "
      "for the test to reach p < {}, when |change| alone exceeds that threshold.\n",
      r.compared(), r.count(Verdict::same), r.count(Verdict::faster), r.count(Verdict::slower), r.count(Rule::median),
      r.count(Verdict::missing_in_new), r.count(Verdict::new_benchmark), r.options.alpha, r.options.min_effect * 100,
      r.options.noise_factor, r.options.min_repetitions, r.options.alpha);
  const auto failures = r.failures();
  for (const auto& f : failures) out += fmt::format("failure: {}\n", f);
  out += failures.empty() ? "gate passed\n" : "GATE FAILED\n";
  return out;
}

nlohmann::json to_json(const GateResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows) {
    nlohmann::json j = {{"name", row.name},
                        {"verdict", row.verdict == Verdict::slower ? "slower"
                                    : row.verdict == Verdict::missing_in_new ? "missing_in_new"
                                    : row.verdict == Verdict::new_benchmark ? "new_benchmark"
                                                                            : to_string(row.verdict)},
                        {"rule", to_string(row.rule)},
                        {"baseline_count", row.base_count},
                        {"new_count", row.new_count},
                        {"baseline_median_s", row.base_count ? nlohmann::json(row.base_median_s) : nlohmann::json()},
                        {"new_median_s", row.new_count ? nlohmann::json(row.new_median_s) : nlohmann::json()}};
    bool both = row.base_count > 0 && row.new_count > 0;
    j["change"] = both ? nlohmann::json(row.change) : nlohmann::json();
    j["noise"] = both ? nlohmann::json(row.noise) : nlohmann::json();
    j["p_value"] = tested(row) ? nlohmann::json(row.p_value) : nlohmann::json();
    j["p_value_exact"] = tested(row) ? nlohmann::json(row.exact_p) : nlohmann::json();
    j["min_p_value"] = both ? nlohmann::json(row.min_p_value) : nlohmann::json();
    if (row.rule == Rule::median) j["rule_note"] = row.rule_note;
    rows.push_back(j);
  }
  return {{"options",
           {{"alpha", r.options.alpha},
            {"min_effect", r.options.min_effect},
            {"noise_factor", r.options.noise_factor},
            {"min_repetitions", r.options.min_repetitions},
            {"allow_missing", r.options.allow_missing},
            {"allow_new", r.options.allow_new}}},
          {"passed", !r.failed()},
          {"failures", r.failures()},
          {"counts",
           {{"compared", r.compared()},
            {"same", r.count(Verdict::same)},
            {"faster", r.count(Verdict::faster)},
            {"slower", r.count(Verdict::slower)},
            {"median_rule", r.count(Rule::median)},
            {"missing_in_new", r.count(Verdict::missing_in_new)},
            {"new_benchmark", r.count(Verdict::new_benchmark)}}},
          {"benchmarks", rows}};
}

}  // namespace seqpar::reports

#include "seqpar/reports/samples.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "seqpar/core/error.hpp"
#include "seqpar/core/stats.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/reports/validation_verdict.hpp"

namespace seqpar::reports {

using nlohmann::json;

const char* to_string(Clock c) { return c == Clock::cpu ? "cpu" : "real"; }

const BenchmarkSamples* SampleSet::find(std::string_view name) const {
  for (const auto& b : benchmarks)
    if (b.name == name) return &b;
  return nullptr;
}

void check_time_is_median(const json& result, std::string_view where) {
  auto t = result.find("time_s"), s = result.find("samples_s");
  if (t == result.end() || !t->is_number() || s == result.end() || !s->is_array() || s->empty()) return;
  std::vector<double> samples;
  for (std::size_t k = 0; k < s->size(); ++k) {
    if (!(*s)[k].is_number()) throw Error(fmt::format("{}: samples_s[{}] must be a number of seconds", where, k));
    samples.push_back((*s)[k].get<double>());
  }
  const double median = summarize(std::move(samples)).median, time_s = t->get<double>();
  if (!figures_agree(time_s, median, 1e-9))
    throw Error(fmt::format("{}: field 'time_s' is {:g} s but the median of its {} samples_s is {:g} s: the time "
                            "contradicts its samples",
                            where, time_s, s->size(), median));
}

namespace {

void add_unique(SampleSet& set, BenchmarkSamples b, std::string_view where) {
  if (set.find(b.name))
    throw Error(fmt::format("{}: benchmark name '{}' appears twice; names must be unique", where, b.name));
  set.benchmarks.push_back(std::move(b));
}

void read_seqpar(const json& doc, const std::string& where, SampleSet& set) {
  const json& results = require_array(doc, "results", where);
  for (std::size_t i = 0; i < results.size(); ++i) {
    std::string w = fmt::format("{}: results[{}]", where, i);
    BenchmarkSamples b;
    b.name = require_string(results[i], "name", w);
    if (is_validation_result(results[i]))
      throw Error(fmt::format("{} ('{}'): a seqpar-train --validate result (field 'validation') records a verdict, not "
                              "a time; the gate compares timings (seqpar report shows verdicts)", w, b.name));
    if (results[i].contains("samples_s") && !results[i]["samples_s"].is_null()) {
      const json& s = require_array(results[i], "samples_s", w);
      for (std::size_t k = 0; k < s.size(); ++k) {
        if (!s[k].is_number())
          throw Error(fmt::format("{}: samples_s[{}] must be a number of seconds", w, k));
        b.samples_s.push_back(s[k].get<double>());
      }
    }
    // time_s, the samples' summary, is checked even beside them: a 0 there contradicts them.
    const std::optional<double> time_s = optional_number(results[i], "time_s", w);
    if (b.samples_s.empty()) b.samples_s.push_back(require_number(results[i], "time_s", w));
    if (time_s && !(*time_s > 0))
      throw Error(fmt::format("{} ('{}'): times must be positive seconds, got time_s {}", w, b.name, *time_s));
    for (double v : b.samples_s)
      if (!(v > 0)) throw Error(fmt::format("{} ('{}'): times must be positive seconds, got {}", w, b.name, v));
    check_time_is_median(results[i], w);
    add_unique(set, std::move(b), where);
  }
}

double unit_seconds(const std::string& unit, std::string_view where) {
  if (unit == "ns") return 1e-9;
  if (unit == "us") return 1e-6;
  if (unit == "ms") return 1e-3;
  if (unit == "s") return 1.0;
  throw Error(fmt::format("{}: unknown time_unit '{}' (expected ns, us, ms or s)", where, unit));
}

void read_google_benchmark(const json& doc, const std::string& where, Clock clock, SampleSet& set) {
  const char* field = clock == Clock::cpu ? "cpu_time" : "real_time";
  const json& entries = require_array(doc, "benchmarks", where);
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> iterations;
  std::map<std::string, double> medians;  // from aggregates, used when no repetition is present
  for (std::size_t i = 0; i < entries.size(); ++i) {
    std::string w = fmt::format("{}: benchmarks[{}]", where, i);
    const json& e = entries[i];
    if (!e.is_object()) throw Error(fmt::format("{}: each benchmark entry must be a JSON object", w));
    if (auto err = e.find("error_occurred"); err != e.end()) {
      if (!err->is_boolean()) throw Error(fmt::format("{}: field 'error_occurred' must be true or false", w));
      if (err->get<bool>()) continue;
    }
    std::string name = require_string(e, "name", w);
    std::string run_name = optional_string(e, "run_name", w).value_or(name);
    std::string run_type = optional_string(e, "run_type", w).value_or("iteration");
    double t = require_number(e, field, w) * unit_seconds(require_string(e, "time_unit", w), w);
    if (!(t > 0)) throw Error(fmt::format("{} ('{}'): {} must be positive", w, name, field));
    if (!iterations.count(run_name) && !medians.count(run_name)) order.push_back(run_name);
    if (run_type == "iteration") {
      iterations[run_name].push_back(t);
    } else if (run_type == "aggregate") {
      if (optional_string(e, "aggregate_name", w).value_or("") == "median") medians[run_name] = t;
    } else {
      throw Error(fmt::format("{}: unknown run_type '{}' (expected iteration or aggregate)", w, run_type));
    }
  }
  for (const auto& name : order) {
    BenchmarkSamples b{name, {}};
    if (auto it = iterations.find(name); it != iterations.end()) b.samples_s = it->second;
    else if (auto m = medians.find(name); m != medians.end()) b.samples_s = {m->second};
    else continue;  // only non-median aggregates: nothing comparable
    add_unique(set, std::move(b), where);
  }
}

void read_into(const json& doc, const std::string& where, Clock clock, SampleSet& set) {
  std::string kind = document_kind(doc, where);
  if (kind == "google-benchmark") {
    read_google_benchmark(doc, where, clock, set);
  } else if (kind == "measurement") {
    if (clock == Clock::cpu)
      throw Error(fmt::format("{}: --time cpu compares Google Benchmark's cpu_time; a seqpar measurement document "
                              "records wall-clock samples only (use --time real)", where));
    read_seqpar(doc, where, set);
  } else if (kind == "collection") {
    const json& docs = require_array(doc, "documents", where);
    for (std::size_t i = 0; i < docs.size(); ++i)
      read_into(docs[i], fmt::format("{}: documents[{}]", where, i), clock, set);
  } else {
    throw Error(fmt::format("{}: a {} document carries no measured samples; the gate compares "
                            "measurement JSON or Google Benchmark JSON", where, kind));
  }
}

}  // namespace

SampleSet read_samples(const json& doc, const std::string& where, Clock clock) {
  SampleSet set;
  set.source = where;
  set.format = document_kind(doc, where) == "google-benchmark" ? "google-benchmark" : "seqpar";
  read_into(doc, where, clock, set);
  return set;
}

}  // namespace seqpar::reports

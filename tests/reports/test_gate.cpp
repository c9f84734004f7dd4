#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "seqpar/core/stats.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/reports/gate.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/reports/samples.hpp"

using namespace seqpar::reports;
using nlohmann::json;

namespace {

// A seqpar measurement document with one result per (name, samples).
json measurement(const std::vector<std::pair<std::string, std::vector<double>>>& results) {
  json doc = {{"schema_version", 1}, {"kind", "measurement"}, {"program", "seqpar-bench-attention"},
              {"mode", "single-rank-proxy"}, {"device", "gpu"}, {"results", json::array()}};
  // time_s is the samples' median, as every writer puts it (the reader checks).
  for (const auto& [name, s] : results)
    doc["results"].push_back({{"name", name}, {"time_s", seqpar::summarize(s).median}, {"samples_s", s}});
  return doc;
}

std::vector<double> noisy(double mean, double rel_noise, int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(0.0, rel_noise);
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(mean * std::max(0.05, 1.0 + d(rng)));
  return v;
}

GateResult run(const json& base, const json& cur, GateOptions o = {}) {
  return compare(read_samples(base, "base.json"), read_samples(cur, "new.json"), o);
}

}  // namespace

TEST(Gate, IdenticalRunsPass) {
  auto s = noisy(1e-3, 0.01, 10, 1);
  GateResult r = run(measurement({{"a", s}, {"b", noisy(2e-3, 0.01, 10, 2)}}),
                     measurement({{"a", s}, {"b", noisy(2e-3, 0.01, 10, 2)}}));
  EXPECT_FALSE(r.failed());
  ASSERT_EQ(r.rows.size(), 2u);
  for (const auto& row : r.rows) {
    EXPECT_EQ(row.verdict, Verdict::same);
    EXPECT_NEAR(row.change, 0, 1e-12);
    EXPECT_GT(row.p_value, 0.9);
  }
}

TEST(Gate, TenPercentSlowerWithOnePercentNoiseFails) {
  GateResult r = run(measurement({{"attn", noisy(1e-3, 0.01, 10, 3)}}), measurement({{"attn", noisy(1.1e-3, 0.01, 10, 4)}}));
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].verdict, Verdict::slower);
  EXPECT_NEAR(r.rows[0].change, 0.10, 0.02);
  EXPECT_LT(r.rows[0].p_value, 0.001);
  EXPECT_TRUE(r.failed());
  EXPECT_NE(format_table(r).find("SLOWER"), std::string::npos);
  EXPECT_EQ(to_json(r)["passed"], false);
}

TEST(Gate, TenPercentFasterIsReportedButPasses) {
  GateResult r = run(measurement({{"attn", noisy(1e-3, 0.01, 10, 5)}}), measurement({{"attn", noisy(0.9e-3, 0.01, 10, 6)}}));
  EXPECT_EQ(r.rows[0].verdict, Verdict::faster);
  EXPECT_FALSE(r.failed());
}

TEST(Gate, TenPercentSlowerWithThirtyPercentNoiseIsNotARegression) {
  // Over many independent seeds, not one hand-picked. With 20 repetitions the rule calls such a
  // shift in about 1% of runs (docs/ci-gate.md), so 50 runs allow at most 2.
  int called = 0;
  for (unsigned seed = 0; seed < 50; ++seed) {
    GateResult r = run(measurement({{"attn", noisy(1e-3, 0.30, 20, 100 + 2 * seed)}}),
                       measurement({{"attn", noisy(1.1e-3, 0.30, 20, 101 + 2 * seed)}}));
    called += r.rows[0].verdict == Verdict::slower;
    if (seed == 0) {
      EXPECT_EQ(r.rows[0].verdict, Verdict::same);
    }
  }
  EXPECT_LE(called, 2) << "a 10% shift under 30% noise was called a regression in " << called << " of 50 runs";
}

TEST(Gate, SmallShiftBelowMinimumEffectIsSame) {
  // 2% slower with 0.1% noise is significant but below the 5% minimum effect.
  GateResult r = run(measurement({{"x", noisy(1e-3, 0.001, 10, 7)}}), measurement({{"x", noisy(1.02e-3, 0.001, 10, 8)}}));
  EXPECT_LT(r.rows[0].p_value, 0.01);
  EXPECT_EQ(r.rows[0].verdict, Verdict::same);
  GateOptions strict;
  strict.min_effect = 0.01;
  EXPECT_EQ(run(measurement({{"x", noisy(1e-3, 0.001, 10, 7)}}), measurement({{"x", noisy(1.02e-3, 0.001, 10, 8)}}), strict)
                .rows[0].verdict,
            Verdict::slower);
}

TEST(Gate, MissingBenchmarkIsReportedAndFails) {
  GateResult r = run(measurement({{"a", noisy(1e-3, 0.01, 10, 9)}, {"gone", noisy(1e-3, 0.01, 10, 10)}}),
                     measurement({{"a", noisy(1e-3, 0.01, 10, 11)}, {"added", noisy(1e-3, 0.01, 10, 12)}}));
  EXPECT_EQ(r.count(Verdict::missing_in_new), 1);
  EXPECT_EQ(r.count(Verdict::new_benchmark), 1);
  EXPECT_TRUE(r.failed());
  std::string table = format_table(r);
  EXPECT_NE(table.find("gone"), std::string::npos);
  EXPECT_NE(table.find("MISSING"), std::string::npos);
  GateOptions lenient;
  lenient.allow_missing = true;
  EXPECT_TRUE(run(measurement({{"a", noisy(1e-3, 0.01, 10, 9)}, {"gone", noisy(1e-3, 0.01, 10, 10)}}),
                  measurement({{"a", noisy(1e-3, 0.01, 10, 11)}, {"added", noisy(1e-3, 0.01, 10, 12)}}), lenient)
                  .failed())
      << "--allow-missing does not accept a benchmark without a baseline";
  lenient.allow_new = true;
  GateResult ok = run(measurement({{"a", noisy(1e-3, 0.01, 10, 9)}, {"gone", noisy(1e-3, 0.01, 10, 10)}}),
                      measurement({{"a", noisy(1e-3, 0.01, 10, 11)}, {"added", noisy(1e-3, 0.01, 10, 12)}}), lenient);
  EXPECT_FALSE(ok.failed()) << format_table(ok);
}

TEST(Gate, NewBenchmarkWithoutBaselineFailsUnlessAllowed) {
  auto s = noisy(1e-3, 0.01, 10, 13);
  GateResult r = run(measurement({{"a", s}}), measurement({{"a", s}, {"added", noisy(1e-3, 0.01, 10, 14)}}));
  EXPECT_EQ(r.count(Verdict::new_benchmark), 1);
  ASSERT_TRUE(r.failed());
  EXPECT_NE(r.failures()[0].find("without a baseline (--allow-new"), std::string::npos) << r.failures()[0];
  EXPECT_NE(format_table(r).find("NEW (no baseline)"), std::string::npos);
  GateOptions o;
  o.allow_new = true;
  EXPECT_FALSE(run(measurement({{"a", s}}), measurement({{"a", s}, {"added", noisy(1e-3, 0.01, 10, 14)}}), o).failed());
}

TEST(Gate, NothingComparedFails) {
  GateResult empty = run(measurement({}), measurement({}));
  EXPECT_EQ(empty.compared(), 0);
  ASSERT_TRUE(empty.failed());
  EXPECT_NE(empty.failures()[0].find("no benchmark was compared"), std::string::npos);
  EXPECT_NE(format_table(empty).find("GATE FAILED"), std::string::npos);
  EXPECT_EQ(to_json(empty)["passed"], false);
  // Allowing both kinds of one-sided benchmark does not make a comparison of nothing pass.
  GateOptions lenient;
  lenient.allow_missing = lenient.allow_new = true;
  GateResult disjoint = run(measurement({{"old", noisy(1e-3, 0.01, 10, 15)}}),
                            measurement({{"renamed", noisy(1e-3, 0.01, 10, 16)}}), lenient);
  EXPECT_TRUE(disjoint.failed());
  EXPECT_EQ(disjoint.failures().size(), 1u);
}

TEST(Gate, TooFewSamplesForTheTestFallBackToTheMedians) {
  // 3 against 3: the exact U test's smallest two-sided p-value is 2 / C(6, 3) = 0.1, so it could
  // never reject at 0.05; a 10x slowdown must still fail, by the median rule, and say so.
  GateResult r = run(measurement({{"a", {1e-3, 1.01e-3, 0.99e-3}}}), measurement({{"a", {10e-3, 10.1e-3, 9.9e-3}}}));
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].verdict, Verdict::slower);
  EXPECT_EQ(r.rows[0].rule, Rule::median);
  EXPECT_NEAR(r.rows[0].min_p_value, 0.1, 1e-12);
  EXPECT_NE(r.rows[0].rule_note.find("cannot reach p < 0.05 with 3/3 samples"), std::string::npos) << r.rows[0].rule_note;
  EXPECT_TRUE(r.failed());
  std::string table = format_table(r);
  EXPECT_NE(table.find("SLOWER (median rule:"), std::string::npos) << table;
  EXPECT_EQ(to_json(r)["benchmarks"][0]["rule"], "median");
  // A change inside the threshold is "same" under the median rule too.
  GateResult same = run(measurement({{"a", {1e-3, 1.01e-3, 0.99e-3}}}), measurement({{"a", {1.02e-3, 1.01e-3, 1.03e-3}}}));
  EXPECT_EQ(same.rows[0].verdict, Verdict::same);
  EXPECT_FALSE(same.failed());
  // One sample a side (time_s only) is judged the same way.
  EXPECT_TRUE(run(measurement({{"a", {1e-3}}}), measurement({{"a", {2e-3}}})).failed());
}

TEST(Gate, FewerThanMinRepetitionsUsesTheMedianRuleEvenWhenTheTestCouldDecide) {
  // 4 against 4 can reach p = 2/70 < 0.05, but --min-repetitions 5 asks for more before trusting it.
  GateResult r = run(measurement({{"a", {1e-3, 1.01e-3, 0.99e-3, 1e-3}}}), measurement({{"a", {2e-3, 2.01e-3, 1.99e-3, 2e-3}}}));
  EXPECT_EQ(r.rows[0].rule, Rule::median);
  EXPECT_EQ(r.rows[0].verdict, Verdict::slower);
  EXPECT_NE(r.rows[0].rule_note.find("fewer than --min-repetitions 5"), std::string::npos) << r.rows[0].rule_note;
  GateOptions o;
  o.min_repetitions = 4;
  GateResult tested = run(measurement({{"a", {1e-3, 1.01e-3, 0.99e-3, 1.02e-3}}}),
                          measurement({{"a", {2e-3, 2.01e-3, 1.99e-3, 2.02e-3}}}), o);
  EXPECT_EQ(tested.rows[0].rule, Rule::mann_whitney);
  EXPECT_EQ(tested.rows[0].verdict, Verdict::slower);
  EXPECT_NEAR(tested.rows[0].p_value, 2.0 / 70, 1e-12);
}

TEST(Gate, ReadsGoogleBenchmarkRepetitions) {
  json gb = {{"context", {{"date", "2024-01-01"}, {"library_version", "1.7.1"}}}, {"benchmarks", json::array()}};
  for (int i = 0; i < 6; ++i)
    gb["benchmarks"].push_back({{"name", "BM_attn/4096/repeats:6"}, {"run_name", "BM_attn/4096"}, {"run_type", "iteration"},
                                {"repetition_index", i}, {"real_time", 100.0 + i}, {"time_unit", "us"}});
  gb["benchmarks"].push_back({{"name", "BM_attn/4096_median"}, {"run_name", "BM_attn/4096"}, {"run_type", "aggregate"},
                              {"aggregate_name", "median"}, {"real_time", 102.5}, {"time_unit", "us"}});
  gb["benchmarks"].push_back({{"name", "BM_only_agg_median"}, {"run_name", "BM_only_agg"}, {"run_type", "aggregate"},
                              {"aggregate_name", "median"}, {"real_time", 3.0}, {"time_unit", "ms"}});
  SampleSet s = read_samples(gb, "gb.json");
  EXPECT_EQ(s.format, "google-benchmark");
  ASSERT_EQ(s.benchmarks.size(), 2u);
  EXPECT_EQ(s.benchmarks[0].name, "BM_attn/4096");
  ASSERT_EQ(s.benchmarks[0].samples_s.size(), 6u);
  EXPECT_DOUBLE_EQ(s.benchmarks[0].samples_s[0], 100e-6);
  EXPECT_EQ(s.benchmarks[1].samples_s, std::vector<double>{3e-3});
}

// --time cpu: the same entries' cpu_time, which a shared machine's other work leaves alone; a
// seqpar measurement document has no CPU time and is refused rather than read as wall clock.
TEST(Gate, ReadsGoogleBenchmarkCpuTimeWhenAsked) {
  json gb = {{"context", {{"library_version", "1.7.1"}}}, {"benchmarks", json::array()}};
  for (int i = 0; i < 5; ++i)
    gb["benchmarks"].push_back({{"name", "BM_sim"}, {"run_name", "BM_sim"}, {"run_type", "iteration"},
                                {"real_time", 30.0 + i}, {"cpu_time", 10.0 + i}, {"time_unit", "ms"}});
  EXPECT_DOUBLE_EQ(read_samples(gb, "gb.json").benchmarks[0].samples_s[0], 30e-3);
  const SampleSet cpu = read_samples(gb, "gb.json", Clock::cpu);
  ASSERT_EQ(cpu.benchmarks[0].samples_s.size(), 5u);
  EXPECT_DOUBLE_EQ(cpu.benchmarks[0].samples_s[4], 14e-3);
  json no_cpu = gb;
  no_cpu["benchmarks"][2].erase("cpu_time");
  EXPECT_THROW(read_samples(no_cpu, "gb.json", Clock::cpu), seqpar::Error);
  try {
    read_samples(measurement({{"a", {1e-3}}}), "m.json", Clock::cpu);
    FAIL() << "expected an error";
  } catch (const seqpar::Error& e) {
    EXPECT_NE(std::string(e.what()).find("m.json: --time cpu"), std::string::npos) << e.what();
  }
}

TEST(Gate, BadInputNamesFileAndField) {
  json bad = measurement({{"a", {1e-3}}});
  bad["results"][0].erase("name");
  try {
    read_samples(bad, "new.json");
    FAIL() << "expected an error";
  } catch (const seqpar::Error& e) {
    EXPECT_NE(std::string(e.what()).find("new.json: results[0]: missing field 'name'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_samples(json{{"kind", "weird"}}, "x.json"), seqpar::Error);
  EXPECT_THROW(read_samples(json::array(), "x.json"), seqpar::Error);
  // time_s beside samples is their median (here 2 ms of 1, 2 and 3 ms); 1 ms contradicts them.
  json off = measurement({{"a", {1e-3, 2e-3, 3e-3}}});
  EXPECT_NO_THROW(read_samples(off, "new.json"));
  off["results"][0]["time_s"] = 1e-3;
  try {
    read_samples(off, "new.json");
    ADD_FAILURE() << "expected an error";
  } catch (const seqpar::Error& e) {
    EXPECT_NE(std::string(e.what()).find("new.json: results[0]: field 'time_s' is 0.001 s but the median of its 3 "
                                         "samples_s is 0.002 s"),
              std::string::npos)
        << e.what();
  }
  json dup = measurement({{"a", {1e-3}}, {"a", {1e-3}}});
  EXPECT_THROW(read_samples(dup, "dup.json"), seqpar::Error);
  GateOptions o;
  o.alpha = 2;
  EXPECT_THROW(run(measurement({{"a", {1e-3}}}), measurement({{"a", {1e-3}}}), o), seqpar::Error);
  // Each threshold's fault in its own words (NaN and -1 were answered about infinity).
  const std::pair<double, const char*> thresholds[] = {{std::nan(""), "--min-effect nan is not a number"},
                                                       {-1, "--min-effect -1 is negative"},
                                                       {HUGE_VAL, "--min-effect inf would never fail the gate"}};
  for (const auto& [v, message] : thresholds) {
    GateOptions t;
    t.min_effect = v;
    try {
      run(measurement({{"a", {1e-3}}}), measurement({{"a", {1e-3}}}), t);
      ADD_FAILURE() << message;
    } catch (const seqpar::Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

// The committed H100 baseline (reports/baselines/dgx-h100/, links into reports/results/h100/): each
// file gates against itself (every benchmark the same) and catches a copy whose every sample is 10%
// slower (caught wherever the benchmark's own noise allows), so `seqpar gate` reads the baseline as CI will.
TEST(Gate, TheCommittedH100BaselinePassesItselfAndCatchesASlowerCopy) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(SEQPAR_SOURCE_DIR) / "reports/baselines/dgx-h100";
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    ++files;
    const std::string name = e.path().filename().string();
    const json doc = seqpar::reports::load_json_file(e.path().string());
    EXPECT_EQ(doc.value("environment", json::object())["gpu"].value("name", ""), "NVIDIA H100 80GB HBM3") << name;
    const GateResult same = run(doc, doc);
    EXPECT_FALSE(same.failed()) << name;
    ASSERT_FALSE(same.rows.empty()) << name;
    for (const auto& c : same.rows) EXPECT_EQ(c.verdict, Verdict::same) << name << " " << c.name;
    json slower = doc;
    for (auto& r : slower["results"]) {
      r["time_s"] = r["time_s"].get<double>() * 1.10;
      for (auto& s : r["samples_s"]) s = s.get<double>() * 1.10;
    }
    const GateResult worse = run(doc, slower);
    EXPECT_TRUE(worse.failed()) << name;
    // Every benchmark is called slower, except where its own run-to-run noise is large enough that
    // the rule (|change| >= 1.5 x noise) cannot call 10% (short kernels of the attention file).
    EXPECT_GT(worse.count(Verdict::slower), 0) << name;
    for (const auto& c : worse.rows)
      if (c.verdict != Verdict::slower) {
        EXPECT_GT(1.5 * c.noise, 0.10) << name << " " << c.name;
      }
  }
  EXPECT_EQ(files, 4);
}

// A machine that runs everything 2.3x slower today (the reference too) is not a regression once
// the new run is put on the baseline's clock; one benchmark 3x slower on the same machine still is.
TEST(Gate, TheMachineReferencePutsTheNewRunOnTheBaselinesClock) {
  const auto base = measurement({{"ref", noisy(8e-3, 0.01, 20, 5)}, {"sim", noisy(86e-3, 0.01, 20, 6)},
                                 {"advise", noisy(22e-3, 0.01, 20, 7)}});
  const auto slow_machine = measurement({{"ref", noisy(2.3 * 8e-3, 0.01, 20, 8)}, {"sim", noisy(2.3 * 86e-3, 0.01, 20, 9)},
                                         {"advise", noisy(2.3 * 22e-3, 0.01, 20, 10)}});
  GateOptions o;
  o.min_effect = 1.0;
  EXPECT_TRUE(run(base, slow_machine, o).failed());  // without the reference: a 2.3x "regression"
  SampleSet b = read_samples(base, "base.json"), c = read_samples(slow_machine, "new.json");
  const ReferenceScale scale = scale_to_reference(b, c, "ref");
  EXPECT_NEAR(scale.factor, 1 / 2.3, 0.02);
  EXPECT_EQ(b.find("ref"), nullptr);  // not compared itself
  EXPECT_EQ(c.find("ref"), nullptr);
  GateResult r = compare(b, c, o);
  EXPECT_FALSE(r.failed()) << format_table(r);
  ASSERT_EQ(r.rows.size(), 2u);
  for (const GateRow& row : r.rows) EXPECT_NEAR(row.change, 0, 0.03) << row.name;
  // The same slow machine, and the simulator 3x slower on top: caught.
  SampleSet b2 = read_samples(base, "base.json");
  SampleSet c2 = read_samples(measurement({{"ref", noisy(2.3 * 8e-3, 0.01, 20, 8)}, {"sim", noisy(3 * 2.3 * 86e-3, 0.01, 20, 9)},
                                           {"advise", noisy(2.3 * 22e-3, 0.01, 20, 10)}}),
                              "new.json");
  (void)scale_to_reference(b2, c2, "ref");
  GateResult slower = compare(b2, c2, o);
  EXPECT_TRUE(slower.failed());
  EXPECT_EQ(slower.rows[0].verdict, Verdict::slower);
  EXPECT_NEAR(slower.rows[0].change, 2.0, 0.1);
  // A reference missing on one side is refused, naming the file.
  SampleSet b3 = read_samples(base, "base.json"), c3 = read_samples(measurement({{"sim", noisy(86e-3, 0.01, 20, 9)}}), "new.json");
  try {
    (void)scale_to_reference(b3, c3, "ref");
    ADD_FAILURE() << "a missing reference was accepted";
  } catch (const seqpar::Error& e) {
    EXPECT_NE(std::string(e.what()).find("new.json: --reference: no benchmark named 'ref'"), std::string::npos) << e.what();
  }
}

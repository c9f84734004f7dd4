// `seqpar gate BASELINE.json NEW.json`: the CI performance gate; exits non-zero on a regression.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <optional>

#include "seqpar/core/json_io.hpp"
#include "seqpar/reports/gate.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/reports/samples.hpp"

namespace seqpar::cli {

namespace {

struct GateArgs {
  std::string baseline, current;
  seqpar::reports::GateOptions options;
  std::string time = "real";  // --time: Google Benchmark's real_time or cpu_time
  std::string reference;      // --reference: the machine's speed benchmark, in both files
  bool json = false;
};

}  // namespace

void add_gate_command(CLI::App& app) {
  auto args = std::make_shared<GateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "gate", "Compare new against baseline benchmark timings (seqpar measurement JSON or Google Benchmark JSON); "
              "exit 1 on a regression, when nothing is compared, or when a benchmark is on one side only");
  cmd->add_option("baseline", args->baseline, "baseline JSON (for example reports/baselines/<system>/<program>.json)")->required();
  cmd->add_option("new", args->current, "new JSON from the same benchmarks")->required();
  cmd->add_option("--alpha", args->options.alpha, "significance level of the Mann-Whitney U test")->capture_default_str();
  cmd->add_option("--min-effect", args->options.min_effect, "smallest relative change of the median that counts (0.05 = 5%)")
      ->capture_default_str();
  cmd->add_option("--noise-factor", args->options.noise_factor,
                  "the change must also be at least this many times the run-to-run spread of the noisier run")
      ->capture_default_str();
  cmd->add_option("--min-repetitions", args->options.min_repetitions,
                  "samples needed on each side for the U test; with fewer, the medians alone decide")
      ->capture_default_str();
  cmd->add_flag("--allow-missing", args->options.allow_missing, "do not fail when a baseline benchmark is missing from the new run");
  cmd->add_flag("--allow-new", args->options.allow_new, "do not fail when the new run has a benchmark without a baseline");
  cmd->add_option("--time", args->time,
                  "Google Benchmark's time to compare: real (wall clock) or cpu (the benchmark thread's CPU time, which "
                  "other work on a shared machine leaves alone)")
      ->check(CLI::IsMember({"real", "cpu"}))
      ->capture_default_str();
  cmd->add_option("--reference", args->reference,
                  "a benchmark in both files that measures the machine, not the code (seqpar-bench-sim's "
                  "BM_MachineReference): the new times are put on the baseline machine's clock by the ratio of its "
                  "medians, and it is not compared itself");
  cmd->add_flag("--json", args->json, "print the comparison as JSON");
  cmd->callback([args] {
    using namespace seqpar::reports;
    const Clock clock = args->time == "cpu" ? Clock::cpu : Clock::real;
    SampleSet base = read_samples(load_json_file(args->baseline), args->baseline, clock);
    SampleSet cur = read_samples(load_json_file(args->current), args->current, clock);
    std::optional<ReferenceScale> scale;
    if (!args->reference.empty()) scale = scale_to_reference(base, cur, args->reference);
    GateResult r = compare(base, cur, args->options);
    if (args->json) {
      nlohmann::json out = run_info_of_this_process();
      out["kind"] = "gate";
      out["baseline"] = args->baseline;
      out["new"] = args->current;
      out["time"] = args->time;
      if (scale)
        out["reference"] = {{"name", scale->name}, {"baseline_median_s", scale->base_median_s},
                            {"new_median_s", scale->new_median_s}, {"factor", scale->factor}};
      nlohmann::json result = to_json(r);
      for (auto& [k, v] : result.items()) out[k] = v;
      std::cout << dump_json(out) << "\n";
    } else {
      std::cout << fmt::format("baseline: {} ({})\nnew:      {} ({})\n", args->baseline, base.format, args->current, cur.format)
                << (base.format == "google-benchmark" ? fmt::format("time:     {}\n", args->time) : "")
                << (scale ? fmt::format("machine:  {} took {:.4g} ms here, {:.4g} ms in the baseline: the new times "
                                        "below are x {:.3f}, on the baseline machine's clock\n",
                                        scale->name, 1e3 * scale->new_median_s, 1e3 * scale->base_median_s,
                                        scale->factor)
                          : "")
                << "\n"
                << format_table(r);
    }
    if (r.failed()) throw CLI::RuntimeError(1);  // CLI11's App::exit returns the code without printing
  });
}

}  // namespace seqpar::cli

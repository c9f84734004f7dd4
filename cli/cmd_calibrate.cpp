// `seqpar calibrate FILE.json... --out PROFILE.json`: fits a hardware profile (system preset with
// the GPU inline) from benchmark measurements, for `seqpar simulate --system PROFILE.json`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>

#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/reports/calibrate.hpp"
#include "seqpar/reports/json_input.hpp"

namespace seqpar::cli {

namespace {

struct CalibrateArgs {
  std::vector<std::string> files;
  std::string out;
  seqpar::reports::CalibrateOptions options;
  bool json = false;
};

// Each fitted row beside the profile's prediction (the simulator's own cost functions), so a
// reader sees how well the profile represents the measurements, row by row.
void print_rows(const seqpar::reports::CalibrationResult& r) {
  if (r.rows.empty()) return;
  std::size_t w = 4;
  for (const auto& row : r.rows) w = std::max(w, row["name"].get<std::string>().size());
  std::cout << fmt::format("rows (measured against the profile's prediction):\n  {:<{}}  {:>9}  {:>13}  {:>14}  {:>8}\n",
                           "name", w, "tokens", "measured TF/s", "predicted TF/s", "residual");
  for (const auto& row : r.rows)
    std::cout << fmt::format("  {:<{}}  {:>9.0f}  {:>13.1f}  {:>14.1f}  {:>+7.2f}%\n", row["name"].get<std::string>(), w,
                             row["tokens"].get<double>(), row["measured_tflops"].get<double>(),
                             row["predicted_tflops"].get<double>(), row["residual"].get<double>() * 100);
  std::cout << fmt::format("  largest |residual|: {:.2f}%\n", r.max_abs_residual * 100);
}

// Each training step beside the profile's prediction and the leave-one-out prediction (the terms
// fitted without that step): the second is how far the profile can be trusted on unseen steps.
void print_steps(const seqpar::reports::CalibrationResult& r) {
  if (r.steps.empty()) return;
  auto pct = [](const nlohmann::json& v) { return v.is_null() ? std::string("-") : fmt::format("{:+.2f}%", v.get<double>() * 100); };
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  std::size_t w = 4;
  for (const auto& row : r.steps) w = std::max(w, row["name"].get<std::string>().size());
  std::cout << fmt::format("steps (measured, fitted prediction, leave-one-out error):\n  {:<{}}  {:>9}  {:>10}  {:>10}  {:>9}  "
                           "{:>10}  {:>10}  {:>9}\n", "name", w, "seq_len", "time s", "predicted", "LOO err",
                           "peak GiB", "predicted", "LOO err");
  for (const auto& row : r.steps)
    std::cout << fmt::format("  {:<{}}  {:>9}  {:>10.4f}  {:>10.4f}  {:>9}  {:>10.2f}  {:>10.2f}  {:>9}\n",
                             row["name"].get<std::string>(), w, row["seq_len"].get<std::int64_t>(),
                             row["measured_step_time_s"].get<double>(), row["predicted_step_time_s"].get<double>(),
                             pct(row["loo_time_error"]), row["measured_peak_memory_bytes"].get<double>() / kGiB,
                             row["predicted_peak_memory_bytes"].get<double>() / kGiB, pct(row["loo_memory_error"]));
  if (r.steps.size() >= 2)
    std::cout << fmt::format("  largest leave-one-out error: time {:.2f}%, peak memory {:.2f}%\n",
                             r.max_abs_loo_time_error * 100, r.max_abs_loo_memory_error * 100);
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Fit a hardware profile from measurement JSON: link bandwidth and latency (seqpar-bench-comm, real ranks), "
      "attention and GEMM efficiency curves against shape (seqpar-bench-attention: one curve per direction, head dim "
      "and mask; seqpar-bench-gemm: rows with op gemm, m, n, k), and framework terms from measured training steps "
      "(seqpar-train's JSON or the README's minimal step format: memory-bound efficiency, per-step overhead, memory "
      "reserve and per-token memory, with each step's leave-one-out error). Writes a system preset usable as --system "
      "PROFILE.json and prints each fitted row beside the profile's prediction; figures it cannot fit come from "
      "--base-system");
  cmd->add_option("files", args->files, "measurement JSON files (or sweep collections)")->required();
  cmd->add_option("--out", args->out, "profile JSON to write")->required();
  cmd->add_option("--base-system", args->options.base_system,
                  "system preset (name or JSON path) for the figures not fitted; default: from the measured GPU name");
  cmd->add_option("--name", args->options.name, "name of the profile (default: <base>-calibrated)");
  cmd->add_option("--comm-level", args->options.comm_level,
                  "link level of the collective measurements: intra, inter, or auto (from the rank layout's node count)")
      ->capture_default_str();
  cmd->add_option("--attention-engine", args->options.attention_engine,
                  "attention engine whose seqpar-bench-attention rows are fitted, seqpar or cudnn (engines are never "
                  "mixed; default: cudnn when measured, else seqpar)");
  cmd->add_option("--framework", args->options.framework,
                  "framework profile the measured training steps ran with (a preset such as hf-transformers or "
                  "seqpar-train, or a path): its memory inventory is what the framework terms are fitted over, and "
                  "the profile records it (default: the base system's, else deepspeed-alst)");
  cmd->add_flag("--json", args->json,
                "print the profile as JSON instead of a summary (calibration.rows: each fitted row, measured against predicted)");
  cmd->callback([args] {
    using namespace seqpar::reports;
    std::vector<InputDocument> inputs;
    for (const auto& f : args->files) inputs.push_back({f, load_json_file(f)});
    CalibrationResult r = calibrate(inputs, args->options, sim_preset_lookup());
    std::ofstream out(args->out);
    if (!out) throw seqpar::Error(fmt::format("--out {}: cannot open for writing", args->out));
    out << dump_json(r.profile) << "\n";
    if (!out) throw seqpar::Error(fmt::format("--out {}: write failed", args->out));
    if (args->json) {
      std::cout << dump_json(r.profile) << "\n";
      return;
    }
    std::cout << fmt::format("profile '{}' (base {}) written to {}\nfitted:\n", r.profile["name"].get<std::string>(),
                             r.profile["calibration"]["base_system"].get<std::string>(), args->out);
    for (const auto& line : r.fitted) std::cout << "  " << line << "\n";
    print_rows(r);
    print_steps(r);
    if (!r.notes.empty()) std::cout << "notes:\n";
    for (const auto& line : r.notes) std::cout << "  " << line << "\n";
  });
}

}  // namespace seqpar::cli

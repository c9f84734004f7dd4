// `seqpar calibrate`: fits a hardware profile from measurement JSON and writes it as a system
// preset (GPU inline) that `seqpar simulate --system profile.json` loads. Fitted figures carry a
// source naming the files, the point count and the residual; the rest keep the base preset's.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace seqpar::reports {

// Returns the preset document of `kind` ("system" or "gpu") named `name_or_path`, or throws
// seqpar::Error. The CLI passes sim_preset_lookup(); tests may read the files directly.
using PresetLookup = std::function<nlohmann::json(const std::string& kind, const std::string& name_or_path)>;

struct CalibrateOptions {
  // A constructor, so callers that list the first figures in braces ({base, name, level}) need not
  // name the later ones.
  CalibrateOptions(std::string base = {}, std::string profile_name = {}, std::string level = "auto",
                   std::string engine = {})
      : base_system(std::move(base)), name(std::move(profile_name)), comm_level(std::move(level)),
        attention_engine(std::move(engine)) {}
  std::string base_system;        // empty: derived from the measured GPU name
  std::string name;               // profile name; empty: "<base>-calibrated"
  std::string comm_level = "auto";  // intra | inter | auto (from the document's rank layout)
  // The attention engine whose rows are fitted (seqpar | cudnn): one engine per profile, never mixed.
  // Empty: cudnn when its rows are present, else seqpar.
  std::string attention_engine;
  // The framework profile (sim/presets/frameworks/, or a path) the measured training steps ran
  // with: the inventory their framework terms are fitted over. Empty: the base system's, else the
  // default (sim/framework.hpp).
  std::string framework;
};

struct InputDocument {
  std::string file;
  nlohmann::json doc;
};

// A fitted row the profile misses by more than this is named in the notes.
inline constexpr double kRowTolerance = 0.05;

struct CalibrationResult {
  nlohmann::json profile;           // the system preset document
  std::vector<std::string> fitted;  // human lines, one per fitted figure group
  std::vector<std::string> notes;   // what was skipped and why, what was assumed
  // One object per fitted kernel row: file, name, series, tokens, measured_/predicted_time_s,
  // measured_/predicted_tflops and residual (predicted / measured rate - 1), the prediction made by
  // the simulator's own cost functions on the profile as `--system` loads it. Also written to the
  // profile's calibration.rows.
  nlohmann::json rows = nlohmann::json::array();
  double max_abs_residual = 0;
  // One object per measured training step fitted (step_fit.hpp: step_rows): measured, predicted
  // and leave-one-out figures. Also written to the profile's calibration.steps.
  nlohmann::json steps = nlohmann::json::array();
  double max_abs_loo_time_error = 0, max_abs_loo_memory_error = 0;  // 0 with fewer than two steps
};

CalibrationResult calibrate(const std::vector<InputDocument>& inputs, const CalibrateOptions& options,
                            const PresetLookup& lookup);

// The lookup over seqpar's built-in presets (and JSON paths): seqpar::sim::builtin_presets().
PresetLookup sim_preset_lookup();

}  // namespace seqpar::reports

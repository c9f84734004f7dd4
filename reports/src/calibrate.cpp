#include "seqpar/reports/calibrate.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/attention_kernels.hpp"
#include "seqpar/sim/compute_cost.hpp"
#include "seqpar/sim/efficiency_curves.hpp"
#include "seqpar/sim/framework_terms.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>
#include <tuple>
#include <map>
#include <set>

#include "seqpar/core/collective.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/measurement.hpp"
#include "seqpar/reports/fit.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/reports/step_fit.hpp"
#include "seqpar/reports/step_input.hpp"

namespace seqpar::reports {

using nlohmann::json;

namespace {

// The collective a row's "op" names, or nothing for a kernel row (names are core's).
std::optional<Collective> comm_op(std::string_view op) {
  for (Collective c : all_collectives)
    if (to_string(c) == op) return c;
  return std::nullopt;
}

// The bus factor takes a rank count: a fraction, or a count beyond int, is a malformed row.
int whole_ranks(double ranks, const std::string& where) {
  if (ranks != std::floor(ranks) || ranks > double(std::numeric_limits<int>::max()))
    throw Error(fmt::format("{}: field 'ranks' must be a whole number of ranks, got {}", where, ranks));
  return static_cast<int>(ranks);
}

struct CommPoint { std::string op; double ranks, bus_bytes, time_s; };
// One attention or GEMM row. The rate is the row's own (tflops, or flops / time_s); time_s is
// flops / rate so that the two always agree.
struct KernelPoint {
  std::string file, name, op;  // op: fwd, bwd or gemm
  int head_dim = 0;            // attention; 0 when the row does not say
  std::optional<bool> causal;  // attention; empty when the row does not say
  double tokens = 0, flops = 0, time_s = 0, flops_per_s = 0;
  std::string engine;          // attention: the row's "attention_engine" (seqpar when not given); empty for GEMM
  // attention: the workspace the engine asked for the call (seqpar-bench-attention's
  // "workspace_bytes"), and the shape that sizes it; empty when the row does not say.
  std::optional<double> workspace_bytes;
  double rows = 0;  // batch x heads x query length: the call's query rows over all heads
  bool fp8 = false;  // GEMM: an FP8 row (E4M3 operands), fitted to the FP8 curve
};

struct Collected {
  std::map<std::string, std::vector<CommPoint>> comm;  // "intra" / "inter"
  std::map<std::string, std::set<std::string>> comm_files;
  std::vector<KernelPoint> attention, gemm, gemm_fp8;  // gemm_fp8: E4M3 rows with per-tensor scales
  std::set<std::string> attention_files, gemm_files;
  std::optional<std::string> gpu_name;
  // Measured GPU (gpu_key) -> files: one GPU per profile; and each GPU's name as first written.
  std::map<std::string, std::set<std::string>> gpu_files;
  std::map<std::string, std::string> gpu_names;
  std::vector<std::string> notes;
  std::map<std::string, std::map<std::string, int>> unused_ops;  // file -> op -> rows not fitted
  std::map<std::string, int> rows_without_op;                  // file -> rows (end-to-end times)
  std::vector<MeasuredStep> steps;                             // measured training steps
};

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

std::optional<int> node_count(const json& doc, std::string_view where) {
  auto from = [&](const json& obj, std::string_view w) -> std::optional<int> {
    if (!obj.is_object()) return std::nullopt;
    if (auto n = optional_number(obj, "nodes", w)) return static_cast<int>(*n);
    if (obj.contains("hosts") && obj["hosts"].is_array()) {
      std::set<std::string> hosts;
      for (const auto& h : obj["hosts"]) if (h.is_string()) hosts.insert(h.get<std::string>());
      if (!hosts.empty()) return static_cast<int>(hosts.size());
    }
    return std::nullopt;
  };
  if (doc.contains("layout")) if (auto n = from(doc["layout"], fmt::format("{}: layout", where))) return n;
  if (doc.contains("config")) if (auto n = from(doc["config"], fmt::format("{}: config", where))) return n;
  return std::nullopt;
}

// One GPU however its name is written: "NVIDIA H100 80GB HBM3" and "nvidia  h100 80gb hbm3" are the
// same device (case and runs of blanks differ between drivers, tools and hand-written steps).
std::string gpu_key(std::string_view name) {
  std::string k;
  for (char ch : name) {
    const bool blank = ch == ' ' || ch == '\t';
    if (blank && (k.empty() || k.back() == ' ')) continue;
    k += blank ? ' ' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  while (!k.empty() && k.back() == ' ') k.pop_back();
  return k;
}

void collect(const json& doc, const std::string& where, const std::string& file, const CalibrateOptions& opt,
             Collected& c) {
  // Training steps (seqpar-train's document or the minimal format): step_input.hpp.
  if (is_step_document(doc)) {
    StepDocument d = read_step_document(doc, where, file);
    std::map<std::string, int> skipped;  // device -> steps
    for (auto& s : d.steps) {
      if (s.device != "gpu") {
        ++skipped[s.device];
        continue;
      }
      if (s.gpu_name) {
        if (!c.gpu_name) c.gpu_name = s.gpu_name;
        c.gpu_files[gpu_key(*s.gpu_name)].insert(file);
        c.gpu_names.emplace(gpu_key(*s.gpu_name), *s.gpu_name);
      }
      c.steps.push_back(std::move(s));
    }
    for (const auto& [device, n] : skipped)
      c.notes.push_back(fmt::format("{}: skipped: {} step{} measured on device '{}', a GPU profile needs GPU steps", where,
                                    n, n == 1 ? "" : "s", device));
    return;
  }
  std::string kind = document_kind(doc, where);
  if (kind == "collection") {
    const json& docs = require_array(doc, "documents", where);
    for (std::size_t i = 0; i < docs.size(); ++i) collect(docs[i], fmt::format("{}: documents[{}]", where, i), file, opt, c);
    return;
  }
  if (kind != "measurement") {
    c.notes.push_back(fmt::format("{}: skipped: a {} document carries no measurements", where, kind));
    return;
  }
  std::string mode = require_string(doc, "mode", where);
  std::string device = require_string(doc, "device", where);
  if (device != "gpu") {
    c.notes.push_back(fmt::format("{}: skipped: measured on device '{}', a GPU profile needs GPU measurements", where, device));
    return;
  }
  if (doc.contains("environment") && doc["environment"].is_object()) {
    const json& env = doc["environment"];
    if (env.contains("gpu") && env["gpu"].is_object() && env["gpu"].contains("name") && env["gpu"]["name"].is_string()) {
      c.gpu_name = env["gpu"]["name"].get<std::string>();
      c.gpu_files[gpu_key(*c.gpu_name)].insert(file);
      c.gpu_names.emplace(gpu_key(*c.gpu_name), *c.gpu_name);
    }
  }
  std::string level;
  if (opt.comm_level != "auto") {
    level = opt.comm_level;
  } else if (auto nodes = node_count(doc, where)) {
    level = *nodes > 1 ? "inter" : "intra";
  }
  const json& results = require_array(doc, "results", where);
  bool comm_skipped_mode = false;
  std::set<std::string> skipped_backends, skipped_gemm_dtypes;
  for (std::size_t i = 0; i < results.size(); ++i) {
    std::string w = fmt::format("{}: results[{}]", where, i);
    const json& r = results[i];
    auto op = optional_string(r, "op", w);
    if (!op) {
      ++c.rows_without_op[file];
      continue;
    }
    if (const auto coll = comm_op(*op)) {
      if (mode != to_string(Mode::real_ranks)) { comm_skipped_mode = true; continue; }
      double ranks = require_number(r, "ranks", w);
      if (ranks < 2) continue;  // a single rank moves nothing over a link
      // seqpar-bench-comm calls the message size "size_bytes" (nccl-tests' "size"); "bytes" is accepted too.
      auto size = optional_number(r, "size_bytes", w);
      if (!size) size = optional_number(r, "bytes", w);
      if (!size) throw Error(fmt::format("{}: missing field 'size_bytes' (the message size in bytes)", w));
      double bytes = *size, t = require_number(r, "time_s", w);
      auto alg = optional_number(r, "algbw_gbps", w), bus = optional_number(r, "busbw_gbps", w);
      // nccl-tests bus factor (core's) for rows that do not carry both algbw and busbw.
      double factor = (alg && bus && *alg > 0) ? *bus / *alg : bus_factor(*coll, whole_ranks(ranks, w));
      if (level.empty()) {
        level = "intra";
        c.notes.push_back(fmt::format("{}: the rank layout names no node count; taken as intra-node "
                                      "(use --comm-level inter for a multi-node run)", where));
      }
      c.comm[level].push_back({*op, ranks, bytes * factor, t});
      c.comm_files[level].insert(file);
    } else if (*op == "fwd" || *op == "bwd") {
      // Peers measured beside seqpar's kernels (PyTorch SDPA) are not what the profile models.
      std::string backend = optional_string(r, "backend", w).value_or("seqpar");
      if (backend != "seqpar") {
        skipped_backends.insert(backend);
        continue;
      }
      std::string dtype = optional_string(r, "dtype", w).value_or("bf16");
      if (dtype != "bf16" && dtype != "fp16" && dtype != "f16") continue;  // the profile's peak is bf16/fp16
      // seqpar-bench-attention names the engine that ran (seqpar or cudnn); rows before it did are seqpar's.
      KernelPoint p{file, optional_string(r, "name", w).value_or(w), *op, 0, std::nullopt, 0, 0, 0, 0,
                    optional_string(r, "attention_engine", w).value_or("seqpar"), std::nullopt, 0};
      p.flops_per_s = require_number(r, "tflops", w) * 1e12;
      p.tokens = require_number(r, "seq_len", w);
      if (auto d = optional_number(r, "head_dim", w)) p.head_dim = static_cast<int>(*d);
      if (r.contains("causal") && !r["causal"].is_null()) {
        if (!r["causal"].is_boolean()) throw Error(fmt::format("{}: field 'causal' must be true or false", w));
        p.causal = r["causal"].get<bool>();
      }
      // The FLOPs of the call (docs/ARCHITECTURE.md conventions, as the benchmark counted them); rows that only
      // give a rate and a time have flops = rate x time.
      if (auto f = optional_number(r, "flops", w)) p.flops = *f;
      else p.flops = p.flops_per_s * require_number(r, "time_s", w);
      if (!(p.flops > 0) || !(p.flops_per_s > 0) || !(p.tokens > 0) || !std::isfinite(p.flops) ||
          !std::isfinite(p.flops_per_s) || p.head_dim < 0)
        throw Error(fmt::format("{}: flops, tflops, seq_len and head_dim must be positive", w));
      p.time_s = p.flops / p.flops_per_s;
      p.workspace_bytes = optional_number(r, "workspace_bytes", w);
      if (p.workspace_bytes && !(*p.workspace_bytes >= 0 && std::isfinite(*p.workspace_bytes)))
        throw Error(fmt::format("{}: field 'workspace_bytes' must be a finite number of bytes, 0 or more", w));
      p.rows = optional_number(r, "batch", w).value_or(1) * optional_number(r, "heads", w).value_or(0) * p.tokens;
      c.attention.push_back(p);
      c.attention_files.insert(file);
    } else if (*op == "gemm") {
      // The profile's GEMM curve is bf16's; FP8 rows (seqpar-bench-gemm --dtype fp8) are the FP8
      // curve's, per-tensor scaling only (the recipe the simulator's FP8 GEMM figures describe).
      std::string dtype = optional_string(r, "dtype", w).value_or("bf16");
      const bool fp8 = dtype == "fp8_e4m3" && optional_string(r, "scaling", w).value_or("tensor") == "tensor";
      if (dtype != "bf16" && dtype != "fp16" && !fp8) {
        skipped_gemm_dtypes.insert(dtype == "fp8_e4m3" ? dtype + " with row-wise scales" : dtype);
        continue;
      }
      double m = require_number(r, "m", w);
      KernelPoint p{file, optional_string(r, "name", w).value_or(w), *op, 0, std::nullopt, 0, 0, 0, 0, "", std::nullopt, 0};
      p.flops = 2 * m * require_number(r, "n", w) * require_number(r, "k", w);
      if (auto tf = optional_number(r, "tflops", w)) p.flops_per_s = *tf * 1e12;
      else p.flops_per_s = p.flops / require_number(r, "time_s", w);
      // The efficiency is modelled against the token dimension: m for Y = X W^T and dX, but k for
      // the weight gradient, so rows that name their token count are fitted by it.
      p.tokens = optional_number(r, "tokens", w).value_or(m);
      if (!(p.flops > 0) || !(p.flops_per_s > 0) || !(p.tokens > 0) || !std::isfinite(p.flops) ||
          !std::isfinite(p.flops_per_s))
        throw Error(fmt::format("{}: m, n, k, the rate and the token count must be positive", w));
      p.time_s = p.flops / p.flops_per_s;
      p.fp8 = fp8;
      (fp8 ? c.gemm_fp8 : c.gemm).push_back(p);
      c.gemm_files.insert(file);
    } else {
      ++c.unused_ops[file][*op];
    }
  }
  if (!skipped_backends.empty())
    c.notes.push_back(fmt::format("{}: attention rows of other backends skipped ({}); the profile models seqpar's kernels",
                                  where, join(skipped_backends)));
  if (!skipped_gemm_dtypes.empty())
    c.notes.push_back(fmt::format("{}: GEMM rows of other types skipped ({}); the profile's GEMM curves are bf16's and "
                                  "FP8 E4M3's with per-tensor scales", where, join(skipped_gemm_dtypes)));
  if (comm_skipped_mode)
    c.notes.push_back(fmt::format("{}: communication rows skipped: mode '{}' does not measure real links", where, mode));
}

std::string series_label(const KernelPoint& p) {
  if (p.op == "gemm") return "gemm";
  std::string label = "attention " + p.op;
  if (p.head_dim > 0) label += fmt::format(" d{}", p.head_dim);
  if (p.causal) label += *p.causal ? " causal" : " non-causal";
  return label;
}

// Each fitted row against the profile, loaded as `seqpar simulate --system PROFILE.json` loads it
// and timed by the simulator's own kernel cost functions.
void predict_rows(const json& profile, const std::vector<KernelPoint>& pts, CalibrationResult& res) {
  const sim::System sys = sim::system_from_json(profile, "calibrated profile");
  for (const auto& p : pts) {
    const double t = p.op == "gemm"
                         ? (p.fp8 ? sim::fp8_gemm_time(sys.gpu, p.flops, p.tokens, 1) : sim::gemm_time(sys.gpu, p.flops, p.tokens, 1))
                         : sim::attention_time(sys.gpu, p.flops, p.tokens, p.op == "bwd", {p.head_dim, p.causal.value_or(false)});
    const double predicted = p.flops / t, residual = predicted / p.flops_per_s - 1;
    res.rows.push_back({{"file", p.file}, {"name", p.name}, {"series", series_label(p)}, {"tokens", p.tokens},
                        {"measured_time_s", p.time_s}, {"predicted_time_s", t},
                        {"measured_tflops", p.flops_per_s / 1e12}, {"predicted_tflops", predicted / 1e12},
                        {"residual", residual}});
    res.max_abs_residual = std::max(res.max_abs_residual, std::fabs(residual));
    if (std::fabs(residual) > kRowTolerance)
      res.notes.push_back(fmt::format("{}: {}: the profile predicts {:.1f} TFLOP/s against {:.1f} measured ({:+.1f}%, "
                                      "beyond {:.0f}%): its curve does not represent this row", p.file, p.name,
                                      predicted / 1e12, p.flops_per_s / 1e12, residual * 100, kRowTolerance * 100));
  }
}

json figure(double value, std::string source) { return {{"value", value}, {"source", std::move(source)}}; }

double figure_value(const json& j, const char* key, std::string_view what) {
  const json& f = require(j, key, what);
  if (f.is_number()) return f.get<double>();
  return require_number(f, "value", fmt::format("{}: {}", what, key));
}

// The base preset the profile starts from: the system document, its GPU, and their names for messages.
struct Base {
  std::string name;
  json system, gpu;
  std::string sys_where, gpu_where;
  double peak = 0;  // bf16 FLOP/s
};

Base load_base(const Collected& c, const CalibrateOptions& opt, const PresetLookup& lookup) {
  // A profile describes one GPU: measurements of two would be fitted as one, and which GPU's preset
  // the base came from would follow the order of the files.
  if (c.gpu_files.size() > 1) {
    std::string list;
    for (const auto& [gpu, files] : c.gpu_files) list += fmt::format("{}'{}' ({})", list.empty() ? "" : "; ", c.gpu_names.at(gpu), join(files));
    throw Error(fmt::format("calibrate: the inputs were measured on {} different GPUs: {}; a profile describes one GPU: "
                            "calibrate each GPU's measurements on their own (--base-system does not make them one GPU)",
                            c.gpu_files.size(), list));
  }
  Base b;
  b.name = opt.base_system;
  if (b.name.empty()) {
    auto guess = c.gpu_name ? sim::system_for_device_name(*c.gpu_name) : std::nullopt;
    if (!guess)
      throw Error(fmt::format("calibrate: cannot tell the base system from the measurements (GPU name: {}); "
                              "give one with --base-system", c.gpu_name.value_or("not recorded")));
    b.name = *guess;
  }
  b.system = lookup("system", b.name);
  b.sys_where = fmt::format("base system '{}'", b.name);
  const json& g = require(b.system, "gpu", b.sys_where);
  if (g.is_string()) b.gpu = lookup("gpu", g.get<std::string>());
  else if (g.is_object()) b.gpu = g;
  else throw Error(fmt::format("{}: field 'gpu' must be a preset name or an object", b.sys_where));
  b.gpu_where = fmt::format("{}: gpu", b.sys_where);
  // A profile describes the GPU its measurements ran on: a base of another GPU would turn them into
  // that GPU's figures.
  if (!opt.base_system.empty() && c.gpu_name)
    if (auto measured = sim::system_for_device_name(*c.gpu_name)) {
      const json ms = lookup("system", *measured);
      const json& mg = ms.at("gpu");
      const std::string measured_gpu = mg.is_string() ? mg.get<std::string>() : mg.value("name", std::string());
      const std::string base_gpu = b.gpu.value("name", std::string());
      if (!measured_gpu.empty() && !base_gpu.empty() && measured_gpu != base_gpu)
        throw Error(fmt::format("calibrate: the measurements ran on '{}' (gpu preset {}), but --base-system {} has gpu "
                                "{}: a profile describes the GPU its measurements ran on; give a base system with that "
                                "GPU (e.g. --base-system {})",
                                *c.gpu_name, measured_gpu, b.name, base_gpu, *measured));
    }
  b.peak = figure_value(b.gpu, "bf16_tflops", b.gpu_where) * 1e12;
  return b;
}

// The fit summaries for the profile's calibration.fits, and how many figure groups were fitted.
struct Fitted {
  json fits = json::object();
  int groups = 0;
};

// Link bandwidth and latency per level (intra-/inter-node) from the collective rows, alpha-beta on bus bytes.
void fit_links(Collected& c, Base& b, Fitted& out, CalibrationResult& res) {
  for (const char* level : {"intra", "inter"}) {
    auto it = c.comm.find(level);
    if (it == c.comm.end() || it->second.empty()) continue;
    // One collective per level: algorithms differ in latency terms, so mixing them blurs alpha.
    std::string op;
    for (Collective candidate : all_collectives)  // core's order: alltoall first
      if (std::any_of(it->second.begin(), it->second.end(), [&](const CommPoint& p) { return p.op == to_string(candidate); })) {
        op = std::string(to_string(candidate));
        break;
      }
    std::vector<double> x, t;
    std::set<double> ranks;
    for (const auto& p : it->second)
      if (p.op == op) { x.push_back(p.bus_bytes); t.push_back(p.time_s); ranks.insert(p.ranks); }
    AlphaBetaFit f = fit_alpha_beta(x, t);
    std::string key = std::string(level) + "_node";
    json& link = b.system[key];
    if (!link.is_object()) throw Error(fmt::format("{}: missing object '{}'", b.sys_where, key));
    std::string src = fmt::format("fitted by seqpar calibrate from {}: {} {} points ({} ranks, {}-node), "
                                  "alpha-beta on bus bytes, RMS relative residual {:.2f}%",
                                  join(c.comm_files[level]), f.points, op, fmt::join(ranks, "/"), level,
                                  f.rel_residual * 100);
    link["bandwidth_gbps"] = figure(f.bytes_per_s / 1e9, src);
    link["efficiency"] = figure(1.0, "seqpar calibrate: the fitted bandwidth is the achieved bus bandwidth, so the efficiency is 1");
    link["latency_us"] = figure(f.latency_s * 1e6, src);
    out.fits[key] = {{"op", op}, {"points", f.points}, {"bandwidth_gbps", f.bytes_per_s / 1e9},
                     {"latency_us", f.latency_s * 1e6}, {"rel_residual", f.rel_residual}};
    res.fitted.push_back(fmt::format("{}: {:.1f} GB/s, {:.2f} us latency ({} {} points, residual {:.2f}%)", key,
                                     f.bytes_per_s / 1e9, f.latency_s * 1e6, f.points, op, f.rel_residual * 100));
    ++out.groups;
  }
}

// Fits efficiency curves to kernel rows. The simulator charges every kernel call the GPU's kernel
// overhead on top of flops / (peak x efficiency), so the curves are fitted to the time left after
// it; the profile then reproduces each measured time through the simulator's own gemm_time /
// attention_time. Keeps the rows it fitted, for the row-by-row check.
struct KernelFitter {
  double peak = 0, overhead_s = 0;
  CalibrationResult& res;
  std::vector<KernelPoint> fitted_points;

  std::optional<CurveFit> fit(const std::vector<KernelPoint>& pts, const std::string& label) {
    SaturationSeries s;
    std::vector<KernelPoint> used;
    for (const auto& p : pts) {
      if (p.flops_per_s > peak)
        throw Error(fmt::format("calibrate: {}: {} ran at {:.1f} TFLOP/s, above the base GPU's peak of {} TFLOP/s; "
                                "choose the right --base-system", p.file, p.name, p.flops_per_s / 1e12, peak / 1e12));
      if (!(p.time_s > overhead_s)) {
        res.notes.push_back(fmt::format("{}: {} not fitted: its time {:.3g} s is not above the base GPU's kernel "
                                        "overhead of {:.3g} s", p.file, p.name, p.time_s, overhead_s));
        continue;
      }
      s.tokens.push_back(p.tokens);
      s.flops_per_s.push_back(p.flops / (p.time_s - overhead_s));
      used.push_back(p);
    }
    CurveFit f;
    try {
      f = fit_efficiency_curve(s, peak);
    } catch (const Error& e) {
      res.notes.push_back(fmt::format("{} not fitted: {}", label, e.what()));
      return std::nullopt;
    }
    fitted_points.insert(fitted_points.end(), used.begin(), used.end());
    res.fitted.push_back(fmt::format("{}: efficiency {:.4f}, L_half {:.0f}, exponent {:.2f} ({} points, RMS residual "
                                     "{:.2f}%, max {:.2f}%)", label, f.efficiency, f.half_tokens, f.exponent, f.points,
                                     f.rel_residual * 100, f.max_rel_residual * 100));
    return f;
  }

  // The "source" of each figure of a fitted curve.
  std::string source(const CurveFit& f, const std::vector<KernelPoint>& pts, const std::string& label) const {
    std::set<std::string> files;
    for (const auto& p : pts) files.insert(p.file);
    return fmt::format("fitted by seqpar calibrate from {}: {} points of {}, achieved = peak x eff x L^p/(L^p + "
                       "L_half^p) after the {:g} us kernel overhead, RMS relative residual {:.2f}% (max {:.2f}%){}{}{}",
                       join(files), f.points, label, overhead_s * 1e6, f.rel_residual * 100,
                       f.max_rel_residual * 100, f.exponent_fixed ? "; two sizes only: p held at 1" : "",
                       f.at_bound ? "; a parameter ended on its search bound: the sizes do not pin it down" : "",
                       f.capped ? "; the efficiency is held at its bound of 1" : "");
  }
};

json curve_json(const CurveFit& f) {
  return json{{"points", f.points}, {"efficiency", f.efficiency}, {"half_tokens", f.half_tokens},
              {"exponent", f.exponent}, {"rel_residual", f.rel_residual}, {"max_rel_residual", f.max_rel_residual}};
}

// One GEMM curve from `pts` against `kf`'s peak, written as the GPU's `<prefix>gemm_efficiency`,
// `_half_tokens` and `_exponent` and recorded in the fits as `fit_key`.
void fit_gemm_curve(const std::vector<KernelPoint>& pts, const std::string& prefix, const char* fit_key,
                    const std::string& label, Base& b, KernelFitter& kf, Fitted& out) {
  if (pts.empty()) return;
  auto f = kf.fit(pts, fit_key);
  if (!f) return;
  const std::string src = kf.source(*f, pts, label);
  b.gpu[prefix + "gemm_efficiency"] = figure(f->efficiency, src);
  b.gpu[prefix + "gemm_half_tokens"] = figure(f->half_tokens, src);
  b.gpu[prefix + "gemm_exponent"] = figure(f->exponent, src);
  out.fits[fit_key] = curve_json(*f);
  ++out.groups;
}

// GEMM: the bf16 curve from the seqpar-bench-gemm rows; the FP8 curve from the FP8 rows against the
// base GPU's FP8 peak (the GPU preset's fp8_tflops): a GPU without one cannot have run them, and the
// rows are refused naming it.
void fit_gemm(const Collected& c, Base& b, KernelFitter& kf, Fitted& out) {
  fit_gemm_curve(c.gemm, "", "gemm", "GEMM", b, kf, out);
  if (c.gemm_fp8.empty()) return;
  if (!b.gpu.contains("fp8_tflops"))
    throw Error(fmt::format("calibrate: {} FP8 GEMM rows ({}), but the base GPU ({}) has no 'fp8_tflops': choose the "
                            "--base-system of the GPU that ran them", c.gemm_fp8.size(), c.gemm_fp8.front().file,
                            b.gpu_where));
  KernelFitter fp8{figure_value(b.gpu, "fp8_tflops", b.gpu_where) * 1e12, kf.overhead_s, kf.res, {}};
  fit_gemm_curve(c.gemm_fp8, "fp8_", "gemm_fp8", "FP8 GEMM (E4M3, per-tensor scales)", b, fp8, out);
  kf.fitted_points.insert(kf.fitted_points.end(), fp8.fitted_points.begin(), fp8.fitted_points.end());
}

// The attention rows of one engine: the profile's curves describe one kernel, and seqpar's and
// cuDNN's rates differ several-fold on the same shapes, so a curve fitted to both would be neither.
// The engine is --attention-engine, else cudnn when measured (what training uses where it is
// available), else the only one measured; the rows of other engines are named in the notes.
// Returns the engine kept ("" without attention rows).
std::string select_attention_engine(Collected& c, const CalibrateOptions& opt) {
  std::map<std::string, int> rows;
  for (const auto& p : c.attention) ++rows[p.engine];
  if (rows.empty()) return "";
  std::string chosen = opt.attention_engine;
  if (chosen.empty()) {
    chosen = rows.count("cudnn") ? "cudnn" : rows.count("seqpar") ? "seqpar" : rows.begin()->first;
  } else if (!rows.count(chosen)) {
    std::set<std::string> measured;
    for (const auto& [e, n] : rows) measured.insert(e);
    throw Error(fmt::format("--attention-engine {}: no attention rows of that engine in {} (engines measured: {})",
                            chosen, join(c.attention_files), join(measured)));
  }
  for (const auto& [e, n] : rows)
    if (e != chosen)
      c.notes.push_back(fmt::format("{} attention rows of engine '{}' not fitted: the attention curves are fitted to one "
                                    "engine, '{}' (choose with --attention-engine)", n, e, chosen));
  std::erase_if(c.attention, [&](const KernelPoint& p) { return p.engine != chosen; });
  std::set<std::string> files;
  for (const auto& p : c.attention) files.insert(p.file);
  c.attention_files = files;
  return chosen;
}

// Attention: one curve per (direction, head dim, mask), since the rates differ by all three.
// The fitted figures become the profile's default attention kernel, named for the engine they were
// measured on; the base preset's default stays selectable (--attention-kernel) under its own name.
void name_attention_kernel(Base& b, const std::string& engine) {
  json& gpu = b.gpu;
  if (auto def = gpu.find("attention_kernel"); def != gpu.end() && def->is_string() && def->get<std::string>() != engine) {
    const std::string old = def->get<std::string>();
    json& kernels = gpu["attention_kernels"];
    if (!kernels.is_object()) kernels = json::object();
    if (!kernels.contains(old) && gpu.contains("attention_fwd_efficiency") && gpu.contains("attention_bwd_efficiency"))
      kernels[old] = {{"attention_fwd_efficiency", gpu["attention_fwd_efficiency"]},
                      {"attention_bwd_efficiency", gpu["attention_bwd_efficiency"]}};
  }
  if (auto ks = gpu.find("attention_kernels"); ks != gpu.end() && ks->is_object()) {
    ks->erase(engine);  // the default now; its old, uncalibrated entry would shadow nothing but mislead
    if (ks->empty()) gpu.erase("attention_kernels");
  }
  gpu["attention_kernel"] = engine;
}

// The attention kernel's workspace from the engine's own size queries (the rows' workspace_bytes):
// per query row and head, the backward's is a x head_dim + b fp32 values and the forward's of an
// unmasked block a' x head_dim (memory_cost.hpp), fitted by least squares over the rows; with one
// head dimension b is held at 1 (the row sum every flash backward keeps) and a alone is fitted.
void fit_attention_workspace(const Collected& c, Base& b, Fitted& out, const std::string& engine) {
  // (head_dim, fp32 values per row). The forward's own workspace is recorded, not fitted: the
  // profile's forward term is the ring step's bf16 staging of fp32 operands, which no engine query sees.
  std::vector<std::pair<double, double>> bwd, fwd;
  std::set<std::string> files;
  for (const auto& p : c.attention) {
    if (p.engine != engine || !p.workspace_bytes || !(p.rows > 0) || p.head_dim <= 0) continue;
    const double per_row = *p.workspace_bytes / 4.0 / p.rows;
    if (p.op == "bwd") bwd.push_back({double(p.head_dim), per_row});
    else if (p.causal && !*p.causal) fwd.push_back({double(p.head_dim), per_row});
    files.insert(p.file);
  }
  if (bwd.empty()) return;
  std::set<double> dims;
  for (const auto& [d, w] : bwd) dims.insert(d);
  double a = 0, intercept = 1;
  if (dims.size() >= 2) {  // w = a d + b
    double sd = 0, sw = 0, sdd = 0, sdw = 0, n = double(bwd.size());
    for (const auto& [d, w] : bwd) sd += d, sw += w, sdd += d * d, sdw += d * w;
    a = (n * sdw - sd * sw) / (n * sdd - sd * sd);
    intercept = (sw - a * sd) / n;
  } else {
    for (const auto& [d, w] : bwd) a += (w - intercept) / d;
    a /= double(bwd.size());
  }
  double fwd_max = 0;
  for (const auto& [d, w] : fwd) fwd_max = std::max(fwd_max, w / d);
  a = std::max(0.0, a), intercept = std::max(0.0, intercept);
  const std::string src = fmt::format(
      "fitted by seqpar calibrate from {}: the '{}' engine's own workspace sizes for {} backward calls, in fp32 values "
      "per query row and head{}",
      join(files), engine, bwd.size(), dims.size() >= 2 ? "" : " (one head dimension: the +1 held)");
  b.gpu["attention_bwd_workspace_per_head_dim"] = figure(a, src);
  b.gpu["attention_bwd_workspace_per_row"] = figure(intercept, src);
  out.fits["attention_workspace"] = {{"bwd_per_head_dim", a}, {"bwd_per_row", intercept},
                                     {"fwd_engine_per_head_dim_max", fwd.empty() ? json() : json(fwd_max)},
                                     {"rows", bwd.size() + fwd.size()}};
}

void fit_attention(const Collected& c, Base& b, KernelFitter& kf, Fitted& out, const std::string& engine) {
  std::map<std::tuple<int, int, int>, std::vector<KernelPoint>> groups;
  for (const auto& p : c.attention)
    groups[{p.op == "bwd" ? 1 : 0, p.head_dim, p.causal ? int(*p.causal) : -1}].push_back(p);
  json curves = json::array(), attention_fits = json::array();
  sim::Gpu fitted_curves;  // to pick the scalar figures with the simulator's own selection
  for (const auto& [key, pts] : groups) {
    const auto [bwd, head_dim, causal] = key;
    sim::AttentionCurve ac;
    ac.backward = bwd == 1;
    ac.head_dim = head_dim;
    if (causal >= 0) ac.causal = causal == 1;
    const std::string label = series_label(pts.front());
    if (auto f = kf.fit(pts, label)) {
      ac.curve = {f->efficiency, f->half_tokens, f->exponent};
      curves.push_back(sim::attention_curve_json(ac, kf.source(*f, pts, label)));
      fitted_curves.attention_curves.push_back(ac);
      json fj = curve_json(*f);
      fj["series"] = label;
      attention_fits.push_back(fj);
    }
  }
  if (curves.empty()) return;
  name_attention_kernel(b, engine);
  b.gpu["attention_curves"] = curves;
  // The scalar figures stay meaningful for anything that reads them: the curve the simulator
  // would use for a causal head-dim-128 call (the usual training shape).
  for (bool bwd : {false, true}) {
    if (std::none_of(fitted_curves.attention_curves.begin(), fitted_curves.attention_curves.end(),
                     [bwd](const sim::AttentionCurve& a) { return a.backward == bwd; }))
      continue;
    const sim::EfficiencyCurve ec = sim::attention_curve(fitted_curves, bwd, {128, true});
    const std::string src = fmt::format(
        "seqpar calibrate: the {} attention curve nearest a causal head-dim-128 call (efficiency at large L); the "
        "simulator uses attention_curves, which replace this figure", bwd ? "backward" : "forward");
    b.gpu[bwd ? "attention_bwd_efficiency" : "attention_fwd_efficiency"] = figure(ec.efficiency, src);
    if (!bwd) b.gpu["attention_half_tokens"] = figure(ec.half_tokens, src);
  }
  out.fits["attention"] = attention_fits;
  fit_attention_workspace(c, b, out, engine);
  ++out.groups;
}

// What ran the measured steps, as the profile is fitted over it and keeps it.
struct StepsRan {
  sim::Framework framework;
  json document;               // the framework profile, whole, as the calibrated profile keeps it
  std::string framework_from;  // where the framework was read
  std::string kernel;          // the steps' attention kernel where the GPU has its figures; empty: the framework's choice
};

// The framework: --framework, else the one the steps name (one per profile), else the base
// system's (a calibrated base's, or the default). The kernel: the one the steps name where the
// profile's GPU has figures for it (then kept in the framework document, so that the profile
// predicts what the steps ran), else the framework's own choice on that GPU.
StepsRan steps_ran(const std::vector<MeasuredStep>& steps, const CalibrateOptions& opt, const sim::System& base,
                   const json& profile, std::vector<std::string>& notes) {
  StepsRan r;
  std::map<std::string, std::vector<const MeasuredStep*>> named;
  for (const auto& s : steps)
    if (!s.framework.empty()) named[s.framework].push_back(&s);
  std::string name;
  const MeasuredStep* named_by = nullptr;  // the step whose own field names the framework
  if (!opt.framework.empty()) {
    name = opt.framework;
    r.framework_from = "--framework";
    // Fitted over --framework as asked, but not silently over what the steps say they ran.
    for (const auto& [f, ss] : named)
      if (f != name)
        notes.push_back(fmt::format("--framework {} replaces the framework '{}' that {} of {} steps name ({}: {})",
                                    name, f, ss.size(), steps.size(), ss.front()->file, ss.front()->framework_from));
  } else if (named.size() > 1) {
    std::string list;
    for (const auto& [f, ss] : named)
      list += fmt::format("{}{} ({}: {})", list.empty() ? "" : "; ", f, ss.front()->file, ss.front()->framework_from);
    throw Error(fmt::format("calibrate: the steps ran different frameworks: {}; a profile's terms describe one "
                            "framework: calibrate each apart, or give --framework", list));
  } else if (named.size() == 1) {
    name = named.begin()->first;
    const MeasuredStep& s = *named.begin()->second.front();
    named_by = &s;
    r.framework_from = fmt::format("the steps ({}: {})", s.file, s.framework_from);
    if (named.begin()->second.size() < steps.size())
      notes.push_back(fmt::format("{} of {} steps name no framework: fitted as '{}', which the others name",
                                  steps.size() - named.begin()->second.size(), steps.size(), name));
  } else {
    name = base.profile.name;
    r.framework_from = base.framework_calibrated ? "the base system's (calibrated over it); the steps name none"
                                                 : "the default; the steps name none (give --framework)";
  }
  // A calibrated base keeps its framework whole; use that document for its own framework.
  const json* kept = profile.contains("framework") ? &profile["framework"] : nullptr;
  if (base.framework_calibrated && name == base.profile.name && kept && kept->contains("profile") &&
      (*kept)["profile"].is_object())
    r.document = (*kept)["profile"];
  else
    try {
      r.document = sim::preset_document("framework", name);
    } catch (const Error& e) {  // a name the steps gave is their error: say which file gave it
      if (!named_by) throw;
      throw Error(fmt::format("{}: framework ({}): {}", named_by->file, named_by->framework_from, e.what()));
    }
  std::map<std::string, const MeasuredStep*> kernels;
  for (const auto& s : steps)
    if (!s.attention_kernel.empty()) kernels.emplace(s.attention_kernel, &s);
  const std::vector<std::string> known = sim::attention_kernel_names(profile["gpu"]);
  if (kernels.size() == 1) {
    const auto& [k, s] = *kernels.begin();
    if (std::find(known.begin(), known.end(), k) != known.end()) {
      r.kernel = k;
      r.document["attention_kernel"] = {
          {"value", k}, {"source", fmt::format("the attention kernel the calibrated steps ran ({}: {})", s->file,
                                               s->attention_kernel_from)}};
    } else {
      notes.push_back(fmt::format("the steps ran attention kernel '{}' ({}: {}), for which the profile's GPU has no "
                                  "figures: fitted with the framework's own kernel", k, s->file, s->attention_kernel_from));
    }
  } else if (kernels.size() > 1) {
    notes.push_back(fmt::format("the steps ran {} attention kernels: fitted with the framework's own", kernels.size()));
  }
  r.framework = sim::framework_from_json(r.document, fmt::format("framework '{}'", name));
  return r;
}

// A step this far from the base system's prediction (its priors) is not a framework's overhead or
// efficiency: every step-time term is bounded within its physical range, and a measured step
// 5x slower than predicted, or a peak half or twice the predicted, is a wrong field, a different
// model or plan, or a broken run. Such a step is left out of the fit, named with its ratio.
constexpr double kOutlierTimeRatio = 5, kOutlierPeakRatio = 2;

std::vector<MeasuredStep> without_outliers(const sim::System& sys, std::vector<MeasuredStep> steps,
                                           std::vector<std::string>& notes) {
  constexpr double gib = 1024.0 * 1024 * 1024;
  std::vector<MeasuredStep> kept;
  for (auto& s : steps) {
    const StepPrediction p = predict_step(sys, s);
    const double t = s.step_time_s / p.step_time_s, m = s.peak_memory_bytes / p.peak_memory_bytes;
    std::string why;
    if (!(t <= kOutlierTimeRatio && t >= 1 / kOutlierTimeRatio))
      why = fmt::format("its step time {:.4g} s is {:.3g}x the prediction {:.4g} s", s.step_time_s, t, p.step_time_s);
    else if (s.has_peak_memory && !(m <= kOutlierPeakRatio && m >= 1 / kOutlierPeakRatio))
      why = fmt::format("its peak {:.2f} GiB is {:.3g}x the prediction {:.2f} GiB", s.peak_memory_bytes / gib, m,
                        p.peak_memory_bytes / gib);
    if (why.empty()) {
      kept.push_back(std::move(s));
      continue;
    }
    notes.push_back(fmt::format("{}: {}: outlier, left out of the fit: {} at the base system's terms (beyond {:g}x in "
                                "time or {:g}x in memory no framework term explains it: check the step's fields, "
                                "model and plan)",
                                s.file, s.name, why, kOutlierTimeRatio, kOutlierPeakRatio));
  }
  return kept;
}

// The framework terms from measured training steps (step_fit.hpp), fitted on the profile as the
// kernel and link fits above left it, and each step's leave-one-out error. The base system's own
// framework terms are the priors (a term the steps cannot determine keeps its value) and its
// framework choices (bytes per logit, gradient bytes) stay.
void fit_steps(Collected& c, Base& b, Fitted& out, CalibrationResult& res, const CalibrateOptions& opt) {
  std::vector<MeasuredStep> bf16;
  for (auto& s : c.steps) {
    // The profile's figures are bf16/fp16 rates, as for the kernel rows.
    if (s.dtype == "bf16" || s.dtype == "fp16") bf16.push_back(s);
    else c.notes.push_back(fmt::format("{}: {}: step not fitted: measured in {}, the simulator models bf16/fp16 steps",
                                       s.file, s.name, s.dtype));
  }
  if (bf16.empty()) return;
  json prof = b.system;
  prof["gpu"] = b.gpu;
  // The terms are fitted over the framework the steps ran (its time terms the priors) and its
  // attention kernel on this GPU: --framework, else the steps', else the base system's.
  const sim::System base = sim::system_from_json(prof, "calibrated profile");
  const StepsRan ran = steps_ran(bf16, opt, base, prof, c.notes);
  // A base calibrated over another framework lends it no priors: its terms describe that one.
  if (base.framework_calibrated && base.profile.name != ran.framework.name) prof.erase("framework");
  sim::System sys = sim::system_from_json(prof, "calibrated profile", ran.kernel, ran.framework);
  const std::vector<MeasuredStep> used = without_outliers(sys, distinct_steps(sys, bf16, c.notes), c.notes);
  if (used.empty())
    throw Error("calibrate: every training step is an outlier against the base system's prediction (see the notes "
                "above): nothing left to fit; check the steps' times, peaks, models and plans, or the --base-system");
  const StepFit f = fit_framework_terms(sys, used);
  for (auto& line : describe_undetermined(f)) c.notes.push_back(std::move(line));
  std::set<std::string> files;
  for (const auto& s : bf16) files.insert(s.file);
  std::string held;
  for (const auto& t : f.fitted)
    if (!t.determined) held += (held.empty() ? "" : ", ") + t.key;
  const std::string src = fmt::format(
      "fitted by seqpar calibrate from {}: {} distinct training steps against the simulator's own predictions, every "
      "term within its physical range; time RMS relative residual {:.2f}%, peak memory {:.2f}%{}", join(files), f.points,
      f.time_rel_residual * 100, f.memory_rel_residual * 100,
      held.empty() ? "" : fmt::format("; not determined by these steps, held at the base's: {}", held));
  b.system["framework"] = sim::framework_terms_json(f.terms, ran.document, src);
  res.steps = step_rows(sys, f, used);
  for (const auto& row : res.steps) {
    if (row["loo_time_error"].is_null()) continue;
    res.max_abs_loo_time_error = std::max(res.max_abs_loo_time_error, std::fabs(row["loo_time_error"].get<double>()));
    res.max_abs_loo_memory_error = std::max(res.max_abs_loo_memory_error, std::fabs(row["loo_memory_error"].get<double>()));
  }
  json fit = sim::framework_terms_json(f.terms, sys.profile.name, src);
  fit["attention_kernel"] = sys.gpu.attention_kernel;
  fit["framework_from"] = ran.framework_from;
  fit.erase("source");
  fit["points"] = f.points;
  json terms = json::object();
  for (const auto& t : f.fitted)
    terms[t.key] = {{"determined", t.determined}, {"at_bound", t.at_bound}, {"prior", t.prior},
                    {"range", json::array({t.lo, t.hi})}, {"why", t.why.empty() ? json() : json(t.why)}};
  fit["terms"] = terms;
  fit["time_rel_residual"] = f.time_rel_residual;
  fit["memory_rel_residual"] = f.memory_rel_residual;
  fit["max_abs_loo_time_error"] = used.size() >= 2 ? json(res.max_abs_loo_time_error) : json();
  fit["max_abs_loo_memory_error"] = used.size() >= 2 ? json(res.max_abs_loo_memory_error) : json();
  out.fits["framework"] = fit;
  // Every step-time and peak-memory term, as fitted or held (kFrameworkTerms' order).
  std::string terms_line;
  for (const auto& t : f.fitted)
    terms_line += fmt::format("{}{} {:.6g}{}", terms_line.empty() ? "" : ", ", t.key, t.value,
                              t.determined ? "" : " (held)");
  res.fitted.push_back(fmt::format("framework over profile '{}': {} ({} distinct steps, time residual {:.2f}%, memory "
                                   "{:.2f}%)",
                                   sys.profile.name, terms_line, f.points, f.time_rel_residual * 100,
                                   f.memory_rel_residual * 100));
  // What each term means, beside its value (kFrameworkTerms).
  for (const auto& t : sim::kFrameworkTerms)
    res.fitted.push_back(fmt::format("  {}: {}", t.key, t.meaning));
  ++out.groups;
}

// Notes on the rows the profile does not model (other ops, end-to-end times).
void note_unfitted_rows(Collected& c) {
  for (const auto& [file, ops] : c.unused_ops) {
    std::string list;
    int n = 0;
    for (const auto& [op, k] : ops) {
      list += fmt::format("{}{} {}", list.empty() ? "" : ", ", k, op);
      n += k;
    }
    c.notes.push_back(fmt::format("{}: {} rows not fitted ({}): the profile models collectives, attention and GEMM "
                                  "kernels only", file, n, list));
  }
  for (const auto& [file, n] : c.rows_without_op)
    c.notes.push_back(fmt::format("{}: {} rows without an op (end-to-end measurements: full reshards, layers, training steps) not fitted; "
                                  "set them beside predictions with `seqpar report`", file, n));
}

// The profile's name, description and calibration record (inputs, fits).
void stamp_profile(Base& b, const Collected& c, const CalibrateOptions& opt, const std::set<std::string>& all_files,
                   const Fitted& fitted) {
  std::string gpu_desc = b.gpu.value("description", std::string(""));
  b.gpu["description"] = gpu_desc + (gpu_desc.empty() ? "" : " ") + "(calibrated by seqpar calibrate)";
  b.system["gpu"] = b.gpu;
  b.system["name"] = opt.name.empty() ? b.name + "-calibrated" : opt.name;
  b.system["description"] = fmt::format("{} calibrated from {} (base preset: {})",
                                        b.system.value("description", b.name), join(all_files), b.name);
  json info = run_info_of_this_process();
  info["base_system"] = b.name;
  info["inputs"] = json(std::vector<std::string>(all_files.begin(), all_files.end()));
  info["measured_gpu"] = c.gpu_name ? json(*c.gpu_name) : json();
  info["fits"] = fitted.fits;
  b.system["calibration"] = info;
}

}  // namespace

CalibrationResult calibrate(const std::vector<InputDocument>& inputs, const CalibrateOptions& opt,
                            const PresetLookup& lookup) {
  if (inputs.empty()) throw Error("calibrate: no input files");
  if (opt.comm_level != "auto" && opt.comm_level != "intra" && opt.comm_level != "inter")
    throw Error(fmt::format("--comm-level '{}' must be intra, inter or auto", opt.comm_level));
  if (!opt.attention_engine.empty() && opt.attention_engine != "seqpar" && opt.attention_engine != "cudnn")
    throw Error(fmt::format("--attention-engine '{}' must be seqpar or cudnn", opt.attention_engine));
  Collected c;
  std::set<std::string> all_files;
  for (const auto& in : inputs) {
    collect(in.doc, in.file, in.file, opt, c);
    all_files.insert(in.file);
  }
  Base b = load_base(c, opt, lookup);

  CalibrationResult res;
  Fitted fitted;
  fit_links(c, b, fitted, res);
  KernelFitter kf{b.peak, figure_value(b.gpu, "kernel_overhead_us", b.gpu_where) * 1e-6, res, {}};
  fit_gemm(c, b, kf, fitted);
  const std::string engine = select_attention_engine(c, opt);
  fit_attention(c, b, kf, fitted, engine);
  if (fitted.fits.contains("attention")) {
    fitted.fits["attention_engine"] = engine;
    res.fitted.push_back(fmt::format("attention curves fitted to the '{}' engine's rows", engine));
  }
  fit_steps(c, b, fitted, res, opt);
  note_unfitted_rows(c);
  for (auto& n : c.notes) res.notes.push_back(std::move(n));
  if (fitted.groups == 0)
    throw Error(fmt::format("calibrate: nothing to fit in {}: no GPU real-rank collective rows (op, size_bytes, time_s, ranks), "
                            "attention rows (op fwd/bwd, seq_len, tflops), GEMM rows (op gemm, m, n, k) or bf16 training steps (plan, "
                            "step_time_s, peak_memory_bytes)", join(all_files)));

  stamp_profile(b, c, opt, all_files, fitted);
  predict_rows(b.system, kf.fitted_points, res);
  b.system["calibration"]["rows"] = res.rows;
  b.system["calibration"]["steps"] = res.steps;
  b.system["calibration"]["notes"] = res.notes;
  res.profile = b.system;
  return res;
}

}  // namespace seqpar::reports

#include "seqpar/reports/calibrate.hpp"
#include "seqpar/sim/presets.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "seqpar/common/error.hpp"
#include "seqpar/reports/fit.hpp"
#include "seqpar/reports/json_input.hpp"

namespace seqpar::reports {

using nlohmann::json;

namespace {

const std::vector<std::string> kCommOps = {"alltoall", "sendrecv", "allgather", "reducescatter", "allreduce"};

// nccl-tests bus factor, for rows that do not carry both algbw and busbw.
double bus_factor(const std::string& op, double ranks) {
  if (op == "allreduce") return 2 * (ranks - 1) / ranks;
  if (op == "sendrecv") return 1;
  return (ranks - 1) / ranks;
}

struct CommPoint { std::string op; double ranks, bus_bytes, time_s; };
struct KernelPoint { std::string op; double tokens, flops_per_s; };

struct Collected {
  std::map<std::string, std::vector<CommPoint>> comm;  // "intra" / "inter"
  std::map<std::string, std::set<std::string>> comm_files;
  std::vector<KernelPoint> attention, gemm;
  std::set<std::string> attention_files, gemm_files;
  std::optional<std::string> gpu_name;
  std::vector<std::string> notes;
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

void collect(const json& doc, const std::string& where, const std::string& file, const CalibrateOptions& opt,
             Collected& c) {
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
    if (env.contains("gpu") && env["gpu"].is_object() && env["gpu"].contains("name") && env["gpu"]["name"].is_string())
      c.gpu_name = env["gpu"]["name"].get<std::string>();
  }
  std::string level;
  if (opt.comm_level != "auto") {
    level = opt.comm_level;
  } else if (auto nodes = node_count(doc, where)) {
    level = *nodes > 1 ? "inter" : "intra";
  }
  const json& results = require_array(doc, "results", where);
  bool comm_skipped_mode = false;
  std::set<std::string> skipped_backends;
  for (std::size_t i = 0; i < results.size(); ++i) {
    std::string w = fmt::format("{}: results[{}]", where, i);
    const json& r = results[i];
    auto op = optional_string(r, "op", w);
    if (!op) continue;
    if (std::find(kCommOps.begin(), kCommOps.end(), *op) != kCommOps.end()) {
      if (mode != "real-ranks") { comm_skipped_mode = true; continue; }
      double ranks = require_number(r, "ranks", w);
      if (ranks < 2) continue;  // a single rank moves nothing over a link
      // seqpar-bench-comm calls the message size "size_bytes" (nccl-tests' "size"); "bytes" is accepted too.
      auto size = optional_number(r, "size_bytes", w);
      if (!size) size = optional_number(r, "bytes", w);
      if (!size) throw Error(fmt::format("{}: missing field 'size_bytes' (the message size in bytes)", w));
      double bytes = *size, t = require_number(r, "time_s", w);
      auto alg = optional_number(r, "algbw_gbps", w), bus = optional_number(r, "busbw_gbps", w);
      double factor = (alg && bus && *alg > 0) ? *bus / *alg : bus_factor(*op, ranks);
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
      double tflops = require_number(r, "tflops", w);
      c.attention.push_back({*op, require_number(r, "seq_len", w), tflops * 1e12});
      c.attention_files.insert(file);
    } else if (*op == "gemm") {
      double m = require_number(r, "m", w);
      double rate;
      if (auto tf = optional_number(r, "tflops", w)) rate = *tf * 1e12;
      else rate = 2 * m * require_number(r, "n", w) * require_number(r, "k", w) / require_number(r, "time_s", w);
      // The efficiency is modelled against the token dimension: m for Y = X W^T and dX, but k for
      // the weight gradient, so rows that name their token count are fitted by it.
      const double tokens = optional_number(r, "tokens", w).value_or(m);
      c.gemm.push_back({*op, tokens, rate});
      c.gemm_files.insert(file);
    }
  }
  if (!skipped_backends.empty())
    c.notes.push_back(fmt::format("{}: attention rows of other backends skipped ({}); the profile models seqpar's kernels",
                                  where, join(skipped_backends)));
  if (comm_skipped_mode)
    c.notes.push_back(fmt::format("{}: communication rows skipped: mode '{}' does not measure real links", where, mode));
}

json figure(double value, std::string source) { return {{"value", value}, {"source", std::move(source)}}; }

double figure_value(const json& j, const char* key, std::string_view what) {
  const json& f = require(j, key, what);
  if (f.is_number()) return f.get<double>();
  return require_number(f, "value", fmt::format("{}: {}", what, key));
}

}  // namespace


CalibrationResult calibrate(const std::vector<InputDocument>& inputs, const CalibrateOptions& opt,
                            const PresetLookup& lookup) {
  if (inputs.empty()) throw Error("calibrate: no input files");
  if (opt.comm_level != "auto" && opt.comm_level != "intra" && opt.comm_level != "inter")
    throw Error(fmt::format("--comm-level '{}' must be intra, inter or auto", opt.comm_level));
  Collected c;
  std::set<std::string> all_files;
  for (const auto& in : inputs) {
    collect(in.doc, in.file, in.file, opt, c);
    all_files.insert(in.file);
  }

  std::string base = opt.base_system;
  if (base.empty()) {
    auto guess = c.gpu_name ? sim::system_for_device_name(*c.gpu_name) : std::nullopt;
    if (!guess)
      throw Error(fmt::format("calibrate: cannot tell the base system from the measurements (GPU name: {}); "
                              "give one with --base-system", c.gpu_name.value_or("not recorded")));
    base = *guess;
  }
  json system = lookup("system", base);
  std::string sys_where = fmt::format("base system '{}'", base);
  json gpu;
  const json& g = require(system, "gpu", sys_where);
  if (g.is_string()) gpu = lookup("gpu", g.get<std::string>());
  else if (g.is_object()) gpu = g;
  else throw Error(fmt::format("{}: field 'gpu' must be a preset name or an object", sys_where));
  std::string gpu_where = fmt::format("{}: gpu", sys_where);
  double peak = figure_value(gpu, "bf16_tflops", gpu_where) * 1e12;

  CalibrationResult res;
  json fits = json::object();
  int fitted_groups = 0;

  for (const char* level : {"intra", "inter"}) {
    auto it = c.comm.find(level);
    if (it == c.comm.end() || it->second.empty()) continue;
    // One collective per level: algorithms differ in latency terms, so mixing them blurs alpha.
    std::string op;
    for (const auto& candidate : kCommOps)
      if (std::any_of(it->second.begin(), it->second.end(), [&](const CommPoint& p) { return p.op == candidate; })) {
        op = candidate;
        break;
      }
    std::vector<double> x, t;
    std::set<double> ranks;
    for (const auto& p : it->second)
      if (p.op == op) { x.push_back(p.bus_bytes); t.push_back(p.time_s); ranks.insert(p.ranks); }
    AlphaBetaFit f = fit_alpha_beta(x, t);
    std::string key = std::string(level) + "_node";
    std::string where = fmt::format("{}: {}", sys_where, key);
    json& link = system[key];
    if (!link.is_object()) throw Error(fmt::format("{}: missing object '{}'", sys_where, key));
    std::string src = fmt::format("fitted by seqpar calibrate from {}: {} {} points ({} ranks, {}-node), "
                                  "alpha-beta on bus bytes, RMS relative residual {:.2f}%",
                                  join(c.comm_files[level]), f.points, op, fmt::join(ranks, "/"), level,
                                  f.rel_residual * 100);
    link["bandwidth_gbps"] = figure(f.bytes_per_s / 1e9, src);
    link["efficiency"] = figure(1.0, "seqpar calibrate: the fitted bandwidth is the achieved bus bandwidth, so the efficiency is 1");
    link["latency_us"] = figure(f.latency_s * 1e6, src);
    fits[key] = {{"op", op}, {"points", f.points}, {"bandwidth_gbps", f.bytes_per_s / 1e9},
                 {"latency_us", f.latency_s * 1e6}, {"rel_residual", f.rel_residual}};
    res.fitted.push_back(fmt::format("{}: {:.1f} GB/s, {:.2f} us latency ({} {} points, residual {:.2f}%)", key,
                                     f.bytes_per_s / 1e9, f.latency_s * 1e6, f.points, op, f.rel_residual * 100));
    ++fitted_groups;
  }

  auto fit_kernels = [&](const std::vector<KernelPoint>& pts, const std::vector<std::string>& ops,
                         const std::vector<std::string>& eff_keys, const char* half_key, const std::set<std::string>& files,
                         const char* what) {
    if (pts.empty()) return;
    std::vector<SaturationSeries> series;
    std::vector<std::string> used_ops, used_keys;
    for (std::size_t k = 0; k < ops.size(); ++k) {
      SaturationSeries s;
      for (const auto& p : pts)
        if (p.op == ops[k]) { s.tokens.push_back(p.tokens); s.flops_per_s.push_back(p.flops_per_s); }
      if (s.tokens.empty()) continue;
      series.push_back(s);
      used_ops.push_back(ops[k]);
      used_keys.push_back(eff_keys[k]);
    }
    SaturationFit f;
    try {
      f = fit_saturation(series, peak);
    } catch (const Error& e) {
      res.notes.push_back(fmt::format("{} not fitted: {}", what, e.what()));
      return;
    }
    std::string src = fmt::format("fitted by seqpar calibrate from {}: {} points, achieved = peak x eff x L/(L + L_half), "
                                  "RMS relative residual {:.2f}%{}", join(files), f.points, f.rel_residual * 100,
                                  f.at_bound ? " (L_half at the search bound: the sizes do not pin it down)" : "");
    json fit_json = {{"points", f.points}, {"half_tokens", f.half_tokens}, {"rel_residual", f.rel_residual}};
    for (std::size_t k = 0; k < series.size(); ++k) {
      if (f.efficiency[k] > 1)
        throw Error(fmt::format("calibrate: fitted {} {:.3f} exceeds 1: the measurements beat the base GPU's peak of "
                                "{} TFLOP/s; choose the right --base-system", used_keys[k], f.efficiency[k], peak / 1e12));
      gpu[used_keys[k]] = figure(f.efficiency[k], src);
      fit_json[used_keys[k]] = f.efficiency[k];
      res.fitted.push_back(fmt::format("{}: {:.3f}", used_keys[k], f.efficiency[k]));
    }
    gpu[half_key] = figure(f.half_tokens, src);
    res.fitted.push_back(fmt::format("{}: {:.0f} ({} points, residual {:.2f}%)", half_key, f.half_tokens, f.points,
                                     f.rel_residual * 100));
    fits[what] = fit_json;
    ++fitted_groups;
  };
  fit_kernels(c.attention, {"fwd", "bwd"}, {"attention_fwd_efficiency", "attention_bwd_efficiency"},
              "attention_half_tokens", c.attention_files, "attention");
  fit_kernels(c.gemm, {"gemm"}, {"gemm_efficiency"}, "gemm_half_tokens", c.gemm_files, "gemm");

  for (auto& n : c.notes) res.notes.push_back(std::move(n));
  if (fitted_groups == 0)
    throw Error(fmt::format("calibrate: nothing to fit in {}: no GPU real-rank collective rows (op, size_bytes, time_s, ranks), "
                            "attention rows (op fwd/bwd, seq_len, tflops) or GEMM rows (op gemm, m, n, k)", join(all_files)));

  std::string gpu_desc = gpu.value("description", std::string(""));
  gpu["description"] = gpu_desc + (gpu_desc.empty() ? "" : " ") + "(calibrated by seqpar calibrate)";
  system["gpu"] = gpu;
  system["name"] = opt.name.empty() ? base + "-calibrated" : opt.name;
  system["description"] = fmt::format("{} calibrated from {} (base preset: {})",
                                      system.value("description", base), join(all_files), base);
  json info = run_info_of_this_process();
  info["base_system"] = base;
  info["inputs"] = json(std::vector<std::string>(all_files.begin(), all_files.end()));
  info["measured_gpu"] = c.gpu_name ? json(*c.gpu_name) : json();
  info["fits"] = fits;
  info["notes"] = res.notes;
  system["calibration"] = info;
  res.profile = system;
  return res;
}

}  // namespace seqpar::reports

#include "seqpar/sim/presets.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <limits>
#include <optional>

#include "preset_fields.hpp"
#include "presets_data.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/sim/efficiency_curves.hpp"
#include "seqpar/sim/framework_terms.hpp"
#include "seqpar/sim/hf_config.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/sim/limits.hpp"

namespace seqpar::sim {

namespace {

using nlohmann::json;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Physical bounds of each figure. Far wider than any real part, but narrow enough that every
// product the cost models form stays a finite, normal double: 1e-320 TFLOP/s or 1e308 GiB would
// otherwise come out as infinite times or memory and be reported as a valid plan.
struct Range {
  double lo, hi;
};
constexpr Range kRate{1e-3, 1e6};         // GB/s, TFLOP/s: 1 MB/s .. 1 PB/s
constexpr Range kMemoryGiB{1e-3, 1e6};    // 1 MiB .. 1 PiB per GPU
constexpr Range kFraction{1e-3, 1.0};     // a share of peak; below 0.1% is a typo, not hardware
constexpr Range kLatencyUs{0, 1e6};       // up to a second per message or kernel
constexpr Range kTokens{0, 1e9};          // efficiency half points
constexpr Range kHostGparams{1e-6, 1e6};  // host optimizer rate, 10^9 params/s

// A figure is {"value": v, "source": "..."} in the built-in presets; a bare number is accepted
// in user files so a quick what-if needs no citation. Must be finite and within `r`.
double figure(const json& j, const char* key, std::string_view what, Range r,
              std::optional<double> fallback = std::nullopt) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (!fallback) throw Error(fmt::format("{}: missing field '{}'", what, key));
    return *fallback;
  }
  const json* v = &*it;
  if (it->is_object()) {
    auto vi = it->find("value");
    if (vi == it->end()) throw Error(fmt::format("{}: field '{}' has no \"value\"", what, key));
    v = &*vi;
  }
  if (!v->is_number())
    throw Error(fmt::format("{}: field '{}' must be a number (got {})", what, key, dump_json(*v, -1)));
  const double x = v->get<double>();
  if (!std::isfinite(x)) throw Error(fmt::format("{}: field '{}' must be a finite number (got {})", what, key, x));
  if (x < r.lo || x > r.hi)
    throw Error(fmt::format("{}: field '{}' must be between {} and {} (got {})", what, key, format_number(r.lo),
                            format_number(r.hi), format_number(x)));
  return x;
}

// A count (GPUs, layers, heads...): a whole number in [1, hi]. The bound keeps the int conversion
// defined and the products of counts (parameters, activations) far from 64-bit overflow.
// Limits print as the whole numbers they are ("above the limit of 4194304", not "4.1943e+06").
int count(const json& j, const char* key, std::string_view what, int hi) {
  const double x = figure(j, key, what, Range{-std::numeric_limits<double>::max(), std::numeric_limits<double>::max()});
  const std::string got = format_number(x);
  if (x != std::floor(x)) throw Error(fmt::format("{}: field '{}' must be a whole number (got {})", what, key, got));
  if (x < 1) throw Error(fmt::format("{}: field '{}' must be at least 1 (got {})", what, key, got));
  if (x > hi) throw Error(fmt::format("{}: field '{}': {} is above the limit of {}", what, key, got, hi));
  return static_cast<int>(x);
}

bool looks_like_path(std::string_view s) {
  return s.find('/') != s.npos || (s.size() > 5 && s.substr(s.size() - 5) == ".json");
}

std::string names_of(std::string_view kind) {
  std::string out;
  for (const auto& p : builtin_presets())
    if (p.kind == kind) out += (out.empty() ? "" : ", ") + p.name;
  return out;
}

const json& builtin(std::string_view kind, std::string_view name) {
  for (const auto& p : builtin_presets())
    if (p.kind == kind && p.name == name) return p.document;
  throw Error(fmt::format("unknown {} preset '{}'; built-in {}s: {} (or give a path to a JSON file)",
                          kind, name, kind, names_of(kind)));
}

// A misspelt key would silently keep a default (efficiency 1, no socket split): refused by name.
void check_link_fields(const json& j, std::string_view what) {
  check_fields(j, {"link", "efficiency", "bandwidth_gbps", "latency_us", "ring_step_latency_us", "nvls_latency_us",
                   "gpus_per_socket", "cross_socket_gbps", "nics_per_node", "nic_gbps"},
               what);
}

// NCCL's own per-step latencies of a ring collective under its Simple protocol (the one large
// messages use), src/graph/tuning.cc hwLat[...][Ring][Simple] (NCCL 2.19-2.27): NVLink 3.4 us,
// PCIe 5.7 us, the network 14 us. A system file without `ring_step_latency_us` gets these.
constexpr double kNcclRingStepNvlinkUs = 3.4, kNcclRingStepPcieUs = 5.7, kNcclRingStepNetworkUs = 14.0;

Link link_from_json(const json& j, std::string_view what, bool across_nodes) {
  if (!j.is_object()) throw Error(fmt::format("{}: expected an object", what));
  check_link_fields(j, what);
  Link l;
  std::string kind = string_field(j, "link", what, "nvswitch");
  if (kind == "nvswitch") l.kind = LinkKind::nvswitch;
  else if (kind == "nvlink") l.kind = LinkKind::nvlink;
  else if (kind == "pcie") l.kind = LinkKind::pcie;
  else if (kind == "network") l.kind = LinkKind::nvswitch;  // inter-node: only rate and latency matter
  else throw Error(fmt::format("{}: field 'link' must be nvswitch, nvlink or pcie (got '{}')", what, kind));
  const double eff = figure(j, "efficiency", what, kFraction, 1.0);
  l.bytes_per_s = figure(j, "bandwidth_gbps", what, kRate) * 1e9 * eff;
  l.latency_s = figure(j, "latency_us", what, kLatencyUs) * 1e-6;
  const double nccl_step_us = across_nodes ? kNcclRingStepNetworkUs
                              : l.kind == LinkKind::pcie ? kNcclRingStepPcieUs
                                                         : kNcclRingStepNvlinkUs;
  l.ring_step_latency_s = figure(j, "ring_step_latency_us", what, kLatencyUs, nccl_step_us) * 1e-6;
  if (across_nodes && j.contains("nvls_latency_us"))
    throw Error(fmt::format("{}: 'nvls_latency_us' belongs to intra_node: NVLink SHARP works inside a node's NVLink "
                            "domain",
                            what));
  l.nvls_latency_s = figure(j, "nvls_latency_us", what, kLatencyUs, 0.0) * 1e-6;
  if (l.kind == LinkKind::pcie) {
    l.gpus_per_socket = count(j, "gpus_per_socket", what, limits::kMaxGpusPerNode);
    l.cross_socket_bytes_per_s = figure(j, "cross_socket_gbps", what, kRate) * 1e9;
  }
  return l;
}

// inter_node names its NICs (nics_per_node and nic_gbps, both or neither) or only the per-GPU
// share (bandwidth_gbps). With the NICs alone, the share is derived: nics x nic_gbps / GPUs.
// With all three (a calibrated profile keeps its base preset's NICs and writes the fitted share),
// the share stands and the NIC rate is scaled from it in read_nics.
json nic_derived_link(const json& inter, int gpus_per_node, std::string_view what) {
  if (!inter.is_object()) return inter;  // link_from_json says what is wrong
  check_link_fields(inter, what);  // before the NIC rule reads a key that may be misspelt
  const bool has_nics = inter.contains("nics_per_node"), has_rate = inter.contains("nic_gbps");
  if (has_nics != has_rate)
    throw Error(fmt::format("{}: give both 'nics_per_node' and 'nic_gbps', or neither (then 'bandwidth_gbps' is the "
                            "per-GPU share of the NICs)",
                            what));
  if (!has_nics || inter.contains("bandwidth_gbps")) return inter;
  json out = inter;
  const int nics = count(inter, "nics_per_node", what, limits::kMaxGpusPerNode);
  out["bandwidth_gbps"] = figure(inter, "nic_gbps", what, kRate) * nics / gpus_per_node;
  return out;
}

void read_nics(const json& inter, std::string_view what, System& s) {
  if (!inter.contains("nics_per_node")) return;  // one NIC per GPU at the share (System's default)
  s.nics_per_node = count(inter, "nics_per_node", what, limits::kMaxGpusPerNode);
  s.nic_bytes_per_s = s.inter.bytes_per_s * s.gpus_per_node / s.nics_per_node;
}

}  // namespace

std::string string_field(const json& j, const char* key, std::string_view what, const char* fallback) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (fallback) return fallback;
    throw Error(fmt::format("{}: missing field '{}'", what, key));
  }
  if (!it->is_string()) throw Error(fmt::format("{}: field '{}' must be a string", what, key));
  return it->get<std::string>();
}

// A preset's name labels every table and keys every sweep point: it cannot be empty.
std::string preset_name(const json& j, std::string_view what) {
  std::string name = string_field(j, "name", what);
  if (name.find_first_not_of(" \t") == std::string::npos)
    throw Error(fmt::format("{}: field 'name' is empty; give the preset a name", what));
  return name;
}

namespace {
// A two-kind field (mlp, norm, positions): its name, `first` when absent.
template <class E>
E kind_field(const json& j, const char* key, std::string_view what, E first, E second) {
  const std::string name = string_field(j, key, what, std::string(to_string(first)).c_str());
  E k = first;
  if (!kind_named(name, k))
    throw Error(fmt::format("{}: field '{}' must be {} or {} (got '{}')", what, key, to_string(first), to_string(second),
                            name));
  return k;
}
}  // namespace

const std::vector<PresetEntry>& builtin_presets() {
  static const std::vector<PresetEntry> all = [] {
    std::vector<PresetEntry> out;
    for (const auto& e : detail::embedded_presets()) {
      const json doc = parse_json(e.content, e.path);
      std::string kind = e.kind;
      if (!kind.empty() && kind.back() == 's') kind.pop_back();
      out.push_back({kind, string_field(doc, "name", e.path), string_field(doc, "description", e.path, ""), doc});
    }
    return out;
  }();
  return all;
}

std::string compute_capability_text(const json& v, std::string_view what) {
  const json& x = v.is_object() && v.contains("value") ? v["value"] : v;
  const std::string t = x.is_string() ? x.get<std::string>() : std::string();
  const auto dot = t.find('.');
  const bool digits = dot != std::string::npos && dot > 0 && dot + 1 < t.size() &&
                      t.find_first_not_of("0123456789.") == std::string::npos && t.find('.', dot + 1) == std::string::npos;
  if (!digits)
    throw Error(fmt::format("{}: a compute capability is \"major.minor\" as CUDA names it, e.g. \"9.0\" (got {})", what,
                            dump_json(x, -1)));
  return t;
}

namespace {
// "varlen_attention": {"lengths": [...], "tflops": [...], "causal": bool, "source": "..."}, or only a
// source saying that no measurement exists and what is assumed (hardware.hpp: VarlenAttention).
VarlenAttention varlen_from_json(const json& gpu, std::string_view gpu_what) {
  VarlenAttention v;
  auto it = gpu.find("varlen_attention");
  if (it == gpu.end()) {
    v.source = "no measurement in the preset; assumed: a tile of a short document runs at the long-sequence rate "
               "(only whole tiles are charged)";
    return v;
  }
  const std::string what = fmt::format("{}: varlen_attention", gpu_what);
  if (!it->is_object()) throw Error(fmt::format("{}: expected an object", what));
  v.source = string_field(*it, "source", what);
  const bool has_l = it->contains("lengths"), has_t = it->contains("tflops");
  if (has_l != has_t) throw Error(fmt::format("{}: 'lengths' and 'tflops' go together", what));
  if (!has_l) {
    if (v.source.rfind("no measurement", 0) != 0)
      throw Error(fmt::format("{}: without 'lengths' and 'tflops' the source must say \"no measurement ...; assumed "
                              "...\"", what));
    return v;
  }
  const json &l = (*it)["lengths"], &t = (*it)["tflops"];
  if (!l.is_array() || !t.is_array() || l.size() != t.size() || l.size() < 2)
    throw Error(fmt::format("{}: 'lengths' and 'tflops' must be arrays of the same size, at least two points", what));
  for (std::size_t i = 0; i < l.size(); ++i) {
    if (!l[i].is_number_integer() || l[i].get<std::int64_t>() < 1 || l[i].get<std::int64_t>() > (std::int64_t{1} << 30) ||
        (i > 0 && l[i].get<std::int64_t>() <= v.lengths.back()))
      throw Error(fmt::format("{}: lengths[{}] must be a whole number of tokens from 1 to 2^30, rising", what, i));
    if (!t[i].is_number() || !std::isfinite(t[i].get<double>()) || t[i].get<double>() < kRate.lo ||
        t[i].get<double>() > kRate.hi)
      throw Error(fmt::format("{}: tflops[{}] must be a rate from {} to {} TFLOP/s", what, i, kRate.lo, kRate.hi));
    v.lengths.push_back(l[i].get<std::int64_t>());
    v.flops_per_s.push_back(t[i].get<double>() * 1e12);
  }
  if (auto c = it->find("causal"); c != it->end()) {
    if (!c->is_boolean()) throw Error(fmt::format("{}: field 'causal' must be true or false", what));
    v.causal = c->get<bool>();
  }
  return v;
}
}  // namespace

Gpu gpu_from_json(const json& j, std::string_view what) {
  if (!j.is_object()) throw Error(fmt::format("{}: expected a JSON object", what));
  check_preset_fields(j, "gpu", what);
  Gpu g;
  g.name = preset_name(j, what);
  if (auto cc = j.find("compute_capability"); cc != j.end())
    g.compute_capability = compute_capability_text(*cc, fmt::format("{}: compute_capability", what));
  g.memory_bytes = figure(j, "memory_gib", what, kMemoryGiB) * kGiB;
  g.bf16_flops = figure(j, "bf16_tflops", what, kRate) * 1e12;
  g.hbm_bytes_per_s = figure(j, "hbm_gbps", what, kRate) * 1e9;
  g.pcie_bytes_per_s = figure(j, "pcie_gbps", what, kRate) * 1e9;
  // Efficiencies are fractions of peak: kFraction's upper bound of 1 is the rule, not a guess.
  g.gemm_efficiency = figure(j, "gemm_efficiency", what, kFraction);
  g.gemm_half_tokens = figure(j, "gemm_half_tokens", what, kTokens);
  g.attention_fwd_efficiency = figure(j, "attention_fwd_efficiency", what, kFraction);
  g.attention_bwd_efficiency = figure(j, "attention_bwd_efficiency", what, kFraction);
  g.attention_half_tokens = figure(j, "attention_half_tokens", what, kTokens);
  g.kernel_overhead_s = figure(j, "kernel_overhead_us", what, kLatencyUs) * 1e-6;
  g.reserved_bytes = figure(j, "reserved_gib", what, Range{0, kMemoryGiB.hi}) * kGiB;
  // The reserve is held out of the memory: as large as the memory, no plan could ever fit.
  if (g.reserved_bytes >= g.memory_bytes)
    throw Error(fmt::format("{}: field 'reserved_gib' ({} GiB) must be below 'memory_gib' ({} GiB): the reserve is "
                            "part of the GPU's memory", what, format_number(g.reserved_bytes / kGiB),
                            format_number(g.memory_bytes / kGiB)));
  g.attention_bwd_expands_kv_grads = figure(j, "attention_bwd_expands_kv_grads", what, Range{0, 1}, 0.0) != 0;
  // fp32 values per query row and head of the backward's workspace: a x head_dim + b (hardware.hpp).
  g.attention_bwd_workspace_per_head_dim = figure(j, "attention_bwd_workspace_per_head_dim", what, Range{0, 64}, 1.0);
  g.attention_bwd_workspace_per_row = figure(j, "attention_bwd_workspace_per_row", what, Range{0, 1e4}, 1.0);
  g.attention_fwd_workspace_per_head_dim = figure(j, "attention_fwd_workspace_per_head_dim", what, Range{0, 64}, 0.0);
  g.attention_score_bound_head_dim = figure(j, "attention_score_bound_head_dim", what, Range{0, 1e4}, 0.0);
  read_efficiency_curves(j, what, g);  // calibrated curves (optional): efficiency_curves.hpp
  g.varlen = varlen_from_json(j, what);
  // FP8 (optional): a GPU without FP8 tensor cores leaves these out.
  g.fp8_flops = figure(j, "fp8_tflops", what, Range{0, kRate.hi}, 0.0) * 1e12;
  g.fp4_flops = figure(j, "fp4_tflops", what, Range{0, kRate.hi}, 0.0) * 1e12;
  if (g.fp8_flops > 0) {
    g.fp8_gemm_efficiency = figure(j, "fp8_gemm_efficiency", what, kFraction);
    g.fp8_gemm_half_tokens = figure(j, "fp8_gemm_half_tokens", what, kTokens, g.gemm_half_tokens);
    g.fp8_gemm_exponent = figure(j, "fp8_gemm_exponent", what, Range{0.1, 20}, g.gemm_exponent);
  } else {
    for (const char* k : {"fp8_gemm_efficiency", "fp8_gemm_half_tokens", "fp8_gemm_exponent", "fp8_attention_fwd_efficiency",
                          "fp8_attention_bwd_efficiency"})
      if (j.contains(k)) throw Error(fmt::format("{}: field '{}' needs 'fp8_tflops', the FP8 peak it is a share of", what, k));
  }
  g.fp8_attention_fwd_efficiency = figure(j, "fp8_attention_fwd_efficiency", what, Range{0, 1}, 0.0);
  g.fp8_attention_bwd_efficiency = figure(j, "fp8_attention_bwd_efficiency", what, Range{0, 1}, 0.0);
  return g;
}

int Gpu::compute_major() const {
  int major = 0;
  for (char c : compute_capability) {
    if (c < '0' || c > '9') break;
    major = major * 10 + (c - '0');
  }
  return major;
}

System system_from_json(const json& j, std::string_view what) {
  if (!j.is_object()) throw Error(fmt::format("{}: expected a JSON object", what));
  check_preset_fields(j, "system", what);
  System s;
  s.name = preset_name(j, what);
  auto gi = j.find("gpu");
  if (gi == j.end()) throw Error(fmt::format("{}: missing field 'gpu'", what));
  // A GPU file's errors are named under the system that gives it, as its read errors are.
  if (gi->is_string())
    s.gpu = gpu_from_json(nested_preset_document("gpu", gi->get<std::string>(), what),
                          fmt::format("{}: gpu: {}", what, preset_label("gpu", gi->get<std::string>())));
  else s.gpu = gpu_from_json(*gi, fmt::format("{}: gpu", what));
  s.gpus_per_node = count(j, "gpus_per_node", what, limits::kMaxGpusPerNode);
  auto intra = j.find("intra_node");
  auto inter = j.find("inter_node");
  if (intra == j.end()) throw Error(fmt::format("{}: missing field 'intra_node'", what));
  if (inter == j.end()) throw Error(fmt::format("{}: missing field 'inter_node'", what));
  s.intra = link_from_json(*intra, fmt::format("{}: intra_node", what), false);
  s.inter = link_from_json(nic_derived_link(*inter, s.gpus_per_node, fmt::format("{}: inter_node", what)),
                           fmt::format("{}: inter_node", what), true);
  read_nics(*inter, fmt::format("{}: inter_node", what), s);
  s.host_adam_params_per_s = figure(j, "host_adam_gparams_per_s", what, kHostGparams) * 1e9;
  s.host_memory_bytes = figure(j, "host_memory_gib", what, Range{0, kMemoryGiB.hi}, 0.0) * kGiB;
  read_framework_terms(j, what, s);  // calibrated from measured steps (optional): framework_terms.hpp
  if (!s.framework_calibrated) use_framework(s, s.profile);  // the default framework's time terms
  return s;
}

namespace {
// How many of a group of fields that go together (a mixture of experts', latent attention's, the
// linear layers') a preset gives: all of them or none is the rule each group states.
template <std::size_t N>
int fields_given(const json& j, const char* const (&keys)[N]) {
  int given = 0;
  for (const char* k : keys) given += j.contains(k) ? 1 : 0;
  return given;
}

// Attention kinds (model.hpp), as Hugging Face configs give them: "sliding_window" W alone makes
// every layer sliding (Mistral v0.1); with "sliding_window_pattern" P layer i (from 0) is full when
// (i + 1) is a multiple of P, else sliding (transformers' Gemma3TextConfig); or "layer_types"
// names every layer ("full_attention", "sliding_attention"). Absent: every layer full.
void read_attention_kinds(const json& j, std::string_view what, Model& m) {
  const bool has_window = j.contains("sliding_window"), has_pattern = j.contains("sliding_window_pattern");
  const bool has_interval = j.contains("full_attention_interval");
  auto types = j.find("layer_types");
  if (int(has_pattern) + int(has_interval) + int(types != j.end()) > 1)
    throw Error(fmt::format("{}: give one of 'sliding_window_pattern', 'full_attention_interval' and 'layer_types' "
                            "(each says which layers are of which kind)", what));
  if (has_window) m.sliding_window = count(j, "sliding_window", what, 1 << 30);
  if (types != j.end()) {
    if (!types->is_array() || static_cast<std::int64_t>(types->size()) != m.layers)
      throw Error(fmt::format("{}: field 'layer_types' must list one attention type per layer ({} layers)", what,
                              m.layers));
    for (const json& t : *types) {
      AttentionKind k{};
      if (!t.is_string() || !kind_named(t.get<std::string>(), k))
        throw Error(fmt::format("{}: field 'layer_types' has {}: each must be \"full_attention\", "
                                "\"sliding_attention\" or \"linear_attention\"", what, dump_json(t, -1)));
      m.layer_kinds.push_back(k);
    }
  } else if (has_interval) {
    // transformers' Qwen3NextConfig: layer i is full attention when (i + 1) % interval == 0, else linear.
    const int interval = count(j, "full_attention_interval", what, limits::kMaxLayers);
    for (int i = 0; i < m.layers; ++i)
      m.layer_kinds.push_back((i + 1) % interval == 0 ? AttentionKind::full : AttentionKind::linear);
  } else if (has_pattern) {
    const int pattern = count(j, "sliding_window_pattern", what, limits::kMaxLayers);
    for (int i = 0; i < m.layers; ++i)
      m.layer_kinds.push_back((i + 1) % pattern == 0 ? AttentionKind::full : AttentionKind::sliding);
  } else if (has_window) {
    m.layer_kinds.assign(static_cast<std::size_t>(m.layers), AttentionKind::sliding);
  }
  if (m.sliding_layers() > 0 && !has_window)
    throw Error(fmt::format("{}: sliding layers need 'sliding_window' (the tokens a query sees, itself included)", what));
  if (m.sliding_layers() > 0 && !m.causal)
    throw Error(fmt::format("{}: sliding layers are a causal band; model '{}' is not causal", what, m.name));
  if (has_window && m.sliding_layers() == 0)
    throw Error(fmt::format("{}: field 'sliding_window' is given but no layer slides ('layer_types' lists only "
                            "full_attention layers): drop it", what));
}

// A mixture of experts (model.hpp: Experts): "experts" (routed experts), "experts_per_token" (top-k)
// and "expert_ffn_hidden" together, or none of them (a dense model); "shared_experts" with
// "shared_expert_ffn_hidden"; "dense_layers" leading dense layers; "expert_imbalance" the busiest
// expert's load over the mean (1 when absent: a balanced router).
void read_experts(const json& j, std::string_view what, Model& m) {
  const char* required[] = {"experts", "experts_per_token", "expert_ffn_hidden"};
  const int given = fields_given(j, required);
  const bool extras = j.contains("shared_experts") || j.contains("shared_expert_ffn_hidden") ||
                      j.contains("dense_layers") || j.contains("expert_imbalance");
  if (given == 0) {
    if (extras)
      throw Error(fmt::format("{}: shared_experts, shared_expert_ffn_hidden, dense_layers and expert_imbalance describe "
                              "a mixture of experts: give 'experts', 'experts_per_token' and 'expert_ffn_hidden' too",
                              what));
    return;
  }
  if (given != 3)
    throw Error(fmt::format("{}: a mixture of experts needs all of 'experts', 'experts_per_token' and "
                            "'expert_ffn_hidden'", what));
  Experts& e = m.experts;
  e.routed = count(j, "experts", what, limits::kMaxHeads);
  e.top_k = count(j, "experts_per_token", what, limits::kMaxHeads);
  e.ffn = count(j, "expert_ffn_hidden", what, limits::kMaxFfnHidden);
  if (e.top_k > e.routed)
    throw Error(fmt::format("{}: experts_per_token {} is more than the {} experts", what, e.top_k, e.routed));
  if (j.contains("shared_experts") != j.contains("shared_expert_ffn_hidden"))
    throw Error(fmt::format("{}: give both 'shared_experts' and 'shared_expert_ffn_hidden' (the width of each), or "
                            "neither", what));
  if (j.contains("shared_experts")) {
    e.shared = count(j, "shared_experts", what, limits::kMaxHeads);
    e.shared_ffn = count(j, "shared_expert_ffn_hidden", what, limits::kMaxFfnHidden);
  }
  if (j.contains("dense_layers")) {
    const json& d = j["dense_layers"];
    const json& v = d.is_object() && d.contains("value") ? d["value"] : d;
    // 0 is a valid count here (every layer MoE), so it is not a count() field.
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() >= m.layers)
      throw Error(fmt::format("{}: field 'dense_layers' must be a whole number from 0 to layers - 1 = {} (got {})", what,
                              m.layers - 1, dump_json(v, -1)));
    e.dense_layers = static_cast<int>(v.get<std::int64_t>());
  }
  // 1 (balanced) to the whole batch on one expert (routed / top_k times the mean).
  e.imbalance = figure(j, "expert_imbalance", what, Range{1.0, double(e.routed) / e.top_k}, 1.0);
  if (m.mlp != MlpKind::swiglu)
    throw Error(fmt::format("{}: experts are SwiGLU MLPs (gate, up, down) in every MoE family seqpar reads; model "
                            "'{}' has mlp '{}'", what, m.name, to_string(m.mlp)));
}
}  // namespace

// Latent attention (model.hpp: Latent): "kv_lora_rank", "qk_rope_head_dim" and "v_head_dim"
// together, with "q_lora_rank" optional (0 or absent: q projected from the hidden state), or none
// of them. "head_dim" is then the q/k heads' width, qk_nope_head_dim + qk_rope_head_dim.
void read_latent(const json& j, std::string_view what, Model& m) {
  const char* required[] = {"kv_lora_rank", "qk_rope_head_dim", "v_head_dim"};
  const int given = fields_given(j, required);
  if (given == 0) {
    if (j.contains("q_lora_rank"))
      throw Error(fmt::format("{}: q_lora_rank describes latent attention: give 'kv_lora_rank', 'qk_rope_head_dim' "
                              "and 'v_head_dim' too", what));
    return;
  }
  if (given != 3)
    throw Error(fmt::format("{}: latent attention needs all of 'kv_lora_rank', 'qk_rope_head_dim' and 'v_head_dim'",
                            what));
  Latent& l = m.latent;
  l.kv_rank = count(j, "kv_lora_rank", what, limits::kMaxHidden);
  l.rope_dim = count(j, "qk_rope_head_dim", what, limits::kMaxHeadDim);
  m.v_head_dim = count(j, "v_head_dim", what, limits::kMaxHeadDim);
  if (j.contains("q_lora_rank")) {
    const json& d = j["q_lora_rank"];
    const json& v = d.is_object() && d.contains("value") ? d["value"] : d;
    // 0 is valid here (q projected directly, DeepSeek-V2-Lite), so it is not a count() field.
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > limits::kMaxHidden)
      throw Error(fmt::format("{}: field 'q_lora_rank' must be a whole number from 0 to {} (got {})", what,
                              limits::kMaxHidden, dump_json(v, -1)));
    l.q_rank = static_cast<int>(v.get<std::int64_t>());
  }
  if (l.rope_dim >= m.head_dim)
    throw Error(fmt::format("{}: qk_rope_head_dim {} must be less than head_dim {} (head_dim = qk_nope_head_dim + "
                            "qk_rope_head_dim: each key has a non-rotary part up-projected from the latent)",
                            what, l.rope_dim, m.head_dim));
  if (m.kv_heads != m.heads)
    throw Error(fmt::format("{}: latent attention up-projects a key and a value for every head: kv_heads {} must equal "
                            "heads {}", what, m.kv_heads, m.heads));
  if (m.positions != PositionKind::rope)
    throw Error(fmt::format("{}: latent attention rotates qk_rope_head_dim of each head: positions must be 'rope'",
                            what));
}

// Linear-attention layers (model.hpp: LinearAttention), in Qwen3NextConfig's keys:
// "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim"
// and "linear_conv_kernel_dim", all of them where a layer is "linear_attention", none otherwise.
void read_linear(const json& j, std::string_view what, Model& m) {
  const char* keys[] = {"linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                        "linear_value_head_dim", "linear_conv_kernel_dim"};
  const int given = fields_given(j, keys);
  if (m.linear_layers() == 0) {
    if (given > 0)
      throw Error(fmt::format("{}: the linear_* fields describe linear-attention layers, but no layer is "
                              "\"linear_attention\" (layer_types or full_attention_interval): drop them", what));
    return;
  }
  if (given != 5)
    throw Error(fmt::format("{}: linear-attention layers need all of 'linear_num_key_heads', 'linear_num_value_heads', "
                            "'linear_key_head_dim', 'linear_value_head_dim' and 'linear_conv_kernel_dim'", what));
  LinearAttention& l = m.linear;
  l.key_heads = count(j, "linear_num_key_heads", what, limits::kMaxHeads);
  l.value_heads = count(j, "linear_num_value_heads", what, limits::kMaxHeads);
  l.key_dim = count(j, "linear_key_head_dim", what, limits::kMaxHeadDim);
  l.value_dim = count(j, "linear_value_head_dim", what, limits::kMaxHeadDim);
  l.conv_kernel = count(j, "linear_conv_kernel_dim", what, limits::kMaxHeadDim);
  if (l.value_heads % l.key_heads != 0)
    throw Error(fmt::format("{}: linear_num_value_heads {} must be a multiple of linear_num_key_heads {} (q and k are "
                            "repeated to the value heads: Qwen3NextGatedDeltaNet)", what, l.value_heads, l.key_heads));
  if (!m.causal)
    throw Error(fmt::format("{}: linear-attention layers are a causal recurrence; model '{}' is not causal", what,
                            m.name));
}

Model model_from_json(const json& j, std::string_view what) {
  if (!j.is_object()) throw Error(fmt::format("{}: expected a JSON object", what));
  // A misspelt optional key ("tied_embedding") would silently keep its default: refused by name.
  check_preset_fields(j, "model", what);
  Model m;
  m.name = preset_name(j, what);
  m.layers = count(j, "layers", what, limits::kMaxLayers);
  m.hidden = count(j, "hidden", what, limits::kMaxHidden);
  m.heads = count(j, "heads", what, limits::kMaxHeads);
  m.kv_heads = count(j, "kv_heads", what, limits::kMaxHeads);
  m.head_dim = count(j, "head_dim", what, limits::kMaxHeadDim);
  m.ffn_hidden = count(j, "ffn_hidden", what, limits::kMaxFfnHidden);
  m.vocab = count(j, "vocab", what, limits::kMaxVocab);
  m.mlp = kind_field(j, "mlp", what, MlpKind::swiglu, MlpKind::gelu);
  m.positions = kind_field(j, "positions", what, PositionKind::rope, PositionKind::learned);
  m.norm = kind_field(j, "norm", what, NormKind::rmsnorm, NormKind::layernorm);
  if (auto c = j.find("causal"); c != j.end()) {
    if (!c->is_boolean()) throw Error(fmt::format("{}: field 'causal' must be true or false", what));
    m.causal = c->get<bool>();
  }
  auto tied = j.find("tied_embeddings");
  if (tied != j.end()) {
    if (!tied->is_boolean()) throw Error(fmt::format("{}: field 'tied_embeddings' must be true or false", what));
    m.tied_embeddings = tied->get<bool>();
  }
  // Attention sinks (model.hpp): a switch; its source, as for layer_types, under "sources".
  if (auto sinks = j.find("attention_sinks"); sinks != j.end()) {
    if (!sinks->is_boolean())
      throw Error(fmt::format("{}: field 'attention_sinks' must be true or false (one learned logit per head in every "
                              "layer's softmax, as gpt-oss has)", what));
    m.attention_sinks = sinks->get<bool>();
  }
  if (m.heads % m.kv_heads != 0)
    throw Error(fmt::format("{}: heads {} must be a multiple of kv_heads {} (grouped-query attention)", what, m.heads, m.kv_heads));
  read_attention_kinds(j, what, m);
  read_experts(j, what, m);
  read_latent(j, what, m);
  read_linear(j, what, m);
  for (const char* k : {"layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab", "sliding_window",
                        "sliding_window_pattern", "experts", "experts_per_token", "expert_ffn_hidden", "shared_experts",
                        "shared_expert_ffn_hidden", "dense_layers", "expert_imbalance", "q_lora_rank", "kv_lora_rank",
                        "qk_rope_head_dim", "v_head_dim", "full_attention_interval", "linear_num_key_heads",
                        "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
                        "linear_conv_kernel_dim"}) {
    auto f = j.find(k);  // present: count() above required it
    if (f == j.end() || !f->is_object()) continue;
    if (auto src = f->find("source"); src != f->end() && src->is_string()) m.sources[k] = src->get<std::string>();
  }
  if (auto src = j.find("sources"); src != j.end()) {
    if (!src->is_object()) throw Error(fmt::format("{}: field 'sources' must be an object of field -> source", what));
    for (const auto& [k, v] : src->items()) {
      if (!v.is_string()) throw Error(fmt::format("{}: sources: '{}' must be a string", what, k));
      m.sources.emplace(k, v.get<std::string>());  // a figure's own "source" comes first
    }
  }
  return m;
}

std::optional<std::string> system_for_device_name(std::string_view device_name) {
  std::string n;
  for (char ch : device_name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  if (has("h100")) return "dgx-h100";
  if (has("h200")) return "hgx-h200";
  if (has("h800")) return "h800-nvlink";
  if (has("a800")) return "a800-nvlink";
  if (has("a100")) return has("40gb") ? "dgx-a100-40g" : "dgx-a100-80g";
  if (has("l20")) return "l20-pcie";
  return std::nullopt;
}

json preset_document(std::string_view kind, std::string_view s) {
  if (!looks_like_path(s)) return builtin(kind, s);
  json doc = read_json_file(std::string(s));
  // A Hugging Face config.json is accepted wherever a model preset is: translated here, once, so
  // every program that loads a model (simulator, training step, benchmarks) reads it the same way.
  if (kind == "model" && is_hf_config(doc)) return model_preset_from_hf_config(doc, s);
  // Named as what it is for every reader, the calibrator's raw reads of a base system included.
  refuse_other_preset_kind(doc, kind, s);
  return doc;
}

std::string preset_label(std::string_view kind, std::string_view s) {
  return looks_like_path(s) ? std::string(s) : fmt::format("{} preset '{}'", kind, s);
}

json nested_preset_document(std::string_view kind, std::string_view name_or_path, std::string_view what) {
  try {
    return preset_document(kind, name_or_path);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}: {}", what, kind, e.what()));
  }
}

Gpu load_gpu(std::string_view s) { return gpu_from_json(preset_document("gpu", s), preset_label("gpu", s)); }
System load_system(std::string_view s) { return system_from_json(preset_document("system", s), preset_label("system", s)); }
Model load_model(std::string_view s) { return model_from_json(preset_document("model", s), preset_label("model", s)); }

void use_framework(System& s, const Framework& f) {
  if (s.framework_calibrated && s.profile.name != f.name)
    throw Error(fmt::format("--framework {}: system '{}' carries framework terms calibrated over framework '{}'; use that "
                            "framework, or calibrate again with --framework {}",
                            f.name, s.name, s.profile.name, f.name));
  const bool calibrated = s.framework_calibrated;
  s.profile = f;
  if (calibrated) return;  // the fitted time terms stand
  for (const FrameworkTermSpec& t : kFrameworkTerms)
    if (t.target == FrameworkTarget::step_time) s.framework.*t.field = f.time.*t.field;
}

}  // namespace seqpar::sim

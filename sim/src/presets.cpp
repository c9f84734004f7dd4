#include "seqpar/sim/presets.hpp"

#include <fmt/format.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "presets_data.hpp"
#include "seqpar/common/error.hpp"
#include "seqpar/sim/efficiency_curves.hpp"

namespace seqpar::sim {

namespace {

using nlohmann::json;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// A figure is {"value": v, "source": "..."} in the built-in presets; a bare number is accepted
// in user files so a quick what-if needs no citation.
double figure(const json& j, const char* key, std::string_view what, bool required = true,
              double fallback = 0) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (required) throw Error(fmt::format("{}: missing field '{}'", what, key));
    return fallback;
  }
  const json* v = &*it;
  if (it->is_object()) {
    auto vi = it->find("value");
    if (vi == it->end()) throw Error(fmt::format("{}: field '{}' has no \"value\"", what, key));
    v = &*vi;
  }
  if (!v->is_number())
    throw Error(fmt::format("{}: field '{}' must be a number (got {})", what, key, v->dump()));
  double x = v->get<double>();
  if (!(x >= 0)) throw Error(fmt::format("{}: field '{}' must not be negative (got {})", what, key, x));
  return x;
}

double positive(const json& j, const char* key, std::string_view what) {
  double x = figure(j, key, what);
  if (x <= 0) throw Error(fmt::format("{}: field '{}' must be positive (got {})", what, key, x));
  return x;
}

int positive_int(const json& j, const char* key, std::string_view what) {
  double x = positive(j, key, what);
  if (x != static_cast<double>(static_cast<int>(x)))
    throw Error(fmt::format("{}: field '{}' must be a whole number (got {})", what, key, x));
  return static_cast<int>(x);
}

std::string text(const json& j, const char* key, std::string_view what, const char* fallback = nullptr) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (fallback) return fallback;
    throw Error(fmt::format("{}: missing field '{}'", what, key));
  }
  if (!it->is_string()) throw Error(fmt::format("{}: field '{}' must be a string", what, key));
  return it->get<std::string>();
}

bool looks_like_path(std::string_view s) {
  return s.find('/') != s.npos || (s.size() > 5 && s.substr(s.size() - 5) == ".json");
}

json read_json_file(std::string_view path) {
  std::ifstream in{std::string(path)};
  if (!in) throw Error(fmt::format("{}: cannot open file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::parse_error& e) {
    throw Error(fmt::format("{}: malformed JSON: {}", path, e.what()));
  }
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

Link link_from_json(const json& j, std::string_view what) {
  if (!j.is_object()) throw Error(fmt::format("{}: expected an object", what));
  Link l;
  std::string kind = text(j, "link", what, "nvswitch");
  if (kind == "nvswitch") l.kind = LinkKind::nvswitch;
  else if (kind == "nvlink") l.kind = LinkKind::nvlink;
  else if (kind == "pcie") l.kind = LinkKind::pcie;
  else if (kind == "network") l.kind = LinkKind::nvswitch;  // inter-node: only rate and latency matter
  else throw Error(fmt::format("{}: field 'link' must be nvswitch, nvlink or pcie (got '{}')", what, kind));
  double eff = figure(j, "efficiency", what, false, 1.0);
  if (eff <= 0 || eff > 1) throw Error(fmt::format("{}: field 'efficiency' must be in (0, 1] (got {})", what, eff));
  l.bytes_per_s = positive(j, "bandwidth_gbps", what) * 1e9 * eff;
  l.latency_s = figure(j, "latency_us", what) * 1e-6;
  if (l.kind == LinkKind::pcie) {
    l.gpus_per_socket = positive_int(j, "gpus_per_socket", what);
    l.cross_socket_bytes_per_s = positive(j, "cross_socket_gbps", what) * 1e9;
  }
  return l;
}

}  // namespace

const std::vector<PresetEntry>& builtin_presets() {
  static const std::vector<PresetEntry> all = [] {
    std::vector<PresetEntry> out;
    for (const auto& e : detail::embedded_presets()) {
      json doc;
      try {
        doc = json::parse(e.content);
      } catch (const json::parse_error& err) {
        throw Error(fmt::format("{}: malformed built-in preset: {}", e.path, err.what()));
      }
      std::string kind = e.kind;
      if (!kind.empty() && kind.back() == 's') kind.pop_back();
      out.push_back({kind, text(doc, "name", e.path), text(doc, "description", e.path, ""), doc});
    }
    return out;
  }();
  return all;
}

Gpu gpu_from_json(const json& j, std::string_view what) {
  if (!j.is_object()) throw Error(fmt::format("{}: expected a JSON object", what));
  Gpu g;
  g.name = text(j, "name", what);
  g.memory_bytes = positive(j, "memory_gib", what) * kGiB;
  g.bf16_flops = positive(j, "bf16_tflops", what) * 1e12;
  g.hbm_bytes_per_s = positive(j, "hbm_gbps", what) * 1e9;
  g.pcie_bytes_per_s = positive(j, "pcie_gbps", what) * 1e9;
  g.gemm_efficiency = positive(j, "gemm_efficiency", what);
  g.gemm_half_tokens = figure(j, "gemm_half_tokens", what);
  g.attention_fwd_efficiency = positive(j, "attention_fwd_efficiency", what);
  g.attention_bwd_efficiency = positive(j, "attention_bwd_efficiency", what);
  g.attention_half_tokens = figure(j, "attention_half_tokens", what);
  g.kernel_overhead_s = figure(j, "kernel_overhead_us", what) * 1e-6;
  g.reserved_bytes = figure(j, "reserved_gib", what) * kGiB;
  for (auto [key, v] : {std::pair{"gemm_efficiency", g.gemm_efficiency},
                        {"attention_fwd_efficiency", g.attention_fwd_efficiency},
                        {"attention_bwd_efficiency", g.attention_bwd_efficiency}})
    if (v > 1) throw Error(fmt::format("{}: field '{}' is a fraction of peak and must be at most 1 (got {})", what, key, v));
  read_efficiency_curves(j, what, g);  // calibrated curves (optional): efficiency_curves.hpp
  return g;
}

System system_from_json(const json& j, std::string_view what) {
  if (!j.is_object()) throw Error(fmt::format("{}: expected a JSON object", what));
  System s;
  s.name = text(j, "name", what);
  auto gi = j.find("gpu");
  if (gi == j.end()) throw Error(fmt::format("{}: missing field 'gpu'", what));
  if (gi->is_string()) s.gpu = load_gpu(gi->get<std::string>());
  else s.gpu = gpu_from_json(*gi, fmt::format("{}: gpu", what));
  s.gpus_per_node = positive_int(j, "gpus_per_node", what);
  auto intra = j.find("intra_node");
  auto inter = j.find("inter_node");
  if (intra == j.end()) throw Error(fmt::format("{}: missing field 'intra_node'", what));
  if (inter == j.end()) throw Error(fmt::format("{}: missing field 'inter_node'", what));
  s.intra = link_from_json(*intra, fmt::format("{}: intra_node", what));
  s.inter = link_from_json(*inter, fmt::format("{}: inter_node", what));
  s.host_adam_params_per_s = positive(j, "host_adam_gparams_per_s", what) * 1e9;
  return s;
}

Model model_from_json(const json& j, std::string_view what) {
  if (!j.is_object()) throw Error(fmt::format("{}: expected a JSON object", what));
  Model m;
  m.name = text(j, "name", what);
  m.layers = positive_int(j, "layers", what);
  m.hidden = positive_int(j, "hidden", what);
  m.heads = positive_int(j, "heads", what);
  m.kv_heads = positive_int(j, "kv_heads", what);
  m.head_dim = positive_int(j, "head_dim", what);
  m.ffn_hidden = positive_int(j, "ffn_hidden", what);
  m.vocab = positive_int(j, "vocab", what);
  std::string mlp = text(j, "mlp", what, "swiglu");
  if (mlp == "swiglu") m.mlp = MlpKind::swiglu;
  else if (mlp == "gelu") m.mlp = MlpKind::gelu;
  else throw Error(fmt::format("{}: field 'mlp' must be swiglu or gelu (got '{}')", what, mlp));
  std::string norm = text(j, "norm", what, "rmsnorm");
  if (norm == "rmsnorm") m.norm = NormKind::rmsnorm;
  else if (norm == "layernorm") m.norm = NormKind::layernorm;
  else throw Error(fmt::format("{}: field 'norm' must be rmsnorm or layernorm (got '{}')", what, norm));
  if (auto c = j.find("causal"); c != j.end()) {
    if (!c->is_boolean()) throw Error(fmt::format("{}: field 'causal' must be true or false", what));
    m.causal = c->get<bool>();
  }
  auto tied = j.find("tied_embeddings");
  if (tied != j.end()) {
    if (!tied->is_boolean()) throw Error(fmt::format("{}: field 'tied_embeddings' must be true or false", what));
    m.tied_embeddings = tied->get<bool>();
  }
  if (m.heads % m.kv_heads != 0)
    throw Error(fmt::format("{}: heads {} must be a multiple of kv_heads {} (grouped-query attention)", what, m.heads, m.kv_heads));
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
  return looks_like_path(s) ? read_json_file(s) : builtin(kind, s);
}

namespace {
// Errors name the file for a path and the preset for a name.
std::string label(std::string_view kind, std::string_view s) {
  return looks_like_path(s) ? std::string(s) : fmt::format("{} preset '{}'", kind, s);
}
}  // namespace

Gpu load_gpu(std::string_view s) { return gpu_from_json(preset_document("gpu", s), label("gpu", s)); }
System load_system(std::string_view s) { return system_from_json(preset_document("system", s), label("system", s)); }
Model load_model(std::string_view s) { return model_from_json(preset_document("model", s), label("model", s)); }

}  // namespace seqpar::sim

#include "seqpar/sim/framework.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "preset_fields.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/sim/efficiency_curves.hpp"
#include "seqpar/sim/hardware.hpp"
#include "seqpar/sim/presets.hpp"

namespace seqpar::sim {

using nlohmann::json;

std::string_view to_string(MemPart p) {
  switch (p) {
    case MemPart::parameters: return "parameters";
    case MemPart::gradients: return "gradients";
    case MemPart::optimizer_states: return "optimizer_states";
    case MemPart::activations: return "activations";
    case MemPart::checkpoints: return "checkpoints";
    case MemPart::attention_buffers: return "attention_buffers";
    case MemPart::logits: return "logits";
    case MemPart::working: return "working";
  }
  return "unknown";
}

std::string_view to_string(Width w) {
  switch (w) {
    case Width::hidden: return "hidden";
    case Width::ffn: return "ffn";
    case Width::q: return "q";
    case Width::kv: return "kv";
    case Width::kv_attention: return "kv_attention";
    case Width::heads: return "heads";
    case Width::head_dim: return "head_dim";
    case Width::one: return "one";
    case Width::vocab: return "vocab";
    case Width::fc1: return "fc1";
    case Width::rope: return "rope";
    case Width::norm_stats: return "norm_stats";
  }
  return "unknown";
}

std::string_view to_string(Constant c) {
  switch (c) {
    case Constant::hidden_q: return "hidden*q";
    case Constant::hidden_kv: return "hidden*kv";
    case Constant::hidden_ffn: return "hidden*ffn";
    case Constant::vocab_hidden: return "vocab*hidden";
    case Constant::layer_params: return "layer_params";
    case Constant::hidden_fc1: return "hidden*fc1";
  }
  return "unknown";
}

namespace {

// Wide enough for any framework, narrow enough that every product the memory model forms stays
// finite: a few hundred values per hidden unit per token, 64 bytes per value.
constexpr double kMaxCoef = 1e3, kMaxBytesPerValue = 64, kMaxBytesPerParam = 64, kMaxReserve = 1e15;

// A figure is a bare number or {"value", "source"}; bounded_figure checks both forms.
double number(const json& j, const char* key, std::string_view what, double lo, double hi, double fallback) {
  return j.contains(key) ? bounded_figure(j, key, what, lo, hi) : fallback;
}


bool flag(const json& j, const char* key, std::string_view what, bool fallback) {
  auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (!it->is_boolean()) throw Error(fmt::format("{}: field '{}' must be true or false", what, key));
  return it->get<bool>();
}

template <class E, std::size_t N>
E one_of(const json& j, const char* key, std::string_view what, const std::array<std::pair<const char*, E>, N>& names,
         E fallback) {
  auto found = j.find(key);
  if (found == j.end()) return fallback;
  // A choice is a bare string or {"value": "...", "source": "..."}, as figures are.
  const json* it = &*found;
  if (it->is_object() && it->contains("value")) it = &(*it)["value"];
  std::string all;
  for (const auto& [n, e] : names) {
    if (it->is_string() && *it == n) return e;
    all += (all.empty() ? "" : ", ") + std::string(n);
  }
  throw Error(fmt::format("{}: field '{}' must be one of {} (got {})", what, key, all, dump_json(*it, -1)));
}

constexpr std::array<std::pair<const char*, MemPart>, kMemParts> kParts{{
    {"parameters", MemPart::parameters},
    {"gradients", MemPart::gradients},
    {"optimizer_states", MemPart::optimizer_states},
    {"activations", MemPart::activations},
    {"checkpoints", MemPart::checkpoints},
    {"attention_buffers", MemPart::attention_buffers},
    {"logits", MemPart::logits},
    {"working", MemPart::working},
}};

// {"symbol": coefficient, ...} into `out`, naming the known symbols for an unknown one.
template <class Sym, int N, class Out>
void read_symbols(const json& e, const char* key, std::string_view what, Out& out) {
  auto it = e.find(key);
  if (it == e.end()) return;
  if (!it->is_object()) throw Error(fmt::format("{}: field '{}' must be an object of size symbols", what, key));
  for (const auto& [name, v] : it->items()) {
    int k = -1;
    std::string known;
    for (int i = 0; i < N; ++i) {
      const std::string_view s = to_string(static_cast<Sym>(i));
      if (name == s) k = i;
      known += (known.empty() ? "" : ", ") + std::string(s);
    }
    if (k < 0) throw Error(fmt::format("{}: {}: unknown symbol '{}' (known: {})", what, key, name, known));
    const double c = bounded_figure(*it, name.c_str(), fmt::format("{}: {}", what, key), 0, kMaxCoef);
    if constexpr (requires { out.set(std::size_t{}, c); }) out.set(static_cast<std::size_t>(k), c);
    else out[static_cast<std::size_t>(k)] = c;
  }
}

Condition read_condition(const json& e, std::string_view what) {
  Condition c;
  auto it = e.find("when");
  if (it == e.end()) return c;
  const std::string w = fmt::format("{}: when", what);
  if (!it->is_object()) throw Error(fmt::format("{}: expected an object", w));
  check_fields(*it, {"checkpoint", "tiled_mlp", "tiled_loss", "ulysses", "ring", "offload_checkpoints", "fp8_gemm"}, w);
  for (const auto& [key, v] : it->items()) {
    if (key == "checkpoint") {
      if (!v.is_array() || v.empty())
        throw Error(fmt::format("{}: field 'checkpoint' must be a non-empty list of none, selective, full", w));
      for (const json& m : v) {
        if (!m.is_string()) throw Error(fmt::format("{}: field 'checkpoint' must list none, selective, full", w));
        try {
          c.checkpoint.push_back(parse_checkpoint(m.get<std::string>()));
        } catch (const Error& err) {
          throw Error(fmt::format("{}: {}", w, err.what()));
        }
      }
      continue;
    }
    std::optional<bool>* slot = key == "tiled_mlp"             ? &c.tiled_mlp
                                : key == "tiled_loss"          ? &c.tiled_loss
                                : key == "ulysses"             ? &c.ulysses
                                : key == "ring"                ? &c.ring
                                : key == "offload_checkpoints" ? &c.offload_checkpoints
                                : key == "fp8_gemm"            ? &c.fp8_gemm
                                                               : nullptr;
    if (!slot)
      throw Error(fmt::format("{}: unknown condition '{}' (known: checkpoint, tiled_mlp, tiled_loss, ulysses, ring, "
                              "offload_checkpoints)",
                              w, key));
    if (!v.is_boolean()) throw Error(fmt::format("{}: field '{}' must be true or false", w, key));
    *slot = v.get<bool>();
  }
  return c;
}

TensorTerm read_tensor(const json& e, std::string_view what, MemPart default_part) {
  if (!e.is_object()) throw Error(fmt::format("{}: expected an object", what));
  TensorTerm t;
  t.name = string_field(e, "name", what);
  const std::string w = fmt::format("{} ('{}')", what, t.name);
  check_fields(e, {"name", "source", "per_token", "constant", "times_layers", "bytes", "fp8_bytes", "part", "until",
                   "rows", "input", "when"},
               w);
  t.source = string_field(e, "source", w, "");
  read_symbols<Width, kWidths>(e, "per_token", w, t.per_token);
  read_symbols<Constant, kConstants>(e, "constant", w, t.constant);
  if (!(t.per_token.sum() + t.constant.sum() > 0))
    throw Error(fmt::format("{}: give its size: 'per_token' widths or 'constant' sizes", w));
  t.times_layers = flag(e, "times_layers", w, false);
  t.bytes = bounded_figure(e, "bytes", w, 0.125, kMaxBytesPerValue);
  t.fp8_bytes = number(e, "fp8_bytes", w, 0.125, kMaxBytesPerValue, 0);
  t.part = one_of(e, "part", w, kParts, default_part);
  t.until = one_of(e, "until", w,
                   std::array<std::pair<const char*, Until>, 3>{{{"mlp", Until::mlp},
                                                                 {"attention", Until::attention},
                                                                 {"qkv", Until::qkv}}},
                   Until::qkv);
  t.rows = one_of(e, "rows", w,
                  std::array<std::pair<const char*, Rows>, 3>{{{"all", Rows::all}, {"tile", Rows::tile}, {"loss", Rows::loss}}},
                  Rows::all);
  t.input = flag(e, "input", w, false);
  t.when = read_condition(e, w);
  return t;
}

std::vector<TensorTerm> read_tensors(const json& parent, const char* key, std::string_view what, MemPart part) {
  std::vector<TensorTerm> out;
  auto it = parent.find(key);
  if (it == parent.end()) return out;
  if (!it->is_array()) throw Error(fmt::format("{}: field '{}' must be a list of tensors", what, key));
  for (std::size_t i = 0; i < it->size(); ++i)
    out.push_back(read_tensor((*it)[i], fmt::format("{}: {}[{}]", what, key, i), part));
  return out;
}

std::vector<ElementwiseTerm> read_elementwise(const json& time, std::string_view what) {
  std::vector<ElementwiseTerm> out;
  auto it = time.find("layer_elementwise");
  if (it == time.end()) return out;
  if (!it->is_array()) throw Error(fmt::format("{}: field 'layer_elementwise' must be a list of kernels", what));
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& e = (*it)[i];
    const std::string w = fmt::format("{}: layer_elementwise[{}]", what, i);
    if (!e.is_object()) throw Error(fmt::format("{}: expected an object", w));
    check_fields(e, {"name", "source", "per_token", "forward_bytes", "backward_bytes"}, w);
    ElementwiseTerm t;
    t.name = string_field(e, "name", w);
    t.source = string_field(e, "source", w, "");
    read_symbols<Width, kWidths>(e, "per_token", w, t.per_token);
    double any = 0;
    for (double c : t.per_token) any += c;
    if (!(any > 0)) throw Error(fmt::format("{}: give its size: 'per_token' widths", w));
    t.forward_bytes = number(e, "forward_bytes", w, 0, kMaxBytesPerValue, 0);
    t.backward_bytes = number(e, "backward_bytes", w, 0, kMaxBytesPerValue, 0);
    out.push_back(std::move(t));
  }
  return out;
}

const json& object(const json& parent, const char* key, std::string_view what) {
  static const json empty = json::object();
  auto it = parent.find(key);
  if (it == parent.end()) return empty;
  if (!it->is_object()) throw Error(fmt::format("{}: field '{}' must be an object", what, key));
  return *it;
}

// "attention_kernel": a kernel name (any GPU), {"value": name, "source": ...}, or
// {"choices": [{"kernel": name, "compute_capability": ["9.0", ...]}, ...], "source": ...} in the
// framework's order of preference.
void read_attention_choices(const json& j, std::string_view what, Framework& f) {
  auto it = j.find("attention_kernel");
  if (it == j.end()) return;
  const std::string w = fmt::format("{}: attention_kernel", what);
  auto name = [&](const json& v, const std::string& where) {
    if (!v.is_string() || v.get<std::string>().empty())
      throw Error(fmt::format("{}: must be the name of an attention kernel (a GPU preset's attention_kernels, e.g. "
                              "cudnn, flash-attention-2)", where));
    return v.get<std::string>();
  };
  if (it->is_string()) {
    f.attention_choices.push_back({name(*it, w), {}});
    return;
  }
  if (!it->is_object())
    throw Error(fmt::format("{}: must be a kernel name or an object with 'choices' (or 'value') and 'source'", w));
  check_fields(*it, {"value", "choices", "source"}, w);
  f.attention_source = string_field(*it, "source", w, "");
  if (auto v = it->find("value"); v != it->end()) {
    f.attention_choices.push_back({name(*v, w + ".value"), {}});
    return;
  }
  auto cs = it->find("choices");
  if (cs == it->end() || !cs->is_array() || cs->empty())
    throw Error(fmt::format("{}: field 'choices' must be a non-empty list of {{\"kernel\", \"compute_capability\"}}", w));
  for (std::size_t i = 0; i < cs->size(); ++i) {
    const json& c = (*cs)[i];
    const std::string cw = fmt::format("{}: choices[{}]", w, i);
    if (!c.is_object()) throw Error(fmt::format("{}: expected an object", cw));
    check_fields(c, {"kernel", "compute_capability"}, cw);
    AttentionChoice choice{name(c.contains("kernel") ? c["kernel"] : json(), cw + ".kernel"), {}};
    if (auto cc = c.find("compute_capability"); cc != c.end()) {
      if (!cc->is_array() || cc->empty())
        throw Error(fmt::format("{}: field 'compute_capability' must be a non-empty list such as [\"9.0\"]", cw));
      for (const json& v : *cc) choice.compute_capability.push_back(compute_capability_text(v, cw + ".compute_capability"));
    }
    f.attention_choices.push_back(std::move(choice));
  }
}

}  // namespace

std::string_view to_string(IndexedTensor t) { return t == IndexedTensor::hidden ? "hidden" : "attention"; }

bool AttentionChoice::applies_to(std::string_view gpu) const {
  if (compute_capability.empty()) return true;
  return std::find(compute_capability.begin(), compute_capability.end(), gpu) != compute_capability.end();
}

namespace {
// The profile's "fp8" object: {"parts": [...], "recipes": [...], "weight_cache_bytes_per_param",
// "amax_history", "source"}; absent: the framework trains in bf16 only.
void read_fp8(const json& j, std::string_view what, Framework& f) {
  auto it = j.find("fp8");
  if (it == j.end()) return;
  const std::string w = fmt::format("{}: fp8", what);
  if (!it->is_object()) throw Error(fmt::format("{}: expected an object", w));
  check_fields(*it, {"parts", "recipes", "weight_cache_bytes_per_param", "amax_history", "source"}, w);
  auto list = [&](const char* key) {
    auto l = it->find(key);
    if (l == it->end() || !l->is_array() || l->empty())
      throw Error(fmt::format("{}: field '{}' must be a non-empty list", w, key));
    std::vector<std::string> out;
    for (const json& v : *l) {
      if (!v.is_string()) throw Error(fmt::format("{}: field '{}' must list names (got {})", w, key, dump_json(v, -1)));
      out.push_back(v.get<std::string>());
    }
    return out;
  };
  for (const std::string& part : list("parts")) f.fp8_parts |= parse_fp8_parts(part, fmt::format("{}: parts", w));
  for (const std::string& r : list("recipes")) f.fp8_recipes.push_back(parse_fp8_recipe(r, fmt::format("{}: recipes", w)));
  f.fp8_weight_cache_bytes_per_param = number(*it, "weight_cache_bytes_per_param", w, 0, kMaxBytesPerParam, 0);
  f.fp8_amax_history = number(*it, "amax_history", w, 0, 1e6, 0);
  f.fp8_source = string_field(*it, "source", w);
}
}  // namespace

bool Framework::runs_fp8(Fp8Recipe r) const {
  return fp8_parts != 0 && std::find(fp8_recipes.begin(), fp8_recipes.end(), r) != fp8_recipes.end();
}

Framework framework_from_json(const json& j, std::string_view what) {
  if (!j.is_object()) throw Error(fmt::format("{}: expected a JSON object", what));
  check_preset_fields(j, "framework", what);
  Framework f;
  f.name = preset_name(j, what);
  f.description = string_field(j, "description", what, "");
  f.source = string_field(j, "source", what, "");
  read_attention_choices(j, what, f);
  auto st = j.find("states");
  if (st == j.end() || !st->is_array() || st->empty())
    throw Error(fmt::format("{}: field 'states' must be a non-empty list (weights, gradients, optimizer states)", what));
  for (std::size_t i = 0; i < st->size(); ++i) {
    const json& e = (*st)[i];
    const std::string w = fmt::format("{}: states[{}]", what, i);
    if (!e.is_object()) throw Error(fmt::format("{}: expected an object", w));
    check_fields(e, {"name", "source", "part", "bytes_per_param", "zero_stage", "offloaded_with_optimizer",
                     "offloaded_with_params"},
                 w);
    StateTerm s;
    s.name = string_field(e, "name", w);
    s.source = string_field(e, "source", w, "");
    s.part = one_of(e, "part", w, kParts, MemPart::parameters);
    s.bytes_per_param = bounded_figure(e, "bytes_per_param", w, 0, kMaxBytesPerParam);
    const double z = number(e, "zero_stage", w, 1, 3, 1);
    if (z != std::floor(z)) throw Error(fmt::format("{}: field 'zero_stage' must be 1, 2 or 3 (got {:g})", w, z));
    s.zero_stage = static_cast<int>(z);
    s.offloaded_with_optimizer = flag(e, "offloaded_with_optimizer", w, false);
    s.offloaded_with_params = flag(e, "offloaded_with_params", w, false);
    f.states.push_back(std::move(s));
  }
  f.gradients_during_backward =
      one_of(j, "gradients", what,
             std::array<std::pair<const char*, bool>, 2>{{{"persistent", false}, {"during_backward", true}}}, false);
  f.checkpoint_bytes = number(j, "checkpoint_bytes", what, 0.125, kMaxBytesPerValue, 2);
  f.layer = read_tensors(j, "layer", what, MemPart::activations);
  // Every framework saves tensors for the backward: without them activations would all but vanish.
  if (f.layer.empty())
    throw Error(fmt::format("{}: field 'layer' must be a non-empty list of the tensors one layer saves for its "
                            "backward",
                            what));
  const json& bw = object(j, "backward", what);
  const std::string bws = fmt::format("{}: backward", what);
  check_fields(bw, {"recompute", "mlp", "attention", "qkv", "stored"}, bws);
  f.recompute = read_tensors(bw, "recompute", bws, MemPart::working);
  f.mlp_backward = read_tensors(bw, "mlp", bws, MemPart::working);
  f.attention_backward = read_tensors(bw, "attention", bws, MemPart::working);
  f.qkv_backward = read_tensors(bw, "qkv", bws, MemPart::working);
  f.backward_stored = read_tensors(bw, "stored", bws, MemPart::activations);
  const json& loss = object(j, "loss", what);
  const std::string ls = fmt::format("{}: loss", what);
  check_fields(loss, {"stored", "forward", "backward", "final_norm", "chunks"}, ls);
  const double chunks = number(loss, "chunks", ls, 1, 1e6, 1);
  if (chunks != std::floor(chunks))
    throw Error(fmt::format("{}: field 'chunks' must be a whole number of chunks the loss runs in, not {}", ls, chunks));
  f.loss_chunks = static_cast<int>(chunks);
  f.loss_stored = read_tensors(loss, "stored", ls, MemPart::activations);
  f.loss_forward = read_tensors(loss, "forward", ls, MemPart::working);
  f.loss_backward = read_tensors(loss, "backward", ls, MemPart::working);
  f.loss_final_norm = read_tensors(loss, "final_norm", ls, MemPart::working);
  f.every_phase = read_tensors(j, "every_phase", what, MemPart::working);
  const json& attn = object(j, "attention", what);
  check_fields(attn, {"workspace", "ulysses_all_to_all", "ring_backward"}, fmt::format("{}: attention", what));
  f.attention_workspace_persistent =
      one_of(attn, "workspace", fmt::format("{}: attention", what),
             std::array<std::pair<const char*, bool>, 2>{{{"per_call", false}, {"persistent", true}}}, false);
  f.ulysses_per_tensor =
      one_of(attn, "ulysses_all_to_all", fmt::format("{}: attention", what),
             std::array<std::pair<const char*, bool>, 2>{{{"packed", false}, {"per_tensor", true}}}, false);
  f.ring_backward_given = attn.contains("ring_backward");
  f.ring_backward = read_tensors(attn, "ring_backward", fmt::format("{}: attention", what), MemPart::attention_buffers);
  f.zero3_gathered_layers = number(j, "zero3_gathered_layers", what, 0, 1e3, 3);
  const json& off = object(j, "offload", what);
  const std::string os = fmt::format("{}: offload", what);
  check_fields(off, {"params", "checkpoints"}, os);
  f.params_prefetched = one_of(off, "params", os,
                               std::array<std::pair<const char*, bool>, 2>{{{"prefetch", true}, {"on_demand", false}}}, true);
  f.checkpoints_overlapped =
      one_of(off, "checkpoints", os,
             std::array<std::pair<const char*, bool>, 2>{{{"double_buffer", true}, {"synchronous", false}}}, true);
  read_fp8(j, what, f);
  check_fields(object(j, "tensor_parallel", what), {"norm_regions"}, fmt::format("{}: tensor_parallel", what));
  f.tp_sequence_parallel =
      one_of(object(j, "tensor_parallel", what), "norm_regions", fmt::format("{}: tensor_parallel", what),
             std::array<std::pair<const char*, bool>, 2>{{{"sequence_parallel", true}, {"replicated", false}}}, true);
  const json& alloc = object(j, "allocator", what);
  const std::string as = fmt::format("{}: allocator", what);
  check_fields(alloc, {"reserve_bytes", "fragmentation"}, as);
  f.reserve_bytes = number(alloc, "reserve_bytes", as, 0, kMaxReserve, 0);
  f.fragmentation = number(alloc, "fragmentation", as, 0, 1, 0);
  const json& time = object(j, "time", what);
  const std::string ts = fmt::format("{}: time", what);
  {
    std::vector<std::string_view> known{"loss_elementwise_bytes_per_logit", "layer_elementwise"};
    for (const FrameworkTermSpec& t : kFrameworkTerms)
      if (t.target == FrameworkTarget::step_time) known.push_back(t.key);
    check_fields(time, known, ts);
  }
  // The step-time terms, each within its physical range (hardware.hpp: kFrameworkTerms).
  for (const FrameworkTermSpec& t : kFrameworkTerms) {
    if (t.target != FrameworkTarget::step_time || !time.contains(t.key)) continue;
    f.time.*t.field = bounded_figure(time, t.key, ts, t.lo, t.hi);
    const json& v = time[t.key];
    if (v.is_object() && v.contains("source") && v["source"].is_string())
      f.time_sources.emplace_back(t.key, v["source"].get<std::string>());
  }
  f.loss_elementwise_bytes_per_logit = number(time, "loss_elementwise_bytes_per_logit", ts, 0, 1e3, 0);
  if (const json& runs = object(j, "runs", what); !runs.empty()) {
    const std::string rw = fmt::format("{}: runs", what);
    check_fields(runs, {"zero", "offload_optimizer", "offload_params", "tensor_parallel", "pipeline_parallel",
                        "offload_checkpoints", "tiled_mlp", "tiled_loss", "methods", "source"}, rw);
    if (auto ms = runs.find("methods"); ms != runs.end()) {
      if (!ms->is_array() || ms->empty())
        throw Error(fmt::format("{}: field 'methods' must be a non-empty list of the SP methods it runs", rw));
      for (const json& v : *ms) {
        if (!v.is_string()) throw Error(fmt::format("{}: field 'methods' lists {}: a method name", rw, dump_json(v, -1)));
        try {
          f.runs_methods.push_back(parse_method(v.get<std::string>()));
        } catch (const Error& e) {
          throw Error(fmt::format("{}: field 'methods': {}", rw, e.what()));
        }
      }
    }
    if (auto z = runs.find("zero"); z != runs.end()) {
      if (!z->is_array() || z->empty())
        throw Error(fmt::format("{}: field 'zero' must be a non-empty list of the ZeRO stages it runs (0-3)", rw));
      f.zero_stages.clear();
      for (const json& v : *z) {
        if (!v.is_number_integer() || v.get<int>() < 0 || v.get<int>() > 3)
          throw Error(fmt::format("{}: field 'zero' lists {}: ZeRO stages are 0, 1, 2 and 3", rw, dump_json(v, -1)));
        f.zero_stages.push_back(v.get<int>());
      }
    }
    f.runs_offload_optimizer = flag(runs, "offload_optimizer", rw, true);
    f.runs_offload_params = flag(runs, "offload_params", rw, true);
    f.runs_tensor_parallel = flag(runs, "tensor_parallel", rw, true);
    f.runs_pipeline_parallel = flag(runs, "pipeline_parallel", rw, true);
    f.runs_offload_checkpoints = flag(runs, "offload_checkpoints", rw, true);
    f.runs_tiled_mlp = flag(runs, "tiled_mlp", rw, true);
    f.runs_tiled_loss = flag(runs, "tiled_loss", rw, true);
    f.runs_source = string_field(runs, "source", rw, "");
  }
  if (auto it = j.find("index_limits"); it != j.end()) {
    if (!it->is_array()) throw Error(fmt::format("{}: field 'index_limits' must be a list of {{tensor, max_elements, kernel, source}}", what));
    for (std::size_t i = 0; i < it->size(); ++i) {
      const json& e = (*it)[i];
      const std::string w = fmt::format("{}: index_limits[{}]", what, i);
      if (!e.is_object()) throw Error(fmt::format("{}: expected an object", w));
      check_fields(e, {"tensor", "max_elements", "kernel", "source"}, w);
      IndexLimit l;
      l.tensor = one_of(e, "tensor", w,
                        std::array<std::pair<const char*, IndexedTensor>, 2>{
                            {{"hidden", IndexedTensor::hidden}, {"attention", IndexedTensor::attention}}},
                        IndexedTensor::hidden);
      if (!e.contains("tensor")) throw Error(fmt::format("{}: missing field 'tensor' (hidden or attention)", w));
      l.max_elements = bounded_figure(e, "max_elements", w, 1, 9.3e18);
      l.kernel = string_field(e, "kernel", w);
      l.source = string_field(e, "source", w, "");
      f.index_limits.push_back(std::move(l));
    }
  }
  f.layer_elementwise = read_elementwise(time, ts);
  if (auto it = j.find("mlp"); it != j.end()) {
    const json* kinds = &*it;
    if (kinds->is_object() && kinds->contains("value")) kinds = &(*kinds)["value"];
    if (!kinds->is_array() || kinds->empty())
      throw Error(fmt::format("{}: field 'mlp' must be a non-empty list of the MLP kinds the inventory counts "
                              "(swiglu, gelu)", what));
    for (const json& k : *kinds) {
      MlpKind kind{};
      if (!k.is_string() || !kind_named(k.get<std::string>(), kind))
        throw Error(fmt::format("{}: field 'mlp' lists {}: the MLP kinds are swiglu and gelu", what, dump_json(k, -1)));
      f.mlp_kinds.push_back(kind);
    }
  }
  return f;
}

MemoryOptions default_memory_options(const Framework& f) {
  MemoryOptions m;
  if (!f.zero_stages.empty() && std::find(f.zero_stages.begin(), f.zero_stages.end(), m.zero) == f.zero_stages.end())
    m.zero = *std::min_element(f.zero_stages.begin(), f.zero_stages.end(),
                               [&](int a, int b) { return std::abs(a - m.zero) < std::abs(b - m.zero); });
  return m;
}

Framework load_framework(std::string_view s) {
  const bool path = s.find('/') != s.npos || (s.size() > 5 && s.substr(s.size() - 5) == ".json");
  return framework_from_json(preset_document("framework", s),
                             path ? std::string(s) : fmt::format("framework preset '{}'", s));
}

const Framework& default_framework() {
  static const Framework f = load_framework(kDefaultFramework);
  return f;
}

}  // namespace seqpar::sim

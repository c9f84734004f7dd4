#include "seqpar/reports/step_input.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "seqpar/core/dtype.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/sim/presets.hpp"

namespace seqpar::reports {

using nlohmann::json;

namespace {

// A field of the step, else of the document around it (a "steps" array shares its model).
const json* find_field(const json& step, const json& outer, const char* key) {
  if (auto it = step.find(key); it != step.end() && !it->is_null()) return &*it;
  if (&outer != &step)
    if (auto it = outer.find(key); it != outer.end() && !it->is_null()) return &*it;
  return nullptr;
}

// seqpar-train keeps model and dtype under "config".
const json* config_field(const json& doc, const char* key) {
  auto c = doc.find("config");
  if (c == doc.end() || !c->is_object()) return nullptr;
  auto it = c->find(key);
  return it != c->end() && !it->is_null() ? &*it : nullptr;
}

// The model: a preset name (or path) or a shape object, then the optional layers/vocab overrides;
// model_from_json checks every figure of the result, so overrides obey the presets' rules.
sim::Model read_model(const json& step, const json& outer, const std::string& where) {
  const json* m = find_field(step, outer, "model");
  if (!m) m = config_field(outer, "model");
  const std::string w = fmt::format("{}: model", where);
  if (!m)
    throw Error(fmt::format("{}: missing field 'model' (a model preset name or an object with the shape: layers, "
                            "hidden, heads, kv_heads, head_dim, ffn_hidden, vocab)", where));
  json shape;
  if (m->is_string()) {
    try {
      shape = sim::preset_document("model", m->get<std::string>());
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", w, e.what()));
    }
  } else if (m->is_object()) {
    shape = *m;
    if (!shape.contains("name")) shape["name"] = "model";
  } else {
    throw Error(fmt::format("{}: must be a model preset name or a shape object", w));
  }
  for (const char* key : {"layers", "vocab"})
    if (const json* v = find_field(step, outer, key)) {
      if (!v->is_number()) throw Error(fmt::format("{}: field '{}' must be a number", where, key));
      shape[key] = *v;
    }
  return sim::model_from_json(shape, w);
}

double positive(const json& step, const char* key, const std::string& where) {
  const double x = require_number(step, key, where);
  if (!std::isfinite(x) || !(x > 0)) throw Error(fmt::format("{}: field '{}' must be a positive number (got {})", where, key, x));
  return x;
}

// A string field, or nothing; seqpar::Error naming `where` when it is there but not a non-empty string.
std::optional<std::string> string_named(const json* v, const std::string& where, const char* key) {
  if (!v) return std::nullopt;
  if (!v->is_string() || v->get<std::string>().empty())
    throw Error(fmt::format("{}: field '{}' must be a non-empty string", where, key));
  return v->get<std::string>();
}

// The framework and attention kernel the step ran: the minimal format's fields, else what the
// measuring programs record (step_input.hpp).
void read_runtime(const json& step, const json& outer, const std::string& where, MeasuredStep& s) {
  const std::optional<std::string> program = string_named(find_field(step, outer, "program"), where, "program");
  const json* impl = config_field(outer, "implementation");
  if (auto f = string_named(find_field(step, outer, "framework"), where, "framework")) {
    s.framework = *f;
    s.framework_from = "the document's 'framework'";
  } else if (program == "seqpar-train") {
    s.framework = "seqpar-train";
    s.framework_from = "program seqpar-train";
  } else if (program == "bench_torch_step" && impl && impl->is_string() && impl->get<std::string>() == "transformers") {
    s.framework = "hf-transformers";
    s.framework_from = "program bench_torch_step, implementation transformers";
  }
  if (const json* comm = config_field(outer, "comm"); comm && comm->is_string()) s.comm = comm->get<std::string>();
  const json* warmup = config_field(outer, "warmup");
  const json* steps = config_field(outer, "steps");
  if (warmup && steps && warmup->is_number() && steps->is_number() && warmup->get<double>() == 0)
    s.cold_share = steps->get<double>() <= 1 ? 1.0 : steps->get<double>() == 2 ? 0.5 : 0.0;
  if (auto k = string_named(find_field(step, outer, "attention_kernel"), where, "attention_kernel")) {
    s.attention_kernel = *k;
    s.attention_kernel_from = "the document's 'attention_kernel'";
  } else if (auto e = string_named(config_field(outer, "attention_engine"), where, "config.attention_engine")) {
    s.attention_kernel = *e;
    s.attention_kernel_from = "its config.attention_engine";
  }
}

// A measured step's figures are its one result's, written twice (seqpar-train, bench_torch_step.py):
// the time its result's step_time_s (else time_s), the peak its result's peak, which is the largest
// of the ranks' peaks. seqpar::Error naming the field where one contradicts the other.
void check_step_summary(const json& step, const MeasuredStep& s, const std::string& where) {
  auto rs = step.find("results");
  if (rs == step.end() || !rs->is_array() || rs->size() != 1 || !(*rs)[0].is_object()) return;
  const json& r = (*rs)[0];
  const std::string rw = fmt::format("{}: results[0]", where);
  const char* time_key = r.contains("step_time_s") ? "step_time_s" : "time_s";
  if (auto t = optional_number(r, time_key, rw); t && !figures_agree(*t, s.step_time_s, 1e-9))
    throw Error(fmt::format("{}: field 'step_time_s' is {:g} s but results[0] {} is {:g} s: the step contradicts its "
                            "result",
                            where, s.step_time_s, time_key, *t));
  const std::optional<double> peak = optional_number(r, "peak_memory_bytes", rw);
  if (peak && s.has_peak_memory && !figures_agree(*peak, s.peak_memory_bytes, 1e-9))
    throw Error(fmt::format("{}: field 'peak_memory_bytes' is {:g} but results[0] peak_memory_bytes is {:g}: the step "
                            "contradicts its result",
                            where, s.peak_memory_bytes, *peak));
  auto ranks = r.find("peak_memory_bytes_per_rank");
  if (!peak || ranks == r.end() || !ranks->is_array() || ranks->empty()) return;
  double most = 0;
  for (std::size_t k = 0; k < ranks->size(); ++k) {
    if (!(*ranks)[k].is_number() || !((*ranks)[k].get<double>() >= 0))
      throw Error(fmt::format("{}: peak_memory_bytes_per_rank[{}] must be a number of bytes", rw, k));
    most = std::max(most, (*ranks)[k].get<double>());
  }
  if (!figures_agree(most, *peak, 1e-9))
    throw Error(fmt::format("{}: field 'peak_memory_bytes' is {:g} but the largest of peak_memory_bytes_per_rank is "
                            "{:g}: the peak contradicts the ranks'",
                            rw, *peak, most));
}

MeasuredStep read_step(const json& step, const json& outer, const std::string& where, const std::string& file,
                       const std::string& fallback_name, PeakMemory peak) {
  if (!step.is_object()) throw Error(fmt::format("{}: a step must be a JSON object", where));
  MeasuredStep s;
  s.file = file;
  s.model = read_model(step, outer, where);
  const json& plan = require(step, "plan", where);
  try {
    s.plan = plan_from_json(plan);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", where, e.what()));  // core's message names the plan field
  }
  const json* dt = find_field(step, outer, "dtype");
  if (!dt) dt = config_field(outer, "dtype");
  if (dt && !dt->is_string()) throw Error(fmt::format("{}: field 'dtype' must be a string", where));
  s.dtype = to_string(parse_dtype(dt ? dt->get<std::string>() : "bf16", fmt::format("{}: dtype", where)));
  s.step_time_s = positive(step, "step_time_s", where);
  if (peak == PeakMemory::optional && (!step.contains("peak_memory_bytes") || step["peak_memory_bytes"].is_null()))
    s.has_peak_memory = false;
  else
    s.peak_memory_bytes = positive(step, "peak_memory_bytes", where);
  check_step_summary(step, s, where);
  s.name = optional_string(step, "name", where).value_or(fallback_name);
  read_runtime(step, outer, where, s);
  // seqpar-train names its step in its single result row.
  if (!step.contains("name") && step.contains("results") && step["results"].is_array() && !step["results"].empty() &&
      step["results"][0].is_object() && step["results"][0].contains("name") && step["results"][0]["name"].is_string())
    s.name = step["results"][0]["name"].get<std::string>();
  return s;
}

}  // namespace

bool is_step_document(const json& doc) {
  if (!doc.is_object()) return false;
  if (auto k = doc.find("kind"); k != doc.end() && k->is_string() && k->get<std::string>() == "prediction") return false;
  return (doc.contains("step_time_s") && doc.contains("plan")) || (doc.contains("steps") && doc["steps"].is_array());
}

StepDocument read_step_document(const json& doc, const std::string& where, const std::string& file, PeakMemory peak) {
  StepDocument d;
  if (auto dev = optional_string(doc, "device", where)) d.device = *dev;
  if (auto g = optional_string(doc, "gpu_name", where)) d.gpu_name = *g;
  if (auto env = doc.find("environment"); env != doc.end() && env->is_object())
    if (auto gpu = env->find("gpu"); gpu != env->end() && gpu->is_object())
      if (auto n = gpu->find("name"); n != gpu->end() && n->is_string()) d.gpu_name = n->get<std::string>();
  if (doc.contains("steps")) {
    const json& steps = require_array(doc, "steps", where);
    if (steps.empty()) throw Error(fmt::format("{}: field 'steps' is empty", where));
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const std::string w = fmt::format("{}: steps[{}]", where, i);
      d.steps.push_back(read_step(steps[i], doc, w, file, w, peak));
      // A step of the array may say where it ran; else the document does.
      d.steps.back().device = optional_string(steps[i], "device", w).value_or(d.device);
      d.steps.back().gpu_name = optional_string(steps[i], "gpu_name", w);
      if (!d.steps.back().gpu_name) d.steps.back().gpu_name = d.gpu_name;
    }
  } else {
    d.steps.push_back(read_step(doc, doc, where, file, where, peak));
    d.steps.back().device = d.device;
    d.steps.back().gpu_name = d.gpu_name;
  }
  return d;
}

}  // namespace seqpar::reports

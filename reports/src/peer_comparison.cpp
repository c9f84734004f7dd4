#include "seqpar/reports/peer_comparison.hpp"

#include <fmt/format.h>

#include "seqpar/core/error.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/reports/report_data.hpp"

namespace seqpar::reports {

using nlohmann::json;

namespace {

// The object at `key` in the result, else in the document (seqpar-train writes its plan and model at
// the document's top level and under config; older files carry them in each result).
const json* object_in(const json& result, const json& doc, const char* key) {
  if (result.contains(key) && result[key].is_object()) return &result[key];
  if (doc.contains(key) && doc[key].is_object()) return &doc[key];
  if (doc.contains("config") && doc["config"].is_object() && doc["config"].contains(key) &&
      doc["config"][key].is_object())
    return &doc["config"][key];
  return nullptr;
}

// The model's sizes in one string: two runs are the same model when these agree, whatever its name.
std::string shape_of(const json& model, std::string_view where) {
  std::string out;
  for (const char* k : {"layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab"}) {
    const double v = require_number(model, k, fmt::format("{}: model", where));
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", k, v);
  }
  if (model.contains("tied_embeddings") && model["tied_embeddings"].is_boolean() &&
      model["tied_embeddings"].get<bool>())
    out += " tied";
  return out;
}

json figure(const json& result, const json& doc, const char* key, std::string_view where) {
  if (auto v = optional_number(result, key, where)) return *v;
  if (auto v = optional_number(doc, key, where)) return *v;
  return nullptr;
}

json ratio(const json& seqpar, const json& pytorch, const char* key) {
  if (seqpar.is_null() || pytorch.is_null() || !seqpar[key].is_number() || !pytorch[key].is_number()) return nullptr;
  const double den = pytorch[key].get<double>();
  if (!(den > 0)) return nullptr;
  return seqpar[key].get<double>() / den;
}

bool same_case(const json& a, const json& b) {
  for (const char* k : {"shape", "plan_label", "seq_len", "gpus", "gpu"})
    if (a[k] != b[k]) return false;
  return true;
}

json row_of(const json& seqpar, const json& pytorch) {
  const json& any = seqpar.is_null() ? pytorch : seqpar;
  return {{"model", any["model"]}, {"shape", any["shape"]}, {"plan_label", any["plan_label"]},
          {"seq_len", any["seq_len"]}, {"gpus", any["gpus"]}, {"gpu", any["gpu"]},
          {"seqpar", seqpar}, {"pytorch", pytorch},
          {"step_time_ratio", ratio(seqpar, pytorch, "step_time_s")},
          {"tflops_ratio", ratio(seqpar, pytorch, "tflops_per_gpu")},
          {"peak_memory_ratio", ratio(seqpar, pytorch, "peak_memory_bytes")}};
}

}  // namespace

bool is_peer_step_program(std::string_view program) {
  return program == kSeqparStepProgram || program == kTorchStepProgram;
}

json peer_step_record(const json& doc, const json& result, std::string_view where, const std::string& source) {
  const json* plan = object_in(result, doc, "plan");
  if (!plan) throw Error(fmt::format("{}: a training-step measurement needs a 'plan' object (in the result or the document)", where));
  // The model's sizes decide the pairing; a file naming its model only (older seqpar-train output)
  // pairs by that name.
  const json* model = object_in(result, doc, "model");
  std::string name = "unnamed model";
  for (const json* holder : {&result, &doc, doc.contains("config") ? &doc["config"] : nullptr})
    if (!model && holder && holder->is_object() && holder->contains("model") && (*holder)["model"].is_string()) {
      name = (*holder)["model"].get<std::string>();
      break;
    }
  if (model) name = optional_string(*model, "name", fmt::format("{}: model", where)).value_or(name);
  std::string gpu;
  if (doc.contains("environment") && doc["environment"].is_object()) {
    const json& env = doc["environment"];
    if (env.contains("gpu") && env["gpu"].is_object())
      gpu = optional_string(env["gpu"], "name", fmt::format("{}: environment.gpu", where)).value_or("");
  }
  const std::string plan_where = fmt::format("{}: plan", where);
  json step = figure(result, doc, "step_time_s", where);
  if (step.is_null()) step = require_number(result, "time_s", where);
  return {{"source", source},
          {"program", require_string(doc, "program", where)},
          {"mode", require_string(doc, "mode", where)},
          {"device", require_string(doc, "device", where)},
          {"gpu", gpu},
          {"model", name},
          {"shape", model ? shape_of(*model, where) : "model " + name},
          {"plan_label", plan_label(*plan)},
          {"seq_len", require_number(*plan, "seq_len", plan_where)},
          {"gpus", require_number(*plan, "gpus", plan_where)},
          {"step_time_s", step},
          {"tflops_per_gpu", figure(result, doc, "tflops_per_gpu", where)},
          {"peak_memory_bytes", figure(result, doc, "peak_memory_bytes", where)}};
}

json pair_peer_steps(const json& records) {
  json rows = json::array();
  std::vector<bool> used(records.size(), false);
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (records[i]["program"] != kSeqparStepProgram) continue;
    json peer = nullptr;
    for (std::size_t j = 0; j < records.size(); ++j)
      if (!used[j] && records[j]["program"] == kTorchStepProgram && same_case(records[i], records[j])) {
        used[j] = true;
        peer = records[j];
        break;
      }
    rows.push_back(row_of(records[i], peer));
  }
  for (std::size_t j = 0; j < records.size(); ++j)
    if (!used[j] && records[j]["program"] == kTorchStepProgram) rows.push_back(row_of(nullptr, records[j]));
  return rows;
}

}  // namespace seqpar::reports

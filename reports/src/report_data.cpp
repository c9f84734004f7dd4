#include "seqpar/reports/report_data.hpp"

#include <fmt/format.h>

#include <optional>

#include "seqpar/core/error.hpp"
#include "seqpar/core/measurement.hpp"
#include "seqpar/reports/document_comparison.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/reports/method_comparison.hpp"
#include "seqpar/reports/peer_comparison.hpp"
#include "seqpar/reports/samples.hpp"
#include "seqpar/reports/step_comparison.hpp"
#include "seqpar/reports/step_input.hpp"
#include "seqpar/reports/validation_verdict.hpp"
#include "seqpar/core/plan.hpp"

namespace seqpar::reports {

using nlohmann::json;

namespace {

const char* const kFigureKeys[] = {"step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu",
                                   "peak_memory_bytes", "memory_capacity_bytes"};

// A number, or null; anything else is an error naming the field.
json number_or_null(const json& obj, const char* key, std::string_view where) {
  auto v = optional_number(obj, key, where);
  return v ? json(*v) : json();
}

json plan_fields(const json& plan, std::string_view where) {
  if (!plan.is_object()) throw Error(fmt::format("{}: field 'plan' must be an object", where));
  json out = json::object();
  for (std::string_view key : kPlanJsonKeys) {  // core's list: the keys a plan object has
    const std::string k(key);
    if (plan.contains(k)) out[k] = plan[k];
  }
  for (const char* k : {"method", "gpus", "seq_len", "sp"})
    if (!out.contains(k)) throw Error(fmt::format("{}: plan: missing field '{}'", where, k));
  if (!out["method"].is_string()) throw Error(fmt::format("{}: plan: field 'method' must be a string", where));
  try {  // core's vocabulary: a method no seqpar program runs is not a plan to rank
    parse_method(out["method"].get<std::string>());
  } catch (const Error& e) {
    throw Error(fmt::format("{}: plan: {}", where, e.what()));
  }
  for (const char* k : {"gpus", "seq_len", "sp"})
    if (!out[k].is_number()) throw Error(fmt::format("{}: plan: field '{}' must be a number", where, k));
  return out;
}

// The figures of a point (kFigureKeys), each a number or null, checked against what they measure:
// times, rates and bytes are never negative (a document would print "-0.0 of 80.0 GiB"), and a
// model FLOPs utilisation is a share of the GPU's peak: above 1 no step runs.
json figures_of(const json& obj, std::string_view where) {
  json out = json::object();
  for (const char* k : kFigureKeys) {
    out[k] = number_or_null(obj, k, where);
    if (!out[k].is_number()) continue;
    const double v = out[k].get<double>();
    if (v < 0)
      throw Error(fmt::format("{}: field '{}' is {:g}: a time, rate or size is never negative", where, k, v));
    if (std::string_view(k) == "mfu" && v > 1)
      throw Error(fmt::format("{}: field 'mfu' is {:g}: a model FLOPs utilisation is a share of the GPU's peak, "
                              "at most 1", where, v));
  }
  return out;
}

json numbers_of(const json& obj, std::string_view where, std::string_view field) {
  json out = json::object();
  if (!obj.contains(field) || obj[field].is_null()) return out;
  if (!obj[field].is_object()) throw Error(fmt::format("{}: field '{}' must be an object", where, field));
  for (auto& [k, v] : obj[field].items()) {
    if (!v.is_number() && !v.is_null())
      throw Error(fmt::format("{}: {}.{} must be a number or null", where, field, k));
    out[k] = v;
  }
  return out;
}

std::string model_name(const json& j) {
  if (!j.is_object() || !j.contains("model")) return "";
  if (j["model"].is_string()) return j["model"].get<std::string>();
  return string_or(j["model"], "name", "");
}

// A GPU name as CUDA reports it ("NVIDIA H100 80GB HBM3") against a preset name ("h100-sxm"):
// the preset's family (up to the first '-') must appear in the reported name.
bool same_gpu(const std::string& reported, const std::string& preset) {
  if (reported.empty() || preset.empty()) return false;
  std::string r, family = preset.substr(0, preset.find('-'));
  for (char c : reported) r += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r.find(family) != std::string::npos;
}

// The other JSON the project writes beside its results (reports/results/ holds them with the runs
// they belong to): inputs of a run, or a script's verdict on it, with no plan point, step, timing or
// verdict for the report to show. Named, so that a folder of results is read whole; anything else
// without a 'kind' is still refused.
std::optional<std::string> not_a_result(const json& doc) {
  if (!doc.is_object() || doc.contains("kind")) {
    if (doc.is_object() && doc.value("kind", json()) == "prediction" && doc.value("program", json()) == "seqpar maxlen")
      return std::string("a seqpar maxlen answer (a length, not a timed plan): read it with seqpar maxlen --json");
    // A report's own tidy data, written beside report.md: reading it back would count its points twice.
    if (doc.is_object() && doc.value("kind", json()) == "report-data")
      return std::string("seqpar report's own data (report-data.json: an output, its inputs are named in it)");
    return std::nullopt;
  }
  if (doc.contains("states") && doc.contains("layer")) return std::string("a framework profile (an input of the runs)");
  if (doc.contains("hidden") && doc.contains("layers") && doc.contains("heads"))
    return std::string("a model preset (an input of the runs)");
  if (doc.contains("gpus_per_node") && doc.contains("gpu")) return std::string("a system preset or profile (an input of the runs)");
  if (doc.contains("bf16_tflops") && doc.contains("hbm_gbps")) return std::string("a GPU preset (an input of the runs)");
  if (doc.contains("rows") && doc.contains("reference") && doc.contains("min_ratio"))
    return std::string("scripts/device/compare_attention.py's comparison (its rows are the attention documents')");
  if (doc.contains("verdict") && doc.contains("probes") && doc.contains("predicted"))
    return std::string("scripts/device/maxlen_search.py's verdict (its probes are the training steps')");
  return std::nullopt;
}

struct Gatherer {
  json data = {{"sources", json::array()}, {"points", json::array()}, {"best", json::array()},
               {"comparisons", json::array()}, {"benchmarks", json::array()},
               {"validations", json::array()}, {"documents", json::array()}, {"skipped", json::array()}};
  // seqpar-train and bench_torch_step steps, paired after every input is read (pair_peer_steps).
  json peer_steps = json::array();
  // Measured training steps, predicted on one system after every input is read (compare_steps).
  std::vector<StepRecord> steps;

  void add_steps(const json& doc, const std::string& where, const std::string& file, const std::string& src) {
    StepDocument d = read_step_document(doc, where, file, PeakMemory::optional);
    const std::string mode = string_or(doc, "mode", "");
    for (auto& st : d.steps) steps.push_back({std::move(st), src, mode, d.gpu_name});
  }

  std::string add_source(const json& doc, const std::string& file, const std::string& kind) {
    std::string id = fmt::format("S{}", data["sources"].size() + 1);
    json s = {{"id", id}, {"file", file}, {"kind", kind}};
    if (kind == "google-benchmark") {
      const json& ctx = doc["context"];
      s["program"] = string_or(ctx, "executable", "google-benchmark");
      s["mode"] = to_string(Mode::single_rank_proxy);
      s["command"] = string_or(ctx, "executable", "");
      s["tool_version"] = string_or(ctx, "library_version", "");
      s["created_utc"] = string_or(ctx, "date", "");
      s["host"] = string_or(ctx, "host_name", "");
      s["versions"] = json::object();
    } else {
      for (const char* k : {"program", "mode", "command", "tool_version", "created_utc", "host"})
        s[k] = string_or(doc, k, "");
      json v = json::object();
      if (doc.contains("environment") && doc["environment"].is_object()) {
        const json& env = doc["environment"];
        if (env.contains("gpu") && env["gpu"].is_object()) v["gpu"] = string_or(env["gpu"], "name", "");
        for (const char* k : {"driver_version", "cuda_runtime_version", "nccl_version", "mpi_version"})
          if (env.contains(k) && env[k].is_string()) v[k] = env[k];
        if (env.contains("gpu_count") && env["gpu_count"].is_number()) v["gpu_count"] = env["gpu_count"];
      }
      s["versions"] = v;
    }
    s["mode_description"] = describe_mode(s["mode"].get<std::string>());
    data["sources"].push_back(s);
    return id;
  }

  // A simulator point: {"name", "system": {...}, "model": {...}, "plan": {...}, figures, memory, time}.
  // Of its model, system and groups objects, load_report_json_file keeps only the fields read here
  // (json_input.cpp: keep_what_the_report_reads); a new one read here is added there.
  void add_prediction_point(const json& p, std::string_view where, const std::string& src) {
    if (!p.is_object()) throw Error(fmt::format("{}: a point must be an object", where));
    json pt = {{"source", src}, {"origin", "prediction"}, {"mode", to_string(Mode::modelled)}};
    pt["name"] = string_or(p, "name", "");
    const json& sys = require(p, "system", where);
    if (!sys.is_object()) throw Error(fmt::format("{}: field 'system' must be an object", where));
    pt["system"] = require_string(sys, "name", fmt::format("{}: system", where));
    pt["gpu"] = string_or(sys, "gpu", "");
    pt["intra_link"] = string_or(sys, "intra_link", "");
    pt["nodes"] = number_or_null(sys, "nodes", where);
    pt["gpus_per_node"] = number_or_null(sys, "gpus_per_node", where);
    pt["model"] = model_name(p);
    if (pt["model"] == "") throw Error(fmt::format("{}: missing field 'model' (a name or an object with 'name')", where));
    pt["plan"] = plan_fields(require(p, "plan", where), where);
    pt["plan_label"] = plan_label(pt["plan"]);
    // A packed-document workload's load balancer (simulate, advise, sweep --documents): two points of
    // one plan that differ only in it keep two labels.
    pt["balancer"] = string_or(p, "balancer", "");
    if (pt["balancer"] != "" && number_or(pt["plan"], "ring_degree", 1) > 1)
      pt["plan_label"] = pt["plan_label"].get<std::string>() + " balancer=" + pt["balancer"].get<std::string>();
    // Where the plan's groups sit and what crosses the NICs (sim: describe_placement), when the
    // document says.
    pt["placement"] = p.contains("groups") && p["groups"].is_object() ? string_or(p["groups"], "label", "") : "";
    const json& valid = require(p, "valid", where);
    if (!valid.is_boolean()) throw Error(fmt::format("{}: field 'valid' must be true or false", where));
    pt["valid"] = valid;
    pt["fits"] = p.contains("fits") && p["fits"].is_boolean() ? p["fits"] : json(false);
    pt["errors"] = p.contains("errors") && p["errors"].is_array() ? p["errors"] : json::array();
    pt.update(figures_of(p, where));
    if (pt["memory_capacity_bytes"].is_null()) pt["memory_capacity_bytes"] = number_or_null(sys, "memory_capacity_bytes", where);
    // The claim recomputed from the numbers beside it: a plan whose peak is above the capacity does
    // not fit, whatever the document says (the other way, a host memory limit can make a plan that
    // fits the GPU not fit).
    if (pt["fits"].get<bool>() && pt["peak_memory_bytes"].is_number() && pt["memory_capacity_bytes"].is_number() &&
        pt["peak_memory_bytes"].get<double>() > pt["memory_capacity_bytes"].get<double>())
      throw Error(fmt::format("{}: field 'fits' is true but peak_memory_bytes {:.1f} GiB is above "
                              "memory_capacity_bytes {:.1f} GiB: the document contradicts its numbers",
                              where, pt["peak_memory_bytes"].get<double>() / (1024.0 * 1024 * 1024),
                              pt["memory_capacity_bytes"].get<double>() / (1024.0 * 1024 * 1024)));
    pt["memory"] = numbers_of(p, where, "memory");
    pt["time"] = numbers_of(p, where, "time");
    if (pt["valid"].get<bool>() && !(pt["step_time_s"].is_number() && pt["step_time_s"].get<double>() > 0))
      throw Error(fmt::format("{}: a valid point needs a positive number in 'step_time_s' (got {})", where,
                              pt["step_time_s"].is_number() ? fmt::format("{:g}", pt["step_time_s"].get<double>())
                                                            : std::string("null")));
    data["points"].push_back(std::move(pt));
  }

  void add_prediction(const json& doc, const std::string& where, const std::string& src) {
    if (doc.contains("results")) {
      const json& results = require_array(doc, "results", where);
      for (std::size_t i = 0; i < results.size(); ++i)
        add_prediction_point(results[i], fmt::format("{}: results[{}]", where, i), src);
      if (doc.contains("best")) {
        const json& best = require_array(doc, "best", where);
        for (std::size_t i = 0; i < best.size(); ++i) {
          std::string w = fmt::format("{}: best[{}]", where, i);
          const json& b = best[i];
          json e = {{"source", src}, {"system", require_string(b, "system", w)},
                    {"gpus", require_number(b, "gpus", w)}, {"seq_len", require_number(b, "seq_len", w)}};
          e["model"] = model_name(b);
          if (b.contains("plan") && b["plan"].is_object()) {
            e["plan"] = plan_fields(b["plan"], w);
            e["plan_label"] = plan_label(e["plan"]);
          } else {
            e["plan"] = nullptr;
            e["plan_label"] = nullptr;
          }
          e["step_time_s"] = number_or_null(b, "step_time_s", w);
          e["tokens_per_s_per_gpu"] = number_or_null(b, "tokens_per_s_per_gpu", w);
          e["reason"] = string_or(b, "reason", "");
          data["best"].push_back(e);
        }
      }
    } else if (doc.contains("ranked")) {
      const json& ranked = require_array(doc, "ranked", where);
      for (std::size_t i = 0; i < ranked.size(); ++i)
        add_prediction_point(ranked[i], fmt::format("{}: ranked[{}]", where, i), src);
    } else {
      add_prediction_point(doc, where, src);
    }
  }

  void add_measurement(const json& doc, const std::string& where, const std::string& src) {
    std::string mode = require_string(doc, "mode", where);
    std::string device = require_string(doc, "device", where);
    std::string program = require_string(doc, "program", where);
    const json& results = require_array(doc, "results", where);
    // A training-step document's rows are its steps: set beside the simulator (add_steps), not listed as benchmarks.
    const bool step_document = is_step_document(doc);
    json config = doc.contains("config") && doc["config"].is_object() ? doc["config"] : json::object();
    std::string gpu;
    if (doc.contains("environment") && doc["environment"].is_object() && doc["environment"].contains("gpu"))
      gpu = string_or(doc["environment"]["gpu"], "name", "");
    for (std::size_t i = 0; i < results.size(); ++i) {
      std::string w = fmt::format("{}: results[{}]", where, i);
      const json& r = results[i];
      std::string name = require_string(r, "name", w);
      if (is_validation_result(r)) {  // a verdict, not a time: kept out of every timing table and figure
        add_validation(doc, config, r, w, where, src);
        continue;
      }
      if (!r.contains("time_s"))
        throw Error(fmt::format("{}: missing field 'time_s' (a timed result's seconds; a seqpar-train --validate "
                                "result carries 'validation' instead)", w));
      double time_s = require_number(r, "time_s", w);
      check_time_is_median(r, w);
      if (is_peer_step_program(program)) peer_steps.push_back(peer_step_record(doc, r, w, src));
      if (r.contains("plan") && r["plan"].is_object()) {
        // A training step: a point beside the simulator's, same plan fields.
        const json& plan = r["plan"];
        json pt = {{"source", src}, {"origin", "measurement"}, {"mode", mode}, {"name", name}};
        std::string system = string_or(config, "system", "");
        if (system.empty()) system = string_or(r, "system", "");
        pt["system"] = system.empty() ? (gpu.empty() ? fmt::format("measured ({})", device) : gpu) : system;
        pt["gpu"] = gpu;
        pt["intra_link"] = "";
        pt["nodes"] = nullptr;
        pt["gpus_per_node"] = nullptr;
        std::string model = model_name(r);
        if (model.empty()) model = model_name(plan);
        if (model.empty()) model = model_name(config);
        pt["model"] = model.empty() ? "unnamed model" : model;
        pt["plan"] = plan_fields(plan, w);
        pt["plan_label"] = plan_label(pt["plan"]);
        pt["valid"] = true;
        pt["fits"] = true;
        pt["errors"] = json::array();
        pt.update(figures_of(plan, fmt::format("{}: plan", w)));
        if (pt["step_time_s"].is_null()) pt["step_time_s"] = time_s;
        pt["memory"] = numbers_of(plan, w, "memory");
        pt["time"] = numbers_of(plan, w, "time");
        data["points"].push_back(std::move(pt));
        continue;
      }
      if (step_document) continue;
      json fields = json::object();
      for (auto& [k, v] : r.items())
        if (v.is_number() && k != "time_s") fields[k] = v;
        else if (v.is_string() && k != "name") fields[k] = v;
        else if (v.is_boolean()) fields[k] = v;
      json row = {{"source", src}, {"program", program}, {"mode", mode}, {"device", device},
                  {"name", name}, {"time_s", time_s}, {"fields", fields}};
      if (r.contains("samples_s") && r["samples_s"].is_array()) row["repetitions"] = r["samples_s"].size();
      data["benchmarks"].push_back(row);
    }
  }

  // One row per `seqpar-train --validate` result: the plan (the result's, else the document's),
  // the run's arithmetic and the verdict (validation_verdict.hpp).
  void add_validation(const json& doc, const json& config, const json& r, const std::string& w,
                      const std::string& where, const std::string& src) {
    json row = read_validation_verdict(r, w);
    if (r.contains("plan")) row["plan"] = plan_fields(r["plan"], w);
    else if (doc.contains("plan")) row["plan"] = plan_fields(doc["plan"], where);
    else throw Error(fmt::format("{}: missing field 'plan' (the plan validated, beside 'results')", where));
    row["plan_label"] = plan_label(row["plan"]);
    std::string model = model_name(r);
    if (model.empty()) model = model_name(config);
    row.update({{"source", src}, {"name", r["name"]}, {"model", model.empty() ? "unnamed model" : model},
                {"mode", doc["mode"]}, {"backend", string_or(config, "backend", "")}});
    data["validations"].push_back(row);
  }

  void add_google_benchmark(const json& doc, const std::string& where, const std::string& src) {
    SampleSet set = read_samples(doc, where);
    for (const auto& b : set.benchmarks) {
      std::vector<double> s = b.samples_s;
      std::sort(s.begin(), s.end());
      double median = s.size() % 2 ? s[s.size() / 2] : (s[s.size() / 2 - 1] + s[s.size() / 2]) / 2;
      data["benchmarks"].push_back({{"source", src}, {"program", "google-benchmark"}, {"mode", to_string(Mode::single_rank_proxy)},
                                    {"device", "unknown"}, {"name", b.name}, {"time_s", median},
                                    {"repetitions", s.size()}, {"fields", json::object()}});
    }
  }

  void add(const json& doc, const std::string& where, const std::string& file) {
    if (auto why = not_a_result(doc)) {
      data["skipped"].push_back({{"file", where}, {"why", *why}});
      return;
    }
    if (!doc.contains("kind") && is_step_document(doc)) {  // the minimal step format (README)
      std::string src = add_source(doc, where, "steps");
      data["sources"].back()["mode_description"] = "measured training steps (minimal step format)";
      add_steps(doc, where, file, src);
      return;
    }
    std::string kind = document_kind(doc, where);
    if (kind == "collection") {
      const json& docs = require_array(doc, "documents", where);
      for (std::size_t i = 0; i < docs.size(); ++i) add(docs[i], fmt::format("{}: documents[{}]", where, i), file);
      return;
    }
    std::string src = add_source(doc, where, kind);
    if (kind == "prediction") {
      add_prediction(doc, where, src);
      for (json& e : document_comparisons(doc, where, src)) data["documents"].push_back(std::move(e));
    }
    else if (kind == "measurement") {
      add_measurement(doc, where, src);
      if (is_step_document(doc)) add_steps(doc, where, file, src);
    }
    else add_google_benchmark(doc, where, src);
  }

  // Predicted against measured: same model and the same plan fields (and the same system when the
  // measurement names one).
  void pair_up() {
    for (const auto& m : data["points"]) {
      if (m["origin"] != "measurement") continue;
      for (const auto& p : data["points"]) {
        if (p["origin"] != "prediction" || !p["valid"].get<bool>() || p["model"] != m["model"]) continue;
        bool same_plan = true;
        for (auto& [k, v] : m["plan"].items())
          if (p["plan"].contains(k) && p["plan"][k] != v) same_plan = false;
        if (!same_plan) continue;
        if (m["system"] != p["system"] && !same_gpu(m["gpu"].get<std::string>(), p["gpu"].get<std::string>())) continue;
        double pred = p["step_time_s"].get<double>(), meas = m["step_time_s"].get<double>();
        data["comparisons"].push_back({{"model", m["model"]}, {"system", p["system"]}, {"plan_label", m["plan_label"]},
                                       {"gpus", m["plan"]["gpus"]}, {"seq_len", m["plan"]["seq_len"]},
                                       {"predicted_step_time_s", pred}, {"measured_step_time_s", meas},
                                       {"error", pred / meas - 1}, {"prediction_source", p["source"]},
                                       {"measurement_source", m["source"]}, {"measurement_mode", m["mode"]}});
      }
    }
  }
};

}  // namespace

std::string structure_label(const json& plan) { return seqpar::describe_structure(plan); }

std::string plan_label(const json& plan) {
  auto num = [&](const char* k, double fallback) {
    return plan.contains(k) && plan[k].is_number() ? plan[k].get<double>() : fallback;
  };
  std::string out = structure_label(plan);
  std::string ckpt = string_or(plan, "checkpoint", "none");
  if (ckpt != "none") out += " ckpt=" + ckpt;
  if (plan.contains("micro_batch") && num("micro_batch", 1) != 1) out += fmt::format(" mb={}", num("micro_batch", 1));
  if (plan.contains("grad_accum_steps") && num("grad_accum_steps", 1) != 1)
    out += fmt::format(" ga={}", num("grad_accum_steps", 1));
  for (const char* k : {"offload_checkpoints", "offload_optimizer", "tiled_mlp", "tiled_loss"})
    if (plan.contains(k) && plan[k].is_boolean() && plan[k].get<bool>()) {
      std::string s = k;
      std::replace(s.begin(), s.end(), '_', '-');
      out += " +" + s;
    }
  return out;
}

std::string describe_mode(const std::string& mode) {
  Mode m;
  try {
    m = parse_mode(mode);
  } catch (const Error&) {
    return "mode '" + mode + "'";
  }
  switch (m) {
    case Mode::modelled: return "modelled by the simulator (not measured)";
    case Mode::real_ranks: return "measured with real ranks (one process per device)";
    case Mode::virtual_ranks: return "measured with virtual ranks (all ranks in one process on one device)";
    case Mode::single_rank_proxy:
      return "measured on a single-rank proxy (rank 0's shapes; communication is loopback, not a real link)";
  }
  return "mode '" + mode + "'";
}

json gather_report_data(const std::vector<InputDocument>& inputs, const std::string& system, const std::string& framework) {
  Gatherer g;
  for (const auto& in : inputs) g.add(in.doc, in.file, in.file);
  g.pair_up();
  g.data["peer_comparisons"] = pair_peer_steps(g.peer_steps);
  StepSystems systems(system, framework);
  g.data["step_comparisons"] = g.steps.empty() ? no_step_comparisons() : compare_steps(systems, g.steps);
  g.data["method_comparison"] = method_comparison(g.data["points"]);
  pair_one_sequence(g.data["documents"], g.data["points"]);
  return g.data;
}

}  // namespace seqpar::reports

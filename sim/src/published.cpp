#include "seqpar/sim/published.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "published_data.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/sim/attention_cost.hpp"
#include "seqpar/sim/attention_kernels.hpp"
#include "seqpar/sim/document_cost.hpp"
#include "seqpar/sim/framework.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/simulate.hpp"
#include "seqpar/sim/validity.hpp"

namespace seqpar::sim {

namespace {

using nlohmann::json;

std::string text(const json& j, const char* key, std::string_view what) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string() || it->get<std::string>().empty())
    throw Error(fmt::format("{}: field '{}' must be a non-empty string", what, key));
  return it->get<std::string>();
}

PublishedMeasure parse_measure(const std::string& s, std::string_view what) {
  for (PublishedMeasure m : {PublishedMeasure::step_time_s, PublishedMeasure::attention_iterations_per_s,
                             PublishedMeasure::megatron_tflops_per_gpu, PublishedMeasure::throughput_ratio,
                             PublishedMeasure::document_layer_speedup, PublishedMeasure::packing_imbalance,
                             PublishedMeasure::tokens_per_s_per_gpu, PublishedMeasure::nemo_model_tflops_per_gpu,
                             PublishedMeasure::model_tflops_per_gpu, PublishedMeasure::step_time_ratio})
    if (s == to_string(m)) return m;
  throw Error(fmt::format("{}: field 'measure' is '{}'; expected step_time_s, attention_iterations_per_s, "
                          "megatron_tflops_per_gpu, throughput_ratio, document_layer_speedup, packing_imbalance, "
                          "tokens_per_s_per_gpu, nemo_model_tflops_per_gpu, model_tflops_per_gpu or step_time_ratio",
                          what, s));
}

double positive_figure(const json& j, const char* key, std::string_view what) {
  auto vi = j.find(key);
  if (vi == j.end() || !vi->is_number() || !std::isfinite(vi->get<double>()) || !(vi->get<double>() > 0))
    throw Error(fmt::format("{}: field '{}' must be a positive number", what, key));
  return vi->get<double>();
}

Plan plan_of(const json& j, std::string_view where) {
  auto pi = j.find("plan");
  if (pi == j.end() || !pi->is_object()) throw Error(fmt::format("{}: field 'plan' must be a plan object", where));
  try {
    return plan_from_json(*pi);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: plan: {}", where, e.what()));
  }
}

PublishedRun run_from_json(const json& j, std::string_view what) {
  if (!j.is_object()) throw Error(fmt::format("{}: each run must be an object", what));
  PublishedRun r;
  r.id = text(j, "id", what);
  const std::string where = fmt::format("{} run '{}'", what, r.id);
  r.source = text(j, "source", where);
  r.configuration = text(j, "configuration", where);
  auto mi = j.find("model");
  if (mi == j.end() || !(mi->is_string() || mi->is_object()))
    throw Error(fmt::format("{}: field 'model' must be a model preset name or a model object", where));
  r.model = *mi;
  r.system = text(j, "system", where);
  if (auto ki = j.find("attention_kernel"); ki != j.end()) r.attention_kernel = text(j, "attention_kernel", where);
  if (auto fi = j.find("framework"); fi != j.end()) r.framework = text(j, "framework", where);
  if (auto pi = j.find("system_patch"); pi != j.end()) {
    if (!pi->is_object()) throw Error(fmt::format("{}: field 'system_patch' must be an object (a JSON merge patch)", where));
    r.system_patch = *pi;
  }
  if (!r.attention_kernel.empty() || !r.system_patch.is_null() || !r.framework.empty()) {
    try {  // refused here, naming the run, rather than at the first comparison
      (void)published_system(r);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", where, e.what()));
    }
  }
  r.plan = plan_of(j, where);
  r.measure = parse_measure(text(j, "measure", where), where);
  auto bi = j.find("baseline");
  const bool ratio = r.measure == PublishedMeasure::throughput_ratio || r.measure == PublishedMeasure::step_time_ratio;
  if ((bi != j.end()) != ratio)
    throw Error(fmt::format("{}: field 'baseline' goes with measures throughput_ratio and step_time_ratio, and only "
                            "there", where));
  if (bi != j.end()) {
    const std::string bwhere = fmt::format("{}: baseline", where);
    if (!bi->is_object()) throw Error(fmt::format("{} must be an object", bwhere));
    PublishedBaseline b;
    b.label = text(*bi, "label", bwhere);
    b.plan = plan_of(*bi, bwhere);
    b.published = positive_figure(*bi, "published", bwhere);
    if (auto bm = bi->find("model"); bm != bi->end()) {
      if (r.measure != PublishedMeasure::step_time_ratio || !(bm->is_string() || bm->is_object()))
        throw Error(fmt::format("{}: field 'model' (a preset name or model object) goes with measure step_time_ratio",
                                bwhere));
      b.model = *bm;
    }
    // A ratio of throughputs is a ratio of step times only at the same work per step.
    if (b.plan.gpus != r.plan.gpus || b.plan.seq_len != r.plan.seq_len ||
        b.plan.global_batch_sequences() != r.plan.global_batch_sequences())
      throw Error(fmt::format("{}: the plan must have the run's GPUs, sequence length and sequences per optimizer "
                              "step (gpus {}, seq_len {}, {} sequences)", bwhere, r.plan.gpus, r.plan.seq_len,
                              r.plan.global_batch_sequences()));
    r.baseline = std::move(b);
  }
  if (auto si = j.find("share"); si != j.end()) {
    if (!si->is_number_integer() || si->get<std::int64_t>() < 1 || si->get<std::int64_t>() > 1 << 20)
      throw Error(fmt::format("{}: field 'share' must be a whole number from 1 to {}", where, 1 << 20));
    if (r.measure != PublishedMeasure::attention_iterations_per_s)
      throw Error(fmt::format("{}: field 'share' applies only to measure attention_iterations_per_s", where));
    r.share = si->get<int>();
  }
  const bool docs =
      r.measure == PublishedMeasure::document_layer_speedup || r.measure == PublishedMeasure::packing_imbalance;
  if (j.contains("documents") != docs)
    throw Error(fmt::format("{}: field 'documents' goes with measures document_layer_speedup and packing_imbalance, "
                            "and only there", where));
  if (docs) {
    const json& d = j["documents"];
    const std::string dwhere = fmt::format("{}: documents", where);
    if (!d.is_object()) throw Error(fmt::format("{} must be an object", dwhere));
    r.documents = text(d, "spec", dwhere);
    if (d.contains("packing")) r.packing = text(d, "packing", dwhere);
    if (auto si = d.find("seed"); si != d.end()) {
      if (!si->is_number_unsigned()) throw Error(fmt::format("{}: field 'seed' must be a whole number >= 0", dwhere));
      r.doc_seed = si->get<std::uint64_t>();
    }
    if (auto batches = d.find("batches"); batches != d.end()) {
      if (!batches->is_number_integer()) throw Error(fmt::format("{}: field 'batches' must be a whole number", dwhere));
      r.doc_batches = batches->get<int>();
    }
    try {
      (void)make_workload(r.documents, r.packing, r.doc_seed, r.doc_batches);  // refused here, naming the run
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", dwhere, e.what()));
    }
  }
  if (r.measure == PublishedMeasure::document_layer_speedup) {
    r.balancer = parse_balancer(text(j, "balancer", where), fmt::format("{}: balancer", where));
    r.baseline_balancer =
        parse_balancer(text(j, "baseline_balancer", where), fmt::format("{}: baseline_balancer", where));
  }
  if (r.measure == PublishedMeasure::packing_imbalance) {
    auto micro = j.find("micro_batches");
    if (micro == j.end() || !micro->is_number_integer() || micro->get<std::int64_t>() < 2 ||
        micro->get<std::int64_t>() > r.doc_batches || r.doc_batches % micro->get<std::int64_t>() != 0)
      throw Error(fmt::format("{}: field 'micro_batches' must be a whole number from 2 that divides documents.batches "
                              "({})", where, r.doc_batches));
    r.micro_batches = micro->get<int>();
  }
  r.published = positive_figure(j, "published", where);
  if (auto band = j.find("band"); band != j.end()) {
    if (!band->is_number() || !(band->get<double>() > 0) || !(band->get<double>() < 1))
      throw Error(fmt::format("{}: field 'band' must be a number between 0 and 1 (a relative error)", where));
    r.band = band->get<double>();
    r.band_source = text(j, "band_source", where);  // a band other than the default says whose it is
  }
  const std::string status = text(j, "status", where);
  if (status == "in_band") {
    r.expect_in_band = true;
  } else if (status == "open_finding") {
    r.expect_in_band = false;
    r.finding = text(j, "finding", where);  // an open finding says why it misses
  } else {
    throw Error(fmt::format("{}: field 'status' is '{}'; expected in_band or open_finding", where, status));
  }
  if (auto fi = j.find("finding"); r.expect_in_band && fi != j.end() && fi->is_string()) r.finding = fi->get<std::string>();
  return r;
}

Model model_of(const json& model, const std::string& id) {
  return model.is_string() ? load_model(model.get<std::string>())
                           : model_from_json(model, fmt::format("published run '{}' model", id));
}
Model model_of(const PublishedRun& r) { return model_of(r.model, r.id); }

}  // namespace

std::string_view to_string(PublishedMeasure m) {
  switch (m) {
    case PublishedMeasure::step_time_s: return "step_time_s";
    case PublishedMeasure::attention_iterations_per_s: return "attention_iterations_per_s";
    case PublishedMeasure::megatron_tflops_per_gpu: return "megatron_tflops_per_gpu";
    case PublishedMeasure::throughput_ratio: return "throughput_ratio";
    case PublishedMeasure::document_layer_speedup: return "document_layer_speedup";
    case PublishedMeasure::packing_imbalance: return "packing_imbalance";
    case PublishedMeasure::tokens_per_s_per_gpu: return "tokens_per_s_per_gpu";
    case PublishedMeasure::nemo_model_tflops_per_gpu: return "nemo_model_tflops_per_gpu";
    case PublishedMeasure::model_tflops_per_gpu: return "model_tflops_per_gpu";
    case PublishedMeasure::step_time_ratio: return "step_time_ratio";
  }
  return "?";
}

std::vector<PublishedRun> published_runs_from_json(const json& j, std::string_view what) {
  auto it = j.find("runs");
  if (!j.is_object() || it == j.end() || !it->is_array() || it->empty())
    throw Error(fmt::format("{}: expected an object with a non-empty array 'runs'", what));
  std::vector<PublishedRun> out;
  for (const json& r : *it) {
    out.push_back(run_from_json(r, what));
    for (std::size_t i = 0; i + 1 < out.size(); ++i)
      if (out[i].id == out.back().id) throw Error(fmt::format("{}: run id '{}' appears twice", what, out.back().id));
  }
  return out;
}

std::vector<PublishedRun> builtin_published_runs() {
  return published_runs_from_json(parse_json(detail::published_runs_text(), "sim/published/runs.json"),
                                  "sim/published/runs.json");
}

double nemo_flops_per_token(const Model& m, double seq_len) {
  const double token_embedding = double(m.vocab) * m.hidden;
  return 6.0 * (double(m.total_params()) - token_embedding) + 12.0 * seq_len * m.hidden * m.layers;
}

double megatron_flops_per_sequence(int layers, int hidden, int vocab, double seq_len, bool checkpointing) {
  const double L = layers, h = hidden, V = vocab, s = seq_len;
  const double f = checkpointing ? 4.0 : 3.0;
  return 24.0 * f * s * L * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * L * h));
}

System published_system(const PublishedRun& run) {
  // The run's framework chooses the attention kernel where the run names none, as on the command line.
  const Framework f = run.framework.empty() ? default_framework() : load_framework(run.framework);
  if (run.system_patch.is_null()) return load_system(run.system, run.attention_kernel, f);
  json doc = preset_document("system", run.system);
  doc.merge_patch(run.system_patch);
  return system_from_json(std::move(doc), fmt::format("system '{}' with the run's system_patch", run.system),
                          run.attention_kernel, f);
}

PublishedComparison compare_published(const PublishedRun& run) {
  PublishedComparison c;
  c.run = run;
  c.published = run.published;
  const Model m = model_of(run);
  const System s = published_system(run);
  switch (run.measure) {
    case PublishedMeasure::step_time_s:
    case PublishedMeasure::tokens_per_s_per_gpu:
    case PublishedMeasure::nemo_model_tflops_per_gpu:
    case PublishedMeasure::model_tflops_per_gpu:
    case PublishedMeasure::megatron_tflops_per_gpu: {
      const Result r = simulate(m, s, run.plan);
      if (!r.valid) {
        c.errors = r.errors;
        return c;
      }
      c.fits = r.fits;
      if (run.measure == PublishedMeasure::step_time_s) {
        c.predicted = r.step_time_s;
      } else if (run.measure == PublishedMeasure::tokens_per_s_per_gpu) {
        c.predicted = r.tokens_per_s_per_gpu;
      } else if (run.measure == PublishedMeasure::model_tflops_per_gpu) {
        c.predicted = r.tflops_per_gpu;
      } else if (run.measure == PublishedMeasure::nemo_model_tflops_per_gpu) {
        c.predicted = r.tokens_per_s_per_gpu * nemo_flops_per_token(m, double(run.plan.seq_len)) / 1e12;
      } else {
        // Megatron divides one step's FLOPs (all dp sequences) by its time and the GPU count: per
        // GPU that is one sequence's FLOPs shared by the tp x sp x pp GPUs of its group.
        const double per_seq = megatron_flops_per_sequence(m.layers, m.hidden, m.vocab, double(run.plan.seq_len),
                                                           run.plan.mem.checkpoint == Checkpoint::full);
        c.predicted = per_seq * run.plan.micro_batch * run.plan.grad_accum_steps /
                      (double(run.plan.sp) * run.plan.tp * run.plan.pp) / r.step_time_s / 1e12;
      }
      break;
    }
    case PublishedMeasure::attention_iterations_per_s: {
      if (!check_plan(m, s, run.plan, c.errors)) return c;
      // One attention call forward and backward, as the benchmark times it: the elapsed times
      // with the communication the ring or all-to-all leaves exposed.
      const AttentionCost a = attention_layer_cost(m, s, run.plan);
      c.predicted = 1.0 / ((a.fwd_s + a.bwd_s) * run.share);
      break;
    }
    case PublishedMeasure::throughput_ratio: {
      const Result r = simulate(m, s, run.plan), b = simulate(m, s, run.baseline->plan);
      c.errors = r.errors;
      for (const std::string& e : b.errors) c.errors.push_back("baseline: " + e);
      if (!c.errors.empty()) return c;
      c.fits = r.fits && b.fits;
      // Same GPUs and tokens per optimizer step (checked when the run was read): the throughput
      // ratio is the step-time ratio.
      c.predicted = b.step_time_s / r.step_time_s;
      c.published = run.published / run.baseline->published;
      break;
    }
    case PublishedMeasure::step_time_ratio: {
      const Model bm = run.baseline->model.is_null() ? m : model_of(run.baseline->model, run.id);
      const Result r = simulate(m, s, run.plan), b = simulate(bm, s, run.baseline->plan);
      c.errors = r.errors;
      for (const std::string& e : b.errors) c.errors.push_back("baseline: " + e);
      if (!c.errors.empty()) return c;
      c.fits = r.fits && b.fits;
      c.predicted = r.step_time_s / b.step_time_s;
      c.published = run.published / run.baseline->published;
      break;
    }
    case PublishedMeasure::document_layer_speedup: {
      if (!check_plan(m, s, run.plan, c.errors)) return c;
      const SampledWorkload w =
          sample_workload(make_workload(run.documents, run.packing, run.doc_seed, run.doc_batches), run.plan.seq_len);
      // One layer forward and backward: what the structure costs say a layer takes under each balancer.
      auto layer = [&](Balancer b) {
        const DocumentCosts d = document_costs(w, run.plan, b, s.gpu);
        const StructureCosts k = structure_costs(m, s, run.plan, &d);
        return k.gemm_fwd_s + k.gemm_bwd_s + k.elementwise.fwd_s + k.elementwise.bwd_s + k.attention.fwd_s +
               k.attention.bwd_s + k.tensor_parallel.layer_fwd_s + k.tensor_parallel.layer_bwd_s;
      };
      try {
        c.predicted = layer(run.baseline_balancer) / layer(run.balancer);
      } catch (const Error& e) {
        c.errors.push_back(e.what());
        return c;
      }
      break;
    }
    case PublishedMeasure::packing_imbalance: {
      if (!check_plan(m, s, run.plan, c.errors)) return c;
      const SampledWorkload w =
          sample_workload(make_workload(run.documents, run.packing, run.doc_seed, run.doc_batches), run.plan.seq_len);
      try {
        // Each micro-batch's forward latency: one layer's forward under its own documents.
        std::vector<double> latency;
        for (const PackedBatch& b : w.batches) {
          SampledWorkload one;
          one.seq_len = w.seq_len;
          one.batches = {b};
          one.drawn = w.drawn;
          const DocumentCosts d = document_costs(one, run.plan, native_balancer(run.plan), s.gpu);
          const StructureCosts k = structure_costs(m, s, run.plan, &d);
          latency.push_back(k.gemm_fwd_s + k.elementwise.fwd_s + k.attention.fwd_s + k.tensor_parallel.layer_fwd_s);
        }
        const std::size_t per = static_cast<std::size_t>(run.micro_batches), groups = latency.size() / per;
        double sum = 0;
        for (std::size_t g = 0; g < groups; ++g) {
          double mx = 0, total = 0;
          for (std::size_t i = g * per; i < (g + 1) * per; ++i) mx = std::max(mx, latency[i]), total += latency[i];
          sum += mx * double(per) / total;
        }
        c.predicted = sum / double(groups);
      } catch (const Error& e) {
        c.errors.push_back(e.what());
        return c;
      }
      break;
    }
  }
  c.error = (c.predicted - c.published) / c.published;
  c.in_band = std::abs(c.error) <= run.band;
  return c;
}

}  // namespace seqpar::sim

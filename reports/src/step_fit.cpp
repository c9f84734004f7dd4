#include "seqpar/reports/step_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "seqpar/core/error.hpp"
#include "seqpar/reports/fit.hpp"
#include "seqpar/sim/comm_cost.hpp"
#include "seqpar/sim/simulate.hpp"

namespace seqpar::reports {

using nlohmann::json;

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;
// A term whose effect on the steps is within this sine of a combination of the earlier terms'
// effects is not fitted: there 1% of noise in the steps moves it by about 20% of its own effect
// (1 / 0.05), so its value would be the noise's, not the framework's.
constexpr double kMinIndependence = 0.05;

sim::System with_terms(const sim::System& base, const sim::FrameworkTerms& f) {
  sim::System s = base;
  s.framework = f;
  return s;
}

sim::Result simulate_step(const sim::System& sys, const MeasuredStep& s) {
  const Plan plan = normalized(s.plan, sys.gpus_per_node);
  // A single-rank proxy's collectives were loopback copies: predicted as it ran.
  sim::Result r = s.comm == "loopback" ? sim::simulate(s.model, sim::loopback_system(sys), plan)
                                       : sim::simulate(s.model, sys, plan);
  if (!r.valid) {
    std::string why;
    for (const auto& e : r.errors) why += (why.empty() ? "" : "; ") + e;
    throw Error(fmt::format("{}: {}: the simulator cannot predict this step on system '{}': {}", s.file, s.name,
                            sys.name, why));
  }
  return r;
}

double rms(const std::vector<double>& predicted, const std::vector<double>& measured) {
  double sum = 0;
  for (std::size_t i = 0; i < measured.size(); ++i) sum += std::pow(predicted[i] / measured[i] - 1, 2);
  return std::sqrt(sum / double(measured.size()));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// What makes two steps the same configuration: the model's shape, the plan as the simulator runs
// it and the dtype (names and files do not).
std::string configuration(const sim::System& base, const MeasuredStep& s) {
  const sim::Model& m = s.model;
  return fmt::format("{} {} {} {} {} {} {} {} {} {} {}|{}|{}", m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim,
                     m.ffn_hidden, m.vocab, int(m.mlp), int(m.norm), m.tied_embeddings, m.causal,
                     to_json(normalized(s.plan, base.gpus_per_node)).dump(), s.dtype);
}

std::string list_files(const std::vector<const MeasuredStep*>& group) {
  std::vector<std::string> files;
  for (const auto* s : group)
    if (std::find(files.begin(), files.end(), s->file) == files.end()) files.push_back(s->file);
  std::string out;
  for (std::size_t i = 0; i < files.size() && i < 3; ++i) out += (i ? ", " : "") + files[i];
  if (files.size() > 3) out += fmt::format(" and {} more", files.size() - 3);
  return out;
}

// The step measurements of one quantity (time or peak memory) and the simulator's predictions of
// them for given terms.
struct Quantity {
  const sim::System& base;
  const std::vector<MeasuredStep>& steps;
  sim::FrameworkTarget target;

  double measured(std::size_t i) const {
    return target == sim::FrameworkTarget::step_time ? steps[i].step_time_s : steps[i].peak_memory_bytes;
  }
  std::vector<double> predicted(const sim::FrameworkTerms& f) const {
    const sim::System sys = with_terms(base, f);
    std::vector<double> p;
    for (const auto& s : steps) {
      const StepPrediction q = predict_step(sys, s);
      p.push_back(target == sim::FrameworkTarget::step_time ? q.step_time_s : q.peak_memory_bytes);
    }
    return p;
  }
  double objective(const sim::FrameworkTerms& f) const {
    const std::vector<double> p = predicted(f);
    double s = 0;
    for (std::size_t i = 0; i < p.size(); ++i) s += std::pow(p[i] / measured(i) - 1, 2);
    return s;
  }
};

// A term in the fit's own coordinate: the value, or its reciprocal for a divisor.
double to_fit(const sim::FrameworkTermSpec& t, double v) { return t.reciprocal ? 1 / v : v; }
double from_fit(const sim::FrameworkTermSpec& t, double y) { return t.reciprocal ? 1 / y : y; }

// d prediction_i / d y_j (per unit of the fit coordinate) at `f`, by a unit step: the predictions
// are linear in the fit coordinates, so the step's size does not matter.
std::vector<double> slopes(const Quantity& q, const sim::FrameworkTerms& f, const sim::FrameworkTermSpec& t) {
  sim::FrameworkTerms g = f;
  g.*t.field = from_fit(t, to_fit(t, f.*t.field) + 1);
  const std::vector<double> a = q.predicted(f), b = q.predicted(g);
  std::vector<double> s(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) s[i] = b[i] - a[i];
  return s;
}

double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

// The part of `v` no combination of `basis` (orthonormal vectors) explains.
std::vector<double> unexplained(std::vector<double> v, const std::vector<std::vector<double>>& basis) {
  for (const auto& e : basis) {
    double dot = 0;
    for (std::size_t i = 0; i < v.size(); ++i) dot += v[i] * e[i];
    for (std::size_t i = 0; i < v.size(); ++i) v[i] -= dot * e[i];
  }
  return v;
}

const char* quantity_name(sim::FrameworkTarget t) { return t == sim::FrameworkTarget::step_time ? "time" : "memory"; }

// Fits the terms of one quantity into `out` (the other quantity's terms are untouched) and records
// each term's outcome in `fits`.
void fit_quantity(const Quantity& q, sim::FrameworkTerms& out, std::vector<TermFit>& fits) {
  const std::size_t n = q.steps.size();
  std::vector<const sim::FrameworkTermSpec*> specs;
  for (const auto& t : sim::kFrameworkTerms)
    if (t.target == q.target) specs.push_back(&t);
  const std::size_t max_terms = n >= 2 ? n - 1 : 1;
  const sim::FrameworkTerms prior = out;

  // Each term's range in the fit coordinate: its physical one, and no term alone larger than any
  // step's measured value (a fixed overhead longer than a step, a reserve above a step's peak).
  std::vector<TermFit> terms;
  std::vector<double> lo, hi;
  std::vector<std::vector<double>> columns;  // effect on each step's relative residual
  for (const auto* t : specs) {
    TermFit tf;
    tf.key = t->key;
    tf.prior = prior.*t->field;
    double ylo = std::min(to_fit(*t, t->lo), to_fit(*t, t->hi)), yhi = std::max(to_fit(*t, t->lo), to_fit(*t, t->hi));
    const std::vector<double> s = slopes(q, prior, *t);
    std::vector<double> col(n);
    for (std::size_t i = 0; i < n; ++i) {
      col[i] = s[i] / q.measured(i);
      if (s[i] > 0) yhi = std::min(yhi, q.measured(i) / s[i]);
    }
    yhi = std::max(yhi, ylo);
    lo.push_back(ylo);
    hi.push_back(yhi);
    tf.lo = std::min(from_fit(*t, ylo), from_fit(*t, yhi));
    tf.hi = std::max(from_fit(*t, ylo), from_fit(*t, yhi));
    columns.push_back(col);
    terms.push_back(tf);
  }

  // Which terms the steps determine, in kFrameworkTerms' order.
  std::vector<std::size_t> chosen;
  std::vector<std::vector<double>> basis;
  std::string chosen_keys;
  for (std::size_t j = 0; j < specs.size(); ++j) {
    TermFit& tf = terms[j];
    std::vector<double> rest = unexplained(columns[j], basis);
    const double ind = norm(columns[j]) > 0 ? norm(rest) / norm(columns[j]) : 0;
    if (!(norm(columns[j]) > 0)) {
      tf.why = fmt::format("it changes none of these steps' predicted {}", quantity_name(q.target));
    } else if (chosen.size() >= max_terms) {
      tf.why = n == 1 ? fmt::format("one step fits one {} term", quantity_name(q.target))
                      : fmt::format("{} distinct steps fit at most {} {} terms (as many terms as steps would fit them "
                                    "exactly, and their noise would become the terms)", n, max_terms,
                                    quantity_name(q.target));
    } else if (ind < kMinIndependence) {
      tf.why = fmt::format("its effect on these steps is within {:.0f}% of a multiple of {}'s, so the steps cannot tell "
                           "them apart{}", kMinIndependence * 100, chosen_keys,
                           tf.key == "bytes_per_token" ? " (steps at one per-rank token count)" : "");
    } else {
      tf.determined = true;
      chosen.push_back(j);
      chosen_keys += (chosen_keys.empty() ? "" : " and ") + tf.key;
      const double r = norm(rest);
      for (double& x : rest) x /= r;
      basis.push_back(rest);
    }
  }

  // Least squares on relative error over the chosen terms, inside their ranges: the predictions are
  // linear in the fit coordinates, so one exact box-constrained solve from the prior reaches the
  // optimum; it is repeated from there in case the simulator is not quite linear (an exposed
  // transfer that starts to hide), and a solve that does not improve the fit ends it.
  sim::FrameworkTerms cur = prior;
  for (std::size_t j : chosen) {
    const auto* t = specs[j];
    cur.*t->field = from_fit(*t, std::clamp(to_fit(*t, cur.*t->field), lo[j], hi[j]));
  }
  double cur_obj = q.objective(cur);
  for (int iter = 0; iter < 8 && !chosen.empty(); ++iter) {
    const std::vector<double> p = q.predicted(cur);
    std::vector<double> a, b, blo, bhi;
    std::vector<std::vector<double>> s;
    for (std::size_t j : chosen) s.push_back(slopes(q, cur, *specs[j]));
    for (std::size_t i = 0; i < n; ++i) {
      double rhs = 1 - p[i] / q.measured(i);  // A y' = A y - r
      for (std::size_t c = 0; c < chosen.size(); ++c) {
        const double aij = s[c][i] / q.measured(i);
        a.push_back(aij);
        rhs += aij * to_fit(*specs[chosen[c]], cur.*specs[chosen[c]]->field);
      }
      b.push_back(rhs);
    }
    for (std::size_t j : chosen) {
      blo.push_back(lo[j]);
      bhi.push_back(hi[j]);
    }
    const std::vector<double> y = bounded_least_squares(a, b, blo, bhi);
    sim::FrameworkTerms next = cur;
    for (std::size_t c = 0; c < chosen.size(); ++c) next.*specs[chosen[c]]->field = from_fit(*specs[chosen[c]], y[c]);
    const double obj = q.objective(next);
    if (!(obj < cur_obj * (1 - 1e-12))) break;
    cur = next;
    cur_obj = obj;
  }
  const std::vector<double> p = q.predicted(cur);
  for (std::size_t j = 0; j < specs.size(); ++j) {
    TermFit& tf = terms[j];
    tf.value = cur.*specs[j]->field;
    if (tf.determined) {
      const double y = to_fit(*specs[j], tf.value);
      const bool at_lo = std::fabs(y - lo[j]) <= 1e-9 * std::max(1.0, std::fabs(lo[j]));
      const bool at_hi = !at_lo && std::fabs(y - hi[j]) <= 1e-9 * std::max(1.0, std::fabs(hi[j]));
      tf.at_bound = at_lo || at_hi;
      // The steps pushed it there: at the low end (of a term that adds) the model already predicts
      // more than was measured, at the high end less.
      if (tf.at_bound) {
        int k = 0;
        double worst = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const double r = p[i] / q.measured(i) - 1;
          if (at_lo ? r > 0 : r < 0) {
            ++k;
            worst = std::max(worst, std::fabs(r));
          }
        }
        const bool reciprocal_hi = specs[j]->reciprocal;  // the coordinate's low end is the value's high end
        tf.why = fmt::format("at the {} end of its range [{:.6g}, {:.6g}]{}", (at_lo != reciprocal_hi) ? "low" : "high",
                             tf.lo, tf.hi,
                             k ? fmt::format(": the model predicts {} the measured {} of {} of {} steps even there (by up "
                                             "to {:.1f}%)", at_lo ? "more than" : "less than", quantity_name(q.target), k,
                                             n, worst * 100)
                               : "");
      }
    }
    fits.push_back(tf);
  }
  out = cur;
}

}  // namespace

StepPrediction predict_step(const sim::System& sys, const MeasuredStep& s) {
  const sim::Result r = simulate_step(sys, s);
  // A step's measured peak is what its framework's allocator handed out (memory_cost.hpp); a step
  // measured cold includes what the first step does once.
  return {r.step_time_s + s.cold_share * r.time.first_step, r.memory.allocated_bytes()};
}

std::vector<MeasuredStep> distinct_steps(const sim::System& base, const std::vector<MeasuredStep>& steps,
                                         std::vector<std::string>& notes) {
  const sim::Gpu& g = base.gpu;
  for (const auto& s : steps) {
    const sim::Result r = simulate_step(base, s);
    const double rate = r.model_flops_per_gpu / s.step_time_s;
    if (rate > g.bf16_flops)
      throw Error(fmt::format("{}: {}: the step implies {:.1f} TFLOP/s per GPU (the model's {:.4g} FLOPs per GPU in {:.4g} "
                              "s), above the {} GPU's bf16 peak of {:.1f} TFLOP/s: no step runs faster than its GPU's "
                              "peak (check step_time_s, the model and the plan, or give the right --base-system)",
                              s.file, s.name, rate / 1e12, r.model_flops_per_gpu, s.step_time_s, g.name,
                              g.bf16_flops / 1e12));
    // The weights the plan keeps on each GPU at the peak (sharded and offloaded as the plan says)
    // are a floor no measured peak can be under.
    if (s.has_peak_memory && s.peak_memory_bytes < r.memory.peak.parameters)
      throw Error(fmt::format("{}: {}: peak_memory_bytes {:.4g} GiB is below the {:.2f} GiB of parameters the plan keeps "
                              "on each GPU: no step holds less than its own weights (check peak_memory_bytes, the model "
                              "and the plan)",
                              s.file, s.name, s.peak_memory_bytes / kGiB, r.memory.peak.parameters / kGiB));
    if (s.peak_memory_bytes > g.memory_bytes)
      throw Error(fmt::format("{}: {}: peak_memory_bytes {:.2f} GiB is above the {} GPU's memory of {:.2f} GiB: no step "
                              "holds more than its GPU has (check peak_memory_bytes, or give the right --base-system)",
                              s.file, s.name, s.peak_memory_bytes / kGiB, g.name, g.memory_bytes / kGiB));
  }
  std::vector<std::string> order;
  std::map<std::string, std::vector<const MeasuredStep*>> groups;
  for (const auto& s : steps) {
    const std::string key = configuration(base, s);
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(&s);
  }
  std::vector<MeasuredStep> out;
  for (const auto& key : order) {
    const auto& group = groups[key];
    MeasuredStep m = *group.front();
    if (group.size() > 1) {
      std::vector<double> t, p;
      for (const auto* s : group) {
        t.push_back(s->step_time_s);
        p.push_back(s->peak_memory_bytes);
      }
      const auto [tmin, tmax] = std::minmax_element(t.begin(), t.end());
      const auto [pmin, pmax] = std::minmax_element(p.begin(), p.end());
      m.step_time_s = median(t);
      m.peak_memory_bytes = median(p);
      if (*tmin == *tmax && *pmin == *pmax)
        notes.push_back(fmt::format("{}: {}: the same step given {} times: fitted once (a copy adds no information, "
                                    "and a leave-one-out must leave every copy out)", list_files(group), m.name,
                                    group.size()));
      else
        notes.push_back(fmt::format("{}: {}: {} measurements of one configuration fitted as one step, at their median "
                                    "time {:.4g} s (spread {:.1f}%) and peak {:.2f} GiB (spread {:.1f}%)",
                                    list_files(group), m.name, group.size(), m.step_time_s,
                                    (*tmax - *tmin) / m.step_time_s * 100, m.peak_memory_bytes / kGiB,
                                    (*pmax - *pmin) / m.peak_memory_bytes * 100));
    }
    out.push_back(std::move(m));
  }
  return out;
}

StepFit fit_framework_terms(const sim::System& base, const std::vector<MeasuredStep>& input) {
  if (input.empty()) throw Error("calibrate: no training steps to fit the framework terms to");
  std::vector<std::string> merged;
  const std::vector<MeasuredStep> steps = distinct_steps(base, input, merged);
  StepFit f;
  f.points = int(steps.size());
  f.terms = base.framework;
  for (sim::FrameworkTarget target : {sim::FrameworkTarget::step_time, sim::FrameworkTarget::peak_memory})
    fit_quantity(Quantity{base, steps, target}, f.terms, f.fitted);
  const sim::System sys = with_terms(base, f.terms);
  std::vector<double> pt, mt, pm, mm;
  for (const auto& s : steps) {
    const StepPrediction p = predict_step(sys, s);
    pt.push_back(p.step_time_s);
    mt.push_back(s.step_time_s);
    pm.push_back(p.peak_memory_bytes);
    mm.push_back(s.peak_memory_bytes);
  }
  f.time_rel_residual = rms(pt, mt);
  f.memory_rel_residual = rms(pm, mm);
  return f;
}

std::vector<std::string> describe_undetermined(const StepFit& fit) {
  std::vector<std::string> lines;
  for (const auto& t : fit.fitted) {
    if (!t.determined)
      lines.push_back(fmt::format("framework term {} not fitted, held at its prior {:.6g}: {}", t.key, t.prior, t.why));
    else if (t.at_bound)
      lines.push_back(fmt::format("framework term {} fitted at {:.6g}, {}; the range is physical (no term alone exceeds "
                                  "any step's measured value), so the model's own parts, not this term, miss there",
                                  t.key, t.value, t.why));
  }
  return lines;
}

json step_rows(const sim::System& base, const StepFit& fit, const std::vector<MeasuredStep>& input) {
  std::vector<std::string> merged;
  const std::vector<MeasuredStep> steps = distinct_steps(base, input, merged);
  json rows = json::array();
  const sim::System sys = with_terms(base, fit.terms);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const MeasuredStep& s = steps[i];
    const StepPrediction p = predict_step(sys, s);
    json row = {{"file", s.file},
                {"name", s.name},
                {"plan", describe(normalized(s.plan, sys.gpus_per_node))},
                {"seq_len", s.plan.seq_len},
                {"measured_step_time_s", s.step_time_s},
                {"predicted_step_time_s", p.step_time_s},
                {"time_residual", p.step_time_s / s.step_time_s - 1},
                {"measured_peak_memory_bytes", s.peak_memory_bytes},
                {"predicted_peak_memory_bytes", p.peak_memory_bytes},
                {"memory_residual", p.peak_memory_bytes / s.peak_memory_bytes - 1},
                {"loo_predicted_step_time_s", nullptr},
                {"loo_time_error", nullptr},
                {"loo_predicted_peak_memory_bytes", nullptr},
                {"loo_memory_error", nullptr}};
    if (steps.size() >= 2) {
      // Every step but this one; the steps are distinct, so no copy of it stays in.
      std::vector<MeasuredStep> others;
      for (std::size_t k = 0; k < steps.size(); ++k)
        if (k != i) others.push_back(steps[k]);
      const StepFit loo = fit_framework_terms(base, others);
      const StepPrediction q = predict_step(with_terms(base, loo.terms), s);
      row["loo_predicted_step_time_s"] = q.step_time_s;
      row["loo_time_error"] = q.step_time_s / s.step_time_s - 1;
      row["loo_predicted_peak_memory_bytes"] = q.peak_memory_bytes;
      row["loo_memory_error"] = q.peak_memory_bytes / s.peak_memory_bytes - 1;
    }
    rows.push_back(row);
  }
  return rows;
}

}  // namespace seqpar::reports

#include "seqpar/reports/step_fit.hpp"

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "seqpar/core/error.hpp"
#include "seqpar/sim/simulate.hpp"

namespace seqpar::reports {

using nlohmann::json;

namespace {

// The search range of the memory-bound efficiency: the preset loader's bounds.
constexpr double kMinEfficiency = 1e-3, kMaxEfficiency = 1.0;

sim::System with_terms(const sim::System& base, const sim::FrameworkTerms& f) {
  sim::System s = base;
  s.framework = f;
  return s;
}

double rms(const std::vector<double>& predicted, const std::vector<double>& measured) {
  double sum = 0;
  for (std::size_t i = 0; i < measured.size(); ++i) sum += std::pow(predicted[i] / measured[i] - 1, 2);
  return std::sqrt(sum / double(measured.size()));
}

struct TimeCandidate {
  double overhead = 0, objective = 0;
};

// For one efficiency: the overhead minimising the relative squared error (clamped at 0: a framework
// adds time, never removes it), and that error.
TimeCandidate time_candidate(const sim::System& base, const std::vector<MeasuredStep>& steps, double efficiency) {
  sim::FrameworkTerms f;
  f.memory_bound_efficiency = efficiency;
  const sim::System sys = with_terms(base, f);
  std::vector<double> p;
  double num = 0, den = 0;
  for (const auto& s : steps) {
    p.push_back(predict_step(sys, s).step_time_s);
    const double w = 1 / (s.step_time_s * s.step_time_s);
    num += w * (s.step_time_s - p.back());
    den += w;
  }
  TimeCandidate c;
  c.overhead = std::max(0.0, num / den);
  for (std::size_t i = 0; i < steps.size(); ++i) c.objective += std::pow((p[i] + c.overhead) / steps[i].step_time_s - 1, 2);
  return c;
}

void fit_time(const sim::System& base, const std::vector<MeasuredStep>& steps, StepFit& out) {
  double best_e = kMaxEfficiency;
  if (steps.size() >= 2) {
    // A grid in log space finds the basin, golden-section search refines inside it.
    constexpr int kGrid = 48;
    const double lo = std::log(kMinEfficiency), hi = std::log(kMaxEfficiency);
    auto at = [&](int i) { return lo + (hi - lo) * i / kGrid; };
    int best = kGrid;
    double best_obj = time_candidate(base, steps, kMaxEfficiency).objective;
    for (int i = 0; i < kGrid; ++i) {
      const double obj = time_candidate(base, steps, std::exp(at(i))).objective;
      if (obj < best_obj) { best_obj = obj; best = i; }
    }
    double a = at(std::max(0, best - 1)), b = at(std::min(kGrid, best + 1));
    const double g = (std::sqrt(5.0) - 1) / 2;
    for (int it = 0; it < 60; ++it) {
      const double x1 = b - g * (b - a), x2 = a + g * (b - a);
      if (time_candidate(base, steps, std::exp(x1)).objective <= time_candidate(base, steps, std::exp(x2)).objective) b = x2;
      else a = x1;
    }
    const double e = std::exp((a + b) / 2);
    best_e = time_candidate(base, steps, e).objective <= best_obj ? e : std::exp(at(best));
    out.efficiency_fitted = true;
  }
  out.terms.memory_bound_efficiency = std::min(kMaxEfficiency, std::max(kMinEfficiency, best_e));
  out.terms.step_overhead_s = time_candidate(base, steps, out.terms.memory_bound_efficiency).overhead;
}

void fit_memory(const sim::System& base, const std::vector<MeasuredStep>& steps, StepFit& out) {
  // The modelled peak without framework memory, and the rank's local tokens as the simulator
  // counts them for the per-token term (the change of the peak for 1 byte per token).
  sim::FrameworkTerms one;
  one.bytes_per_token = 1;
  const sim::System none = with_terms(base, {}), per_token = with_terms(base, one);
  std::vector<double> r, t, w;
  std::set<double> distinct;
  for (const auto& s : steps) {
    const double p0 = predict_step(none, s).peak_memory_bytes;
    r.push_back(s.peak_memory_bytes - p0);
    t.push_back(std::round(predict_step(per_token, s).peak_memory_bytes - p0));
    w.push_back(1 / (s.peak_memory_bytes * s.peak_memory_bytes));
    distinct.insert(t.back());
  }
  double sw = 0, st = 0, stt = 0, sr = 0, str = 0;
  for (std::size_t i = 0; i < r.size(); ++i) {
    sw += w[i]; st += w[i] * t[i]; stt += w[i] * t[i] * t[i]; sr += w[i] * r[i]; str += w[i] * t[i] * r[i];
  }
  // Two terms need a point beyond the two that would fix them exactly, or noise becomes a slope.
  const double det = sw * stt - st * st;
  if (steps.size() >= 3 && distinct.size() >= 2 && det > 0) {
    out.terms.bytes_per_token = (sw * str - st * sr) / det;
    out.terms.reserve_bytes = (sr - out.terms.bytes_per_token * st) / sw;
    out.per_token_fitted = true;
  } else {
    out.terms.reserve_bytes = sr / sw;
    out.terms.bytes_per_token = 0;
  }
}

}  // namespace

StepPrediction predict_step(const sim::System& sys, const MeasuredStep& s) {
  const Plan plan = normalized(s.plan, sys.gpus_per_node);
  const sim::Result r = sim::simulate(s.model, sys, plan);
  if (!r.valid) {
    std::string why;
    for (const auto& e : r.errors) why += (why.empty() ? "" : "; ") + e;
    throw Error(fmt::format("{}: {}: the simulator cannot predict this step on system '{}': {}", s.file, s.name,
                            sys.name, why));
  }
  return {r.step_time_s, r.peak_memory_bytes()};
}

StepFit fit_framework_terms(const sim::System& base, const std::vector<MeasuredStep>& steps) {
  if (steps.empty()) throw Error("calibrate: no training steps to fit the framework terms to");
  StepFit f;
  f.points = int(steps.size());
  fit_time(base, steps, f);
  fit_memory(base, steps, f);
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

json step_rows(const sim::System& base, const StepFit& fit, const std::vector<MeasuredStep>& steps) {
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

#include "seqpar/reports/fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "seqpar/common/error.hpp"

namespace seqpar::reports {

AlphaBetaFit fit_alpha_beta(const std::vector<double>& bytes, const std::vector<double>& t) {
  if (bytes.size() != t.size()) throw Error("alpha-beta fit: sizes and times differ in count");
  std::set<double> distinct(bytes.begin(), bytes.end());
  if (distinct.size() < 2)
    throw Error(fmt::format("alpha-beta fit: needs at least 2 distinct message sizes, got {}", distinct.size()));
  // Weighted least squares with weights 1/t^2 (relative error): normal equations for t = a + b x.
  double sw = 0, sx = 0, sxx = 0, st = 0, sxt = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (!(t[i] > 0) || !(bytes[i] > 0)) throw Error("alpha-beta fit: sizes and times must be positive");
    double w = 1.0 / (t[i] * t[i]);
    sw += w; sx += w * bytes[i]; sxx += w * bytes[i] * bytes[i]; st += w * t[i]; sxt += w * bytes[i] * t[i];
  }
  double det = sw * sxx - sx * sx;
  double a = (sxx * st - sx * sxt) / det;
  double b = (sw * sxt - sx * st) / det;
  if (a < 0) {  // latency cannot be negative: refit the slope through the origin
    a = 0;
    b = sxt / sxx;
  }
  if (!(b > 0)) throw Error("alpha-beta fit: time does not grow with message size; cannot fit a bandwidth");
  AlphaBetaFit f;
  f.latency_s = a;
  f.bytes_per_s = 1.0 / b;
  double ss = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    double e = (a + b * bytes[i] - t[i]) / t[i];
    ss += e * e;
  }
  f.points = static_cast<int>(t.size());
  f.rel_residual = std::sqrt(ss / static_cast<double>(t.size()));
  return f;
}

namespace {

// For a fixed L_half, each series' efficiency minimising sum((eff * r_i - 1)^2) with
// r_i = peak * g(L_i) / y_i is sum(r) / sum(r^2); returns the total squared relative error.
double solve_efficiencies(const std::vector<SaturationSeries>& series, double peak, double half,
                          std::vector<double>* eff_out) {
  double total = 0;
  if (eff_out) eff_out->clear();
  for (const auto& s : series) {
    double sr = 0, srr = 0;
    for (std::size_t i = 0; i < s.tokens.size(); ++i) {
      double r = peak * s.tokens[i] / (s.tokens[i] + half) / s.flops_per_s[i];
      sr += r;
      srr += r * r;
    }
    double eff = sr / srr;
    for (std::size_t i = 0; i < s.tokens.size(); ++i) {
      double r = peak * s.tokens[i] / (s.tokens[i] + half) / s.flops_per_s[i];
      total += (eff * r - 1) * (eff * r - 1);
    }
    if (eff_out) eff_out->push_back(eff);
  }
  return total;
}

}  // namespace

SaturationFit fit_saturation(const std::vector<SaturationSeries>& series, double peak) {
  if (series.empty()) throw Error("efficiency fit: no series to fit");
  if (!(peak > 0)) throw Error("efficiency fit: the peak rate must be positive");
  std::set<double> distinct;
  int n = 0;
  for (const auto& s : series) {
    if (s.tokens.empty() || s.tokens.size() != s.flops_per_s.size())
      throw Error("efficiency fit: every series needs points with a token count and a rate each");
    for (std::size_t i = 0; i < s.tokens.size(); ++i) {
      if (!(s.tokens[i] > 0) || !(s.flops_per_s[i] > 0))
        throw Error("efficiency fit: token counts and rates must be positive");
      distinct.insert(s.tokens[i]);
      ++n;
    }
  }
  if (distinct.size() < 2)
    throw Error(fmt::format("efficiency fit: needs at least 2 distinct sizes to separate efficiency from "
                            "L_half, got {}", distinct.size()));
  // Coarse grid over log L_half, then golden-section refinement around the best grid point.
  const double lo = std::log(1.0), hi = std::log(1e8);
  const int grid = 400;
  int best = 0;
  double best_err = INFINITY;
  for (int k = 0; k <= grid; ++k) {
    double e = solve_efficiencies(series, peak, std::exp(lo + (hi - lo) * k / grid), nullptr);
    if (e < best_err) { best_err = e; best = k; }
  }
  double step = (hi - lo) / grid;
  double a = std::max(lo, lo + step * (best - 1)), b = std::min(hi, lo + step * (best + 1));
  const double phi = (std::sqrt(5.0) - 1) / 2;
  double c = b - phi * (b - a), d = a + phi * (b - a);
  double fc = solve_efficiencies(series, peak, std::exp(c), nullptr);
  double fd = solve_efficiencies(series, peak, std::exp(d), nullptr);
  for (int it = 0; it < 100 && b - a > 1e-10; ++it) {
    if (fc < fd) { b = d; d = c; fd = fc; c = b - phi * (b - a); fc = solve_efficiencies(series, peak, std::exp(c), nullptr); }
    else { a = c; c = d; fc = fd; d = a + phi * (b - a); fd = solve_efficiencies(series, peak, std::exp(d), nullptr); }
  }
  SaturationFit f;
  double log_half = (a + b) / 2;
  f.half_tokens = std::exp(log_half);
  double err = solve_efficiencies(series, peak, f.half_tokens, &f.efficiency);
  f.points = n;
  f.rel_residual = std::sqrt(err / n);
  f.at_bound = best == 0 || best == grid;
  return f;
}

}  // namespace seqpar::reports

#include "seqpar/reports/fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "seqpar/core/error.hpp"

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

constexpr double kMinExponent = 0.25, kMaxExponent = 8;  // within sim's kMin/kMaxCurveExponent
constexpr double kMinHalf = 1, kMaxHalf = 1e8;

struct Eval {
  double err = INFINITY;  // sum of squared relative errors
  double eff = 0;
  bool capped = false;
};

// For fixed (L_half, p) the efficiency minimising sum((eff * r_i - 1)^2), r_i = peak * g(L_i) / y_i,
// is sum(r) / sum(r^2); the objective is a parabola in eff, so clipping at 1 is the constrained optimum.
Eval evaluate(const SaturationSeries& s, double peak, double log_half, double p) {
  const double half = std::exp(log_half);
  std::vector<double> r(s.tokens.size());
  double sr = 0, srr = 0;
  for (std::size_t i = 0; i < r.size(); ++i) {
    const double x = std::pow(s.tokens[i] / half, p);
    r[i] = peak * (std::isinf(x) ? 1.0 : x / (1 + x)) / s.flops_per_s[i];
    sr += r[i];
    srr += r[i] * r[i];
  }
  Eval e;
  if (!(srr > 0)) return e;
  e.eff = sr / srr;
  if (e.eff > 1) {
    e.eff = 1;
    e.capped = true;
  }
  e.err = 0;
  for (double ri : r) e.err += (e.eff * ri - 1) * (e.eff * ri - 1);
  return e;
}

}  // namespace

CurveFit fit_efficiency_curve(const SaturationSeries& s, double peak) {
  if (!(peak > 0)) throw Error("efficiency fit: the peak rate must be positive");
  if (s.tokens.empty() || s.tokens.size() != s.flops_per_s.size())
    throw Error("efficiency fit: the series needs points with a token count and a rate each");
  std::set<double> distinct;
  for (std::size_t i = 0; i < s.tokens.size(); ++i) {
    if (!(s.tokens[i] > 0) || !(s.flops_per_s[i] > 0) || !std::isfinite(s.tokens[i]) || !std::isfinite(s.flops_per_s[i]))
      throw Error("efficiency fit: token counts and rates must be positive and finite");
    distinct.insert(s.tokens[i]);
  }
  if (distinct.size() < 2)
    throw Error(fmt::format("efficiency fit: needs at least 2 distinct sizes to separate efficiency from "
                            "L_half, got {}", distinct.size()));
  const bool fixed = distinct.size() < 3;
  const double lo_u = std::log(kMinHalf), hi_u = std::log(kMaxHalf);
  const double lo_p = fixed ? 1 : kMinExponent, hi_p = fixed ? 1 : kMaxExponent;
  // Coarse grid, then compass search from its best point with halving steps.
  const int nu = 160, np = fixed ? 0 : 62;
  double best_u = lo_u, best_p = lo_p;
  Eval best;
  for (int i = 0; i <= nu; ++i)
    for (int k = 0; k <= np; ++k) {
      const double u = lo_u + (hi_u - lo_u) * i / nu, p = np ? lo_p + (hi_p - lo_p) * k / np : lo_p;
      Eval e = evaluate(s, peak, u, p);
      if (e.err < best.err) { best = e; best_u = u; best_p = p; }
    }
  double du = (hi_u - lo_u) / nu, dp = np ? (hi_p - lo_p) / np : 0;
  for (int it = 0; it < 200 && du > 1e-10; ++it) {
    bool moved = false;
    for (auto [su, sp] : {std::pair{1, 0}, {-1, 0}, {0, 1}, {0, -1}}) {
      const double u = std::clamp(best_u + su * du, lo_u, hi_u), p = std::clamp(best_p + sp * dp, lo_p, hi_p);
      Eval e = evaluate(s, peak, u, p);
      if (e.err < best.err) { best = e; best_u = u; best_p = p; moved = true; }
    }
    if (!moved) { du /= 2; dp /= 2; }
  }
  CurveFit f;
  f.efficiency = best.eff;
  f.half_tokens = std::exp(best_u);
  f.exponent = best_p;
  f.points = static_cast<int>(s.tokens.size());
  f.exponent_fixed = fixed;
  f.capped = best.capped;
  const double edge = 1e-6;
  f.at_bound = best_u - lo_u < edge || hi_u - best_u < edge ||
               (!fixed && (best_p - lo_p < edge || hi_p - best_p < edge));
  double ss = 0;
  for (std::size_t i = 0; i < s.tokens.size(); ++i) {
    const double x = std::pow(s.tokens[i] / f.half_tokens, f.exponent);
    const double e = peak * f.efficiency * (std::isinf(x) ? 1.0 : x / (1 + x)) / s.flops_per_s[i] - 1;
    ss += e * e;
    f.max_rel_residual = std::max(f.max_rel_residual, std::fabs(e));
  }
  f.rel_residual = std::sqrt(ss / f.points);
  return f;
}

}  // namespace seqpar::reports

namespace seqpar::reports {

namespace {

// Least squares on the free columns of A (the others fixed at x's values) by the normal equations
// with Gaussian elimination and partial pivoting; false when they are singular.
bool solve_free(const std::vector<double>& a, const std::vector<double>& b, std::size_t n,
                const std::vector<int>& free, std::vector<double>& x) {
  const std::size_t rows = b.size(), f = free.size();
  if (f == 0) return true;
  std::vector<double> r(rows);  // b minus the fixed columns' part
  for (std::size_t i = 0; i < rows; ++i) {
    r[i] = b[i];
    for (std::size_t j = 0; j < n; ++j)
      if (std::find(free.begin(), free.end(), int(j)) == free.end()) r[i] -= a[i * n + j] * x[j];
  }
  std::vector<double> m(f * (f + 1), 0.0);  // [A_f^T A_f | A_f^T r]
  for (std::size_t p = 0; p < f; ++p) {
    for (std::size_t q = 0; q < f; ++q)
      for (std::size_t i = 0; i < rows; ++i) m[p * (f + 1) + q] += a[i * n + free[p]] * a[i * n + free[q]];
    for (std::size_t i = 0; i < rows; ++i) m[p * (f + 1) + f] += a[i * n + free[p]] * r[i];
  }
  double scale = 0;
  for (std::size_t p = 0; p < f; ++p) scale = std::max(scale, std::fabs(m[p * (f + 1) + p]));
  for (std::size_t c = 0; c < f; ++c) {
    std::size_t piv = c;
    for (std::size_t p = c + 1; p < f; ++p)
      if (std::fabs(m[p * (f + 1) + c]) > std::fabs(m[piv * (f + 1) + c])) piv = p;
    if (!(std::fabs(m[piv * (f + 1) + c]) > 1e-12 * scale)) return false;
    for (std::size_t q = 0; q <= f; ++q) std::swap(m[c * (f + 1) + q], m[piv * (f + 1) + q]);
    for (std::size_t p = 0; p < f; ++p) {
      if (p == c) continue;
      const double k = m[p * (f + 1) + c] / m[c * (f + 1) + c];
      for (std::size_t q = c; q <= f; ++q) m[p * (f + 1) + q] -= k * m[c * (f + 1) + q];
    }
  }
  for (std::size_t p = 0; p < f; ++p) x[free[p]] = m[p * (f + 1) + f] / m[p * (f + 1) + p];
  return true;
}

}  // namespace

std::vector<double> bounded_least_squares(const std::vector<double>& a, const std::vector<double>& b,
                                          const std::vector<double>& lo, const std::vector<double>& hi) {
  const std::size_t n = lo.size(), rows = b.size();
  if (hi.size() != n || a.size() != rows * n)
    throw Error(fmt::format("bounded least squares: A has {} entries for {} rows and {} unknowns ({} upper bounds)",
                            a.size(), rows, n, hi.size()));
  if (n > 6) throw Error(fmt::format("bounded least squares: {} unknowns, at most 6", n));
  for (std::size_t j = 0; j < n; ++j)
    if (!(lo[j] <= hi[j])) throw Error(fmt::format("bounded least squares: unknown {} has bounds [{}, {}]", j, lo[j], hi[j]));
  auto objective = [&](const std::vector<double>& x) {
    double s = 0;
    for (std::size_t i = 0; i < rows; ++i) {
      double e = -b[i];
      for (std::size_t j = 0; j < n; ++j) e += a[i * n + j] * x[j];
      s += e * e;
    }
    return s;
  };
  std::vector<double> best(lo);
  double best_obj = INFINITY;
  std::size_t faces = 1;
  for (std::size_t j = 0; j < n; ++j) faces *= 3;
  for (std::size_t face = 0; face < faces; ++face) {
    std::vector<double> x(n);
    std::vector<int> free;
    std::size_t code = face;
    for (std::size_t j = 0; j < n; ++j, code /= 3) {
      if (code % 3 == 0) free.push_back(int(j));
      x[j] = code % 3 == 1 ? lo[j] : hi[j];
    }
    if (!solve_free(a, b, n, free, x)) continue;  // a singular face: its neighbours cover it
    bool inside = true;
    for (std::size_t j = 0; j < n; ++j) inside = inside && x[j] >= lo[j] && x[j] <= hi[j];
    if (!inside) continue;
    const double obj = objective(x);
    if (obj < best_obj) {
      best_obj = obj;
      best = x;
    }
  }
  return best;
}

}  // namespace seqpar::reports

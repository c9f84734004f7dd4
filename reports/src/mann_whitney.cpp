#include "seqpar/reports/mann_whitney.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "seqpar/core/error.hpp"

namespace seqpar::reports {

namespace {

// Counts of U = 0..m*n over all arrangements of m and n distinct values: the coefficients of the
// Gaussian binomial [m+n choose n]_q, built as prod_{i=1..n} (1 - q^(m+i)) / (1 - q^i).
std::vector<double> u_distribution_counts(int m, int n) {
  std::vector<double> c(static_cast<std::size_t>(m) * n + 1, 0.0);
  c[0] = 1.0;
  int degree = 0;
  for (int i = 1; i <= n; ++i) {
    int shift = m + i;
    for (int k = degree + shift; k >= shift; --k)
      if (k < static_cast<int>(c.size())) c[k] -= c[k - shift];
    // Exact division by (1 - q^i): the quotient's coefficients satisfy q_k = p_k + q_{k-i}.
    degree += m;
    for (int k = i; k <= degree; ++k) c[k] += c[k - i];
    for (int k = degree + 1; k < static_cast<int>(c.size()); ++k) c[k] = 0.0;
  }
  return c;
}

}  // namespace

MannWhitney mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.empty() || b.empty()) throw Error("Mann-Whitney U test: both samples need at least one value");
  const std::size_t n1 = a.size(), n2 = b.size(), n = n1 + n2;
  struct Item { double v; int group; };
  std::vector<Item> all;
  all.reserve(n);
  for (double v : a) all.push_back({v, 0});
  for (double v : b) all.push_back({v, 1});
  std::sort(all.begin(), all.end(), [](const Item& x, const Item& y) { return x.v < y.v; });

  // Mid-ranks for ties, and the tie term sum(t^3 - t) for the variance correction.
  double rank_sum_a = 0, tie_term = 0;
  bool ties = false;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j + 1 < n && all[j + 1].v == all[i].v) ++j;
    double t = static_cast<double>(j - i + 1);
    double mid_rank = (static_cast<double>(i + j) + 2.0) / 2.0;
    for (std::size_t k = i; k <= j; ++k)
      if (all[k].group == 0) rank_sum_a += mid_rank;
    if (t > 1) {
      ties = true;
      tie_term += t * t * t - t;
    }
    i = j + 1;
  }
  const double dn1 = static_cast<double>(n1), dn2 = static_cast<double>(n2), dn = static_cast<double>(n);
  MannWhitney r;
  r.u = rank_sum_a - dn1 * (dn1 + 1) / 2;

  if (!ties && n <= 40) {
    std::vector<double> c = u_distribution_counts(static_cast<int>(n1), static_cast<int>(n2));
    double total = std::accumulate(c.begin(), c.end(), 0.0);
    auto u = static_cast<std::size_t>(std::llround(r.u));
    double lower = 0, upper = 0;
    for (std::size_t k = 0; k < c.size(); ++k) {
      if (k <= u) lower += c[k];
      if (k >= u) upper += c[k];
    }
    r.p_value = std::min(1.0, 2.0 * std::min(lower, upper) / total);
    r.exact = true;
    return r;
  }
  double mean = dn1 * dn2 / 2;
  double var = dn1 * dn2 / 12 * ((dn + 1) - tie_term / (dn * (dn - 1)));
  if (var <= 0) {  // every value equal: no evidence of any difference
    r.p_value = 1.0;
    return r;
  }
  double z = (std::fabs(r.u - mean) - 0.5) / std::sqrt(var);
  r.p_value = std::min(1.0, std::erfc(std::max(z, 0.0) / std::sqrt(2.0)));
  return r;
}

double min_attainable_p_value(int n1, int n2) {
  if (n1 < 1 || n2 < 1) return 1.0;
  // log C(n1 + n2, n1) through lgamma: exact enough here and no overflow for large samples.
  const double log_c = std::lgamma(n1 + n2 + 1.0) - std::lgamma(n1 + 1.0) - std::lgamma(n2 + 1.0);
  return std::min(1.0, 2.0 * std::exp(-log_c));
}

}  // namespace seqpar::reports

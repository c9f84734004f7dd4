#include "seqpar/core/stats.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "seqpar/core/error.hpp"

namespace seqpar {

double quantile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) throw Error("statistics: no samples for a quantile");
  double pos = q * static_cast<double>(sorted.size() - 1);
  auto lo = static_cast<std::size_t>(std::floor(pos));
  std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Stats summarize(std::vector<double> v) {
  if (v.empty()) throw Error("statistics: no samples to summarize");
  std::sort(v.begin(), v.end());
  Stats s;
  s.count = static_cast<int>(v.size());
  s.min = v.front();
  s.max = v.back();
  s.median = quantile_sorted(v, 0.5);
  s.p10 = quantile_sorted(v, 0.1);
  s.p90 = quantile_sorted(v, 0.9);
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.stddev = v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : 0.0;
  return s;
}

nlohmann::json to_json(const Stats& s, const char* suffix) {
  std::string u = suffix;
  return {{"count", s.count},          {"median" + u, s.median}, {"mean" + u, s.mean},
          {"stddev" + u, s.stddev},    {"min" + u, s.min},       {"max" + u, s.max},
          {"p10" + u, s.p10},          {"p90" + u, s.p90}};
}

}  // namespace seqpar

// Summary statistics of repeated timings: the median is the figure reported, the spread beside it.
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

namespace seqpar {

struct Stats {
  int count = 0;
  double median = 0, mean = 0, stddev = 0, min = 0, max = 0, p10 = 0, p90 = 0;
};

// The q-quantile (0 <= q <= 1) of an ascending sample by linear interpolation between order
// statistics (the usual "type 7"). Throws seqpar::Error on an empty sample.
double quantile_sorted(const std::vector<double>& sorted, double q);

// Throws seqpar::Error on an empty sample.
Stats summarize(std::vector<double> samples);

// {"count","median","mean","stddev","min","max","p10","p90"} with `suffix` appended to each
// value key (for example "_s"), so the unit stays in the name.
nlohmann::json to_json(const Stats& s, const char* suffix);

}  // namespace seqpar

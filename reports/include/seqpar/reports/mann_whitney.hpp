// Two-sided Mann-Whitney U test (Wilcoxon rank-sum): does one sample tend to be larger than the
// other? Distribution-free, so skewed, outlier-prone timing samples need no normality assumption.
#pragma once
#include <vector>

namespace seqpar::reports {

struct MannWhitney {
  double u = 0;        // U statistic of the first sample (count of pairs a > b, ties count 1/2)
  double p_value = 1;  // two-sided
  bool exact = false;  // exact null distribution (small samples without ties) or normal approximation
};

// Exact p-value when there are no ties and n1 + n2 <= 40; otherwise the normal approximation
// with tie and continuity corrections. Throws seqpar::Error when either sample is empty.
MannWhitney mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace seqpar::reports

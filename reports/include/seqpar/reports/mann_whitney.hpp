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

// The smallest two-sided p-value the exact test can give with n1 and n2 samples: both extreme
// arrangements (all of one sample above the other), 2 / C(n1 + n2, n1). When it is not below the
// significance level, the test cannot call any difference, however large (3 against 3: 0.1).
double min_attainable_p_value(int n1, int n2);

}  // namespace seqpar::reports

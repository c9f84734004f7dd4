// The least-squares fits behind `seqpar calibrate`: alpha-beta (latency + bytes / bandwidth) for a
// link, and saturating efficiency (achieved = peak * eff * L / (L + L_half)) for kernels.
// Both minimise relative error, so small and large messages or shapes weigh alike.
#pragma once
#include <vector>

namespace seqpar::reports {

struct AlphaBetaFit {
  double latency_s = 0;
  double bytes_per_s = 0;
  double rel_residual = 0;  // root-mean-square relative error of the fitted times
  int points = 0;
};

// time = latency + bytes / bandwidth over (bytes, time) pairs; the latency is held at 0 when the
// unconstrained fit makes it negative. Throws seqpar::Error with fewer than 2 distinct sizes.
AlphaBetaFit fit_alpha_beta(const std::vector<double>& bytes, const std::vector<double>& time_s);

struct SaturationSeries {
  std::vector<double> tokens;       // L of each point
  std::vector<double> flops_per_s;  // achieved rate of each point
};

struct SaturationFit {
  std::vector<double> efficiency;   // one per series
  double half_tokens = 0;           // shared L_half
  double rel_residual = 0;          // RMS relative error over all points
  int points = 0;
  bool at_bound = false;            // L_half ended on the search bound: the data do not pin it down
};

// Shared L_half over all series (attention forward and backward share one), one efficiency per
// series: a 1-D search over log L_half with each efficiency in closed form. Throws seqpar::Error
// when a series is empty or the points span fewer than 2 distinct L.
SaturationFit fit_saturation(const std::vector<SaturationSeries>& series, double peak_flops_per_s);

}  // namespace seqpar::reports

// The least-squares fits behind `seqpar calibrate`: alpha-beta (latency + bytes / bandwidth) for a
// link, a saturating Hill curve (achieved = peak * eff * L^p / (L^p + L_half^p)) for kernels, and a
// small linear least squares with bounds on every unknown (the framework terms of measured steps).
// The first two minimise relative error, so small and large messages or shapes weigh alike.
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

// achieved = peak * efficiency * L^p / (L^p + half_tokens^p) (sim::EfficiencyCurve), fitted to
// one series by relative error with the efficiency constrained to (0, 1].
struct CurveFit {
  double efficiency = 0;
  double half_tokens = 0;
  double exponent = 1;
  double rel_residual = 0;      // root-mean-square relative error over the points
  double max_rel_residual = 0;  // largest |relative error| of one point
  int points = 0;
  bool exponent_fixed = false;  // fewer than 3 distinct sizes: p held at 1 (two sizes fit two parameters)
  bool at_bound = false;        // L_half or p ended on its search bound: the sizes do not pin it down
  bool capped = false;          // the best unconstrained efficiency exceeded 1 and is held at 1
};

// A 2-D search over (log L_half, p) with the efficiency in closed form at each point (the
// least-squares optimum, clipped to 1 where it would exceed it), then a compass refinement.
// Throws seqpar::Error when the series is empty, has a non-positive value or spans fewer than 2
// distinct L.
CurveFit fit_efficiency_curve(const SaturationSeries& series, double peak_flops_per_s);

// min |A x - b|^2 subject to lo <= x <= hi, exactly: the problem is convex, so its minimum lies on
// one face of the box; each unknown is tried free, at its lower and at its upper bound (3^n faces),
// the free ones solved by least squares on that face, and the best point inside the box kept. For
// the few unknowns calibrate fits (n <= 6); A is rows x n, row-major. Throws seqpar::Error for
// sizes that disagree, n above 6, or lo > hi.
std::vector<double> bounded_least_squares(const std::vector<double>& a, const std::vector<double>& b,
                                          const std::vector<double>& lo, const std::vector<double>& hi);

}  // namespace seqpar::reports

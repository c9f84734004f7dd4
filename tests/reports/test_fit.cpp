#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/reports/fit.hpp"

using namespace seqpar::reports;

TEST(AlphaBeta, RecoversExactParameters) {
  std::vector<double> x, t;
  for (double b = 1024; b <= 1 << 30; b *= 4) {
    x.push_back(b);
    t.push_back(12e-6 + b / 300e9);
  }
  AlphaBetaFit f = fit_alpha_beta(x, t);
  EXPECT_NEAR(f.latency_s, 12e-6, 1e-9);
  EXPECT_NEAR(f.bytes_per_s / 300e9, 1.0, 1e-9);
  EXPECT_LT(f.rel_residual, 1e-9);
}

TEST(AlphaBeta, NegativeInterceptIsHeldAtZero) {
  AlphaBetaFit f = fit_alpha_beta({1e6, 2e6, 4e6}, {0.9e-3, 2.0e-3, 4.1e-3});
  EXPECT_EQ(f.latency_s, 0);
  EXPECT_GT(f.bytes_per_s, 0);
}

TEST(AlphaBeta, NeedsTwoSizes) {
  EXPECT_THROW(fit_alpha_beta({1e6, 1e6}, {1e-3, 1.1e-3}), seqpar::Error);
  EXPECT_THROW(fit_alpha_beta({1e6, 2e6}, {2e-3, 1e-3}), seqpar::Error);  // time falls with size
}

namespace {

SaturationSeries hill_series(double peak, double eff, double half, double p, double noise, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> n(0, noise);
  SaturationSeries s;
  for (double L = 256; L <= 65536; L *= 2) {
    s.tokens.push_back(L);
    s.flops_per_s.push_back(peak * eff * std::pow(L, p) / (std::pow(L, p) + std::pow(half, p)) * (1 + n(rng)));
  }
  return s;
}

}  // namespace

TEST(EfficiencyCurve, RecoversAClassicSaturatingCurve) {
  CurveFit f = fit_efficiency_curve(hill_series(1000e12, 0.7, 1500, 1.0, 0, 1), 1000e12);
  EXPECT_NEAR(f.efficiency, 0.7, 1e-4);
  EXPECT_NEAR(f.half_tokens / 1500, 1.0, 1e-3);
  EXPECT_NEAR(f.exponent, 1.0, 1e-3);
  EXPECT_LT(f.max_rel_residual, 1e-4);
  EXPECT_FALSE(f.at_bound);
  EXPECT_FALSE(f.capped);
  EXPECT_EQ(f.points, 9);
}

TEST(EfficiencyCurve, RecoversASteepCurveLikeMeasuredGemms) {
  // cuBLAS on H100 rises from 124 to 794 TFLOP/s between 1024^3 and 8192^3: far steeper than
  // L / (L + L_half), which is why the exponent is fitted.
  CurveFit f = fit_efficiency_curve(hill_series(989.4e12, 0.8, 1500, 3.0, 0, 2), 989.4e12);
  EXPECT_NEAR(f.efficiency, 0.8, 1e-4);
  EXPECT_NEAR(f.half_tokens / 1500, 1.0, 1e-3);
  EXPECT_NEAR(f.exponent, 3.0, 1e-3);
}

TEST(EfficiencyCurve, RecoversParametersFromNoisyPoints) {
  for (unsigned seed = 10; seed < 20; ++seed) {
    CurveFit f = fit_efficiency_curve(hill_series(1000e12, 0.6, 2000, 2.0, 0.02, seed), 1000e12);
    EXPECT_NEAR(f.efficiency, 0.6, 0.03) << "seed " << seed;
    EXPECT_NEAR(f.half_tokens / 2000, 1.0, 0.15) << "seed " << seed;
    EXPECT_NEAR(f.exponent, 2.0, 0.4) << "seed " << seed;
    EXPECT_LT(f.rel_residual, 0.04) << "seed " << seed;
  }
}

TEST(EfficiencyCurve, EfficiencyIsHeldAtOne) {
  // Rates that an efficiency of 1.3 would explain: the fit may not go beyond 1, and says so.
  CurveFit f = fit_efficiency_curve(hill_series(1000e12, 1.3, 1000, 1.0, 0, 3), 1000e12);
  EXPECT_LE(f.efficiency, 1.0);
  EXPECT_GT(f.efficiency, 0.0);
  EXPECT_TRUE(f.capped);
}

TEST(EfficiencyCurve, TwoSizesHoldTheExponentAtOne) {
  SaturationSeries s{{1024, 4096}, {0.5e15 * 1024 / 2024, 0.5e15 * 4096 / 5096}};
  CurveFit f = fit_efficiency_curve(s, 1e15);
  EXPECT_TRUE(f.exponent_fixed);
  EXPECT_EQ(f.exponent, 1.0);
  EXPECT_NEAR(f.efficiency, 0.5, 1e-4);
  EXPECT_NEAR(f.half_tokens / 1000, 1.0, 1e-3);
}

TEST(EfficiencyCurve, OneSizeCannotSeparateEfficiencyFromHalfPoint) {
  SaturationSeries s{{4096, 4096}, {5e14, 5.1e14}};
  EXPECT_THROW(fit_efficiency_curve(s, 1e15), seqpar::Error);
  EXPECT_THROW(fit_efficiency_curve(SaturationSeries{{1024, 2048}, {1e14, -1}}, 1e15), seqpar::Error);
  EXPECT_THROW(fit_efficiency_curve(SaturationSeries{}, 1e15), seqpar::Error);
}

// The box-constrained least squares calibrate fits framework terms with: inside the box it is the
// ordinary solution; where that leaves the box, the best point of the box, which a fine grid over
// the box (the brute-force answer) never beats.
TEST(BoundedLeastSquares, InteriorSolutionIsTheOrdinaryOne) {
  // y = 2 + 3 x at x = 0..3, exactly.
  const std::vector<double> a = {1, 0, 1, 1, 1, 2, 1, 3}, b = {2, 5, 8, 11};
  const auto x = bounded_least_squares(a, b, {-10, -10}, {10, 10});
  EXPECT_NEAR(x[0], 2, 1e-12);
  EXPECT_NEAR(x[1], 3, 1e-12);
}

TEST(BoundedLeastSquares, NoGridPointOfTheBoxDoesBetter) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<double> a(12), b(6);
    for (double& v : a) v = u(rng);
    for (double& v : b) v = 3 * u(rng);
    const std::vector<double> lo = {0, -0.5}, hi = {1, 0.5};
    const auto x = bounded_least_squares(a, b, lo, hi);
    auto obj = [&](double p, double q) {
      double s = 0;
      for (int i = 0; i < 6; ++i) s += std::pow(a[2 * i] * p + a[2 * i + 1] * q - b[i], 2);
      return s;
    };
    ASSERT_GE(x[0], lo[0]);
    ASSERT_LE(x[0], hi[0]);
    ASSERT_GE(x[1], lo[1]);
    ASSERT_LE(x[1], hi[1]);
    double best = INFINITY;
    for (int i = 0; i <= 200; ++i)
      for (int j = 0; j <= 200; ++j) best = std::min(best, obj(lo[0] + i * 0.005, lo[1] + j * 0.005));
    EXPECT_LE(obj(x[0], x[1]), best + 1e-12) << trial;
  }
}

TEST(BoundedLeastSquares, CollinearColumnsAndBadInputs) {
  // Two identical columns: any split of the sum fits; the answer is inside the box and exact.
  const std::vector<double> a = {1, 1, 2, 2, 3, 3}, b = {2, 4, 6};
  const auto x = bounded_least_squares(a, b, {0, 0}, {1.5, 1.5});
  EXPECT_NEAR(x[0] + x[1], 2, 1e-9);
  EXPECT_THROW(bounded_least_squares(a, b, {0}, {1, 1}), seqpar::Error);
  EXPECT_THROW(bounded_least_squares(a, b, {1, 0}, {0, 1}), seqpar::Error);
}

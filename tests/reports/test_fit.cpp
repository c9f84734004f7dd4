#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "seqpar/common/error.hpp"
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

TEST(Saturation, RecoversEfficienciesAndSharedHalfPoint) {
  const double peak = 1000e12;
  SaturationSeries fwd, bwd;
  for (double L = 512; L <= 65536; L *= 2) {
    fwd.tokens.push_back(L);
    fwd.flops_per_s.push_back(peak * 0.7 * L / (L + 1500));
    bwd.tokens.push_back(L);
    bwd.flops_per_s.push_back(peak * 0.5 * L / (L + 1500));
  }
  SaturationFit f = fit_saturation({fwd, bwd}, peak);
  ASSERT_EQ(f.efficiency.size(), 2u);
  EXPECT_NEAR(f.efficiency[0], 0.7, 1e-4);
  EXPECT_NEAR(f.efficiency[1], 0.5, 1e-4);
  EXPECT_NEAR(f.half_tokens / 1500, 1.0, 1e-3);
  EXPECT_FALSE(f.at_bound);
  EXPECT_EQ(f.points, 16);
}

TEST(Saturation, OneSizeCannotSeparateEfficiencyFromHalfPoint) {
  SaturationSeries s{{4096, 4096}, {5e14, 5.1e14}};
  EXPECT_THROW(fit_saturation({s}, 1e15), seqpar::Error);
}

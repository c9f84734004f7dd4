#include <gtest/gtest.h>

#include <cmath>

#include "seqpar/core/error.hpp"
#include "seqpar/reports/mann_whitney.hpp"

using seqpar::reports::mann_whitney_u;
using seqpar::reports::MannWhitney;
using seqpar::reports::min_attainable_p_value;

TEST(MannWhitney, CompleteSeparationExactP) {
  // 3 vs 3 fully separated: P(U = 0) = 1 / C(6,3) = 1/20, two-sided 0.1.
  auto r = mann_whitney_u({1, 2, 3}, {4, 5, 6});
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 0);
  EXPECT_NEAR(r.p_value, 0.1, 1e-12);
  auto s = mann_whitney_u({4, 5, 6}, {1, 2, 3});
  EXPECT_DOUBLE_EQ(s.u, 9);
  EXPECT_NEAR(s.p_value, 0.1, 1e-12);
}

TEST(MannWhitney, ExactMatchesTabulatedValue) {
  // 5 vs 5, pairs a > b: (5,4), (7,4), (7,6) -> U = 3. Arrangements with U = 0..3 number 1, 1, 2, 3
  // (partitions of U into at most 5 parts of at most 5), so P(U <= 3) = 7/252, two-sided 14/252.
  auto r = mann_whitney_u({1, 2, 3, 5, 7}, {4, 6, 8, 9, 10});
  EXPECT_DOUBLE_EQ(r.u, 3);
  EXPECT_NEAR(r.p_value, 14.0 / 252.0, 1e-12);
}

TEST(MannWhitney, InterleavedIsNotSignificant) {
  auto r = mann_whitney_u({1, 3, 5, 7, 9}, {2, 4, 6, 8, 10});
  EXPECT_GT(r.p_value, 0.5);
}

TEST(MannWhitney, TiesUseNormalApproximation) {
  auto r = mann_whitney_u({1, 1, 1, 1, 1}, {1, 1, 1, 1, 1});
  EXPECT_FALSE(r.exact);
  EXPECT_DOUBLE_EQ(r.p_value, 1.0);
  std::vector<double> a(30), b(30);
  for (int i = 0; i < 30; ++i) { a[i] = i % 5; b[i] = 10 + i % 5; }
  auto s = mann_whitney_u(a, b);
  EXPECT_FALSE(s.exact);
  EXPECT_LT(s.p_value, 1e-8);
}

TEST(MannWhitney, NormalApproximationAgreesWithExactForMediumSamples) {
  std::vector<double> a, b;
  for (int i = 0; i < 20; ++i) { a.push_back(i * 1.0); b.push_back(i * 1.0 + 6.5); }
  auto exact = mann_whitney_u(a, b);
  ASSERT_TRUE(exact.exact);
  a.push_back(100); b.push_back(101);  // 42 values: normal approximation
  auto approx = mann_whitney_u(a, b);
  ASSERT_FALSE(approx.exact);
  EXPECT_NEAR(std::log10(exact.p_value), std::log10(approx.p_value), 0.5);
}

TEST(MannWhitney, EmptySampleIsAnError) {
  EXPECT_THROW(mann_whitney_u({}, {1.0}), seqpar::Error);
}

TEST(MannWhitney, MinimumAttainablePValueIsTheFullySeparatedArrangement) {
  EXPECT_NEAR(min_attainable_p_value(3, 3), 0.1, 1e-12);
  EXPECT_NEAR(min_attainable_p_value(4, 4), 2.0 / 70, 1e-12);
  EXPECT_NEAR(min_attainable_p_value(4, 3), 2.0 / 35, 1e-12);
  EXPECT_EQ(min_attainable_p_value(1, 1), 1.0);
  EXPECT_LT(min_attainable_p_value(20, 20), 1e-10);
  // The exact test on fully separated samples gives exactly that bound.
  for (auto [n1, n2] : {std::pair{3, 3}, {4, 3}, {5, 6}}) {
    std::vector<double> a, b;
    for (int i = 0; i < n1; ++i) a.push_back(10.0 + i);
    for (int i = 0; i < n2; ++i) b.push_back(1.0 + i);
    MannWhitney mw = mann_whitney_u(a, b);
    ASSERT_TRUE(mw.exact);
    EXPECT_NEAR(mw.p_value, min_attainable_p_value(n1, n2), 1e-12) << n1 << " vs " << n2;
  }
}

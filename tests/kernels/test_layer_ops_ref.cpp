// The layer ops' CPU references tested directly, against properties computed independently of
// their loops: GEMM against a naive triple loop in every transposition, RMSNorm's unit mean square,
// RoPE's norm preservation and inverse, SwiGLU and its derivative by finite differences,
// cross-entropy against log-sum-exp and its gradient's zero row sum, AdamW's first step, embedding
// gather and scatter-add. (tests/train/test_cpu_ops.cpp checks the same ops' backwards against
// finite differences through the training step's CPU back end.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "seqpar/kernels/layer_ops_ref.hpp"

namespace seqpar::ref::layer_ops {
namespace {

std::vector<float> randn(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(LayerOpsRef, GemmMatchesANaiveProductInEveryTransposition) {
  const int m = 5, n = 7, k = 3;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const auto a = randn(m * k, 1), b = randn(k * n, 2), c0 = randn(m * n, 3);
      std::vector<float> c = c0;
      gemm(ta, tb, m, n, k, 0.5f, a.data(), b.data(), 2.0f, c.data());
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double s = 0;
          for (int l = 0; l < k; ++l)
            s += static_cast<double>(ta ? a[l * m + i] : a[i * k + l]) * (tb ? b[j * k + l] : b[l * n + j]);
          EXPECT_NEAR(c[i * n + j], 0.5 * s + 2.0 * c0[i * n + j], 1e-5) << "ta=" << ta << " tb=" << tb;
        }
    }
}

TEST(LayerOpsRef, GemmWithBetaZeroIgnoresNanInC) {
  const std::vector<float> a = {1, 2}, b = {3, 4};
  std::vector<float> c = {std::nanf("")};
  gemm(false, false, 1, 1, 2, 1.0f, a.data(), b.data(), 0.0f, c.data());
  EXPECT_FLOAT_EQ(c[0], 11.0f);
}

TEST(LayerOpsRef, AddScaleFill) {
  std::vector<float> y = {1, 2, 3}, x = {10, 20, 30};
  add(y.data(), x.data(), 3);
  EXPECT_EQ(y, (std::vector<float>{11, 22, 33}));
  scale(y.data(), -2.0f, 2);  // only the first n
  EXPECT_EQ(y, (std::vector<float>{-22, -44, 33}));
  fill(y.data(), 7.0f, 3);
  EXPECT_EQ(y, (std::vector<float>{7, 7, 7}));
}

TEST(LayerOpsRef, EmbeddingGathersRowsAndScattersGradientsWithRepeats) {
  const int vocab = 4, dim = 3;
  const auto table = randn(vocab * dim, 4);
  const std::vector<int> tokens = {2, 0, 2};
  std::vector<float> out(tokens.size() * dim);
  embedding_forward(out.data(), tokens.data(), table.data(), 3, dim);
  for (int t = 0; t < 3; ++t)
    for (int i = 0; i < dim; ++i) EXPECT_EQ(out[t * dim + i], table[tokens[t] * dim + i]);
  std::vector<float> dtable(vocab * dim, 1.0f);
  const auto dout = randn(out.size(), 5);
  embedding_backward(dtable.data(), dout.data(), tokens.data(), 3, dim);
  for (int i = 0; i < dim; ++i) {
    EXPECT_FLOAT_EQ(dtable[0 * dim + i], 1.0f + dout[1 * dim + i]);
    EXPECT_FLOAT_EQ(dtable[1 * dim + i], 1.0f);  // untouched row keeps its value: accumulation
    EXPECT_FLOAT_EQ(dtable[2 * dim + i], 1.0f + dout[0 * dim + i] + dout[2 * dim + i]);
  }
}

TEST(LayerOpsRef, RmsnormWithUnitWeightsGivesUnitMeanSquare) {
  const int t = 3, c = 37;
  const auto x = randn(t * c, 6);
  const std::vector<float> w(c, 1.0f);
  std::vector<float> y(t * c), r(t);
  rmsnorm_forward(y.data(), r.data(), x.data(), w.data(), t, c, 0.0f);
  for (int row = 0; row < t; ++row) {
    double ss = 0, xs = 0;
    for (int i = 0; i < c; ++i) ss += double(y[row * c + i]) * y[row * c + i], xs += double(x[row * c + i]) * x[row * c + i];
    EXPECT_NEAR(ss / c, 1.0, 1e-5);
    EXPECT_NEAR(r[row], 1.0 / std::sqrt(xs / c), 1e-5 * r[row]);
  }
}

TEST(LayerOpsRef, RopeKeepsNormsIsIdentityAtZeroAndInverseUndoesIt) {
  const int t = 3, heads = 2, d = 8;
  const auto x0 = randn(t * heads * d, 7);
  const std::vector<int> pos = {0, 5, 1234};
  std::vector<float> x = x0;
  rope(x.data(), pos.data(), t, heads, d, 10000.0f, false);
  for (int i = 0; i < heads * d; ++i) EXPECT_FLOAT_EQ(x[i], x0[i]) << "position 0 rotates by 0";
  for (std::size_t p = 0; p < x.size(); p += 2)
    EXPECT_NEAR(std::hypot(x[p], x[p + 1]), std::hypot(x0[p], x0[p + 1]), 1e-5);
  // Pair 0 of token 1 rotates by exactly pos = 5 radians (frequency theta^0 = 1).
  const std::size_t o = heads * d;
  EXPECT_NEAR(x[o], x0[o] * std::cos(5.0) - x0[o + 1] * std::sin(5.0), 1e-5);
  rope(x.data(), pos.data(), t, heads, d, 10000.0f, true);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], x0[i], 1e-5);
}

TEST(LayerOpsRef, SwigluAndItsDerivativeByFiniteDifferences) {
  const std::vector<float> gate = {-3.0f, -0.5f, 0.0f, 0.7f, 4.0f}, up = {1.5f, -2.0f, 3.0f, 0.25f, -1.0f};
  const auto n = static_cast<std::int64_t>(gate.size());
  std::vector<float> out(gate.size()), dgate(gate.size()), dup(gate.size());
  const std::vector<float> dout(gate.size(), 1.0f);
  swiglu_forward(out.data(), gate.data(), up.data(), n);
  swiglu_backward(dgate.data(), dup.data(), dout.data(), gate.data(), up.data(), n);
  const auto f = [](double g, double u) { return g / (1.0 + std::exp(-g)) * u; };
  for (std::size_t i = 0; i < gate.size(); ++i) {
    EXPECT_NEAR(out[i], f(gate[i], up[i]), 1e-6);
    const double h = 1e-4;
    EXPECT_NEAR(dgate[i], (f(gate[i] + h, up[i]) - f(gate[i] - h, up[i])) / (2 * h), 1e-4);
    EXPECT_NEAR(dup[i], f(gate[i], 1.0), 1e-6);
  }
}

TEST(LayerOpsRef, CrossEntropyIsLogSumExpMinusTheLabelAndItsGradientSumsToZero) {
  const int t = 3, v = 11;
  auto logits = randn(t * v, 8);
  for (float& z : logits) z *= 10.0f;  // large logits: the max shift matters
  const auto z0 = logits;
  const std::vector<int> labels = {4, -1, 10};
  std::vector<float> loss(t, -1.0f);
  cross_entropy(loss.data(), logits.data(), labels.data(), t, v, 0.5f);
  for (int row = 0; row < t; ++row) {
    double sum = 0, mx = -1e30, gsum = 0;
    for (int i = 0; i < v; ++i) mx = std::max(mx, double(z0[row * v + i]));
    for (int i = 0; i < v; ++i) sum += std::exp(double(z0[row * v + i]) - mx);
    for (int i = 0; i < v; ++i) gsum += logits[row * v + i];
    EXPECT_NEAR(gsum, 0.0, 1e-5);
    if (labels[row] < 0) {
      EXPECT_EQ(loss[row], 0.0f);
      for (int i = 0; i < v; ++i) EXPECT_EQ(logits[row * v + i], 0.0f);
      continue;
    }
    EXPECT_NEAR(loss[row], std::log(sum) + mx - z0[row * v + labels[row]], 1e-4);
    // The label's gradient is (p - 1) * dscale, p = exp(-loss).
    EXPECT_NEAR(logits[row * v + labels[row]], (std::exp(-double(loss[row])) - 1.0) * 0.5, 1e-5);
  }
}

TEST(LayerOpsRef, AdamwFirstStepMovesByLrTimesTheGradientSignPlusDecay) {
  // Step 1 from zero moments: m_hat = g and v_hat = g^2, so the update is lr * (g/(|g|+eps) + wd p).
  std::vector<float> p = {1.0f, -2.0f, 0.5f}, m(3, 0.0f), v(3, 0.0f);
  const std::vector<float> g = {0.3f, -4.0f, 1e-3f};
  const float lr = 0.01f, wd = 0.1f, eps = 1e-8f;
  const auto p0 = p;
  adamw(p.data(), g.data(), m.data(), v.data(), 3, lr, 0.9f, 0.95f, eps, wd, 1);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(p[i], p0[i] - lr * (g[i] / (std::abs(g[i]) + eps) + wd * p0[i]), 1e-6);
    EXPECT_NEAR(m[i], 0.1f * g[i], 1e-7);
    EXPECT_NEAR(v[i], 0.05f * g[i] * g[i], 1e-6);
  }
}

}  // namespace
}  // namespace seqpar::ref::layer_ops

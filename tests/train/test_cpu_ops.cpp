// Each CPU op's backward against central finite differences of a scalar probe loss
// L = sum(out * r), with r fixed random weights; plus GEMM against a naive product.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/train/backend.hpp"

namespace seqpar::train {
namespace {

std::vector<float> randn(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Checks analytic d(probe)/d(x) against finite differences on every element of x.
void expect_grad(std::vector<float>& x, const std::function<double()>& probe,
                 const std::vector<float>& analytic, double tol, const char* what) {
  ASSERT_EQ(x.size(), analytic.size());
  const float eps = 1e-2f;
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float keep = x[i];
    x[i] = keep + eps;
    const double up = probe();
    x[i] = keep - eps;
    const double down = probe();
    x[i] = keep;
    const double fd = (up - down) / (2.0 * eps);
    const double err = std::abs(fd - analytic[i]) / (1.0 + std::abs(fd));
    worst = std::max(worst, err);
  }
  EXPECT_LT(worst, tol) << what;
}

class CpuOps : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = make_cpu_backend();
};

TEST_F(CpuOps, GemmMatchesNaiveProductForEveryTransposition) {
  const int m = 5, n = 7, k = 3;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const auto a = randn(static_cast<std::size_t>(m * k), 1), b = randn(static_cast<std::size_t>(k * n), 2);
      auto c = randn(static_cast<std::size_t>(m * n), 3);
      const auto c0 = c;
      be->gemm(ta, tb, m, n, k, 0.5f, a.data(), b.data(), 2.0f, c.data());
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double s = 0;
          for (int l = 0; l < k; ++l)
            s += static_cast<double>(ta ? a[l * m + i] : a[i * k + l]) * (tb ? b[j * k + l] : b[l * n + j]);
          EXPECT_NEAR(c[i * n + j], 0.5 * s + 2.0 * c0[i * n + j], 1e-5) << ta << tb << i << j;
        }
    }
}

// Mixed precision: in bf16 the GEMM is exactly the fp32 GEMM of bf16-rounded operands (the same
// rounding as attention's emulation), accumulating into an fp32 C; fp32 mode does not round.
TEST_F(CpuOps, Bf16GemmIsTheFp32GemmOfRoundedOperands) {
  auto bf = make_cpu_backend(Precision::bf16);
  for (const auto& [m, n, k] : {std::array{1, 1, 1}, std::array{5, 7, 3}, std::array{17, 13, 31},
                                std::array{33, 1, 67}, std::array{1, 29, 130}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k << " ta " << ta << " tb " << tb);
        const auto sz = [](int x, int y) { return static_cast<std::size_t>(x) * static_cast<std::size_t>(y); };
        const auto a = randn(sz(m, k), 11), b = randn(sz(k, n), 12), c0 = randn(sz(m, n), 13);
        auto a16 = a, b16 = b;
        round_to_bf16(a16.data(), static_cast<std::int64_t>(a16.size()));
        round_to_bf16(b16.data(), static_cast<std::int64_t>(b16.size()));
        auto c_bf = c0, c_rounded = c0, c_fp32 = c0;
        bf->gemm(ta, tb, m, n, k, 0.75f, a.data(), b.data(), 1.5f, c_bf.data());
        be->gemm(ta, tb, m, n, k, 0.75f, a16.data(), b16.data(), 1.5f, c_rounded.data());
        be->gemm(ta, tb, m, n, k, 0.75f, a.data(), b.data(), 1.5f, c_fp32.data());
        EXPECT_EQ(c_bf, c_rounded);
        EXPECT_NE(c_bf, c_fp32);
        // C itself is not rounded: beta * C keeps fp32 bits the bf16 grid does not have.
        bool c_off_grid = false;
        for (float x : c_bf) {
          float r = x;
          round_to_bf16(&r, 1);
          c_off_grid = c_off_grid || r != x;
        }
        EXPECT_TRUE(c_off_grid);
      }
}

TEST_F(CpuOps, RmsNormBackwardMatchesFiniteDifferences) {
  const int t = 3, c = 8;
  auto x = randn(t * c, 4), w = randn(c, 5), r = randn(t * c, 6);
  std::vector<float> out(t * c), rstd(t);
  auto probe = [&] {
    be->rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), t, c, 1e-5f);
    return dot(out, r);
  };
  probe();
  std::vector<float> dx(t * c, 0.0f), dw(c, 0.0f);
  be->rmsnorm_backward(dx.data(), dw.data(), r.data(), x.data(), w.data(), rstd.data(), t, c);
  expect_grad(x, probe, dx, 2e-3, "rmsnorm dx");
  expect_grad(w, probe, dw, 2e-3, "rmsnorm dw");
}

TEST_F(CpuOps, RopeInverseIsTheTransposeAndKeepsNorms) {
  const int t = 4, h = 2, d = 8;
  auto x = randn(t * h * d, 7), y = randn(t * h * d, 8);
  const std::vector<int> pos = {0, 5, 17, 1000};
  auto rx = x;
  be->rope(rx.data(), pos.data(), t, h, d, 10000.0f, false);
  auto ry = y;
  be->rope(ry.data(), pos.data(), t, h, d, 10000.0f, true);
  EXPECT_NEAR(dot(rx, y), dot(x, ry), 1e-4);  // <R x, y> = <x, R^T y>
  EXPECT_NEAR(dot(rx, rx), dot(x, x), 1e-3);
  be->rope(rx.data(), pos.data(), t, h, d, 10000.0f, true);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(rx[i], x[i], 1e-5);
  // Position 0 is the identity; others rotate.
  auto r0 = x;
  be->rope(r0.data(), pos.data(), 1, h, d, 10000.0f, false);
  for (int i = 0; i < h * d; ++i) EXPECT_FLOAT_EQ(r0[i], x[i]);
}

TEST_F(CpuOps, SwigluBackwardMatchesFiniteDifferences) {
  const int n = 16;
  auto gate = randn(n, 9, 2.0f), up = randn(n, 10), r = randn(n, 11);
  std::vector<float> out(n);
  auto probe = [&] {
    be->swiglu_forward(out.data(), gate.data(), up.data(), n);
    return dot(out, r);
  };
  std::vector<float> dg(n), du(n);
  be->swiglu_backward(dg.data(), du.data(), r.data(), gate.data(), up.data(), n);
  expect_grad(gate, probe, dg, 2e-3, "swiglu dgate");
  expect_grad(up, probe, du, 2e-3, "swiglu dup");
}

TEST_F(CpuOps, CrossEntropyLossAndGradient) {
  const int t = 3, v = 6;
  auto logits = randn(t * v, 12);
  const std::vector<int> labels = {2, -1, 5};
  std::vector<float> losses(t);
  auto probe = [&] {
    auto z = logits;
    be->cross_entropy(losses.data(), z.data(), labels.data(), t, v, 1.0f);
    return static_cast<double>(losses[0]) + losses[1] + losses[2];
  };
  auto grad = logits;
  be->cross_entropy(losses.data(), grad.data(), labels.data(), t, v, 1.0f);
  EXPECT_EQ(losses[1], 0.0f);
  for (int i = 0; i < v; ++i) EXPECT_EQ(grad[v + i], 0.0f);  // no label: no gradient
  double lse = 0;
  for (int i = 0; i < v; ++i) lse += std::exp(static_cast<double>(logits[i]));
  EXPECT_NEAR(losses[0], std::log(lse) - logits[2], 1e-5);
  expect_grad(logits, probe, grad, 2e-3, "cross-entropy dlogits");
}

TEST_F(CpuOps, EmbeddingBackwardAccumulatesRepeatedTokens) {
  const int v = 4, c = 3;
  const auto table = randn(v * c, 13);
  const std::vector<int> tok = {1, 3, 1};
  std::vector<float> out(3 * c);
  be->embedding_forward(out.data(), tok.data(), table.data(), 3, c);
  for (int i = 0; i < c; ++i) EXPECT_EQ(out[2 * c + i], table[c + i]);
  std::vector<float> dout(3 * c, 1.0f), dt(v * c, 0.0f);
  be->embedding_backward(dt.data(), dout.data(), tok.data(), 3, c);
  EXPECT_EQ(dt[c], 2.0f);
  EXPECT_EQ(dt[3 * c], 1.0f);
  EXPECT_EQ(dt[0], 0.0f);
}

TEST_F(CpuOps, AdamWFirstStepMovesByLearningRateTimesSign) {
  std::vector<float> p = {1.0f, -2.0f}, g = {0.5f, -3.0f}, m(2, 0.0f), v(2, 0.0f);
  be->adamw(p.data(), g.data(), m.data(), v.data(), 2, 0.1f, 0.9f, 0.95f, 1e-12f, 0.0f, 1);
  // Bias-corrected first step: m_hat / sqrt(v_hat) = sign(g).
  EXPECT_NEAR(p[0], 0.9f, 1e-6);
  EXPECT_NEAR(p[1], -1.9f, 1e-6);
}

// bf16 views: each op loads bf16, computes in fp32 and stores rounded to nearest-even, so on a bf16
// view it gives the fp32 op's result on the widened values, rounded once.
TEST(CpuBf16Views, OpsComputeInFp32AndRoundOnceOnStore) {
  auto be = make_cpu_backend(Precision::bf16);
  const int t = 3, c = 37;  // awkward width
  const std::int64_t n = std::int64_t{t} * c;
  const auto x = randn(static_cast<std::size_t>(n), 41), w = randn(static_cast<std::size_t>(c), 42);
  Tensor x16 = upload(*be, x.data(), n, DType::bf16, MemCategory::working);
  EXPECT_EQ(x16.bytes(), static_cast<std::size_t>(n) * 2);
  const std::vector<float> xr = download(*be, x16.cref(), n);  // the bf16 values, widened
  for (std::int64_t i = 0; i < n; ++i) {
    float r = x[static_cast<std::size_t>(i)];
    round_to_bf16(&r, 1);
    ASSERT_EQ(xr[static_cast<std::size_t>(i)], r) << i;
  }
  // RMSNorm on the bf16 view against the fp32 op on the widened values, rounded.
  Tensor y16(*be, n, DType::bf16, MemCategory::working);
  std::vector<float> rstd16(static_cast<std::size_t>(t)), y32(static_cast<std::size_t>(n)), rstd32(static_cast<std::size_t>(t));
  be->rmsnorm_forward(y16.ref(), rstd16.data(), x16.cref(), w.data(), t, c, 1e-5f);
  auto f32 = make_cpu_backend(Precision::fp32);
  f32->rmsnorm_forward(y32.data(), rstd32.data(), xr.data(), w.data(), t, c, 1e-5f);
  round_to_bf16(y32.data(), n);
  EXPECT_EQ(download(*be, y16.cref(), n), y32);
  EXPECT_EQ(rstd16, rstd32);  // fp32 outputs stay fp32
  // An accumulating op reads the old bf16 values: y += x.
  be->add(y16.ref(), x16.cref(), n);
  std::vector<float> sum = y32;
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += xr[i];
  round_to_bf16(sum.data(), n);
  EXPECT_EQ(download(*be, y16.cref(), n), sum);
}

TEST(CpuBf16Views, RefusesOtherTypesAndMixedReshardsNamingTheOp) {
  auto be = make_cpu_backend(Precision::bf16);
  std::vector<int> ints(8);
  std::vector<float> out(8);
  try {
    be->swiglu_forward(out.data(), CRef(ints.data(), DType::i32), out.data(), 8);
    ADD_FAILURE() << "an i32 view was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("swiglu_forward: an activation view of type i32"), std::string::npos) << e.what();
  }
  try {
    upload(*be, out.data(), 8, DType::i32, MemCategory::working);
    ADD_FAILURE() << "an i32 upload was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("upload: an activation view of type i32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(download(*be, CRef(ints.data(), DType::i32), 8), Error);
  Tensor in16(*be, 8, DType::bf16, MemCategory::working);
  try {
    be->ulysses_pack(2, 1, 2, 2, 2, in16.cref(), out.data());
    ADD_FAILURE() << "a bf16 -> fp32 reshard was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ulysses_pack: input bf16 and output fp32"), std::string::npos) << e.what();
  }
}

TEST(CpuBf16Views, TensorSizesAreCheckedAndAdamwWritesTheRoundedCopy) {
  auto be = make_cpu_backend(Precision::bf16);
  EXPECT_THROW(Tensor(*be, -1, DType::bf16, MemCategory::working), Error);
  EXPECT_THROW(Tensor(*be, INT64_MAX / 2, DType::fp32, MemCategory::working), Error);
  const std::int64_t n = 11;
  auto p = randn(static_cast<std::size_t>(n), 7), g = randn(static_cast<std::size_t>(n), 8);
  std::vector<float> m(static_cast<std::size_t>(n)), v(static_cast<std::size_t>(n));
  Tensor p16(*be, n, DType::bf16, MemCategory::parameters);
  be->adamw(p.data(), g.data(), m.data(), v.data(), n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, p16.ref());
  std::vector<float> rounded = p;
  round_to_bf16(rounded.data(), n);
  EXPECT_EQ(download(*be, p16.cref(), n), rounded);
  EXPECT_THROW(be->adamw(p.data(), g.data(), m.data(), v.data(), n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 2, Ref(m.data())),
               Error);  // the copy must be bf16
}

}  // namespace
}  // namespace seqpar::train

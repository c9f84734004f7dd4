// The GPU layer ops (layer_ops.cuh) against their CPU references (layer_ops_ref.hpp), op by op on
// fresh random data (the seed is printed with any failure) at awkward sizes: rows wider than a
// block and not a multiple of 32, odd element counts past one grid-stride pass, a vocabulary in the
// tens of thousands, repeated tokens (the embedding's atomic scatter). Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "gpu_util.hpp"
#include "seqpar/kernels/layer_ops.cuh"
#include "seqpar/kernels/layer_ops_ref.hpp"

namespace seqpar::test {
namespace {

namespace gpu = kernels::layer_ops;
namespace cpu = ref::layer_ops;

class LayerOpsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    SEQPAR_SKIP_WITHOUT_GPU();
    seed_ = std::random_device{}();
  }
  std::uint64_t seed_ = 0;
  std::uint64_t next_seed() { return seed_ + calls_++; }

  std::vector<float> randn(std::size_t n, float scale = 1.0f) {
    std::mt19937_64 rng(next_seed());
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
  }
  std::vector<int> randint(std::size_t n, int lo, int hi) {
    std::mt19937_64 rng(next_seed());
    std::uniform_int_distribution<int> d(lo, hi);
    std::vector<int> v(n);
    for (int& x : v) x = d(rng);
    return v;
  }
  // A device copy of `h` (fp32 or int32).
  template <class T>
  std::unique_ptr<DeviceBuffer> up(const std::vector<T>& h) {
    auto d = std::make_unique<DeviceBuffer>(h.size() * sizeof(T));
    SEQPAR_CUDA_CHECK(cudaMemcpy(d->get(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
  }
  std::unique_ptr<DeviceBuffer> poisoned(std::size_t floats) {
    auto d = std::make_unique<DeviceBuffer>(floats * sizeof(float));
    d->poison();
    return d;
  }
  static std::vector<float> down(const DeviceBuffer& d) {
    SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
    return download(DType::fp32, d.get(), d.bytes() / sizeof(float));
  }
  // Largest difference within rtol of the reference's largest magnitude (NaN fails).
  void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rtol, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double scale = 0, diff = 0;
    std::size_t worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      scale = std::max(scale, static_cast<double>(std::abs(want[i])));
      const double e = std::isnan(got[i]) ? INFINITY : std::abs(static_cast<double>(got[i]) - want[i]);
      if (e > diff) diff = e, worst = i;
    }
    EXPECT_LE(diff, rtol * scale + 1e-6) << what << ": worst element " << worst << " gpu " << got[worst] << " cpu "
                                         << want[worst] << " (seed " << seed_ << ")";
  }

 private:
  std::uint64_t calls_ = 0;
};

TEST_F(LayerOpsGpu, ElementwiseAddScaleFill) {
  const std::int64_t n = 1'000'003;  // odd, several grid-stride blocks
  auto y = randn(n);
  const auto x = randn(n);
  auto dy = up(y), dx = up(x);
  cpu::add(y.data(), x.data(), n);
  gpu::add(dy->f32(), dx->f32(), n, nullptr);
  expect_close(down(*dy), y, 0, "add");
  cpu::scale(y.data(), -0.37f, n);
  gpu::scale(dy->f32(), -0.37f, n, nullptr);
  expect_close(down(*dy), y, 0, "scale");
  cpu::fill(y.data(), 2.5f, n);
  gpu::fill(dy->f32(), 2.5f, n, nullptr);
  expect_close(down(*dy), y, 0, "fill");
}

TEST_F(LayerOpsGpu, EmbeddingForwardAndAtomicBackwardWithRepeatedTokens) {
  const int vocab = 37, t = 301, dim = 1031;  // t >> vocab: every row is hit several times
  const auto table = randn(static_cast<std::size_t>(vocab) * dim);
  const auto tokens = randint(t, 0, vocab - 1);
  const auto dout = randn(static_cast<std::size_t>(t) * dim);
  std::vector<float> out(static_cast<std::size_t>(t) * dim), dtable = randn(table.size());
  auto dtab = up(table), dtok = up(tokens), dout_d = up(dout), dgrad = up(dtable), dres = poisoned(out.size());
  cpu::embedding_forward(out.data(), tokens.data(), table.data(), t, dim);
  gpu::embedding_forward(dres->f32(), static_cast<const int*>(dtok->get()), dtab->f32(), t, dim, nullptr);
  expect_close(down(*dres), out, 0, "embedding forward");
  cpu::embedding_backward(dtable.data(), dout.data(), tokens.data(), t, dim);
  gpu::embedding_backward(dgrad->f32(), dout_d->f32(), static_cast<const int*>(dtok->get()), t, dim, nullptr);
  expect_close(down(*dgrad), dtable, 1e-5, "embedding backward");
}

TEST_F(LayerOpsGpu, RmsnormForwardAndBackwardOnRowsWiderThanABlock) {
  for (int c : {1, 31, 1031, 4099}) {
    SCOPED_TRACE(::testing::Message() << "dim " << c);
    const int t = 7;
    const std::size_t n = static_cast<std::size_t>(t) * c;
    const auto x = randn(n, 3.0f), w = randn(c), dy = randn(n);
    std::vector<float> y(n), r(t), dx = randn(n), dw = randn(c);
    auto gx = up(x), gw = up(w), gdy = up(dy), gy = poisoned(n), gr = poisoned(t), gdx = up(dx), gdw = up(dw);
    cpu::rmsnorm_forward(y.data(), r.data(), x.data(), w.data(), t, c, 1e-5f);
    gpu::rmsnorm_forward(gy->f32(), gr->f32(), gx->f32(), gw->f32(), t, c, 1e-5f, nullptr);
    expect_close(down(*gy), y, 1e-5, "rmsnorm out");
    expect_close(down(*gr), r, 1e-5, "rmsnorm rstd");
    cpu::rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), r.data(), t, c);
    gpu::rmsnorm_backward(gdx->f32(), gdw->f32(), gdy->f32(), gx->f32(), gw->f32(), gr->f32(), t, c, nullptr);
    expect_close(down(*gdx), dx, 1e-4, "rmsnorm dx (accumulated)");
    expect_close(down(*gdw), dw, 1e-4, "rmsnorm dw (accumulated)");
  }
}

TEST_F(LayerOpsGpu, RopeBothDirectionsAtLargePositions) {
  const int t = 13, heads = 3, d = 34;  // d/2 = 17 pairs
  auto pos = randint(t, 0, 1 << 20);
  pos[0] = 0;
  const auto x0 = randn(static_cast<std::size_t>(t) * heads * d);
  auto gpos = up(pos);
  for (bool inverse : {false, true}) {
    auto x = x0;
    auto gx = up(x);
    cpu::rope(x.data(), pos.data(), t, heads, d, 500000.0f, inverse);
    gpu::rope(gx->f32(), static_cast<const int*>(gpos->get()), t, heads, d, 500000.0f, inverse, nullptr);
    expect_close(down(*gx), x, 1e-5, inverse ? "rope inverse" : "rope");
  }
}

TEST_F(LayerOpsGpu, SwigluForwardAndBackward) {
  const std::int64_t n = 100'003;
  const auto gate = randn(n, 4.0f), upv = randn(n), dout = randn(n);
  std::vector<float> out(n), dgate(n), dup(n);
  auto gg = up(gate), gu = up(upv), gd = up(dout), go = poisoned(n), gdg = poisoned(n), gdu = poisoned(n);
  cpu::swiglu_forward(out.data(), gate.data(), upv.data(), n);
  gpu::swiglu_forward(go->f32(), gg->f32(), gu->f32(), n, nullptr);
  expect_close(down(*go), out, 1e-5, "swiglu forward");
  cpu::swiglu_backward(dgate.data(), dup.data(), dout.data(), gate.data(), upv.data(), n);
  gpu::swiglu_backward(gdg->f32(), gdu->f32(), gd->f32(), gg->f32(), gu->f32(), n, nullptr);
  expect_close(down(*gdg), dgate, 1e-5, "swiglu dgate");
  expect_close(down(*gdu), dup, 1e-5, "swiglu dup");
}

TEST_F(LayerOpsGpu, CrossEntropyOverALargeVocabularyWithIgnoredLabels) {
  const int t = 9, v = 32'011;
  auto logits = randn(static_cast<std::size_t>(t) * v, 4.0f);
  auto labels = randint(t, 0, v - 1);
  labels[2] = -1;
  labels[t - 1] = v - 1;
  auto gl = up(logits), glab = up(labels), gloss = poisoned(t);
  std::vector<float> loss(t);
  cpu::cross_entropy(loss.data(), logits.data(), labels.data(), t, v, 1.0f / 9);
  gpu::cross_entropy(gloss->f32(), gl->f32(), static_cast<const int*>(glab->get()), t, v, 1.0f / 9, nullptr);
  expect_close(down(*gloss), loss, 1e-5, "cross-entropy loss");
  expect_close(down(*gl), logits, 1e-5, "cross-entropy dlogits");
}

TEST_F(LayerOpsGpu, AdamwOverSeveralSteps) {
  const std::int64_t n = 100'003;
  auto p = randn(n), m = randn(n, 0.1f), v = randn(n, 0.1f);
  for (float& e : v) e = e * e;
  auto gp = up(p), gm = up(m), gv = up(v);
  for (int step = 1; step <= 3; ++step) {
    const auto g = randn(n);
    auto gg = up(g);
    cpu::adamw(p.data(), g.data(), m.data(), v.data(), n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
    gpu::adamw(gp->f32(), gg->f32(), gm->f32(), gv->f32(), n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, nullptr);
  }
  expect_close(down(*gp), p, 1e-5, "adamw param");
  expect_close(down(*gm), m, 1e-5, "adamw m");
  expect_close(down(*gv), v, 1e-5, "adamw v");
}

TEST_F(LayerOpsGpu, Bf16ConversionRoundsToNearestEvenAndBack) {
  const std::int64_t n = 10'007;
  const auto x = randn(n, 100.0f);
  auto gx = up(x);
  DeviceBuffer bits(static_cast<std::size_t>(n) * 2);
  auto back = poisoned(n);
  gpu::to_bf16(static_cast<std::uint16_t*>(bits.get()), gx->f32(), n, nullptr);
  gpu::from_bf16(back->f32(), static_cast<const std::uint16_t*>(bits.get()), n, nullptr);
  std::vector<float> want(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = round_to(DType::bf16, x[i]);
  expect_close(down(*back), want, 0, "bf16 round trip");
  expect_close(download(DType::bf16, bits.get(), x.size()), want, 0, "bf16 words");
}

}  // namespace
}  // namespace seqpar::test

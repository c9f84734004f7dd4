// The CUDA back end against the CPU back end, op by op on the same random inputs, and one
// training step (loss and gradients). Skips, with the reason, without a CUDA build or device.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "seqpar/comm/environment.hpp"
#include "seqpar/train/backend.hpp"
#include "seqpar/train/trainer.hpp"
#include "seqpar/train/validation.hpp"

namespace seqpar::train {
namespace {

std::vector<float> randn(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

class CudaVsCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_backend_built()) GTEST_SKIP() << "this build has no CUDA back end";
    std::string why;
    if (!comm::cuda_device_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
    gpu = make_cuda_backend(0);
    cpu = make_cpu_backend();
  }
  Floats up(const std::vector<float>& h) {
    Floats d(*gpu, static_cast<std::int64_t>(h.size()), MemCategory::working);
    gpu->copy_from_host(d.data(), h.data(), d.bytes());
    return d;
  }
  std::vector<float> down(const Floats& d) {
    std::vector<float> h(static_cast<std::size_t>(d.size()));
    gpu->copy_to_host(h.data(), d.data(), d.bytes());
    return h;
  }
  static void expect_close(const std::vector<float>& a, const std::vector<float>& b, double rtol, const char* what) {
    ASSERT_EQ(a.size(), b.size());
    double scale = 0, diff = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      scale = std::max(scale, static_cast<double>(std::abs(b[i])));
      diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
    }
    EXPECT_LE(diff, rtol * scale + 1e-6) << what;
  }
  std::unique_ptr<Backend> gpu, cpu;
};

TEST_F(CudaVsCpu, GemmEveryTransposition) {
  const int m = 33, n = 17, k = 29;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const auto a = randn(m * k, 1), b = randn(k * n, 2), c = randn(m * n, 3);
      auto ref = c;
      cpu->gemm(ta, tb, m, n, k, 1.0f, a.data(), b.data(), 1.0f, ref.data());
      Floats da = up(a), db = up(b), dc = up(c);
      gpu->gemm(ta, tb, m, n, k, 1.0f, da.data(), db.data(), 1.0f, dc.data());
      expect_close(down(dc), ref, 5e-3, "gemm (TF32)");
    }
}

TEST_F(CudaVsCpu, NormRopeSwigluCrossEntropyAdamW) {
  const int t = 6, c = 64, heads = 2, d = 32, v = 50;
  const auto x = randn(t * c, 4), w = randn(c, 5), dy = randn(t * c, 6);
  std::vector<float> y(t * c), r(t);
  cpu->rmsnorm_forward(y.data(), r.data(), x.data(), w.data(), t, c, 1e-5f);
  Floats gx = up(x), gw = up(w), gy(*gpu, t * c, MemCategory::working), gr(*gpu, t, MemCategory::working);
  gpu->rmsnorm_forward(gy.data(), gr.data(), gx.data(), gw.data(), t, c, 1e-5f);
  expect_close(down(gy), y, 1e-5, "rmsnorm forward");
  std::vector<float> dx(t * c, 0.0f), dw(c, 0.0f);
  cpu->rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), r.data(), t, c);
  Floats gdx = up(std::vector<float>(t * c, 0.0f)), gdw = up(std::vector<float>(c, 0.0f)), gdy = up(dy);
  gpu->rmsnorm_backward(gdx.data(), gdw.data(), gdy.data(), gx.data(), gw.data(), gr.data(), t, c);
  expect_close(down(gdx), dx, 1e-4, "rmsnorm dx");
  expect_close(down(gdw), dw, 1e-4, "rmsnorm dw");

  const std::vector<int> pos = {0, 3, 9, 100, 4000, 70000};
  Ints gpos(*gpu, t, MemCategory::working);
  gpu->copy_from_host(gpos.data(), pos.data(), gpos.bytes());
  auto q = randn(t * heads * d, 7);
  Floats gq = up(q);
  cpu->rope(q.data(), pos.data(), t, heads, d, 10000.0f, false);
  gpu->rope(gq.data(), gpos.data(), t, heads, d, 10000.0f, false);
  expect_close(down(gq), q, 1e-5, "rope");

  const auto ga = randn(t * c, 8), ua = randn(t * c, 9);
  std::vector<float> act(t * c);
  cpu->swiglu_forward(act.data(), ga.data(), ua.data(), t * c);
  Floats gga = up(ga), gua = up(ua), gact(*gpu, t * c, MemCategory::working);
  gpu->swiglu_forward(gact.data(), gga.data(), gua.data(), t * c);
  expect_close(down(gact), act, 1e-5, "swiglu");

  auto logits = randn(t * v, 10);
  const std::vector<int> labels = {1, -1, 49, 0, 7, 7};
  Floats gl = up(logits), gloss(*gpu, t, MemCategory::working);
  Ints glab(*gpu, t, MemCategory::working);
  gpu->copy_from_host(glab.data(), labels.data(), glab.bytes());
  std::vector<float> loss(t);
  cpu->cross_entropy(loss.data(), logits.data(), labels.data(), t, v, 0.25f);
  gpu->cross_entropy(gloss.data(), gl.data(), glab.data(), t, v, 0.25f);
  expect_close(down(gloss), loss, 1e-5, "cross-entropy loss");
  expect_close(down(gl), logits, 1e-5, "cross-entropy dlogits");

  auto p = randn(100, 11), g = randn(100, 12), m = randn(100, 13), vv = randn(100, 14);
  for (float& e : vv) e = std::abs(e);
  Floats gp = up(p), gg = up(g), gm = up(m), gv = up(vv);
  cpu->adamw(p.data(), g.data(), m.data(), vv.data(), 100, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 3);
  gpu->adamw(gp.data(), gg.data(), gm.data(), gv.data(), 100, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 3);
  expect_close(down(gp), p, 1e-5, "adamw");
}

TEST_F(CudaVsCpu, TrainingStepMatchesTheCpuReference) {
  TrainSetup s;
  s.model.layers = 2;
  s.model.hidden = 128;
  s.model.heads = 2;
  s.model.kv_heads = 1;
  s.model.head_dim = 64;  // what the flash kernels support
  s.model.ffn = 256;
  s.model.vocab = 128;
  s.seq_len = 128;
  Trainer tc(*cpu, nullptr, s), tg(*gpu, nullptr, s);
  const StepResult rc = tc.compute_gradients(), rg = tg.compute_gradients();
  EXPECT_NEAR(rg.loss, rc.loss, 2e-3 * rc.loss);
  // bf16 attention and TF32 GEMMs: each gradient tensor agrees with the fp32 CPU step to about
  // 1e-2 relative RMS.
  const std::vector<double> errors =
      tensor_errors(tg.model().tensors(), {rg.loss, tg.grads_host()}, {rc.loss, tc.grads_host()});
  for (std::size_t i = 1; i < errors.size(); ++i)
    EXPECT_LT(errors[i], 3e-2) << "grad " << tg.model().tensors()[i - 1].name;
}

}  // namespace
}  // namespace seqpar::train

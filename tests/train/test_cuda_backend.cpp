// The CUDA back end against the CPU back end: its cuBLAS GEMM in every transposition and one
// training step (loss and gradients). The layer ops it calls are tested op by op against their CPU
// references in tests/kernels/test_layer_ops_gpu.cpp. Skips, with the reason, without a CUDA build
// or device.
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

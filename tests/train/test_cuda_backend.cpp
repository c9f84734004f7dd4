// The CUDA back end against the CPU back end: its bf16 GEMM in every transposition (cuBLASLt and cublasGemmEx) against
// the CPU back end's bf16 emulation; on bf16 views (activations stored in bf16) the GEMM with C in
// fp32 and in bf16, RMSNorm, SwiGLU, RoPE, cross-entropy and AdamW's bf16 parameter copy against the
// CPU back end in bf16 precision on the same views (CudaVsCpuBf16); and one
// training step (loss and gradients). The layer ops it calls are tested op by op against their CPU
// references in tests/kernels/test_layer_ops_gpu.cpp. On the cuDNN attention engine (CudnnVsCpu):
// the attention blocks of Ulysses and of a zigzag ring (full, causal diagonal, skipped, GQA), the
// ring's backward from the merged output and LSE, all-gather KV's key-prefix calls (bottom-right
// causal), and the training step. Skips, with the reason,
// without a CUDA build, a device or (CudnnVsCpu) the cuDNN engine.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "seqpar/comm/environment.hpp"
#include "seqpar/core/bf16.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/kernels/attention_engine.hpp"
#include "seqpar/kernels/block_mask.hpp"
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

// Bound on the difference between two fp32-accumulated GEMM results C[i,j] on the same bf16 operands
// (a16, b16 hold their values) that differ only in summation order: (k + 2) * 2^-24 *
// (|alpha| sum_l |a_il b_lj| + |beta c_ij|) on each side, times 8 for the tensor cores' internal
// accumulation.
double gemm_order_bound(bool ta, bool tb, int m, int n, int k, float alpha, const std::vector<float>& a16,
                        const std::vector<float>& b16, float beta, float c_old, int i, int j) {
  double mag = 0;
  for (int l = 0; l < k; ++l)
    mag += std::abs(static_cast<double>(ta ? a16[static_cast<std::size_t>(l) * m + i]
                                           : a16[static_cast<std::size_t>(i) * k + l]) *
                    (tb ? b16[static_cast<std::size_t>(j) * k + l] : b16[static_cast<std::size_t>(l) * n + j]));
  return 8.0 * 2.0 * (k + 2) * std::ldexp(1.0, -24) * (std::abs(alpha) * mag + std::abs(beta * c_old));
}

class CudaVsCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_backend_built()) GTEST_SKIP() << "this build has no CUDA back end";
    std::string why;
    if (!comm::cuda_device_available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
    gpu = make_cuda_backend(0, kernels::AttentionEngine::seqpar);
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

// SEQPAR_GEMM set to `value` (unset when null) for one scope; the old value is restored after.
class ScopedGemmPath {
 public:
  explicit ScopedGemmPath(const char* value) {
    if (const char* old = std::getenv("SEQPAR_GEMM")) old_ = old;
    value ? setenv("SEQPAR_GEMM", value, 1) : unsetenv("SEQPAR_GEMM");
  }
  ~ScopedGemmPath() { old_ ? setenv("SEQPAR_GEMM", old_->c_str(), 1) : unsetenv("SEQPAR_GEMM"); }
  ScopedGemmPath(const ScopedGemmPath&) = delete;
  ScopedGemmPath& operator=(const ScopedGemmPath&) = delete;

 private:
  std::optional<std::string> old_;
};

// The GPU GEMM takes bf16 operands and accumulates in fp32, as the CPU back end's bf16 emulation
// does: products of bf16 values are exact in fp32, so the two may differ only by fp32 summation
// order, bounded per element by (k + 2) * 2^-24 * (|alpha| sum_l |a_il b_lj| + |beta c_ij|) on
// each side; the bound allows 8x that for the tensor cores' internal accumulation. Without the
// bf16 rounding of the operands (TF32 or fp32) the difference is about 2^-9 relative per term,
// hundreds of times the bound. Run under both GEMM paths, chosen when the back end is made:
// cuBLASLt (SEQPAR_GEMM unset, the default) and cublasGemmEx (SEQPAR_GEMM=gemmex).
TEST_F(CudaVsCpu, Bf16GemmMatchesTheCpuEmulationEveryTransposition) {
  auto emu = make_cpu_backend(Precision::bf16);
  for (const char* path : {static_cast<const char*>(nullptr), "gemmex"}) {
    const ScopedGemmPath env(path);
    gpu = make_cuda_backend(0, kernels::AttentionEngine::seqpar);
    for (const auto& [m, n, k] : {std::array{33, 17, 29}, std::array{1, 130, 257}, std::array{127, 65, 1029}})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          SCOPED_TRACE(::testing::Message() << (path ? path : "default (cuBLASLt)") << " " << m << "x" << n << "x" << k
                                            << " ta " << ta << " tb " << tb);
          const auto a = randn(static_cast<std::size_t>(m) * k, 1), b = randn(static_cast<std::size_t>(k) * n, 2),
                     c = randn(static_cast<std::size_t>(m) * n, 3);
          const float alpha = 0.5f, beta = 1.25f;
          auto ref = c;
          emu->gemm(ta, tb, m, n, k, alpha, a.data(), b.data(), beta, ref.data());
          Floats da = up(a), db = up(b), dc = up(c);
          gpu->gemm(ta, tb, m, n, k, alpha, da.data(), db.data(), beta, dc.data());
          const std::vector<float> got = down(dc);
          auto a16 = a, b16 = b;
          round_to_bf16(a16.data(), static_cast<std::int64_t>(a16.size()));
          round_to_bf16(b16.data(), static_cast<std::int64_t>(b16.size()));
          int bad = 0;
          for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
              const std::size_t ij = static_cast<std::size_t>(i) * n + j;
              const double bound = gemm_order_bound(ta, tb, m, n, k, alpha, a16, b16, beta, c[ij], i, j);
              if (std::abs(static_cast<double>(got[ij]) - ref[ij]) > bound && ++bad <= 5)
                ADD_FAILURE() << "C[" << i << "," << j << "] = " << got[ij] << ", emulation " << ref[ij] << ", bound "
                              << bound;
            }
          EXPECT_EQ(bad, 0);
        }
  }
}

// An unknown SEQPAR_GEMM is refused when the back end is made, naming the variable and the choices.
TEST_F(CudaVsCpu, UnknownGemmPathIsRefused) {
  const ScopedGemmPath env("cublasxt");
  try {
    make_cuda_backend(0, kernels::AttentionEngine::seqpar);
    ADD_FAILURE() << "SEQPAR_GEMM=cublasxt was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("SEQPAR_GEMM=cublasxt"), std::string::npos) << what;
    EXPECT_NE(what.find("gemmex"), std::string::npos) << what;
  }
}

// bf16 words of x (rounded to nearest even): the form both back ends store bf16 activations in.
std::vector<std::uint16_t> words(const std::vector<float>& x) {
  std::vector<std::uint16_t> w(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) w[i] = float_to_bf16(x[i]);
  return w;
}
std::vector<float> floats(const std::vector<std::uint16_t>& w) {
  std::vector<float> x(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) x[i] = bf16_to_float(w[i]);
  return x;
}

// Both back ends on the same bf16 views: the CPU back end in bf16 precision (load to fp32, the fp32
// reference op, round the store) is the expectation for the GPU's kernels.
class CudaVsCpuBf16 : public CudaVsCpu {
 protected:
  void SetUp() override {
    CudaVsCpu::SetUp();
    if (IsSkipped()) return;
    emu = make_cpu_backend(Precision::bf16);
  }
  Tensor up16(const std::vector<std::uint16_t>& h) {
    Tensor d(*gpu, static_cast<std::int64_t>(h.size()), DType::bf16, MemCategory::working);
    gpu->copy_from_host(d.data(), h.data(), d.bytes());
    return d;
  }
  std::vector<std::uint16_t> down16(const Tensor& d) {
    std::vector<std::uint16_t> h(static_cast<std::size_t>(d.size()));
    gpu->copy_to_host(h.data(), d.data(), d.bytes());
    return h;
  }
  Ints upi(const std::vector<int>& h) {
    Ints d(*gpu, static_cast<std::int64_t>(h.size()), MemCategory::working);
    gpu->copy_from_host(d.data(), h.data(), d.bytes());
    return d;
  }
  static Ref view(std::vector<std::uint16_t>& h) { return {h.data(), DType::bf16}; }
  static CRef cview(const std::vector<std::uint16_t>& h) { return {h.data(), DType::bf16}; }
  // Element by element within two bf16 ulps (the two fp32 values may round to neighbours) plus
  // 1e-5 of the largest magnitude (values that cancel to near zero).
  static void expect_bf16_close(const std::vector<std::uint16_t>& got_w, const std::vector<std::uint16_t>& want_w,
                                const char* what) {
    ASSERT_EQ(got_w.size(), want_w.size()) << what;
    const std::vector<float> got = floats(got_w), want = floats(want_w);
    double scale = 0;
    for (float w : want) scale = std::max(scale, static_cast<double>(std::abs(w)));
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double e = std::isnan(got[i]) ? INFINITY : std::abs(static_cast<double>(got[i]) - want[i]);
      if (e > std::abs(static_cast<double>(want[i])) / 64 + 1e-5 * scale + 1e-6 && bad++ == 0) first = i;
    }
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " elements off, first " << first << " gpu " << got[first]
                       << " cpu " << want[first];
  }
  std::unique_ptr<Backend> emu;
};

TEST_F(CudaVsCpuBf16, GemmOnBf16OperandsWithCInFp32AndBf16) {
  for (const auto& [m, n, k] : {std::array{33, 17, 29}, std::array{127, 65, 1029}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (DType ct : {DType::fp32, DType::bf16}) {
          SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k << " ta " << ta << " tb " << tb << " C "
                                            << to_string(ct));
          const auto aw = words(randn(static_cast<std::size_t>(m) * k, 4)),
                     bw = words(randn(static_cast<std::size_t>(k) * n, 5));
          auto c = randn(static_cast<std::size_t>(m) * n, 6);
          if (ct == DType::bf16) round_to_bf16(c.data(), static_cast<std::int64_t>(c.size()));
          const float alpha = 0.5f, beta = 1.25f;
          auto cw = words(c);
          auto want = c;
          Tensor ga = up16(aw), gb = up16(bw);
          Floats gc32 = up(c);
          Tensor gc16 = up16(cw);
          if (ct == DType::fp32) {
            emu->gemm(ta, tb, m, n, k, alpha, cview(aw), cview(bw), beta, want.data());
            gpu->gemm(ta, tb, m, n, k, alpha, ga.cref(), gb.cref(), beta, gc32.data());
          } else {
            emu->gemm(ta, tb, m, n, k, alpha, cview(aw), cview(bw), beta, view(cw));
            gpu->gemm(ta, tb, m, n, k, alpha, ga.cref(), gb.cref(), beta, gc16.ref());
            want = floats(cw);
          }
          const std::vector<float> got = ct == DType::fp32 ? down(gc32) : floats(down16(gc16));
          const std::vector<float> a16 = floats(aw), b16 = floats(bw);
          int bad = 0;
          for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
              const std::size_t ij = static_cast<std::size_t>(i) * n + j;
              // A bf16 C adds its one rounding on each side: neighbours at most two ulps apart.
              const double bound = gemm_order_bound(ta, tb, m, n, k, alpha, a16, b16, beta, c[ij], i, j) +
                                   (ct == DType::bf16 ? std::abs(static_cast<double>(want[ij])) / 64 : 0.0);
              if (!(std::abs(static_cast<double>(got[ij]) - want[ij]) <= bound) && ++bad <= 5)
                ADD_FAILURE() << "C[" << i << "," << j << "] = " << got[ij] << ", cpu " << want[ij] << ", bound "
                              << bound;
            }
          EXPECT_EQ(bad, 0);
        }
}

TEST_F(CudaVsCpuBf16, RmsnormForwardAndBackward) {
  const int t = 5, c = 1031;
  const std::size_t n = static_cast<std::size_t>(t) * c;
  const auto xw = words(randn(n, 40)), dyw = words(randn(n, 41));
  const auto w = randn(static_cast<std::size_t>(c), 42);
  auto dw = randn(static_cast<std::size_t>(c), 43);
  auto dxw = words(randn(n, 44)), yw = words(std::vector<float>(n, 0.f));
  std::vector<float> rstd(static_cast<std::size_t>(t));
  Tensor gx = up16(xw), gdy = up16(dyw), gdx = up16(dxw), gy = up16(yw);
  Floats gw = up(w), gdw = up(dw), gr(*gpu, t, MemCategory::working);
  emu->rmsnorm_forward(view(yw), rstd.data(), cview(xw), w.data(), t, c, 1e-5f);
  gpu->rmsnorm_forward(gy.ref(), gr.data(), gx.cref(), gw.data(), t, c, 1e-5f);
  expect_bf16_close(down16(gy), yw, "rmsnorm out");
  expect_close(down(gr), rstd, 1e-5, "rmsnorm rstd");
  emu->rmsnorm_backward(view(dxw), dw.data(), cview(dyw), cview(xw), w.data(), rstd.data(), t, c);
  gpu->rmsnorm_backward(gdx.ref(), gdw.data(), gdy.cref(), gx.cref(), gw.data(), gr.data(), t, c);
  expect_bf16_close(down16(gdx), dxw, "rmsnorm dinp (accumulated)");
  expect_close(down(gdw), dw, 1e-4, "rmsnorm dw (fp32, accumulated)");
}

TEST_F(CudaVsCpuBf16, SwigluForwardAndBackward) {
  const std::size_t n = 10'007;
  auto gate = randn(n, 50);
  for (float& g : gate) g *= 4.f;
  const auto gw = words(gate), uw = words(randn(n, 51)), dw = words(randn(n, 52));
  auto out = words(std::vector<float>(n, 0.f)), dg = out, du = out;
  Tensor ggate = up16(gw), gup = up16(uw), gdout = up16(dw), gout = up16(out), gdg = up16(out), gdu = up16(out);
  const auto elems = static_cast<std::int64_t>(n);
  emu->swiglu_forward(view(out), cview(gw), cview(uw), elems);
  gpu->swiglu_forward(gout.ref(), ggate.cref(), gup.cref(), elems);
  expect_bf16_close(down16(gout), out, "swiglu out");
  emu->swiglu_backward(view(dg), view(du), cview(dw), cview(gw), cview(uw), elems);
  gpu->swiglu_backward(gdg.ref(), gdu.ref(), gdout.cref(), ggate.cref(), gup.cref(), elems);
  expect_bf16_close(down16(gdg), dg, "swiglu dgate");
  expect_bf16_close(down16(gdu), du, "swiglu dup");
}

TEST_F(CudaVsCpuBf16, RopeBothDirections) {
  const int t = 11, heads = 3, d = 64;
  std::vector<int> pos(static_cast<std::size_t>(t));
  for (int i = 0; i < t; ++i) pos[static_cast<std::size_t>(i)] = 1000 * i + 7;
  Ints gpos = upi(pos);
  for (bool inverse : {false, true}) {
    SCOPED_TRACE(inverse ? "inverse" : "forward");
    auto xw = words(randn(static_cast<std::size_t>(t) * heads * d, inverse ? 61 : 60));
    Tensor gx = up16(xw);
    emu->rope(view(xw), pos.data(), t, heads, d, 10000.f, inverse);
    gpu->rope(gx.ref(), gpos.data(), t, heads, d, 10000.f, inverse);
    expect_bf16_close(down16(gx), xw, "rope");
  }
}

TEST_F(CudaVsCpuBf16, CrossEntropyWritesBf16GradientsInPlace) {
  const int t = 6, v = 5003;
  auto logits = randn(static_cast<std::size_t>(t) * v, 70);
  for (float& z : logits) z *= 4.f;
  auto zw = words(logits);
  std::vector<int> labels = {3, -1, 0, v - 1, 17, 4000};
  std::vector<float> loss(static_cast<std::size_t>(t));
  Tensor gz = up16(zw);
  Ints glab = upi(labels);
  Floats gloss(*gpu, t, MemCategory::working);
  emu->cross_entropy(loss.data(), view(zw), labels.data(), t, v, 1.f / 6);
  gpu->cross_entropy(gloss.data(), gz.ref(), glab.data(), t, v, 1.f / 6);
  expect_close(down(gloss), loss, 1e-5, "losses (fp32)");
  expect_bf16_close(down16(gz), zw, "dlogits");
}

TEST_F(CudaVsCpuBf16, AdamwWritesTheRoundedParameterCopy) {
  const std::size_t n = 20'011;
  auto p = randn(n, 80), m = randn(n, 81), v = randn(n, 82);
  for (float& x : m) x *= 0.1f;
  for (float& x : v) x = 0.01f * x * x;
  Floats gp = up(p), gm = up(m), gv = up(v);
  auto shadow = words(std::vector<float>(n, 0.f));
  Tensor gshadow = up16(shadow);
  const auto elems = static_cast<std::int64_t>(n);
  for (int step = 1; step <= 2; ++step) {
    const auto g = randn(n, 83 + static_cast<std::uint64_t>(step));
    Floats gg = up(g);
    emu->adamw(p.data(), g.data(), m.data(), v.data(), elems, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, view(shadow));
    gpu->adamw(gp.data(), gg.data(), gm.data(), gv.data(), elems, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step,
               gshadow.ref());
  }
  const std::vector<float> got_p = down(gp);
  expect_close(got_p, p, 1e-5, "fp32 params");
  const std::vector<std::uint16_t> got_shadow = down16(gshadow);
  EXPECT_EQ(got_shadow, words(got_p)) << "the copy is the GPU's updated params rounded to nearest even";
  expect_bf16_close(got_shadow, shadow, "copy against the CPU back end's");
}

// A layer op's views share one type; reshards keep it; AdamW's copy is bf16.
TEST_F(CudaVsCpuBf16, MixedViewTypesAreRefusedNamingTheOp) {
  Tensor a(*gpu, 64, DType::bf16, MemCategory::working), b(*gpu, 64, DType::bf16, MemCategory::working);
  Floats f(*gpu, 64, MemCategory::working);
  auto refused = [](const char* op, const auto& call) {
    try {
      call();
      ADD_FAILURE() << op << " accepted views of two types";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
    }
  };
  refused("swiglu_forward", [&] { gpu->swiglu_forward(a.ref(), b.cref(), f.data(), 64); });
  refused("rmsnorm_forward", [&] { gpu->rmsnorm_forward(f.data(), f.data(), a.cref(), f.data(), 1, 64, 1e-5f); });
  refused("ulysses_pack", [&] { gpu->ulysses_pack(2, 1, 2, 2, 8, a.cref(), f.data()); });
  refused("adamw", [&] { gpu->adamw(f.data(), f.data(), f.data(), f.data(), 64, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.f, 1,
                                    f.data()); });
  // add and convert take any mix.
  gpu->add(a.ref(), f.data(), 64);
  gpu->convert(f.data(), a.cref(), 64);
  gpu->synchronize();
}

void expect_step_matches(Backend& gpu, Backend& cpu) {
  TrainSetup s;
  s.model.layers = 2;
  s.model.hidden = 128;
  s.model.heads = 2;
  s.model.kv_heads = 1;
  s.model.head_dim = 64;  // what the flash kernels support
  s.model.ffn = 256;
  s.model.vocab = 128;
  s.seq_len = 128;
  Trainer tc(cpu, nullptr, s), tg(gpu, nullptr, s);
  const StepResult rc = tc.compute_gradients(), rg = tg.compute_gradients();
  EXPECT_NEAR(rg.loss, rc.loss, 2e-3 * rc.loss);
  // bf16 attention and bf16-operand GEMMs: each gradient tensor agrees with the fp32 CPU step to
  // about 1e-2 relative RMS.
  const std::vector<double> errors =
      tensor_errors(tg.model().tensors(), {rg.loss, tg.grads_host()}, {rc.loss, tc.grads_host()});
  for (std::size_t i = 1; i < errors.size(); ++i)
    EXPECT_LT(errors[i], 3e-2) << "grad " << tg.model().tensors()[i - 1].name;
}

TEST_F(CudaVsCpu, TrainingStepMatchesTheCpuReference) {
  ASSERT_EQ(gpu->attention_engine(), "seqpar");
  expect_step_matches(*gpu, *cpu);
}

// The CUDA back end on the cuDNN engine. Blocks use 4 query heads over 2 KV heads (GQA) and head
// dim 64; the CPU back end's fp32 reference runs the same block.
class CudnnVsCpu : public CudaVsCpu {
 protected:
  void SetUp() override {
    CudaVsCpu::SetUp();
    if (IsSkipped()) return;
    const kernels::EngineAvailability a = kernels::attention_engine_availability();
    if (!a.cudnn) GTEST_SKIP() << "the cuDNN attention engine is unavailable: " << a.cudnn_why;
    gpu = make_cuda_backend(0, kernels::AttentionEngine::cudnn);
  }
  static AttnShape block(int seq_q, int seq_k, std::int64_t q_offset, std::int64_t k_offset) {
    AttnShape s;
    s.seq_q = seq_q;
    s.seq_k = seq_k;
    s.heads = 4;
    s.kv_heads = 2;
    s.head_dim = 64;
    s.causal = true;
    s.q_offset = q_offset;
    s.k_offset = k_offset;
    return s;
  }
  static std::size_t lse_size(const AttnShape& s) { return static_cast<std::size_t>(s.batch) * s.heads * s.seq_q; }
  struct Data {
    std::vector<float> q, k, v;
  };
  static Data data(const AttnShape& s, std::uint64_t seed) {
    return {randn(static_cast<std::size_t>(q_elems(s)), seed), randn(static_cast<std::size_t>(k_elems(s)), seed + 1),
            randn(static_cast<std::size_t>(k_elems(s)), seed + 2)};
  }
  // Forward of one block on the GPU: o and lse.
  std::pair<std::vector<float>, std::vector<float>> gpu_forward(const AttnShape& s, const Data& d) {
    Floats q = up(d.q), k = up(d.k), v = up(d.v);
    Floats o(*gpu, q_elems(s), MemCategory::working), lse(*gpu, static_cast<std::int64_t>(lse_size(s)),
                                                          MemCategory::working);
    gpu->attention_forward(s, q.data(), k.data(), v.data(), o.data(), lse.data());
    return {down(o), down(lse)};
  }
  // Backward of one block from the given o and lse (the merged ones of a ring) on both back ends;
  // expects dq, dk, dv to agree.
  void expect_backward_matches(const AttnShape& s, const Data& d, const std::vector<float>& o,
                               const std::vector<float>& lse, const std::vector<float>& dout, const char* what) {
    std::vector<float> dq(d.q.size()), dk(d.k.size()), dv(d.v.size());
    cpu->attention_backward(s, d.q.data(), d.k.data(), d.v.data(), o.data(), lse.data(), dout.data(), dq.data(),
                            dk.data(), dv.data());
    Floats gq = up(d.q), gk = up(d.k), gv = up(d.v), go = up(o), gl = up(lse), gdo = up(dout);
    Floats gdq(*gpu, q_elems(s), MemCategory::working), gdk(*gpu, k_elems(s), MemCategory::working),
        gdv(*gpu, k_elems(s), MemCategory::working);
    gpu->attention_backward(s, gq.data(), gk.data(), gv.data(), go.data(), gl.data(), gdo.data(), gdq.data(),
                            gdk.data(), gdv.data());
    SCOPED_TRACE(what);
    expect_close(down(gdq), dq, 3e-2, "dq");
    expect_close(down(gdk), dk, 3e-2, "dk");
    expect_close(down(gdv), dv, 3e-2, "dv");
  }
};

TEST_F(CudnnVsCpu, RecordsTheEngine) { EXPECT_EQ(gpu->attention_engine(), "cudnn"); }

// Ulysses: after the all-to-all each rank attends its heads over the whole sequence, one causal
// block on the diagonal.
TEST_F(CudnnVsCpu, UlyssesBlockMatchesTheCpuReference) {
  const AttnShape s = block(96, 96, 0, 0);
  ASSERT_EQ(kernels::classify_block_mask(s), kernels::BlockMask::causal_top);
  const Data d = data(s, 11);
  std::vector<float> o(d.q.size()), lse(lse_size(s));
  cpu->attention_forward(s, d.q.data(), d.k.data(), d.v.data(), o.data(), lse.data());
  const auto [go, glse] = gpu_forward(s, d);
  expect_close(go, o, 2e-2, "o");
  expect_close(glse, lse, 1e-2, "lse");
  expect_backward_matches(s, d, o, lse, randn(d.q.size(), 14), "ulysses");
}

// A zigzag ring of 2 over 192 tokens (chunks of 48): rank 0 holds chunks 0 and 3, rank 1 chunks 1
// and 2 (one merged segment at 48 of 96 tokens). Query chunk 3 sees chunk 0 and rank 1's segment
// fully and itself causally; its blocks merge by LSE, and each block's backward takes the merged
// output and LSE, as SpAttention runs them. Query chunk 0 against chunk 3 is skipped (no key seen).
TEST_F(CudnnVsCpu, ZigzagRingBlocksMatchTheCpuReference) {
  const AttnShape blocks[] = {block(48, 48, 144, 0), block(48, 96, 144, 48), block(48, 48, 144, 144)};
  ASSERT_EQ(kernels::classify_block_mask(blocks[0]), kernels::BlockMask::full);
  ASSERT_EQ(kernels::classify_block_mask(blocks[1]), kernels::BlockMask::full);
  ASSERT_EQ(kernels::classify_block_mask(blocks[2]), kernels::BlockMask::causal_top);
  const std::vector<float> q = randn(static_cast<std::size_t>(q_elems(blocks[0])), 21);
  std::vector<Data> kv;
  std::vector<float> o_cpu(q.size(), 0.f), lse_cpu(lse_size(blocks[0]), -INFINITY);
  std::vector<float> o_gpu = o_cpu, lse_gpu = lse_cpu;
  for (std::size_t b = 0; b < 3; ++b) {
    const AttnShape& s = blocks[b];
    Data d = data(s, 30 + 10 * b);
    d.q = q;  // one query chunk against every key block
    std::vector<float> o(q.size()), lse(lse_size(s));
    cpu->attention_forward(s, d.q.data(), d.k.data(), d.v.data(), o.data(), lse.data());
    const auto [go, glse] = gpu_forward(s, d);
    SCOPED_TRACE(::testing::Message() << "block " << b);
    expect_close(go, o, 2e-2, "o");
    expect_close(glse, lse, 1e-2, "lse");
    cpu->lse_merge(1, s.seq_q, s.heads, s.head_dim, o_cpu.data(), lse_cpu.data(), o.data(), lse.data());
    Floats mo = up(o_gpu), ml = up(lse_gpu), po = up(go), pl = up(glse);
    gpu->lse_merge(1, s.seq_q, s.heads, s.head_dim, mo.data(), ml.data(), po.data(), pl.data());
    o_gpu = down(mo);
    lse_gpu = down(ml);
    kv.push_back(std::move(d));
  }
  expect_close(o_gpu, o_cpu, 2e-2, "merged o");
  expect_close(lse_gpu, lse_cpu, 1e-2, "merged lse");
  const std::vector<float> dout = randn(q.size(), 29);
  for (std::size_t b = 0; b < 3; ++b)
    expect_backward_matches(blocks[b], kv[b], o_cpu, lse_cpu, dout, b == 2 ? "diagonal block" : "full block");

  // The skipped block: nothing seen, so o = 0, lse = -inf and no gradient.
  const AttnShape none = block(48, 48, 0, 144);
  ASSERT_EQ(kernels::classify_block_mask(none), kernels::BlockMask::none);
  const Data d = data(none, 50);
  const auto [go, glse] = gpu_forward(none, d);
  for (float x : go) ASSERT_EQ(x, 0.f);
  for (float x : glse) ASSERT_TRUE(std::isinf(x) && x < 0);
  std::vector<float> zero_o(d.q.size(), 0.f), inf_lse(lse_size(none), -INFINITY);
  expect_backward_matches(none, d, zero_o, inf_lse, dout, "skipped block");
}

// All-gather KV's calls over 192 tokens on 2 ranks (head/tail chunks of 48): rank 0's chunk 3 sees
// all 192 keys, rank 1's merged chunks 1 and 2 the first 144; each is one causal call aligned at
// the bottom-right corner (cuDNN's bottom-right mask), whose output and LSE are final.
TEST_F(CudnnVsCpu, AllGatherPrefixBlocksMatchTheCpuReference) {
  const AttnShape blocks[] = {block(48, 192, 144, 0), block(96, 144, 48, 0), block(48, 48, 0, 0)};
  ASSERT_EQ(kernels::classify_block_mask(blocks[0]), kernels::BlockMask::causal_bottom);
  ASSERT_EQ(kernels::classify_block_mask(blocks[1]), kernels::BlockMask::causal_bottom);
  for (std::size_t b = 0; b < 3; ++b) {
    const AttnShape& s = blocks[b];
    const Data d = data(s, 70 + 10 * b);
    std::vector<float> o(d.q.size()), lse(lse_size(s));
    cpu->attention_forward(s, d.q.data(), d.k.data(), d.v.data(), o.data(), lse.data());
    const auto [go, glse] = gpu_forward(s, d);
    SCOPED_TRACE(::testing::Message() << "call " << b);
    expect_close(go, o, 2e-2, "o");
    expect_close(glse, lse, 1e-2, "lse");
    expect_backward_matches(s, d, o, lse, randn(d.q.size(), 77 + b), "all-gather call");
  }
}

// A block cut off its diagonal (no ring layout makes one: test_seq_layout.cpp) falls back to
// seqpar's kernel on the cudnn engine and still matches the reference.
TEST_F(CudnnVsCpu, GeneralBlockFallsBackAndMatches) {
  const AttnShape s = block(48, 48, 10, 0);
  ASSERT_EQ(kernels::classify_block_mask(s), kernels::BlockMask::general);
  const Data d = data(s, 61);
  std::vector<float> o(d.q.size()), lse(lse_size(s));
  cpu->attention_forward(s, d.q.data(), d.k.data(), d.v.data(), o.data(), lse.data());
  const auto [go, glse] = gpu_forward(s, d);
  expect_close(go, o, 2e-2, "o");
  expect_close(glse, lse, 1e-2, "lse");
  expect_backward_matches(s, d, o, lse, randn(d.q.size(), 64), "general block");
}

TEST_F(CudnnVsCpu, TrainingStepMatchesTheCpuReference) { expect_step_matches(*gpu, *cpu); }

}  // namespace
}  // namespace seqpar::train

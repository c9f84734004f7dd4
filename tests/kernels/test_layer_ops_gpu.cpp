// The GPU layer ops (layer_ops.cuh) against their CPU references (layer_ops_ref.hpp), op by op on
// fresh random data (the seed is printed with any failure) at awkward sizes: rows wider than a
// block and not a multiple of 32, odd element counts past one grid-stride pass, a vocabulary in the
// tens of thousands, repeated tokens (the embedding's atomic scatter). Every activation-typed op runs
// in fp32 and in bf16; the bf16 expectation is the fp32 reference on the bf16-rounded inputs (and
// old values of accumulated outputs) with its outputs rounded to bf16, held to two bf16 ulps plus a
// small absolute term. Skips without a GPU, except the type checks, which fail before any launch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_util.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/kernels/layer_ops.cuh"
#include "seqpar/kernels/layer_ops_ref.hpp"

namespace seqpar::test {
namespace {

namespace gpu = kernels::layer_ops;
namespace cpu = ref::layer_ops;

constexpr DType kActs[] = {DType::fp32, DType::bf16};

void round_all(DType t, std::vector<float>& v) {
  for (float& x : v) x = round_to(t, x);
}

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
  // A device copy of `h` in type t; rounds `h` in place so the reference sees the kernel's inputs.
  static std::unique_ptr<DeviceBuffer> up_as(DType t, std::vector<float>& h) {
    auto d = std::make_unique<DeviceBuffer>(h.size() * kernels::dtype_size(t));
    upload(t, h, *d);
    return d;
  }
  static std::unique_ptr<DeviceBuffer> poisoned(std::size_t elems, DType t = DType::fp32) {
    auto d = std::make_unique<DeviceBuffer>(elems * kernels::dtype_size(t));
    d->poison();
    return d;
  }
  static std::vector<float> down(const DeviceBuffer& d, DType t = DType::fp32) {
    SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
    return download(t, d.get(), d.bytes() / kernels::dtype_size(t));
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
  // An output stored in t: fp32 as expect_close with `fp32_rtol`; bf16 element by element within
  // two bf16 ulps (2^-6 relative: the GPU's fp32 value and the reference's may round to neighbours)
  // plus 1e-5 of the largest magnitude (values that cancel to near zero).
  void expect_stored(DType t, const std::vector<float>& got, const std::vector<float>& want, double fp32_rtol,
                     const char* what) {
    if (t == DType::fp32) return expect_close(got, want, fp32_rtol, what);
    ASSERT_EQ(got.size(), want.size()) << what;
    double scale = 0;
    for (float w : want) scale = std::max(scale, static_cast<double>(std::abs(w)));
    const double rtol = 1.0 / 64, atol = 1e-5 * scale + 1e-6;
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double e = std::isnan(got[i]) ? INFINITY : std::abs(static_cast<double>(got[i]) - want[i]);
      if (e > rtol * std::abs(static_cast<double>(want[i])) + atol && bad++ == 0) first = i;
    }
    EXPECT_EQ(bad, 0u) << what << " (bf16): " << bad << " elements off, first " << first << " gpu " << got[first]
                       << " cpu " << want[first] << " (seed " << seed_ << ")";
  }

 private:
  std::uint64_t calls_ = 0;
};

// fp32 math on the loaded values, one rounding at the store: the GPU result is exact.
TEST_F(LayerOpsGpu, AddScaleAndConvertInEveryTypeMix) {
  const std::int64_t n = 1'000'003;  // odd, several grid-stride blocks
  for (DType ty : kActs) {
    for (DType tx : kActs) {
      SCOPED_TRACE(::testing::Message() << "y " << to_string(ty) << ", x " << to_string(tx));
      auto y = randn(n), x = randn(n);
      auto dy = up_as(ty, y), dx = up_as(tx, x);
      cpu::add(y.data(), x.data(), n);
      round_all(ty, y);
      gpu::add(ty, dy->get(), tx, dx->get(), n, nullptr);
      expect_close(down(*dy, ty), y, 0, "add");
      cpu::scale(y.data(), -0.37f, n);
      round_all(ty, y);
      gpu::scale(ty, dy->get(), -0.37f, n, nullptr);
      expect_close(down(*dy, ty), y, 0, "scale");
      // convert x (type tx) into a buffer of type ty.
      auto out = poisoned(static_cast<std::size_t>(n), ty);
      gpu::convert(ty, out->get(), tx, dx->get(), n, nullptr);
      round_all(ty, x);
      expect_close(down(*out, ty), x, 0, "convert");
    }
  }
}

TEST_F(LayerOpsGpu, ConvertRoundsToNearestEven) {
  // Halfway cases: 1 + 2^-8 lies between bf16 1 and 1 + 2^-7 and goes to the even 1; 1 + 3 * 2^-8
  // goes up to the even 1 + 2^-6; a denormal and a value near the top of the range round as the host does.
  std::vector<float> x = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -(1.0f + 0x1p-8f), 0x1p-130f, 3.0e38f};
  auto gx = up(x);
  auto bits = poisoned(x.size(), DType::bf16);
  gpu::convert(DType::bf16, bits->get(), DType::fp32, gx->get(), static_cast<std::int64_t>(x.size()), nullptr);
  const auto got = down(*bits, DType::bf16);
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[1], 1.0f + 0x1p-6f);
  EXPECT_EQ(got[2], -1.0f);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(got[i], round_to(DType::bf16, x[i])) << "element " << i;
}

TEST_F(LayerOpsGpu, EmbeddingForwardAndAtomicBackwardWithRepeatedTokens) {
  const int vocab = 37, t = 301, dim = 1031;  // t >> vocab: every row is hit several times
  for (DType at : kActs) {
    SCOPED_TRACE(to_string(at));
    const auto table = randn(static_cast<std::size_t>(vocab) * dim);
    const auto tokens = randint(t, 0, vocab - 1);
    auto dout = randn(static_cast<std::size_t>(t) * dim);
    std::vector<float> out(static_cast<std::size_t>(t) * dim), dtable = randn(table.size());
    auto dtab = up(table), dtok = up(tokens), dout_d = up_as(at, dout), dgrad = up(dtable);
    auto dres = poisoned(out.size(), at);
    cpu::embedding_forward(out.data(), tokens.data(), table.data(), t, dim);
    round_all(at, out);
    gpu::embedding_forward(at, dres->get(), static_cast<const int*>(dtok->get()), dtab->f32(), t, dim, nullptr);
    expect_close(down(*dres, at), out, 0, "embedding forward");
    cpu::embedding_backward(dtable.data(), dout.data(), tokens.data(), t, dim);
    gpu::embedding_backward(dgrad->f32(), at, dout_d->get(), static_cast<const int*>(dtok->get()), t, dim, nullptr);
    expect_close(down(*dgrad), dtable, 1e-5, "embedding backward (fp32 table)");
  }
}

TEST_F(LayerOpsGpu, RmsnormForwardAndBackwardOnRowsWiderThanABlock) {
  for (DType at : kActs) {
    for (int c : {1, 31, 1031, 4099}) {
      SCOPED_TRACE(::testing::Message() << to_string(at) << ", dim " << c);
      const int t = 7;
      const std::size_t n = static_cast<std::size_t>(t) * c;
      auto x = randn(n, 3.0f), dy = randn(n), dx = randn(n);
      const auto w = randn(c);
      std::vector<float> y(n), r(t), dw = randn(c);
      auto gx = up_as(at, x), gdy = up_as(at, dy), gdx = up_as(at, dx);
      auto gw = up(w), gy = poisoned(n, at), gr = poisoned(t), gdw = up(dw);
      cpu::rmsnorm_forward(y.data(), r.data(), x.data(), w.data(), t, c, 1e-5f);
      round_all(at, y);
      gpu::rmsnorm_forward(at, gy->get(), gr->f32(), gx->get(), gw->f32(), t, c, 1e-5f, nullptr);
      expect_stored(at, down(*gy, at), y, 1e-5, "rmsnorm out");
      expect_close(down(*gr), r, 1e-5, "rmsnorm rstd (fp32)");
      cpu::rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), r.data(), t, c);
      round_all(at, dx);
      gpu::rmsnorm_backward(at, gdx->get(), gdw->f32(), gdy->get(), gx->get(), gw->f32(), gr->f32(), t, c, nullptr);
      expect_stored(at, down(*gdx, at), dx, 1e-4, "rmsnorm dx (accumulated)");
      expect_close(down(*gdw), dw, 1e-4, "rmsnorm dw (fp32, accumulated)");
    }
  }
}

// The backward sums dw over a run of rows per block in shared memory (rows = tokens / (8 * SMs),
// 1 to 32) and falls back to per-element atomics where c floats exceed a block's shared memory.
// 40001 tokens at c = 300 (not a multiple of 32): several rows per block, the 32-row cap on any GPU
// with at most 156 SMs, and a one-row last run; 2501 x 13001: c * 4 bytes past the default 48 KiB, so
// the launcher opts in (two rows per block on 132 SMs); c = 60013 (234 KiB): past the 227 KiB a
// block may have on sm_90, the per-element path. rstd comes from the reference, so only the
// backward is compared.
TEST_F(LayerOpsGpu, RmsnormBackwardStagesDwOverRunsOfRowsAndWideRows) {
  struct Shape {
    int t, c;
  };
  for (DType at : kActs) {
    for (Shape sh : {Shape{40001, 300}, Shape{2501, 13001}, Shape{5, 60013}}) {
      SCOPED_TRACE(::testing::Message() << to_string(at) << ", tokens " << sh.t << ", dim " << sh.c);
      const std::size_t n = static_cast<std::size_t>(sh.t) * static_cast<std::size_t>(sh.c);
      auto x = randn(n, 3.0f), dy = randn(n), dx = randn(n);
      const auto w = randn(static_cast<std::size_t>(sh.c));
      std::vector<float> y(n), r(static_cast<std::size_t>(sh.t)), dw = randn(static_cast<std::size_t>(sh.c));
      auto gx = up_as(at, x), gdy = up_as(at, dy), gdx = up_as(at, dx);
      cpu::rmsnorm_forward(y.data(), r.data(), x.data(), w.data(), sh.t, sh.c, 1e-5f);
      auto gw = up(w), gr = up(r), gdw = up(dw);
      cpu::rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), r.data(), sh.t, sh.c);
      round_all(at, dx);
      gpu::rmsnorm_backward(at, gdx->get(), gdw->f32(), gdy->get(), gx->get(), gw->f32(), gr->f32(), sh.t, sh.c,
                            nullptr);
      expect_stored(at, down(*gdx, at), dx, 1e-4, "rmsnorm dx (accumulated)");
      expect_close(down(*gdw), dw, 1e-4, "rmsnorm dw (fp32, accumulated)");
    }
  }
}

TEST_F(LayerOpsGpu, RopeBothDirectionsAtLargePositions) {
  const int t = 13, heads = 3, d = 34;  // d/2 = 17 pairs
  auto pos = randint(t, 0, 1 << 20);
  pos[0] = 0;
  auto gpos = up(pos);
  for (DType at : kActs) {
    for (bool inverse : {false, true}) {
      SCOPED_TRACE(::testing::Message() << to_string(at) << (inverse ? ", inverse" : ""));
      auto x = randn(static_cast<std::size_t>(t) * heads * d);
      auto gx = up_as(at, x);
      cpu::rope(x.data(), pos.data(), t, heads, d, 500000.0f, inverse);
      round_all(at, x);
      gpu::rope(at, gx->get(), static_cast<const int*>(gpos->get()), t, heads, d, 500000.0f, inverse, nullptr);
      expect_stored(at, down(*gx, at), x, 1e-5, "rope");
    }
  }
}

TEST_F(LayerOpsGpu, SwigluForwardAndBackward) {
  const std::int64_t n = 100'003;
  for (DType at : kActs) {
    SCOPED_TRACE(to_string(at));
    auto gate = randn(n, 4.0f), upv = randn(n), dout = randn(n);
    std::vector<float> out(n), dgate(n), dup(n);
    auto gg = up_as(at, gate), gu = up_as(at, upv), gd = up_as(at, dout);
    auto go = poisoned(n, at), gdg = poisoned(n, at), gdu = poisoned(n, at);
    cpu::swiglu_forward(out.data(), gate.data(), upv.data(), n);
    round_all(at, out);
    gpu::swiglu_forward(at, go->get(), gg->get(), gu->get(), n, nullptr);
    expect_stored(at, down(*go, at), out, 1e-5, "swiglu forward");
    cpu::swiglu_backward(dgate.data(), dup.data(), dout.data(), gate.data(), upv.data(), n);
    round_all(at, dgate);
    round_all(at, dup);
    gpu::swiglu_backward(at, gdg->get(), gdu->get(), gd->get(), gg->get(), gu->get(), n, nullptr);
    expect_stored(at, down(*gdg, at), dgate, 1e-5, "swiglu dgate");
    expect_stored(at, down(*gdu, at), dup, 1e-5, "swiglu dup");
  }
}

TEST_F(LayerOpsGpu, CrossEntropyOverALargeVocabularyWithIgnoredLabels) {
  const int t = 9, v = 32'011;
  for (DType at : kActs) {
    SCOPED_TRACE(to_string(at));
    auto logits = randn(static_cast<std::size_t>(t) * v, 4.0f);
    auto labels = randint(t, 0, v - 1);
    labels[2] = -1;
    labels[t - 1] = v - 1;
    auto gl = up_as(at, logits), glab = up(labels), gloss = poisoned(t);
    std::vector<float> loss(t);
    cpu::cross_entropy(loss.data(), logits.data(), labels.data(), t, v, 1.0f / 9);
    round_all(at, logits);
    gpu::cross_entropy(gloss->f32(), at, gl->get(), static_cast<const int*>(glab->get()), t, v, 1.0f / 9, nullptr);
    expect_close(down(*gloss), loss, 1e-5, "cross-entropy loss (fp32)");
    expect_stored(at, down(*gl, at), logits, 1e-5, "cross-entropy dlogits");
  }
}

TEST_F(LayerOpsGpu, AdamwOverSeveralStepsWithAndWithoutTheBf16Copy) {
  const std::int64_t n = 100'003;
  for (bool shadow : {false, true}) {
    SCOPED_TRACE(shadow ? "with the bf16 copy" : "fp32 only");
    auto p = randn(n), m = randn(n, 0.1f), v = randn(n, 0.1f);
    for (float& e : v) e = e * e;
    auto gp = up(p), gm = up(m), gv = up(v);
    auto p16 = poisoned(static_cast<std::size_t>(n), DType::bf16);
    auto* p16_ptr = shadow ? static_cast<std::uint16_t*>(p16->get()) : nullptr;
    for (int step = 1; step <= 3; ++step) {
      const auto g = randn(n);
      auto gg = up(g);
      cpu::adamw(p.data(), g.data(), m.data(), v.data(), n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
      gpu::adamw(gp->f32(), gg->f32(), gm->f32(), gv->f32(), n, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, p16_ptr,
                 nullptr);
    }
    auto got_p = down(*gp);
    expect_close(got_p, p, 1e-5, "adamw param");
    expect_close(down(*gm), m, 1e-5, "adamw m");
    expect_close(down(*gv), v, 1e-5, "adamw v");
    if (shadow) {  // the copy is the GPU's own fp32 params rounded: exact
      round_all(DType::bf16, got_p);
      expect_close(down(*p16, DType::bf16), got_p, 0, "adamw bf16 copy");
    } else {  // untouched: still the poison (NaN)
      for (float e : down(*p16, DType::bf16)) ASSERT_TRUE(std::isnan(e)) << "adamw wrote a copy it was not given";
    }
  }
}

// Type checks run on the host before any launch, so these need no device.
TEST(LayerOpsGpuTypes, OtherActivationTypesAreRefusedNamingTheOpAndType) {
  auto expect_refused = [](const char* op, const auto& call) {
    try {
      call();
      ADD_FAILURE() << op << " accepted fp16";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(op), std::string::npos) << what;
      EXPECT_NE(what.find("fp16"), std::string::npos) << what;
    }
  };
  void* p = reinterpret_cast<void*>(std::uintptr_t{256});  // never dereferenced: the call throws first
  auto* f = static_cast<float*>(p);
  const int* i = static_cast<const int*>(p);
  expect_refused("add", [&] { gpu::add(DType::fp16, p, DType::fp32, p, 8, nullptr); });
  expect_refused("add", [&] { gpu::add(DType::fp32, p, DType::fp16, p, 8, nullptr); });
  expect_refused("scale", [&] { gpu::scale(DType::fp16, p, 2.f, 8, nullptr); });
  expect_refused("convert", [&] { gpu::convert(DType::bf16, p, DType::fp16, p, 8, nullptr); });
  expect_refused("embedding_forward", [&] { gpu::embedding_forward(DType::fp16, p, i, f, 2, 4, nullptr); });
  expect_refused("embedding_backward", [&] { gpu::embedding_backward(f, DType::fp16, p, i, 2, 4, nullptr); });
  expect_refused("rmsnorm_forward", [&] { gpu::rmsnorm_forward(DType::fp16, p, f, p, f, 2, 4, 1e-5f, nullptr); });
  expect_refused("rmsnorm_backward",
                 [&] { gpu::rmsnorm_backward(DType::fp16, p, f, p, p, f, f, 2, 4, nullptr); });
  expect_refused("rope", [&] { gpu::rope(DType::fp16, p, i, 2, 1, 4, 1e4f, false, nullptr); });
  expect_refused("swiglu_forward", [&] { gpu::swiglu_forward(DType::fp16, p, p, p, 8, nullptr); });
  expect_refused("swiglu_backward", [&] { gpu::swiglu_backward(DType::fp16, p, p, p, p, p, 8, nullptr); });
  expect_refused("cross_entropy", [&] { gpu::cross_entropy(f, DType::fp16, p, i, 2, 4, 1.f, nullptr); });
  EXPECT_THROW(gpu::scale(DType::fp32, p, 2.f, -1, nullptr), Error);  // a negative count
}

}  // namespace
}  // namespace seqpar::test

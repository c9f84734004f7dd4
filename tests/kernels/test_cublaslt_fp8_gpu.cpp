// CublasLtGemm::matmul_fp8 against the CPU reference (kernels/fp8_gemm_ref.hpp) on every element:
// fresh random operands quantized on the GPU (fp8_quantize_current, itself held to core/fp8.hpp by
// test_fp8_cast_gpu.cpp), per-tensor and row-wise scales, D poisoned before the call; then the layouts
// FP8 refuses. Skips without a GPU; a row-wise case the library has no algorithm for is a failure
// that names it (the first GPU run says whether this cuBLASLt runs OUTER_VEC_32F).
#include <gtest/gtest.h>

#include <random>
#include <tuple>
#include <vector>

#include "gpu_util.hpp"
#include "seqpar/kernels/cublaslt_gemm.hpp"
#include "seqpar/kernels/fp8_cast.cuh"
#include "seqpar/kernels/fp8_gemm_ref.hpp"

namespace seqpar::kernels {
namespace {

using test::DeviceBuffer;

std::vector<std::uint8_t> download_u8(const DeviceBuffer& d, std::size_t n) {
  std::vector<std::uint8_t> out(n);
  SEQPAR_CUDA_CHECK(cudaMemcpy(out.data(), d.get(), n, cudaMemcpyDeviceToHost));
  return out;
}

TEST(CublasLtFp8Gpu, MatchesCpuReferenceOnEveryElement) {
  SEQPAR_SKIP_WITHOUT_GPU();
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  CublasLtGemm lt;
  // FP8 GEMMs want k and the leading dimensions in 16-byte multiples; m and n otherwise awkward.
  for (auto [m, n, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{40, 24, 48}, {136, 264, 512},
                         {1000, 72, 4096}})
    for (Fp8Scaling s : {Fp8Scaling::tensor, Fp8Scaling::row}) {
      SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k << " " << to_string(s));
      std::vector<float> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(n * k));
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = dist(rng) * static_cast<float>(1 + (i / k) % 7);
      for (float& x : b) x = dist(rng) * 0.01f;
      DeviceBuffer da(a.size() * 2), db(b.size() * 2), qa(a.size()), qb(b.size()), d(static_cast<std::size_t>(m * n) * 2);
      const auto ga = static_cast<std::size_t>(fp8_groups(m, s)), gb = static_cast<std::size_t>(fp8_groups(n, s));
      DeviceBuffer amax_a(ga * 4), scale_a(ga * 4), inv_a(ga * 4), amax_b(gb * 4), scale_b(gb * 4), inv_b(gb * 4);
      test::upload(DType::bf16, a, da);
      test::upload(DType::bf16, b, db);
      fp8_quantize_current(DType::bf16, da.get(), m, k, s, Fp8Format::e4m3, 0, static_cast<std::uint8_t*>(qa.get()),
                           amax_a.f32(), scale_a.f32(), inv_a.f32());
      fp8_quantize_current(DType::bf16, db.get(), n, k, s, Fp8Format::e4m3, 0, static_cast<std::uint8_t*>(qb.get()),
                           amax_b.f32(), scale_b.f32(), inv_b.f32());
      d.poison();
      GemmShape shape;
      shape.op = "test";
      shape.m = m;
      shape.n = n;
      shape.k = k;
      shape.trans_b = true;
      lt.matmul_fp8(shape, s, qa.get(), inv_a.f32(), qb.get(), inv_b.f32(), d.get());
      SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<std::uint8_t> ha = download_u8(qa, a.size()), hb = download_u8(qb, b.size());
      const std::vector<float> sa = test::download(DType::fp32, inv_a.get(), ga),
                               sb = test::download(DType::fp32, inv_b.get(), gb),
                               got = test::download(DType::bf16, d.get(), static_cast<std::size_t>(m * n));
      std::vector<Fp8GemmSample> samples;
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j)
          samples.push_back({i, j, got[static_cast<std::size_t>(i * n + j)],
                             fp8_gemm_expected(ha.data() + i * k, sa[s == Fp8Scaling::row ? i : 0], hb.data() + j * k,
                                               sb[s == Fp8Scaling::row ? j : 0], k)});
      const Fp8GemmCheck c = fp8_gemm_check(samples);
      EXPECT_TRUE(c.passed()) << "worst at (" << c.worst.i << "," << c.worst.j << "): got " << c.worst.got
                              << " expected " << c.worst.expected.value << " +- " << c.worst.expected.tolerance;
    }
}

TEST(CublasLtFp8Gpu, RefusesLayoutsOtherThanTN) {
  SEQPAR_SKIP_WITHOUT_GPU();
  CublasLtGemm lt;
  DeviceBuffer buf(1 << 16);
  GemmShape s;
  s.op = "dx";
  s.m = s.n = s.k = 32;
  const auto* p = buf.get();
  EXPECT_THROW(lt.matmul_fp8(s, Fp8Scaling::tensor, p, buf.f32(), p, buf.f32(), buf.get()), Error);  // B not [n,k]
  s.trans_b = true;
  s.trans_a = true;
  EXPECT_THROW(lt.matmul_fp8(s, Fp8Scaling::tensor, p, buf.f32(), p, buf.f32(), buf.get()), Error);  // A stored [k,m]
  s.trans_a = false;
  EXPECT_THROW(lt.matmul_fp8(s, Fp8Scaling::tensor, p, nullptr, p, buf.f32(), buf.get()), Error);
}

}  // namespace
}  // namespace seqpar::kernels

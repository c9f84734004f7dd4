// The FP8 cast and amax kernels (kernels/fp8_cast.cuh) against core/fp8.hpp's CPU reference, bit for
// bit: amax, scales and FP8 codes of fresh random bf16/fp16/fp32 tensors at awkward sizes, both
// formats, per tensor and per row, with magnitudes spread over many binades (subnormal and saturated
// results both occur); the fused cast with a given (delayed) scale and its amax; NaN and infinity;
// the errors. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gpu_util.hpp"
#include "seqpar/core/fp8.hpp"
#include "seqpar/kernels/fp8_cast.cuh"

namespace seqpar::kernels {
namespace {

using test::DeviceBuffer;

std::vector<float> download_f32(const DeviceBuffer& d, std::size_t n) { return test::download(DType::fp32, d.get(), n); }

std::vector<std::uint8_t> download_u8(const DeviceBuffer& d, std::size_t n) {
  std::vector<std::uint8_t> out(n);
  SEQPAR_CUDA_CHECK(cudaMemcpy(out.data(), d.get(), n, cudaMemcpyDeviceToHost));
  return out;
}

void expect_same_float(float gpu, float cpu, const char* what, std::size_t i) {
  if (std::isnan(cpu)) {
    EXPECT_TRUE(std::isnan(gpu)) << what << "[" << i << "]";
    return;
  }
  std::uint32_t a, b;
  std::memcpy(&a, &gpu, 4);
  std::memcpy(&b, &cpu, 4);
  EXPECT_EQ(a, b) << what << "[" << i << "]: gpu " << gpu << " cpu " << cpu;
}

// Random values 2^[-40, 40] apart within a tensor (so per-tensor scaling puts some in FP8's subnormals
// and some rows far from the amax), with a zero row when there are at least two.
std::vector<float> spread_values(std::int64_t rows, std::int64_t cols, std::mt19937& rng) {
  std::uniform_real_distribution<float> mant(-1.f, 1.f);
  std::uniform_int_distribution<int> binade(-20, 20);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const int row_binade = binade(rng);
    for (std::int64_t c = 0; c < cols; ++c)
      x[static_cast<std::size_t>(r * cols + c)] = r == 1 ? 0.f : std::ldexp(mant(rng), row_binade + binade(rng) / 2);
  }
  return x;
}

TEST(Fp8CastGpu, CurrentScalingMatchesCpuReferenceBitForBit) {
  SEQPAR_SKIP_WITHOUT_GPU();
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (DType in : {DType::bf16, DType::fp16, DType::fp32})
    for (Fp8Format f : {Fp8Format::e4m3, Fp8Format::e5m2})
      for (Fp8Scaling s : {Fp8Scaling::tensor, Fp8Scaling::row})
        for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {3, 7}, {17, 1000}, {70000, 3},
                                  {5, 300001}})
          for (int margin : {0, 2}) {
            SCOPED_TRACE(::testing::Message() << to_string(in) << " " << to_string(f) << " " << to_string(s) << " "
                                              << rows << "x" << cols << " margin " << margin);
            std::vector<float> x = spread_values(rows, cols, rng);
            if (in == DType::fp16)  // fp16 overflows past 65504: keep its values in range
              for (float& v : x) v = std::fmod(v, 60000.f);
            const std::size_t n = x.size();
            const auto groups = static_cast<std::size_t>(fp8_groups(rows, s));
            DeviceBuffer dx(n * dtype_size(in)), dq(n), amax(groups * 4), scale(groups * 4), scale_inv(groups * 4);
            test::upload(in, x, dx);  // x now holds the rounded values the kernel reads
            dq.poison();
            amax.poison();
            fp8_quantize_current(in, dx.get(), rows, cols, s, f, margin, static_cast<std::uint8_t*>(dq.get()),
                                 amax.f32(), scale.f32(), scale_inv.f32());
            SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
            const Fp8Tensor ref = fp8_quantize(x.data(), rows, cols, f, s, margin);
            const std::vector<float> got_amax = download_f32(amax, groups), got_inv = download_f32(scale_inv, groups);
            const std::size_t len = n / groups;
            for (std::size_t g = 0; g < groups; ++g) {
              expect_same_float(got_amax[g], seqpar::fp8_amax(x.data() + g * len, len), "amax", g);
              expect_same_float(got_inv[g], ref.scale_inv[g], "scale_inv", g);
            }
            const std::vector<std::uint8_t> q = download_u8(dq, n);
            int bad = 0;
            for (std::size_t i = 0; i < n && bad < 5; ++i)
              if (q[i] != ref.data[i]) {
                ++bad;
                ADD_FAILURE() << "q[" << i << "] x=" << x[i] << ": gpu 0x" << std::hex << int{q[i]} << " cpu 0x"
                              << int{ref.data[i]};
              }
          }
}

// Delayed scaling: the cast takes a scale it is given (here one that saturates part of the tensor)
// and records the input's amax in the same pass; NaN and infinities go where float_to_fp8 puts them.
TEST(Fp8CastGpu, GivenScaleCastRecordsAmaxAndHandlesSpecials) {
  SEQPAR_SKIP_WITHOUT_GPU();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {0.5f, -3.f, 1e6f, -inf, 2.f, 0.f, -0.f, 1e-9f, 7.f, inf, -1e6f, 0.25f};
  const std::int64_t rows = 3, cols = 4;
  for (Fp8Format f : {Fp8Format::e4m3, Fp8Format::e5m2}) {
    for (bool with_nan : {false, true}) {
      std::vector<float> xv = x;
      if (with_nan) xv[5] = nan;
      DeviceBuffer dx(xv.size() * 4), dq(xv.size()), scale(rows * 4), amax(rows * 4);
      test::upload(DType::fp32, xv, dx);
      const std::vector<float> scales = {1.f, 100.f, 0.001f};
      std::vector<float> sv = scales;
      test::upload(DType::fp32, sv, scale);
      fp8_cast(DType::fp32, dx.get(), rows, cols, Fp8Scaling::row, scale.f32(), f, static_cast<std::uint8_t*>(dq.get()),
               amax.f32());
      SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<std::uint8_t> q = download_u8(dq, xv.size());
      const std::vector<float> got_amax = download_f32(amax, rows);
      for (std::int64_t r = 0; r < rows; ++r) {
        expect_same_float(got_amax[r], seqpar::fp8_amax(xv.data() + r * cols, cols), "amax", r);
        for (std::int64_t c = 0; c < cols; ++c) {
          const std::size_t i = static_cast<std::size_t>(r * cols + c);
          EXPECT_EQ(q[i], float_to_fp8(xv[i] * scales[r], f)) << to_string(f) << " x=" << xv[i];
        }
      }
    }
  }
}

TEST(Fp8CastGpu, BadArgumentsAreErrors) {
  SEQPAR_SKIP_WITHOUT_GPU();
  DeviceBuffer buf(64);
  EXPECT_THROW(fp8_amax(DType::bf16, buf.get(), -1, 4, Fp8Scaling::tensor, buf.f32()), Error);
  EXPECT_THROW(fp8_amax(DType::bf16, buf.get(), std::int64_t{1} << 40, std::int64_t{1} << 40, Fp8Scaling::tensor,
                        buf.f32()),
               Error);
  EXPECT_THROW(fp8_cast(DType::bf16, buf.get(), 2, 2, Fp8Scaling::tensor, nullptr, Fp8Format::e4m3,
                        static_cast<std::uint8_t*>(buf.get())),
               Error);
  EXPECT_THROW(fp8_scales_from_amax(buf.f32(), 1, Fp8Format::e4m3, -1, buf.f32(), nullptr), Error);
  EXPECT_THROW(fp8_amax(DType::i32, buf.get(), 2, 2, Fp8Scaling::tensor, buf.f32()), Error);
}

}  // namespace
}  // namespace seqpar::kernels

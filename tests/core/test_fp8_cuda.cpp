// core/fp8.hpp against an independent implementation: CUDA's own host-side FP8 conversions
// (<cuda_fp8.h>: __nv_cvt_fp8_to_halfraw for decode, __nv_cvt_float_to_fp8 with __NV_SATFINITE, the
// conversion __nv_fp8_e4m3 / __nv_fp8_e5m2 construct with, for encode). Only the toolkit's headers are
// used, compiled by the host compiler, so this runs in CI without a GPU; it is built when the
// configure step finds cuda_fp8.h (tests/core/CMakeLists.txt).
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "seqpar/core/fp8.hpp"

namespace seqpar {
namespace {

__nv_fp8_interpretation_t cuda_kind(Fp8Format f) { return f == Fp8Format::e4m3 ? __NV_E4M3 : __NV_E5M2; }

float cuda_decode(std::uint8_t code, Fp8Format f) {
  if (f == Fp8Format::e4m3) {
    __nv_fp8_e4m3 v;
    v.__x = code;
    return static_cast<float>(v);
  }
  __nv_fp8_e5m2 v;
  v.__x = code;
  return static_cast<float>(v);
}

std::uint8_t cuda_encode(float x, Fp8Format f) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, cuda_kind(f)); }

constexpr Fp8Format kFormats[] = {Fp8Format::e4m3, Fp8Format::e5m2};

TEST(Fp8Cuda, DecodeAll256CodesMatchesCuda) {
  for (Fp8Format f : kFormats)
    for (int c = 0; c < 256; ++c) {
      const auto code = static_cast<std::uint8_t>(c);
      const float ours = fp8_to_float(code, f), cuda = cuda_decode(code, f);
      if (std::isnan(cuda)) {
        EXPECT_TRUE(std::isnan(ours)) << to_string(f) << " code " << c;
      } else {
        std::uint32_t a, b;
        std::memcpy(&a, &ours, 4);
        std::memcpy(&b, &cuda, 4);
        EXPECT_EQ(a, b) << to_string(f) << " code " << c << ": " << ours << " vs " << cuda;
      }
    }
}

// Every code's value, the midpoints between neighbours, and the floats a few ulps either side of both.
TEST(Fp8Cuda, EncodeAroundEveryValueAndMidpointMatchesCuda) {
  for (Fp8Format f : kFormats)
    for (int c = 0; c < 256; ++c) {
      const float v = fp8_to_float(static_cast<std::uint8_t>(c), f);
      const float next = fp8_to_float(static_cast<std::uint8_t>(c + 1 < 256 ? c + 1 : c), f);
      for (float centre : {v, (v + next) / 2, v * 1.03125f, -v}) {
        if (!std::isfinite(centre)) continue;
        float lo = centre, hi = centre;
        for (int k = 0; k < 4; ++k) {
          EXPECT_EQ(float_to_fp8(lo, f), cuda_encode(lo, f)) << to_string(f) << " x=" << lo;
          EXPECT_EQ(float_to_fp8(hi, f), cuda_encode(hi, f)) << to_string(f) << " x=" << hi;
          lo = std::nextafter(lo, -std::numeric_limits<float>::infinity());
          hi = std::nextafter(hi, std::numeric_limits<float>::infinity());
        }
      }
    }
}

// Specials and fresh random bit patterns over the whole float range (every exponent, both signs,
// NaNs and infinities among them).
TEST(Fp8Cuda, EncodeRandomFloatBitPatternsMatchesCuda) {
  const float inf = std::numeric_limits<float>::infinity();
  for (Fp8Format f : kFormats)
    for (float x : {0.f, -0.f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                    -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max(),
                    std::numeric_limits<float>::denorm_min()})
      EXPECT_EQ(float_to_fp8(x, f), cuda_encode(x, f)) << to_string(f) << " x=" << x;
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::uint32_t> bits;
  std::uniform_real_distribution<float> near(-600.f, 600.f);  // dense around E4M3's range
  int mismatches = 0;
  for (int i = 0; i < 1 << 20 && mismatches < 10; ++i) {
    const std::uint32_t u = bits(rng);
    float x;
    std::memcpy(&x, &u, 4);
    const float y = i % 2 ? x : near(rng) * std::ldexp(1.f, static_cast<int>(u % 40) - 30);
    for (Fp8Format f : kFormats)
      if (float_to_fp8(y, f) != cuda_encode(y, f)) {
        ++mismatches;
        ADD_FAILURE() << to_string(f) << " x=" << y << ": ours 0x" << std::hex << int{float_to_fp8(y, f)} << " cuda 0x"
                      << int{cuda_encode(y, f)};
      }
  }
}

}  // namespace
}  // namespace seqpar

// The FP8 formats (core/fp8.hpp): decode of all 256 codes of each format against values written from
// the OCP FP8 spec (v1.0, table 1 and section 5) and its formula; encode of every value, every midpoint
// between neighbours (ties to even) and its float neighbours, saturation, subnormals, NaN; the scale
// rule of Transformer Engine; quantize/dequantize round trips on fresh random data at awkward sizes.
// tests/core/test_fp8_cuda.cpp checks the same codes against CUDA's own host conversions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "seqpar/core/fp8.hpp"
#include "test_helpers.hpp"

namespace seqpar {
namespace {

constexpr Fp8Format kFormats[] = {Fp8Format::e4m3, Fp8Format::e5m2};

// The spec's formula, in double: (-1)^s 2^(E - bias) (1 + m / 2^M), subnormals 2^(1 - bias) (m / 2^M).
double spec_value(std::uint8_t code, int ebits, int mbits, int bias) {
  const int s = code >> 7, e = (code >> mbits) & ((1 << ebits) - 1), m = code & ((1 << mbits) - 1);
  const double frac = m / std::pow(2.0, mbits);
  const double mag = e == 0 ? std::pow(2.0, 1 - bias) * frac : std::pow(2.0, e - bias) * (1.0 + frac);
  return s ? -mag : mag;
}

bool spec_is_nan(std::uint8_t code, Fp8Format f) {
  const std::uint8_t mag = code & 0x7F;
  return f == Fp8Format::e4m3 ? mag == 0x7F : mag > 0x7C;
}

TEST(Fp8, DecodeEveryCodeMatchesTheSpecFormula) {
  for (Fp8Format f : kFormats) {
    const int ebits = f == Fp8Format::e4m3 ? 4 : 5, mbits = 7 - ebits, bias = f == Fp8Format::e4m3 ? 7 : 15;
    for (int c = 0; c < 256; ++c) {
      const auto code = static_cast<std::uint8_t>(c);
      const float v = fp8_to_float(code, f);
      SCOPED_TRACE(::testing::Message() << to_string(f) << " code 0x" << std::hex << c);
      if (spec_is_nan(code, f)) {
        EXPECT_TRUE(std::isnan(v));
      } else if (f == Fp8Format::e5m2 && (code & 0x7F) == 0x7C) {
        EXPECT_TRUE(std::isinf(v));
        EXPECT_EQ(std::signbit(v), c >= 0x80);
      } else {
        EXPECT_EQ(static_cast<double>(v), spec_value(code, ebits, mbits, bias));
        EXPECT_EQ(std::signbit(v), c >= 0x80);
      }
    }
  }
}

// Values the spec states (OCP 8-bit FP spec v1.0, table 1).
TEST(Fp8, DecodeSpecStatedValues) {
  EXPECT_EQ(fp8_to_float(0x7E, Fp8Format::e4m3), 448.f);
  EXPECT_EQ(fp8_to_float(0xFE, Fp8Format::e4m3), -448.f);
  EXPECT_EQ(fp8_to_float(0x08, Fp8Format::e4m3), std::ldexp(1.f, -6));
  EXPECT_EQ(fp8_to_float(0x07, Fp8Format::e4m3), 0.875f * std::ldexp(1.f, -6));
  EXPECT_EQ(fp8_to_float(0x01, Fp8Format::e4m3), std::ldexp(1.f, -9));
  EXPECT_EQ(fp8_to_float(0x38, Fp8Format::e4m3), 1.f);
  EXPECT_TRUE(std::isnan(fp8_to_float(0x7F, Fp8Format::e4m3)));
  EXPECT_TRUE(std::isnan(fp8_to_float(0xFF, Fp8Format::e4m3)));
  EXPECT_EQ(fp8_to_float(0x7B, Fp8Format::e5m2), 57344.f);
  EXPECT_EQ(fp8_to_float(0x04, Fp8Format::e5m2), std::ldexp(1.f, -14));
  EXPECT_EQ(fp8_to_float(0x03, Fp8Format::e5m2), 0.75f * std::ldexp(1.f, -14));
  EXPECT_EQ(fp8_to_float(0x01, Fp8Format::e5m2), std::ldexp(1.f, -16));
  EXPECT_EQ(fp8_to_float(0x3C, Fp8Format::e5m2), 1.f);
  EXPECT_EQ(fp8_to_float(0x7C, Fp8Format::e5m2), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp8_to_float(0xFC, Fp8Format::e5m2), -std::numeric_limits<float>::infinity());
  for (int c : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF})
    EXPECT_TRUE(std::isnan(fp8_to_float(static_cast<std::uint8_t>(c), Fp8Format::e5m2)));
  EXPECT_EQ(fp8_max(Fp8Format::e4m3), fp8_to_float(0x7E, Fp8Format::e4m3));
  EXPECT_EQ(fp8_max(Fp8Format::e5m2), fp8_to_float(0x7B, Fp8Format::e5m2));
  EXPECT_EQ(fp8_min_subnormal(Fp8Format::e4m3), std::ldexp(1.f, -9));
  EXPECT_EQ(fp8_min_normal(Fp8Format::e5m2), std::ldexp(1.f, -14));
}

// Every finite code's value, -0 included, encodes back to the code.
TEST(Fp8, EncodeEveryRepresentableValue) {
  for (Fp8Format f : kFormats)
    for (int c = 0; c < 256; ++c) {
      const auto code = static_cast<std::uint8_t>(c);
      const float v = fp8_to_float(code, f);
      if (!std::isfinite(v)) continue;
      EXPECT_EQ(float_to_fp8(v, f), code) << to_string(f) << " value " << v;
    }
}

// The positive finite codes in increasing order are 0x00 .. max_code; each midpoint between neighbours
// c and c+1 is exact in float and rounds to the even code (even mantissa, the lower bit 0); one float
// ulp below or above it rounds down or up. Mirrored for negative values.
TEST(Fp8, MidpointsRoundToEvenAndNeighboursRoundToNearest) {
  for (Fp8Format f : kFormats) {
    const std::uint8_t max_code = float_to_fp8(fp8_max(f), f);
    for (int c = 0; c < max_code; ++c) {
      const float lo = fp8_to_float(static_cast<std::uint8_t>(c), f);
      const float hi = fp8_to_float(static_cast<std::uint8_t>(c + 1), f);
      const float mid = (lo + hi) / 2;
      ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(lo) + hi) / 2) << "midpoint not exact";
      const auto even = static_cast<std::uint8_t>(c % 2 == 0 ? c : c + 1);
      SCOPED_TRACE(::testing::Message() << to_string(f) << " between " << lo << " and " << hi);
      EXPECT_EQ(float_to_fp8(mid, f), even);
      EXPECT_EQ(float_to_fp8(std::nextafter(mid, 0.f), f), c);
      EXPECT_EQ(float_to_fp8(std::nextafter(mid, hi), f), c + 1);
      EXPECT_EQ(float_to_fp8(-mid, f), even | 0x80);
      EXPECT_EQ(float_to_fp8(-std::nextafter(mid, hi), f), (c + 1) | 0x80);
    }
  }
}

TEST(Fp8, SaturatesFiniteAndInfiniteValuesToMax) {
  const float inf = std::numeric_limits<float>::infinity();
  for (Fp8Format f : kFormats) {
    const std::uint8_t max_code = f == Fp8Format::e4m3 ? 0x7E : 0x7B;
    const float max = fp8_max(f);
    for (float x : {std::nextafter(max, inf), max * 1.0625f, max * 1.2f, max * 4, 1e30f,
                    std::numeric_limits<float>::max(), inf}) {
      EXPECT_EQ(float_to_fp8(x, f), max_code) << to_string(f) << " " << x;
      EXPECT_EQ(float_to_fp8(-x, f), max_code | 0x80) << to_string(f) << " " << -x;
    }
  }
}

TEST(Fp8, SubnormalsAndZeros) {
  for (Fp8Format f : kFormats) {
    const float tiny = fp8_min_subnormal(f);
    EXPECT_EQ(float_to_fp8(tiny, f), 0x01);
    EXPECT_EQ(float_to_fp8(tiny / 2, f), 0x00);  // a tie between 0 and the smallest: to even, 0
    EXPECT_EQ(float_to_fp8(-tiny / 2, f), 0x80);
    EXPECT_EQ(float_to_fp8(std::nextafter(tiny / 2, 1.f), f), 0x01);
    EXPECT_EQ(float_to_fp8(tiny * 1.5f, f), 0x02);  // tie between 1 and 2 quanta: even is 2
    EXPECT_EQ(float_to_fp8(std::numeric_limits<float>::denorm_min(), f), 0x00);
    EXPECT_EQ(float_to_fp8(0.f, f), 0x00);
    EXPECT_EQ(float_to_fp8(-0.f, f), 0x80);
    // The largest subnormal rounds up into the smallest normal past its midpoint.
    const float min_normal = fp8_min_normal(f);
    const float largest_sub = min_normal - tiny;
    EXPECT_EQ(fp8_to_float(float_to_fp8(std::nextafter(largest_sub + tiny / 2, 1.f), f), f), min_normal);
  }
}

TEST(Fp8, NaNBecomesTheCanonicalNaNWhateverItsSign) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Fp8Format f : kFormats) {
    EXPECT_EQ(float_to_fp8(nan, f), kFp8NaN);
    EXPECT_EQ(float_to_fp8(-nan, f), kFp8NaN);
    EXPECT_EQ(float_to_fp8(std::numeric_limits<float>::signaling_NaN(), f), kFp8NaN);
  }
}

TEST(Fp8, ScaleFromAmaxFollowsTransformerEngine) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(fp8_scale_from_amax(2.f, Fp8Format::e4m3), 224.f);
  EXPECT_EQ(fp8_scale_from_amax(2.f, Fp8Format::e5m2), 28672.f);
  EXPECT_EQ(fp8_scale_from_amax(2.f, Fp8Format::e4m3, 1), 112.f);  // margin 1 halves it
  EXPECT_EQ(fp8_scale_from_amax(3.f, Fp8Format::e4m3), 448.f / 3.f);
  EXPECT_EQ(fp8_scale_from_amax(0.f, Fp8Format::e4m3), 1.f);
  EXPECT_EQ(fp8_scale_from_amax(inf, Fp8Format::e4m3), 1.f);
  EXPECT_EQ(fp8_scale_from_amax(nan, Fp8Format::e5m2), 1.f);
  EXPECT_EQ(fp8_scale_from_amax(1e-40f, Fp8Format::e4m3), std::numeric_limits<float>::max());
  EXPECT_EQ(fp8_scale_from_amax(1e-40f, Fp8Format::e4m3, 2), std::numeric_limits<float>::max() / 4);
  EXPECT_EQ(fp8_scale_from_amax(std::numeric_limits<float>::max(), Fp8Format::e4m3, 3),
            448.f / std::numeric_limits<float>::max() / 8);
}

TEST(Fp8, AmaxPropagatesNaN) {
  const std::vector<float> x = {1.f, -3.f, 2.f};
  EXPECT_EQ(fp8_amax(x.data(), x.size()), 3.f);
  const std::vector<float> y = {1.f, std::numeric_limits<float>::quiet_NaN(), 5.f};
  EXPECT_TRUE(std::isnan(fp8_amax(y.data(), y.size())));
  EXPECT_EQ(fp8_amax(nullptr, 0), 0.f);
}

// Fresh random data: magnitudes spread over many binades (so subnormal results occur), rows of very
// different size (so row scales differ from the tensor's), and a zero row. Each element is within
// half a quantum of its scaled value: 2^-(M+1) relative for normal results, half the smallest
// subnormal (divided by the scale) absolute below; the amax element lands exactly on +-max.
TEST(Fp8, QuantizeRoundTripOnRandomDataAtAwkwardSizes) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mant(-1.f, 1.f);
  std::uniform_int_distribution<int> binade(-30, 30);
  for (Fp8Format f : kFormats)
    for (Fp8Scaling s : {Fp8Scaling::tensor, Fp8Scaling::row})
      for (int rows : {1, 3, 17, 33})
        for (int cols : {1, 7, 129}) {
          SCOPED_TRACE(::testing::Message() << to_string(f) << " " << to_string(s) << " " << rows << "x" << cols);
          std::vector<float> x(static_cast<std::size_t>(rows) * cols);
          for (int r = 0; r < rows; ++r) {
            const int row_binade = binade(rng) / 2;
            for (int c = 0; c < cols; ++c)
              x[static_cast<std::size_t>(r) * cols + c] =
                  r == 1 ? 0.f : std::ldexp(mant(rng), row_binade + binade(rng) / 3);
          }
          const Fp8Tensor t = fp8_quantize(x.data(), rows, cols, f, s);
          ASSERT_EQ(t.scale_inv.size(), s == Fp8Scaling::tensor ? 1u : static_cast<std::size_t>(rows));
          const std::vector<float> back = fp8_dequantize(t);
          const float half_ulp = std::ldexp(1.f, -(fp8_mantissa_bits(f) + 1));
          for (int r = 0; r < rows; ++r) {
            const float* row = x.data() + static_cast<std::size_t>(r) * cols;
            const std::size_t g = s == Fp8Scaling::tensor ? 0 : static_cast<std::size_t>(r);
            const float scale = 1.f / t.scale_inv[g];
            for (int c = 0; c < cols; ++c) {
              const std::size_t i = static_cast<std::size_t>(r) * cols + c;
              const double scaled = static_cast<double>(row[c]) * scale;
              const double bound = std::fabs(scaled) >= fp8_min_normal(f)
                                       ? half_ulp * std::fabs(scaled)
                                       : fp8_min_subnormal(f) / 2.0;
              // float's own rounding of x * scale and of the dequantize adds a few 2^-24 relative.
              ASSERT_LE(std::fabs(back[i] - static_cast<double>(row[c])),
                        (bound + 4e-7 * std::fabs(scaled)) / scale)
                  << "x=" << row[c] << " back=" << back[i];
            }
            if (s == Fp8Scaling::row || rows == 1) {
              const float amax = fp8_amax(row, static_cast<std::size_t>(cols));
              if (amax == 0.f) {
                EXPECT_EQ(t.scale_inv[g], 1.f);
                continue;
              }
              for (int c = 0; c < cols; ++c) {
                if (std::fabs(row[c]) == amax) {
                  EXPECT_EQ(std::fabs(fp8_to_float(t.data[static_cast<std::size_t>(r) * cols + c], f)), fp8_max(f));
                }
              }
            }
          }
        }
}

TEST(Fp8, ParsingAndBadSizes) {
  EXPECT_EQ(parse_fp8_format("e4m3"), Fp8Format::e4m3);
  EXPECT_EQ(parse_fp8_format("fp8_e5m2"), Fp8Format::e5m2);
  EXPECT_EQ(parse_fp8_scaling("row"), Fp8Scaling::row);
  EXPECT_NE(core_test::error_of([] { parse_fp8_format("e3m4", "--fp8-format"); }).find("--fp8-format: 'e3m4'"),
            std::string::npos);
  EXPECT_NE(core_test::error_of([] { parse_fp8_scaling("block", "--scaling"); }).find("--scaling: 'block'"),
            std::string::npos);
  EXPECT_NE(core_test::error_of([] { fp8_quantize(nullptr, -1, 4, Fp8Format::e4m3, Fp8Scaling::tensor); })
                .find("must be >= 0"),
            std::string::npos);
  EXPECT_NE(core_test::error_of([] {
              fp8_quantize(nullptr, std::int64_t{1} << 40, std::int64_t{1} << 40, Fp8Format::e4m3, Fp8Scaling::row);
            }).find("does not fit"),
            std::string::npos);
}

}  // namespace
}  // namespace seqpar

// FP8 encode/decode and scale handling (fp8.hpp). The arithmetic is written once for both formats from
// their exponent and mantissa widths; the formats differ only in where NaN and infinity live.
#include "seqpar/core/fp8.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "seqpar/core/checked.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar {
namespace {

struct Fp8Layout {
  int exponent_bits, mantissa_bits, bias;
  std::uint8_t max_code;  // the largest finite magnitude's code
};

// OCP 8-bit floating point spec v1.0, table 1: E4M3 bias 7, max S.1111.110 = 448; E5M2 bias 15,
// max S.11110.11 = 57344.
constexpr Fp8Layout fp8_layout_of(Fp8Format f) {
  return f == Fp8Format::e4m3 ? Fp8Layout{4, 3, 7, 0x7E} : Fp8Layout{5, 2, 15, 0x7B};
}

// Smallest normal exponent, 1 - bias: below it the exponent field is 0 and the quantum stays 2^(emin - M).
constexpr int fp8_min_exponent(const Fp8Layout& l) { return 1 - l.bias; }

}  // namespace

const char* to_string(Fp8Format f) { return f == Fp8Format::e4m3 ? "e4m3" : "e5m2"; }

Fp8Format parse_fp8_format(std::string_view text, std::string_view field) {
  if (text == "e4m3" || text == "fp8_e4m3") return Fp8Format::e4m3;
  if (text == "e5m2" || text == "fp8_e5m2") return Fp8Format::e5m2;
  throw Error(fmt::format("{}: '{}' is not an FP8 format (e4m3, e5m2)", field, text));
}

const char* to_string(Fp8Scaling s) { return s == Fp8Scaling::tensor ? "tensor" : "row"; }

Fp8Scaling parse_fp8_scaling(std::string_view text, std::string_view field) {
  if (text == "tensor") return Fp8Scaling::tensor;
  if (text == "row") return Fp8Scaling::row;
  throw Error(fmt::format("{}: '{}' is not an FP8 scaling (tensor, row)", field, text));
}

float fp8_min_normal(Fp8Format f) { return std::ldexp(1.f, fp8_min_exponent(fp8_layout_of(f))); }
float fp8_min_subnormal(Fp8Format f) {
  const Fp8Layout l = fp8_layout_of(f);
  return std::ldexp(1.f, fp8_min_exponent(l) - l.mantissa_bits);
}
int fp8_mantissa_bits(Fp8Format f) { return fp8_layout_of(f).mantissa_bits; }

float fp8_to_float(std::uint8_t code, Fp8Format f) {
  const Fp8Layout l = fp8_layout_of(f);
  const bool negative = (code & 0x80u) != 0;
  const int exponent = (code & 0x7Fu) >> l.mantissa_bits;
  const int mantissa = code & ((1 << l.mantissa_bits) - 1);
  const int all_ones = (1 << l.exponent_bits) - 1;
  if (f == Fp8Format::e4m3 && exponent == all_ones && mantissa == (1 << l.mantissa_bits) - 1)
    return std::numeric_limits<float>::quiet_NaN();
  if (f == Fp8Format::e5m2 && exponent == all_ones) {
    if (mantissa != 0) return std::numeric_limits<float>::quiet_NaN();
    return negative ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  }
  const int significand = exponent == 0 ? mantissa : (1 << l.mantissa_bits) | mantissa;
  const int e = (exponent == 0 ? fp8_min_exponent(l) : exponent - l.bias) - l.mantissa_bits;
  const float v = std::ldexp(static_cast<float>(significand), e);
  return negative ? -v : v;
}

std::uint8_t float_to_fp8(float x, Fp8Format f) {
  if (std::isnan(x)) return kFp8NaN;
  const Fp8Layout l = fp8_layout_of(f);
  const std::uint8_t sign = std::signbit(x) ? 0x80u : 0x00u;
  const float a = std::fabs(x);
  if (!(a < fp8_max(f))) return static_cast<std::uint8_t>(sign | l.max_code);  // saturate, inf included
  if (a == 0.f) return sign;
  // The quantum (spacing of FP8 values) at a's binade, never finer than the subnormals'. a / quantum is
  // exact (a power of two scaling of a float), so one nearbyint (ties to even in the default rounding
  // mode) is the only rounding; a round-up into the next binade lands on its first value, still exact.
  const int e = std::max(std::ilogb(a), fp8_min_exponent(l));
  const int quantum_exp = e - l.mantissa_bits;
  const auto steps = static_cast<int>(std::nearbyint(std::ldexp(a, -quantum_exp)));  // < 2^(M+2)
  if (steps == 0) return sign;
  // steps counts quanta of 2^quantum_exp; renormalise to (exponent field, mantissa field).
  int exponent_field = e + l.bias;  // the binade's biased exponent, bumped below on a round-up
  int significand = steps;
  if (significand >= (2 << l.mantissa_bits)) {  // rounded up into the next binade
    significand >>= 1;
    ++exponent_field;
  }
  if (significand < (1 << l.mantissa_bits)) exponent_field = 0;  // a subnormal (only when e == emin)
  const int mantissa = significand & ((1 << l.mantissa_bits) - 1);
  return static_cast<std::uint8_t>(sign | (exponent_field << l.mantissa_bits) | mantissa);
}

float fp8_amax(const float* x, std::size_t n) {
  float m = 0.f;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return x[i];
    m = std::max(m, std::fabs(x[i]));
  }
  return m;
}

Fp8Tensor fp8_quantize(const float* x, std::int64_t rows, std::int64_t cols, Fp8Format f, Fp8Scaling s, int margin) {
  if (rows < 0 || cols < 0) throw Error(fmt::format("fp8_quantize: rows {} and cols {} must be >= 0", rows, cols));
  const auto n = static_cast<std::size_t>(checked_mul(rows, cols, "fp8_quantize rows x cols"));
  Fp8Tensor t;
  t.format = f;
  t.scaling = s;
  t.rows = rows;
  t.cols = cols;
  t.data.resize(n);
  const std::int64_t groups = s == Fp8Scaling::tensor ? 1 : rows;
  const auto per_group = static_cast<std::size_t>(s == Fp8Scaling::tensor ? n : static_cast<std::size_t>(cols));
  t.scale_inv.resize(static_cast<std::size_t>(groups));
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::size_t begin = static_cast<std::size_t>(g) * per_group;
    const float scale = fp8_scale_from_amax(fp8_amax(x + begin, per_group), f, margin);
    t.scale_inv[static_cast<std::size_t>(g)] = 1.f / scale;
    for (std::size_t i = begin; i < begin + per_group; ++i) t.data[i] = float_to_fp8(x[i] * scale, f);
  }
  return t;
}

std::vector<float> fp8_dequantize(const Fp8Tensor& t) {
  std::vector<float> out(t.data.size());
  const auto cols = static_cast<std::size_t>(t.cols);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::size_t group = t.scaling == Fp8Scaling::tensor ? 0 : i / cols;
    out[i] = fp8_to_float(t.data[i], t.format) * t.scale_inv[group];
  }
  return out;
}

}  // namespace seqpar

// FP8 on the host: the two formats of the OCP 8-bit floating point spec (v1.0, 2023) as NVIDIA's
// hardware and libraries implement them, their encode and decode, and the scale handling that
// frameworks run around an FP8 GEMM (amax, scale from amax, per-tensor and per-row quantize and
// dequantize). It is the CPU reference every FP8 kernel and benchmark is checked against, as
// bf16.hpp is for bf16. Kept C++17-clean: the CUDA kernels' public headers include it.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

// The few FP8 rules GPU kernels must apply bit for bit as the host does are inline here and callable
// from device code too (one definition, not a second copy in a kernel).
#if defined(__CUDACC__)
#define SEQPAR_FP8_HOST_DEVICE __host__ __device__
#else
#define SEQPAR_FP8_HOST_DEVICE
#endif

namespace seqpar {

// E4M3 is OCP's "fn" variant (torch.float8_e4m3fn, __nv_fp8_e4m3): bias 7, no infinities, one NaN
// pattern per sign (S.1111.111), largest finite 448. E5M2 is IEEE-like (torch.float8_e5m2,
// __nv_fp8_e5m2): bias 15, +-inf at S.11111.00, NaNs at S.11111.{01,10,11}, largest finite 57344.
enum class Fp8Format { e4m3, e5m2 };

// The one spelling written everywhere (JSON "fp8_format", option values): "e4m3", "e5m2".
const char* to_string(Fp8Format f);
// Accepts "e4m3" and "e5m2" (also "fp8_e4m3", "fp8_e5m2"); anything else throws seqpar::Error naming `field`.
Fp8Format parse_fp8_format(std::string_view text, std::string_view field = "fp8 format");

// Largest finite value: 448 = 1.75 x 2^8 (E4M3), 57344 = 1.75 x 2^15 (E5M2) (OCP FP8 spec v1.0,
// table 1; tests/core/test_fp8.cpp checks each against its decoded code).
inline constexpr SEQPAR_FP8_HOST_DEVICE float fp8_max(Fp8Format f) { return f == Fp8Format::e4m3 ? 448.f : 57344.f; }
// Smallest positive normal (2^-6, 2^-14) and subnormal (2^-9, 2^-16) values.
float fp8_min_normal(Fp8Format f);
float fp8_min_subnormal(Fp8Format f);
// Mantissa bits (3, 2): a normal value is exact to 2^-(bits+1) relative after round-to-nearest.
int fp8_mantissa_bits(Fp8Format f);

// The code of a quiet NaN the encoder writes: 0x7F in both formats (what CUDA's
// __nv_cvt_float_to_fp8 writes for any NaN input, whatever its sign).
inline constexpr std::uint8_t kFp8NaN = 0x7F;

// Exact decode of any of the 256 codes (every FP8 value is a float).
float fp8_to_float(std::uint8_t code, Fp8Format f);

// Round to nearest, ties to even, saturating: the convention of cuBLASLt's FP8 outputs, Transformer
// Engine's casts and CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) (PTX cvt.rn.satfinite).
// A finite value beyond +-max becomes +-max, and so does +-inf (in E5M2 too: saturation never writes
// an infinity); NaN becomes kFp8NaN. -0 stays -0 (0x80).
std::uint8_t float_to_fp8(float x, Fp8Format f);

// The scale that maps amax onto the format's range: q = fp8(x * scale), x ~ fp8_to_float(q) / scale.
// Transformer Engine's rule (transformer_engine/common/recipe/recipe_common.cuh,
// compute_scale_from_amax, release 2.x): scale = max_fp8 / amax, 1 when amax is 0, infinite or NaN,
// FLT_MAX when the quotient overflows; then divided by 2^margin as DelayedScaling's `margin` does
// (transformer_engine/common/recipe/__init__.py: "new_scaling_factor = (FP8_MAX / amax) / (2 ^
// margin)"; margin 0 is the default of both its delayed and current scaling recipes). The comparisons
// are written so NaN falls to 1 without isnan (device code calls this too); halving is exact here, as
// max / amax >= 448 / FLT_MAX sits far above float's subnormals for any margin below ~90.
inline SEQPAR_FP8_HOST_DEVICE float fp8_scale_from_amax(float amax, Fp8Format f, int margin = 0) {
  constexpr float kFloatMax = 3.40282346638528859812e+38f;  // FLT_MAX
  if (!(amax > 0.f && amax <= kFloatMax)) return 1.f;        // 0, inf or NaN (amax is never negative)
  float scale = fp8_max(f) / amax;
  if (!(scale <= kFloatMax)) scale = kFloatMax;              // the quotient overflowed to inf
  for (int i = 0; i < margin; ++i) scale *= 0.5f;
  return scale;
}

// max |x| over n values; NaN when any value is NaN (a NaN must not be hidden by the scale).
float fp8_amax(const float* x, std::size_t n);

// How many scales a quantized [rows, cols] tensor carries: one for the tensor (Transformer Engine's
// per-tensor recipes, cuBLASLt's SCALAR_32F mode) or one per row (row-wise / "outer vector" scaling:
// torchao's rowwise Float8, cuBLASLt's OUTER_VEC_32F mode, which scales row i of op(A) and column j
// of op(B)).
enum class Fp8Scaling { tensor, row };
const char* to_string(Fp8Scaling s);  // "tensor", "row"
Fp8Scaling parse_fp8_scaling(std::string_view text, std::string_view field = "fp8 scaling");

// A row-major [rows, cols] FP8 tensor with its dequantize multipliers: scale_inv has one value
// (tensor scaling) or `rows` values (row scaling); x[r][c] ~ fp8_to_float(data[r*cols+c]) * scale_inv[r or 0].
// scale_inv is what cuBLASLt's A/B_SCALE_POINTER take (the factor back to the real range).
struct Fp8Tensor {
  Fp8Format format = Fp8Format::e4m3;
  Fp8Scaling scaling = Fp8Scaling::tensor;
  std::int64_t rows = 0, cols = 0;
  std::vector<std::uint8_t> data;
  std::vector<float> scale_inv;
};

// Current scaling: amax of the tensor (or of each row), its scale (fp8_scale_from_amax), and the cast
// of x * scale. Throws seqpar::Error for negative sizes or a rows x cols that overflows.
Fp8Tensor fp8_quantize(const float* x, std::int64_t rows, std::int64_t cols, Fp8Format f, Fp8Scaling s,
                       int margin = 0);
// x[i] ~ decoded value times its row's (or the tensor's) scale_inv.
std::vector<float> fp8_dequantize(const Fp8Tensor& t);

}  // namespace seqpar

// The FP8 casts a framework runs before each FP8 GEMM: the amax reduction of a bf16/fp16/fp32 tensor
// (current scaling's first pass), the scales from it, and the cast of x * scale to E4M3/E5M2 (round to
// nearest even, saturating) that also records the input's amax (what delayed scaling keeps in its
// history), per tensor or per row. Their CPU reference is core/fp8.hpp (fp8_amax, fp8_scale_from_amax,
// float_to_fp8, fp8_quantize); tests/kernels/test_fp8_cast_gpu.cpp holds them to it bit for bit.
// Host-callable from plain C++; CUDA builds only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "seqpar/core/fp8.hpp"
#include "seqpar/kernels/dtype.hpp"

namespace seqpar::kernels {

// How many amax/scale values a [rows, cols] tensor has under `s`: 1, or rows.
std::int64_t fp8_groups(std::int64_t rows, Fp8Scaling s);

// amax[g] = max |x| over group g (the tensor, or row g) of row-major x[rows, cols] of type `in`; NaN
// when the group holds a NaN. amax has fp8_groups(rows, s) floats; it is overwritten.
void fp8_amax(DType in, const void* x, std::int64_t rows, std::int64_t cols, Fp8Scaling s, float* amax,
              cudaStream_t stream = nullptr);

// scale[g] = fp8_scale_from_amax(amax[g], f, margin) and scale_inv[g] = 1 / scale[g] (the dequantize
// factor cuBLASLt's A/B_SCALE_POINTER take), for `groups` values; scale_inv may be null.
void fp8_scales_from_amax(const float* amax, std::int64_t groups, Fp8Format f, int margin, float* scale,
                          float* scale_inv, cudaStream_t stream = nullptr);

// q[i] = float_to_fp8(x[i] * scale[g], f) with g the element's group, and, when amax is not null,
// amax[g] = max |x| over the group as fp8_amax writes it (fused: one read of x).
void fp8_cast(DType in, const void* x, std::int64_t rows, std::int64_t cols, Fp8Scaling s, const float* scale,
              Fp8Format f, std::uint8_t* q, float* amax = nullptr, cudaStream_t stream = nullptr);

// Current scaling in one call: fp8_amax, fp8_scales_from_amax, fp8_cast. scale and scale_inv have
// fp8_groups(rows, s) floats.
void fp8_quantize_current(DType in, const void* x, std::int64_t rows, std::int64_t cols, Fp8Scaling s, Fp8Format f,
                          int margin, std::uint8_t* q, float* amax, float* scale, float* scale_inv,
                          cudaStream_t stream = nullptr);

}  // namespace seqpar::kernels

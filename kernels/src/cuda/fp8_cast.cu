// FP8 cast and amax kernels (fp8_cast.cuh). Built without --use_fast_math (kernels/CMakeLists.txt): the
// scale division and the x * scale product must round as the host reference does, subnormals kept.
#include <cuda_fp8.h>
#include <fmt/format.h>

#include <cstdint>

#include "device_util.cuh"
#include "seqpar/core/cuda_check.hpp"
#include "seqpar/kernels/fp8_cast.cuh"

namespace seqpar::kernels {
namespace detail {
namespace {

constexpr int kThreads = 256;

// |x| as its float bits: for non-negative floats the unsigned order is the float order, and a NaN's
// bits exceed infinity's, so an unsigned max propagates NaN as fp8_amax does.
__device__ __forceinline__ unsigned abs_bits(float v) { return __float_as_uint(v) & 0x7FFFFFFFu; }

__device__ __forceinline__ unsigned block_max(unsigned v) {
  __shared__ unsigned warp_max[kThreads / 32];
  for (int o = 16; o > 0; o /= 2) v = max(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < kThreads / 32 ? warp_max[threadIdx.x] : 0u;
    for (int o = 16; o > 0; o /= 2) v = max(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  }
  __syncthreads();  // warp_max is reused by the next group's reduction
  return v;
}

// Group g (blockIdx.y strided) is len contiguous elements at g * len; blocks along x stride over it.
// Each block reduces its amax and merges it with one atomicMax on the bits (amax zeroed beforehand).
template <typename T, bool kCast>
__global__ void __launch_bounds__(kThreads)
    cast_amax_kernel(const T* x, std::int64_t groups, std::int64_t len, const float* scale,
                     __nv_fp8_interpretation_t kind, std::uint8_t* q, unsigned* amax_bits) {
  for (std::int64_t g = blockIdx.y; g < groups; g += gridDim.y) {
    const T* xg = x + g * len;
    const float s = kCast ? scale[g] : 1.f;
    unsigned m = 0;
    for (std::int64_t i = std::int64_t{blockIdx.x} * kThreads + threadIdx.x; i < len;
         i += std::int64_t{gridDim.x} * kThreads) {
      const float v = to_float(xg[i]);
      m = max(m, abs_bits(v));
      if constexpr (kCast) q[g * len + i] = __nv_cvt_float_to_fp8(v * s, __NV_SATFINITE, kind);
    }
    if (amax_bits) {  // uniform across the block: the reduction's barriers are safe
      m = block_max(m);
      if (threadIdx.x == 0) atomicMax(amax_bits + g, m);
    }
  }
}

__global__ void scales_kernel(const float* amax, std::int64_t groups, Fp8Format f, int margin, float* scale,
                              float* scale_inv) {
  for (std::int64_t g = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; g < groups;
       g += std::int64_t{gridDim.x} * blockDim.x) {
    const float s = fp8_scale_from_amax(amax[g], f, margin);
    scale[g] = s;
    if (scale_inv) scale_inv[g] = __fdiv_rn(1.f, s);
  }
}

void check_sizes(std::int64_t rows, std::int64_t cols, const char* fn) {
  if (rows < 0 || cols < 0) throw Error(fmt::format("{}: rows {} and cols {} must be >= 0", fn, rows, cols));
  // core's checked_mul is C++20 and CUDA sources build as C++17: the same rule written out.
  if (cols > 0 && rows > INT64_MAX / cols)
    throw Error(fmt::format("{}: rows x cols = {} x {} does not fit in 64 bits", fn, rows, cols));
}

// The launch over (groups, len) shared by the amax-only and the casting launchers.
template <bool kCast>
void launch(DType in, const void* x, std::int64_t rows, std::int64_t cols, Fp8Scaling s, const float* scale,
            Fp8Format f, std::uint8_t* q, float* amax, cudaStream_t stream) {
  const std::int64_t groups = fp8_groups(rows, s);
  const std::int64_t len = s == Fp8Scaling::tensor ? rows * cols : cols;
  if (amax) SEQPAR_CUDA_CHECK(cudaMemsetAsync(amax, 0, static_cast<std::size_t>(groups) * sizeof(float), stream));
  if (rows * cols == 0) return;
  const dim3 grid(blocks_for(len, kThreads, 1024), static_cast<unsigned>(groups < 65535 ? groups : 65535));
  const auto kind = f == Fp8Format::e4m3 ? __NV_E4M3 : __NV_E5M2;
  dispatch(in, [&](auto tag) {
    using T = decltype(tag);
    cast_amax_kernel<T, kCast><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(x), groups, len, scale, kind, q,
                                                              reinterpret_cast<unsigned*>(amax));
  });
  SEQPAR_CUDA_CHECK_LAUNCH();
}

}  // namespace
}  // namespace detail

std::int64_t fp8_groups(std::int64_t rows, Fp8Scaling s) { return s == Fp8Scaling::tensor ? 1 : rows; }

void fp8_amax(DType in, const void* x, std::int64_t rows, std::int64_t cols, Fp8Scaling s, float* amax,
              cudaStream_t stream) {
  detail::check_sizes(rows, cols, "fp8_amax");
  detail::check_aligned(amax, sizeof(float), "amax", "fp8_amax");
  if (rows * cols > 0) detail::check_aligned(x, dtype_size(in), "x", "fp8_amax");
  detail::launch<false>(in, x, rows, cols, s, nullptr, Fp8Format::e4m3, nullptr, amax, stream);
}

void fp8_scales_from_amax(const float* amax, std::int64_t groups, Fp8Format f, int margin, float* scale,
                          float* scale_inv, cudaStream_t stream) {
  if (groups < 0) throw Error(fmt::format("fp8_scales_from_amax: groups {} must be >= 0", groups));
  if (margin < 0) throw Error(fmt::format("fp8_scales_from_amax: margin {} must be >= 0", margin));
  if (groups == 0) return;
  detail::check_aligned(amax, sizeof(float), "amax", "fp8_scales_from_amax");
  detail::check_aligned(scale, sizeof(float), "scale", "fp8_scales_from_amax");
  detail::scales_kernel<<<detail::blocks_for(groups, 256), 256, 0, stream>>>(amax, groups, f, margin, scale,
                                                                             scale_inv);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

void fp8_cast(DType in, const void* x, std::int64_t rows, std::int64_t cols, Fp8Scaling s, const float* scale,
              Fp8Format f, std::uint8_t* q, float* amax, cudaStream_t stream) {
  detail::check_sizes(rows, cols, "fp8_cast");
  if (rows * cols > 0) {
    detail::check_aligned(x, dtype_size(in), "x", "fp8_cast");
    detail::check_aligned(q, 1, "q", "fp8_cast");
    detail::check_aligned(scale, sizeof(float), "scale", "fp8_cast");
  }
  if (amax) detail::check_aligned(amax, sizeof(float), "amax", "fp8_cast");
  detail::launch<true>(in, x, rows, cols, s, scale, f, q, amax, stream);
}

void fp8_quantize_current(DType in, const void* x, std::int64_t rows, std::int64_t cols, Fp8Scaling s, Fp8Format f,
                          int margin, std::uint8_t* q, float* amax, float* scale, float* scale_inv,
                          cudaStream_t stream) {
  fp8_amax(in, x, rows, cols, s, amax, stream);
  fp8_scales_from_amax(amax, fp8_groups(rows, s), f, margin, scale, scale_inv, stream);
  fp8_cast(in, x, rows, cols, s, scale, f, q, nullptr, stream);
}

}  // namespace seqpar::kernels

// Internal helpers of the CUDA kernels: element conversions to and from fp32, DType dispatch, and the
// host-side argument checks shared by the launchers.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstdint>

#include "seqpar/core/error.hpp"
#include "seqpar/kernels/dtype.hpp"

namespace seqpar::kernels::detail {

template <typename T>
__device__ __forceinline__ float to_float(T x);
template <>
__device__ __forceinline__ float to_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ float to_float<__half>(__half x) { return __half2float(x); }
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// Calls f(T{}) with T the C++ type of `t`.
template <typename F>
void dispatch(DType t, F&& f) {
  switch (t) {
    case DType::bf16: f(__nv_bfloat16{}); return;
    case DType::fp16: f(__half{}); return;
    case DType::fp32: f(float{}); return;
    default: break;  // core's other element types (fp64, integers) have no kernel
  }
  throw Error(fmt::format("kernels: element type {} is not supported (bf16, fp16, fp32 are)", to_string(t)));
}

inline void check_aligned(const void* p, std::size_t bytes, const char* name, const char* fn) {
  if (p == nullptr) throw Error(fmt::format("{}: {} is a null pointer", fn, name));
  if (reinterpret_cast<std::uintptr_t>(p) % bytes != 0)
    throw Error(fmt::format("{}: {} must be {}-byte aligned", fn, name, bytes));
}

inline unsigned blocks_for(std::int64_t work, int threads, std::int64_t cap = 65536 * 16) {
  const std::int64_t b = (work + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > cap ? cap : b));
}

}  // namespace seqpar::kernels::detail

// Counter-based uniform fill: value i depends only on (seed, i), so a fill is reproducible.
#include "device_util.cuh"
#include "seqpar/core/cuda_check.hpp"
#include "seqpar/kernels/fill.cuh"

namespace seqpar::kernels {
namespace detail {
namespace {

// splitmix64 finaliser: a well-mixed 64-bit hash of the counter.
__device__ __forceinline__ std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <typename T>
__global__ void fill_uniform_kernel(T* p, std::int64_t n, std::uint64_t seed, float lo, float hi) {
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const float u = static_cast<float>(mix(seed ^ mix(static_cast<std::uint64_t>(i))) >> 40) * 0x1p-24f;
    p[i] = from_float<T>(lo + (hi - lo) * u);
  }
}

template <typename T>
__global__ void fill_value_kernel(T* p, std::int64_t n, float value) {
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    p[i] = from_float<T>(value);
}

}  // namespace
}  // namespace detail

void fill_uniform(DType t, void* p, std::size_t count, std::uint64_t seed, float lo, float hi, cudaStream_t stream) {
  if (count == 0) return;
  detail::check_aligned(p, dtype_size(t), "p", "fill_uniform");
  const auto n = static_cast<std::int64_t>(count);
  detail::dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    detail::fill_uniform_kernel<T><<<detail::blocks_for(n, 256), 256, 0, stream>>>(static_cast<T*>(p), n, seed, lo, hi);
  });
  SEQPAR_CUDA_CHECK_LAUNCH();
}

void fill_value(DType t, void* p, std::size_t count, float value, cudaStream_t stream) {
  if (count == 0) return;
  detail::check_aligned(p, dtype_size(t), "p", "fill_value");
  const auto n = static_cast<std::int64_t>(count);
  detail::dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    detail::fill_value_kernel<T><<<detail::blocks_for(n, 256), 256, 0, stream>>>(static_cast<T*>(p), n, value);
  });
  SEQPAR_CUDA_CHECK_LAUNCH();
}

}  // namespace seqpar::kernels

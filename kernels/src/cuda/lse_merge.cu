// LSE merge on the GPU: one warp per (batch, query row, head); lanes across head_dim.
#include <cmath>

#include "device_util.cuh"
#include "seqpar/core/cuda_check.hpp"
#include "seqpar/kernels/lse_merge.cuh"

namespace seqpar::kernels {
namespace detail {
namespace {

template <typename TO, typename TP>
__global__ void lse_merge_kernel(int batch, int seq_q, int heads, int d, TO* __restrict__ o, float* __restrict__ lse,
                                 const TP* __restrict__ o_part, const float* __restrict__ lse_part) {
  const std::int64_t rows = std::int64_t{batch} * seq_q * heads;
  const std::int64_t warps = std::int64_t{gridDim.x} * blockDim.x / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  for (std::int64_t row = (std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const std::int64_t h = row % heads, i = (row / heads) % seq_q, b = row / (std::int64_t{heads} * seq_q);
    const std::int64_t li = (b * heads + h) * seq_q + i;
    const float a = lse[li], c = lse_part[li];
    if (c == -INFINITY) continue;  // the part saw no key: nothing to add (uniform across the warp)
    const float m = fmaxf(a, c);
    const float merged = m + logf(expf(a - m) + expf(c - m));
    const float wa = expf(a - merged), wc = expf(c - merged);  // wa = 0 when a = -inf
    for (int e = lane; e < d; e += 32) {
      const std::int64_t at = row * d + e;
      o[at] = from_float<TO>(wa * to_float(o[at]) + wc * to_float(o_part[at]));
    }
    __syncwarp();
    if (lane == 0) lse[li] = merged;
  }
}

}  // namespace
}  // namespace detail

void lse_merge(int batch, int seq_q, int heads, int head_dim, DType o_type, void* o, float* lse, DType part_type,
               const void* o_part, const float* lse_part, cudaStream_t stream) {
  constexpr const char* fn = "lse_merge";
  if (batch <= 0 || seq_q <= 0 || heads <= 0 || head_dim <= 0)
    throw Error(fmt::format("{}: batch = {}, seq_q = {}, heads = {}, head_dim = {}: all must be positive", fn, batch,
                            seq_q, heads, head_dim));
  detail::check_aligned(o, dtype_size(o_type), "o", fn);
  detail::check_aligned(o_part, dtype_size(part_type), "o_part", fn);
  detail::check_aligned(lse, 4, "lse", fn);
  detail::check_aligned(lse_part, 4, "lse_part", fn);
  const std::int64_t rows = std::int64_t{batch} * seq_q * heads;
  detail::dispatch(o_type, [&](auto o_tag) {
    detail::dispatch(part_type, [&](auto p_tag) {
      using TO = decltype(o_tag);
      using TP = decltype(p_tag);
      detail::lse_merge_kernel<TO, TP><<<detail::blocks_for(rows * 32, 256), 256, 0, stream>>>(
          batch, seq_q, heads, head_dim, static_cast<TO*>(o), lse, static_cast<const TP*>(o_part), lse_part);
    });
  });
  SEQPAR_CUDA_CHECK_LAUNCH();
}

}  // namespace seqpar::kernels

// Flash attention backward, FlashAttention-2 style, in three launches:
//  1. D = rowsum(dO * O) per query row (one warp per row), and dQ's fp32 accumulator cleared;
//  2. one thread block per (64-key tile, KV head, batch entry): for every query head of the KV head's
//     GQA group and every 32-row query tile that can see the keys, recompute P = exp(scale*QK^T - lse),
//     then dV += P^T dO, dP = dO V^T, dS = P * (dP - D), dK += dS^T Q, dQ += dS K. dK and dV stay in
//     shared memory (fp32) for the whole loop, so they need no atomics; dQ rows are shared between key
//     tiles, so they are added with fp32 atomicAdd into the workspace;
//  3. dQ converted from the fp32 accumulator to the input dtype.
// Expected limits for the tuning issue: atomics on dQ, dK/dV accumulators round-tripping through shared
// memory, no pipelining; one 147-165 KB block per SM at head_dim 128.
#include <cmath>

#include "flash_common.cuh"
#include "seqpar/core/cuda_check.hpp"
#include "seqpar/kernels/flash_attention.cuh"

namespace seqpar::kernels {
namespace detail {
namespace {

constexpr int kBr = 32, kBc = 64;

template <int D>
struct BwdSmem {
  static constexpr int kLdT = ld_half<D>(), kLdS = ld_float<kBc>(), kLdP = ld_half<kBc>(), kLdO = ld_float<D>();
  static constexpr std::size_t k = 0;
  static constexpr std::size_t v = k + round_up(sizeof(std::uint16_t) * kBc * kLdT);
  static constexpr std::size_t q = v + round_up(sizeof(std::uint16_t) * kBc * kLdT);
  static constexpr std::size_t dout = q + round_up(sizeof(std::uint16_t) * kBr * kLdT);
  // S and dP, then (after both are consumed) the dQ tile: one region, sized for the larger use.
  static constexpr std::size_t s = dout + round_up(sizeof(std::uint16_t) * kBr * kLdT);
  static constexpr std::size_t dp = s + round_up(sizeof(float) * kBr * kLdS);
  static constexpr std::size_t region_end = dp + round_up(sizeof(float) * kBr * kLdS);
  static constexpr std::size_t dq_end = s + round_up(sizeof(float) * kBr * kLdO);
  static constexpr std::size_t p = region_end > dq_end ? region_end : dq_end;
  static constexpr std::size_t ds = p + round_up(sizeof(std::uint16_t) * kBr * kLdP);
  static constexpr std::size_t dk = ds + round_up(sizeof(std::uint16_t) * kBr * kLdP);
  static constexpr std::size_t dv = dk + round_up(sizeof(float) * kBc * kLdO);
  static constexpr std::size_t lse = dv + round_up(sizeof(float) * kBc * kLdO);
  static constexpr std::size_t delta = lse + round_up(sizeof(float) * kBr);
  static constexpr std::size_t bytes = delta + round_up(sizeof(float) * kBr);
};

struct Workspace {
  float* dq_acc;
  float* delta;
};

Workspace split_workspace(const AttentionShape& s, void* workspace) {
  const std::size_t dq_bytes = round_up(sizeof(float) * s.batch * s.seq_q * s.heads * s.head_dim, 256);
  auto* base = static_cast<unsigned char*>(workspace);
  return {reinterpret_cast<float*>(base), reinterpret_cast<float*>(base + dq_bytes)};
}

// delta[b, h, i] = sum_e dout[b, i, h, e] * o[b, i, h, e]; one warp per (b, i, h) row.
template <typename T>
__global__ void backward_preprocess_kernel(AttentionShape s, const T* __restrict__ o, const T* __restrict__ dout,
                                           float* __restrict__ delta) {
  const std::int64_t rows = std::int64_t{s.batch} * s.seq_q * s.heads;
  const std::int64_t warps = std::int64_t{gridDim.x} * blockDim.x / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  for (std::int64_t row = (std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    float sum = 0.f;
    for (int e = lane; e < s.head_dim; e += 32)
      sum += to_float(o[row * s.head_dim + e]) * to_float(dout[row * s.head_dim + e]);
    for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (lane == 0) {
      const std::int64_t h = row % s.heads, i = (row / s.heads) % s.seq_q, b = row / (std::int64_t{s.heads} * s.seq_q);
      delta[(b * s.heads + h) * s.seq_q + i] = sum;
    }
  }
}

template <typename T>
__global__ void convert_kernel(const float* __restrict__ src, T* __restrict__ dst, std::int64_t n) {
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    dst[i] = from_float<T>(src[i]);
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    flash_backward_kernel(AttentionShape s, float scale, const T* __restrict__ q, const T* __restrict__ k,
                          const T* __restrict__ v, const float* __restrict__ lse, const T* __restrict__ dout,
                          const float* __restrict__ delta, float* __restrict__ dq_acc, T* __restrict__ dk,
                          T* __restrict__ dv) {
  using namespace nvcuda;
  using L = BwdSmem<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sK = reinterpret_cast<T*>(smem + L::k);
  T* sV = reinterpret_cast<T*>(smem + L::v);
  T* sQ = reinterpret_cast<T*>(smem + L::q);
  T* sdO = reinterpret_cast<T*>(smem + L::dout);
  float* sS = reinterpret_cast<float*>(smem + L::s);
  float* sdP = reinterpret_cast<float*>(smem + L::dp);
  float* sdQ = reinterpret_cast<float*>(smem + L::s);  // reuses S and dP once they are consumed
  T* sP = reinterpret_cast<T*>(smem + L::p);
  T* sdS = reinterpret_cast<T*>(smem + L::ds);
  float* sdK = reinterpret_cast<float*>(smem + L::dk);
  float* sdV = reinterpret_cast<float*>(smem + L::dv);
  float* sLse = reinterpret_cast<float*>(smem + L::lse);
  float* sDelta = reinterpret_cast<float*>(smem + L::delta);

  const int j0 = static_cast<int>(blockIdx.x) * kBc;
  const int kvh = static_cast<int>(blockIdx.y), b = static_cast<int>(blockIdx.z);
  const int group = s.heads / s.kv_heads;
  const int k_valid = min(kBc, s.seq_k - j0);
  const std::int64_t q_stride = std::int64_t{s.heads} * D, kv_stride = std::int64_t{s.kv_heads} * D;
  const std::int64_t kv_row0 = (std::int64_t{b} * s.seq_k + j0) * kv_stride + std::int64_t{kvh} * D;

  load_rows<T, kBc, D, L::kLdT>(sK, k + kv_row0, kv_stride, k_valid);
  load_rows<T, kBc, D, L::kLdT>(sV, v + kv_row0, kv_stride, k_valid);
  for (int idx = threadIdx.x; idx < kBc * L::kLdO; idx += kThreads) {
    sdK[idx] = 0.f;
    sdV[idx] = 0.f;
  }

  // Causal: query rows before the first one that sees key j0 contribute nothing; start at its tile.
  std::int64_t first_row = 0;
  if (s.causal) first_row = max(std::int64_t{0}, s.k_offset + j0 - s.q_offset);
  const int q_begin = first_row >= s.seq_q ? s.seq_q : static_cast<int>(first_row / kBr) * kBr;

  for (int h = kvh * group; h < (kvh + 1) * group; ++h) {
    for (int q0 = q_begin; q0 < s.seq_q; q0 += kBr) {
      const int q_valid = min(kBr, s.seq_q - q0);
      const std::int64_t q_row0 = (std::int64_t{b} * s.seq_q + q0) * q_stride + std::int64_t{h} * D;
      __syncthreads();  // the previous tile's readers of sQ, sdO, sdQ, sLse, sDelta are done
      load_rows<T, kBr, D, L::kLdT>(sQ, q + q_row0, q_stride, q_valid);
      load_rows<T, kBr, D, L::kLdT>(sdO, dout + q_row0, q_stride, q_valid);
      for (int r = threadIdx.x; r < kBr; r += kThreads) {
        const std::int64_t li = (std::int64_t{b} * s.heads + h) * s.seq_q + q0 + r;
        sLse[r] = r < q_valid ? lse[li] : -INFINITY;
        sDelta[r] = r < q_valid ? delta[li] : 0.f;
      }
      __syncthreads();

      block_gemm<T, wmma::row_major, wmma::col_major, kBr, kBc, D>(sQ, L::kLdT, sK, L::kLdT, sS, L::kLdS, false);
      block_gemm<T, wmma::row_major, wmma::col_major, kBr, kBc, D>(sdO, L::kLdT, sV, L::kLdT, sdP, L::kLdS, false);
      __syncthreads();

      for (int idx = threadIdx.x; idx < kBr * kBc; idx += kThreads) {
        const int r = idx / kBc, c = idx % kBc;
        const float row_lse = sLse[r];  // -inf: the row is padding or saw no key at all
        const bool live = r < q_valid && c < k_valid && row_lse != -INFINITY &&
                          !(s.causal && s.k_offset + j0 + c > s.q_offset + q0 + r);
        const float p = live ? __expf(sS[r * L::kLdS + c] * scale - row_lse) : 0.f;
        const float ds = p * (sdP[r * L::kLdS + c] - sDelta[r]);
        sP[r * L::kLdP + c] = from_float<T>(p);
        sdS[r * L::kLdP + c] = from_float<T>(ds);
      }
      __syncthreads();

      block_gemm<T, wmma::col_major, wmma::row_major, kBc, D, kBr>(sP, L::kLdP, sdO, L::kLdT, sdV, L::kLdO, true);
      block_gemm<T, wmma::col_major, wmma::row_major, kBc, D, kBr>(sdS, L::kLdP, sQ, L::kLdT, sdK, L::kLdO, true);
      block_gemm<T, wmma::row_major, wmma::row_major, kBr, D, kBc>(sdS, L::kLdP, sK, L::kLdT, sdQ, L::kLdO, false);
      __syncthreads();

      for (int idx = threadIdx.x; idx < q_valid * D; idx += kThreads) {
        const int r = idx / D, e = idx % D;
        atomicAdd(dq_acc + q_row0 + std::int64_t{r} * q_stride + e, sdQ[r * L::kLdO + e] * scale);
      }
    }
  }
  __syncthreads();

  for (int idx = threadIdx.x; idx < k_valid * D; idx += kThreads) {
    const int r = idx / D, e = idx % D;
    dk[kv_row0 + r * kv_stride + e] = from_float<T>(sdK[r * L::kLdO + e] * scale);
    dv[kv_row0 + r * kv_stride + e] = from_float<T>(sdV[r * L::kLdO + e]);
  }
}

template <typename T, int D>
void launch_backward(const AttentionShape& s, const void* q, const void* k, const void* v, const void* o,
                     const float* lse, const void* dout, void* dq, void* dk, void* dv, Workspace ws,
                     cudaStream_t stream) {
  const std::int64_t nq = std::int64_t{s.batch} * s.seq_q * s.heads * D;
  SEQPAR_CUDA_CHECK(cudaMemsetAsync(ws.dq_acc, 0, sizeof(float) * static_cast<std::size_t>(nq), stream));
  const std::int64_t rows = std::int64_t{s.batch} * s.seq_q * s.heads;
  backward_preprocess_kernel<T><<<blocks_for(rows * 32, 256), 256, 0, stream>>>(
      s, static_cast<const T*>(o), static_cast<const T*>(dout), ws.delta);
  SEQPAR_CUDA_CHECK_LAUNCH();

  static_assert(BwdSmem<D>::bytes <= kMaxSmemPerBlock, "tile buffers exceed the sm_80 shared-memory limit");
  auto kernel = flash_backward_kernel<T, D>;
  constexpr std::size_t bytes = BwdSmem<D>::bytes;
  SEQPAR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int{bytes}));
  const dim3 grid(static_cast<unsigned>((s.seq_k + kBc - 1) / kBc), static_cast<unsigned>(s.kv_heads),
                  static_cast<unsigned>(s.batch));
  kernel<<<grid, kThreads, bytes, stream>>>(s, static_cast<float>(ref::effective_scale(s)),
                                            static_cast<const T*>(q), static_cast<const T*>(k),
                                            static_cast<const T*>(v), lse, static_cast<const T*>(dout), ws.delta,
                                            ws.dq_acc, static_cast<T*>(dk), static_cast<T*>(dv));
  SEQPAR_CUDA_CHECK_LAUNCH();

  convert_kernel<T><<<blocks_for(nq, 256), 256, 0, stream>>>(ws.dq_acc, static_cast<T*>(dq), nq);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

}  // namespace
}  // namespace detail

std::size_t flash_attention_backward_workspace_bytes(const AttentionShape& s) {
  ref::validate(s);
  return detail::round_up(sizeof(float) * s.batch * s.seq_q * s.heads * s.head_dim, 256) +
         detail::round_up(sizeof(float) * s.batch * s.heads * s.seq_q, 256);
}

void flash_attention_backward(const AttentionShape& s, DType dtype, const void* q, const void* k, const void* v,
                              const void* o, const float* lse, const void* dout, void* dq, void* dk, void* dv,
                              void* workspace, cudaStream_t stream) {
  constexpr const char* fn = "flash_attention_backward";
  detail::check_flash_shape(s, dtype, fn);
  const void* inputs[] = {q, k, v, o, dout, dq, dk, dv};
  const char* names[] = {"q", "k", "v", "o", "dout", "dq", "dk", "dv"};
  for (int i = 0; i < 8; ++i) detail::check_aligned(inputs[i], 16, names[i], fn);
  detail::check_aligned(lse, 4, "lse", fn);
  detail::check_aligned(workspace, 256, "workspace", fn);
  const detail::Workspace ws = detail::split_workspace(s, workspace);
  auto go = [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float>) {
      throw Error("flash_attention_backward: fp32 is not supported");
    } else if (s.head_dim == 64) {
      detail::launch_backward<T, 64>(s, q, k, v, o, lse, dout, dq, dk, dv, ws, stream);
    } else {
      detail::launch_backward<T, 128>(s, q, k, v, o, lse, dout, dq, dk, dv, ws, stream);
    }
  };
  detail::dispatch(dtype, go);
}

}  // namespace seqpar::kernels

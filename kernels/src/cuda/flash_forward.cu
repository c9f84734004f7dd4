// Flash attention forward: one thread block (4 warps) per (query tile of 64 rows, head, batch entry).
// K and V stream through shared memory in tiles of 64 keys; S = Q K^T and O += P V run on tensor cores;
// the online softmax keeps the running max m and sum l per row in fp32. O accumulates in shared memory
// (fp32) so that its rows can be rescaled without knowing WMMA's fragment layout.
// Expected limits for the tuning issue: WMMA fragments reloaded from shared memory for every product,
// no cp.async double buffering and O round-trips through shared memory, so this runs well below
// FlashAttention-2's throughput; the structure (tiles, masks, skips) is what later versions keep.
#include <cmath>

#include "flash_common.cuh"
#include "seqpar/core/cuda_check.hpp"
#include "seqpar/kernels/flash_attention.cuh"

namespace seqpar::kernels {
namespace detail {

void check_flash_shape(const AttentionShape& s, DType dtype, const char* fn) {
  ref::validate(s);
  if (dtype != DType::bf16 && dtype != DType::fp16)
    throw Error(fmt::format("{}: dtype {} is not supported (bf16 or fp16)", fn, to_string(dtype)));
  if (s.head_dim != 64 && s.head_dim != 128)
    throw Error(fmt::format("{}: head_dim = {} is not supported (64 or 128)", fn, s.head_dim));
  if (s.heads > 65535 || s.batch > 65535)
    throw Error(fmt::format("{}: heads = {} and batch = {} must each be at most 65535", fn, s.heads, s.batch));
  // seqpar's kernels mask causally only: a band would be computed as full causal attention, silently.
  if (s.window > 0)
    throw Error(fmt::format("{}: sliding window {} is not implemented in seqpar's attention kernels (causal only); "
                            "the cudnn engine runs it (--attention cudnn)", fn, s.window));
}

namespace {

constexpr int kBr = 64, kBc = 64;

template <int D>
struct FwdSmem {
  static constexpr int kLdT = ld_half<D>(), kLdS = ld_float<kBc>(), kLdP = ld_half<kBc>(), kLdO = ld_float<D>();
  static constexpr std::size_t q = 0;
  static constexpr std::size_t k = q + round_up(sizeof(std::uint16_t) * kBr * kLdT);
  static constexpr std::size_t v = k + round_up(sizeof(std::uint16_t) * kBc * kLdT);
  static constexpr std::size_t s = v + round_up(sizeof(std::uint16_t) * kBc * kLdT);
  static constexpr std::size_t p = s + round_up(sizeof(float) * kBr * kLdS);
  static constexpr std::size_t o = p + round_up(sizeof(std::uint16_t) * kBr * kLdP);
  static constexpr std::size_t m = o + round_up(sizeof(float) * kBr * kLdO);
  static constexpr std::size_t l = m + round_up(sizeof(float) * kBr);
  static constexpr std::size_t bytes = l + round_up(sizeof(float) * kBr);
};

template <typename T, int D>
__global__ void __launch_bounds__(kThreads)
    flash_forward_kernel(AttentionShape s, float scale, const T* __restrict__ q, const T* __restrict__ k,
                         const T* __restrict__ v, T* __restrict__ o, float* __restrict__ lse) {
  using namespace nvcuda;
  using L = FwdSmem<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem + L::q);
  T* sK = reinterpret_cast<T*>(smem + L::k);
  T* sV = reinterpret_cast<T*>(smem + L::v);
  float* sS = reinterpret_cast<float*>(smem + L::s);
  T* sP = reinterpret_cast<T*>(smem + L::p);
  float* sO = reinterpret_cast<float*>(smem + L::o);
  float* sM = reinterpret_cast<float*>(smem + L::m);
  float* sL = reinterpret_cast<float*>(smem + L::l);

  // Heaviest causal tiles (the last ones) first, so they do not finish the grid alone.
  const int q0 = static_cast<int>(gridDim.x - 1 - blockIdx.x) * kBr;
  const int h = static_cast<int>(blockIdx.y), b = static_cast<int>(blockIdx.z);
  const int kvh = h / (s.heads / s.kv_heads);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int q_valid = min(kBr, s.seq_q - q0);
  const std::int64_t q_stride = std::int64_t{s.heads} * D, kv_stride = std::int64_t{s.kv_heads} * D;

  load_rows<T, kBr, D, L::kLdT>(sQ, q + (std::int64_t{b} * s.seq_q + q0) * q_stride + std::int64_t{h} * D,
                                q_stride, q_valid);
  for (int idx = threadIdx.x; idx < kBr * L::kLdO; idx += kThreads) sO[idx] = 0.f;
  for (int r = threadIdx.x; r < kBr; r += kThreads) {
    sM[r] = -INFINITY;
    sL[r] = 0.f;
  }

  // Keys past kv_end are masked for every row of this tile (causal): skip their tiles.
  std::int64_t kv_end = s.seq_k;
  if (s.causal) kv_end = min(kv_end, s.q_offset + q0 + q_valid - 1 - s.k_offset + 1);
  const T* k_base = k + std::int64_t{b} * s.seq_k * kv_stride + std::int64_t{kvh} * D;
  const T* v_base = v + std::int64_t{b} * s.seq_k * kv_stride + std::int64_t{kvh} * D;

  for (int j0 = 0; j0 < kv_end; j0 += kBc) {
    const int k_valid = min(kBc, s.seq_k - j0);
    __syncthreads();  // the previous tile's readers of sK, sV, sP are done
    load_rows<T, kBc, D, L::kLdT>(sK, k_base + j0 * kv_stride, kv_stride, k_valid);
    load_rows<T, kBc, D, L::kLdT>(sV, v_base + j0 * kv_stride, kv_stride, k_valid);
    __syncthreads();

    block_gemm<T, wmma::row_major, wmma::col_major, kBr, kBc, D>(sQ, L::kLdT, sK, L::kLdT, sS, L::kLdS, false);
    __syncthreads();

    // Online softmax, one warp per row at a time, lanes across the 64 keys.
    for (int r = warp; r < kBr; r += kWarps) {
      const std::int64_t qi = s.q_offset + q0 + r;
      float x[kBc / 32];
      float row_max = -INFINITY;
#pragma unroll
      for (int t = 0; t < kBc / 32; ++t) {
        const int c = lane + 32 * t, j = j0 + c;
        const bool masked = j >= s.seq_k || (s.causal && s.k_offset + j > qi);
        x[t] = masked ? -INFINITY : sS[r * L::kLdS + c] * scale;
        row_max = fmaxf(row_max, x[t]);
      }
#pragma unroll
      for (int off = 16; off > 0; off /= 2) row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, off));
      const float m_old = sM[r];
      const float m_new = fmaxf(m_old, row_max);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;  // all masked so far: avoid (-inf) - (-inf)
      float sum = 0.f;
#pragma unroll
      for (int t = 0; t < kBc / 32; ++t) {
        const float p = __expf(x[t] - m_use);
        sum += p;
        sP[r * L::kLdP + lane + 32 * t] = from_float<T>(p);
      }
#pragma unroll
      for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      const float alpha = __expf(m_old - m_use);  // 0 while the row had nothing
      for (int e = lane; e < D; e += 32) sO[r * L::kLdO + e] *= alpha;
      __syncwarp();
      if (lane == 0) {
        sL[r] = sL[r] * alpha + sum;
        sM[r] = m_new;
      }
    }
    __syncthreads();

    block_gemm<T, wmma::row_major, wmma::row_major, kBr, D, kBc>(sP, L::kLdP, sV, L::kLdT, sO, L::kLdO, true);
  }
  __syncthreads();

  for (int r = warp; r < q_valid; r += kWarps) {
    const float l = sL[r];
    const float inv = l > 0.f ? 1.f / l : 0.f;
    T* orow = o + (std::int64_t{b} * s.seq_q + q0 + r) * q_stride + std::int64_t{h} * D;
    for (int e = lane; e < D; e += 32) orow[e] = from_float<T>(sO[r * L::kLdO + e] * inv);
    if (lane == 0)
      lse[(std::int64_t{b} * s.heads + h) * s.seq_q + q0 + r] = l > 0.f ? sM[r] + __logf(l) : -INFINITY;
  }
}

template <typename T, int D>
void launch_forward(const AttentionShape& s, const void* q, const void* k, const void* v, void* o, float* lse,
                    cudaStream_t stream) {
  static_assert(FwdSmem<D>::bytes <= kMaxSmemPerBlock, "tile buffers exceed the sm_80 shared-memory limit");
  auto kernel = flash_forward_kernel<T, D>;
  constexpr std::size_t bytes = FwdSmem<D>::bytes;
  SEQPAR_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int{bytes}));
  const dim3 grid(static_cast<unsigned>((s.seq_q + kBr - 1) / kBr), static_cast<unsigned>(s.heads),
                  static_cast<unsigned>(s.batch));
  kernel<<<grid, kThreads, bytes, stream>>>(s, static_cast<float>(ref::effective_scale(s)),
                                            static_cast<const T*>(q), static_cast<const T*>(k),
                                            static_cast<const T*>(v), static_cast<T*>(o), lse);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

}  // namespace
}  // namespace detail

void flash_attention_forward(const AttentionShape& s, DType dtype, const void* q, const void* k, const void* v,
                             void* o, float* lse, cudaStream_t stream) {
  constexpr const char* fn = "flash_attention_forward";
  detail::check_flash_shape(s, dtype, fn);
  detail::check_aligned(q, 16, "q", fn);
  detail::check_aligned(k, 16, "k", fn);
  detail::check_aligned(v, 16, "v", fn);
  detail::check_aligned(o, 16, "o", fn);
  detail::check_aligned(lse, 4, "lse", fn);
  auto go = [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float>) {
      throw Error("flash_attention_forward: fp32 is not supported");
    } else if (s.head_dim == 64) {
      detail::launch_forward<T, 64>(s, q, k, v, o, lse, stream);
    } else {
      detail::launch_forward<T, 128>(s, q, k, v, o, lse, stream);
    }
  };
  detail::dispatch(dtype, go);
}

}  // namespace seqpar::kernels

// Internal building blocks of the flash attention kernels: tile geometry, global->shared tile loads,
// and a block-wide tensor-core GEMM on shared-memory tiles (WMMA 16x16x16, fp32 accumulate).
#pragma once
#include <mma.h>

#include <cstdint>
#include <type_traits>

#include "device_util.cuh"
#include "seqpar/kernels/attention_ref.hpp"

namespace seqpar::kernels::detail {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
// Opt-in dynamic shared memory per block on sm_80 (A100), the smallest of the targeted architectures.
constexpr std::size_t kMaxSmemPerBlock = 163 * 1024;

// Padded leading dimensions (in elements) keep rows 32-byte aligned for WMMA while shifting banks.
template <int COLS>
constexpr int ld_half() { return COLS + 8; }   // 16-bit tiles
template <int COLS>
constexpr int ld_float() { return COLS + 4; }  // fp32 tiles

constexpr std::size_t round_up(std::size_t bytes, std::size_t to = 128) { return (bytes + to - 1) / to * to; }

// Copies `valid` rows of D elements (row stride `stride` elements in global memory) into smem[ROWS][LD],
// zero-filling the rows past `valid` so that masked products never meet garbage (0 * NaN = NaN).
template <typename T, int ROWS, int D, int LD>
__device__ __forceinline__ void load_rows(T* smem, const T* g, std::int64_t stride, int valid) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kPerRow = D / kVec;
  for (int idx = threadIdx.x; idx < ROWS * kPerRow; idx += kThreads) {
    const int r = idx / kPerRow, c = (idx % kPerRow) * kVec;
    uint4 val = make_uint4(0u, 0u, 0u, 0u);
    if (r < valid) val = *reinterpret_cast<const uint4*>(g + r * stride + c);
    *reinterpret_cast<uint4*>(smem + r * LD + c) = val;
  }
}

// C[M][N] (fp32, shared, ldc) = (accumulate ? C : 0) + A[M][K] * B[K][N] on tensor cores.
// A row_major: a[m*lda + k]; col_major: a[k*lda + m]. B row_major: b[k*ldb + n]; col_major: b[n*ldb + k].
// The 16x16 output tiles are dealt round-robin to the block's warps; the caller synchronises.
template <typename T, typename LayoutA, typename LayoutB, int M, int N, int K>
__device__ __forceinline__ void block_gemm(const T* a, int lda, const T* b, int ldb, float* c, int ldc,
                                           bool accumulate) {
  using namespace nvcuda;
  static_assert(M % 16 == 0 && N % 16 == 0 && K % 16 == 0, "WMMA tiles are 16x16x16");
  constexpr bool kRowA = std::is_same_v<LayoutA, wmma::row_major>;
  constexpr bool kRowB = std::is_same_v<LayoutB, wmma::row_major>;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  for (int t = warp; t < (M / 16) * (N / 16); t += kWarps) {
    const int m0 = (t / (N / 16)) * 16, n0 = (t % (N / 16)) * 16;
    float* cp = c + m0 * ldc + n0;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    if (accumulate)
      wmma::load_matrix_sync(acc, cp, ldc, wmma::mem_row_major);
    else
      wmma::fill_fragment(acc, 0.f);
#pragma unroll
    for (int k0 = 0; k0 < K; k0 += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LayoutA> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LayoutB> fb;
      wmma::load_matrix_sync(fa, kRowA ? a + m0 * lda + k0 : a + k0 * lda + m0, lda);
      wmma::load_matrix_sync(fb, kRowB ? b + k0 * ldb + n0 : b + n0 * ldb + k0, ldb);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(cp, acc, ldc, wmma::mem_row_major);
  }
}

// Host side: the shape checks both directions share.
void check_flash_shape(const ref::AttentionShape& s, DType dtype, const char* fn);

}  // namespace seqpar::kernels::detail

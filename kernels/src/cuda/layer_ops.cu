// The layer ops' kernels: grid-stride loops for the elementwise ops, one block per token where a row
// is reduced (RMSNorm, cross-entropy; RMSNorm's backward gives a block a run of tokens, for dw).
// Each kernel is a template over the activation type T (float or __nv_bfloat16): loads go through
// detail::to_float, stores through detail::from_float (round to nearest-even for bf16), and
// everything between runs in fp32.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "device_util.cuh"
#include "seqpar/core/cuda_check.hpp"
#include "seqpar/kernels/layer_ops.cuh"

namespace seqpar::kernels::layer_ops {
namespace {

using detail::from_float;
using detail::to_float;
using bf16 = __nv_bfloat16;

constexpr int kThreads = 256;

#define SEQPAR_GRID_STRIDE(i, n)                                                              \
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < (n); \
       i += std::int64_t{gridDim.x} * blockDim.x)

// Calls f(T{}) with T the activation type of `t` (float or bf16); the layer ops take no other.
template <typename F>
void dispatch_act(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::fp32: f(float{}); return;
    case DType::bf16: f(bf16{}); return;
    default: break;
  }
  throw Error(fmt::format("layer_ops::{}: activation type {} is not supported (fp32 and bf16 are)", op,
                          to_string(t)));
}

// Checks an element count: negative is an error, and the launch math (n + threads - 1) must not
// overflow. False when there is nothing to do.
bool has_work(std::int64_t n, const char* op) {
  if (n < 0) throw Error(fmt::format("layer_ops::{}: element count {} is negative", op, n));
  if (n > std::numeric_limits<std::int64_t>::max() - kThreads)
    throw Error(fmt::format("layer_ops::{}: element count {} is too large to launch", op, n));
  return n > 0;
}
bool has_rows(int tokens_n, int c, const char* op) {
  if (tokens_n < 0 || c < 0)
    throw Error(fmt::format("layer_ops::{}: tokens = {}, features = {}: neither may be negative", op, tokens_n, c));
  return tokens_n > 0 && c > 0;
}

unsigned grid_for(std::int64_t n) { return detail::blocks_for(n, kThreads); }

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
__device__ float block_sum(float v) {
  __shared__ float part[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // part[] may still be read by a previous call
  if (lane == 0) part[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  float s = 0.f;
  for (int w = 0; w < warps; ++w) s += part[w];
  return s;
}

__device__ float block_max(float v) {
  __shared__ float part[32];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  float m = -INFINITY;
  for (int w = 0; w < warps; ++w) m = fmaxf(m, part[w]);
  return m;
}

template <typename TY, typename TX>
__global__ void k_add(TY* y, const TX* x, std::int64_t n) {
  SEQPAR_GRID_STRIDE(i, n) y[i] = from_float<TY>(to_float(y[i]) + to_float(x[i]));
}
template <typename T>
__global__ void k_scale(T* x, float a, std::int64_t n) {
  SEQPAR_GRID_STRIDE(i, n) x[i] = from_float<T>(to_float(x[i]) * a);
}
template <typename TO, typename TI>
__global__ void k_convert(TO* out, const TI* in, std::int64_t n) {
  SEQPAR_GRID_STRIDE(i, n) out[i] = from_float<TO>(to_float(in[i]));
}

template <typename T>
__global__ void k_embedding_forward(T* out, const int* tokens, const float* table, int t, int c) {
  SEQPAR_GRID_STRIDE(i, std::int64_t{t} * c) {
    const std::int64_t row = i / c, col = i % c;
    out[i] = from_float<T>(table[std::int64_t{tokens[row]} * c + col]);
  }
}

template <typename T>
__global__ void k_embedding_backward(float* dtable, const T* dout, const int* tokens, int t, int c) {
  SEQPAR_GRID_STRIDE(i, std::int64_t{t} * c) {
    const std::int64_t row = i / c, col = i % c;
    atomicAdd(dtable + std::int64_t{tokens[row]} * c + col, to_float(dout[i]));
  }
}

// One block per token.
template <typename T>
__global__ void k_rmsnorm_forward(T* out, float* rstd, const T* inp, const float* w, int c, float eps) {
  const std::int64_t o = std::int64_t{blockIdx.x} * c;
  float ss = 0.f;
  for (int i = threadIdx.x; i < c; i += blockDim.x) {
    const float x = to_float(inp[o + i]);
    ss += x * x;
  }
  ss = block_sum(ss);
  const float r = rsqrtf(ss / static_cast<float>(c) + eps);
  for (int i = threadIdx.x; i < c; i += blockDim.x) out[o + i] = from_float<T>(to_float(inp[o + i]) * r * w[i]);
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
}

// A run of `rows` tokens per block (the last block's run may be shorter). dinp is per token, as in
// the forward. dw sums over every token, so an atomicAdd per element would put tokens_n atomics on
// each of the c addresses (serialised per address: 67M at 16K tokens x 4096); instead, with kStaged,
// the block sums its run's dw into shared memory first, each thread owning the columns
// i = threadIdx.x + j * blockDim.x in every row, so the partial needs no synchronisation, and adds
// it to dw with one atomicAdd per column per block (llm.c's layernorm backward does the same).
// Without kStaged (rows wider than the shared memory a block may have) each element goes straight
// to dw, and the launcher passes rows = 1.
template <typename T, bool kStaged>
__global__ void k_rmsnorm_backward(T* dinp, float* dw, const T* dout, const T* inp, const float* w,
                                   const float* rstd, int tokens_n, int c, int rows) {
  extern __shared__ float dw_part[];  // c floats when kStaged
  if constexpr (kStaged)
    for (int i = threadIdx.x; i < c; i += blockDim.x) dw_part[i] = 0.f;
  const std::int64_t first = std::int64_t{blockIdx.x} * rows;
  const std::int64_t last = min(first + rows, std::int64_t{tokens_n});
  for (std::int64_t row = first; row < last; ++row) {
    const std::int64_t o = row * c;
    const float r = rstd[row];
    float dot = 0.f;
    for (int i = threadIdx.x; i < c; i += blockDim.x) dot += to_float(dout[o + i]) * w[i] * to_float(inp[o + i]);
    dot = block_sum(dot);  // its __syncthreads also keep the rows' reductions apart
    const float k = dot * r * r * r / static_cast<float>(c);
    for (int i = threadIdx.x; i < c; i += blockDim.x) {
      const float dy = to_float(dout[o + i]), x = to_float(inp[o + i]);
      dinp[o + i] = from_float<T>(to_float(dinp[o + i]) + (dy * w[i] * r - x * k));
      if constexpr (kStaged)
        dw_part[i] += dy * x * r;
      else
        atomicAdd(dw + i, dy * x * r);
    }
  }
  if constexpr (kStaged)
    for (int i = threadIdx.x; i < c; i += blockDim.x) atomicAdd(dw + i, dw_part[i]);
}

// Rows per block for the staged RMSNorm backward. dw's atomics fall by the rows per block, but a
// block walks its rows one after another, so the grid must still hold enough blocks to fill the GPU:
// kRmsnormBlocksPerSm blocks of kThreads threads is 2048 threads, the most an SM of sm_80/sm_90
// keeps resident, so up to tokens_n / (8 * SMs) rows per block costs no occupancy (H100, 132 SMs:
// 1 row below 2112 tokens, 15 at 16K). Past kRmsnormMaxRows the atomics are already a small share
// of the traffic (c per block against rows * c * 4 loads and stores), and longer runs would leave
// the grid's tail ragged.
constexpr int kRmsnormBlocksPerSm = 2048 / kThreads;
constexpr int kRmsnormMaxRows = 32;

int rmsnorm_rows_per_block(int tokens_n) {
  int dev = 0, sms = 0;
  SEQPAR_CUDA_CHECK(cudaGetDevice(&dev));
  SEQPAR_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int per_block = tokens_n / (kRmsnormBlocksPerSm * std::max(sms, 1));
  return std::clamp(per_block, 1, kRmsnormMaxRows);
}

// Whether the staged kernel can have `bytes` of dynamic shared memory, opting in past the default
// 48 KiB when needed (from about c = 12288 floats) up to the device's per-block limit less the kernel's static
// shared memory (block_sum's). Wider rows (past ~58K floats on an H100) take the per-element path.
template <typename K>
bool rmsnorm_stage_fits(K kernel, std::size_t bytes) {
  int dev = 0, optin = 0;
  SEQPAR_CUDA_CHECK(cudaGetDevice(&dev));
  SEQPAR_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  cudaFuncAttributes attr{};
  SEQPAR_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  if (bytes + attr.sharedSizeBytes > static_cast<std::size_t>(optin)) return false;
  if (bytes > static_cast<std::size_t>(attr.maxDynamicSharedSizeBytes))
    SEQPAR_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  return true;
}

template <typename T>
__global__ void k_rope(T* x, const int* pos, int t, int heads, int d, float theta, bool inverse) {
  const int half = d / 2;
  SEQPAR_GRID_STRIDE(idx, std::int64_t{t} * heads * half) {
    const int i = static_cast<int>(idx % half);
    const std::int64_t th = idx / half;  // token * heads + head
    const std::int64_t tok = th / heads;
    const double freq = pow(static_cast<double>(theta), -2.0 * i / d);
    const double ang = pos[tok] * freq;
    const float cs = static_cast<float>(cos(ang));
    const float sn = static_cast<float>(inverse ? -sin(ang) : sin(ang));
    T* p = x + th * d + 2 * i;
    const float x0 = to_float(p[0]), x1 = to_float(p[1]);
    p[0] = from_float<T>(x0 * cs - x1 * sn);
    p[1] = from_float<T>(x0 * sn + x1 * cs);
  }
}

template <typename T>
__global__ void k_swiglu_forward(T* out, const T* gate, const T* up, std::int64_t n) {
  SEQPAR_GRID_STRIDE(i, n) {
    const float g = to_float(gate[i]), sg = 1.f / (1.f + expf(-g));
    out[i] = from_float<T>(g * sg * to_float(up[i]));
  }
}

template <typename T>
__global__ void k_swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, std::int64_t n) {
  SEQPAR_GRID_STRIDE(i, n) {
    const float g = to_float(gate[i]), u = to_float(up[i]), dy = to_float(dout[i]);
    const float sg = 1.f / (1.f + expf(-g));
    dgate[i] = from_float<T>(dy * u * sg * (1.f + g * (1.f - sg)));
    dup[i] = from_float<T>(dy * g * sg);
  }
}

// One block per token. The row is read three times as stored (max, sum, gradient) rather than
// staged in fp32: a vocabulary row does not fit in shared memory, and bf16 rows stay bf16.
template <typename T>
__global__ void k_cross_entropy(float* losses, T* logits, const int* labels, int v, float dscale) {
  T* z = logits + std::int64_t{blockIdx.x} * v;
  const int label = labels[blockIdx.x];
  if (label < 0) {  // uniform over the block: no thread reaches a reduction
    for (int i = threadIdx.x; i < v; i += blockDim.x) z[i] = from_float<T>(0.f);
    if (threadIdx.x == 0) losses[blockIdx.x] = 0.f;
    return;
  }
  float mx = -INFINITY;
  for (int i = threadIdx.x; i < v; i += blockDim.x) mx = fmaxf(mx, to_float(z[i]));
  mx = block_max(mx);
  float sum = 0.f;
  for (int i = threadIdx.x; i < v; i += blockDim.x) sum += expf(to_float(z[i]) - mx);
  sum = block_sum(sum);
  const float log_sum = logf(sum) + mx;
  const float z_label = to_float(z[label]);
  __syncthreads();  // every thread has read z[label] before it is overwritten
  if (threadIdx.x == 0) losses[blockIdx.x] = log_sum - z_label;
  for (int i = threadIdx.x; i < v; i += blockDim.x)
    z[i] = from_float<T>((expf(to_float(z[i]) - log_sum) - (i == label ? 1.f : 0.f)) * dscale);
}

// p16 == nullptr: no bf16 copy (the branch is uniform over the launch).
__global__ void k_adamw(float* p, const float* g, float* m, float* v, std::int64_t n, float lr, float b1, float b2,
                        float eps, float wd, float c1, float c2, bf16* p16) {
  SEQPAR_GRID_STRIDE(i, n) {
    const float gi = g[i];
    const float mi = b1 * m[i] + (1.f - b1) * gi;
    const float vi = b2 * v[i] + (1.f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float pi = p[i] - lr * ((mi / c1) / (sqrtf(vi / c2) + eps) + wd * p[i]);
    p[i] = pi;
    if (p16 != nullptr) p16[i] = __float2bfloat16_rn(pi);
  }
}

}  // namespace

void add(DType ty, void* y, DType tx, const void* x, std::int64_t n, cudaStream_t s) {
  if (!has_work(n, "add")) return;
  dispatch_act(ty, "add", [&](auto y_tag) {
    dispatch_act(tx, "add", [&](auto x_tag) {
      using TY = decltype(y_tag);
      using TX = decltype(x_tag);
      k_add<TY, TX><<<grid_for(n), kThreads, 0, s>>>(static_cast<TY*>(y), static_cast<const TX*>(x), n);
    });
  });
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void scale(DType t, void* x, float alpha, std::int64_t n, cudaStream_t s) {
  if (!has_work(n, "scale")) return;
  dispatch_act(t, "scale", [&](auto tag) {
    using T = decltype(tag);
    k_scale<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<T*>(x), alpha, n);
  });
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void convert(DType to, void* out, DType from, const void* in, std::int64_t n, cudaStream_t s) {
  if (!has_work(n, "convert")) return;
  dispatch_act(to, "convert", [&](auto o_tag) {
    dispatch_act(from, "convert", [&](auto i_tag) {
      using TO = decltype(o_tag);
      using TI = decltype(i_tag);
      k_convert<TO, TI><<<grid_for(n), kThreads, 0, s>>>(static_cast<TO*>(out), static_cast<const TI*>(in), n);
    });
  });
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void embedding_forward(DType t, void* out, const int* tokens, const float* table, int tokens_n, int c,
                       cudaStream_t s) {
  if (!has_rows(tokens_n, c, "embedding_forward")) return;
  dispatch_act(t, "embedding_forward", [&](auto tag) {
    using T = decltype(tag);
    k_embedding_forward<T><<<grid_for(std::int64_t{tokens_n} * c), kThreads, 0, s>>>(static_cast<T*>(out), tokens,
                                                                                     table, tokens_n, c);
  });
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void embedding_backward(float* dtable, DType t, const void* dout, const int* tokens, int tokens_n, int c,
                        cudaStream_t s) {
  if (!has_rows(tokens_n, c, "embedding_backward")) return;
  dispatch_act(t, "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    k_embedding_backward<T><<<grid_for(std::int64_t{tokens_n} * c), kThreads, 0, s>>>(
        dtable, static_cast<const T*>(dout), tokens, tokens_n, c);
  });
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void rmsnorm_forward(DType t, void* out, float* rstd, const void* inp, const float* w, int tokens_n, int c,
                     float eps, cudaStream_t s) {
  if (!has_rows(tokens_n, c, "rmsnorm_forward")) return;
  dispatch_act(t, "rmsnorm_forward", [&](auto tag) {
    using T = decltype(tag);
    k_rmsnorm_forward<T><<<static_cast<unsigned>(tokens_n), kThreads, 0, s>>>(static_cast<T*>(out), rstd,
                                                                              static_cast<const T*>(inp), w, c, eps);
  });
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void rmsnorm_backward(DType t, void* dinp, float* dw, const void* dout, const void* inp, const float* w,
                      const float* rstd, int tokens_n, int c, cudaStream_t s) {
  if (!has_rows(tokens_n, c, "rmsnorm_backward")) return;
  dispatch_act(t, "rmsnorm_backward", [&](auto tag) {
    using T = decltype(tag);
    auto* di = static_cast<T*>(dinp);
    const auto *dy = static_cast<const T*>(dout), *x = static_cast<const T*>(inp);
    const std::size_t bytes = static_cast<std::size_t>(c) * sizeof(float);  // c > 0, int: no overflow
    if (rmsnorm_stage_fits(k_rmsnorm_backward<T, true>, bytes)) {
      const int rows = rmsnorm_rows_per_block(tokens_n);
      const auto grid = static_cast<unsigned>(tokens_n / rows + (tokens_n % rows != 0 ? 1 : 0));
      k_rmsnorm_backward<T, true><<<grid, kThreads, bytes, s>>>(di, dw, dy, x, w, rstd, tokens_n, c, rows);
    } else {
      k_rmsnorm_backward<T, false><<<static_cast<unsigned>(tokens_n), kThreads, 0, s>>>(di, dw, dy, x, w, rstd,
                                                                                         tokens_n, c, 1);
    }
  });
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void rope(DType t, void* x, const int* pos, int tokens_n, int heads, int d, float theta, bool inverse,
          cudaStream_t s) {
  if (heads < 0 || d < 0)
    throw Error(fmt::format("layer_ops::rope: heads = {}, head_dim = {}: neither may be negative", heads, d));
  if (!has_rows(tokens_n, d / 2, "rope") || heads == 0) return;
  dispatch_act(t, "rope", [&](auto tag) {
    using T = decltype(tag);
    k_rope<T><<<grid_for(std::int64_t{tokens_n} * heads * (d / 2)), kThreads, 0, s>>>(static_cast<T*>(x), pos,
                                                                                     tokens_n, heads, d, theta,
                                                                                     inverse);
  });
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void swiglu_forward(DType t, void* out, const void* gate, const void* up, std::int64_t n, cudaStream_t s) {
  if (!has_work(n, "swiglu_forward")) return;
  dispatch_act(t, "swiglu_forward", [&](auto tag) {
    using T = decltype(tag);
    k_swiglu_forward<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<T*>(out), static_cast<const T*>(gate),
                                                         static_cast<const T*>(up), n);
  });
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void swiglu_backward(DType t, void* dgate, void* dup, const void* dout, const void* gate, const void* up,
                     std::int64_t n, cudaStream_t s) {
  if (!has_work(n, "swiglu_backward")) return;
  dispatch_act(t, "swiglu_backward", [&](auto tag) {
    using T = decltype(tag);
    k_swiglu_backward<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<T*>(dgate), static_cast<T*>(dup),
                                                          static_cast<const T*>(dout), static_cast<const T*>(gate),
                                                          static_cast<const T*>(up), n);
  });
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void cross_entropy(float* losses, DType t, void* logits, const int* labels, int tokens_n, int v, float dscale,
                   cudaStream_t s) {
  if (!has_rows(tokens_n, v, "cross_entropy")) return;
  dispatch_act(t, "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    k_cross_entropy<T><<<static_cast<unsigned>(tokens_n), kThreads, 0, s>>>(losses, static_cast<T*>(logits), labels,
                                                                            v, dscale);
  });
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void adamw(float* p, const float* g, float* m, float* v, std::int64_t n, float lr, float b1, float b2, float eps,
           float wd, int step, std::uint16_t* p_bf16, cudaStream_t s) {
  if (!has_work(n, "adamw")) return;
  const float c1 = 1.f - std::pow(b1, static_cast<float>(step)), c2 = 1.f - std::pow(b2, static_cast<float>(step));
  k_adamw<<<grid_for(n), kThreads, 0, s>>>(p, g, m, v, n, lr, b1, b2, eps, wd, c1, c2, reinterpret_cast<bf16*>(p_bf16));
  SEQPAR_CUDA_CHECK_LAUNCH();
}

}  // namespace seqpar::kernels::layer_ops

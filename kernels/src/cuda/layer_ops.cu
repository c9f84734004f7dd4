// The layer ops' kernels: grid-stride loops for the elementwise ops, one block per token where a row
// is reduced (RMSNorm, cross-entropy).
#include <cuda_bf16.h>

#include <cmath>
#include <cstring>

#include "seqpar/core/cuda_check.hpp"
#include "seqpar/kernels/layer_ops.cuh"

namespace seqpar::kernels::layer_ops {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 32 ? 65535 * 32 : b));
}

#define SEQPAR_GRID_STRIDE(i, n)                                                              \
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < (n); \
       i += std::int64_t{gridDim.x} * blockDim.x)

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

__global__ void k_add(float* y, const float* x, std::int64_t n) { SEQPAR_GRID_STRIDE(i, n) y[i] += x[i]; }
__global__ void k_scale(float* x, float a, std::int64_t n) { SEQPAR_GRID_STRIDE(i, n) x[i] *= a; }
__global__ void k_fill(float* x, float v, std::int64_t n) { SEQPAR_GRID_STRIDE(i, n) x[i] = v; }

__global__ void k_embedding_forward(float* out, const int* tokens, const float* table, int t, int c) {
  SEQPAR_GRID_STRIDE(i, std::int64_t{t} * c) {
    const std::int64_t row = i / c, col = i % c;
    out[i] = table[std::int64_t{tokens[row]} * c + col];
  }
}

__global__ void k_embedding_backward(float* dtable, const float* dout, const int* tokens, int t, int c) {
  SEQPAR_GRID_STRIDE(i, std::int64_t{t} * c) {
    const std::int64_t row = i / c, col = i % c;
    atomicAdd(dtable + std::int64_t{tokens[row]} * c + col, dout[i]);
  }
}

// One block per token.
__global__ void k_rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int c, float eps) {
  const std::int64_t o = std::int64_t{blockIdx.x} * c;
  float ss = 0.f;
  for (int i = threadIdx.x; i < c; i += blockDim.x) ss += inp[o + i] * inp[o + i];
  ss = block_sum(ss);
  const float r = rsqrtf(ss / static_cast<float>(c) + eps);
  for (int i = threadIdx.x; i < c; i += blockDim.x) out[o + i] = inp[o + i] * r * w[i];
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
}

__global__ void k_rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                                   const float* rstd, int c) {
  const std::int64_t o = std::int64_t{blockIdx.x} * c;
  const float r = rstd[blockIdx.x];
  float dot = 0.f;
  for (int i = threadIdx.x; i < c; i += blockDim.x) dot += dout[o + i] * w[i] * inp[o + i];
  dot = block_sum(dot);
  const float k = dot * r * r * r / static_cast<float>(c);
  for (int i = threadIdx.x; i < c; i += blockDim.x) {
    dinp[o + i] += dout[o + i] * w[i] * r - inp[o + i] * k;
    atomicAdd(dw + i, dout[o + i] * inp[o + i] * r);
  }
}

__global__ void k_rope(float* x, const int* pos, int t, int heads, int d, float theta, bool inverse) {
  const int half = d / 2;
  SEQPAR_GRID_STRIDE(idx, std::int64_t{t} * heads * half) {
    const int i = static_cast<int>(idx % half);
    const std::int64_t th = idx / half;  // token * heads + head
    const std::int64_t tok = th / heads;
    const double freq = pow(static_cast<double>(theta), -2.0 * i / d);
    const double ang = pos[tok] * freq;
    const float cs = static_cast<float>(cos(ang));
    const float sn = static_cast<float>(inverse ? -sin(ang) : sin(ang));
    float* p = x + th * d + 2 * i;
    const float x0 = p[0], x1 = p[1];
    p[0] = x0 * cs - x1 * sn;
    p[1] = x0 * sn + x1 * cs;
  }
}

__global__ void k_swiglu_forward(float* out, const float* gate, const float* up, std::int64_t n) {
  SEQPAR_GRID_STRIDE(i, n) {
    const float sg = 1.f / (1.f + expf(-gate[i]));
    out[i] = gate[i] * sg * up[i];
  }
}

__global__ void k_swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                  std::int64_t n) {
  SEQPAR_GRID_STRIDE(i, n) {
    const float g = gate[i], sg = 1.f / (1.f + expf(-g));
    dgate[i] = dout[i] * up[i] * sg * (1.f + g * (1.f - sg));
    dup[i] = dout[i] * g * sg;
  }
}

// One block per token.
__global__ void k_cross_entropy(float* losses, float* logits, const int* labels, int v, float dscale) {
  float* z = logits + std::int64_t{blockIdx.x} * v;
  const int label = labels[blockIdx.x];
  if (label < 0) {  // uniform over the block: no thread reaches a reduction
    for (int i = threadIdx.x; i < v; i += blockDim.x) z[i] = 0.f;
    if (threadIdx.x == 0) losses[blockIdx.x] = 0.f;
    return;
  }
  float mx = -INFINITY;
  for (int i = threadIdx.x; i < v; i += blockDim.x) mx = fmaxf(mx, z[i]);
  mx = block_max(mx);
  float sum = 0.f;
  for (int i = threadIdx.x; i < v; i += blockDim.x) sum += expf(z[i] - mx);
  sum = block_sum(sum);
  const float log_sum = logf(sum) + mx;
  const float z_label = z[label];
  __syncthreads();  // every thread has read z[label] before it is overwritten
  if (threadIdx.x == 0) losses[blockIdx.x] = log_sum - z_label;
  for (int i = threadIdx.x; i < v; i += blockDim.x)
    z[i] = (expf(z[i] - log_sum) - (i == label ? 1.f : 0.f)) * dscale;
}

__global__ void k_adamw(float* p, const float* g, float* m, float* v, std::int64_t n, float lr, float b1, float b2,
                        float eps, float wd, float c1, float c2) {
  SEQPAR_GRID_STRIDE(i, n) {
    m[i] = b1 * m[i] + (1.f - b1) * g[i];
    v[i] = b2 * v[i] + (1.f - b2) * g[i] * g[i];
    p[i] -= lr * ((m[i] / c1) / (sqrtf(v[i] / c2) + eps) + wd * p[i]);
  }
}

__global__ void k_to_bf16(__nv_bfloat16* out, const float* in, std::int64_t n) {
  SEQPAR_GRID_STRIDE(i, n) out[i] = __float2bfloat16_rn(in[i]);
}
__global__ void k_from_bf16(float* out, const __nv_bfloat16* in, std::int64_t n) {
  SEQPAR_GRID_STRIDE(i, n) out[i] = __bfloat162float(in[i]);
}

}  // namespace

void add(float* y, const float* x, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  k_add<<<grid_for(n), kThreads, 0, s>>>(y, x, n);
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void scale(float* x, float alpha, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  k_scale<<<grid_for(n), kThreads, 0, s>>>(x, alpha, n);
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void fill(float* x, float value, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  k_fill<<<grid_for(n), kThreads, 0, s>>>(x, value, n);
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void embedding_forward(float* out, const int* tokens, const float* table, int t, int c, cudaStream_t s) {
  k_embedding_forward<<<grid_for(std::int64_t{t} * c), kThreads, 0, s>>>(out, tokens, table, t, c);
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void embedding_backward(float* dtable, const float* dout, const int* tokens, int t, int c, cudaStream_t s) {
  k_embedding_backward<<<grid_for(std::int64_t{t} * c), kThreads, 0, s>>>(dtable, dout, tokens, t, c);
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int t, int c, float eps,
                     cudaStream_t s) {
  k_rmsnorm_forward<<<static_cast<unsigned>(t), kThreads, 0, s>>>(out, rstd, inp, w, c, eps);
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                      const float* rstd, int t, int c, cudaStream_t s) {
  k_rmsnorm_backward<<<static_cast<unsigned>(t), kThreads, 0, s>>>(dinp, dw, dout, inp, w, rstd, c);
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void rope(float* x, const int* pos, int t, int heads, int d, float theta, bool inverse, cudaStream_t s) {
  k_rope<<<grid_for(std::int64_t{t} * heads * (d / 2)), kThreads, 0, s>>>(x, pos, t, heads, d, theta, inverse);
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void swiglu_forward(float* out, const float* gate, const float* up, std::int64_t n, cudaStream_t s) {
  k_swiglu_forward<<<grid_for(n), kThreads, 0, s>>>(out, gate, up, n);
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                     std::int64_t n, cudaStream_t s) {
  k_swiglu_backward<<<grid_for(n), kThreads, 0, s>>>(dgate, dup, dout, gate, up, n);
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void cross_entropy(float* losses, float* logits, const int* labels, int t, int v, float dscale, cudaStream_t s) {
  k_cross_entropy<<<static_cast<unsigned>(t), kThreads, 0, s>>>(losses, logits, labels, v, dscale);
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void adamw(float* p, const float* g, float* m, float* v, std::int64_t n, float lr, float b1, float b2, float eps,
           float wd, int step, cudaStream_t s) {
  const float c1 = 1.f - std::pow(b1, static_cast<float>(step)), c2 = 1.f - std::pow(b2, static_cast<float>(step));
  k_adamw<<<grid_for(n), kThreads, 0, s>>>(p, g, m, v, n, lr, b1, b2, eps, wd, c1, c2);
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void to_bf16(std::uint16_t* out, const float* in, std::int64_t n, cudaStream_t s) {
  k_to_bf16<<<grid_for(n), kThreads, 0, s>>>(reinterpret_cast<__nv_bfloat16*>(out), in, n);
  SEQPAR_CUDA_CHECK_LAUNCH();
}
void from_bf16(float* out, const std::uint16_t* in, std::int64_t n, cudaStream_t s) {
  k_from_bf16<<<grid_for(n), kThreads, 0, s>>>(out, reinterpret_cast<const __nv_bfloat16*>(in), n);
  SEQPAR_CUDA_CHECK_LAUNCH();
}

}  // namespace seqpar::kernels::layer_ops

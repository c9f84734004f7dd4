// Ulysses reshards on the GPU: every pack/unpack is a strided copy of contiguous rows, described by
// reshard_layout.hpp (the same descriptors the CPU reference executes). One kernel moves up to three
// such copies (q, k, v) in one launch, in the widest vector unit (16 down to 2 bytes) that every
// row, stride and pointer allows. KV-head reduction sums replicas in fp32.
#include <algorithm>

#include "device_util.cuh"
#include "seqpar/core/cuda_check.hpp"
#include "seqpar/kernels/reshard.cuh"
#include "seqpar/kernels/reshard_layout.hpp"

namespace seqpar::kernels {
namespace detail {
namespace {

using reshard::RowCopy;

struct Job {
  RowCopy c;  // in vector units
  const void* src;
  void* dst;
};
struct Jobs {
  Job job[3];
  int count;
};

template <typename V>
__global__ void row_copy_kernel(Jobs jobs) {
  const Job& jb = jobs.job[blockIdx.y];
  const RowCopy c = jb.c;
  const V* src = static_cast<const V*>(jb.src);
  V* dst = static_cast<V*>(jb.dst);
  const std::int64_t total = c.n_i * c.n_j * c.row;
  for (std::int64_t idx = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; idx < total;
       idx += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t r = idx % c.row, ij = idx / c.row, j = ij % c.n_j, i = ij / c.n_j;
    dst[c.dst_off + i * c.dst_i + j * c.dst_j + r] = src[c.src_off + i * c.src_i + j * c.src_j + r];
  }
}

RowCopy in_units(RowCopy c, std::int64_t unit) {
  for (std::int64_t* f : {&c.row, &c.src_off, &c.src_i, &c.src_j, &c.dst_off, &c.dst_i, &c.dst_j}) *f /= unit;
  return c;
}

// Runs copies given in elements of `t`; the vector unit is the widest that divides everything.
void run_copies(const RowCopy* copies, const void* const* src, void* const* dst, int count, DType t,
                cudaStream_t stream, const char* fn) {
  const std::int64_t esize = static_cast<std::int64_t>(dtype_size(t));
  std::int64_t unit = 16;
  for (int n = 0; n < count; ++n) {
    check_aligned(src[n], static_cast<std::size_t>(esize), "source", fn);
    check_aligned(dst[n], static_cast<std::size_t>(esize), "destination", fn);
    const RowCopy& c = copies[n];
    for (std::int64_t bytes : {c.row * esize, c.src_off * esize, c.src_i * esize, c.src_j * esize,
                               c.dst_off * esize, c.dst_i * esize, c.dst_j * esize,
                               static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(src[n])),
                               static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(dst[n]))})
      while (bytes % unit != 0) unit /= 2;
  }
  Jobs jobs{};
  jobs.count = count;
  std::int64_t most = 0;
  for (int n = 0; n < count; ++n) {
    RowCopy c = copies[n];
    c.row *= esize;
    c.src_off *= esize;
    c.src_i *= esize;
    c.src_j *= esize;
    c.dst_off *= esize;
    c.dst_i *= esize;
    c.dst_j *= esize;
    jobs.job[n] = Job{in_units(c, unit), src[n], dst[n]};
    most = std::max(most, jobs.job[n].c.elements());
  }
  const dim3 grid(blocks_for(most, 256), static_cast<unsigned>(count));
  switch (unit) {
    case 16: row_copy_kernel<uint4><<<grid, 256, 0, stream>>>(jobs); break;
    case 8: row_copy_kernel<uint2><<<grid, 256, 0, stream>>>(jobs); break;
    case 4: row_copy_kernel<unsigned><<<grid, 256, 0, stream>>>(jobs); break;
    default: row_copy_kernel<unsigned short><<<grid, 256, 0, stream>>>(jobs); break;
  }
  SEQPAR_CUDA_CHECK_LAUNCH();
}

void run_qkv(const reshard::QkvCopies& c, DType t, const void* const (&src)[3], void* const (&dst)[3],
             cudaStream_t stream, const char* fn) {
  const RowCopy copies[] = {c.q, c.k, c.v};
  run_copies(copies, src, dst, 3, t, stream, fn);
}

void run_one(const RowCopy& c, DType t, const void* src, void* dst, cudaStream_t stream, const char* fn) {
  run_copies(&c, &src, &dst, 1, t, stream, fn);
}

template <typename T>
__global__ void reduce_kv_kernel(int rep, std::int64_t rows, int d, const T* __restrict__ dout,
                                 T* __restrict__ dkv) {
  const std::int64_t total = rows * d;
  for (std::int64_t idx = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; idx < total;
       idx += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t row = idx / d, e = idx % d;
    float sum = 0.f;
    for (int r = 0; r < rep; ++r) sum += to_float(dout[(row * rep + r) * d + e]);
    dkv[idx] = from_float<T>(sum);
  }
}

}  // namespace
}  // namespace detail

void ulysses_pack(int P, int b, int n, int heads, int d, DType t, const void* x, void* send, cudaStream_t stream) {
  detail::run_one(reshard::pack(P, b, n, heads, d), t, x, send, stream, "ulysses_pack");
}
void ulysses_unpack(int P, int b, int n, int heads, int d, DType t, const void* recv, void* y, cudaStream_t stream) {
  detail::run_one(reshard::unpack(P, b, n, heads, d), t, recv, y, stream, "ulysses_unpack");
}
void ulysses_pack_reverse(int P, int b, int n, int heads, int d, DType t, const void* y, void* send,
                          cudaStream_t stream) {
  detail::run_one(reshard::pack_reverse(P, b, n, heads, d), t, y, send, stream, "ulysses_pack_reverse");
}
void ulysses_unpack_reverse(int P, int b, int n, int heads, int d, DType t, const void* recv, void* x,
                            cudaStream_t stream) {
  detail::run_one(reshard::unpack_reverse(P, b, n, heads, d), t, recv, x, stream, "ulysses_unpack_reverse");
}

void ulysses_pack_qkv(int P, int b, int n, int heads, int kv_heads, int d, DType t, const void* q, const void* k,
                      const void* v, void* send, cudaStream_t stream) {
  detail::run_qkv(reshard::pack_qkv(P, b, n, heads, kv_heads, d), t, {q, k, v}, {send, send, send}, stream,
                  "ulysses_pack_qkv");
}

void ulysses_unpack_qkv(int P, int b, int n, int heads, int kv_heads, int d, DType t, const void* recv, void* yq,
                        void* yk, void* yv, cudaStream_t stream) {
  detail::run_qkv(reshard::unpack_qkv(P, b, n, heads, kv_heads, d), t, {recv, recv, recv}, {yq, yk, yv}, stream,
                  "ulysses_unpack_qkv");
}

void ulysses_pack_qkv_reverse(int P, int b, int n, int heads, int kv_heads, int d, DType t, const void* dq,
                              const void* dk, const void* dv, void* send, cudaStream_t stream) {
  detail::run_qkv(reshard::pack_qkv_reverse(P, b, n, heads, kv_heads, d), t, {dq, dk, dv}, {send, send, send},
                  stream, "ulysses_pack_qkv_reverse");
}

void ulysses_unpack_qkv_reverse(int P, int b, int n, int heads, int kv_heads, int d, DType t, const void* recv,
                                void* dq, void* dk, void* dv, cudaStream_t stream) {
  detail::run_qkv(reshard::unpack_qkv_reverse(P, b, n, heads, kv_heads, d), t, {recv, recv, recv},
                  {dq, dk, dv}, stream, "ulysses_unpack_qkv_reverse");
}

void replicate_kv_heads(int rep, int b, int n, int kv_heads, int d, DType t, const void* kv, void* out,
                        cudaStream_t stream) {
  detail::run_one(reshard::replicate(rep, b, n, kv_heads, d), t, kv, out, stream, "replicate_kv_heads");
}

void reduce_kv_heads(int rep, int b, int n, int kv_heads, int d, DType t, const void* dout, void* dkv,
                     cudaStream_t stream) {
  reshard::replicate(rep, b, n, kv_heads, d);  // argument checks
  detail::check_aligned(dout, dtype_size(t), "dout", "reduce_kv_heads");
  detail::check_aligned(dkv, dtype_size(t), "dkv", "reduce_kv_heads");
  const std::int64_t rows = std::int64_t{b} * n * kv_heads;
  detail::dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    detail::reduce_kv_kernel<T><<<detail::blocks_for(rows * d, 256), 256, 0, stream>>>(
        rep, rows, d, static_cast<const T*>(dout), static_cast<T*>(dkv));
  });
  SEQPAR_CUDA_CHECK_LAUNCH();
}

}  // namespace seqpar::kernels

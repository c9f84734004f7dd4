#include "seqpar/kernels/reshard_ref.hpp"

#include <algorithm>
#include <cstdint>

#include "seqpar/kernels/reshard_layout.hpp"

namespace seqpar::ref {
namespace {

void run(const reshard::RowCopy& c, const float* src, float* dst) {
  for (std::int64_t i = 0; i < c.n_i; ++i)
    for (std::int64_t j = 0; j < c.n_j; ++j)
      std::copy_n(src + c.src_off + i * c.src_i + j * c.src_j, c.row, dst + c.dst_off + i * c.dst_i + j * c.dst_j);
}

// The fused forms: copy c.q, c.k, c.v from src[0..2] to dst[0..2] (one of the sides is the fused buffer).
void run(const reshard::QkvCopies& c, const float* const (&src)[3], float* const (&dst)[3]) {
  run(c.q, src[0], dst[0]);
  run(c.k, src[1], dst[1]);
  run(c.v, src[2], dst[2]);
}

}  // namespace

void ulysses_pack(int P, int b, int n, int heads, int d, const float* x, float* send) {
  run(reshard::pack(P, b, n, heads, d), x, send);
}
void ulysses_unpack(int P, int b, int n, int heads, int d, const float* recv, float* y) {
  run(reshard::unpack(P, b, n, heads, d), recv, y);
}
void ulysses_pack_reverse(int P, int b, int n, int heads, int d, const float* y, float* send) {
  run(reshard::pack_reverse(P, b, n, heads, d), y, send);
}
void ulysses_unpack_reverse(int P, int b, int n, int heads, int d, const float* recv, float* x) {
  run(reshard::unpack_reverse(P, b, n, heads, d), recv, x);
}

void ulysses_pack_qkv(int P, int b, int n, int heads, int kv_heads, int d, const float* q, const float* k,
                      const float* v, float* send) {
  run(reshard::pack_qkv(P, b, n, heads, kv_heads, d), {q, k, v}, {send, send, send});
}

void ulysses_unpack_qkv(int P, int b, int n, int heads, int kv_heads, int d, const float* recv, float* yq,
                        float* yk, float* yv) {
  run(reshard::unpack_qkv(P, b, n, heads, kv_heads, d), {recv, recv, recv}, {yq, yk, yv});
}

void ulysses_pack_qkv_reverse(int P, int b, int n, int heads, int kv_heads, int d, const float* dq,
                              const float* dk, const float* dv, float* send) {
  run(reshard::pack_qkv_reverse(P, b, n, heads, kv_heads, d), {dq, dk, dv}, {send, send, send});
}

void ulysses_unpack_qkv_reverse(int P, int b, int n, int heads, int kv_heads, int d, const float* recv, float* dq,
                                float* dk, float* dv) {
  run(reshard::unpack_qkv_reverse(P, b, n, heads, kv_heads, d), {recv, recv, recv}, {dq, dk, dv});
}

void replicate_kv_heads(int rep, int b, int n, int kv_heads, int d, const float* kv, float* out) {
  run(reshard::replicate(rep, b, n, kv_heads, d), kv, out);
}

void reduce_kv_heads(int rep, int b, int n, int kv_heads, int d, const float* dout, float* dkv) {
  reshard::replicate(rep, b, n, kv_heads, d);  // argument checks
  const std::int64_t rows = std::int64_t{b} * n * kv_heads;
  for (std::int64_t row = 0; row < rows; ++row)
    for (int e = 0; e < d; ++e) {
      double sum = 0;
      for (int r = 0; r < rep; ++r) sum += dout[(row * rep + r) * d + e];
      dkv[row * d + e] = static_cast<float>(sum);
    }
}

}  // namespace seqpar::ref

// The Ulysses reshards as strided row copies: every pack/unpack moves contiguous rows of `row` elements
// from (i, j) in the source to (i, j) in the destination with other strides. The CPU reference and the
// GPU kernel both execute these descriptors, so the index arithmetic lives (and is tested) in one place.
#pragma once
#include <cstdint>

namespace seqpar::reshard {

// dst[dst_off + i*dst_i + j*dst_j + r] = src[src_off + i*src_i + j*src_j + r]
// for i < n_i, j < n_j, r < row (all in elements).
struct RowCopy {
  std::int64_t n_i = 0, n_j = 0, row = 0;
  std::int64_t src_off = 0, src_i = 0, src_j = 0;
  std::int64_t dst_off = 0, dst_i = 0, dst_j = 0;
  std::int64_t elements() const { return n_i * n_j * row; }
};

// The same rows moved back: source and destination swapped.
RowCopy inverse(const RowCopy& c);

// Throws seqpar::Error unless all sizes are positive and heads % P == 0 (`what` names the heads argument).
void check_ulysses_args(int P, int b, int n, int heads, int d, const char* what = "heads");

// x [b, n, heads, d] -> send [P][b, n, heads/P, d]
RowCopy pack(int P, int b, int n, int heads, int d);
// recv [P][b, n, heads/P, d] -> y [b, P*n, heads/P, d]
RowCopy unpack(int P, int b, int n, int heads, int d);
// y [b, P*n, heads/P, d] -> send [P][b, n, heads/P, d]  (inverse of unpack)
RowCopy pack_reverse(int P, int b, int n, int heads, int d);
// recv [P][b, n, heads/P, d] -> x [b, n, heads, d]  (inverse of pack)
RowCopy unpack_reverse(int P, int b, int n, int heads, int d);

// Fused forms: one buffer whose chunk p is [q part | k part | v part] (see reshard_ref.hpp).
struct QkvCopies {
  RowCopy q, k, v;
};
// GQA: kv [b, n, kv_heads, d] -> [b, n, kv_heads*rep, d], each head row copied rep times (source stride 0 in j).
// Throws seqpar::Error unless all sizes are positive.
RowCopy replicate(int rep, int b, int n, int kv_heads, int d);

QkvCopies pack_qkv(int P, int b, int n, int heads, int kv_heads, int d);
QkvCopies unpack_qkv(int P, int b, int n, int heads, int kv_heads, int d);
// The backward of q, k, v (dq, dk, dv): the inverses of unpack_qkv and pack_qkv, same fused chunk layout.
QkvCopies pack_qkv_reverse(int P, int b, int n, int heads, int kv_heads, int d);
QkvCopies unpack_qkv_reverse(int P, int b, int n, int heads, int kv_heads, int d);

}  // namespace seqpar::reshard

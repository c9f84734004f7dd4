#include "seqpar/kernels/reshard_layout.hpp"

#include <fmt/format.h>

#include "seqpar/core/error.hpp"

namespace seqpar::reshard {

RowCopy inverse(const RowCopy& c) {
  return RowCopy{c.n_i, c.n_j, c.row, c.dst_off, c.dst_i, c.dst_j, c.src_off, c.src_i, c.src_j};
}

namespace {
QkvCopies inverse(const QkvCopies& c) { return {inverse(c.q), inverse(c.k), inverse(c.v)}; }
}  // namespace

void check_ulysses_args(int P, int b, int n, int heads, int d, const char* what) {
  auto positive = [](int value, const char* name) {
    if (value <= 0) throw Error(fmt::format("ulysses reshard: {} = {} must be positive", name, value));
  };
  positive(P, "P");
  positive(b, "batch");
  positive(n, "sequence length per rank");
  positive(heads, what);
  positive(d, "head_dim");
  if (heads % P != 0)
    throw Error(fmt::format("ulysses reshard: {} = {} must be divisible by the Ulysses degree P = {}", what,
                            heads, P));
}

// A tensor [M][P][R] seen as rows of R: send chunk p gets rows (m, p) for all m, in order m.
RowCopy pack(int P, int b, int n, int heads, int d) {
  check_ulysses_args(P, b, n, heads, d);
  const std::int64_t M = std::int64_t{b} * n, R = std::int64_t{heads / P} * d;
  return RowCopy{M, P, R, 0, P * R, R, 0, R, M * R};
}

RowCopy unpack_reverse(int P, int b, int n, int heads, int d) { return inverse(pack(P, b, n, heads, d)); }

// recv [P][b][n*heads/P*d]: chunk p (sequence block p) lands at y[b][p*n ...], i.e. y seen as [b][P][R].
RowCopy unpack(int P, int b, int n, int heads, int d) {
  check_ulysses_args(P, b, n, heads, d);
  const std::int64_t B = b, R = std::int64_t{n} * (heads / P) * d;
  return RowCopy{B, P, R, 0, R, B * R, 0, P * R, R};
}

RowCopy pack_reverse(int P, int b, int n, int heads, int d) { return inverse(unpack(P, b, n, heads, d)); }

RowCopy replicate(int rep, int b, int n, int kv_heads, int d) {
  if (rep <= 0 || b <= 0 || n <= 0 || kv_heads <= 0 || d <= 0)
    throw Error(fmt::format("kv-head replication: rep = {}, batch = {}, n = {}, kv_heads = {}, head_dim = {}: "
                            "all must be positive",
                            rep, b, n, kv_heads, d));
  const std::int64_t rows = std::int64_t{b} * n * kv_heads;
  return RowCopy{rows, rep, d, 0, d, 0, 0, std::int64_t{rep} * d, d};
}

QkvCopies pack_qkv(int P, int b, int n, int heads, int kv_heads, int d) {
  check_ulysses_args(P, b, n, heads, d, "heads");
  check_ulysses_args(P, b, n, kv_heads, d, "kv_heads");
  RowCopy q = pack(P, b, n, heads, d), k = pack(P, b, n, kv_heads, d);
  const std::int64_t chunk = q.elements() / P + 2 * (k.elements() / P);
  q.dst_j = chunk;
  k.dst_j = chunk;
  k.dst_off = q.elements() / P;
  RowCopy v = k;
  v.dst_off = k.dst_off + k.elements() / P;
  return {q, k, v};
}

QkvCopies unpack_qkv(int P, int b, int n, int heads, int kv_heads, int d) {
  check_ulysses_args(P, b, n, heads, d, "heads");
  check_ulysses_args(P, b, n, kv_heads, d, "kv_heads");
  RowCopy q = unpack(P, b, n, heads, d), k = unpack(P, b, n, kv_heads, d);
  const std::int64_t chunk = q.elements() / P + 2 * (k.elements() / P);
  q.src_j = chunk;
  k.src_j = chunk;
  k.src_off = q.elements() / P;
  RowCopy v = k;
  v.src_off = k.src_off + k.elements() / P;
  return {q, k, v};
}

QkvCopies pack_qkv_reverse(int P, int b, int n, int heads, int kv_heads, int d) {
  return inverse(unpack_qkv(P, b, n, heads, kv_heads, d));
}

QkvCopies unpack_qkv_reverse(int P, int b, int n, int heads, int kv_heads, int d) {
  return inverse(pack_qkv(P, b, n, heads, kv_heads, d));
}

}  // namespace seqpar::reshard

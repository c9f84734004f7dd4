#include "paths.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "seqpar/core/error.hpp"

namespace seqpar::bench::reshard_full {

Shape make_shape(int P, int batch, std::int64_t seq_len, int heads, int kv_heads, int head_dim) {
  auto positive = [](std::int64_t v, const char* field) {
    if (v <= 0) throw Error(fmt::format("{} {}: must be positive", field, v));
  };
  positive(P, "--sp");
  positive(batch, "--batch");
  positive(seq_len, "--seq-len");
  positive(heads, "--heads");
  positive(kv_heads, "--kv-heads");
  positive(head_dim, "--head-dim");
  if (seq_len % P != 0)
    throw Error(fmt::format("--seq-len {} is not divisible by --sp {}: each rank holds N/P tokens (pad the "
                            "sequence to a multiple of P)",
                            seq_len, P));
  if (seq_len / P > INT_MAX)
    throw Error(fmt::format("--seq-len {}: {} tokens per rank exceed the kernels' limit of {}", seq_len,
                            seq_len / P, INT_MAX));
  if (heads % P != 0)
    throw Error(fmt::format("--heads {} is not divisible by --sp {}: Ulysses gives each rank heads/P query "
                            "heads",
                            heads, P));
  if (heads % kv_heads != 0)
    throw Error(fmt::format("--heads {} is not divisible by --kv-heads {}: each KV head serves the same "
                            "number of query heads",
                            heads, kv_heads));
  Shape s;
  s.P = P;
  s.batch = batch;
  s.seq_len = seq_len;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.n = static_cast<int>(seq_len / P);
  if (kv_heads % P == 0) {
    s.rep = 1;
  } else if (P % kv_heads == 0) {
    s.rep = P / kv_heads;
  } else {
    throw Error(fmt::format("--kv-heads {} is neither divisible by --sp {} (to split the KV heads over the ranks) "
                            "nor a divisor of it (to replicate each KV head P/kv_heads times)",
                            kv_heads, P));
  }
  s.kv_sent = kv_heads * s.rep;
  return s;
}

std::vector<Path> make_paths(const Shape& s) {
  const std::size_t xh = s.elements(s.heads), xkv = s.elements(s.kv_heads), xks = s.elements(s.kv_sent);
  const bool rep = s.rep > 1;
  std::vector<Path> paths;

  Path qkv{"qkv_forward", "forward", "q,k,v", {xh, xkv, xkv}, {}, {xh + 2 * xks}, {xh, xks, xks}, {}, {}};
  if (rep) qkv.tmp = {xks, xks};
  qkv.pack = [](Mover& m, const Shape& sh, const Buffers& b) {
    const void* k = b.in[1];
    const void* v = b.in[2];
    if (sh.rep > 1) {
      m.replicate(sh.dims(), sh.rep, sh.kv_heads, b.in[1], b.tmp[0]);
      m.replicate(sh.dims(), sh.rep, sh.kv_heads, b.in[2], b.tmp[1]);
      k = b.tmp[0];
      v = b.tmp[1];
    }
    m.pack_qkv(sh.dims(), sh.heads, sh.kv_sent, b.in[0], k, v, b.send[0]);
  };
  qkv.unpack = [](Mover& m, const Shape& sh, const Buffers& b) {
    m.unpack_qkv(sh.dims(), sh.heads, sh.kv_sent, b.recv[0], b.out[0], b.out[1], b.out[2]);
  };
  paths.push_back(std::move(qkv));

  Path out{"output_forward", "forward", "o", {xh}, {}, {xh}, {xh}, {}, {}};
  out.pack = [](Mover& m, const Shape& sh, const Buffers& b) {
    m.pack_reverse(sh.dims(), sh.heads, b.in[0], b.send[0]);
  };
  out.unpack = [](Mover& m, const Shape& sh, const Buffers& b) {
    m.unpack_reverse(sh.dims(), sh.heads, b.recv[0], b.out[0]);
  };
  paths.push_back(std::move(out));

  Path dout{"output_backward", "backward", "do", {xh}, {}, {xh}, {xh}, {}, {}};
  dout.pack = [](Mover& m, const Shape& sh, const Buffers& b) { m.pack(sh.dims(), sh.heads, b.in[0], b.send[0]); };
  dout.unpack = [](Mover& m, const Shape& sh, const Buffers& b) {
    m.unpack(sh.dims(), sh.heads, b.recv[0], b.out[0]);
  };
  paths.push_back(std::move(dout));

  Path dqkv{"qkv_backward", "backward", "dq,dk,dv", {xh, xks, xks}, {}, {xh + 2 * xks}, {xh, xkv, xkv}, {}, {}};
  if (rep) dqkv.tmp = {xks, xks};
  dqkv.pack = [](Mover& m, const Shape& sh, const Buffers& b) {
    m.pack_qkv_reverse(sh.dims(), sh.heads, sh.kv_sent, b.in[0], b.in[1], b.in[2], b.send[0]);
  };
  dqkv.unpack = [](Mover& m, const Shape& sh, const Buffers& b) {
    if (sh.rep == 1) {
      m.unpack_qkv_reverse(sh.dims(), sh.heads, sh.kv_sent, b.recv[0], b.out[0], b.out[1], b.out[2]);
      return;
    }
    // The replicas' gradients (one per rank that held a copy) are summed back into each KV head.
    m.unpack_qkv_reverse(sh.dims(), sh.heads, sh.kv_sent, b.recv[0], b.out[0], b.tmp[0], b.tmp[1]);
    m.reduce(sh.dims(), sh.rep, sh.kv_heads, b.tmp[0], b.out[1]);
    m.reduce(sh.dims(), sh.rep, sh.kv_heads, b.tmp[1], b.out[2]);
  };
  paths.push_back(std::move(dqkv));
  return paths;
}

float fill_value(int path, int tensor, int rank, std::size_t i) {
  std::uint64_t h = (std::uint64_t(path) << 56) ^ (std::uint64_t(tensor) << 48) ^ (std::uint64_t(rank) << 32) ^ i;
  h *= 0x9E3779B97F4A7C15ull;  // splitmix64 finaliser: neighbouring indices get unrelated values
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  return static_cast<float>(static_cast<int>(h % 255) - 127);
}

namespace {

struct HostBuffers {
  std::vector<std::vector<float>> in, tmp, send, recv, out;
  Buffers view() {
    auto ptrs = [](std::vector<std::vector<float>>& group) {
      std::vector<void*> p;
      for (auto& v : group) p.push_back(v.data());
      return p;
    };
    return {ptrs(in), ptrs(tmp), ptrs(send), ptrs(recv), ptrs(out)};
  }
};

std::vector<std::vector<float>> allocate(const std::vector<std::size_t>& sizes) {
  std::vector<std::vector<float>> v;
  for (std::size_t n : sizes) v.emplace_back(n);
  return v;
}

}  // namespace

std::vector<std::vector<float>> expected_outputs(const Path& p, int path_index, const Shape& s, int rank,
                                                 bool loopback) {
  const auto ref = make_host_mover(Variant::fused);
  HostBuffers h{allocate(p.in), allocate(p.tmp), allocate(p.send), allocate(p.send), allocate(p.out)};
  const Buffers b = h.view();
  const std::size_t P = static_cast<std::size_t>(s.P);
  // recv chunk `src` of rank `rank` is chunk `rank` of rank src's send buffer (loopback: its own chunk src).
  for (int src = 0; src < s.P; ++src) {
    if (loopback && src > 0) break;
    const int owner = loopback ? rank : src;
    for (std::size_t t = 0; t < h.in.size(); ++t)
      for (std::size_t i = 0; i < h.in[t].size(); ++i) h.in[t][i] = fill_value(path_index, int(t), owner, i);
    p.pack(*ref, s, b);
    for (std::size_t t = 0; t < h.send.size(); ++t) {
      const std::size_t chunk = h.send[t].size() / P;
      if (loopback) {
        h.recv[t] = h.send[t];
      } else {
        std::copy_n(h.send[t].begin() + std::ptrdiff_t(std::size_t(rank) * chunk), chunk,
                    h.recv[t].begin() + std::ptrdiff_t(std::size_t(src) * chunk));
      }
    }
  }
  p.unpack(*ref, s, b);
  return std::move(h.out);
}

}  // namespace seqpar::bench::reshard_full

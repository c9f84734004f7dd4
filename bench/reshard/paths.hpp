// What the full Ulysses reshard moves: the validated shape (with the GQA rule for KV heads) and the
// four paths of one attention layer, each pack -> all-to-all(s) -> unpack; plus the data the check
// feeds them and the CPU-reference result it expects.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "movers.hpp"

namespace seqpar::bench::reshard_full {

struct Shape {
  int P = 1, batch = 1, heads = 1, kv_heads = 1, head_dim = 1;
  std::int64_t seq_len = 1;  // full N
  int n = 1;                 // tokens per rank, N / P
  int rep = 1;               // KV-head replication factor (P / kv_heads when kv_heads < P)
  int kv_sent = 1;           // KV heads through the all-to-all: kv_heads * rep
  Dims dims() const { return {P, batch, n, head_dim}; }
  std::size_t elements(int h) const {
    return std::size_t(batch) * std::size_t(n) * std::size_t(h) * std::size_t(head_dim);
  }
};

// Checks the Ulysses rules and throws seqpar::Error naming the option: sizes positive, --seq-len and
// --heads divisible by --sp, --heads by --kv-heads, and --kv-heads dividing or divided by --sp.
Shape make_shape(int P, int batch, std::int64_t seq_len, int heads, int kv_heads, int head_dim);

// Pointers to one rank's buffers of a path; recv[i] has the size of send[i].
struct Buffers {
  std::vector<void*> in, tmp, send, recv, out;
};

struct Path {
  std::string name;       // qkv_forward, output_forward, output_backward, qkv_backward
  std::string direction;  // forward, backward
  std::string tensors;    // what it carries
  std::vector<std::size_t> in, tmp, send, out;  // element counts (send: the whole per-rank buffer)
  std::function<void(Mover&, const Shape&, const Buffers&)> pack, unpack;
};

// forward: q,k,v to [N, H/P] (fused pack, one all-to-all; KV heads replicated first when needed) and
// the output back to [N/P, H]; backward: the same moves on the gradients in the opposite direction
// (dq,dk,dv fused into one all-to-all too; the replicas' KV gradients summed after it).
std::vector<Path> make_paths(const Shape& s);

// Input element i of tensor `tensor` of path `path` on rank `rank`: an integer in [-127, 127], exact in
// every element type, so a misplaced element shows.
float fill_value(int path, int tensor, int rank, std::size_t i);

// The outputs rank `rank` must hold after the path, from the CPU reference run on every rank's inputs
// (the gathered inputs). loopback: the single-rank proxy's all-to-all, where every peer holds this
// rank's data (recv chunk p = own send chunk p).
std::vector<std::vector<float>> expected_outputs(const Path& p, int path_index, const Shape& s, int rank,
                                                 bool loopback);

}  // namespace seqpar::bench::reshard_full

// The engines of the full Ulysses reshard: a Mover runs the layout changes around the all-to-alls
// (one variant on one kind of memory), a Clock timestamps the stages of one iteration.
// Variants: "fused" = seqpar's reshard kernels (GPU) or the CPU reference (host); "naive" = one
// 2-D strided copy per head group and tensor, built from the same reshard_layout.hpp descriptors.
#pragma once
#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "seqpar/kernels/dtype.hpp"

namespace seqpar::bench::reshard_full {

enum class Variant { fused, naive };
std::string_view to_string(Variant v);

// One rank's share: n tokens of [b, n, heads, d] tensors, P ranks. The op names follow
// seqpar/kernels/reshard.cuh; the heads argument is the tensor's own head count.
struct Dims {
  int P = 1, b = 1, n = 1, d = 1;
};

class Mover {
 public:
  virtual ~Mover() = default;
  virtual void pack(const Dims& s, int heads, const void* x, void* send) = 0;
  virtual void unpack(const Dims& s, int heads, const void* recv, void* y) = 0;
  virtual void pack_reverse(const Dims& s, int heads, const void* y, void* send) = 0;
  virtual void unpack_reverse(const Dims& s, int heads, const void* recv, void* x) = 0;
  virtual void pack_qkv(const Dims& s, int heads, int kv_heads, const void* q, const void* k, const void* v,
                        void* send) = 0;
  virtual void unpack_qkv(const Dims& s, int heads, int kv_heads, const void* recv, void* q, void* k,
                          void* v) = 0;
  // The backward of q, k, v in the same fused send/recv layout (dq, dk, dv).
  virtual void pack_qkv_reverse(const Dims& s, int heads, int kv_heads, const void* dq, const void* dk,
                                const void* dv, void* send) = 0;
  virtual void unpack_qkv_reverse(const Dims& s, int heads, int kv_heads, const void* recv, void* dq, void* dk,
                                  void* dv) = 0;
  // GQA with P % kv_heads == 0: [b, n, kv_heads, d] -> [b, n, kv_heads*rep, d], and the gradients' sum back.
  virtual void replicate(const Dims& s, int rep, int kv_heads, const void* kv, void* out) = 0;
  virtual void reduce(const Dims& s, int rep, int kv_heads, const void* dout, void* dkv) = 0;
};

// Timestamps on one rank: mark() at each stage boundary, then read() waits for the work and
// returns the seconds between consecutive marks (and forgets them).
class Clock {
 public:
  virtual ~Clock() = default;
  virtual void mark() = 0;
  virtual std::vector<double> read() = 0;
};

// Host memory, float32 (the CPU reference's element type).
std::unique_ptr<Mover> make_host_mover(Variant v);
std::unique_ptr<Clock> make_host_clock();

// Device memory of element type t, work enqueued on `stream` (a cudaStream_t). In builds without
// CUDA these throw seqpar::Error.
std::unique_ptr<Mover> make_gpu_mover(Variant v, kernels::DType t, void* stream);
std::unique_ptr<Clock> make_gpu_clock(void* stream);
// A non-blocking stream owned by the returned handle (the rank's compute stream).
std::shared_ptr<void> make_gpu_stream();
// Blocks until the work on `stream` is done.
void sync_gpu_stream(void* stream);

// A 2-D copy: `height` rows of `width` bytes, source rows `spitch` bytes apart, destination rows
// `dpitch` apart. The naive movers are this plus the reduction of the fused one.
struct Copy2D {
  virtual ~Copy2D() = default;
  virtual void copy(void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width,
                    std::size_t height) = 0;
};
std::unique_ptr<Mover> make_naive_mover(std::unique_ptr<Copy2D> copy, std::size_t element_bytes,
                                        std::unique_ptr<Mover> reducer);

}  // namespace seqpar::bench::reshard_full

// The GPU engines: seqpar's reshard kernels (fused), cudaMemcpy2DAsync per head group (naive),
// CUDA-event timestamps and the rank's stream. CUDA builds only (no_gpu.cpp otherwise).
#include <cuda_runtime.h>

#include "movers.hpp"
#include "seqpar/core/cuda_check.hpp"
#include "seqpar/kernels/reshard.cuh"

namespace seqpar::bench::reshard_full {
namespace {

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

class KernelMover final : public Mover {
 public:
  KernelMover(kernels::DType t, void* stream) : t_(t), s_(as_stream(stream)) {}
  void pack(const Dims& s, int heads, const void* x, void* send) override {
    kernels::ulysses_pack(s.P, s.b, s.n, heads, s.d, t_, x, send, s_);
  }
  void unpack(const Dims& s, int heads, const void* recv, void* y) override {
    kernels::ulysses_unpack(s.P, s.b, s.n, heads, s.d, t_, recv, y, s_);
  }
  void pack_reverse(const Dims& s, int heads, const void* y, void* send) override {
    kernels::ulysses_pack_reverse(s.P, s.b, s.n, heads, s.d, t_, y, send, s_);
  }
  void unpack_reverse(const Dims& s, int heads, const void* recv, void* x) override {
    kernels::ulysses_unpack_reverse(s.P, s.b, s.n, heads, s.d, t_, recv, x, s_);
  }
  void pack_qkv(const Dims& s, int heads, int kv_heads, const void* q, const void* k, const void* v,
                void* send) override {
    kernels::ulysses_pack_qkv(s.P, s.b, s.n, heads, kv_heads, s.d, t_, q, k, v, send, s_);
  }
  void unpack_qkv(const Dims& s, int heads, int kv_heads, const void* recv, void* q, void* k,
                  void* v) override {
    kernels::ulysses_unpack_qkv(s.P, s.b, s.n, heads, kv_heads, s.d, t_, recv, q, k, v, s_);
  }
  void pack_qkv_reverse(const Dims& s, int heads, int kv_heads, const void* dq, const void* dk, const void* dv,
                        void* send) override {
    kernels::ulysses_pack_qkv_reverse(s.P, s.b, s.n, heads, kv_heads, s.d, t_, dq, dk, dv, send, s_);
  }
  void unpack_qkv_reverse(const Dims& s, int heads, int kv_heads, const void* recv, void* dq, void* dk,
                          void* dv) override {
    kernels::ulysses_unpack_qkv_reverse(s.P, s.b, s.n, heads, kv_heads, s.d, t_, recv, dq, dk, dv, s_);
  }
  void replicate(const Dims& s, int rep, int kv_heads, const void* kv, void* out) override {
    kernels::replicate_kv_heads(rep, s.b, s.n, kv_heads, s.d, t_, kv, out, s_);
  }
  void reduce(const Dims& s, int rep, int kv_heads, const void* dout, void* dkv) override {
    kernels::reduce_kv_heads(rep, s.b, s.n, kv_heads, s.d, t_, dout, dkv, s_);
  }

 private:
  kernels::DType t_;
  cudaStream_t s_;
};

class GpuCopy2D final : public Copy2D {
 public:
  explicit GpuCopy2D(void* stream) : s_(as_stream(stream)) {}
  void copy(void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width,
            std::size_t height) override {
    SEQPAR_CUDA_CHECK(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDeviceToDevice, s_));
  }

 private:
  cudaStream_t s_;
};

// Events recorded on the stream, so a stage's time is what the GPU spent between two marks (the
// all-to-all included: NCCL runs on this stream, host back ends complete before the next mark).
class EventClock final : public Clock {
 public:
  explicit EventClock(void* stream) : s_(as_stream(stream)) {}
  ~EventClock() override {
    for (cudaEvent_t e : pool_) cudaEventDestroy(e);
  }
  EventClock(const EventClock&) = delete;
  EventClock& operator=(const EventClock&) = delete;

  void mark() override {
    if (used_ == pool_.size()) {
      cudaEvent_t e{};
      SEQPAR_CUDA_CHECK(cudaEventCreate(&e));
      pool_.push_back(e);
    }
    SEQPAR_CUDA_CHECK(cudaEventRecord(pool_[used_++], s_));
  }
  std::vector<double> read() override {
    std::vector<double> out;
    if (used_ > 0) SEQPAR_CUDA_CHECK(cudaEventSynchronize(pool_[used_ - 1]));
    for (std::size_t i = 1; i < used_; ++i) {
      float ms = 0;
      SEQPAR_CUDA_CHECK(cudaEventElapsedTime(&ms, pool_[i - 1], pool_[i]));
      out.push_back(static_cast<double>(ms) * 1e-3);
    }
    used_ = 0;
    return out;
  }

 private:
  cudaStream_t s_;
  std::vector<cudaEvent_t> pool_;
  std::size_t used_ = 0;
};

}  // namespace

std::unique_ptr<Mover> make_gpu_mover(Variant v, kernels::DType t, void* stream) {
  if (v == Variant::fused) return std::make_unique<KernelMover>(t, stream);
  return make_naive_mover(std::make_unique<GpuCopy2D>(stream), kernels::dtype_size(t),
                          std::make_unique<KernelMover>(t, stream));
}

std::unique_ptr<Clock> make_gpu_clock(void* stream) { return std::make_unique<EventClock>(stream); }

std::shared_ptr<void> make_gpu_stream() {
  cudaStream_t s{};
  SEQPAR_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return std::shared_ptr<void>(s, [](void* p) { cudaStreamDestroy(as_stream(p)); });
}

void sync_gpu_stream(void* stream) { SEQPAR_CUDA_CHECK(cudaStreamSynchronize(as_stream(stream))); }

}  // namespace seqpar::bench::reshard_full

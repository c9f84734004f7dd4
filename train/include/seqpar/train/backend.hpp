// The ops the model is written over, once: a CPU back end (plain loops + seqpar::ref attention)
// and a CUDA back end (cuBLAS GEMMs + seqpar kernels) implement the same interface.
// Layouts: activations [tokens, features] row-major; attention tensors as in seqpar::ref.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "seqpar/kernels/attention_engine.hpp"
#include "seqpar/kernels/attention_ref.hpp"
#include "seqpar/train/memory.hpp"
#include "seqpar/train/precision.hpp"

namespace seqpar::train {

class Timeline;  // timeline.hpp: the step's measured timeline

// One attention block problem: the shape the CPU references and the CUDA kernels share.
// Causal: query i sees key j iff k_offset + j <= q_offset + i.
using AttnShape = ref::AttentionShape;
// Elements of q (and o, dO, dq) and of k (and v, dk, dv) of one block.
inline std::int64_t q_elems(const AttnShape& s) {
  return std::int64_t{s.batch} * s.seq_q * s.heads * s.head_dim;
}
inline std::int64_t k_elems(const AttnShape& s) {
  return std::int64_t{s.batch} * s.seq_k * s.kv_heads * s.head_dim;
}

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual bool on_gpu() const = 0;
  // The precision attention and the GEMMs run in (precision.hpp). The CPU back end does both; the
  // CUDA back end's attention is bf16 only, so it refuses fp32 with seqpar::Error.
  virtual Precision precision() const = 0;
  virtual void set_precision(Precision p) = 0;
  // The engine attention_forward/backward run on, as results record it ("attention_engine"): the
  // CPU back end has one attention, the reference; the CUDA back end runs seqpar or cudnn
  // (kernels/attention_engine.hpp).
  virtual std::string_view attention_engine() const { return "reference"; }

  MemoryTracker& memory() { return memory_; }
  // Where the step records its phases (timeline.hpp); nullptr (the default) records nothing.
  Timeline* timeline() const { return timeline_; }
  void set_timeline(Timeline* t) { timeline_ = t; }
  // Counting allocation: every buffer of the step goes through here. Running out of memory is a
  // seqpar::Error naming the bytes, the category and what the back end already holds.
  void* allocate(std::int64_t bytes, MemCategory c);
  void deallocate(void* p, std::int64_t bytes, MemCategory c) noexcept;

  virtual void copy_to_host(void* host_dst, const void* src, std::size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* host_src, std::size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void zero(void* p, std::size_t bytes) = 0;
  virtual void synchronize() = 0;

  // Checkpoint offload (ALST): copies between device memory and host memory from a
  // MemCategory::host_offload allocation (pinned on CUDA) on a copy stream of their own, so they
  // overlap compute. A device-to-host copy first waits for the compute work queued so far (which
  // wrote its source). The CPU back end copies at once (memcpy) and its events are empty.
  enum class CopyDirection { to_host, to_device };
  using CopyEvent = std::shared_ptr<void>;  // the copy's completion; empty: already complete
  virtual CopyEvent copy_async(void* dst, const void* src, std::size_t bytes, CopyDirection dir) = 0;
  // Compute work queued after this call sees the copy done (the GPU waits, not the host).
  virtual void compute_waits_for(const CopyEvent& e) = 0;
  // The host waits for the copy: then its source may be freed or its host destination read.
  virtual void host_waits_for(const CopyEvent& e) = 0;

  // Ring overlap: communication runs on its own stream on the GPU; these order the two.
  // On the CPU the communicator's non-blocking calls give the overlap and these do nothing.
  virtual void* compute_stream() { return nullptr; }
  virtual void* comm_stream() { return nullptr; }
  // Where copy_async runs on the GPU (the timeline times offload copies there); null on the CPU.
  virtual void* copy_stream() { return nullptr; }
  virtual void comm_waits_for_compute() {}
  virtual void compute_waits_for_comm() {}

  // Row-major C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C; op(A) = A^T when trans_a
  // (A stored [k,m]), likewise B (stored [n,k]). In bf16 precision A and B are rounded to bf16
  // (copies; the fp32 inputs stay) and the product accumulates in fp32 into the fp32 C.
  virtual void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                    const float* b, float beta, float* c) = 0;
  virtual void add(float* y, const float* x, std::int64_t n) = 0;  // y += x
  virtual void scale(float* x, float alpha, std::int64_t n) = 0;

  virtual void embedding_forward(float* out, const int* tokens, const float* table, int tokens_n,
                                 int dim) = 0;
  virtual void embedding_backward(float* dtable, const float* dout, const int* tokens,
                                  int tokens_n, int dim) = 0;  // accumulates
  // rstd[t] = 1/sqrt(mean(x^2) + eps); out = x * rstd * w.
  virtual void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w,
                               int tokens_n, int dim, float eps) = 0;
  // Accumulates into dinp and dw.
  virtual void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp,
                                const float* w, const float* rstd, int tokens_n, int dim) = 0;
  // Rotary embedding in place on x [tokens, heads, head_dim] (pairs (2i, 2i+1)), angle
  // pos[t] * theta^(-2i/head_dim); inverse = the transpose rotation, which is its backward.
  virtual void rope(float* x, const int* pos, int tokens_n, int heads, int head_dim, float theta,
                    bool inverse) = 0;
  // out = silu(gate) * up.
  virtual void swiglu_forward(float* out, const float* gate, const float* up, std::int64_t n) = 0;
  virtual void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                               const float* up, std::int64_t n) = 0;
  // losses[t] = -log softmax(logits[t])[label[t]] (0 where label < 0); logits are overwritten
  // with dloss/dlogits = (softmax - onehot) * dscale (0 rows where label < 0).
  virtual void cross_entropy(float* losses, float* logits, const int* labels, int tokens_n,
                             int vocab, float dscale) = 0;
  virtual void adamw(float* param, const float* grad, float* m, float* v, std::int64_t n, float lr,
                     float beta1, float beta2, float eps, float weight_decay, int step) = 0;

  // Attention on one block (seqpar::ref semantics and layouts).
  virtual void attention_forward(const AttnShape& s, const float* q, const float* k,
                                 const float* v, float* o, float* lse) = 0;
  // Overwrites dq, dk, dv; o and lse may be the final merged ones (ring backward).
  virtual void attention_backward(const AttnShape& s, const float* q, const float* k,
                                  const float* v, const float* o, const float* lse,
                                  const float* dout, float* dq, float* dk, float* dv) = 0;
  // Merges a partial (o_part, lse_part) into (o, lse) in place.
  virtual void lse_merge(int batch, int seq_q, int heads, int head_dim, float* o, float* lse,
                         const float* o_part, const float* lse_part) = 0;
  // Ulysses reshards: [b,n,H,d] <-> [P][b,n,H/P,d] <-> [b,P*n,H/P,d].
  virtual void ulysses_pack(int p, int b, int n, int heads, int d, const float* in,
                            float* out) = 0;
  virtual void ulysses_unpack(int p, int b, int n, int heads, int d, const float* in,
                              float* out) = 0;
  virtual void ulysses_pack_reverse(int p, int b, int n, int heads, int d, const float* in,
                                    float* out) = 0;
  virtual void ulysses_unpack_reverse(int p, int b, int n, int heads, int d, const float* in,
                                      float* out) = 0;
  // Fused q, k, v (k, v with kv heads): one buffer [P][q chunk | k chunk | v chunk] for one all-to-all,
  // forward ([b,n,H,d] -> buffer -> [b,P*n,H/P,d]) and reverse (the gradients back).
  virtual void ulysses_pack_qkv(int p, int b, int n, int heads, int kv, int d, const float* q, const float* k,
                                const float* v, float* out) = 0;
  virtual void ulysses_unpack_qkv(int p, int b, int n, int heads, int kv, int d, const float* in, float* q,
                                  float* k, float* v) = 0;
  virtual void ulysses_pack_qkv_reverse(int p, int b, int n, int heads, int kv, int d, const float* dq,
                                        const float* dk, const float* dv, float* out) = 0;
  virtual void ulysses_unpack_qkv_reverse(int p, int b, int n, int heads, int kv, int d, const float* in,
                                          float* dq, float* dk, float* dv) = 0;
  // [b,n,kv,d] -> [b,n,kv*rep,d] and its adjoint (sums the replicas).
  virtual void replicate_kv_heads(int rep, int b, int n, int kv_heads, int d, const float* in,
                                  float* out) = 0;
  virtual void reduce_kv_heads(int rep, int b, int n, int kv_heads, int d, const float* in,
                               float* out) = 0;

 private:
  virtual void* raw_allocate(std::size_t bytes) = 0;
  virtual void raw_free(void* p) noexcept = 0;
  // Host memory for MemCategory::host_offload (pinned on CUDA, so copies run asynchronously).
  virtual void* raw_host_allocate(std::size_t bytes) = 0;
  virtual void raw_host_free(void* p) noexcept = 0;
  MemoryTracker memory_;
  Timeline* timeline_ = nullptr;
};

// fp32: plain fp32 everywhere (the validation reference); bf16: attention rounds its inputs and
// outputs to bf16 where the CUDA back end's kernels do, and GEMMs round their operands.
std::unique_ptr<Backend> make_cpu_backend(Precision p = Precision::fp32);
// CUDA builds only; throws seqpar::Error when no device is usable or CUDA is not built in.
// `engine`: the attention engine (nullopt: cudnn where available, else seqpar); cudnn where it is
// absent throws naming why.
std::unique_ptr<Backend> make_cuda_backend(int device,
                                           std::optional<kernels::AttentionEngine> engine = std::nullopt);
bool cuda_backend_built();

// A typed buffer owned through a back end's counting allocator.
template <class T>
class Array {
 public:
  Array() = default;
  Array(Backend& be, std::int64_t count, MemCategory c)
      : be_(&be), n_(count), cat_(c),
        p_(static_cast<T*>(be.allocate(count * static_cast<std::int64_t>(sizeof(T)), c))) {}
  ~Array() { reset(); }
  Array(Array&& o) noexcept { *this = std::move(o); }
  Array& operator=(Array&& o) noexcept {
    if (this != &o) {
      reset();
      be_ = std::exchange(o.be_, nullptr);
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
      cat_ = o.cat_;
    }
    return *this;
  }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;

  T* data() { return p_; }
  const T* data() const { return p_; }
  // Charges this buffer to another device category (the same memory, no copy): a layer input
  // that full checkpointing keeps becomes a checkpoint.
  void recharge(MemCategory c) {
    if (p_) {
      be_->memory().on_free(cat_, static_cast<std::int64_t>(bytes()));
      be_->memory().on_alloc(c, static_cast<std::int64_t>(bytes()));
    }
    cat_ = c;
  }
  std::int64_t size() const { return n_; }
  std::size_t bytes() const { return static_cast<std::size_t>(n_) * sizeof(T); }
  void reset() noexcept {
    if (p_) be_->deallocate(p_, n_ * static_cast<std::int64_t>(sizeof(T)), cat_);
    p_ = nullptr;
    n_ = 0;
  }

 private:
  Backend* be_ = nullptr;
  std::int64_t n_ = 0;
  MemCategory cat_ = MemCategory::working;
  T* p_ = nullptr;
};
using Floats = Array<float>;
using Ints = Array<int>;

}  // namespace seqpar::train

// The ops the model is written over, once: a CPU back end (plain loops + seqpar::ref attention)
// and a CUDA back end (cuBLAS GEMMs + seqpar kernels) implement the same interface.
// Layouts: activations [tokens, features] row-major; attention tensors as in seqpar::ref.
// Element types: activations and their gradients are stored in the back end's activation type
// (act_dtype(): bf16 under --precision bf16, fp32 in the validation mode) and reach the ops as Ref
// views that carry their type; parameters, their gradients, optimizer moments, RMSNorm's rstd, the
// LSE and the losses stay fp32 (float*). Every op computes in fp32 on the values it loads and
// rounds to nearest-even when it stores to a bf16 view.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "seqpar/core/dtype.hpp"
#include "seqpar/kernels/attention_engine.hpp"
#include "seqpar/kernels/attention_ref.hpp"
#include "seqpar/train/memory.hpp"
#include "seqpar/train/precision.hpp"

namespace seqpar::train {

class Timeline;  // timeline.hpp: the step's measured timeline

// A view of elements of type t (fp32, or bf16 as raw 16-bit words) at p. A float* converts to an
// fp32 view, so fp32 callers (the tests, the CPU references) pass their buffers as they are.
struct Ref {
  void* p = nullptr;
  DType t = DType::fp32;
  Ref() = default;
  Ref(void* ptr, DType type) : p(ptr), t(type) {}
  Ref(float* f) : p(f), t(DType::fp32) {}  // NOLINT(google-explicit-constructor): fp32 is the plain case
  // The view `elems` elements further on.
  Ref at(std::int64_t elems) const {
    return {static_cast<char*>(p) + elems * static_cast<std::int64_t>(dtype_size(t)), t};
  }
};
struct CRef {
  const void* p = nullptr;
  DType t = DType::fp32;
  CRef() = default;
  CRef(const void* ptr, DType type) : p(ptr), t(type) {}
  CRef(const float* f) : p(f), t(DType::fp32) {}  // NOLINT(google-explicit-constructor)
  CRef(Ref r) : p(r.p), t(r.t) {}                 // NOLINT(google-explicit-constructor)
  CRef at(std::int64_t elems) const {
    return {static_cast<const char*>(p) + elems * static_cast<std::int64_t>(dtype_size(t)), t};
  }
};

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
  // The type activations and their gradients are stored in: bf16 in bf16 precision, else fp32.
  DType act_dtype() const { return precision() == Precision::bf16 ? DType::bf16 : DType::fp32; }
  // The engine attention_forward/backward run on, as results record it ("attention_engine"): the
  // CPU back end has one attention, the reference; the CUDA back end runs seqpar or cudnn
  // (kernels/attention_engine.hpp).
  virtual std::string_view attention_engine() const { return "reference"; }
  // The library the GEMMs run on, as results record it ("gemm_library"): the CPU back end's
  // reference loops, or cuBLASLt / cublasGemmEx on the CUDA back end (SEQPAR_GEMM).
  virtual std::string_view gemm_library() const { return "reference"; }

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
  // (A stored [k,m]), likewise B (stored [n,k]). Products accumulate in fp32. In bf16 precision the
  // operands are bf16: a bf16 view as it is, an fp32 one rounded (a copy; the input stays). C is
  // fp32 or bf16 (rounded once, after alpha and beta).
  virtual void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, CRef a, CRef b,
                    float beta, Ref c) = 0;
  virtual void add(Ref y, CRef x, std::int64_t n) = 0;  // y += x
  virtual void scale(Ref x, float alpha, std::int64_t n) = 0;
  virtual void fill(float* x, float value, std::int64_t n) = 0;  // x = value (fp32: LSE, losses)
  // out = in, converted between element types (a plain copy when they match).
  virtual void convert(Ref out, CRef in, std::int64_t n) = 0;

  virtual void embedding_forward(Ref out, const int* tokens, const float* table, int tokens_n,
                                 int dim) = 0;
  virtual void embedding_backward(float* dtable, CRef dout, const int* tokens, int tokens_n,
                                  int dim) = 0;  // accumulates
  // rstd[t] = 1/sqrt(mean(x^2) + eps); out = x * rstd * w.
  virtual void rmsnorm_forward(Ref out, float* rstd, CRef inp, const float* w, int tokens_n,
                               int dim, float eps) = 0;
  // Accumulates into dinp and dw.
  virtual void rmsnorm_backward(Ref dinp, float* dw, CRef dout, CRef inp, const float* w,
                                const float* rstd, int tokens_n, int dim) = 0;
  // Rotary embedding in place on x [tokens, heads, head_dim] (pairs (2i, 2i+1)), angle
  // pos[t] * theta^(-2i/head_dim); inverse = the transpose rotation, which is its backward.
  virtual void rope(Ref x, const int* pos, int tokens_n, int heads, int head_dim, float theta,
                    bool inverse) = 0;
  // out = silu(gate) * up.
  virtual void swiglu_forward(Ref out, CRef gate, CRef up, std::int64_t n) = 0;
  virtual void swiglu_backward(Ref dgate, Ref dup, CRef dout, CRef gate, CRef up,
                               std::int64_t n) = 0;
  // losses[t] = -log softmax(logits[t])[label[t]] (0 where label < 0); logits are overwritten
  // with dloss/dlogits = (softmax - onehot) * dscale (0 rows where label < 0). A row's softmax is
  // computed in fp32 from its stored logits: bf16 logits are never held in fp32.
  virtual void cross_entropy(float* losses, Ref logits, const int* labels, int tokens_n,
                             int vocab, float dscale) = 0;
  // One fused AdamW pass over fp32 param, grad, m, v; when param_bf16 is given (a bf16 view) it
  // also writes the updated parameters rounded to bf16, the copy the GEMMs read.
  virtual void adamw(float* param, const float* grad, float* m, float* v, std::int64_t n, float lr,
                     float beta1, float beta2, float eps, float weight_decay, int step,
                     Ref param_bf16 = {}) = 0;

  // Attention on one block (seqpar::ref semantics and layouts); lse fp32.
  virtual void attention_forward(const AttnShape& s, CRef q, CRef k, CRef v, Ref o, float* lse) = 0;
  // Overwrites dq, dk, dv; o and lse may be the final merged ones (ring backward).
  virtual void attention_backward(const AttnShape& s, CRef q, CRef k, CRef v, CRef o,
                                  const float* lse, CRef dout, Ref dq, Ref dk, Ref dv) = 0;
  // Merges a partial (o_part, lse_part) into (o, lse) in place.
  virtual void lse_merge(int batch, int seq_q, int heads, int head_dim, Ref o, float* lse,
                         CRef o_part, const float* lse_part) = 0;
  // Ulysses reshards (element permutations: in and out of one type):
  // [b,n,H,d] <-> [P][b,n,H/P,d] <-> [b,P*n,H/P,d].
  virtual void ulysses_pack(int p, int b, int n, int heads, int d, CRef in, Ref out) = 0;
  virtual void ulysses_unpack(int p, int b, int n, int heads, int d, CRef in, Ref out) = 0;
  virtual void ulysses_pack_reverse(int p, int b, int n, int heads, int d, CRef in, Ref out) = 0;
  virtual void ulysses_unpack_reverse(int p, int b, int n, int heads, int d, CRef in, Ref out) = 0;
  // Fused q, k, v (k, v with kv heads): one buffer [P][q chunk | k chunk | v chunk] for one all-to-all,
  // forward ([b,n,H,d] -> buffer -> [b,P*n,H/P,d]) and reverse (the gradients back).
  virtual void ulysses_pack_qkv(int p, int b, int n, int heads, int kv, int d, CRef q, CRef k,
                                CRef v, Ref out) = 0;
  virtual void ulysses_unpack_qkv(int p, int b, int n, int heads, int kv, int d, CRef in, Ref q,
                                  Ref k, Ref v) = 0;
  virtual void ulysses_pack_qkv_reverse(int p, int b, int n, int heads, int kv, int d, CRef dq,
                                        CRef dk, CRef dv, Ref out) = 0;
  virtual void ulysses_unpack_qkv_reverse(int p, int b, int n, int heads, int kv, int d, CRef in,
                                          Ref dq, Ref dk, Ref dv) = 0;
  // [b,n,kv,d] -> [b,n,kv*rep,d] and its adjoint (sums the replicas in fp32).
  virtual void replicate_kv_heads(int rep, int b, int n, int kv_heads, int d, CRef in, Ref out) = 0;
  virtual void reduce_kv_heads(int rep, int b, int n, int kv_heads, int d, CRef in, Ref out) = 0;

 private:
  virtual void* raw_allocate(std::size_t bytes) = 0;
  virtual void raw_free(void* p) noexcept = 0;
  // Host memory for MemCategory::host_offload (pinned on CUDA, so copies run asynchronously).
  virtual void* raw_host_allocate(std::size_t bytes) = 0;
  virtual void raw_host_free(void* p) noexcept = 0;
  MemoryTracker memory_;
  Timeline* timeline_ = nullptr;
};

// fp32: plain fp32 everywhere (the validation reference); bf16: activations stored in bf16 and
// GEMM operands rounded to bf16, as the CUDA back end runs (fp32 accumulation in both).
std::unique_ptr<Backend> make_cpu_backend(Precision p = Precision::fp32);
// CUDA builds only; throws seqpar::Error when no device is usable or CUDA is not built in.
// `engine`: the attention engine (nullopt: cudnn where available, else seqpar); cudnn where it is
// absent throws naming why.
std::unique_ptr<Backend> make_cuda_backend(int device,
                                           std::optional<kernels::AttentionEngine> engine = std::nullopt);
bool cuda_backend_built();

// A buffer of `count` elements of one type, owned through a back end's counting allocator.
class Tensor {
 public:
  Tensor() = default;
  Tensor(Backend& be, std::int64_t count, DType t, MemCategory c);
  ~Tensor() { reset(); }
  Tensor(Tensor&& o) noexcept { *this = std::move(o); }
  Tensor& operator=(Tensor&& o) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  void* data() { return p_; }
  const void* data() const { return p_; }
  // Views from element `offset` on.
  Ref ref(std::int64_t offset = 0) { return Ref(p_, t_).at(offset); }
  CRef cref(std::int64_t offset = 0) const { return CRef(p_, t_).at(offset); }
  DType dtype() const { return t_; }
  MemCategory category() const { return cat_; }
  // Charges this buffer to another category of the same memory (no copy): a layer input that
  // full checkpointing keeps becomes a checkpoint.
  void recharge(MemCategory c);
  std::int64_t size() const { return n_; }
  std::size_t bytes() const { return static_cast<std::size_t>(n_) * dtype_size(t_); }
  void reset() noexcept;

 private:
  Backend* be_ = nullptr;
  std::int64_t n_ = 0;
  DType t_ = DType::fp32;
  MemCategory cat_ = MemCategory::working;
  void* p_ = nullptr;
};

// A Tensor of a fixed C++ element type (float: fp32, double: fp64, int: i32), with typed pointers.
template <class T>
class Array {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int>,
                "Array holds float, double or int elements");

 public:
  Array() = default;
  Array(Backend& be, std::int64_t count, MemCategory c) : t_(be, count, kType, c) {}
  T* data() { return static_cast<T*>(t_.data()); }
  const T* data() const { return static_cast<const T*>(t_.data()); }
  void recharge(MemCategory c) { t_.recharge(c); }
  std::int64_t size() const { return t_.size(); }
  std::size_t bytes() const { return t_.bytes(); }
  void reset() noexcept { t_.reset(); }

 private:
  static constexpr DType kType = std::is_same_v<T, float>    ? DType::fp32
                                 : std::is_same_v<T, double> ? DType::fp64
                                                             : DType::i32;
  Tensor t_;
};
using Floats = Array<float>;
using Ints = Array<int>;

// Activations are fp32 or bf16: anything else throws seqpar::Error naming `op` and the type.
void check_activation_type(DType t, const char* op);

// A device buffer of type t holding the host values (rounded to bf16 on the host when t is bf16),
// and the way back (widened to fp32): for inputs and results of activation type.
Tensor upload(Backend& be, const float* host, std::int64_t count, DType t, MemCategory c);
std::vector<float> download(Backend& be, CRef src, std::int64_t count);

}  // namespace seqpar::train

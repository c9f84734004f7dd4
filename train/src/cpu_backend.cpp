// CPU back end: the kernels layer's CPU references (seqpar::ref: layer ops, attention, reshards),
// the reference the CUDA back end is held to. In bf16 precision attention rounds what the CUDA back
// end hands its bf16 flash kernels (q, k, v; o and dO in the backward) and what they write (o,
// dq, dk, dv) to bf16, and every GEMM rounds its two operands to bf16 (fp32 accumulation and C),
// so a CPU run sees the GPU's rounding at the same places.
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "seqpar/kernels/attention_ref.hpp"
#include "seqpar/kernels/layer_ops_ref.hpp"
#include "seqpar/kernels/reshard_ref.hpp"
#include "seqpar/train/backend.hpp"

namespace seqpar::train {
namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(Precision p) : precision_(p) {}
  std::string_view name() const override { return "cpu"; }
  bool on_gpu() const override { return false; }
  Precision precision() const override { return precision_; }
  void set_precision(Precision p) override { precision_ = p; }

  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void copy_from_host(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) std::memmove(dst, src, bytes);
  }
  void zero(void* p, std::size_t bytes) override {
    if (bytes) std::memset(p, 0, bytes);
  }
  void synchronize() override {}

  // Everything runs in order on the calling thread: a copy is done when it returns.
  CopyEvent copy_async(void* dst, const void* src, std::size_t bytes, CopyDirection) override {
    if (bytes) std::memcpy(dst, src, bytes);
    return {};
  }
  void compute_waits_for(const CopyEvent&) override {}
  void host_waits_for(const CopyEvent&) override {}

  // The dense ops are the kernels layer's CPU references (layer_ops_ref.hpp), the same code the
  // GPU layer ops are tested against.
  // In bf16 the operands are rounded as the CUDA back end's bf16 GEMM takes them (autocast: bf16
  // copies of fp32 activations and master weights); the products of two bf16 values are exact in
  // fp32, so what is left is fp32 accumulation and an fp32 C, as there.
  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b,
            float beta, float* c) override {
    if (precision_ == Precision::bf16) {
      const std::int64_t na = std::int64_t{m} * k, nb = std::int64_t{k} * n;
      a = rounded(kGemmA, a, na);
      b = rounded(kGemmB, b, nb);
    }
    ref::layer_ops::gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
  }
  void add(float* y, const float* x, std::int64_t n) override { ref::layer_ops::add(y, x, n); }
  void scale(float* x, float alpha, std::int64_t n) override { ref::layer_ops::scale(x, alpha, n); }

  void embedding_forward(float* out, const int* tokens, const float* table, int tokens_n,
                         int dim) override {
    ref::layer_ops::embedding_forward(out, tokens, table, tokens_n, dim);
  }
  void embedding_backward(float* dtable, const float* dout, const int* tokens, int tokens_n,
                          int dim) override {
    ref::layer_ops::embedding_backward(dtable, dout, tokens, tokens_n, dim);
  }
  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int tokens_n,
                       int dim, float eps) override {
    ref::layer_ops::rmsnorm_forward(out, rstd, inp, w, tokens_n, dim, eps);
  }
  void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp,
                        const float* w, const float* rstd, int tokens_n, int dim) override {
    ref::layer_ops::rmsnorm_backward(dinp, dw, dout, inp, w, rstd, tokens_n, dim);
  }
  void rope(float* x, const int* pos, int tokens_n, int heads, int head_dim, float theta,
            bool inverse) override {
    ref::layer_ops::rope(x, pos, tokens_n, heads, head_dim, theta, inverse);
  }
  void swiglu_forward(float* out, const float* gate, const float* up, std::int64_t n) override {
    ref::layer_ops::swiglu_forward(out, gate, up, n);
  }
  void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                       const float* up, std::int64_t n) override {
    ref::layer_ops::swiglu_backward(dgate, dup, dout, gate, up, n);
  }
  void cross_entropy(float* losses, float* logits, const int* labels, int tokens_n, int vocab,
                     float dscale) override {
    ref::layer_ops::cross_entropy(losses, logits, labels, tokens_n, vocab, dscale);
  }
  void adamw(float* param, const float* grad, float* m, float* v, std::int64_t n, float lr,
             float beta1, float beta2, float eps, float weight_decay, int step) override {
    ref::layer_ops::adamw(param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, step);
  }

  void attention_forward(const AttnShape& s, const float* q, const float* k, const float* v,
                         float* o, float* lse) override {
    if (precision_ == Precision::fp32) {
      ref::attention_forward(s, q, k, v, o, lse);
      return;
    }
    const std::int64_t nq = q_elems(s), nk = k_elems(s);
    const float* q16 = rounded(0, q, nq);
    const float* k16 = rounded(1, k, nk);
    const float* v16 = rounded(2, v, nk);
    ref::attention_forward(s, q16, k16, v16, o, lse);  // lse stays fp32, as the kernels write it
    round_to_bf16(o, nq);
  }
  void attention_backward(const AttnShape& s, const float* q, const float* k, const float* v,
                          const float* o, const float* lse, const float* dout, float* dq,
                          float* dk, float* dv) override {
    if (precision_ == Precision::fp32) {
      ref::attention_backward(s, q, k, v, o, lse, dout, dq, dk, dv);
      return;
    }
    const std::int64_t nq = q_elems(s), nk = k_elems(s);
    ref::attention_backward(s, rounded(0, q, nq), rounded(1, k, nk), rounded(2, v, nk),
                            rounded(3, o, nq), lse, rounded(4, dout, nq), dq, dk, dv);
    round_to_bf16(dq, nq);
    round_to_bf16(dk, nk);
    round_to_bf16(dv, nk);
  }
  void lse_merge(int batch, int seq_q, int heads, int head_dim, float* o, float* lse,
                 const float* o_part, const float* lse_part) override {
    ref::lse_merge(batch, seq_q, heads, head_dim, o, lse, o_part, lse_part);
  }
  void ulysses_pack(int p, int b, int n, int heads, int d, const float* in, float* out) override {
    ref::ulysses_pack(p, b, n, heads, d, in, out);
  }
  void ulysses_unpack(int p, int b, int n, int heads, int d, const float* in,
                      float* out) override {
    ref::ulysses_unpack(p, b, n, heads, d, in, out);
  }
  void ulysses_pack_reverse(int p, int b, int n, int heads, int d, const float* in,
                            float* out) override {
    ref::ulysses_pack_reverse(p, b, n, heads, d, in, out);
  }
  void ulysses_unpack_reverse(int p, int b, int n, int heads, int d, const float* in,
                              float* out) override {
    ref::ulysses_unpack_reverse(p, b, n, heads, d, in, out);
  }
  void ulysses_pack_qkv(int p, int b, int n, int heads, int kv, int d, const float* q, const float* k,
                        const float* v, float* out) override {
    ref::ulysses_pack_qkv(p, b, n, heads, kv, d, q, k, v, out);
  }
  void ulysses_unpack_qkv(int p, int b, int n, int heads, int kv, int d, const float* in, float* q, float* k,
                          float* v) override {
    ref::ulysses_unpack_qkv(p, b, n, heads, kv, d, in, q, k, v);
  }
  void ulysses_pack_qkv_reverse(int p, int b, int n, int heads, int kv, int d, const float* dq, const float* dk,
                                const float* dv, float* out) override {
    ref::ulysses_pack_qkv_reverse(p, b, n, heads, kv, d, dq, dk, dv, out);
  }
  void ulysses_unpack_qkv_reverse(int p, int b, int n, int heads, int kv, int d, const float* in, float* dq,
                                  float* dk, float* dv) override {
    ref::ulysses_unpack_qkv_reverse(p, b, n, heads, kv, d, in, dq, dk, dv);
  }
  void replicate_kv_heads(int rep, int b, int n, int kv_heads, int d, const float* in,
                          float* out) override {
    ref::replicate_kv_heads(rep, b, n, kv_heads, d, in, out);
  }
  void reduce_kv_heads(int rep, int b, int n, int kv_heads, int d, const float* in,
                       float* out) override {
    ref::reduce_kv_heads(rep, b, n, kv_heads, d, in, out);
  }

 private:
  // A bf16-rounded copy of an input in scratch slot i (the inputs themselves stay fp32, as the
  // CUDA back end converts into its own bf16 buffers). Plain host vectors: scratch, like the
  // CUDA back end's grow-only slots, but not charged to the tracker since it is emulation only.
  const float* rounded(std::size_t i, const float* x, std::int64_t n) {
    std::vector<float>& buf = scratch_[i];
    buf.assign(x, x + n);
    round_to_bf16(buf.data(), n);
    return buf.data();
  }

  void* raw_allocate(std::size_t bytes) override {
    // 64-byte alignment: cache lines, and what vector loads in the reference loops like.
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void raw_free(void* p) noexcept override { std::free(p); }
  // Device and host memory are the same here; the category alone tells them apart.
  void* raw_host_allocate(std::size_t bytes) override { return raw_allocate(bytes); }
  void raw_host_free(void* p) noexcept override { std::free(p); }

  Precision precision_;
  // Slots 0-4: attention's q, k, v, o, dO; then the GEMM's two operands.
  static constexpr std::size_t kGemmA = 5, kGemmB = 6;
  std::vector<float> scratch_[7];
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(Precision p) { return std::make_unique<CpuBackend>(p); }

}  // namespace seqpar::train

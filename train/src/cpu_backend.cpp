// CPU back end: the kernels layer's CPU references (seqpar::ref: layer ops, attention, reshards),
// the reference the CUDA back end is held to. Every op widens its inputs to fp32, runs the fp32
// reference and stores its outputs in their views' types, rounding to bf16 where a view is bf16, so
// a bf16-precision run stores what the CUDA back end stores. In bf16 precision the GEMM operands and
// attention's inputs and outputs are also bf16 where an fp32 view reaches them (rounded copies), as
// the GPU's bf16 kernels see them; products of bf16 values are exact in fp32, so what is left is
// fp32 accumulation, as there.
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "seqpar/core/bf16.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/kernels/attention_ref.hpp"
#include "seqpar/kernels/layer_ops_ref.hpp"
#include "seqpar/kernels/reshard_ref.hpp"
#include "seqpar/train/backend.hpp"

namespace seqpar::train {
namespace {

// An input view as fp32 values: an fp32 view's own memory, or a bf16 view widened into a copy
// (rounded to bf16 first when `round` asks for bf16 operands and the view is fp32).
class In {
 public:
  In(CRef r, std::int64_t n, const char* op, bool round = false) {
    check_activation_type(r.t, op);
    if (r.t == DType::fp32 && !round) {
      p_ = static_cast<const float*>(r.p);
      return;
    }
    buf_.resize(static_cast<std::size_t>(n));
    if (r.t == DType::fp32) {
      std::memcpy(buf_.data(), r.p, buf_.size() * sizeof(float));
      round_to_bf16(buf_.data(), n);
    } else {
      const auto* w = static_cast<const std::uint16_t*>(r.p);
      for (std::size_t i = 0; i < buf_.size(); ++i) buf_[i] = bf16_to_float(w[i]);
    }
    p_ = buf_.data();
  }
  operator const float*() const { return p_; }  // NOLINT(google-explicit-constructor)

 private:
  const float* p_ = nullptr;
  std::vector<float> buf_;
};

// An output view as fp32 values: an fp32 view's own memory, or for a bf16 view a copy (holding the
// old values when the op reads them: accumulating and in-place ops) that is stored back rounded
// when this goes out of scope. `round`: an fp32 view is rounded to bf16 values too (bf16 kernels'
// outputs in bf16 precision).
class Out {
 public:
  Out(Ref r, std::int64_t n, const char* op, bool reads_old, bool round = false)
      : r_(r), n_(n), round_(round) {
    check_activation_type(r.t, op);
    if (r.t == DType::fp32) return;
    buf_.resize(static_cast<std::size_t>(n));
    if (reads_old) {
      const auto* w = static_cast<const std::uint16_t*>(r.p);
      for (std::size_t i = 0; i < buf_.size(); ++i) buf_[i] = bf16_to_float(w[i]);
    }
  }
  ~Out() {
    if (r_.t == DType::fp32) {
      if (round_) round_to_bf16(static_cast<float*>(r_.p), n_);
      return;
    }
    auto* w = static_cast<std::uint16_t*>(r_.p);
    for (std::size_t i = 0; i < buf_.size(); ++i) w[i] = float_to_bf16(buf_[i]);
  }
  Out(const Out&) = delete;
  Out& operator=(const Out&) = delete;
  operator float*() { return r_.t == DType::fp32 ? static_cast<float*>(r_.p) : buf_.data(); }  // NOLINT

 private:
  Ref r_;
  std::int64_t n_;
  bool round_;
  std::vector<float> buf_;
};

// Reshards move elements: in and out must be of one type (as the GPU kernels require).
void check_same_type(DType a, DType b, const char* op) {
  if (a != b)
    throw Error(fmt::format("{}: input {} and output {}: a reshard moves elements of one type", op, to_string(a),
                            to_string(b)));
}

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
  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, CRef a, CRef b, float beta, Ref c) override {
    const bool bf16 = precision_ == Precision::bf16;
    const In a32(a, std::int64_t{m} * k, "gemm", bf16), b32(b, std::int64_t{k} * n, "gemm", bf16);
    Out c32(c, std::int64_t{m} * n, "gemm", beta != 0.0f);
    ref::layer_ops::gemm(ta, tb, m, n, k, alpha, a32, b32, beta, c32);
  }
  void add(Ref y, CRef x, std::int64_t n) override {
    Out y32(y, n, "add", true);
    ref::layer_ops::add(y32, In(x, n, "add"), n);
  }
  void scale(Ref x, float alpha, std::int64_t n) override {
    Out x32(x, n, "scale", true);
    ref::layer_ops::scale(x32, alpha, n);
  }
  void fill(float* x, float value, std::int64_t n) override { ref::layer_ops::fill(x, value, n); }
  void convert(Ref out, CRef in, std::int64_t n) override {
    const In in32(in, n, "convert");
    Out out32(out, n, "convert", false);
    if (n > 0) std::memmove(static_cast<float*>(out32), static_cast<const float*>(in32), static_cast<std::size_t>(n) * sizeof(float));
  }

  void embedding_forward(Ref out, const int* tokens, const float* table, int tokens_n, int dim) override {
    Out o(out, std::int64_t{tokens_n} * dim, "embedding_forward", false);
    ref::layer_ops::embedding_forward(o, tokens, table, tokens_n, dim);
  }
  void embedding_backward(float* dtable, CRef dout, const int* tokens, int tokens_n, int dim) override {
    ref::layer_ops::embedding_backward(dtable, In(dout, std::int64_t{tokens_n} * dim, "embedding_backward"), tokens,
                                       tokens_n, dim);
  }
  void rmsnorm_forward(Ref out, float* rstd, CRef inp, const float* w, int tokens_n, int dim, float eps) override {
    const std::int64_t n = std::int64_t{tokens_n} * dim;
    const In x(inp, n, "rmsnorm_forward");
    Out o(out, n, "rmsnorm_forward", false);
    ref::layer_ops::rmsnorm_forward(o, rstd, x, w, tokens_n, dim, eps);
  }
  void rmsnorm_backward(Ref dinp, float* dw, CRef dout, CRef inp, const float* w, const float* rstd, int tokens_n,
                        int dim) override {
    const std::int64_t n = std::int64_t{tokens_n} * dim;
    const In dy(dout, n, "rmsnorm_backward"), x(inp, n, "rmsnorm_backward");
    Out dx(dinp, n, "rmsnorm_backward", true);
    ref::layer_ops::rmsnorm_backward(dx, dw, dy, x, w, rstd, tokens_n, dim);
  }
  void rope(Ref x, const int* pos, int tokens_n, int heads, int head_dim, float theta, bool inverse) override {
    Out x32(x, std::int64_t{tokens_n} * heads * head_dim, "rope", true);
    ref::layer_ops::rope(x32, pos, tokens_n, heads, head_dim, theta, inverse);
  }
  void swiglu_forward(Ref out, CRef gate, CRef up, std::int64_t n) override {
    const In g(gate, n, "swiglu_forward"), u(up, n, "swiglu_forward");
    Out o(out, n, "swiglu_forward", false);
    ref::layer_ops::swiglu_forward(o, g, u, n);
  }
  void swiglu_backward(Ref dgate, Ref dup, CRef dout, CRef gate, CRef up, std::int64_t n) override {
    const In dy(dout, n, "swiglu_backward"), g(gate, n, "swiglu_backward"), u(up, n, "swiglu_backward");
    Out dg(dgate, n, "swiglu_backward", false), du(dup, n, "swiglu_backward", false);
    ref::layer_ops::swiglu_backward(dg, du, dy, g, u, n);
  }
  void cross_entropy(float* losses, Ref logits, const int* labels, int tokens_n, int vocab, float dscale) override {
    Out z(logits, std::int64_t{tokens_n} * vocab, "cross_entropy", true);
    ref::layer_ops::cross_entropy(losses, z, labels, tokens_n, vocab, dscale);
  }
  void adamw(float* param, const float* grad, float* m, float* v, std::int64_t n, float lr, float beta1, float beta2,
             float eps, float weight_decay, int step, Ref param_bf16) override {
    ref::layer_ops::adamw(param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, step);
    if (!param_bf16.p) return;
    if (param_bf16.t != DType::bf16)
      throw Error(fmt::format("adamw: the parameters' low-precision copy is {}: it must be bf16", to_string(param_bf16.t)));
    auto* w = static_cast<std::uint16_t*>(param_bf16.p);
    for (std::int64_t i = 0; i < n; ++i) w[i] = float_to_bf16(param[i]);
  }

  // In bf16 precision attention sees bf16 q, k, v (o and dO in the backward) and writes bf16
  // outputs, as the GPU engines do; the LSE stays fp32, as they write it.
  void attention_forward(const AttnShape& s, CRef q, CRef k, CRef v, Ref o, float* lse) override {
    const bool bf16 = precision_ == Precision::bf16;
    const std::int64_t nq = q_elems(s), nk = k_elems(s);
    const char* op = "attention_forward";
    const In q32(q, nq, op, bf16), k32(k, nk, op, bf16), v32(v, nk, op, bf16);
    Out o32(o, nq, op, false, bf16);
    ref::attention_forward(s, q32, k32, v32, o32, lse);
  }
  void attention_backward(const AttnShape& s, CRef q, CRef k, CRef v, CRef o, const float* lse, CRef dout, Ref dq,
                          Ref dk, Ref dv) override {
    const bool bf16 = precision_ == Precision::bf16;
    const std::int64_t nq = q_elems(s), nk = k_elems(s);
    const char* op = "attention_backward";
    const In q32(q, nq, op, bf16), k32(k, nk, op, bf16), v32(v, nk, op, bf16), o32(o, nq, op, bf16),
        do32(dout, nq, op, bf16);
    Out dq32(dq, nq, op, false, bf16), dk32(dk, nk, op, false, bf16), dv32(dv, nk, op, false, bf16);
    ref::attention_backward(s, q32, k32, v32, o32, lse, do32, dq32, dk32, dv32);
  }
  void lse_merge(int batch, int seq_q, int heads, int head_dim, Ref o, float* lse, CRef o_part,
                 const float* lse_part) override {
    const std::int64_t n = std::int64_t{batch} * seq_q * heads * head_dim;
    Out o32(o, n, "lse_merge", true);
    ref::lse_merge(batch, seq_q, heads, head_dim, o32, lse, In(o_part, n, "lse_merge"), lse_part);
  }

  // The reshards: fp32 views as they are; bf16 ones widened and narrowed again, which is exact.
  void ulysses_pack(int p, int b, int n, int heads, int d, CRef in, Ref out) override {
    const std::int64_t e = std::int64_t{b} * n * heads * d;
    reshard("ulysses_pack", in, e, out, e, [&](const float* x, float* y) { ref::ulysses_pack(p, b, n, heads, d, x, y); });
  }
  void ulysses_unpack(int p, int b, int n, int heads, int d, CRef in, Ref out) override {
    const std::int64_t e = std::int64_t{b} * n * heads * d;
    reshard("ulysses_unpack", in, e, out, e,
            [&](const float* x, float* y) { ref::ulysses_unpack(p, b, n, heads, d, x, y); });
  }
  void ulysses_pack_reverse(int p, int b, int n, int heads, int d, CRef in, Ref out) override {
    const std::int64_t e = std::int64_t{b} * n * heads * d;
    reshard("ulysses_pack_reverse", in, e, out, e,
            [&](const float* x, float* y) { ref::ulysses_pack_reverse(p, b, n, heads, d, x, y); });
  }
  void ulysses_unpack_reverse(int p, int b, int n, int heads, int d, CRef in, Ref out) override {
    const std::int64_t e = std::int64_t{b} * n * heads * d;
    reshard("ulysses_unpack_reverse", in, e, out, e,
            [&](const float* x, float* y) { ref::ulysses_unpack_reverse(p, b, n, heads, d, x, y); });
  }
  void ulysses_pack_qkv(int p, int b, int n, int heads, int kv, int d, CRef q, CRef k, CRef v, Ref out) override {
    const char* op = "ulysses_pack_qkv";
    const std::int64_t eq = std::int64_t{b} * n * heads * d, ek = std::int64_t{b} * n * kv * d;
    for (DType t : {q.t, k.t, v.t}) check_same_type(t, out.t, op);
    Out o(out, eq + 2 * ek, op, false);
    ref::ulysses_pack_qkv(p, b, n, heads, kv, d, In(q, eq, op), In(k, ek, op), In(v, ek, op), o);
  }
  void ulysses_unpack_qkv(int p, int b, int n, int heads, int kv, int d, CRef in, Ref q, Ref k, Ref v) override {
    const char* op = "ulysses_unpack_qkv";
    const std::int64_t eq = std::int64_t{b} * n * heads * d, ek = std::int64_t{b} * n * kv * d;
    for (DType t : {q.t, k.t, v.t}) check_same_type(in.t, t, op);
    Out oq(q, eq, op, false), ok(k, ek, op, false), ov(v, ek, op, false);
    ref::ulysses_unpack_qkv(p, b, n, heads, kv, d, In(in, eq + 2 * ek, op), oq, ok, ov);
  }
  void ulysses_pack_qkv_reverse(int p, int b, int n, int heads, int kv, int d, CRef dq, CRef dk, CRef dv,
                                Ref out) override {
    const char* op = "ulysses_pack_qkv_reverse";
    const std::int64_t eq = std::int64_t{b} * n * heads * d, ek = std::int64_t{b} * n * kv * d;
    for (DType t : {dq.t, dk.t, dv.t}) check_same_type(t, out.t, op);
    Out o(out, eq + 2 * ek, op, false);
    ref::ulysses_pack_qkv_reverse(p, b, n, heads, kv, d, In(dq, eq, op), In(dk, ek, op), In(dv, ek, op), o);
  }
  void ulysses_unpack_qkv_reverse(int p, int b, int n, int heads, int kv, int d, CRef in, Ref dq, Ref dk,
                                  Ref dv) override {
    const char* op = "ulysses_unpack_qkv_reverse";
    const std::int64_t eq = std::int64_t{b} * n * heads * d, ek = std::int64_t{b} * n * kv * d;
    for (DType t : {dq.t, dk.t, dv.t}) check_same_type(in.t, t, op);
    Out oq(dq, eq, op, false), ok(dk, ek, op, false), ov(dv, ek, op, false);
    ref::ulysses_unpack_qkv_reverse(p, b, n, heads, kv, d, In(in, eq + 2 * ek, op), oq, ok, ov);
  }
  void replicate_kv_heads(int rep, int b, int n, int kv_heads, int d, CRef in, Ref out) override {
    const std::int64_t e = std::int64_t{b} * n * kv_heads * d;
    reshard("replicate_kv_heads", in, e, out, e * rep,
            [&](const float* x, float* y) { ref::replicate_kv_heads(rep, b, n, kv_heads, d, x, y); });
  }
  void reduce_kv_heads(int rep, int b, int n, int kv_heads, int d, CRef in, Ref out) override {
    const std::int64_t e = std::int64_t{b} * n * kv_heads * d;
    reshard("reduce_kv_heads", in, e * rep, out, e,
            [&](const float* x, float* y) { ref::reduce_kv_heads(rep, b, n, kv_heads, d, x, y); });
  }

 private:
  // One reshard through its fp32 reference f(in, out): in (n_in elements) and out (n_out) of one type.
  template <class F>
  static void reshard(const char* op, CRef in, std::int64_t n_in, Ref out, std::int64_t n_out, F&& f) {
    check_same_type(in.t, out.t, op);
    const In x(in, n_in, op);
    Out y(out, n_out, op, false);
    f(x, y);
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
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(Precision p) { return std::make_unique<CpuBackend>(p); }

}  // namespace seqpar::train

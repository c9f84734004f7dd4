// CPU back end: plain loops written for clarity (the reference the CUDA back end is held to),
// attention and reshards from seqpar::ref. In bf16 precision attention rounds what the CUDA back
// end hands its bf16 flash kernels (q, k, v; o and dO in the backward) and what they write (o,
// dq, dk, dv) to bf16, so a CPU run sees the GPU's rounding at the same places.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "seqpar/kernels/attention_ref.hpp"
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

  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b,
            float beta, float* c) override {
    std::vector<float> row(static_cast<std::size_t>(n));
    for (int i = 0; i < m; ++i) {
      std::fill(row.begin(), row.end(), 0.0f);
      if (!ta && tb) {  // the forward of a linear layer: dot products of contiguous rows
        const float* ai = a + static_cast<std::int64_t>(i) * k;
        for (int j = 0; j < n; ++j) {
          const float* bj = b + static_cast<std::int64_t>(j) * k;
          float acc = 0.0f;
          for (int l = 0; l < k; ++l) acc += ai[l] * bj[l];
          row[j] = acc;
        }
      } else {
        for (int l = 0; l < k; ++l) {
          const float av = ta ? a[static_cast<std::int64_t>(l) * m + i]
                              : a[static_cast<std::int64_t>(i) * k + l];
          if (av == 0.0f) continue;
          if (!tb) {
            const float* bl = b + static_cast<std::int64_t>(l) * n;
            for (int j = 0; j < n; ++j) row[j] += av * bl[j];
          } else {
            for (int j = 0; j < n; ++j) row[j] += av * b[static_cast<std::int64_t>(j) * k + l];
          }
        }
      }
      float* ci = c + static_cast<std::int64_t>(i) * n;
      for (int j = 0; j < n; ++j) ci[j] = alpha * row[j] + (beta == 0.0f ? 0.0f : beta * ci[j]);
    }
  }

  void add(float* y, const float* x, std::int64_t n) override {
    for (std::int64_t i = 0; i < n; ++i) y[i] += x[i];
  }
  void scale(float* x, float alpha, std::int64_t n) override {
    for (std::int64_t i = 0; i < n; ++i) x[i] *= alpha;
  }

  void embedding_forward(float* out, const int* tokens, const float* table, int tokens_n,
                         int dim) override {
    for (int t = 0; t < tokens_n; ++t)
      std::memcpy(out + static_cast<std::int64_t>(t) * dim,
                  table + static_cast<std::int64_t>(tokens[t]) * dim, sizeof(float) * dim);
  }
  void embedding_backward(float* dtable, const float* dout, const int* tokens, int tokens_n,
                          int dim) override {
    for (int t = 0; t < tokens_n; ++t) {
      float* row = dtable + static_cast<std::int64_t>(tokens[t]) * dim;
      const float* g = dout + static_cast<std::int64_t>(t) * dim;
      for (int i = 0; i < dim; ++i) row[i] += g[i];
    }
  }

  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int tokens_n,
                       int dim, float eps) override {
    for (int t = 0; t < tokens_n; ++t) {
      const float* x = inp + static_cast<std::int64_t>(t) * dim;
      double ss = 0.0;
      for (int i = 0; i < dim; ++i) ss += static_cast<double>(x[i]) * x[i];
      const float r = static_cast<float>(1.0 / std::sqrt(ss / dim + eps));
      float* y = out + static_cast<std::int64_t>(t) * dim;
      for (int i = 0; i < dim; ++i) y[i] = x[i] * r * w[i];
      rstd[t] = r;
    }
  }
  void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp,
                        const float* w, const float* rstd, int tokens_n, int dim) override {
    for (int t = 0; t < tokens_n; ++t) {
      const std::int64_t o = static_cast<std::int64_t>(t) * dim;
      const float r = rstd[t];
      double dot = 0.0;  // sum_i dout_i w_i x_i
      for (int i = 0; i < dim; ++i) dot += static_cast<double>(dout[o + i]) * w[i] * inp[o + i];
      const float c = static_cast<float>(dot) * r * r * r / static_cast<float>(dim);
      for (int i = 0; i < dim; ++i) {
        dinp[o + i] += dout[o + i] * w[i] * r - inp[o + i] * c;
        dw[i] += dout[o + i] * inp[o + i] * r;
      }
    }
  }

  void rope(float* x, const int* pos, int tokens_n, int heads, int head_dim, float theta,
            bool inverse) override {
    const int half = head_dim / 2;
    for (int t = 0; t < tokens_n; ++t) {
      for (int i = 0; i < half; ++i) {
        const double freq = std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
        const double ang = pos[t] * freq;
        const float c = static_cast<float>(std::cos(ang));
        const float s = static_cast<float>(inverse ? -std::sin(ang) : std::sin(ang));
        for (int h = 0; h < heads; ++h) {
          float* p = x + (static_cast<std::int64_t>(t) * heads + h) * head_dim + 2 * i;
          const float x0 = p[0], x1 = p[1];
          p[0] = x0 * c - x1 * s;
          p[1] = x0 * s + x1 * c;
        }
      }
    }
  }

  void swiglu_forward(float* out, const float* gate, const float* up, std::int64_t n) override {
    for (std::int64_t i = 0; i < n; ++i) {
      const float sg = 1.0f / (1.0f + std::exp(-gate[i]));
      out[i] = gate[i] * sg * up[i];
    }
  }
  void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                       const float* up, std::int64_t n) override {
    for (std::int64_t i = 0; i < n; ++i) {
      const float g = gate[i];
      const float sg = 1.0f / (1.0f + std::exp(-g));
      const float silu = g * sg;
      dgate[i] = dout[i] * up[i] * sg * (1.0f + g * (1.0f - sg));
      dup[i] = dout[i] * silu;
    }
  }

  void cross_entropy(float* losses, float* logits, const int* labels, int tokens_n, int vocab,
                     float dscale) override {
    for (int t = 0; t < tokens_n; ++t) {
      float* z = logits + static_cast<std::int64_t>(t) * vocab;
      if (labels[t] < 0) {
        losses[t] = 0.0f;
        std::fill(z, z + vocab, 0.0f);
        continue;
      }
      const float mx = *std::max_element(z, z + vocab);
      double sum = 0.0;
      for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(z[i] - mx));
      const double log_sum = std::log(sum) + mx;
      losses[t] = static_cast<float>(log_sum - z[labels[t]]);
      for (int i = 0; i < vocab; ++i) {
        const double p = std::exp(static_cast<double>(z[i]) - log_sum);
        z[i] = static_cast<float>((p - (i == labels[t] ? 1.0 : 0.0)) * dscale);
      }
    }
  }

  void adamw(float* param, const float* grad, float* m, float* v, std::int64_t n, float lr,
             float beta1, float beta2, float eps, float weight_decay, int step) override {
    const float c1 = 1.0f - std::pow(beta1, static_cast<float>(step));
    const float c2 = 1.0f - std::pow(beta2, static_cast<float>(step));
    for (std::int64_t i = 0; i < n; ++i) {
      m[i] = beta1 * m[i] + (1.0f - beta1) * grad[i];
      v[i] = beta2 * v[i] + (1.0f - beta2) * grad[i] * grad[i];
      const float mhat = m[i] / c1, vhat = v[i] / c2;
      param[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + weight_decay * param[i]);
    }
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

  Precision precision_;
  std::vector<float> scratch_[5];
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(Precision p) { return std::make_unique<CpuBackend>(p); }

}  // namespace seqpar::train

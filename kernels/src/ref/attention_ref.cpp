#include "seqpar/kernels/attention_ref.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "seqpar/core/doc_work.hpp"
#include "seqpar/core/error.hpp"

namespace seqpar::ref {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Index helpers for the documented layouts.
struct Index {
  const AttentionShape& s;
  std::int64_t q(std::int64_t b, std::int64_t i, std::int64_t h) const {
    return ((b * s.seq_q + i) * s.heads + h) * s.head_dim;
  }
  std::int64_t kv(std::int64_t b, std::int64_t j, std::int64_t h) const {
    return ((b * s.seq_k + j) * s.kv_heads + h) * s.head_dim;
  }
  std::int64_t lse(std::int64_t b, std::int64_t h, std::int64_t i) const { return (b * s.heads + h) * s.seq_q + i; }
  int kv_head(int h) const { return h / (s.heads / s.kv_heads); }
};

template <typename T>
double dot(const T* a, const T* b, int n) {
  double sum = 0;
  for (int e = 0; e < n; ++e) sum += static_cast<double>(a[e]) * static_cast<double>(b[e]);
  return sum;
}

// Computes in float64 whatever the storage type T.
template <typename T>
void forward(const AttentionShape& s, const T* q, const T* k, const T* v, T* o, T* lse) {
  validate(s);
  const Index at{s};
  const double scale = effective_scale(s);
  const int d = s.head_dim;
  std::vector<double> score(static_cast<std::size_t>(s.seq_k)), acc(static_cast<std::size_t>(d));
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h)
      for (int i = 0; i < s.seq_q; ++i) {
        const T* qi = q + at.q(b, i, h);
        double m = kNegInf;
        for (int j = 0; j < s.seq_k; ++j) {
          score[j] = visible(s, i, j) ? scale * dot(qi, k + at.kv(b, j, at.kv_head(h)), d) : kNegInf;
          m = std::max(m, score[j]);
        }
        T* oi = o + at.q(b, i, h);
        if (m == kNegInf) {  // sees no key
          std::fill_n(oi, d, T(0));
          lse[at.lse(b, h, i)] = static_cast<T>(kNegInf);
          continue;
        }
        double l = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int j = 0; j < s.seq_k; ++j) {
          if (score[j] == kNegInf) continue;
          const double p = std::exp(score[j] - m);
          l += p;
          const T* vj = v + at.kv(b, j, at.kv_head(h));
          for (int e = 0; e < d; ++e) acc[e] += p * static_cast<double>(vj[e]);
        }
        for (int e = 0; e < d; ++e) oi[e] = static_cast<T>(acc[e] / l);
        lse[at.lse(b, h, i)] = static_cast<T>(m + std::log(l));
      }
}

// P = exp(scale * q.k - lse), dV = P^T dO, dP = dO V^T, dS = P * (dP - D), D = rowsum(dO * O),
// dQ = scale * dS K, dK = scale * dS^T Q.
template <typename T>
void backward(const AttentionShape& s, const T* q, const T* k, const T* v, const T* o, const T* lse,
              const T* dout, T* dq, T* dk, T* dv) {
  validate(s);
  const Index at{s};
  const double scale = effective_scale(s);
  const int d = s.head_dim;
  const std::size_t nq = static_cast<std::size_t>(s.batch) * s.seq_q * s.heads * d;
  const std::size_t nk = static_cast<std::size_t>(s.batch) * s.seq_k * s.kv_heads * d;
  std::vector<double> gq(nq, 0.0), gk(nk, 0.0), gv(nk, 0.0);
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h)
      for (int i = 0; i < s.seq_q; ++i) {
        const double lse_i = static_cast<double>(lse[at.lse(b, h, i)]);
        if (lse_i == kNegInf) continue;  // the row saw no key anywhere: no gradient flows
        const T* qi = q + at.q(b, i, h);
        const T* doi = dout + at.q(b, i, h);
        const double D = dot(doi, o + at.q(b, i, h), d);
        for (int j = 0; j < s.seq_k; ++j) {
          if (!visible(s, i, j)) continue;
          const std::int64_t kj = at.kv(b, j, at.kv_head(h));
          const double p = std::exp(scale * dot(qi, k + kj, d) - lse_i);
          const double ds = p * (dot(doi, v + kj, d) - D);
          for (int e = 0; e < d; ++e) {
            gq[at.q(b, i, h) + e] += scale * ds * static_cast<double>(k[kj + e]);
            gk[kj + e] += scale * ds * static_cast<double>(qi[e]);
            gv[kj + e] += p * static_cast<double>(doi[e]);
          }
        }
      }
  std::transform(gq.begin(), gq.end(), dq, [](double x) { return static_cast<T>(x); });
  std::transform(gk.begin(), gk.end(), dk, [](double x) { return static_cast<T>(x); });
  std::transform(gv.begin(), gv.end(), dv, [](double x) { return static_cast<T>(x); });
}

template <typename T>
void merge(int batch, int seq_q, int heads, int d, T* o, T* lse, const T* o_part, const T* lse_part) {
  if (batch <= 0 || seq_q <= 0 || heads <= 0 || d <= 0)
    throw Error(fmt::format("lse_merge: batch = {}, seq_q = {}, heads = {}, head_dim = {}: all must be positive",
                            batch, seq_q, heads, d));
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < seq_q; ++i) {
        const std::int64_t li = (std::int64_t{b} * heads + h) * seq_q + i;
        const double a = static_cast<double>(lse[li]), c = static_cast<double>(lse_part[li]);
        if (c == kNegInf) continue;  // the part saw no key: nothing to add
        const double m = std::max(a, c);
        const double merged = m + std::log(std::exp(a - m) + std::exp(c - m));
        const double wa = std::exp(a - merged), wc = std::exp(c - merged);  // wa = 0 when a = -inf
        T* oi = o + ((std::int64_t{b} * seq_q + i) * heads + h) * d;
        const T* pi = o_part + ((std::int64_t{b} * seq_q + i) * heads + h) * d;
        for (int e = 0; e < d; ++e)
          oi[e] = static_cast<T>(wa * static_cast<double>(oi[e]) + wc * static_cast<double>(pi[e]));
        lse[li] = static_cast<T>(merged);
      }
}

}  // namespace

void validate(const AttentionShape& s) {
  auto positive = [](std::int64_t value, const char* name) {
    if (value <= 0) throw Error(fmt::format("attention shape: {} = {} must be positive", name, value));
  };
  positive(s.batch, "batch");
  positive(s.seq_q, "seq_q");
  positive(s.seq_k, "seq_k");
  positive(s.heads, "heads");
  positive(s.kv_heads, "kv_heads");
  positive(s.head_dim, "head_dim");
  if (s.heads % s.kv_heads != 0)
    throw Error(fmt::format("attention shape: heads = {} must be divisible by kv_heads = {}", s.heads, s.kv_heads));
  if (!(s.scale >= 0.f) || std::isinf(s.scale))
    throw Error(fmt::format("attention shape: scale = {} must be finite and >= 0 (0 means 1/sqrt(head_dim))",
                            s.scale));
  if (s.window < 0) throw Error(fmt::format("attention shape: window = {} must be >= 0 (0: no window)", s.window));
  if (s.window > 0 && !s.causal)
    throw Error(fmt::format("attention shape: window = {} needs causal (a sliding window is a causal band)", s.window));
}

double effective_scale(const AttentionShape& s) {
  return s.scale != 0.f ? static_cast<double>(s.scale) : 1.0 / std::sqrt(static_cast<double>(s.head_dim));
}

bool visible(const AttentionShape& s, std::int64_t i, std::int64_t j) {
  return !s.causal || in_band(s.q_offset + i, s.k_offset + j, s.window);
}

void attention_forward(const AttentionShape& s, const float* q, const float* k, const float* v, float* o,
                       float* lse) {
  forward(s, q, k, v, o, lse);
}
void attention_forward(const AttentionShape& s, const double* q, const double* k, const double* v, double* o,
                       double* lse) {
  forward(s, q, k, v, o, lse);
}
void attention_backward(const AttentionShape& s, const float* q, const float* k, const float* v, const float* o,
                        const float* lse, const float* dout, float* dq, float* dk, float* dv) {
  backward(s, q, k, v, o, lse, dout, dq, dk, dv);
}
void attention_backward(const AttentionShape& s, const double* q, const double* k, const double* v,
                        const double* o, const double* lse, const double* dout, double* dq, double* dk,
                        double* dv) {
  backward(s, q, k, v, o, lse, dout, dq, dk, dv);
}
void lse_merge(int batch, int seq_q, int heads, int head_dim, float* o, float* lse, const float* o_part,
               const float* lse_part) {
  merge(batch, seq_q, heads, head_dim, o, lse, o_part, lse_part);
}
void lse_merge(int batch, int seq_q, int heads, int head_dim, double* o, double* lse, const double* o_part,
               const double* lse_part) {
  merge(batch, seq_q, heads, head_dim, o, lse, o_part, lse_part);
}

}  // namespace seqpar::ref

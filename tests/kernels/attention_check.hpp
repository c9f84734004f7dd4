// The check every attention engine passes on the GPU (seqpar's own kernels, the cuDNN engine): forward
// and backward against the float64 CPU reference on fresh random inputs, with the flash-attention bound:
// the engine's error is at most twice the error of a straightforward computation in the input dtype
// (plus a tiny absolute term). Outputs are poisoned with NaN before each run. Shared so that both
// engines meet the same bounds on the same kind of data.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <vector>

#include "gpu_util.hpp"
#include "seqpar/kernels/attention_ref.hpp"
#include "test_util.hpp"

namespace seqpar::test {

using kernels::DType;
using ref::AttentionShape;

struct Case {
  DType dtype;
  AttentionShape s;
};

inline std::ostream& operator<<(std::ostream& os, const Case& c) {
  return os << kernels::to_string(c.dtype) << " d" << c.s.head_dim << " b" << c.s.batch << " sq" << c.s.seq_q
            << " sk" << c.s.seq_k << " h" << c.s.heads << "/" << c.s.kv_heads << (c.s.causal ? " causal" : "")
            << " off" << c.s.q_offset << "/" << c.s.k_offset;
}

inline std::size_t q_size(const AttentionShape& s) { return std::size_t(s.batch) * s.seq_q * s.heads * s.head_dim; }
inline std::size_t kv_size(const AttentionShape& s) { return std::size_t(s.batch) * s.seq_k * s.kv_heads * s.head_dim; }
inline std::size_t lse_size(const AttentionShape& s) { return std::size_t(s.batch) * s.heads * s.seq_q; }

// The straightforward computation in the input dtype: every matmul accumulates in fp32 and rounds its
// result to the dtype, the softmax runs in fp32 on the rounded scores and its output is rounded.
struct Naive {
  const AttentionShape& s;
  DType t;
  double scale() const { return ref::effective_scale(s); }
  float r(double x) const { return round_to(t, static_cast<float>(x)); }
  std::int64_t qi(int b, int i, int h) const { return ((std::int64_t(b) * s.seq_q + i) * s.heads + h) * s.head_dim; }
  std::int64_t ki(int b, int j, int h) const {
    return ((std::int64_t(b) * s.seq_k + j) * s.kv_heads + h / (s.heads / s.kv_heads)) * s.head_dim;
  }
  float dot(const float* a, const float* b) const {
    float acc = 0;
    for (int e = 0; e < s.head_dim; ++e) acc += a[e] * b[e];
    return acc;
  }

  void forward(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
               std::vector<float>& o, std::vector<float>& lse) const {
    std::vector<float> sc(std::size_t(s.seq_k)), acc(std::size_t(s.head_dim));
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads; ++h)
        for (int i = 0; i < s.seq_q; ++i) {
          float m = -INFINITY;
          for (int j = 0; j < s.seq_k; ++j) {
            sc[j] = ref::visible(s, i, j) ? r(scale() * dot(&q[qi(b, i, h)], &k[ki(b, j, h)])) : -INFINITY;
            m = std::max(m, sc[j]);
          }
          float l = 0;
          for (int j = 0; j < s.seq_k; ++j) l += m == -INFINITY ? 0.f : std::exp(sc[j] - m);
          std::fill(acc.begin(), acc.end(), 0.f);
          for (int j = 0; j < s.seq_k; ++j) {
            if (m == -INFINITY || sc[j] == -INFINITY) continue;
            const float p = r(std::exp(sc[j] - m) / l);
            for (int e = 0; e < s.head_dim; ++e) acc[e] += p * v[ki(b, j, h) + e];
          }
          for (int e = 0; e < s.head_dim; ++e) o[qi(b, i, h) + e] = r(acc[e]);
          lse[(std::size_t(b) * s.heads + h) * s.seq_q + i] = m == -INFINITY ? -INFINITY : m + std::log(l);
        }
  }

  void backward(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                const std::vector<float>& o, const std::vector<float>& lse, const std::vector<float>& dout,
                std::vector<float>& dq, std::vector<float>& dk, std::vector<float>& dv) const {
    std::vector<float> gq(q.size(), 0.f), gk(k.size(), 0.f), gv(v.size(), 0.f);
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads; ++h)
        for (int i = 0; i < s.seq_q; ++i) {
          const float L = lse[(std::size_t(b) * s.heads + h) * s.seq_q + i];
          if (L == -INFINITY) continue;
          const float D = dot(&dout[qi(b, i, h)], &o[qi(b, i, h)]);
          for (int j = 0; j < s.seq_k; ++j) {
            if (!ref::visible(s, i, j)) continue;
            const float sc = r(scale() * dot(&q[qi(b, i, h)], &k[ki(b, j, h)]));
            const float p = r(std::exp(sc - L));
            const float dp = r(dot(&dout[qi(b, i, h)], &v[ki(b, j, h)]));
            const float ds = r(p * (dp - D));
            for (int e = 0; e < s.head_dim; ++e) {
              gq[qi(b, i, h) + e] += ds * k[ki(b, j, h) + e];
              gk[ki(b, j, h) + e] += ds * q[qi(b, i, h) + e];
              gv[ki(b, j, h) + e] += p * dout[qi(b, i, h) + e];
            }
          }
        }
    const float sc = static_cast<float>(scale());
    for (std::size_t x = 0; x < gq.size(); ++x) dq[x] = r(sc * gq[x]);
    for (std::size_t x = 0; x < gk.size(); ++x) dk[x] = r(sc * gk[x]);
    for (std::size_t x = 0; x < gv.size(); ++x) dv[x] = r(gv[x]);
  }
};

inline void expect_within_fa_bound(const std::vector<float>& got, const std::vector<float>& naive,
                            const std::vector<double>& exact, const char* what, const Case& c) {
  const double err = max_abs_diff(got, exact), base = max_abs_diff(naive, exact);
  EXPECT_LE(err, 2 * base + 1e-4) << what << " of " << c << ": kernel error " << err << ", dtype-naive error "
                                  << base;
}

inline AttentionShape shape(int b, int sq, int sk, int h, int kvh, int d, bool causal, std::int64_t qo = 0,
                     std::int64_t ko = 0) {
  AttentionShape s;
  s.batch = b;
  s.seq_q = sq;
  s.seq_k = sk;
  s.heads = h;
  s.kv_heads = kvh;
  s.head_dim = d;
  s.causal = causal;
  s.q_offset = qo;
  s.k_offset = ko;
  return s;
}

// Runs `engine.forward(s, dtype, q, k, v, o, lse)` and `engine.backward(s, dtype, q, k, v, o, lse, dout, dq,
// dk, dv)` (device pointers; the engine synchronises nothing) on case `c` and checks every output.
template <typename Engine>
void check_engine(Engine& engine, const Case& c) {
  const AttentionShape& s = c.s;
  const std::uint32_t seed = 1234u + static_cast<std::uint32_t>(s.seq_q * 7 + s.seq_k);
  auto q = random_vector(q_size(s), seed), k = random_vector(kv_size(s), seed + 1),
       v = random_vector(kv_size(s), seed + 2), dout = random_vector(q_size(s), seed + 3);
  const std::size_t es = kernels::dtype_size(c.dtype);
  DeviceBuffer dq_(q.size() * es), dk_(k.size() * es), dv_(v.size() * es), ddo(dout.size() * es);
  upload(c.dtype, q, dq_);  // rounds the host copies to the dtype too
  upload(c.dtype, k, dk_);
  upload(c.dtype, v, dv_);
  upload(c.dtype, dout, ddo);

  // Exact answers (float64) on the rounded inputs.
  auto qd = to_double(q), kd = to_double(k), vd = to_double(v), dod = to_double(dout);
  std::vector<double> o_ex(q.size()), lse_ex(lse_size(s)), dq_ex(q.size()), dk_ex(k.size()), dv_ex(v.size());
  ref::attention_forward(s, qd.data(), kd.data(), vd.data(), o_ex.data(), lse_ex.data());

  // Forward.
  DeviceBuffer d_o(q.size() * es), d_lse(lse_size(s) * 4);
  d_o.poison();
  d_lse.poison();
  engine.forward(s, c.dtype, dq_.get(), dk_.get(), dv_.get(), d_o.get(), d_lse.f32());
  SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
  const auto o = download(c.dtype, d_o.get(), q.size());
  const auto lse = download(DType::fp32, d_lse.get(), lse_size(s));
  const Naive naive{s, c.dtype};
  std::vector<float> o_nv(q.size()), lse_nv(lse_size(s));
  naive.forward(q, k, v, o_nv, lse_nv);
  expect_within_fa_bound(o, o_nv, o_ex, "o", c);
  expect_within_fa_bound(lse, lse_nv, lse_ex, "lse", c);

  // Backward, from the exact o and lse rounded as a caller would hold them.
  std::vector<float> o_in(o_ex.begin(), o_ex.end()), lse_in(lse_ex.begin(), lse_ex.end());
  DeviceBuffer d_oin(q.size() * es), d_lsein(lse_size(s) * 4);
  upload(c.dtype, o_in, d_oin);
  upload(DType::fp32, lse_in, d_lsein);
  auto oid = to_double(o_in);
  std::vector<double> lsed(lse_in.begin(), lse_in.end());
  ref::attention_backward(s, qd.data(), kd.data(), vd.data(), oid.data(), lsed.data(), dod.data(), dq_ex.data(),
                          dk_ex.data(), dv_ex.data());
  DeviceBuffer g_q(q.size() * es), g_k(k.size() * es), g_v(v.size() * es);
  for (auto* b : {&g_q, &g_k, &g_v}) b->poison();
  engine.backward(s, c.dtype, dq_.get(), dk_.get(), dv_.get(), d_oin.get(), d_lsein.f32(), ddo.get(), g_q.get(),
                  g_k.get(), g_v.get());
  SEQPAR_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> dq_nv(q.size()), dk_nv(k.size()), dv_nv(v.size());
  naive.backward(q, k, v, o_in, lse_in, dout, dq_nv, dk_nv, dv_nv);
  expect_within_fa_bound(download(c.dtype, g_q.get(), q.size()), dq_nv, dq_ex, "dq", c);
  expect_within_fa_bound(download(c.dtype, g_k.get(), k.size()), dk_nv, dk_ex, "dk", c);
  expect_within_fa_bound(download(c.dtype, g_v.get(), v.size()), dv_nv, dv_ex, "dv", c);
}


}  // namespace seqpar::test

// The layer ops' CPU references: plain loops written for clarity (the reference the GPU launchers of
// layer_ops.cu are held to). Sums of squares, dot products and the softmax normaliser accumulate in
// double so the reference is the more accurate side of every comparison.
#include "seqpar/kernels/layer_ops_ref.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace seqpar::ref::layer_ops {

void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
          float* c) {
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
        const float av = ta ? a[static_cast<std::int64_t>(l) * m + i] : a[static_cast<std::int64_t>(i) * k + l];
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

void add(float* y, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] += x[i];
}
void scale(float* x, float alpha, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] *= alpha;
}
void fill(float* x, float value, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = value;
}

void embedding_forward(float* out, const int* tokens, const float* table, int tokens_n, int dim) {
  for (int t = 0; t < tokens_n; ++t)
    std::memcpy(out + static_cast<std::int64_t>(t) * dim, table + static_cast<std::int64_t>(tokens[t]) * dim,
                sizeof(float) * static_cast<std::size_t>(dim));
}
void embedding_backward(float* dtable, const float* dout, const int* tokens, int tokens_n, int dim) {
  for (int t = 0; t < tokens_n; ++t) {
    float* row = dtable + static_cast<std::int64_t>(tokens[t]) * dim;
    const float* g = dout + static_cast<std::int64_t>(t) * dim;
    for (int i = 0; i < dim; ++i) row[i] += g[i];
  }
}

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int tokens_n, int dim, float eps) {
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
void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                      const float* rstd, int tokens_n, int dim) {
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

void rope(float* x, const int* pos, int tokens_n, int heads, int head_dim, float theta, bool inverse) {
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

void swiglu_forward(float* out, const float* gate, const float* up, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float sg = 1.0f / (1.0f + std::exp(-gate[i]));
    out[i] = gate[i] * sg * up[i];
  }
}
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                     std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float sg = 1.0f / (1.0f + std::exp(-g));
    const float silu = g * sg;
    dgate[i] = dout[i] * up[i] * sg * (1.0f + g * (1.0f - sg));
    dup[i] = dout[i] * silu;
  }
}

void cross_entropy(float* losses, float* logits, const int* labels, int tokens_n, int vocab, float dscale) {
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

void adamw(float* param, const float* grad, float* m, float* v, std::int64_t n, float lr, float beta1, float beta2,
           float eps, float weight_decay, int step) {
  const float c1 = 1.0f - std::pow(beta1, static_cast<float>(step));
  const float c2 = 1.0f - std::pow(beta2, static_cast<float>(step));
  for (std::int64_t i = 0; i < n; ++i) {
    m[i] = beta1 * m[i] + (1.0f - beta1) * grad[i];
    v[i] = beta2 * v[i] + (1.0f - beta2) * grad[i] * grad[i];
    const float mhat = m[i] / c1, vhat = v[i] / c2;
    param[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + weight_decay * param[i]);
  }
}

}  // namespace seqpar::ref::layer_ops

// CPU references of the layer ops (the "layer ops" kernel family): the small fp32 ops of a
// Llama-style training step besides attention and the reshards. Plain loops written for clarity;
// the GPU launchers of the same names (layer_ops.cuh) are tested against them, and the training
// step's CPU back end runs them. Pure C++.
// Layouts: activations [tokens, features] row-major; rope's x is [tokens, heads, head_dim].
#pragma once
#include <cstdint>

namespace seqpar::ref::layer_ops {

// Row-major C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C; op(A) = A^T when trans_a
// (A stored [k,m]), likewise B (stored [n,k]). beta = 0 ignores C's old contents (NaN included).
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, const float* b,
          float beta, float* c);
void add(float* y, const float* x, std::int64_t n);  // y += x
void scale(float* x, float alpha, std::int64_t n);   // x *= alpha
void fill(float* x, float value, std::int64_t n);    // x = value

// out[t] = table[tokens[t]] (rows of dim floats); the backward accumulates dout into those rows.
void embedding_forward(float* out, const int* tokens, const float* table, int tokens_n, int dim);
void embedding_backward(float* dtable, const float* dout, const int* tokens, int tokens_n, int dim);

// rstd[t] = 1/sqrt(mean(x^2) + eps); out = x * rstd * w. The backward accumulates into dinp and dw.
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int tokens_n, int dim, float eps);
void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                      const float* rstd, int tokens_n, int dim);

// Rotary embedding in place (pairs (2i, 2i+1)), angle pos[t] * theta^(-2i/head_dim); inverse = the
// transpose rotation, which is its backward.
void rope(float* x, const int* pos, int tokens_n, int heads, int head_dim, float theta, bool inverse);

// out = silu(gate) * up, and its gradients (overwritten).
void swiglu_forward(float* out, const float* gate, const float* up, std::int64_t n);
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                     std::int64_t n);

// losses[t] = -log softmax(logits[t])[label[t]] (0 where label < 0); logits are overwritten with
// dloss/dlogits = (softmax - onehot) * dscale (0 rows where label < 0).
void cross_entropy(float* losses, float* logits, const int* labels, int tokens_n, int vocab, float dscale);

// One AdamW step (bias-corrected for `step`, counted from 1; decoupled weight decay).
void adamw(float* param, const float* grad, float* m, float* v, std::int64_t n, float lr, float beta1,
           float beta2, float eps, float weight_decay, int step);

}  // namespace seqpar::ref::layer_ops

#include "seqpar/train/model.hpp"

#include <cmath>
#include <random>

#include "seqpar/core/error.hpp"

namespace seqpar::train {
Model::Model(Backend& be, const ModelConfig& cfg, int batch, const SeqLayout& layout,
             int ring_index, comm::Communicator* ulysses, comm::Communicator* ring,
             bool blocks_only)
    : be_(be), cfg_(cfg), batch_(batch), tokens_(batch * layout.local_len()),
      blocks_only_(blocks_only) {
  validate(cfg);
  attn_ = std::make_unique<SpAttention>(
      be, layout, ring_index, ulysses, ring,
      AttnDims{batch, cfg.heads, cfg.kv_heads, cfg.head_dim});
  std::int64_t off = 0;
  auto add = [&](std::string name, std::int64_t count, bool decay) {
    tensors_.push_back({std::move(name), off, count, decay});
    off += count;
    return off - count;
  };
  const std::int64_t c = cfg.hidden, q = static_cast<std::int64_t>(cfg.heads) * cfg.head_dim,
                     kv = static_cast<std::int64_t>(cfg.kv_heads) * cfg.head_dim, f = cfg.ffn;
  if (!blocks_only) embed_ = add("embed", cfg.vocab * c, true);
  for (int l = 0; l < cfg.layers; ++l) {
    const std::string pre = "layers." + std::to_string(l) + ".";
    LayerParams lp{};
    lp.attn_norm = add(pre + "attn_norm", c, false);
    lp.wq = add(pre + "wq", q * c, true);
    lp.wk = add(pre + "wk", kv * c, true);
    lp.wv = add(pre + "wv", kv * c, true);
    lp.wo = add(pre + "wo", c * q, true);
    lp.mlp_norm = add(pre + "mlp_norm", c, false);
    lp.w1 = add(pre + "w1", f * c, true);
    lp.w3 = add(pre + "w3", f * c, true);
    lp.w2 = add(pre + "w2", c * f, true);
    layers_.push_back(lp);
  }
  if (!blocks_only) {
    final_norm_ = add("final_norm", c, false);
    lm_head_ = cfg.tied_embeddings ? embed_ : add("lm_head", cfg.vocab * c, true);
  }
  params_ = Floats(be, off, MemCategory::parameters);
  grads_ = Floats(be, off, MemCategory::gradients);
  m_ = Floats(be, off, MemCategory::optimizer_states);
  v_ = Floats(be, off, MemCategory::optimizer_states);
  be.zero(grads_.data(), grads_.bytes());
  be.zero(m_.data(), m_.bytes());
  be.zero(v_.data(), v_.bytes());
}

Model::~Model() = default;

void Model::init(std::uint64_t seed) {
  std::vector<float> host(static_cast<std::size_t>(params_.size()));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (const ParamTensor& t : tensors_)
    for (std::int64_t i = 0; i < t.count; ++i)
      host[static_cast<std::size_t>(t.offset + i)] = t.decay ? normal(rng) : 1.0f;
  be_.copy_from_host(params_.data(), host.data(), params_.bytes());
}

void Model::zero_grads() { be_.zero(grads_.data(), grads_.bytes()); }

void Model::linear_forward(float* out, const float* inp, std::int64_t w, int out_dim, int in_dim) {
  be_.gemm(false, true, tokens_, out_dim, in_dim, 1.0f, inp, p(w), 0.0f, out);
}

void Model::linear_backward(float* dinp, bool accumulate, const float* dout, const float* inp,
                            std::int64_t w, int out_dim, int in_dim) {
  be_.gemm(false, false, tokens_, in_dim, out_dim, 1.0f, dout, p(w), accumulate ? 1.0f : 0.0f,
           dinp);
  be_.gemm(true, false, out_dim, in_dim, tokens_, 1.0f, dout, inp, 1.0f, g(w));
}

Floats Model::block_forward(int l, Floats&& x_in, LayerActs& a, const int* positions,
                            bool attention_only) {
  const int t = tokens_, c = cfg_.hidden, f = cfg_.ffn, d = cfg_.head_dim;
  const int qd = cfg_.heads * d, kvd = cfg_.kv_heads * d;
  const std::int64_t tc = static_cast<std::int64_t>(t) * c, tf = static_cast<std::int64_t>(t) * f;
  auto acts = [&](std::int64_t n) { return Floats(be_, n, MemCategory::activations); };
  const LayerParams& lp = layers_[static_cast<std::size_t>(l)];
  a.x_in = std::move(x_in);
  a.h1 = acts(tc);
  a.rstd1 = acts(t);
  be_.rmsnorm_forward(a.h1.data(), a.rstd1.data(), a.x_in.data(), p(lp.attn_norm), t, c,
                      cfg_.norm_eps);
  Floats q = acts(static_cast<std::int64_t>(t) * qd), k = acts(static_cast<std::int64_t>(t) * kvd),
         v = acts(static_cast<std::int64_t>(t) * kvd);
  linear_forward(q.data(), a.h1.data(), lp.wq, qd, c);
  linear_forward(k.data(), a.h1.data(), lp.wk, kvd, c);
  linear_forward(v.data(), a.h1.data(), lp.wv, kvd, c);
  be_.rope(q.data(), positions, t, cfg_.heads, d, cfg_.rope_theta, false);
  be_.rope(k.data(), positions, t, cfg_.kv_heads, d, cfg_.rope_theta, false);
  attn_->forward(std::move(q), std::move(k), std::move(v), a.attn);
  a.x_mid = acts(tc);
  be_.copy(a.x_mid.data(), a.x_in.data(), a.x_mid.bytes());
  be_.gemm(false, true, t, c, qd, 1.0f, a.attn.output(), p(lp.wo), 1.0f, a.x_mid.data());
  Floats x_out = acts(tc);
  be_.copy(x_out.data(), a.x_mid.data(), x_out.bytes());
  if (attention_only) return x_out;
  a.h2 = acts(tc);
  a.rstd2 = acts(t);
  be_.rmsnorm_forward(a.h2.data(), a.rstd2.data(), a.x_mid.data(), p(lp.mlp_norm), t, c,
                      cfg_.norm_eps);
  a.gate = acts(tf);
  a.up = acts(tf);
  a.act = acts(tf);
  linear_forward(a.gate.data(), a.h2.data(), lp.w1, f, c);
  linear_forward(a.up.data(), a.h2.data(), lp.w3, f, c);
  be_.swiglu_forward(a.act.data(), a.gate.data(), a.up.data(), tf);
  be_.gemm(false, true, t, c, f, 1.0f, a.act.data(), p(lp.w2), 1.0f, x_out.data());
  return x_out;
}

void Model::block_backward(int l, LayerActs& a, float* dx, const int* positions,
                           bool attention_only) {
  const int t = tokens_, c = cfg_.hidden, f = cfg_.ffn, d = cfg_.head_dim;
  const int qd = cfg_.heads * d, kvd = cfg_.kv_heads * d;
  const std::int64_t tc = static_cast<std::int64_t>(t) * c, tf = static_cast<std::int64_t>(t) * f;
  auto temp = [&](std::int64_t n) { return Floats(be_, n, MemCategory::working); };
  const LayerParams& lp = layers_[static_cast<std::size_t>(l)];
  Floats dh = temp(tc);
  if (!attention_only) {
    // x_out = x_mid + act W2^T
    Floats dact = temp(tf), dgate = temp(tf), dup = temp(tf);
    linear_backward(dact.data(), false, dx, a.act.data(), lp.w2, c, f);
    be_.swiglu_backward(dgate.data(), dup.data(), dact.data(), a.gate.data(), a.up.data(), tf);
    dact.reset();
    linear_backward(dh.data(), false, dgate.data(), a.h2.data(), lp.w1, f, c);
    linear_backward(dh.data(), true, dup.data(), a.h2.data(), lp.w3, f, c);
    dgate.reset();
    dup.reset();
    // dx is now d(x_mid) through the residual; the norm adds its part.
    be_.rmsnorm_backward(dx, g(lp.mlp_norm), dh.data(), a.x_mid.data(), p(lp.mlp_norm),
                         a.rstd2.data(), t, c);
    a.act.reset();
    a.gate.reset();
    a.up.reset();
    a.h2.reset();
    a.rstd2.reset();
  }
  a.x_mid.reset();
  // x_mid = x_in + o Wo^T
  Floats dout = temp(static_cast<std::int64_t>(t) * qd);
  linear_backward(dout.data(), false, dx, a.attn.output(), lp.wo, c, qd);
  Floats dq = temp(static_cast<std::int64_t>(t) * qd), dk = temp(static_cast<std::int64_t>(t) * kvd),
         dv = temp(static_cast<std::int64_t>(t) * kvd);
  attn_->backward(a.attn, dout.data(), dq.data(), dk.data(), dv.data());
  a.attn = AttnSaved{};
  dout.reset();
  be_.rope(dq.data(), positions, t, cfg_.heads, d, cfg_.rope_theta, true);
  be_.rope(dk.data(), positions, t, cfg_.kv_heads, d, cfg_.rope_theta, true);
  linear_backward(dh.data(), false, dq.data(), a.h1.data(), lp.wq, qd, c);
  linear_backward(dh.data(), true, dk.data(), a.h1.data(), lp.wk, kvd, c);
  linear_backward(dh.data(), true, dv.data(), a.h1.data(), lp.wv, kvd, c);
  be_.rmsnorm_backward(dx, g(lp.attn_norm), dh.data(), a.x_in.data(), p(lp.attn_norm),
                       a.rstd1.data(), t, c);
  a = LayerActs{};
}

double Model::forward_backward(const int* tokens, const int* labels, const int* positions,
                               float dloss_scale) {
  if (blocks_only_) throw Error("forward_backward: this model was built without embedding and LM head");
  const int t = tokens_, c = cfg_.hidden, v = cfg_.vocab;
  const std::int64_t tc = static_cast<std::int64_t>(t) * c;
  auto acts = [&](std::int64_t n) { return Floats(be_, n, MemCategory::activations); };
  auto temp = [&](std::int64_t n) { return Floats(be_, n, MemCategory::working); };

  // ---- forward ----
  std::vector<LayerActs> la(static_cast<std::size_t>(cfg_.layers));
  Floats x = acts(tc);
  be_.embedding_forward(x.data(), tokens, p(embed_), t, c);
  for (int l = 0; l < cfg_.layers; ++l)
    x = block_forward(l, std::move(x), la[static_cast<std::size_t>(l)], positions);
  Floats hf = acts(tc), rstdf = acts(t);
  Floats logits(be_, static_cast<std::int64_t>(t) * v, MemCategory::logits);
  be_.rmsnorm_forward(hf.data(), rstdf.data(), x.data(), p(final_norm_), t, c, cfg_.norm_eps);
  linear_forward(logits.data(), hf.data(), lm_head_, v, c);
  Floats losses = temp(t);
  be_.cross_entropy(losses.data(), logits.data(), labels, t, v, dloss_scale);
  std::vector<float> host_losses(static_cast<std::size_t>(t));
  be_.copy_to_host(host_losses.data(), losses.data(), losses.bytes());
  double loss_sum = 0.0;
  for (float li : host_losses) loss_sum += li;

  // ---- backward (logits now hold dloss/dlogits) ----
  Floats dhf = temp(tc);
  linear_backward(dhf.data(), false, logits.data(), hf.data(), lm_head_, v, c);
  logits.reset();
  Floats dx = temp(tc);
  be_.zero(dx.data(), dx.bytes());
  be_.rmsnorm_backward(dx.data(), g(final_norm_), dhf.data(), x.data(), p(final_norm_),
                       rstdf.data(), t, c);
  dhf.reset();
  hf.reset();
  x.reset();
  for (int l = cfg_.layers - 1; l >= 0; --l)
    block_backward(l, la[static_cast<std::size_t>(l)], dx.data(), positions);
  be_.embedding_backward(g(embed_), dx.data(), tokens, t, c);
  return loss_sum;
}

void Model::adamw_step(const AdamWConfig& o, int step) {
  for (const ParamTensor& t : tensors_) {
    if (cfg_.tied_embeddings && t.name == "lm_head") continue;
    be_.adamw(params_.data() + t.offset, grads_.data() + t.offset, m_.data() + t.offset,
              v_.data() + t.offset, t.count, o.lr, o.beta1, o.beta2, o.eps,
              t.decay ? o.weight_decay : 0.0f, step);
  }
}

}  // namespace seqpar::train

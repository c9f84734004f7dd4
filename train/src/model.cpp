#include "seqpar/train/model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "seqpar/core/error.hpp"
#include "seqpar/core/tiling.hpp"
#include "seqpar/train/timeline.hpp"

namespace seqpar::train {

Model::Model(Backend& be, const ModelConfig& cfg, int batch, const SeqLayout& layout,
             int ring_index, comm::Communicator* ulysses, comm::Communicator* ring,
             bool blocks_only, const seqpar::MemoryOptions& mem, int tile_tokens)
    : be_(be), cfg_(cfg), batch_(batch), tokens_(batch * layout.local_len()),
      blocks_only_(blocks_only), mem_(mem) {
  validate(cfg);
  if (tile_tokens < 0) throw Error(fmt::format("tile_tokens = {}: must be >= 0 (0: ALST's choice)", tile_tokens));
  // ALST cuts each sequence of the micro-batch along its tokens (a tile holds `batch` sequences'
  // slices), so the tile is batch x the per-sequence rule; batch x a part of local_len <= tokens_.
  tile_ = tile_tokens > 0 ? std::min(tile_tokens, tokens_)
                          : batch * static_cast<int>(alst_tile_tokens(layout.local_len(), cfg.hidden));
  host_kept_.resize(static_cast<std::size_t>(cfg.layers));
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

void Model::linear_forward(float* out, const float* inp, std::int64_t w, int out_dim, int in_dim,
                           int rows) {
  be_.gemm(false, true, rows < 0 ? tokens_ : rows, out_dim, in_dim, 1.0f, inp, p(w), 0.0f, out);
}

void Model::linear_backward(float* dinp, bool accumulate, const float* dout, const float* inp,
                            std::int64_t w, int out_dim, int in_dim, int rows) {
  const int m = rows < 0 ? tokens_ : rows;
  be_.gemm(false, false, m, in_dim, out_dim, 1.0f, dout, p(w), accumulate ? 1.0f : 0.0f, dinp);
  be_.gemm(true, false, out_dim, in_dim, m, 1.0f, dout, inp, 1.0f, g(w));
}

void Model::mlp_tile_forward(const LayerParams& lp, const float* x, int n, float* h, float* rstd, float* gate,
                             float* up, float* act) {
  const int c = cfg_.hidden, f = cfg_.ffn;
  be_.rmsnorm_forward(h, rstd, x, p(lp.mlp_norm), n, c, cfg_.norm_eps);
  linear_forward(gate, h, lp.w1, f, c, n);
  linear_forward(up, h, lp.w3, f, c, n);
  be_.swiglu_forward(act, gate, up, static_cast<std::int64_t>(n) * f);
}

void Model::tiled_mlp_forward(const LayerParams& lp, const float* x_mid, float* x_out) {
  const int c = cfg_.hidden, f = cfg_.ffn;
  auto temp = [&](std::int64_t n) { return Floats(be_, n, MemCategory::working); };
  const std::int64_t tile = tile_;
  Floats h = temp(tile * c), rstd = temp(tile), gate = temp(tile * f), up = temp(tile * f),
         act = temp(tile * f);
  for (int r0 = 0; r0 < tokens_; r0 += tile_) {
    const int n = std::min(tile_, tokens_ - r0);
    const std::int64_t off = static_cast<std::int64_t>(r0) * c;
    mlp_tile_forward(lp, x_mid + off, n, h.data(), rstd.data(), gate.data(), up.data(), act.data());
    be_.gemm(false, true, n, c, f, 1.0f, act.data(), p(lp.w2), 1.0f, x_out + off);
  }
}

void Model::tiled_mlp_backward(const LayerParams& lp, const float* x_mid, float* dx) {
  const int c = cfg_.hidden, f = cfg_.ffn;
  auto temp = [&](std::int64_t n) { return Floats(be_, n, MemCategory::working); };
  const std::int64_t tile = tile_;
  Floats h = temp(tile * c), rstd = temp(tile), gate = temp(tile * f), up = temp(tile * f),
         act = temp(tile * f), dact = temp(tile * f), dgate = temp(tile * f), dup = temp(tile * f),
         dh = temp(tile * c);
  for (int r0 = 0; r0 < tokens_; r0 += tile_) {
    const int n = std::min(tile_, tokens_ - r0);
    const std::int64_t off = static_cast<std::int64_t>(r0) * c, nf = static_cast<std::int64_t>(n) * f;
    // Recompute the tile's forward (nothing of it was kept) ...
    mlp_tile_forward(lp, x_mid + off, n, h.data(), rstd.data(), gate.data(), up.data(), act.data());
    // ... then its backward, as block_backward's untiled MLP does for all rows.
    linear_backward(dact.data(), false, dx + off, act.data(), lp.w2, c, f, n);
    be_.swiglu_backward(dgate.data(), dup.data(), dact.data(), gate.data(), up.data(), nf);
    linear_backward(dh.data(), false, dgate.data(), h.data(), lp.w1, f, c, n);
    linear_backward(dh.data(), true, dup.data(), h.data(), lp.w3, f, c, n);
    be_.rmsnorm_backward(dx + off, g(lp.mlp_norm), dh.data(), x_mid + off, p(lp.mlp_norm),
                         rstd.data(), n, c);
  }
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
  {
    const TimelineRange phase(be_.timeline(), trace::Stream::compute, "fwd attention", l);
    attn_->forward(std::move(q), std::move(k), std::move(v), a.attn);
  }
  a.x_mid = acts(tc);
  be_.copy(a.x_mid.data(), a.x_in.data(), a.x_mid.bytes());
  be_.gemm(false, true, t, c, qd, 1.0f, a.attn.output(), p(lp.wo), 1.0f, a.x_mid.data());
  Floats x_out = acts(tc);
  be_.copy(x_out.data(), a.x_mid.data(), x_out.bytes());
  if (attention_only) return x_out;
  if (mem_.tiled_mlp) {
    tiled_mlp_forward(lp, a.x_mid.data(), x_out.data());
    if (mem_.checkpoint == seqpar::Checkpoint::selective) a.h1.reset();
    return x_out;
  }
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
  if (mem_.checkpoint == seqpar::Checkpoint::selective) {
    // What the simulator's "selective" drops (sim/src/memory_cost.cpp): the norm outputs (the
    // QKV and MLP GEMM inputs) and the MLP activation; the backward recomputes them.
    a.h1.reset();
    a.h2.reset();
    a.act.reset();
  }
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
  if (!attention_only && mem_.tiled_mlp) {
    tiled_mlp_backward(lp, a.x_mid.data(), dx);
  } else if (!attention_only) {
    if (!a.h2.data()) {  // selective checkpointing: recompute the norm output and the activation
      a.h2 = temp(tc);
      be_.rmsnorm_forward(a.h2.data(), a.rstd2.data(), a.x_mid.data(), p(lp.mlp_norm), t, c,
                          cfg_.norm_eps);
      a.act = temp(tf);
      be_.swiglu_forward(a.act.data(), a.gate.data(), a.up.data(), tf);
    }
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
  {
    const TimelineRange phase(be_.timeline(), trace::Stream::compute, "bwd attention", l);
    attn_->backward(a.attn, dout.data(), dq.data(), dk.data(), dv.data());
  }
  a.attn = AttnSaved{};
  dout.reset();
  be_.rope(dq.data(), positions, t, cfg_.heads, d, cfg_.rope_theta, true);
  be_.rope(dk.data(), positions, t, cfg_.kv_heads, d, cfg_.rope_theta, true);
  if (!a.h1.data()) {  // selective checkpointing: recompute the QKV GEMM input
    a.h1 = temp(tc);
    be_.rmsnorm_forward(a.h1.data(), a.rstd1.data(), a.x_in.data(), p(lp.attn_norm), t, c,
                        cfg_.norm_eps);
  }
  linear_backward(dh.data(), false, dq.data(), a.h1.data(), lp.wq, qd, c);
  linear_backward(dh.data(), true, dk.data(), a.h1.data(), lp.wk, kvd, c);
  linear_backward(dh.data(), true, dv.data(), a.h1.data(), lp.wv, kvd, c);
  be_.rmsnorm_backward(dx, g(lp.attn_norm), dh.data(), a.x_in.data(), p(lp.attn_norm),
                       a.rstd1.data(), t, c);
  a = LayerActs{};
}

void Model::blocks_forward(Floats& x, std::vector<LayerActs>& la, std::vector<Floats>& kept,
                           const int* positions) {
  const bool full = mem_.checkpoint == seqpar::Checkpoint::full;
  const bool offload = full && mem_.offload_checkpoints;
  // Offload: the previous layer's input still on its way to the host (its device copy is freed
  // once it has arrived, so at most two layer inputs are on the device at a time).
  Floats in_flight;
  Backend::CopyEvent in_flight_done;
  auto land = [&] {
    be_.host_waits_for(in_flight_done);
    in_flight.reset();
    in_flight_done.reset();
  };
  for (int l = 0; l < cfg_.layers; ++l) {
    LayerActs& a = la[static_cast<std::size_t>(l)];
    {
      const TimelineRange phase(be_.timeline(), trace::Stream::compute, "fwd", l);
      x = block_forward(l, std::move(x), a, positions);
    }
    if (!full) continue;
    // Full checkpointing keeps the layer input alone; the backward recomputes the rest.
    Floats input = std::move(a.x_in);
    a = LayerActs{};
    input.recharge(MemCategory::checkpoints);
    if (!offload) {
      kept[static_cast<std::size_t>(l)] = std::move(input);
      continue;
    }
    // Pinned host buffers are slow to allocate: made once, kept for every later step.
    Floats& host = host_kept_[static_cast<std::size_t>(l)];
    if (host.size() != input.size()) host = Floats(be_, input.size(), MemCategory::host_offload);
    Backend::CopyEvent done;
    {
      // On the copy stream from posting to completion (it first waits for the compute that wrote input).
      const TimelineRange copy(be_.timeline(), trace::Stream::offload, "offload to host", l);
      done = be_.copy_async(host.data(), input.data(), input.bytes(), Backend::CopyDirection::to_host);
    }
    land();
    in_flight = std::move(input);
    in_flight_done = std::move(done);
  }
  land();
}

void Model::blocks_backward(std::vector<LayerActs>& la, std::vector<Floats>& kept, float* dx,
                            const int* positions) {
  const bool full = mem_.checkpoint == seqpar::Checkpoint::full;
  const bool offload = full && mem_.offload_checkpoints;
  // Offload: layer l's input comes back from the host while layer l+1 recomputes and runs its
  // backward (prefetch one layer ahead).
  Floats next;
  Backend::CopyEvent next_done;
  auto prefetch = [&](int l) {
    const Floats& host = host_kept_[static_cast<std::size_t>(l)];
    next = Floats(be_, host.size(), MemCategory::checkpoints);
    const TimelineRange copy(be_.timeline(), trace::Stream::offload, "fetch to device", l);
    next_done = be_.copy_async(next.data(), host.data(), host.bytes(), Backend::CopyDirection::to_device);
  };
  if (offload && cfg_.layers > 0) prefetch(cfg_.layers - 1);
  for (int l = cfg_.layers - 1; l >= 0; --l) {
    LayerActs& a = la[static_cast<std::size_t>(l)];
    if (full) {
      Floats input;
      if (offload) {
        be_.compute_waits_for(next_done);
        input = std::move(next);
        next_done.reset();
        if (l > 0) prefetch(l - 1);
      } else {
        input = std::move(kept[static_cast<std::size_t>(l)]);
      }
      // Recompute the block from its input: the same ops on the same values as the first forward.
      const TimelineRange phase(be_.timeline(), trace::Stream::compute, "recompute", l);
      Floats out = block_forward(l, std::move(input), a, positions);
      out.reset();
    }
    const TimelineRange phase(be_.timeline(), trace::Stream::compute, "bwd", l);
    block_backward(l, a, dx, positions);
  }
}

double Model::head_forward_backward(const float* hf, const int* labels, float dloss_scale,
                                    float* dhf) {
  const int t = tokens_, c = cfg_.hidden, v = cfg_.vocab;
  // Tiled loss: one tile's logits at a time (logits, loss and the LM head backward per tile), so
  // the [tokens, vocab] logits never exist; untiled: one tile of all rows.
  const int tile = mem_.tiled_loss ? tile_ : t;
  Floats logits(be_, static_cast<std::int64_t>(tile) * v, MemCategory::logits);
  Floats losses(be_, t, MemCategory::working);
  for (int r0 = 0; r0 < t; r0 += tile) {
    const int n = std::min(tile, t - r0);
    const std::int64_t off = static_cast<std::int64_t>(r0) * c;
    linear_forward(logits.data(), hf + off, lm_head_, v, c, n);
    be_.cross_entropy(losses.data() + r0, logits.data(), labels + r0, n, v, dloss_scale);
    // logits now hold dloss/dlogits
    linear_backward(dhf + off, false, logits.data(), hf + off, lm_head_, v, c, n);
  }
  logits.reset();
  std::vector<float> host_losses(static_cast<std::size_t>(t));
  be_.copy_to_host(host_losses.data(), losses.data(), losses.bytes());
  double loss_sum = 0.0;
  for (float li : host_losses) loss_sum += li;
  return loss_sum;
}

double Model::forward_backward(const int* tokens, const int* labels, const int* positions,
                               float dloss_scale) {
  if (blocks_only_) throw Error("forward_backward: this model was built without embedding and LM head");
  const int t = tokens_, c = cfg_.hidden;
  const std::int64_t tc = static_cast<std::int64_t>(t) * c;
  auto acts = [&](std::int64_t n) { return Floats(be_, n, MemCategory::activations); };
  auto temp = [&](std::int64_t n) { return Floats(be_, n, MemCategory::working); };

  // ---- forward ----
  std::vector<LayerActs> la(static_cast<std::size_t>(cfg_.layers));
  std::vector<Floats> kept(static_cast<std::size_t>(cfg_.layers));  // full checkpointing's inputs
  Floats x = acts(tc);
  be_.embedding_forward(x.data(), tokens, p(embed_), t, c);
  blocks_forward(x, la, kept, positions);
  Floats hf = acts(tc), rstdf = acts(t);
  be_.rmsnorm_forward(hf.data(), rstdf.data(), x.data(), p(final_norm_), t, c, cfg_.norm_eps);

  // ---- loss and LM head backward, then the blocks' backward ----
  Floats dhf = temp(tc);
  const double loss_sum = head_forward_backward(hf.data(), labels, dloss_scale, dhf.data());
  Floats dx = temp(tc);
  be_.zero(dx.data(), dx.bytes());
  be_.rmsnorm_backward(dx.data(), g(final_norm_), dhf.data(), x.data(), p(final_norm_),
                       rstdf.data(), t, c);
  dhf.reset();
  hf.reset();
  x.reset();
  blocks_backward(la, kept, dx.data(), positions);
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

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
    : be_(be), adt_(be.act_dtype()), cfg_(cfg), batch_(batch), tokens_(batch * layout.local_len()),
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
  if (adt_ == DType::bf16) w16_ = Tensor(be, off, DType::bf16, MemCategory::parameters);
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
  parameters_changed();
}

void Model::parameters_changed() {
  if (w16_.size()) be_.convert(w16_.ref(), params_.data(), params_.size());
}

void Model::zero_grads() { be_.zero(grads_.data(), grads_.bytes()); }

void Model::linear_forward(Ref out, CRef inp, std::int64_t w, int out_dim, int in_dim, int rows) {
  be_.gemm(false, true, rows < 0 ? tokens_ : rows, out_dim, in_dim, 1.0f, inp, weight(w), 0.0f, out);
}

void Model::linear_backward(Ref dinp, bool accumulate, CRef dout, CRef inp, std::int64_t w, int out_dim,
                            int in_dim, int rows) {
  const int m = rows < 0 ? tokens_ : rows;
  be_.gemm(false, false, m, in_dim, out_dim, 1.0f, dout, weight(w), accumulate ? 1.0f : 0.0f, dinp);
  be_.gemm(true, false, out_dim, in_dim, m, 1.0f, dout, inp, 1.0f, g(w));  // fp32 gradient
}

void Model::mlp_tile_forward(const LayerParams& lp, CRef x, int n, Ref h, float* rstd, Ref gate, Ref up, Ref act) {
  const int c = cfg_.hidden, f = cfg_.ffn;
  be_.rmsnorm_forward(h, rstd, x, p(lp.mlp_norm), n, c, cfg_.norm_eps);
  linear_forward(gate, h, lp.w1, f, c, n);
  linear_forward(up, h, lp.w3, f, c, n);
  be_.swiglu_forward(act, gate, up, static_cast<std::int64_t>(n) * f);
}

void Model::tiled_mlp_forward(const LayerParams& lp, CRef x_mid, Ref x_out) {
  const int c = cfg_.hidden, f = cfg_.ffn;
  auto temp = [&](std::int64_t n) { return activations(n, MemCategory::working); };
  const std::int64_t tile = tile_;
  Tensor h = temp(tile * c), gate = temp(tile * f), up = temp(tile * f), act = temp(tile * f);
  Floats rstd(be_, tile, MemCategory::working);
  for (int r0 = 0; r0 < tokens_; r0 += tile_) {
    const int n = std::min(tile_, tokens_ - r0);
    const std::int64_t off = static_cast<std::int64_t>(r0) * c;
    mlp_tile_forward(lp, x_mid.at(off), n, h.ref(), rstd.data(), gate.ref(), up.ref(), act.ref());
    be_.gemm(false, true, n, c, f, 1.0f, act.cref(), weight(lp.w2), 1.0f, x_out.at(off));
  }
}

void Model::tiled_mlp_backward(const LayerParams& lp, CRef x_mid, Ref dx) {
  const int c = cfg_.hidden, f = cfg_.ffn;
  auto temp = [&](std::int64_t n) { return activations(n, MemCategory::working); };
  const std::int64_t tile = tile_;
  Tensor h = temp(tile * c), gate = temp(tile * f), up = temp(tile * f), act = temp(tile * f),
         dact = temp(tile * f), dgate = temp(tile * f), dup = temp(tile * f), dh = temp(tile * c);
  Floats rstd(be_, tile, MemCategory::working);
  for (int r0 = 0; r0 < tokens_; r0 += tile_) {
    const int n = std::min(tile_, tokens_ - r0);
    const std::int64_t off = static_cast<std::int64_t>(r0) * c, nf = static_cast<std::int64_t>(n) * f;
    // Recompute the tile's forward (nothing of it was kept) ...
    mlp_tile_forward(lp, x_mid.at(off), n, h.ref(), rstd.data(), gate.ref(), up.ref(), act.ref());
    // ... then its backward, as block_backward's untiled MLP does for all rows.
    linear_backward(dact.ref(), false, dx.at(off), act.cref(), lp.w2, c, f, n);
    be_.swiglu_backward(dgate.ref(), dup.ref(), dact.cref(), gate.cref(), up.cref(), nf);
    linear_backward(dh.ref(), false, dgate.cref(), h.cref(), lp.w1, f, c, n);
    linear_backward(dh.ref(), true, dup.cref(), h.cref(), lp.w3, f, c, n);
    be_.rmsnorm_backward(dx.at(off), g(lp.mlp_norm), dh.cref(), x_mid.at(off), p(lp.mlp_norm), rstd.data(), n, c);
  }
}

Tensor Model::block_forward(int l, Tensor&& x_in, LayerActs& a, const int* positions, bool attention_only) {
  const int t = tokens_, c = cfg_.hidden, f = cfg_.ffn, d = cfg_.head_dim;
  const int qd = cfg_.heads * d, kvd = cfg_.kv_heads * d;
  const std::int64_t tc = static_cast<std::int64_t>(t) * c, tf = static_cast<std::int64_t>(t) * f;
  auto acts = [&](std::int64_t n) { return activations(n); };
  const LayerParams& lp = layers_[static_cast<std::size_t>(l)];
  a.x_in = std::move(x_in);
  a.h1 = acts(tc);
  a.rstd1 = Floats(be_, t, MemCategory::activations);
  be_.rmsnorm_forward(a.h1.ref(), a.rstd1.data(), a.x_in.cref(), p(lp.attn_norm), t, c, cfg_.norm_eps);
  Tensor q = acts(static_cast<std::int64_t>(t) * qd), k = acts(static_cast<std::int64_t>(t) * kvd),
         v = acts(static_cast<std::int64_t>(t) * kvd);
  linear_forward(q.ref(), a.h1.cref(), lp.wq, qd, c);
  linear_forward(k.ref(), a.h1.cref(), lp.wk, kvd, c);
  linear_forward(v.ref(), a.h1.cref(), lp.wv, kvd, c);
  be_.rope(q.ref(), positions, t, cfg_.heads, d, cfg_.rope_theta, false);
  be_.rope(k.ref(), positions, t, cfg_.kv_heads, d, cfg_.rope_theta, false);
  {
    const TimelineRange phase(be_.timeline(), trace::Stream::compute, "fwd attention", l);
    attn_->set_window(cfg_.window_of(l));  // this layer's kind (one SpAttention serves every layer)
    attn_->forward(std::move(q), std::move(k), std::move(v), a.attn);
  }
  a.x_mid = acts(tc);
  be_.copy(a.x_mid.data(), a.x_in.data(), a.x_mid.bytes());
  be_.gemm(false, true, t, c, qd, 1.0f, a.attn.output(), weight(lp.wo), 1.0f, a.x_mid.ref());
  Tensor x_out = acts(tc);
  be_.copy(x_out.data(), a.x_mid.data(), x_out.bytes());
  if (attention_only) return x_out;
  if (mem_.tiled_mlp) {
    tiled_mlp_forward(lp, a.x_mid.cref(), x_out.ref());
    if (mem_.checkpoint == seqpar::Checkpoint::selective) a.h1.reset();
    return x_out;
  }
  a.h2 = acts(tc);
  a.rstd2 = Floats(be_, t, MemCategory::activations);
  be_.rmsnorm_forward(a.h2.ref(), a.rstd2.data(), a.x_mid.cref(), p(lp.mlp_norm), t, c, cfg_.norm_eps);
  a.gate = acts(tf);
  a.up = acts(tf);
  a.act = acts(tf);
  linear_forward(a.gate.ref(), a.h2.cref(), lp.w1, f, c);
  linear_forward(a.up.ref(), a.h2.cref(), lp.w3, f, c);
  be_.swiglu_forward(a.act.ref(), a.gate.cref(), a.up.cref(), tf);
  be_.gemm(false, true, t, c, f, 1.0f, a.act.cref(), weight(lp.w2), 1.0f, x_out.ref());
  if (mem_.checkpoint == seqpar::Checkpoint::selective) {
    // What the simulator's "selective" drops (sim/src/memory_cost.cpp): the norm outputs (the
    // QKV and MLP GEMM inputs) and the MLP activation; the backward recomputes them.
    a.h1.reset();
    a.h2.reset();
    a.act.reset();
  }
  return x_out;
}

void Model::block_backward(int l, LayerActs& a, Ref dx, const int* positions, bool attention_only) {
  const int t = tokens_, c = cfg_.hidden, f = cfg_.ffn, d = cfg_.head_dim;
  const int qd = cfg_.heads * d, kvd = cfg_.kv_heads * d;
  const std::int64_t tc = static_cast<std::int64_t>(t) * c, tf = static_cast<std::int64_t>(t) * f;
  auto temp = [&](std::int64_t n) { return activations(n, MemCategory::working); };
  const LayerParams& lp = layers_[static_cast<std::size_t>(l)];
  Tensor dh = temp(tc);
  if (!attention_only && mem_.tiled_mlp) {
    tiled_mlp_backward(lp, a.x_mid.cref(), dx);
  } else if (!attention_only) {
    if (!a.h2.data()) {  // selective checkpointing: recompute the norm output and the activation
      a.h2 = temp(tc);
      be_.rmsnorm_forward(a.h2.ref(), a.rstd2.data(), a.x_mid.cref(), p(lp.mlp_norm), t, c, cfg_.norm_eps);
      a.act = temp(tf);
      be_.swiglu_forward(a.act.ref(), a.gate.cref(), a.up.cref(), tf);
    }
    // x_out = x_mid + act W2^T
    Tensor dact = temp(tf), dgate = temp(tf), dup = temp(tf);
    linear_backward(dact.ref(), false, dx, a.act.cref(), lp.w2, c, f);
    be_.swiglu_backward(dgate.ref(), dup.ref(), dact.cref(), a.gate.cref(), a.up.cref(), tf);
    dact.reset();
    linear_backward(dh.ref(), false, dgate.cref(), a.h2.cref(), lp.w1, f, c);
    linear_backward(dh.ref(), true, dup.cref(), a.h2.cref(), lp.w3, f, c);
    dgate.reset();
    dup.reset();
    // dx is now d(x_mid) through the residual; the norm adds its part.
    be_.rmsnorm_backward(dx, g(lp.mlp_norm), dh.cref(), a.x_mid.cref(), p(lp.mlp_norm), a.rstd2.data(), t, c);
    a.act.reset();
    a.gate.reset();
    a.up.reset();
    a.h2.reset();
    a.rstd2.reset();
  }
  a.x_mid.reset();
  // x_mid = x_in + o Wo^T
  Tensor dout = temp(static_cast<std::int64_t>(t) * qd);
  linear_backward(dout.ref(), false, dx, a.attn.output(), lp.wo, c, qd);
  Tensor dq = temp(static_cast<std::int64_t>(t) * qd), dk = temp(static_cast<std::int64_t>(t) * kvd),
         dv = temp(static_cast<std::int64_t>(t) * kvd);
  {
    const TimelineRange phase(be_.timeline(), trace::Stream::compute, "bwd attention", l);
    attn_->set_window(cfg_.window_of(l));
    attn_->backward(a.attn, dout.cref(), dq.ref(), dk.ref(), dv.ref());
  }
  a.attn = AttnSaved{};
  dout.reset();
  be_.rope(dq.ref(), positions, t, cfg_.heads, d, cfg_.rope_theta, true);
  be_.rope(dk.ref(), positions, t, cfg_.kv_heads, d, cfg_.rope_theta, true);
  if (!a.h1.data()) {  // selective checkpointing: recompute the QKV GEMM input
    a.h1 = temp(tc);
    be_.rmsnorm_forward(a.h1.ref(), a.rstd1.data(), a.x_in.cref(), p(lp.attn_norm), t, c, cfg_.norm_eps);
  }
  linear_backward(dh.ref(), false, dq.cref(), a.h1.cref(), lp.wq, qd, c);
  linear_backward(dh.ref(), true, dk.cref(), a.h1.cref(), lp.wk, kvd, c);
  linear_backward(dh.ref(), true, dv.cref(), a.h1.cref(), lp.wv, kvd, c);
  be_.rmsnorm_backward(dx, g(lp.attn_norm), dh.cref(), a.x_in.cref(), p(lp.attn_norm), a.rstd1.data(), t, c);
  a = LayerActs{};
}

void Model::blocks_forward(Tensor& x, std::vector<LayerActs>& la, std::vector<Tensor>& kept,
                           const int* positions) {
  const bool full = mem_.checkpoint == seqpar::Checkpoint::full;
  const bool offload = full && mem_.offload_checkpoints;
  // Offload: the previous layer's input still on its way to the host (its device copy is freed
  // once it has arrived, so at most two layer inputs are on the device at a time).
  Tensor in_flight;
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
    Tensor input = std::move(a.x_in);
    a = LayerActs{};
    input.recharge(MemCategory::checkpoints);
    if (!offload) {
      kept[static_cast<std::size_t>(l)] = std::move(input);
      continue;
    }
    // Pinned host buffers are slow to allocate: made once, kept for every later step.
    Tensor& host = host_kept_[static_cast<std::size_t>(l)];
    if (host.size() != input.size()) host = Tensor(be_, input.size(), adt_, MemCategory::host_offload);
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

void Model::blocks_backward(std::vector<LayerActs>& la, std::vector<Tensor>& kept, Ref dx,
                            const int* positions) {
  const bool full = mem_.checkpoint == seqpar::Checkpoint::full;
  const bool offload = full && mem_.offload_checkpoints;
  // Offload: layer l's input comes back from the host while layer l+1 recomputes and runs its
  // backward (prefetch one layer ahead).
  Tensor next;
  Backend::CopyEvent next_done;
  auto prefetch = [&](int l) {
    const Tensor& host = host_kept_[static_cast<std::size_t>(l)];
    next = activations(host.size(), MemCategory::checkpoints);
    const TimelineRange copy(be_.timeline(), trace::Stream::offload, "fetch to device", l);
    next_done = be_.copy_async(next.data(), host.data(), host.bytes(), Backend::CopyDirection::to_device);
  };
  if (offload && cfg_.layers > 0) prefetch(cfg_.layers - 1);
  for (int l = cfg_.layers - 1; l >= 0; --l) {
    LayerActs& a = la[static_cast<std::size_t>(l)];
    if (full) {
      Tensor input;
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
      Tensor out = block_forward(l, std::move(input), a, positions);
      out.reset();
    }
    const TimelineRange phase(be_.timeline(), trace::Stream::compute, "bwd", l);
    block_backward(l, a, dx, positions);
  }
}

double Model::head_forward_backward(CRef hf, const int* labels, float dloss_scale, Ref dhf) {
  const int t = tokens_, c = cfg_.hidden, v = cfg_.vocab;
  // Tiled loss: one tile's logits at a time (logits, loss and the LM head backward per tile), so
  // the [tokens, vocab] logits never exist; untiled: one tile of all rows. The logits are in the
  // activation type; the loss reads each row in fp32 and writes its gradient back in place.
  const int tile = mem_.tiled_loss ? tile_ : t;
  Tensor logits = activations(static_cast<std::int64_t>(tile) * v, MemCategory::logits);
  Floats losses(be_, t, MemCategory::working);
  for (int r0 = 0; r0 < t; r0 += tile) {
    const int n = std::min(tile, t - r0);
    const std::int64_t off = static_cast<std::int64_t>(r0) * c;
    linear_forward(logits.ref(), hf.at(off), lm_head_, v, c, n);
    be_.cross_entropy(losses.data() + r0, logits.ref(), labels + r0, n, v, dloss_scale);
    // logits now hold dloss/dlogits
    linear_backward(dhf.at(off), false, logits.cref(), hf.at(off), lm_head_, v, c, n);
  }
  logits.reset();
  token_losses_.resize(static_cast<std::size_t>(t));
  be_.copy_to_host(token_losses_.data(), losses.data(), losses.bytes());
  double loss_sum = 0.0;
  for (float li : token_losses_) loss_sum += li;
  return loss_sum;
}

double Model::forward_backward(const int* tokens, const int* labels, const int* positions,
                               float dloss_scale) {
  if (blocks_only_) throw Error("forward_backward: this model was built without embedding and LM head");
  const int t = tokens_, c = cfg_.hidden;
  const std::int64_t tc = static_cast<std::int64_t>(t) * c;
  auto temp = [&](std::int64_t n) { return activations(n, MemCategory::working); };

  // ---- forward ----
  std::vector<LayerActs> la(static_cast<std::size_t>(cfg_.layers));
  std::vector<Tensor> kept(static_cast<std::size_t>(cfg_.layers));  // full checkpointing's inputs
  Tensor x = activations(tc);
  be_.embedding_forward(x.ref(), tokens, p(embed_), t, c);
  blocks_forward(x, la, kept, positions);
  Tensor hf = activations(tc);
  Floats rstdf(be_, t, MemCategory::activations);
  be_.rmsnorm_forward(hf.ref(), rstdf.data(), x.cref(), p(final_norm_), t, c, cfg_.norm_eps);

  // ---- loss and LM head backward, then the blocks' backward ----
  Tensor dhf = temp(tc);
  const double loss_sum = head_forward_backward(hf.cref(), labels, dloss_scale, dhf.ref());
  Tensor dx = temp(tc);
  be_.zero(dx.data(), dx.bytes());
  be_.rmsnorm_backward(dx.ref(), g(final_norm_), dhf.cref(), x.cref(), p(final_norm_), rstdf.data(), t, c);
  dhf.reset();
  hf.reset();
  x.reset();
  blocks_backward(la, kept, dx.ref(), positions);
  be_.embedding_backward(g(embed_), dx.cref(), tokens, t, c);
  return loss_sum;
}

void Model::adamw_step(const AdamWConfig& o, int step) {
  for (const ParamTensor& t : tensors_) {
    if (cfg_.tied_embeddings && t.name == "lm_head") continue;
    // The bf16 copy the GEMMs read is written in the same pass.
    be_.adamw(params_.data() + t.offset, grads_.data() + t.offset, m_.data() + t.offset,
              v_.data() + t.offset, t.count, o.lr, o.beta1, o.beta2, o.eps,
              t.decay ? o.weight_decay : 0.0f, step, w16_.size() ? w16_.ref(t.offset) : Ref{});
  }
}

}  // namespace seqpar::train

#include "seqpar/train/sp_attention.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "seqpar/core/doc_work.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/plan_validity.hpp"
#include "seqpar/sim/validity.hpp"
#include "seqpar/train/timeline.hpp"

namespace seqpar::train {

void join_compute_stream(Backend& be, comm::Groups& g) {
  if (!be.on_gpu()) return;
  for (comm::Communicator* c : {g.sp.get(), g.ulysses.get(), g.ring.get(), g.dp.get()})
    if (c) c->set_stream(be.compute_stream());
}

void check_ulysses_heads(int heads, int kv_heads, int ulysses) {
  // The simulator's rules (core's check_heads), so a plan it accepts is one the step can run.
  std::vector<std::string> errors;
  if (check_heads(heads, kv_heads, ulysses, errors)) return;
  std::string msg;
  for (const std::string& e : errors) msg += (msg.empty() ? "" : "; ") + e;
  throw Error(msg);
}

void check_window(const ModelConfig& c, const seqpar::Plan& p) {
  if (std::string why = sim::window_method_error(c.kinds_model(), p); !why.empty()) throw Error(why);
}

SpAttention::SpAttention(Backend& be, const SeqLayout& layout, int ring_index,
                         comm::Communicator* ulysses, comm::Communicator* ring, AttnDims dims)
    : be_(be), adt_(be.act_dtype()), layout_(layout), ring_index_(ring_index), ulysses_(ulysses), ring_(ring),
      dims_(dims), u_(layout.ulysses()), r_(layout.ring()) {
  if (u_ > 1 && (!ulysses_ || ulysses_->size() != u_))
    throw Error(fmt::format("Ulysses group: need a communicator of size {}", u_));
  if (r_ > 1 && (!ring_ || ring_->size() != r_))
    throw Error(fmt::format("Ring group: need a communicator of size {}", r_));
  check_ulysses_heads(dims.heads, dims.kv_heads, u_);
  int kv = dims.kv_heads;
  if (kv % u_ != 0) {  // U % kv_heads == 0: each KV head replicated so every rank gets one
    rep_ = u_ / kv;
    kv = u_;
  }
  nl_ = layout.local_len();
  ng_ = layout.group_len();
  hl_ = dims.heads / u_;
  kvl_ = kv / u_;
  std::vector<std::vector<Segment>> groups;
  for (int g = 0; g < r_; ++g) groups.push_back(layout.group_segments(g));
  seqs_.assign(static_cast<std::size_t>(dims.batch), groups);
  single_ = r_ == 1 && seqs_[0][static_cast<std::size_t>(ring_index_)].size() == 1;
}

void SpAttention::set_sequences(std::vector<std::vector<std::vector<Segment>>> seqs) {
  if (seqs.size() != static_cast<std::size_t>(dims_.batch))
    throw Error(fmt::format("set_sequences: {} sequences for a micro-batch of {}", seqs.size(), dims_.batch));
  single_ = r_ == 1;
  for (const auto& groups : seqs) {
    if (groups.size() != static_cast<std::size_t>(r_))
      throw Error(fmt::format("set_sequences: {} ring groups for a ring of {}", groups.size(), r_));
    for (const auto& g : groups) {
      std::int64_t held = 0;
      for (const Segment& sg : g) held += sg.len;
      if (held != ng_) throw Error(fmt::format("set_sequences: a ring group holds {} tokens, not {}", held, ng_));
    }
    single_ = single_ && groups[static_cast<std::size_t>(ring_index_)].size() == 1;
  }
  seqs_ = std::move(seqs);
}

bool SpAttention::sees(const Segment& qs, const Segment& ks) const {
  if (qs.doc < 0 || ks.doc < 0) return false;  // padding: attends nothing, nothing attends it
  const bool packed = ignores_documents();
  if (!packed && qs.doc != ks.doc) return false;
  // Some query sees some key iff the causal bound lets the last query see the first key, and the
  // nearest pair (the first query with the last key at or before it) is inside the band (core's in_band).
  const std::int64_t q0 = packed ? qs.pos : qs.doc_pos, k0 = packed ? ks.pos : ks.doc_pos;
  const std::int64_t q_last = q0 + qs.len - 1, k_last = k0 + ks.len - 1;
  return in_band(q_last, k0, 0) && in_band(q0, std::min(k_last, q0), band());
}

void SpAttention::record(const AttnShape& sh) {
  // The mask as the call applies it (AttnShape: query i sees key j iff k_offset + j <= q_offset + i,
  // and under a window W also q_offset + i - (k_offset + j) < W: the keys j in [last - W + 1, last]),
  // row by row: what the rank computed, counted independently of core's doc_work formulae.
  std::int64_t pairs = 0;
  for (int i = 0; i < sh.seq_q; ++i) {
    const std::int64_t last = sh.q_offset + i - sh.k_offset;  // the last key row it sees
    const std::int64_t first = sh.window > 0 ? last - sh.window + 1 : 0;
    pairs += std::clamp<std::int64_t>(last + 1, 0, sh.seq_k) - std::clamp<std::int64_t>(first, 0, sh.seq_k);
  }
  work_.pairs += pairs * sh.heads;
  work_.calls += 1;
}

int SpAttention::open_hop(const char* what, int step) {
  Timeline* t = be_.timeline();  // the name is built only when a timeline records
  return t ? t->begin(trace::Stream::ring, fmt::format("{} {}", what, step)) : -1;
}

void SpAttention::close_hop(int id) {
  if (Timeline* t = be_.timeline()) t->end(id);
}

void SpAttention::exchange(std::int64_t n, const std::function<void(Ref)>& pack,
                           const std::function<void(CRef)>& unpack) {
  Tensor send = act(n, MemCategory::attention_buffers), recv = act(n, MemCategory::attention_buffers);
  pack(send.ref());
  const TimelineRange range(be_.timeline(), trace::Stream::ulysses_a2a, "all-to-all");
  ulysses_->all_to_all(send.data(), recv.data(), static_cast<std::size_t>(n / u_), adt_);
  unpack(recv.cref());
}

void SpAttention::gather_seq(CRef in, Ref out, int heads) {
  const int b = dims_.batch, d = dims_.head_dim;
  exchange(static_cast<std::int64_t>(b) * nl_ * heads * d,
           [&](Ref send) { be_.ulysses_pack(u_, b, nl_, heads, d, in, send); },
           [&](CRef recv) { be_.ulysses_unpack(u_, b, nl_, heads, d, recv, out); });
}

void SpAttention::scatter_seq(CRef in, Ref out, int heads) {
  const int b = dims_.batch, d = dims_.head_dim;
  exchange(static_cast<std::int64_t>(b) * nl_ * heads * d,
           [&](Ref send) { be_.ulysses_pack_reverse(u_, b, nl_, heads, d, in, send); },
           [&](CRef recv) { be_.ulysses_unpack_reverse(u_, b, nl_, heads, d, recv, out); });
}

void SpAttention::gather_qkv(CRef q, CRef k, CRef v, Ref yq, Ref yk, Ref yv, int kv) {
  const int b = dims_.batch, h = dims_.heads, d = dims_.head_dim;
  exchange(static_cast<std::int64_t>(b) * nl_ * (h + 2 * kv) * d,
           [&](Ref send) { be_.ulysses_pack_qkv(u_, b, nl_, h, kv, d, q, k, v, send); },
           [&](CRef recv) { be_.ulysses_unpack_qkv(u_, b, nl_, h, kv, d, recv, yq, yk, yv); });
}

void SpAttention::scatter_qkv(CRef dq, CRef dk, CRef dv, Ref xq, Ref xk, Ref xv, int kv) {
  const int b = dims_.batch, h = dims_.heads, d = dims_.head_dim;
  exchange(static_cast<std::int64_t>(b) * nl_ * (h + 2 * kv) * d,
           [&](Ref send) { be_.ulysses_pack_qkv_reverse(u_, b, nl_, h, kv, d, dq, dk, dv, send); },
           [&](CRef recv) { be_.ulysses_unpack_qkv_reverse(u_, b, nl_, h, kv, d, recv, xq, xk, xv); });
}

AttnShape SpAttention::block_shape(const Segment& qs, const Segment& ks) const {
  const bool packed = ignores_documents();  // Fault::document_boundary_ignored: sequence positions
  AttnShape s;
  s.batch = 1;  // one sequence at a time: a segment of it is then one contiguous block
  s.seq_q = qs.len;
  s.seq_k = ks.len;
  s.heads = hl_;
  s.kv_heads = kvl_;
  s.head_dim = dims_.head_dim;
  s.causal = true;
  s.q_offset = packed ? qs.pos : qs.doc_pos;
  s.k_offset = packed ? ks.pos : ks.doc_pos;
  s.window = band();
  return s;
}

std::int64_t SpAttention::lse_offset(int b, int seg) const {
  // [b][segment][H/U][segment length]: each (sequence, segment) block is its own lse array.
  return (static_cast<std::int64_t>(b) * ng_ + segs(b)[static_cast<std::size_t>(seg)].offset) * hl_;
}

void SpAttention::forward(Tensor&& q, Tensor&& k, Tensor&& v, AttnSaved& s) {
  const int b = dims_.batch, d = dims_.head_dim;
  if (faulty(Fault::gqa_wrong_group, 1)) {
    swap_kv_heads(k.ref());
    swap_kv_heads(v.ref());
  }
  if (u_ == 1) {
    s.q = std::move(q);
    s.k = std::move(k);
    s.v = std::move(v);
  } else {
    if (rep_ > 1) {  // each KV head replicated so every rank of the group gets one
      for (Tensor* kv : {&k, &v}) {
        Tensor wide = act(static_cast<std::int64_t>(b) * nl_ * kvl_ * u_ * d, MemCategory::attention_buffers);
        be_.replicate_kv_heads(rep_, b, nl_, dims_.kv_heads, d, kv->cref(), wide.ref());
        *kv = std::move(wide);
      }
    }
    s.q = act(static_cast<std::int64_t>(b) * ng_ * hl_ * d, MemCategory::activations);
    const std::int64_t kv_n = static_cast<std::int64_t>(b) * ng_ * kvl_ * d;
    s.k = act(kv_n, MemCategory::activations);
    s.v = act(kv_n, MemCategory::activations);
    gather_qkv(q.cref(), k.cref(), v.cref(), s.q.ref(), s.k.ref(), s.v.ref(), kvl_ * u_);
    q.reset();
    k.reset();
    v.reset();
    if (fault_ == Fault::kv_wrong_block && r_ == 1 && ulysses_->rank() == 1) {
      swap_first_kv_chunks(s.k);
      swap_first_kv_chunks(s.v);
    }
    if (fault_ == Fault::a2a_layout_transposed && ulysses_->rank() == 1) {
      transpose_peer_chunks(s.q, hl_);
      transpose_peer_chunks(s.k, kvl_);
      transpose_peer_chunks(s.v, kvl_);
    }
  }
  s.o = act(static_cast<std::int64_t>(b) * ng_ * hl_ * d, MemCategory::activations);
  s.lse = Floats(be_, static_cast<std::int64_t>(b) * ng_ * hl_, MemCategory::activations);
  if (layout_.kv_all_gather())
    all_gather_forward(s.q.cref(), s.k.cref(), s.v.cref(), s.o.ref(), s.lse.data());
  else
    ring_forward(s.q.cref(), s.k.cref(), s.v.cref(), s.o.ref(), s.lse.data());
  if (u_ > 1) {
    s.out = act(static_cast<std::int64_t>(b) * nl_ * dims_.heads * d, MemCategory::activations);
    scatter_seq(s.o.cref(), s.out.ref(), dims_.heads);
  }
}

void SpAttention::ring_forward(CRef q, CRef k, CRef v, Ref o, float* lse) {
  const int b = dims_.batch, d = dims_.head_dim;
  const std::int64_t kv_n = static_cast<std::int64_t>(b) * ng_ * kvl_ * d;
  const std::int64_t q_n = static_cast<std::int64_t>(b) * ng_ * hl_ * d;
  if (single_block()) {  // each sequence's queries see its keys in one block: nothing to merge
    for (int bi = 0; bi < b; ++bi) {
      const Segment& sg = segs(bi)[0];
      const std::int64_t qo = (static_cast<std::int64_t>(bi) * ng_ + sg.offset) * hl_ * d;
      const std::int64_t ko = (static_cast<std::int64_t>(bi) * ng_ + sg.offset) * kvl_ * d;
      be_.attention_forward(block_shape(sg, sg), q.at(qo), k.at(ko), v.at(ko), o.at(qo),
                            lse + lse_offset(bi, 0));
      record(block_shape(sg, sg));
    }
    return;
  }
  // K and V travel together: one message per ring step.
  Tensor cur = act(2 * kv_n, MemCategory::attention_buffers), next;
  if (r_ > 1) next = act(2 * kv_n, MemCategory::attention_buffers);
  const std::size_t kv_bytes = static_cast<std::size_t>(kv_n) * dtype_size(adt_);
  be_.copy(cur.data(), k.p, kv_bytes);
  be_.copy(cur.ref(kv_n).p, v.p, kv_bytes);

  // The merged output accumulates in fp32 (o = 0, lse = -inf: "nothing merged yet") and is stored
  // in o's type once, at the end.
  Floats o_acc(be_, q_n, MemCategory::attention_buffers);
  be_.zero(o_acc.data(), o_acc.bytes());
  be_.fill(lse, -std::numeric_limits<float>::infinity(), static_cast<std::int64_t>(b) * ng_ * hl_);
  int max_seg = 0;
  for (int bi = 0; bi < b; ++bi)
    for (const Segment& sg : segs(bi)) max_seg = std::max(max_seg, sg.len);
  Tensor o_part = act(static_cast<std::int64_t>(max_seg) * hl_ * d, MemCategory::attention_buffers);
  Floats lse_part(be_, static_cast<std::int64_t>(max_seg) * hl_, MemCategory::attention_buffers);

  // Fault::kv_wrong_block: ring rank 1 keeps its own block (step 0) and uses it again at step 1.
  const bool stale_step = fault_ == Fault::kv_wrong_block && r_ > 1 && ring_index_ == 1;
  Tensor stale;
  if (stale_step) {
    stale = act(2 * kv_n, MemCategory::working);
    be_.copy(stale.data(), cur.data(), stale.bytes());
  }

  const int next_rank = (ring_index_ + 1) % r_, prev_rank = (ring_index_ + r_ - 1) % r_;
  for (int t = 0; t < r_; ++t) {
    comm::Request req;
    const int hop = t + 1 < r_ ? open_hop("fwd K,V hop", t) : -1;
    if (t + 1 < r_)
      req = ring_->send_recv_async(cur.data(), next_rank, next.data(), prev_rank,
                                   static_cast<std::size_t>(2 * kv_n), adt_);
    const int src = (ring_index_ + r_ - t) % r_;
    const CRef kv = stale_step && t == 1 ? stale.cref() : cur.cref();
    const bool skipped = faulty(Fault::ring_step_skipped, 1) && t == 1;
    for (int bi = 0; bi < b && !skipped; ++bi) {
      const std::vector<Segment>& ksegs = group(bi, src);
      for (std::size_t qi = 0; qi < segs(bi).size(); ++qi) {
        const Segment& qs = segs(bi)[qi];
        for (const Segment& ks : ksegs) {
          const bool leak = leaks_future_key(qs, ks);
          if (!sees(qs, ks) && !leak) continue;  // another document, or entirely in the causal future
          AttnShape sh = block_shape(qs, ks);
          if (leak) sh.k_offset -= 1;
          const std::int64_t qo = (static_cast<std::int64_t>(bi) * ng_ + qs.offset) * hl_ * d;
          const std::int64_t ko = (static_cast<std::int64_t>(bi) * ng_ + ks.offset) * kvl_ * d;
          be_.attention_forward(sh, q.at(qo), kv.at(ko), kv.at(kv_n + ko), o_part.ref(), lse_part.data());
          record(sh);
          float* const lse_q = lse + lse_offset(bi, static_cast<int>(qi));
          if (faulty(Fault::lse_merge_wrong_max, 1))
            merge_with_wrong_max(qs.len, o_acc.data() + qo, lse_q, o_part.cref(), lse_part.data());
          else
            be_.lse_merge(1, qs.len, hl_, d, o_acc.data() + qo, lse_q, o_part.cref(), lse_part.data());
        }
      }
    }
    if (t + 1 < r_) {  // (a back end may complete the transfer at once and return no request)
      ring_->wait(req);
      close_hop(hop);
      std::swap(cur, next);
    }
  }
  be_.convert(o, o_acc.data(), q_n);
}

void SpAttention::backward(const AttnSaved& s, CRef dout, Ref dq, Ref dk, Ref dv) {
  if (layout_.kv_all_gather())  // U = 1 (SeqLayout's rule)
    all_gather_backward(s, dout, dq, dk, dv);
  else if (u_ == 1)
    ring_backward(s, dout, dq, dk, dv);
  else
    ulysses_backward(s, dout, dq, dk, dv);
  const bool dkv_fault = fault_ == Fault::dkv_return_dropped || fault_ == Fault::dkv_return_doubled;
  if (dkv_fault && r_ == 1 && u_ > 1 && ulysses_->rank() == 1) edit_returned_dkv(dk, dv);
  if (faulty(Fault::gqa_wrong_group, 1)) {  // the adjoint of the forward's swap
    swap_kv_heads(dk);
    swap_kv_heads(dv);
  }
}

void SpAttention::ulysses_backward(const AttnSaved& s, CRef dout, Ref dq, Ref dk, Ref dv) {
  const int b = dims_.batch, d = dims_.head_dim;
  const std::int64_t q_n = static_cast<std::int64_t>(b) * ng_ * hl_ * d;
  const std::int64_t kv_n = static_cast<std::int64_t>(b) * ng_ * kvl_ * d;
  Tensor dout_g = act(q_n, MemCategory::attention_buffers), dq_g = act(q_n, MemCategory::attention_buffers);
  Tensor dk_g = act(kv_n, MemCategory::attention_buffers), dv_g = act(kv_n, MemCategory::attention_buffers);
  gather_seq(dout, dout_g.ref(), dims_.heads);
  ring_backward(s, dout_g.cref(), dq_g.ref(), dk_g.ref(), dv_g.ref());
  dout_g.reset();
  if (rep_ == 1) {
    scatter_qkv(dq_g.cref(), dk_g.cref(), dv_g.cref(), dq, dk, dv, dims_.kv_heads);
    return;
  }
  // Each KV head's replicas come back as separate heads; their gradients are summed.
  const std::int64_t wide_n = static_cast<std::int64_t>(b) * nl_ * kvl_ * u_ * d;
  Tensor dk_w = act(wide_n, MemCategory::attention_buffers), dv_w = act(wide_n, MemCategory::attention_buffers);
  scatter_qkv(dq_g.cref(), dk_g.cref(), dv_g.cref(), dq, dk_w.ref(), dv_w.ref(), kvl_ * u_);
  be_.reduce_kv_heads(rep_, b, nl_, dims_.kv_heads, d, dk_w.cref(), dk);
  be_.reduce_kv_heads(rep_, b, nl_, dims_.kv_heads, d, dv_w.cref(), dv);
}

void SpAttention::ring_backward(const AttnSaved& s, CRef dout, Ref dq, Ref dk, Ref dv) {
  const int b = dims_.batch, d = dims_.head_dim;
  const std::int64_t q_n = static_cast<std::int64_t>(b) * ng_ * hl_ * d;
  const std::int64_t kv_n = static_cast<std::int64_t>(b) * ng_ * kvl_ * d;
  if (single_block()) {  // one block per sequence: its gradients are the whole gradients
    for (int bi = 0; bi < b; ++bi) {
      const Segment& sg = segs(bi)[0];
      const std::int64_t qo = (static_cast<std::int64_t>(bi) * ng_ + sg.offset) * hl_ * d;
      const std::int64_t ko = (static_cast<std::int64_t>(bi) * ng_ + sg.offset) * kvl_ * d;
      be_.attention_backward(block_shape(sg, sg), s.q.cref(qo), s.k.cref(ko), s.v.cref(ko), s.o.cref(qo),
                             s.lse.data() + lse_offset(bi, 0), dout.at(qo), dq.at(qo), dk.at(ko), dv.at(ko));
    }
    return;
  }
  const bool ring = r_ > 1;
  // K,V rotate ahead (overlapped with the block in hand); the dK,dV of the visiting block are
  // accumulated here (fp32), then sent on to the next rank, which adds its part while the
  // following block is computed. After R sends each rank holds the full dK,dV of its own block.
  Tensor cur = act(2 * kv_n, MemCategory::attention_buffers), next;
  Floats dkv_in;
  Floats dkv_local[2];
  dkv_local[0] = Floats(be_, 2 * kv_n, MemCategory::attention_buffers);
  if (ring) {
    next = act(2 * kv_n, MemCategory::attention_buffers);
    dkv_in = Floats(be_, 2 * kv_n, MemCategory::attention_buffers);
    dkv_local[1] = Floats(be_, 2 * kv_n, MemCategory::attention_buffers);
  }
  const std::size_t kv_bytes = static_cast<std::size_t>(kv_n) * dtype_size(adt_);
  be_.copy(cur.data(), s.k.data(), kv_bytes);
  be_.copy(cur.ref(kv_n).p, s.v.data(), kv_bytes);
  Floats dq_acc(be_, q_n, MemCategory::attention_buffers);
  be_.zero(dq_acc.data(), dq_acc.bytes());

  int max_seg = 0;
  for (int bi = 0; bi < b; ++bi)
    for (const Segment& sg : segs(bi)) max_seg = std::max(max_seg, sg.len);
  const std::int64_t max_k = ng_;  // a K segment is at most a whole group
  Tensor dq_t = act(static_cast<std::int64_t>(max_seg) * hl_ * d, MemCategory::attention_buffers);
  Tensor dk_t = act(max_k * kvl_ * d, MemCategory::attention_buffers);
  Tensor dv_t = act(max_k * kvl_ * d, MemCategory::attention_buffers);

  const int next_rank = (ring_index_ + 1) % r_, prev_rank = (ring_index_ + r_ - 1) % r_;
  comm::Request dkv_req;
  Floats own_part;  // Fault::dkv_return_dropped: this rank's own part of its block's dK,dV
  for (int t = 0; t < r_; ++t) {
    comm::Request kv_req;
    const int hop = t + 1 < r_ ? open_hop("bwd K,V + dK,dV hop", t) : -1;
    if (t + 1 < r_)
      kv_req = ring_->send_recv_async(cur.data(), next_rank, next.data(), prev_rank,
                                      static_cast<std::size_t>(2 * kv_n), adt_);
    Floats& acc = dkv_local[t % 2];
    be_.zero(acc.data(), acc.bytes());
    const int src = (ring_index_ + r_ - t) % r_;
    const bool skipped = faulty(Fault::ring_step_skipped, 1) && t == 1;
    for (int bi = 0; bi < b && !skipped; ++bi) {
      const std::vector<Segment>& ksegs = group(bi, src);
      for (std::size_t qi = 0; qi < segs(bi).size(); ++qi) {
        const Segment& qs = segs(bi)[qi];
        for (const Segment& ks : ksegs) {
          const bool leak = leaks_future_key(qs, ks);
          if (!sees(qs, ks) && !leak) continue;
          AttnShape sh = block_shape(qs, ks);
          if (leak) sh.k_offset -= 1;
          const std::int64_t qo = (static_cast<std::int64_t>(bi) * ng_ + qs.offset) * hl_ * d;
          const std::int64_t ko = (static_cast<std::int64_t>(bi) * ng_ + ks.offset) * kvl_ * d;
          const std::int64_t kn = static_cast<std::int64_t>(ks.len) * kvl_ * d;
          be_.attention_backward(sh, s.q.cref(qo), cur.cref(ko), cur.cref(kv_n + ko), s.o.cref(qo),
                                 s.lse.data() + lse_offset(bi, static_cast<int>(qi)), dout.at(qo), dq_t.ref(),
                                 dk_t.ref(), dv_t.ref());
          be_.add(dq_acc.data() + qo, dq_t.cref(), static_cast<std::int64_t>(qs.len) * hl_ * d);
          be_.add(acc.data() + ko, dk_t.cref(), kn);
          be_.add(acc.data() + kv_n + ko, dv_t.cref(), kn);
        }
      }
    }
    if (ring) {
      if (t > 0) {  // the dK,dV the previous ranks accumulated for this same block
        ring_->wait(dkv_req);
        be_.add(acc.data(), dkv_in.data(), 2 * kv_n);
      }
      dkv_req = ring_->send_recv_async(acc.data(), next_rank, dkv_in.data(), prev_rank,
                                       static_cast<std::size_t>(2 * kv_n), DType::fp32);
      if (t == 0 && faulty(Fault::dkv_return_dropped, 0)) {  // keeps its own part: the return is dropped
        own_part = Floats(be_, 2 * kv_n, MemCategory::working);
        be_.copy(own_part.data(), acc.data(), own_part.bytes());
      }
    }
    if (t + 1 < r_) {
      ring_->wait(kv_req);
      close_hop(hop);
      std::swap(cur, next);
    }
  }
  const float* own = dkv_local[0].data();
  if (ring) {
    ring_->wait(dkv_req);
    own = dkv_in.data();
    if (faulty(Fault::dkv_return_doubled, 0)) be_.scale(dkv_in.data(), 2.0f, 2 * kv_n);
    if (faulty(Fault::dkv_return_dropped, 0)) own = own_part.data();
  }
  be_.convert(dq, dq_acc.data(), q_n);
  be_.convert(dk, own, kv_n);
  be_.convert(dv, own + kv_n, kv_n);
}

Tensor SpAttention::gather_sequence(CRef local, const char* what, bool swap_first_peers) {
  const int b = dims_.batch;
  const std::int64_t n = layout_.seq_len(), row = static_cast<std::int64_t>(kvl_) * dims_.head_dim;
  const std::int64_t local_n = b * nl_ * row;
  // Rank order first (chunk p: rank p's tokens in its local order), then sequence order, which
  // the head/tail layout's two chunks per rank need for one key prefix per call.
  Tensor by_rank = act(r_ * local_n, MemCategory::attention_buffers);
  {
    Timeline* t = be_.timeline();  // the name is built only when a timeline records
    const TimelineRange range(t, trace::Stream::ring, t ? fmt::format("{} all-gather", what) : std::string());
    ring_->all_gather(local.p, by_rank.data(), static_cast<std::size_t>(local_n), adt_);
  }
  Tensor seq = act(b * n * row, MemCategory::attention_buffers);
  const std::size_t elem = dtype_size(adt_);
  for (int p = 0; p < r_; ++p) {
    const int from = swap_first_peers && p < 2 ? 1 - p : p;  // peers hold equally long chunks
    for (int bi = 0; bi < b; ++bi)
      for (const Segment& sg : group(bi, p))
        be_.copy(seq.ref((bi * n + sg.pos) * row).p,
                 by_rank.cref(from * local_n + (static_cast<std::int64_t>(bi) * nl_ + sg.offset) * row).p,
                 static_cast<std::size_t>(sg.len * row) * elem);
  }
  return seq;
}

void SpAttention::all_gather_forward(CRef q, CRef k, CRef v, Ref o, float* lse) {
  const int b = dims_.batch, d = dims_.head_dim;
  const std::int64_t n = layout_.seq_len();
  // Fault::kv_wrong_block: ring rank 1 sees the K,V of peers 0 and 1 swapped (the wrong peer's block).
  const bool wrong = fault_ == Fault::kv_wrong_block && ring_index_ == 1;
  const Tensor ks = gather_sequence(k, "K", wrong), vs = gather_sequence(v, "V", wrong);
  // Padding queries (documents) get no call: their output stays 0.
  be_.zero(o.p, static_cast<std::size_t>(b) * ng_ * hl_ * d * dtype_size(o.t));
  for (int bi = 0; bi < b; ++bi)
    for (std::size_t qi = 0; qi < segs(bi).size(); ++qi) {
      const Segment& qs = segs(bi)[qi];
      if (qs.doc < 0) continue;
      std::int64_t key_start = 0;
      const AttnShape sh = prefix_shape(qs, qi == 0, &key_start);
      const std::int64_t qo = (static_cast<std::int64_t>(bi) * ng_ + qs.offset) * hl_ * d;
      const std::int64_t ko = (bi * n + key_start) * kvl_ * d;
      be_.attention_forward(sh, q.at(qo), ks.cref(ko), vs.cref(ko), o.at(qo), lse + lse_offset(bi, static_cast<int>(qi)));
      record(sh);
    }
}

void SpAttention::all_gather_backward(const AttnSaved& s, CRef dout, Ref dq, Ref dk, Ref dv) {
  const int b = dims_.batch, d = dims_.head_dim;
  const std::int64_t n = layout_.seq_len(), row = static_cast<std::int64_t>(kvl_) * d;
  const std::int64_t local_n = b * nl_ * row;
  Tensor ks = gather_sequence(s.k.cref(), "K", false), vs = gather_sequence(s.v.cref(), "V", false);
  // dK,dV of the whole sequence in fp32, laid out as the reduce-scatter hands them out: rank p's
  // [dK | dV], each in p's local token order.
  Floats acc(be_, 2 * r_ * local_n, MemCategory::attention_buffers);
  be_.zero(acc.data(), acc.bytes());
  // Padding queries (documents) get no call: their dQ is 0.
  be_.zero(dq.p, static_cast<std::size_t>(b) * ng_ * hl_ * d * dtype_size(dq.t));
  int longest = 0;
  std::int64_t unused = 0;
  for (int bi = 0; bi < b; ++bi)
    for (std::size_t qi = 0; qi < segs(bi).size(); ++qi)
      longest = std::max(longest, static_cast<int>(prefix_shape(segs(bi)[qi], qi == 0, &unused).seq_k));
  Tensor dk_t = act(longest * row, MemCategory::attention_buffers), dv_t = act(longest * row, MemCategory::attention_buffers);
  for (int bi = 0; bi < b; ++bi)
    for (std::size_t qi = 0; qi < segs(bi).size(); ++qi) {
      const Segment& qs = segs(bi)[qi];
      if (qs.doc < 0) continue;  // padding: no call, no gradient
      std::int64_t key_start = 0;
      const AttnShape sh = prefix_shape(qs, qi == 0, &key_start);
      const std::int64_t keys_end = key_start + sh.seq_k;
      const std::int64_t qo = (static_cast<std::int64_t>(bi) * ng_ + qs.offset) * hl_ * d;
      const std::int64_t ko = (bi * n + key_start) * row;
      // One call per query chunk: its dQ is whole, written in place.
      be_.attention_backward(sh, s.q.cref(qo), ks.cref(ko), vs.cref(ko), s.o.cref(qo),
                             s.lse.data() + lse_offset(bi, static_cast<int>(qi)), dout.at(qo), dq.at(qo), dk_t.ref(),
                             dv_t.ref());
      for (int p = 0; p < r_; ++p)  // each key's gradient to its owner's chunk
        for (const Segment& sg : group(bi, p)) {
          const std::int64_t lo = std::max(sg.pos, key_start), hi = std::min(sg.pos + sg.len, keys_end);
          if (lo >= hi) continue;
          const std::int64_t len = (hi - lo) * row;
          float* at = acc.data() + p * 2 * local_n + (static_cast<std::int64_t>(bi) * nl_ + sg.offset + (lo - sg.pos)) * row;
          be_.add(at, dk_t.cref((lo - key_start) * row), len);
          be_.add(at + local_n, dv_t.cref((lo - key_start) * row), len);
        }
    }
  ks.reset();
  vs.reset();
  dk_t.reset();
  dv_t.reset();
  Floats mine(be_, 2 * local_n, MemCategory::attention_buffers), own_part;
  if (faulty(Fault::dkv_return_dropped, 0)) {  // keeps its own part: the reduce-scatter's sum is dropped
    own_part = Floats(be_, 2 * local_n, MemCategory::working);
    be_.copy(own_part.data(), acc.data() + ring_index_ * 2 * local_n, own_part.bytes());
  }
  {
    const TimelineRange range(be_.timeline(), trace::Stream::ring, "dK,dV reduce-scatter");
    ring_->reduce_scatter(acc.data(), mine.data(), static_cast<std::size_t>(2 * local_n), DType::fp32);
  }
  acc.reset();
  if (faulty(Fault::dkv_return_doubled, 0)) be_.scale(mine.data(), 2.0f, 2 * local_n);
  const float* own = faulty(Fault::dkv_return_dropped, 0) ? own_part.data() : mine.data();
  be_.convert(dk, own, local_n);
  be_.convert(dv, own + local_n, local_n);
}

AttnShape SpAttention::prefix_shape(const Segment& qs, bool first, std::int64_t* key_start) const {
  // The document's keys up to the segment's last query, in the gathered (packed) order; with
  // Fault::document_boundary_ignored the whole sequence's prefix.
  const bool packed = ignores_documents();
  Segment keys{packed ? 0 : qs.pos - qs.doc_pos, static_cast<int>((packed ? qs.pos : qs.doc_pos) + qs.len), 0,
               qs.doc, 0};
  // Under a window the call takes the keys of its queries' bands only, (first query - W, last query]
  // (as Transformer Engine slices each chunk's window out of the gathered K,V).
  if (const std::int64_t w = band(); w > 0) {
    const std::int64_t skip = std::max<std::int64_t>(0, (packed ? qs.pos : qs.doc_pos) - (w - 1));
    keys.pos += skip;
    keys.len -= static_cast<int>(skip);
    keys.doc_pos = skip;
  }
  *key_start = keys.pos;
  AttnShape sh = block_shape(qs, keys);
  if (faulty(Fault::causal_mask_off_by_one, 0) && first && qs.pos + qs.len < layout_.seq_len()) {
    sh.seq_k += 1;  // one key too many, and the mask shifted to let each query see it
    sh.q_offset += 1;
  }
  return sh;
}

}  // namespace seqpar::train

// Sequence-parallel causal attention over communicators, written once for every method:
// Ulysses all-to-alls inside groups of U ranks (q, k, v in one all-to-all each way, with KV-head
// replication when U % kv_heads == 0), then Ring attention across R groups (K,V rotating while the
// block in hand is computed, partial results merged by LSE; backward rotates K,V again and sends
// dK,dV around the ring).
// Ulysses is U = P, R = 1; Ring is U = 1, R = P. All-gather KV context parallelism (U = 1, R = P;
// SeqLayout::kv_all_gather) gathers the whole sequence's K,V over the ring group instead, runs one
// attention call per local query chunk over its key prefix (nothing to merge), and in the backward
// gathers K,V again and reduce-scatters the whole sequence's dK,dV (fp32) to their owners.
// Under packed documents (set_sequences; doc_shards.hpp) every (query segment, key block) call is
// cut per document, causal through the document positions, as a varlen kernel sees cu_seqlens.
// A sliding window (set_window) bands every call's mask (core's in_band, through the document
// positions): the calls wholly outside the band are not made, and all-gather's calls take only the
// keys of their queries' bands.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "seqpar/comm/communicator.hpp"
#include "seqpar/train/backend.hpp"
#include "seqpar/core/plan.hpp"
#include "seqpar/train/fault.hpp"
#include "seqpar/train/model_config.hpp"
#include "seqpar/train/seq_layout.hpp"

namespace seqpar::train {

struct AttnDims {
  int batch = 1, heads = 0, kv_heads = 0, head_dim = 0;
};

// What backward needs, in the head-sharded (post-Ulysses) layout: q [b, Ng, H/U, d],
// k, v [b, Ng, KVr/U, d], o like q (all in the back end's activation type), lse (fp32)
// [b][segment][H/U][segment length]; plus the output in the caller's layout (for U = 1 that is o
// itself).
struct AttnSaved {
  Tensor q, k, v, o, out;
  Floats lse;
  CRef output() const { return out.size() ? out.cref() : o.cref(); }
};

// On the GPU, collectives and ring steps join the back end's compute stream (no-op on the CPU).
void join_compute_stream(Backend& be, comm::Groups& groups);

// The attention a rank computed (forward calls only; every layer and recomputation adds): the
// unmasked (query, key) pairs of its calls times the heads of each call (H/U), and the calls.
struct AttnWork {
  std::int64_t pairs = 0, calls = 0;
};

// Throws seqpar::Error when the heads cannot be split over U ranks: core's check_heads, the
// same rules the simulator applies (docs/ARCHITECTURE.md, Conventions: Methods).
void check_ulysses_heads(int heads, int kv_heads, int ulysses);
// Throws seqpar::Error when the model's sliding-window layers meet a plan whose method no
// implementation serves with a window: the simulator's rule and message (sim::window_method_error).
void check_window(const ModelConfig& c, const seqpar::Plan& p);

class SpAttention {
 public:
  // ulysses / ring: this rank's groups (size U and R; nullptr allowed when the degree is 1).
  SpAttention(Backend& be, const SeqLayout& layout, int ring_index, comm::Communicator* ulysses,
              comm::Communicator* ring, AttnDims dims);

  // q [b, n_local, H, d], k, v [b, n_local, KV, d] in the back end's activation type (consumed:
  // kept as saved state when U = 1).
  void forward(Tensor&& q, Tensor&& k, Tensor&& v, AttnSaved& saved);
  // dout [b, n_local, H, d] -> dq, dk, dv (overwritten) in the input layouts. Partial results
  // (the ring's o, dq and travelling dK,dV) accumulate in fp32 and are stored once at the end.
  void backward(const AttnSaved& saved, CRef dout, Ref dq, Ref dk, Ref dv);

  int kv_replication() const { return rep_; }
  // Packed documents (doc_shards.hpp): for each sequence of the micro-batch, every ring group's
  // segments in buffer order (each group holding the layout's group_len tokens). A (query segment,
  // key segment) pair gets one call when they share a document and some key is at or before some
  // query (causal through the document positions); padding gets none. Until called, every
  // sequence is one document laid out by the SeqLayout.
  void set_sequences(std::vector<std::vector<std::vector<Segment>>> seqs);
  // The sliding window of the layer that runs next (ModelConfig::window_of): 0 full causal.
  void set_window(std::int64_t w) { window_ = w; }
  const AttnWork& work() const { return work_; }
  void reset_work() { work_ = {}; }
  // Tests only: plants a sharding bug (fault.hpp); attention ignores the faults that are not its own.
  void plant_fault(Fault f) { fault_ = f; }

 private:
  void ring_forward(CRef q, CRef k, CRef v, Ref o, float* lse);
  void ring_backward(const AttnSaved& s, CRef dout, Ref dq, Ref dk, Ref dv);
  // U > 1: dout gathered, the ring's backward, dq, dk, dv scattered back (KV replicas summed).
  void ulysses_backward(const AttnSaved& s, CRef dout, Ref dq, Ref dk, Ref dv);
  void all_gather_forward(CRef q, CRef k, CRef v, Ref o, float* lse);
  void all_gather_backward(const AttnSaved& s, CRef dout, Ref dq, Ref dk, Ref dv);
  // One of K, V (`what`: "K" or "V", for the timeline) of every rank of the ring group
  // [b, n_local, KV, d], all-gathered and laid out in sequence order [b, seq_len, KV, d].
  // swap_first_peers: Fault::kv_wrong_block, the chunks of peers 0 and 1 change places.
  Tensor gather_sequence(CRef local, const char* what, bool swap_first_peers);
  // The attention call of a query segment once the whole sequence is at hand: over its document's
  // keys up to its last query, which start at *key_start of the gathered sequence (`first`: the
  // rank's first segment, where Fault::causal_mask_off_by_one makes it one key longer, the mask
  // shifted with it).
  AttnShape prefix_shape(const Segment& qs, bool first, std::int64_t* key_start) const;
  // One sequence-contiguous block per query (no ring, one segment): attention straight into the
  // outputs, nothing to merge or accumulate.
  bool single_block() const { return single_; }
  // Sequence bi's segments: this rank's (its ring group's), and ring group g's.
  const std::vector<Segment>& segs(int bi) const { return group(bi, ring_index_); }
  const std::vector<Segment>& group(int bi, int g) const {
    return seqs_[static_cast<std::size_t>(bi)][static_cast<std::size_t>(g)];
  }
  // Whether some query of qs sees some key of ks (same document, not all in the future).
  bool sees(const Segment& qs, const Segment& ks) const;
  // Fault::document_boundary_ignored on this rank: plain causal over sequence positions.
  bool ignores_documents() const { return faulty(Fault::document_boundary_ignored, 1); }
  // The window this rank's calls apply: the layer's, or 0 under Fault::window_ignored.
  std::int64_t band() const { return faulty(Fault::window_ignored, 1) ? 0 : window_; }
  void record(const AttnShape& sh);
  // forward all-to-all: [b, n, heads, d] -> [b, U*n, heads/U, d]; and its reverse.
  void gather_seq(CRef in, Ref out, int heads);
  void scatter_seq(CRef in, Ref out, int heads);
  // The same for q and k, v (kv heads, replicas included) together: one all-to-all each way.
  void gather_qkv(CRef q, CRef k, CRef v, Ref yq, Ref yk, Ref yv, int kv);
  void scatter_qkv(CRef dq, CRef dk, CRef dv, Ref xq, Ref xk, Ref xv, int kv);
  // pack into a send buffer of n activations, all-to-all in the Ulysses group, unpack from the receive buffer.
  // A ring hop's range on the step's timeline (timeline.hpp), -1 when none records; close_hop ends it.
  int open_hop(const char* what, int step);
  void close_hop(int id);
  void exchange(std::int64_t n, const std::function<void(Ref)>& pack, const std::function<void(CRef)>& unpack);
  Tensor act(std::int64_t n, MemCategory c) { return Tensor(be_, n, adt_, c); }
  AttnShape block_shape(const Segment& qs, const Segment& ks) const;
  std::int64_t lse_offset(int b, int seg) const;
  // Tests only, the planted faults (fault.hpp; sp_attention_faults.cpp): whether this rank
  // carries `f` (on ring rank `rank`, or Ulysses rank `rank` for the group mapping), and the edits.
  bool faulty(Fault f, int ring_rank) const;
  bool leaks_future_key(const Segment& qs, const Segment& ks) const;  // Fault::causal_mask_off_by_one
  // Fault::kv_wrong_block without a ring: swaps the gathered K,V chunks of peers 0 and 1.
  void swap_first_kv_chunks(Tensor& kv);
  // Fault::gqa_wrong_group: swaps KV heads 0 and 1 of [b, nl, kv_heads, d] (its own adjoint).
  void swap_kv_heads(Ref x);
  // Fault::a2a_layout_transposed: each peer's chunk of [b, U*nl, heads, d] read as [heads][nl].
  void transpose_peer_chunks(Tensor& x, int heads);
  // Fault::dkv_return_dropped/doubled without a ring: KV head 0 of dk, dv zeroed or doubled.
  void edit_returned_dkv(Ref dk, Ref dv);
  // Fault::lse_merge_wrong_max: lse_merge, then the error of adding back the wrong maximum.
  void merge_with_wrong_max(int seq_q, float* o_acc, float* lse, CRef o_part, const float* lse_part);

  Backend& be_;
  DType adt_;  // the back end's activation type
  SeqLayout layout_;
  int ring_index_;
  comm::Communicator* ulysses_;
  comm::Communicator* ring_;
  AttnDims dims_;
  int u_, r_, rep_ = 1;
  int nl_, ng_, hl_, kvl_;  // local tokens, gathered tokens, heads and KV heads after the gather
  std::vector<std::vector<std::vector<Segment>>> seqs_;  // [sequence][ring group][segment]
  bool single_ = false;
  AttnWork work_;
  std::int64_t window_ = 0;
  Fault fault_ = Fault::none;
};

}  // namespace seqpar::train

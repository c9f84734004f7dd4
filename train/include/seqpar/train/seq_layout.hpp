// Which global token positions each sequence-parallel rank holds, for Ulysses (U), Ring (R,
// contiguous or zigzag) and hybrid U x R: ring group g holds its ring shard (zigzag: chunks g and
// 2R-1-g of 2R), split into U contiguous pieces over its Ulysses ranks in rank order — exactly
// the order the Ulysses all-to-all gathers them back in. Also how the ring group's ranks see each
// other's K,V: ring hops, or one all-gather (all-gather KV context parallelism, U = 1; zigzag is
// then its head/tail load balancing).
#pragma once
#include <cstdint>
#include <vector>

#include "seqpar/core/plan.hpp"

namespace seqpar::train {

// A run of consecutive global positions [pos, pos + len) at token offset `offset` of a buffer.
// Under a document mask (doc_shards.hpp) a run lies inside one document: `doc` is its index in
// the packed sequence (-1: padding, which attends nothing and which nothing attends) and
// `doc_pos` the document position of its first token, where the causal mask and RoPE count from.
// Without documents the whole sequence is document 0 and doc_pos == pos.
struct Segment {
  std::int64_t pos = 0;
  int len = 0;
  int offset = 0;
  std::int64_t doc = 0;
  std::int64_t doc_pos = 0;
};

// How K,V cross the ring group.
enum class KvExchange { ring_hops, all_gather };

class SeqLayout {
 public:
  // Throws seqpar::Error naming the rule when seq_len is not divisible as the layout needs, or
  // when an all-gather is asked of a plan with a Ulysses part (the step gathers over U = 1 only).
  SeqLayout(std::int64_t seq_len, int ulysses, int ring, bool zigzag, KvExchange kv = KvExchange::ring_hops);

  int ulysses() const { return u_; }
  int ring() const { return r_; }
  bool zigzag() const { return zigzag_; }
  // True when the ring group (R > 1) gathers K,V in one all-gather instead of passing them on.
  bool kv_all_gather() const { return kv_ == KvExchange::all_gather && r_ > 1; }
  std::int64_t seq_len() const { return n_; }
  int local_len() const { return static_cast<int>(n_ / (u_ * r_)); }
  int group_len() const { return static_cast<int>(n_ / r_); }

  // The tokens ring group g holds after the Ulysses gather, in buffer order; adjacent runs merged
  // (document 0, doc_pos == pos).
  std::vector<Segment> group_segments(int g) const;
  // Global positions of the tokens SP rank sp_index (ulysses index = sp_index % U, ring index =
  // sp_index / U) holds, in local order.
  std::vector<int> positions(int sp_index) const;

 private:
  std::int64_t n_;
  int u_, r_;
  bool zigzag_;
  KvExchange kv_;
};

// The exchange a plan's method uses (core's kv_allgather).
inline KvExchange kv_exchange(seqpar::Method m) {
  return seqpar::kv_allgather(m) ? KvExchange::all_gather : KvExchange::ring_hops;
}

}  // namespace seqpar::train

// Which global token positions each sequence-parallel rank holds, for Ulysses (U), Ring (R,
// contiguous or zigzag) and hybrid U x R: ring group g holds its ring shard (zigzag: chunks g and
// 2R-1-g of 2R), split into U contiguous pieces over its Ulysses ranks in rank order — exactly
// the order the Ulysses all-to-all gathers them back in.
#pragma once
#include <cstdint>
#include <vector>

namespace seqpar::train {

// A run of consecutive global positions [pos, pos + len) at token offset `offset` of a buffer.
struct Segment {
  std::int64_t pos = 0;
  int len = 0;
  int offset = 0;
};

class SeqLayout {
 public:
  // Throws seqpar::Error naming the rule when seq_len is not divisible as the layout needs.
  SeqLayout(std::int64_t seq_len, int ulysses, int ring, bool zigzag);

  int ulysses() const { return u_; }
  int ring() const { return r_; }
  bool zigzag() const { return zigzag_; }
  std::int64_t seq_len() const { return n_; }
  int local_len() const { return static_cast<int>(n_ / (u_ * r_)); }
  int group_len() const { return static_cast<int>(n_ / r_); }

  // The tokens ring group g holds after the Ulysses gather, in buffer order; adjacent runs merged.
  std::vector<Segment> group_segments(int g) const;
  // Global positions of the tokens SP rank sp_index (ulysses index = sp_index % U, ring index =
  // sp_index / U) holds, in local order.
  std::vector<int> positions(int sp_index) const;

 private:
  std::int64_t n_;
  int u_, r_;
  bool zigzag_;
};

}  // namespace seqpar::train

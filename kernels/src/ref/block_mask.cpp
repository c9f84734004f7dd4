#include "seqpar/kernels/block_mask.hpp"

#include <cstdint>

namespace seqpar::kernels {

const char* to_string(BlockMask m) {
  switch (m) {
    case BlockMask::full: return "full";
    case BlockMask::causal_top: return "causal";
    case BlockMask::causal_bottom: return "causal-bottom-right";
    case BlockMask::none: return "none";
    case BlockMask::general: return "general";
  }
  return "?";
}

BlockMask classify_block_mask(const ref::AttentionShape& s) {
  ref::validate(s);
  if (!s.causal) return BlockMask::full;
  // Row i sees key j iff k_offset + j <= q_offset + i, i.e. j - i <= d.
  const std::int64_t d = s.q_offset - s.k_offset;
  if (d >= s.seq_k - 1) return BlockMask::full;            // even row 0 sees the last key
  if (d + (s.seq_q - 1) < 0) return BlockMask::none;       // even the last row sees no key
  if (d == 0) return BlockMask::causal_top;
  // Bottom-right alignment only where every row sees at least one key (seq_q <= seq_k).
  if (s.seq_q <= s.seq_k && d == std::int64_t{s.seq_k} - s.seq_q) return BlockMask::causal_bottom;
  return BlockMask::general;
}

}  // namespace seqpar::kernels

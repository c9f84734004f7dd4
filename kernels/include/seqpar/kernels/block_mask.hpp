// Which part of a K,V block a query block sees under the causal mask with global offsets
// (attention_ref.hpp). A ring step is always one of three kinds, and engines that know only the
// standard masks (cuDNN: none or causal) run a step by its kind instead of by raw offsets.
#pragma once
#include "seqpar/kernels/attention_ref.hpp"

namespace seqpar::kernels {

enum class BlockMask {
  full,           // every query row sees every key: no mask
  causal_top,     // the standard causal mask: row i sees keys j <= i (blocks aligned on the diagonal)
  causal_bottom,  // causal aligned at the bottom-right corner: row i sees keys j <= i + seq_k - seq_q
  none,           // no query row sees any key: output 0, LSE -inf, gradients 0
  general,        // anything else (a partial diagonal): only engines that take raw offsets run it
};

const char* to_string(BlockMask m);

// The kind of `s` (validated first; throws seqpar::Error on a bad shape).
BlockMask classify_block_mask(const ref::AttentionShape& s);

}  // namespace seqpar::kernels

// ALST's sequence tiles (arXiv 2506.13996, TiledMLP): a layer's [batch, seq, hidden] input is cut
// along the sequence into ceil(seq / hidden) shards of equal size (the last may be shorter), so
// one shard's [batch, seq/shards, ffn] MLP intermediates are about the size of the whole
// [batch, seq, hidden] stream. The training step tiles its MLP and its logits and loss this way,
// and the simulator prices the same tiles: one definition for both.
#pragma once
#include <algorithm>
#include <cstdint>

namespace seqpar {

// Number of tiles ALST cuts a sequence of `seq_tokens` local tokens into for model width `hidden`
// (1 when either is below 1: nothing to tile). (n - 1) / h + 1 rather than (n + h - 1) / h: no
// overflow for any n.
constexpr std::int64_t alst_tile_count(std::int64_t seq_tokens, std::int64_t hidden) {
  if (seq_tokens < 1 || hidden < 1) return 1;
  return (seq_tokens - 1) / hidden + 1;
}

// Tokens of one sequence in each tile (a tile holds that many tokens of every sequence of the
// micro-batch): ceil(seq_tokens / alst_tile_count), so at most `hidden` and at least about half of
// it once a sequence is longer than `hidden`; seq_tokens (at least 1) when it is shorter.
constexpr std::int64_t alst_tile_tokens(std::int64_t seq_tokens, std::int64_t hidden) {
  if (seq_tokens < 1 || hidden < 1) return std::max<std::int64_t>(seq_tokens, 1);
  return (seq_tokens - 1) / alst_tile_count(seq_tokens, hidden) + 1;
}

}  // namespace seqpar

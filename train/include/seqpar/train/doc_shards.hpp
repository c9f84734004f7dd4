// Packed documents in the training step: where each token of one packed sequence sits on the ring
// groups under a load balancer, as segments the sharded attention walks (one backend call per
// document a (query segment, key block) pair shares, causal inside the document).
//
// The placement is core's place_documents (doc_layout.hpp), the one the simulator counts, so the
// step computes exactly the pairs count_batch_work counts. Each ring group holds group_len tokens:
// its document runs in place_documents' order (= position order), then padding up to group_len.
// Padding exists where the balancer makes it and the step's buffers need equal sizes:
//   per-document (and balanced's split documents): every document padded to a multiple of 2 x P
//     (Transformer Engine's THD rule), the padding inside the document's runs;
//   every balancer: trailing padding where a group holds fewer tokens than group_len (balanced
//     moves whole documents, so groups differ), group_len being the most any group of any sampled
//     sequence needs, rounded up to a multiple of U (the Ulysses split), so one step size serves
//     every step.
// A padding token is held and moved like any other but attends nothing, nothing attends it, and it
// carries no label (token 0, label -1, RoPE position 0): it adds nothing to the loss or a gradient.
//
// Packed positions (Segment::pos; the order an all-gather of K,V lays the sequence out in): the
// documents in order, each with its in-document padding after its tokens, then the groups'
// trailing padding. contiguous and zigzag hold no padding, so there pos is the sequence position.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "seqpar/core/doc_layout.hpp"
#include "seqpar/train/seq_layout.hpp"

namespace seqpar::train {

struct DocShards {
  std::int64_t group_len = 0;
  std::vector<std::int64_t> cu_seqlens;      // the sequence's documents (core's PackedBatch)
  std::vector<std::vector<Segment>> groups;  // R ring groups: segments in buffer order
  // The sequence position of a segment's first token (cu_seqlens[doc] + doc_pos); -1 for padding.
  std::int64_t source(const Segment& s) const {
    return s.doc < 0 ? -1 : cu_seqlens[static_cast<std::size_t>(s.doc)] + s.doc_pos;
  }
  std::int64_t doc_len(std::int64_t doc) const {
    return cu_seqlens[static_cast<std::size_t>(doc) + 1] - cu_seqlens[static_cast<std::size_t>(doc)];
  }
};

// One token of a ring group's buffer: its sequence position (src, -1 for padding), document (-1:
// padding), document position (the RoPE position; 0 for padding) and packed position.
struct HeldToken {
  std::int64_t src = -1, doc = -1, doc_pos = 0, pos = 0;
};
// Ring group g's tokens in buffer order (Ulysses rank u holds [u L, (u+1) L) of them, L = group_len / U).
std::vector<HeldToken> group_tokens(const DocShards& s, int g);

// The tokens a ring group must hold for this sequence: the most any ring rank holds (padding
// included), rounded up to a multiple of U.
std::int64_t doc_group_len(const DocLayout& placed, int ulysses);

// Throws seqpar::Error when group_len is below what the sequence needs or not a multiple of U.
DocShards shard_documents(std::span<const std::int64_t> cu_seqlens, int ulysses, int ring, Balancer b,
                          std::int64_t group_len);
DocShards shard_documents(const DocLayout& placed, std::span<const std::int64_t> cu_seqlens, int ulysses,
                          std::int64_t group_len);

}  // namespace seqpar::train

// Sharding bugs planted on purpose, for tests only: they prove that --validate catches the bugs
// sequence parallelism really has, and not only rounding. Set through TrainSetup::fault by the
// tests (tests/train/test_validation.cpp's mutation matrix); no command-line flag sets them. The
// unsharded reference never has one (reference_setup clears it; it has no shard edge). Each fault
// is planted on one rank (named below) unless it says otherwise; the hooks are marked "Fault::" in
// trainer.cpp and sp_attention.cpp.
#pragma once
#include <array>
#include <string_view>

namespace seqpar::train {

enum class Fault {
  none,
  // The last token of SP rank 0's first contiguous run (a shard edge, whose label lives on the
  // next shard) takes the label one position too far: seq[p + 2] instead of seq[p + 1].
  label_off_by_one,
  // One rank attends with the wrong K,V block: with a ring (R > 1), ring rank 1 computes ring step
  // 1 with the K,V of step 0 (its own block) in place of the block it just received; with
  // Ulysses only (R = 1), Ulysses rank 1 swaps the K,V chunks of its first two peers after the
  // all-to-all (the chunk of the wrong peer); with an all-gather of K,V, ring rank 1 swaps the
  // gathered chunks of peers 0 and 1. The backward uses the right blocks.
  kv_wrong_block,
  // Ring rank 1 skips ring step 1 (the block it receives first) in the forward and the backward
  // (ring hops only: an all-gather of K,V has no steps).
  ring_step_skipped,
  // SP rank 0 of a zigzag ring (or all-gather's head/tail chunks) loads its two chunks in the wrong
  // order (tokens, labels and RoPE positions of chunk 2R-1-g first), while attention keeps the
  // right layout.
  zigzag_permutation_wrong,
  // Ring rank 0's causal mask is one position off at the boundary of its first chunk: the chunk's
  // last query also sees the first key of the chunk after it (a future token), forward and backward.
  // With an all-gather of K,V (one call per query chunk over its key prefix) the prefix is one key
  // too long and the mask shifted with it: each query of the chunk also sees the next token.
  causal_mask_off_by_one,
  // The dK,dV that travel back to the owner of a K,V block: with a ring, ring rank 0 (whose block
  // every later rank attends to, so the returning sums are never zero) drops the partial sums it
  // gets back (keeps only its own part) or adds them twice; with an all-gather of K,V the same for
  // the reduce-scatter's sum; with Ulysses only, Ulysses rank 1 drops or doubles the dK,dV of KV
  // head 0 that the reverse all-to-all returns.
  dkv_return_dropped,
  dkv_return_doubled,
  // Ulysses rank 1 reads the q, k, v chunks the forward all-to-all brings it as [heads][tokens]
  // instead of [tokens][heads] (its unpack transposed). A no-op, so not planted, where the rank
  // holds one head of each.
  a2a_layout_transposed,
  // Ring rank 1 merges partial attention outputs with the wrong maximum: the merged LSE adds back
  // the accumulated LSE instead of the larger of the two (right only when that one is the larger).
  // Ring hops only: an all-gather of K,V sees every key in one call and merges nothing.
  lse_merge_wrong_max,
  // The KV heads of the queries' groups swapped on one rank (Ulysses rank 1, else ring rank 1): its
  // tokens' KV head 0 serves the query group of KV head 1 and the reverse, forward and backward.
  gqa_wrong_group,
  // Every rank normalises its loss and its gradient by its own token count instead of the step's.
  loss_local_normalisation,
  // Packed documents (doc_shards.hpp). One rank ignores the document boundaries: ring rank 1
  // (Ulysses rank 1 without a ring) attends causally over sequence positions, across documents,
  // forward and backward.
  document_boundary_ignored,
  // SP rank 0 of a per-document layout loads the two chunks of each document it holds in the wrong
  // order (tokens, labels and RoPE positions of chunk 2R-1-r first), while attention keeps the right
  // layout.
  document_chunk_order_wrong,
  // SP rank 1's RoPE positions do not restart at a document start: it uses the packed sequence
  // position. (On every rank at once RoPE's relative angles would hide it: the shift is the same
  // for all of a document's tokens.)
  positions_not_restarted,
  // Sliding-window layers (ModelConfig::window_of): one rank runs them as full causal attention,
  // its calls without the band: ring rank 1 (Ulysses rank 1 without a ring), forward and backward.
  window_ignored,
};

// Every planted fault, in the order the README's matrix lists them.
inline constexpr std::array<Fault, 15> kFaults = {
    Fault::label_off_by_one,      Fault::kv_wrong_block,     Fault::ring_step_skipped,
    Fault::zigzag_permutation_wrong, Fault::causal_mask_off_by_one, Fault::dkv_return_dropped,
    Fault::dkv_return_doubled,    Fault::a2a_layout_transposed, Fault::lse_merge_wrong_max,
    Fault::gqa_wrong_group,       Fault::loss_local_normalisation, Fault::document_boundary_ignored,
    Fault::document_chunk_order_wrong, Fault::positions_not_restarted, Fault::window_ignored};

// What the matrix prints.
constexpr std::string_view describe(Fault f) {
  switch (f) {
    case Fault::none: return "none";
    case Fault::label_off_by_one: return "label off by one at a shard edge";
    case Fault::kv_wrong_block: return "K,V block of the wrong ring step or Ulysses peer";
    case Fault::ring_step_skipped: return "ring step skipped";
    case Fault::zigzag_permutation_wrong: return "one rank's zigzag permutation wrong";
    case Fault::causal_mask_off_by_one: return "causal mask off by one at a chunk boundary";
    case Fault::dkv_return_dropped: return "dK,dV return to the owner dropped";
    case Fault::dkv_return_doubled: return "dK,dV return to the owner doubled";
    case Fault::a2a_layout_transposed: return "all-to-all head/sequence layout transposed on one rank";
    case Fault::lse_merge_wrong_max: return "LSE merge with the wrong maximum";
    case Fault::gqa_wrong_group: return "GQA KV head mapped to the wrong query group";
    case Fault::loss_local_normalisation: return "loss normalised by the local token count";
    case Fault::document_boundary_ignored: return "one rank ignores a document boundary";
    case Fault::document_chunk_order_wrong: return "one rank's per-document chunk order wrong";
    case Fault::positions_not_restarted: return "RoPE positions not restarted at a document start";
    case Fault::window_ignored: return "one rank ignores the sliding window";
  }
  return "?";
}

// The shape of a sharded step that decides where a fault can exist.
struct FaultSite {
  int ulysses = 1, ring = 1;
  bool zigzag = false;         // the ring is sharded in zigzag (or head/tail chunks)
  int heads = 1, kv_heads = 1;
  bool kv_all_gather = false;  // K,V all-gathered over the ring group instead of passed in hops
  // Packed documents: the sequences hold more than one document (and every rank's tokens meet a
  // boundary or share a document with another rank: the test's workloads are chosen so), and
  // whether the balancer is per-document.
  bool documents = false;
  bool per_document = false;
  // Sliding-window layers whose band is shorter than the sequence (the band masks some pair).
  bool window = false;
};

// Whether the step has the code the fault breaks: ring hops for the skipped step and the merge, a
// ring group (R > 1, hops or all-gather) for the mask and the dK,dV return, zigzag chunks for the
// permutation, a Ulysses group (U > 1) whose ranks hold more than one head for the transposed
// unpack, two KV heads for the group mapping, documents for the boundary and the positions, a
// per-document ring for its chunk order, a band for the window, any sharding (SP > 1) for the rest.
constexpr bool applies(Fault f, const FaultSite& s) {
  const bool ring = s.ring > 1, ulysses = s.ulysses > 1, sharded = ring || ulysses;
  switch (f) {
    case Fault::none: return true;
    case Fault::ring_step_skipped:
    case Fault::lse_merge_wrong_max: return ring && !s.kv_all_gather;
    case Fault::causal_mask_off_by_one: return ring;
    case Fault::zigzag_permutation_wrong: return ring && s.zigzag;
    case Fault::a2a_layout_transposed: return ulysses && s.heads / s.ulysses > 1;
    case Fault::gqa_wrong_group: return sharded && s.kv_heads > 1;
    case Fault::label_off_by_one:
    case Fault::kv_wrong_block:
    case Fault::dkv_return_dropped:
    case Fault::dkv_return_doubled:
    case Fault::loss_local_normalisation: return sharded;
    case Fault::document_boundary_ignored:
    case Fault::positions_not_restarted: return sharded && s.documents;
    case Fault::document_chunk_order_wrong: return ring && s.documents && s.per_document;
    case Fault::window_ignored: return sharded && s.window;
  }
  return false;
}

}  // namespace seqpar::train

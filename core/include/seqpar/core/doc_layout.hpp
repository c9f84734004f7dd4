// Which tokens of a packed sequence each ring rank holds under a load balancer, in document
// coordinates: the layout the document-masked attention counts (doc_work.hpp) walk.
//
// The SP group is U x R ranks: U Ulysses ranks share each of R ring ranks' tokens (after the
// all-to-all each of the U holds all of them for heads/U heads), so the balancer places tokens on
// the R ring ranks. Ulysses alone is R = 1; all-gather KV context parallelism is U = 1.
//
//   contiguous    ring rank r holds positions [r N/R, (r+1) N/R) of the packed sequence.
//   zigzag        head-tail of the packed sequence: chunks r and 2R-1-r of 2R equal chunks (the
//                 training step's layout, train/seq_layout.hpp).
//   per-document  Megatron-LM / Transformer Engine THD: every document is padded to a multiple of
//                 2 x P (P = U x R, TE's "2 x cp_size"), cut into 2R equal chunks, and ring rank r
//                 takes chunks r and 2R-1-r of every document. Padding tokens are held and moved
//                 (counted in tokens and padding) but never attended (not in any work count).
//   balanced      whole documents moved to balance work (WLB-LLM, ByteScale): a document whose
//                 causal pairs exceed the mean per-rank work (all pairs / R) cannot sit on one rank
//                 without making it the slowest, so it is split per-document (as above, padded);
//                 the others go whole, longest first (ties: earlier in the sequence), each onto the
//                 ring rank with the least work so far (ties: the lowest rank), work counted as the
//                 exact pairs of the rank's queries.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace seqpar {

enum class Balancer { contiguous, zigzag, per_document, balanced };

std::string to_string(Balancer b);
// "contiguous", "zigzag", "per-document", "balanced"; throws seqpar::Error naming `field`.
Balancer parse_balancer(std::string_view text, std::string_view field = "balancer");

// A run of tokens [begin, end) of document `doc` (in that document's own positions, padding
// beyond its length included), held consecutively.
struct DocRun {
  std::int64_t doc = 0, begin = 0, end = 0;
};

// One ring rank's tokens: runs sorted by (doc, begin), which is also their order in the rank's
// buffer; tokens counts padding, padding alone in padding_tokens.
struct RankHold {
  std::vector<DocRun> runs;
  std::int64_t tokens = 0, padding_tokens = 0;
};

// The documents of one packed sequence (cu_seqlens: 0, ..., N) and where the R ring ranks hold them.
struct DocLayout {
  std::vector<std::int64_t> doc_len;  // real tokens of each document (piece) of the sequence
  std::vector<RankHold> ranks;        // R entries
};

// Throws seqpar::Error naming the rule: U, R in 1..limits::kMaxGpus; cu_seqlens increasing from 0;
// contiguous needs N divisible by U x R, zigzag also by 2R (the training step's rules).
DocLayout place_documents(std::span<const std::int64_t> cu_seqlens, int ulysses, int ring, Balancer b);
// The most tokens (padding included) place_documents gives one ring rank, by the same placement and
// rules, without building the runs: O(documents x R) for the balancers that cut documents, where a
// layout holds 2R runs per document.
std::int64_t fullest_rank_tokens(std::span<const std::int64_t> cu_seqlens, int ulysses, int ring, Balancer b);
// Contiguous and zigzag cut the packed sequence by position: every rank holds N / R tokens whatever
// the documents (and their rules look at N alone).
bool holds_even_share(Balancer b);

}  // namespace seqpar

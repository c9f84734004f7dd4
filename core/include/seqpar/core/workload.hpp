// The training workload as data: which document lengths are packed into each training sequence.
// A sequence is several documents end to end under a document mask (a token attends to earlier
// tokens of its own document only), so the attention work and its split over ranks follow the
// document boundaries. A Workload is the length distribution, the packing policy, a seed and a
// number of sampled batches; sampling it for a sequence length gives each batch's boundaries
// (cu_seqlens), the same on every platform for one seed.
//
// The --documents syntax (parse_documents):
//   fixed:L                  every document L tokens
//   uniform:A:B              lengths uniform over the integers A..B
//   lognormal:MU:SIGMA       ln(length) normal with mean MU, standard deviation SIGMA (median e^MU),
//                            rounded to the nearest integer, at least 1
//   powerlaw:ALPHA:MIN:MAX   density proportional to length^-ALPHA on [MIN, MAX + 1), floored
//   hist:FILE | FILE.csv     a histogram CSV: header min_tokens,max_tokens,count (any column order),
//                            one bin a row; a bin is drawn with probability count / total, then a
//                            length uniformly over its integers min_tokens..max_tokens
//   lengths:FILE | FILE      one document length a line ('#' comments and blank lines skipped);
//                            lengths are drawn from the list uniformly with replacement
// Sizes take K/M suffixes (binary, as --seq-len). --packing fill | best-fit[:WINDOW] | balanced:W
// (default fill, best-fit's window 256 documents), --doc-seed S (default 1), --doc-batches B
// (default 16).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/rng.hpp"

namespace seqpar {

enum class LengthForm { fixed, uniform, lognormal, powerlaw, histogram, list };

// One histogram bin: `count` documents of lengths in [min_tokens, max_tokens].
struct HistogramBin {
  std::int64_t min_tokens = 0, max_tokens = 0, count = 0;
};

// The distribution document lengths are drawn from. Only the fields of `form` are used.
struct LengthDistribution {
  LengthForm form = LengthForm::fixed;
  std::int64_t lo = 0, hi = 0;           // fixed: lo; uniform, powerlaw: [lo, hi]
  double mu = 0, sigma = 0;              // lognormal
  double alpha = 0;                      // powerlaw exponent
  std::vector<HistogramBin> bins;        // histogram
  std::vector<std::int64_t> lengths;     // list
  std::string spec;                      // the text as given, for outputs
};

enum class Packing { fill, best_fit, balanced };

inline constexpr int kDefaultBestFitWindow = 256;
inline constexpr int kMaxDocBatches = 1 << 16;
inline constexpr int kMaxBestFitWindow = 1 << 20;
// Entries of a lengths file or histogram: beyond any trace a user would pass on a command line.
inline constexpr std::size_t kMaxLengthEntries = std::size_t{1} << 24;

struct Workload {
  LengthDistribution documents;
  Packing packing = Packing::fill;
  int best_fit_window = kDefaultBestFitWindow;  // documents considered at once by best-fit
  int balance_window = 1;                       // sequences repacked together by balanced
  std::uint64_t seed = 1;
  int batches = 16;
};

// --documents SPEC: a parametric form, or a file (read here). Throws seqpar::Error naming the form's
// field ("documents: lognormal SIGMA 'x' is not a number") or the file and line.
LengthDistribution parse_documents(std::string_view spec);
// The file contents alone (`source` names the file in errors): for tests and callers with the text.
LengthDistribution parse_histogram_csv(std::string_view text, std::string_view source);
LengthDistribution parse_length_list(std::string_view text, std::string_view source);
// "fill", "best-fit", "best-fit:W" or "balanced:W"; sets *window for best-fit, *balance_window for
// balanced.
Packing parse_packing(std::string_view text, int* window, int* balance_window = nullptr);
// The four options together, each checked (batches 1..kMaxDocBatches).
Workload make_workload(std::string_view documents, std::string_view packing = "fill", std::uint64_t seed = 1,
                       int batches = 16);

std::string to_string(Packing p);

// One packed sequence: piece i holds tokens [cu_seqlens[i], cu_seqlens[i+1]) and is (part of)
// document doc[i], an index into SampledWorkload::drawn; whole[i] is 0 where the document was split
// across sequences. cu_seqlens starts at 0 and ends at the sequence length.
struct PackedBatch {
  std::vector<std::int64_t> cu_seqlens;
  std::vector<std::int64_t> doc;
  std::vector<std::uint8_t> whole;
  std::size_t pieces() const { return doc.size(); }
};

struct SampledWorkload {
  std::int64_t seq_len = 0;
  std::vector<PackedBatch> batches;
  std::vector<std::int64_t> drawn;  // every document length drawn, in arrival order
};

// Packs `w.batches` sequences of seq_len tokens. fill: documents in arrival order, the one that
// crosses the sequence end split there and its rest carried into the next sequence (streaming
// loaders). best-fit: a window of the next best_fit_window documents; each sequence takes, while
// one fits the space left, the longest that fits (ties: earliest); when none fits, the earliest
// pending document is split to fill the sequence and its rest stays pending. So a document is split
// only where it does not fit the space left: at a sequence's end, or because it is longer than a
// sequence. balanced:W (fixed-length greedy packing, WLB-LLM's 'Fixed-Len Greedy' baseline, arXiv
// 2503.17924 Sec. 3.2 and 7.4): the pieces of W fill sequences (documents as fill cut them at
// sequence ends) are repacked onto those W sequences to balance their attention work: longest
// first, each onto the sequence with the least causal pairs so far that has room for it (ties: the
// lowest); one that fits none (bin packing's leftovers) fills the sequence with the most room and
// its rest goes back in line by length. Every token is kept (no padding).
SampledWorkload sample_workload(const Workload& w, std::int64_t seq_len);

// One workload sampled at many lengths (maxlen tries hundreds): under fill packing every length cuts
// the same stream of drawn documents at multiples of it, so the stream is drawn once (extended to the
// longest length asked) and each sample cut from it; best-fit and balanced packing are sampled
// afresh. sample(n) == sample_workload(w, n), batch for batch and document for document.
class WorkloadSampler {
 public:
  explicit WorkloadSampler(const Workload& w);
  ~WorkloadSampler();
  WorkloadSampler(const WorkloadSampler&) = delete;
  WorkloadSampler& operator=(const WorkloadSampler&) = delete;
  SampledWorkload sample(std::int64_t seq_len);

 private:
  struct Stream;
  Workload w_;
  std::unique_ptr<Stream> stream_;  // fill packing's drawn documents
};

// The next document length of the distribution (tests, and callers drawing their own streams).
std::int64_t draw_length(const LengthDistribution& d, Rng& rng);

// Mean and spread of document lengths, and the attention work under the mask relative to one full
// causal sequence: per batch sum_i l_i (l_i + 1) / (N (N + 1)) over its pieces l_i (the exact
// counts of unmasked query-key pairs, diagonal included), then the mean over batches.
struct LengthStats {
  std::int64_t count = 0;
  double mean = 0, stddev = 0, p50 = 0, p95 = 0, max = 0;
};
struct WorkloadSummary {
  LengthStats drawn;    // the documents as drawn: the data mix
  LengthStats pieces;   // the pieces the mask sees, after splitting at sequence ends
  double work_ratio_mean = 0, work_ratio_min = 0, work_ratio_max = 0;
  double pieces_per_batch_mean = 0;
};
WorkloadSummary summarize(const SampledWorkload& s);
// The work_ratio figures alone (summarize's), without the length statistics' sort: mean, min, max.
struct WorkRatios {
  double mean = 0, min = 0, max = 0;
};
WorkRatios work_ratios(const SampledWorkload& s);

// Unmasked (query, key) pairs of one causal document of n tokens: n (n + 1) / 2.
std::int64_t causal_pairs(std::int64_t n);

}  // namespace seqpar

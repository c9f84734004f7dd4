// The four load balancers' placements of a packed sequence's documents on the ring ranks.
#include "seqpar/core/doc_layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <type_traits>
#include <utility>

#include "seqpar/core/checked.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/limits.hpp"
#include "seqpar/core/workload.hpp"

namespace seqpar {

namespace {

// Appends a run, merging it into the last when they continue each other (zigzag's middle rank holds
// chunks R-1 and R, one run: the buffer order the kernel sees).
void push_run(RankHold& h, DocRun run) {
  if (run.end <= run.begin) return;
  if (!h.runs.empty() && h.runs.back().doc == run.doc && h.runs.back().end == run.begin) {
    h.runs.back().end = run.end;
    return;
  }
  h.runs.push_back(run);
}

// The runs of packed positions [a, b): split at document boundaries.
void push_positions(RankHold& h, std::span<const std::int64_t> cu, std::int64_t a, std::int64_t b) {
  auto it = std::upper_bound(cu.begin(), cu.end(), a);  // the first boundary after a
  for (auto d = static_cast<std::int64_t>(it - cu.begin()) - 1; a < b; ++d) {
    const std::int64_t start = cu[static_cast<std::size_t>(d)], stop = cu[static_cast<std::size_t>(d) + 1];
    const std::int64_t e = std::min(b, stop);
    push_run(h, {d, a - start, e - start});
    a = e;
  }
}

// Rank r's chunks r and 2R-1-r of document d, padded to a multiple of 2P.
std::array<DocRun, 2> document_chunks(std::int64_t d, std::int64_t len, int r, int ring, std::int64_t sp) {
  const std::int64_t unit = 2 * sp, padded = (len + unit - 1) / unit * unit, c = padded / (2 * ring);
  const std::int64_t first = r * c, second = (2 * std::int64_t{ring} - 1 - r) * c;
  return {DocRun{d, first, first + c}, DocRun{d, second, second + c}};
}

// Where a placement puts its runs: the whole layout (runs per rank), or the tokens per rank alone
// (what the memory estimate asks at every length maxlen tries: no runs built, one algorithm).
struct LayoutSink {
  DocLayout& out;
  void put(int r, DocRun run) { push_run(out.ranks[static_cast<std::size_t>(r)], run); }
  void positions(int r, std::span<const std::int64_t> cu, std::int64_t a, std::int64_t b) {
    push_positions(out.ranks[static_cast<std::size_t>(r)], cu, a, b);
  }
};
struct TokenSink {
  std::vector<std::int64_t>& tokens;
  std::int64_t every_rank = 0;  // tokens each rank holds beside `tokens` (per-document chunks: 2c each)
  void put(int r, DocRun run) { tokens[static_cast<std::size_t>(r)] += std::max<std::int64_t>(0, run.end - run.begin); }
  void positions(int r, std::span<const std::int64_t>, std::int64_t a, std::int64_t b) {
    tokens[static_cast<std::size_t>(r)] += b - a;
  }
};

// Exact pairs of the queries in document positions [b, e) against their own document's keys:
// sum over p in [b, e) of (p + 1).
std::int64_t prefix_pairs(std::int64_t b, std::int64_t e) { return causal_pairs(e) - causal_pairs(b); }

// Real tokens of the run: those before its document's length (the rest is padding).
std::int64_t run_real(const DocRun& run, std::int64_t len) {
  return std::max<std::int64_t>(0, std::min(run.end, len) - std::min(run.begin, len));
}

void finish(DocLayout& out) {
  for (RankHold& h : out.ranks) {
    // Per-document sharding pushes them in order already: checked in O(runs) before sorting.
    auto by_doc = [](const DocRun& x, const DocRun& y) { return x.doc != y.doc ? x.doc < y.doc : x.begin < y.begin; };
    if (!std::is_sorted(h.runs.begin(), h.runs.end(), by_doc)) std::sort(h.runs.begin(), h.runs.end(), by_doc);
    h.tokens = h.padding_tokens = 0;
    for (const DocRun& run : h.runs) {
      h.tokens += run.end - run.begin;
      h.padding_tokens += run.end - run.begin - run_real(run, out.doc_len[static_cast<std::size_t>(run.doc)]);
    }
  }
}

template <class Sink>
void place_balanced(const std::vector<std::int64_t>& doc_len, Sink& sink, int ring, std::int64_t sp) {
  std::int64_t total = 0;
  for (std::int64_t len : doc_len) total += causal_pairs(len);  // <= causal_pairs(N): checked there
  std::vector<std::int64_t> load(static_cast<std::size_t>(ring), 0);
  // The whole documents as (length, index): sorted longest first, ties in arrival order (one
  // comparison of a pair: maxlen places millions of documents at every length it tries).
  std::vector<std::pair<std::int64_t, std::int64_t>> whole;
  for (std::int64_t d = 0; d < static_cast<std::int64_t>(doc_len.size()); ++d) {
    const std::int64_t len = doc_len[static_cast<std::size_t>(d)];
    // Above the mean per-rank work (pairs > total / R, exactly: floor division of integers): split.
    if (causal_pairs(len) > total / ring) {
      for (int r = 0; r < ring; ++r)
        for (const DocRun& run : document_chunks(d, len, r, ring, sp)) {
          sink.put(r, run);
          load[static_cast<std::size_t>(r)] += prefix_pairs(std::min(run.begin, len), std::min(run.end, len));
        }
    } else {
      whole.emplace_back(-len, d);
    }
  }
  std::sort(whole.begin(), whole.end());
  // Each whole document to the least loaded rank, the lowest-numbered of equals: a heap of (load,
  // rank), O(log R) a document (a scan of R per document was O(documents x R) at thousands of ranks).
  using Slot = std::pair<std::int64_t, int>;
  std::vector<Slot> heap;
  heap.reserve(load.size());
  for (int r = 0; r < ring; ++r) heap.emplace_back(load[static_cast<std::size_t>(r)], r);
  std::make_heap(heap.begin(), heap.end(), std::greater<>());
  for (const auto& [minus_len, d] : whole) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    Slot& least = heap.back();
    const std::int64_t len = -minus_len;
    sink.put(least.second, {d, 0, len});
    least.first += causal_pairs(len);
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  }
}

}  // namespace

std::string to_string(Balancer b) {
  switch (b) {
    case Balancer::contiguous: return "contiguous";
    case Balancer::zigzag: return "zigzag";
    case Balancer::per_document: return "per-document";
    case Balancer::balanced: return "balanced";
  }
  return "?";
}

Balancer parse_balancer(std::string_view text, std::string_view field) {
  for (Balancer b : {Balancer::contiguous, Balancer::zigzag, Balancer::per_document, Balancer::balanced})
    if (text == to_string(b)) return b;
  throw Error(fmt::format("{}: unknown load balancer '{}'; expected contiguous, zigzag, per-document or balanced",
                          field, text));
}

namespace {

// place_documents' rules and its placement into `sink`; the document lengths in `doc_len`.
template <class Sink>
void place_into(std::span<const std::int64_t> cu, int ulysses, int ring, Balancer b, std::vector<std::int64_t>& doc_len,
                Sink& sink) {
  require_range("ulysses_degree", ulysses, 1, limits::kMaxGpus);
  require_range("ring_degree", ring, 1, limits::kMaxGpus);
  const std::int64_t sp = checked_mul<std::int64_t>(ulysses, ring, "sp = ulysses_degree x ring_degree");
  require_range("sp = ulysses_degree x ring_degree", sp, 1, limits::kMaxGpus);
  if (cu.size() < 2 || cu.front() != 0)
    throw Error(fmt::format("cu_seqlens: must start at 0 and hold at least one document; got {} entries",
                            cu.size()));
  doc_len.clear();
  for (std::size_t i = 0; i + 1 < cu.size(); ++i) {
    if (cu[i + 1] <= cu[i])
      throw Error(fmt::format("cu_seqlens: entry {} = {} must be above entry {} = {} (no empty documents)", i + 1,
                              cu[i + 1], i, cu[i]));
    doc_len.push_back(cu[i + 1] - cu[i]);
  }
  const std::int64_t n = cu.back();
  require_range("seq_len", n, 1, limits::kMaxSeqLen);
  causal_pairs(n);  // every pair count below is at most this one: throws here if it would not fit
  switch (b) {
    case Balancer::contiguous:
      if (n % sp != 0)
        throw Error(fmt::format("seq_len = {} must be divisible by sp = ulysses_degree x ring_degree = {} for "
                                "contiguous sharding", n, sp));
      for (int r = 0; r < ring; ++r) sink.positions(r, cu, r * (n / ring), (r + 1) * (n / ring));
      break;
    case Balancer::zigzag: {
      if (n % sp != 0 || n % (2 * std::int64_t{ring}) != 0)
        throw Error(fmt::format("seq_len = {} must be divisible by sp = ulysses_degree x ring_degree = {} and by "
                                "2 x ring_degree = {} for zigzag sharding", n, sp, 2 * ring));
      const std::int64_t c = n / (2 * ring);
      for (int r = 0; r < ring; ++r) {
        sink.positions(r, cu, r * c, (r + 1) * c);
        sink.positions(r, cu, (2 * std::int64_t{ring} - 1 - r) * c, (2 * std::int64_t{ring} - r) * c);
      }
      break;
    }
    case Balancer::per_document:
      for (std::int64_t d = 0; d < static_cast<std::int64_t>(doc_len.size()); ++d) {
        if constexpr (std::is_same_v<Sink, TokenSink>) {  // every rank holds two chunks of c: O(documents)
          for (const DocRun& run : document_chunks(d, doc_len[static_cast<std::size_t>(d)], 0, ring, sp))
            sink.every_rank += run.end - run.begin;
          continue;
        }
        for (int r = 0; r < ring; ++r)
          for (const DocRun& run : document_chunks(d, doc_len[static_cast<std::size_t>(d)], r, ring, sp)) sink.put(r, run);
      }
      break;
    case Balancer::balanced: place_balanced(doc_len, sink, ring, sp); break;
  }
}

}  // namespace

DocLayout place_documents(std::span<const std::int64_t> cu, int ulysses, int ring, Balancer b) {
  DocLayout out;
  out.ranks.resize(static_cast<std::size_t>(std::clamp(ring, 1, limits::kMaxGpus)));
  LayoutSink sink{out};
  place_into(cu, ulysses, ring, b, out.doc_len, sink);
  finish(out);
  return out;
}

bool holds_even_share(Balancer b) { return b == Balancer::contiguous || b == Balancer::zigzag; }

std::int64_t fullest_rank_tokens(std::span<const std::int64_t> cu, int ulysses, int ring, Balancer b) {
  std::vector<std::int64_t> doc_len;
  std::vector<std::int64_t> tokens(static_cast<std::size_t>(std::clamp(ring, 1, limits::kMaxGpus)), 0);
  TokenSink sink{tokens};
  place_into(cu, ulysses, ring, b, doc_len, sink);
  return *std::max_element(tokens.begin(), tokens.end()) + sink.every_rank;
}

}  // namespace seqpar

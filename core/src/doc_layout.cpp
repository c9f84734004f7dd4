// The four load balancers' placements of a packed sequence's documents on the ring ranks.
#include "seqpar/core/doc_layout.hpp"

#include <fmt/format.h>

#include <algorithm>

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
void push_document_chunks(RankHold& h, std::int64_t d, std::int64_t len, int r, int ring, std::int64_t sp) {
  const std::int64_t unit = 2 * sp, padded = (len + unit - 1) / unit * unit, c = padded / (2 * ring);
  const std::int64_t first = r * c, second = (2 * std::int64_t{ring} - 1 - r) * c;
  push_run(h, {d, first, first + c});
  push_run(h, {d, second, second + c});
}

// Exact pairs of the queries in document positions [b, e) against their own document's keys:
// sum over p in [b, e) of (p + 1).
std::int64_t prefix_pairs(std::int64_t b, std::int64_t e) { return causal_pairs(e) - causal_pairs(b); }

// Real tokens of the run: those before its document's length (the rest is padding).
std::int64_t run_real(const DocRun& run, std::int64_t len) {
  return std::max<std::int64_t>(0, std::min(run.end, len) - std::min(run.begin, len));
}

void finish(DocLayout& out) {
  for (RankHold& h : out.ranks) {
    std::sort(h.runs.begin(), h.runs.end(),
              [](const DocRun& x, const DocRun& y) { return x.doc != y.doc ? x.doc < y.doc : x.begin < y.begin; });
    h.tokens = h.padding_tokens = 0;
    for (const DocRun& run : h.runs) {
      h.tokens += run.end - run.begin;
      h.padding_tokens += run.end - run.begin - run_real(run, out.doc_len[static_cast<std::size_t>(run.doc)]);
    }
  }
}

void place_balanced(DocLayout& out, int ring, std::int64_t sp) {
  std::int64_t total = 0;
  for (std::int64_t len : out.doc_len) total += causal_pairs(len);  // <= causal_pairs(N): checked there
  std::vector<std::int64_t> load(static_cast<std::size_t>(ring), 0);
  std::vector<std::int64_t> whole;
  for (std::int64_t d = 0; d < static_cast<std::int64_t>(out.doc_len.size()); ++d) {
    const std::int64_t len = out.doc_len[static_cast<std::size_t>(d)];
    // Above the mean per-rank work (pairs > total / R, exactly: floor division of integers): split.
    if (causal_pairs(len) > total / ring) {
      for (int r = 0; r < ring; ++r) {
        RankHold& h = out.ranks[static_cast<std::size_t>(r)];
        const std::size_t before = h.runs.size();
        push_document_chunks(h, d, len, r, ring, sp);
        for (std::size_t i = before; i < h.runs.size(); ++i)
          load[static_cast<std::size_t>(r)] +=
              prefix_pairs(std::min(h.runs[i].begin, len), std::min(h.runs[i].end, len));
      }
    } else {
      whole.push_back(d);
    }
  }
  std::stable_sort(whole.begin(), whole.end(), [&](std::int64_t a, std::int64_t b) {
    return out.doc_len[static_cast<std::size_t>(a)] > out.doc_len[static_cast<std::size_t>(b)];
  });
  for (std::int64_t d : whole) {
    const auto r = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    const std::int64_t len = out.doc_len[static_cast<std::size_t>(d)];
    push_run(out.ranks[r], {d, 0, len});
    load[r] += causal_pairs(len);
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

DocLayout place_documents(std::span<const std::int64_t> cu, int ulysses, int ring, Balancer b) {
  require_range("ulysses_degree", ulysses, 1, limits::kMaxGpus);
  require_range("ring_degree", ring, 1, limits::kMaxGpus);
  const std::int64_t sp = checked_mul<std::int64_t>(ulysses, ring, "sp = ulysses_degree x ring_degree");
  require_range("sp = ulysses_degree x ring_degree", sp, 1, limits::kMaxGpus);
  if (cu.size() < 2 || cu.front() != 0)
    throw Error(fmt::format("cu_seqlens: must start at 0 and hold at least one document; got {} entries",
                            cu.size()));
  DocLayout out;
  for (std::size_t i = 0; i + 1 < cu.size(); ++i) {
    if (cu[i + 1] <= cu[i])
      throw Error(fmt::format("cu_seqlens: entry {} = {} must be above entry {} = {} (no empty documents)", i + 1,
                              cu[i + 1], i, cu[i]));
    out.doc_len.push_back(cu[i + 1] - cu[i]);
  }
  const std::int64_t n = cu.back();
  require_range("seq_len", n, 1, limits::kMaxSeqLen);
  causal_pairs(n);  // every pair count below is at most this one: throws here if it would not fit
  out.ranks.resize(static_cast<std::size_t>(ring));
  switch (b) {
    case Balancer::contiguous:
      if (n % sp != 0)
        throw Error(fmt::format("seq_len = {} must be divisible by sp = ulysses_degree x ring_degree = {} for "
                                "contiguous sharding", n, sp));
      for (int r = 0; r < ring; ++r)
        push_positions(out.ranks[static_cast<std::size_t>(r)], cu, r * (n / ring), (r + 1) * (n / ring));
      break;
    case Balancer::zigzag: {
      if (n % sp != 0 || n % (2 * std::int64_t{ring}) != 0)
        throw Error(fmt::format("seq_len = {} must be divisible by sp = ulysses_degree x ring_degree = {} and by "
                                "2 x ring_degree = {} for zigzag sharding", n, sp, 2 * ring));
      const std::int64_t c = n / (2 * ring);
      for (int r = 0; r < ring; ++r) {
        RankHold& h = out.ranks[static_cast<std::size_t>(r)];
        push_positions(h, cu, r * c, (r + 1) * c);
        push_positions(h, cu, (2 * std::int64_t{ring} - 1 - r) * c, (2 * std::int64_t{ring} - r) * c);
      }
      break;
    }
    case Balancer::per_document:
      for (std::int64_t d = 0; d < static_cast<std::int64_t>(out.doc_len.size()); ++d)
        for (int r = 0; r < ring; ++r)
          push_document_chunks(out.ranks[static_cast<std::size_t>(r)], d, out.doc_len[static_cast<std::size_t>(d)],
                               r, ring, sp);
      break;
    case Balancer::balanced: place_balanced(out, ring, sp); break;
  }
  finish(out);
  return out;
}

}  // namespace seqpar

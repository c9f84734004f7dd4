#include "seqpar/train/doc_shards.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "seqpar/core/error.hpp"

namespace seqpar::train {

std::int64_t doc_group_len(const DocLayout& placed, int ulysses) {
  std::int64_t most = 0;
  for (const RankHold& h : placed.ranks) most = std::max(most, h.tokens);
  return (most + ulysses - 1) / ulysses * ulysses;
}

std::vector<HeldToken> group_tokens(const DocShards& s, int g) {
  std::vector<HeldToken> out;
  out.reserve(static_cast<std::size_t>(s.group_len));
  for (const Segment& sg : s.groups[static_cast<std::size_t>(g)])
    for (int i = 0; i < sg.len; ++i)
      out.push_back(sg.doc < 0 ? HeldToken{-1, -1, 0, sg.pos + i}
                               : HeldToken{s.source(sg) + i, sg.doc, sg.doc_pos + i, sg.pos + i});
  return out;
}

DocShards shard_documents(std::span<const std::int64_t> cu_seqlens, int ulysses, int ring, Balancer b,
                          std::int64_t group_len) {
  return shard_documents(place_documents(cu_seqlens, ulysses, ring, b), cu_seqlens, ulysses, group_len);
}

DocShards shard_documents(const DocLayout& placed, std::span<const std::int64_t> cu_seqlens, int ulysses,
                          std::int64_t group_len) {
  const std::int64_t need = doc_group_len(placed, ulysses);
  if (group_len < need || group_len % ulysses != 0)
    throw Error(fmt::format("documents: a ring group holds {} tokens, but this sequence needs {} (a multiple of "
                            "ulysses_degree {})", group_len, need, ulysses));
  const std::int64_t ring = static_cast<std::int64_t>(placed.ranks.size());
  if (group_len > std::numeric_limits<int>::max() / std::max<std::int64_t>(ring, 1))
    throw Error(fmt::format("documents: {} ring groups of {} tokens: the training step indexes tokens with int",
                            ring, group_len));
  DocShards out;
  out.group_len = group_len;
  out.cu_seqlens.assign(cu_seqlens.begin(), cu_seqlens.end());
  // Each document's padded extent: the furthest any run of it reaches (its length when unpadded).
  const std::size_t docs = placed.doc_len.size();
  std::vector<std::int64_t> extent(placed.doc_len.begin(), placed.doc_len.end()), start(docs + 1, 0);
  for (const RankHold& h : placed.ranks)
    for (const DocRun& r : h.runs) extent[static_cast<std::size_t>(r.doc)] = std::max(extent[static_cast<std::size_t>(r.doc)], r.end);
  for (std::size_t d = 0; d < docs; ++d) start[d + 1] = start[d] + extent[d];
  std::int64_t trailing = start[docs];  // where the next group's trailing padding goes
  for (const RankHold& h : placed.ranks) {
    std::vector<Segment> segs;
    int offset = 0;
    auto push = [&](std::int64_t pos, std::int64_t len, std::int64_t doc, std::int64_t doc_pos) {
      if (len <= 0) return;
      segs.push_back({pos, static_cast<int>(len), offset, doc, doc_pos});
      offset += static_cast<int>(len);
    };
    for (const DocRun& r : h.runs) {
      const std::int64_t len = placed.doc_len[static_cast<std::size_t>(r.doc)];
      const std::int64_t base = start[static_cast<std::size_t>(r.doc)];
      const std::int64_t real_end = std::min(r.end, len);
      push(base + r.begin, real_end - r.begin, r.doc, r.begin);  // the document's own tokens
      const std::int64_t pad = std::max(r.begin, len);
      push(base + pad, r.end - pad, -1, 0);  // its padding to the balancer's multiple
    }
    push(trailing, group_len - offset, -1, 0);
    trailing += group_len - h.tokens;
    out.groups.push_back(std::move(segs));
  }
  return out;
}

}  // namespace seqpar::train

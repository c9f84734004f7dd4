// Counting document-masked attention work per ring rank and step, in closed form per pair of runs
// (no loop over entries) and per tile row (no loop over tiles), document by document: each
// document's holders against its holders, O(sum over distinct documents of holders^2 x (spans +
// tile rows)); per rank, O(holders) a document, where every document is evenly chunked
// (per-document sharding: chunk_rows below).
#include "seqpar/core/doc_work.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <span>
#include <vector>

#include "seqpar/core/checked.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/limits.hpp"
#include "seqpar/core/rng.hpp"
#include "seqpar/core/stats.hpp"

namespace seqpar {

namespace {

// A run clipped to its document's real tokens (padding is never attended).
struct Span {
  std::int64_t begin = 0, end = 0;
  std::int64_t size() const { return end - begin; }
};

Span real(const DocRun& r, std::int64_t len) { return {std::min(r.begin, len), std::min(r.end, len)}; }

// sum over q in [0, x) of the keys of [ka, kb) at or before q: sum of clamp(q + 1 - ka, 0, kb - ka).
// Queries before ka see none, those in [ka, kb) see 1..kb-ka, later ones all kb-ka.
std::int64_t pairs_below(std::int64_t x, std::int64_t ka, std::int64_t kb) {
  const std::int64_t n = kb - ka, t = std::clamp<std::int64_t>(x - ka, 0, n);
  return causal_pairs(t) + std::max<std::int64_t>(0, x - kb) * n;
}

// Keys of the spans at or before position p.
std::int64_t keys_upto(std::span<const Span> keys, std::int64_t p) {
  std::int64_t n = 0;
  for (const Span& k : keys) n += std::clamp<std::int64_t>(p + 1 - k.begin, 0, k.size());
  return n;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a == 0 ? 0 : (a - 1) / b + 1; }

std::int64_t rows_of(std::span<const Span> spans) {
  std::int64_t n = 0;
  for (const Span& s : spans) n += s.size();
  return n;
}

// One document's query spans (buffer order = position order) against its key spans: exact pairs
// and tiles of the per-document grid (doc_work.hpp).
// Under a window W, the tiles of the grid: a query row at position p sees the key rows
// [keys_upto(p - W), keys_upto(p)) (both ends rise with p), so a tile row's columns are the union
// over its rows; rows of one span are consecutive positions, whose ranges overlap or touch, so the
// union per span is one range [first row's low end, last row's high end), and the spans of a tile
// row are merged in order.
std::int64_t window_tiles(std::span<const Span> q, std::span<const Span> k, std::int64_t rows,
                          const WorkOptions& opt) {
  const std::int64_t W = opt.window, row_tiles = ceil_div(rows, opt.q_rows);
  std::int64_t tiles = 0;
  std::size_t span = 0;
  std::int64_t span_first_row = 0;  // local row of q[span].begin
  for (std::int64_t t = 0; t < row_tiles; ++t) {
    const std::int64_t first_row = t * opt.q_rows, last_row = std::min((t + 1) * opt.q_rows, rows) - 1;
    std::int64_t covered_end = -1;  // the last column tile counted in this tile row
    std::size_t s = span;
    std::int64_t s_first = span_first_row;
    while (s < q.size() && s_first <= last_row) {
      const std::int64_t a = std::max(first_row, s_first), b = std::min(last_row, s_first + q[s].size() - 1);
      if (a <= b) {
        const std::int64_t lo = keys_upto(k, q[s].begin + (a - s_first) - W);
        const std::int64_t hi = keys_upto(k, q[s].begin + (b - s_first));
        if (hi > lo) {
          const std::int64_t c0 = std::max(lo / opt.k_rows, covered_end + 1), c1 = (hi - 1) / opt.k_rows;
          if (c1 >= c0) tiles += c1 - c0 + 1;
          covered_end = std::max(covered_end, c1);
        }
      }
      if (s_first + q[s].size() - 1 > last_row) break;
      s_first += q[s].size();
      ++s;
    }
    span = s;
    span_first_row = s_first;
  }
  return tiles;
}

void count_document(std::span<const Span> q, std::span<const Span> k, const WorkOptions& opt,
                    std::int64_t& pairs, std::int64_t& tiles) {
  std::int64_t rows = 0, keys = 0;
  for (const Span& s : q) rows += s.size();
  for (const Span& s : k) keys += s.size();
  if (rows == 0 || keys == 0) return;
  for (const Span& qs : q)
    for (const Span& ks : k) {
      pairs += pairs_below(qs.end, ks.begin, ks.end) - pairs_below(qs.begin, ks.begin, ks.end);
      // The band drops the keys at or before q - W: the causal pairs of the queries moved back by W.
      if (opt.window > 0)
        pairs -= pairs_below(qs.end - opt.window, ks.begin, ks.end) - pairs_below(qs.begin - opt.window, ks.begin, ks.end);
    }
  if (opt.window > 0) {
    tiles += window_tiles(q, k, rows, opt);
    return;
  }
  const std::int64_t first_q = q.front().begin, last_q = q.back().end - 1;
  const std::int64_t first_k = k.front().begin, last_k = k.back().end - 1;
  const std::int64_t row_tiles = ceil_div(rows, opt.q_rows), col_tiles = ceil_div(keys, opt.k_rows);
  if (last_q < first_k) return;  // every key after every query: nothing unmasked
  if (first_q >= last_k) {       // every key at or before every query: the whole grid
    tiles += row_tiles * col_tiles;
    return;
  }
  // Tile row t covers local rows [t Bq, min((t+1) Bq, rows)); a query row sees a prefix of the keys
  // (positions rise with the buffer), so the row's unmasked columns are those of its last row:
  // ceil(keys_upto(last row's position) / Bk) tiles.
  std::size_t span = 0;
  std::int64_t span_first_row = 0;  // local row of q[span].begin
  for (std::int64_t t = 0; t < row_tiles; ++t) {
    const std::int64_t last_row = std::min((t + 1) * opt.q_rows, rows) - 1;
    while (last_row >= span_first_row + q[span].size()) span_first_row += q[span++].size();
    const std::int64_t p = q[span].begin + (last_row - span_first_row);
    const std::int64_t seen = keys_upto(k, p);
    if (seen == keys) {  // every later row sees every key too
      tiles += (row_tiles - t) * col_tiles;
      return;
    }
    // The same count for every later tile row whose last row lies in this span before the next
    // key position after p (`next`): added at once (a zigzag rank's far chunk against another
    // rank's keys sees one count for thousands of tile rows: one causal sequence on 1,024 ranks).
    std::int64_t next = q[span].end;
    for (const Span& ks : k)
      if (ks.end - 1 > p) next = std::min(next, std::max(ks.begin, p + 1));
    const std::int64_t limit_row = span_first_row + (next - q[span].begin);  // rows before it keep `seen`
    const std::int64_t t_end = rows - 1 < limit_row ? row_tiles - 1 : std::max(t, limit_row / opt.q_rows - 1);
    tiles += (t_end - t + 1) * ceil_div(seen, opt.k_rows);
    t = t_end;
  }
}

// One document's holders: each ring rank holding real tokens of it, with its spans (views into
// DocClasses::spans).
struct Holder {
  int rank = 0;
  std::span<const Span> spans;
};

// A holder's extent, for the pairs that need no count: keys all after the queries (nothing unmasked)
// or, without a band, all at or before them (the whole grid). A document on R ring ranks meets R^2
// holder pairs, nearly all of them one of these (a contiguous or zigzag layout keeps positions in
// rank order), and one causal sequence on 1,024 ring ranks is a million pairs per sampled batch.
struct Extent {
  std::int64_t first = 0, last = 0, rows = 0;
};

Extent extent_of(std::span<const Span> spans) {
  return {spans.front().begin, spans.back().end - 1, rows_of(spans)};
}

// Documents grouped by what the counts see: the same length held in the same spans by the same
// ranks give the same counts, so each group is counted once and weighted by its size. Per-document
// sharding of thousands of short documents has few distinct lengths: counted per length, not per document.
struct DocClass {
  std::int64_t len = 0, count = 0;
  std::vector<Holder> holders;
};

// The classes in the order of their first document, and every holder's spans in one array (one
// allocation a layout, not one a holder: per-document sharding gives every document R holders).
struct DocClasses {
  std::vector<Span> spans;  // each document's real runs in rank order, document by document
  std::vector<DocClass> list;
};

DocClasses document_classes(const DocLayout& layout) {
  const std::size_t docs = layout.doc_len.size();
  auto real_of = [&](const DocRun& run) { return real(run, layout.doc_len[static_cast<std::size_t>(run.doc)]); };
  // Counted per document, then placed: rank by rank, a document's runs arrive in rank order and,
  // within a rank, by position (a rank's runs are sorted by document, then position).
  std::vector<std::size_t> start(docs + 1, 0);
  for (const RankHold& h : layout.ranks)
    for (const DocRun& run : h.runs)
      if (real_of(run).size() > 0) ++start[static_cast<std::size_t>(run.doc) + 1];
  for (std::size_t d = 0; d < docs; ++d) start[d + 1] += start[d];
  DocClasses out;
  out.spans.resize(start[docs]);
  std::vector<int> rank_of(start[docs]);
  std::vector<std::size_t> next(start.begin(), start.end() - 1);
  for (std::size_t r = 0; r < layout.ranks.size(); ++r)
    for (const DocRun& run : layout.ranks[r].runs) {
      const Span s = real_of(run);
      if (s.size() == 0) continue;
      const std::size_t i = next[static_cast<std::size_t>(run.doc)]++;
      out.spans[i] = s;
      rank_of[i] = static_cast<int>(r);
    }
  // Two documents are alike when their lengths and their (rank, span) entries are: found by a hash
  // of those, compared with the class's first document (a copied signature a class was R x 3
  // numbers: 12 MB a batch of per-document sharding at R = 1,024).
  std::vector<std::size_t> first_doc;                              // per class: its first document
  std::unordered_multimap<std::uint64_t, std::size_t> index;       // hash -> class
  auto mix = [](std::uint64_t h, std::int64_t v) {  // FNV-1a's step over 64-bit words (finished by splitmix64)
    return (h ^ static_cast<std::uint64_t>(v)) * 0x100000001b3ULL;
  };
  auto alike = [&](std::size_t d, std::size_t e) {
    if (layout.doc_len[d] != layout.doc_len[e] || start[d + 1] - start[d] != start[e + 1] - start[e]) return false;
    for (std::size_t i = start[d], j = start[e]; i < start[d + 1]; ++i, ++j)
      if (rank_of[i] != rank_of[j] || out.spans[i].begin != out.spans[j].begin || out.spans[i].end != out.spans[j].end)
        return false;
    return true;
  };
  for (std::size_t d = 0; d < docs; ++d) {
    const std::size_t a = start[d], b = start[d + 1];
    std::uint64_t h = mix(0, layout.doc_len[d]);
    for (std::size_t i = a; i < b; ++i) h = mix(mix(mix(h, rank_of[i]), out.spans[i].begin), out.spans[i].end);
    h = splitmix64(h);
    std::size_t cls = out.list.size();
    for (auto [it, end] = index.equal_range(h); it != end; ++it)
      if (alike(first_doc[it->second], d)) {
        cls = it->second;
        break;
      }
    if (cls == out.list.size()) {
      DocClass c{layout.doc_len[d], 0, {}};
      for (std::size_t i = a; i < b; ++i) {
        if (i == a || rank_of[i] != rank_of[i - 1]) c.holders.push_back({rank_of[i], {out.spans.data() + i, 0}});
        c.holders.back().spans = {c.holders.back().spans.data(), c.holders.back().spans.size() + 1};
      }
      out.list.push_back(std::move(c));
      first_doc.push_back(d);
      index.emplace(h, cls);
    }
    ++out.list[cls].count;
  }
  return out;
}

// What one holder's queries meet in a block of keys: nothing when every key is after every query
// (the step is left alone), else the exact pairs and tiles.
struct Meet {
  bool any = false;
  std::int64_t pairs = 0, tiles = 0;
};

Meet meet(std::span<const Span> q, const Extent& qe, std::span<const Span> keys, const Extent& ke,
          const WorkOptions& opt) {
  Meet m;
  if (qe.last < ke.first) return m;  // every key after every query
  m.any = true;
  if (opt.window == 0 && qe.first >= ke.last) {  // every key at or before every query
    m.pairs = checked_mul(qe.rows, ke.rows, "attention pairs");
    m.tiles = checked_mul(ceil_div(qe.rows, opt.q_rows), ceil_div(ke.rows, opt.k_rows), "attention tiles");
  } else {
    count_document(q, keys, opt, m.pairs, m.tiles);
  }
  return m;
}

// A class's meeting added to a step: `count` documents alike, each tile weighted by `weight`.
void add_meet(StepWork& st, const Meet& m, std::int64_t count, double weight) {
  if (!m.any) return;
  st.pairs += checked_mul(m.pairs, count, "attention pairs");
  const std::int64_t t = checked_mul(m.tiles, count, "attention tiles");
  st.tiles += t;
  st.cost += weight * static_cast<double>(t);
}

// Per-document sharding on a ring counted per rank, not per holder pair (R^2 pairs a document: at R
// = 1,024 the general path took minutes of advise). Ring rank r holds chunks r and 2R-1-r of c
// positions (clipped to the document's length; the middle rank's two are one run). For two
// distinct holders i != j the chunks are disjoint and ordered (chunk indices i, j < R <= 2R-1-i,
// 2R-1-j), so a chunk sees another wholly or not at all:
//   j < i (steps 1..i): both of i's chunks see j's low chunk and nothing of its high one (2R-1-j >
//     2R-1-i): every query row sees the first a_j keys, and a_j = c for every holder but the last
//     (chunk j+1 is real). So rank i meets every j < i alike.
//   j > i (steps i+1..R-1): i's low chunk sees nothing, its high chunk all of j. Without a high
//     chunk (b_i = 0) nothing is met; with one, chunk 2R-1-i is real, so every chunk before it is
//     full: every j > i holds two full chunks and all R ranks hold the document. Alike again.
// So per class each rank's row of the grid takes one value at step 0 (its own block), one at steps
// 1..i and one at steps i+1..R-1, each counted once per distinct holder shape (at most four a
// class) by the general path's own `meet`, and summed per rank: O(R) a class instead of R^2. Every
// step of a segment receives the same values from the same classes in the same order, so even the
// weighted cost (a floating-point sum) is the general path's bit for bit.
// The fast path's preconditions, else the general path for the whole layout (so that every step's
// floating-point sum keeps the general path's order): ring steps (not all-gather), no window (a
// band makes a meeting depend on the distance between chunks), and every class either on one
// holder or chunked as above, checked against its spans (chunk_rows).

// A holder's chunk sizes: low (a), high (b, 0 if padding or past the end), and whether the two
// are one run (the middle rank).
struct ChunkRows {
  std::int64_t low = 0, high = 0;
  bool merged = false;
  bool operator==(const ChunkRows&) const = default;
};

// Whether the class's holders hold exactly the per-document chunks of some c on `ring` ranks
// (ranks 0..h-1, c from rank 0's first chunk, which is full when there is a second holder), with
// every holder's chunk sizes in `out`; a class on one holder qualifies as it is (it meets itself
// alone).
bool chunk_rows(const std::vector<Holder>& holders, std::int64_t len, int ring, std::vector<ChunkRows>& out) {
  out.clear();
  if (holders.size() == 1) {
    out.push_back({rows_of(holders.front().spans), 0, false});
    return true;
  }
  if (holders.front().rank != 0 || holders.front().spans.front().begin != 0) return false;
  // c <= len <= limits::kMaxSeqLen (2^40) and 2R <= 2^21: every position below fits in 63 bits.
  const std::int64_t c = holders.front().spans.front().end, R = ring;
  if (static_cast<std::int64_t>(holders.size()) != std::min(R, ceil_div(len, c))) return false;
  for (std::size_t k = 0; k < holders.size(); ++k) {
    const Holder& h = holders[k];
    const std::int64_t r = static_cast<std::int64_t>(k);
    if (h.rank != static_cast<int>(k)) return false;
    const Span lo{r * c, std::min((r + 1) * c, len)}, hi{(2 * R - 1 - r) * c, std::min((2 * R - r) * c, len)};
    const bool has_hi = hi.begin < len, merged = has_hi && lo.end == hi.begin;
    const std::size_t n = has_hi && !merged ? 2 : 1;
    if (h.spans.size() != n || h.spans[0].begin != lo.begin) return false;
    if (h.spans[0].end != (merged ? hi.end : lo.end)) return false;
    if (n == 2 && (h.spans[1].begin != hi.begin || h.spans[1].end != hi.end)) return false;
    if (has_hi && static_cast<std::int64_t>(holders.size()) != R) return false;  // never, by the argument above
    out.push_back({lo.size(), has_hi ? hi.size() : 0, merged});
  }
  return true;
}

// One class's three meetings for a holder shape: its own block, every lower holder's, every higher's.
struct RowMeets {
  ChunkRows shape;
  Meet own, below, above;
};

// Each rank's sums over the classes, per segment of its row.
struct RowSums {
  StepWork own, below, above;
};

std::vector<Extent> extents_of(const std::vector<Holder>& holders) {
  std::vector<Extent> out;
  out.reserve(holders.size());
  for (const Holder& h : holders) out.push_back(extent_of(h.spans));
  return out;
}

// A tile of a holder's piece costs the curve's figure at the piece's query rows in the call.
double tile_weight(const WorkOptions& opt, const Extent& q) {
  return opt.tile_cost.empty() ? 1.0 : tile_cost_at(opt.tile_cost, q.rows);
}

// The ring grid's pairs, tiles and cost by the per-rank sums above, or false (nothing written)
// where a precondition fails.
bool count_chunked(const std::vector<DocClass>& classes, SpShape shape, const WorkOptions& opt, BatchWork& out) {
  if (shape.kv_all_gather || opt.window > 0 || opt.count_every_pair) return false;
  const int ring = shape.ring;
  std::vector<std::vector<ChunkRows>> rows(classes.size());
  for (std::size_t ci = 0; ci < classes.size(); ++ci)
    if (!chunk_rows(classes[ci].holders, classes[ci].len, ring, rows[ci])) return false;
  std::vector<RowSums> sums(static_cast<std::size_t>(ring));
  // Meetings per (shape, has lower holders, has higher holders): the first holder and the last
  // meet fewer segments than the others of their shape.
  struct Cached {
    ChunkRows shape;
    bool lower = false, higher = false;
    RowMeets meets;
  };
  std::vector<Cached> cache;
  for (std::size_t ci = 0; ci < classes.size(); ++ci) {
    const DocClass& c = classes[ci];
    const std::vector<Extent> extents = extents_of(c.holders);
    const std::size_t last = c.holders.size() - 1;
    cache.clear();
    for (std::size_t k = 0; k < c.holders.size(); ++k) {
      const Holder& q = c.holders[k];
      const bool lower = k > 0, higher = k < last;
      auto hit = std::find_if(cache.begin(), cache.end(), [&](const Cached& x) {
        return x.shape == rows[ci][k] && x.lower == lower && x.higher == higher;
      });
      if (hit == cache.end()) {
        Cached fresh{rows[ci][k], lower, higher, {}};
        fresh.meets.own = meet(q.spans, extents[k], q.spans, extents[k], opt);
        // Any lower holder stands for all of them, and any higher one (chunk_rows' argument).
        if (lower) fresh.meets.below = meet(q.spans, extents[k], c.holders.front().spans, extents.front(), opt);
        if (higher) fresh.meets.above = meet(q.spans, extents[k], c.holders[last].spans, extents[last], opt);
        cache.push_back(fresh);
        hit = cache.end() - 1;
      }
      RowSums& sum = sums[static_cast<std::size_t>(q.rank)];
      const double weight = tile_weight(opt, extents[k]);
      add_meet(sum.own, hit->meets.own, c.count, weight);
      add_meet(sum.below, hit->meets.below, c.count, weight);
      add_meet(sum.above, hit->meets.above, c.count, weight);
    }
  }
  for (int r = 0; r < ring; ++r) {
    const RowSums& sum = sums[static_cast<std::size_t>(r)];
    StepWork* row = &out.grid[static_cast<std::size_t>(r) * static_cast<std::size_t>(ring)];
    auto put = [](StepWork& st, const StepWork& v) {
      st.pairs = v.pairs;
      st.tiles = v.tiles;
      st.cost = v.cost;
    };
    put(row[0], sum.own);
    for (int s = 1; s <= r; ++s) put(row[s], sum.below);
    for (int s = r + 1; s < ring; ++s) put(row[s], sum.above);
  }
  out.by_rank = true;
  return true;
}

double max_over_mean(const std::vector<RankWork>& ranks, std::int64_t RankWork::*field) {
  std::int64_t mx = 0;
  double sum = 0;
  for (const RankWork& r : ranks) {
    mx = std::max(mx, r.*field);
    sum += static_cast<double>(r.*field);
  }
  return sum > 0 ? static_cast<double>(mx) / (sum / static_cast<double>(ranks.size())) : 1.0;
}

}  // namespace

std::int64_t band_pairs(std::int64_t len, std::int64_t window) {
  if (window <= 0 || len <= window) return causal_pairs(len);
  return checked_add(causal_pairs(window), checked_mul(len - window, window, "band pairs"), "band pairs");
}

double tile_cost_at(std::span<const TileCost> curve, std::int64_t rows) {
  if (curve.empty()) return 1.0;
  if (rows <= curve.front().rows) return curve.front().cost;
  if (rows >= curve.back().rows) return curve.back().cost;
  std::size_t i = 1;
  while (curve[i].rows < rows) ++i;
  const TileCost &a = curve[i - 1], &b = curve[i];
  const double t = std::log(double(rows) / double(a.rows)) / std::log(double(b.rows) / double(a.rows));
  return a.cost + t * (b.cost - a.cost);
}

namespace {

// count_layout_work into `out`, whose grid's memory is reused (count_workload_work counts batch after
// batch: R^2 steps a batch, 40 MB at R = 1,024, were allocated and faulted in afresh each time).
void count_layout_into(const DocLayout& layout, SpShape shape, const WorkOptions& opt, BatchWork& out) {
  require_range("tile q_rows", opt.q_rows, 1, 1 << 20);
  require_range("tile k_rows", opt.k_rows, 1, 1 << 20);
  require_range("kv_bytes_per_token", opt.kv_bytes_per_token, 1, std::int64_t{1} << 40);
  require_range("window", opt.window, 0, std::int64_t{1} << 40);
  for (std::size_t i = 0; i < opt.tile_cost.size(); ++i) {
    const TileCost& t = opt.tile_cost[i];
    if (t.rows < 1 || !(t.cost > 0) || !std::isfinite(t.cost) || (i > 0 && t.rows <= opt.tile_cost[i - 1].rows))
      throw Error(fmt::format("tile_cost point {} (rows {}, cost {}): rows must rise from 1 and each cost be a "
                              "positive finite number", i, t.rows, t.cost));
  }
  require_range("ulysses_degree", shape.ulysses, 1, limits::kMaxGpus);
  require_range("ring_degree", shape.ring, 1, limits::kMaxGpus);
  if (shape.kv_all_gather && shape.ulysses != 1)
    throw Error(fmt::format("ulysses_degree = {}: all-gather KV context parallelism gathers K,V over the ring "
                            "ranks alone (ulysses_degree 1)", shape.ulysses));
  if (static_cast<std::size_t>(shape.ring) != layout.ranks.size())
    throw Error(fmt::format("ring_degree = {}: the layout was placed on {} ring ranks", shape.ring,
                            layout.ranks.size()));
  const int ring = shape.ring;
  out.steps = shape.kv_all_gather ? 1 : ring;
  out.ranks.assign(static_cast<std::size_t>(ring), RankWork{});
  out.grid.assign(static_cast<std::size_t>(ring) * static_cast<std::size_t>(out.steps), StepWork{});
  out.total_pairs = 0;
  out.slowest_rank = 0;
  out.by_rank = false;
  for (std::int64_t len : layout.doc_len) out.total_pairs += band_pairs(len, opt.window);
  std::int64_t all_tokens = 0;
  for (const RankHold& h : layout.ranks) all_tokens += h.tokens;
  // Pairs and tiles: every document's holders against its holders (ring: rank r meets rank f's
  // block at step (r - f) mod R) or against the whole gathered document; per rank where the layout
  // allows (count_chunked).
  const DocClasses classes = document_classes(layout);
  if (!count_chunked(classes.list, shape, opt, out)) {
    for (const DocClass& c : classes.list) {
      const std::vector<Span> whole = {{0, c.len}};
      const Extent whole_extent = {0, c.len - 1, c.len};
      const std::vector<Extent> extents = extents_of(c.holders);
      for (std::size_t qi = 0; qi < c.holders.size(); ++qi) {
        const Holder& q = c.holders[qi];
        const double weight = tile_weight(opt, extents[qi]);
        if (shape.kv_all_gather) {
          add_meet(out.grid[static_cast<std::size_t>(q.rank * out.steps)], meet(q.spans, extents[qi], whole, whole_extent, opt),
                   c.count, weight);
          continue;
        }
        for (std::size_t ki = 0; ki < c.holders.size(); ++ki) {
          const int step = (q.rank - c.holders[ki].rank + ring) % ring;
          add_meet(out.grid[static_cast<std::size_t>(q.rank * out.steps + step)],
                   meet(q.spans, extents[qi], c.holders[ki].spans, extents[ki], opt), c.count, weight);
        }
      }
    }
  }
  // Bytes, launches and the ranks' totals. Each rank's block in bytes once (the grid reads it R
  // times); with one ring rank no block moves.
  std::vector<std::int64_t> block_bytes(ring > 1 ? static_cast<std::size_t>(ring) : 0);
  for (std::size_t f = 0; f < block_bytes.size(); ++f)
    block_bytes[f] = checked_mul(layout.ranks[f].tokens, opt.kv_bytes_per_token, "K,V block bytes");
  for (int r = 0; r < ring; ++r) {
    RankWork& rw = out.ranks[static_cast<std::size_t>(r)];
    const RankHold& mine = layout.ranks[static_cast<std::size_t>(r)];
    rw.tokens = mine.tokens;
    rw.padding_tokens = mine.padding_tokens;
    for (int s = 0; s < out.steps; ++s) {
      StepWork& st = out.grid[static_cast<std::size_t>(r * out.steps + s)];
      if (shape.kv_all_gather) {
        st.kv_bytes = checked_mul(all_tokens, opt.kv_bytes_per_token, "gathered K,V bytes");
      } else {
        const int from = r >= s ? r - s : r - s + ring;
        st.kv_bytes = s == 0 ? 0 : block_bytes[static_cast<std::size_t>(from)];
      }
      st.launched = st.pairs > 0 || !opt.skip_masked_steps;
      rw.pairs += st.pairs;
      rw.tiles += st.tiles;
      rw.kv_bytes += st.kv_bytes;
      rw.launches += st.launched ? 1 : 0;
      rw.masked_steps += st.pairs == 0 ? 1 : 0;
    }
  }
  for (int r = 1; r < ring; ++r) {
    const RankWork &x = out.ranks[static_cast<std::size_t>(r)], &y = out.ranks[static_cast<std::size_t>(out.slowest_rank)];
    if (x.tiles > y.tiles || (x.tiles == y.tiles && x.pairs > y.pairs)) out.slowest_rank = r;
  }
  out.imbalance_pairs = max_over_mean(out.ranks, &RankWork::pairs);
  out.imbalance_tiles = max_over_mean(out.ranks, &RankWork::tiles);
}

}  // namespace

BatchWork count_layout_work(const DocLayout& layout, SpShape shape, const WorkOptions& opt) {
  BatchWork out;
  count_layout_into(layout, shape, opt, out);
  return out;
}

BatchWork count_batch_work(std::span<const std::int64_t> cu_seqlens, SpShape shape, Balancer b,
                           const WorkOptions& opt) {
  return count_layout_work(place_documents(cu_seqlens, shape.ulysses, shape.ring, b), shape, opt);
}

WorkloadWork count_workload_work(const SampledWorkload& s, SpShape shape, Balancer b, const WorkOptions& opt) {
  if (s.batches.empty()) throw Error("workload: no sampled batches to count");
  WorkloadWork out;
  out.batches = static_cast<int>(s.batches.size());
  out.full_causal_pairs = causal_pairs(s.seq_len);
  std::vector<double> imb_pairs, imb_tiles;
  std::vector<StepWork> step_max;
  BatchWork w;
  for (const PackedBatch& batch : s.batches) {
    count_layout_into(place_documents(batch.cu_seqlens, shape.ulysses, shape.ring, b), shape, opt, w);
    if (out.rank_pairs.empty()) {
      out.steps = w.steps;
      out.rank_pairs.assign(w.ranks.size(), 0.0);
      out.rank_tiles.assign(w.ranks.size(), 0.0);
      out.step_max_pairs.assign(static_cast<std::size_t>(w.steps), 0.0);
      out.step_max_tiles.assign(static_cast<std::size_t>(w.steps), 0.0);
      out.step_max_kv_bytes.assign(static_cast<std::size_t>(w.steps), 0.0);
      out.step_max_cost.assign(static_cast<std::size_t>(w.steps), 0.0);
    }
    std::int64_t launches = 0, masked = 0;
    for (std::size_t r = 0; r < w.ranks.size(); ++r) {
      const RankWork& rw = w.ranks[r];
      out.rank_pairs[r] += static_cast<double>(rw.pairs);
      out.rank_tiles[r] += static_cast<double>(rw.tiles);
      out.max_rank_tokens = std::max(out.max_rank_tokens, rw.tokens);
      out.padding_tokens += static_cast<double>(rw.padding_tokens);
      launches = std::max<std::int64_t>(launches, rw.launches);
      masked = std::max<std::int64_t>(masked, rw.masked_steps);
    }
    // Each step's maxima over the ranks, taken rank by rank (the grid's order: R^2 cells at R = 1,024).
    const auto steps = static_cast<std::size_t>(w.steps);
    step_max.assign(steps, StepWork{});
    for (std::size_t r = 0; r < w.ranks.size(); ++r)
      for (std::size_t st = 0; st < steps; ++st) {
        const StepWork& cell = w.grid[r * steps + st];
        StepWork& m = step_max[st];
        m.pairs = std::max(m.pairs, cell.pairs);
        m.tiles = std::max(m.tiles, cell.tiles);
        m.kv_bytes = std::max(m.kv_bytes, cell.kv_bytes);
        m.cost = std::max(m.cost, cell.cost);
      }
    for (std::size_t st = 0; st < steps; ++st) {
      out.step_max_cost[st] += step_max[st].cost;
      out.step_max_pairs[st] += static_cast<double>(step_max[st].pairs);
      out.step_max_tiles[st] += static_cast<double>(step_max[st].tiles);
      out.step_max_kv_bytes[st] += static_cast<double>(step_max[st].kv_bytes);
    }
    const RankWork& slow = w.ranks[static_cast<std::size_t>(w.slowest_rank)];
    out.slowest_pairs += static_cast<double>(slow.pairs);
    out.slowest_tiles += static_cast<double>(slow.tiles);
    out.total_pairs += static_cast<double>(w.total_pairs);
    out.launches_max += static_cast<double>(launches);
    out.masked_steps_max += static_cast<double>(masked);
    imb_pairs.push_back(w.imbalance_pairs);
    imb_tiles.push_back(w.imbalance_tiles);
  }
  const auto n = static_cast<double>(s.batches.size());
  for (auto* v : {&out.rank_pairs, &out.rank_tiles, &out.step_max_pairs, &out.step_max_tiles, &out.step_max_kv_bytes,
                  &out.step_max_cost})
    for (double& x : *v) x /= n;
  for (double* x : {&out.slowest_pairs, &out.slowest_tiles, &out.total_pairs, &out.padding_tokens, &out.launches_max,
                    &out.masked_steps_max})
    *x /= n;
  for (double x : out.step_max_tiles) out.sum_step_max_tiles += x;
  std::sort(imb_pairs.begin(), imb_pairs.end());
  std::sort(imb_tiles.begin(), imb_tiles.end());
  double sp = 0, st = 0;
  for (double x : imb_pairs) sp += x;
  for (double x : imb_tiles) st += x;
  out.imbalance_pairs_mean = sp / n;
  out.imbalance_tiles_mean = st / n;
  out.imbalance_pairs_p95 = quantile_sorted(imb_pairs, 0.95);
  out.imbalance_tiles_p95 = quantile_sorted(imb_tiles, 0.95);
  return out;
}

}  // namespace seqpar

// Per-rank attention work under document masks (core/doc_layout.hpp, core/doc_work.hpp): the
// layouts against their definitions written out here, every count against a brute force over the
// explicit mask for random packed sequences (every method x balancer x SP 2..16, awkward tile
// sizes), and the one-document case against today's single causal sequence, in closed forms written
// independently of the library.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "seqpar/core/doc_work.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/rng.hpp"
#include "seqpar/core/workload.hpp"
#include "test_helpers.hpp"

namespace seqpar {
namespace doc_work_test {
namespace {

using core_test::error_of;
using core_test::random_cu;
using core_test::stride;

// A token a rank holds: its document, its position in the document, whether it is padding.
struct Row {
  std::int64_t doc, pos;
  bool real;
};

// The rank's rows in buffer order, from the layout's runs.
std::vector<Row> rows_of(const DocLayout& l, const RankHold& h) {
  std::vector<Row> out;
  for (const DocRun& r : h.runs)
    for (std::int64_t p = r.begin; p < r.end; ++p) out.push_back({r.doc, p, p < l.doc_len[static_cast<std::size_t>(r.doc)]});
  return out;
}

// Every shape of sp ranks: U x R = sp for each U dividing sp (U ascending), and the all-gather
// ring where U = 1.
std::vector<SpShape> shapes_of(int sp) {
  std::vector<SpShape> out;
  for (int u = 1; u <= sp; ++u) {
    if (sp % u != 0) continue;
    out.push_back({u, sp / u, false});
    if (u == 1) out.push_back({1, sp, true});
  }
  return out;
}

// The lengths every balancer lays out for a shape are the multiples of R x lcm(2, U).
std::int64_t layout_base(const SpShape& s) { return std::int64_t(s.ring) * std::lcm(2, s.ulysses); }

struct Tile {
  int q, k;
};
const std::vector<Tile> kTiles = {{1, 1}, {5, 3}, {16, 16}, {7, 13}};

// Brute force over the explicit mask: queries `q` against keys `k`, pairs (same document, key at or
// before the query, both real), and per document the set of (query row / Bq, key row / Bk) tiles
// holding one, rows numbered within the document's real rows of each side.
struct Brute {
  std::int64_t pairs = 0;
  std::vector<std::int64_t> tiles;  // per kTiles entry
  double cost = 0;                  // kTiles[0]'s tiles, each document's weighted by `curve` at its query rows
};
// With `window` W > 0 a key at or before the query's position - W is masked too (the band).
Brute brute(const std::vector<Row>& q, const std::vector<Row>& k, const std::vector<TileCost>& curve = {},
            std::int64_t window = 0) {
  Brute b;
  b.tiles.assign(kTiles.size(), 0);
  std::vector<std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>>> seen(kTiles.size());
  std::vector<std::int64_t> qi(q.size()), ki(k.size());  // row index within its document's real rows
  auto number = [](const std::vector<Row>& rows, std::vector<std::int64_t>& idx) {
    std::int64_t doc = -1, i = 0;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      if (rows[r].doc != doc) doc = rows[r].doc, i = 0;
      idx[r] = rows[r].real ? i++ : -1;
    }
  };
  number(q, qi);
  number(k, ki);
  for (std::size_t a = 0; a < q.size(); ++a)
    for (std::size_t c = 0; c < k.size(); ++c) {
      if (!q[a].real || !k[c].real || q[a].doc != k[c].doc || k[c].pos > q[a].pos) continue;
      if (window > 0 && k[c].pos <= q[a].pos - window) continue;
      ++b.pairs;
      for (std::size_t t = 0; t < kTiles.size(); ++t) seen[t].insert({q[a].doc, qi[a] / kTiles[t].q, ki[c] / kTiles[t].k});
    }
  for (std::size_t t = 0; t < kTiles.size(); ++t) b.tiles[t] = static_cast<std::int64_t>(seen[t].size());
  std::map<std::int64_t, std::int64_t> doc_rows, doc_tiles;
  for (std::size_t a = 0; a < q.size(); ++a) doc_rows[q[a].doc] += q[a].real ? 1 : 0;
  for (const auto& [doc, qt, kt] : seen[0]) ++doc_tiles[doc];
  for (const auto& [doc, tiles] : doc_tiles) b.cost += double(tiles) * tile_cost_at(curve, doc_rows[doc]);
  return b;
}

// Every real row of the sequence, in order: the gathered K,V.
std::vector<Row> whole_sequence(const DocLayout& l) {
  std::vector<Row> out;
  for (std::size_t d = 0; d < l.doc_len.size(); ++d)
    for (std::int64_t p = 0; p < l.doc_len[d]; ++p) out.push_back({std::int64_t(d), p, true});
  return out;
}

// Without a tile-cost curve a step's cost is its tile count.
double got_plain_cost(const DocLayout& layout, SpShape shape, int r, int s, std::int64_t window) {
  WorkOptions opt;
  opt.window = window;
  opt.q_rows = kTiles[0].q;
  opt.k_rows = kTiles[0].k;
  return count_layout_work(layout, shape, opt).at(r, s).cost;
}

// The library's counts of one configuration against the brute force, at every tile shape.
void check_against_brute(const std::vector<std::int64_t>& cu, SpShape shape, Balancer b, std::int64_t window = 0) {
  const DocLayout layout = place_documents(cu, shape.ulysses, shape.ring, b);
  const int ring = shape.ring, steps = shape.kv_all_gather ? 1 : ring;
  std::vector<std::vector<Row>> rows;
  for (const RankHold& h : layout.ranks) rows.push_back(rows_of(layout, h));
  const std::vector<Row> gathered = whole_sequence(layout);
  // A random tile-cost curve over the lengths these sequences hold.
  std::vector<TileCost> curve;
  for (std::int64_t n = 1 + cu.back() % 7; n < cu.back(); n *= 3)
    curve.push_back({n, 0.5 + double((n * 37) % 11) / 4});
  WorkOptions weighted;
  weighted.q_rows = kTiles[0].q;
  weighted.k_rows = kTiles[0].k;
  weighted.tile_cost = curve;
  weighted.window = window;
  const BatchWork costed = count_layout_work(layout, shape, weighted);
  std::vector<BatchWork> got;
  for (const Tile& t : kTiles) {
    WorkOptions opt;
    opt.q_rows = t.q;
    opt.k_rows = t.k;
    opt.kv_bytes_per_token = 3;
    opt.window = window;
    got.push_back(count_layout_work(layout, shape, opt));
  }
  std::int64_t all_pairs = 0, total = 0, all_tokens = 0;
  // Each document's pairs written out: query q sees min(q + 1, W) keys (all q + 1 without a window).
  for (std::int64_t len : layout.doc_len)
    for (std::int64_t q = 0; q < len; ++q) total += window > 0 ? std::min(q + 1, window) : q + 1;
  for (const auto& r : rows) all_tokens += std::int64_t(r.size());
  for (int r = 0; r < ring; ++r)
    for (int s = 0; s < steps; ++s) {
      const int from = ((r - s) % ring + ring) % ring;  // the ring's convention: rank r - s's block at step s
      const Brute want =
          brute(rows[std::size_t(r)], shape.kv_all_gather ? gathered : rows[std::size_t(from)], curve, window);
      all_pairs += want.pairs;
      EXPECT_NEAR(costed.at(r, s).cost, want.cost, 1e-9 * (1 + want.cost)) << "rank " << r << " step " << s;
      EXPECT_EQ(costed.at(r, s).tiles, want.tiles[0]);
      EXPECT_EQ(got_plain_cost(layout, shape, r, s, window), double(want.tiles[0])) << "no curve: the cost is the tiles";
      for (std::size_t t = 0; t < kTiles.size(); ++t) {
        const StepWork& st = got[t].at(r, s);
        EXPECT_EQ(st.pairs, want.pairs) << "rank " << r << " step " << s;
        EXPECT_EQ(st.tiles, want.tiles[t]) << "rank " << r << " step " << s << " tile " << kTiles[t].q << "x" << kTiles[t].k;
        const std::int64_t moved = shape.kv_all_gather ? all_tokens : s == 0 ? 0 : std::int64_t(rows[std::size_t(from)].size());
        EXPECT_EQ(st.kv_bytes, 3 * moved);
      }
    }
  // Every pair of the sequence is computed once, on the rank holding its query.
  EXPECT_EQ(all_pairs, total);
  EXPECT_EQ(got[0].total_pairs, total);
  for (const BatchWork& w : got) {
    std::int64_t mx = 0, sum = 0;
    for (const RankWork& rw : w.ranks) mx = std::max(mx, rw.tiles), sum += rw.tiles;
    EXPECT_DOUBLE_EQ(w.imbalance_tiles, double(mx) / (double(sum) / ring));
    EXPECT_EQ(w.ranks[std::size_t(w.slowest_rank)].tiles, mx);
  }
}

std::string describe(SpShape s, Balancer b, std::int64_t n) {
  return "U" + std::to_string(s.ulysses) + " R" + std::to_string(s.ring) + (s.kv_all_gather ? " all-gather " : " ") +
         to_string(b) + " n=" + std::to_string(n);
}

// Sliding windows: every method x balancer at SP 2..8, windows of one token, a few tokens, about a
// rank's share, and wider than the sequence (= the plain causal counts).
TEST(DocWork, SlidingWindowMatchesTheBruteForceBand) {
  Rng rng(0xba2d);
  for (int sp : {2, 3, 4, 8})
    for (const SpShape& shape : shapes_of(sp)) {
      const std::int64_t base = layout_base(shape);
      const std::int64_t n = base * rng.between(60 / base + 1, 160 / base + 1);
      for (Balancer b : {Balancer::contiguous, Balancer::zigzag, Balancer::per_document, Balancer::balanced})
        for (std::int64_t w : {std::int64_t{1}, std::int64_t{4}, n / sp + 3, 2 * n}) {
          const auto cu = random_cu(rng, n);
          SCOPED_TRACE(describe(shape, b, n) + " window " + std::to_string(w));
          check_against_brute(cu, shape, b, w);
        }
    }
}

// A window at least the longest document changes nothing: every count equals the unbanded one.
TEST(DocWork, WindowAsLongAsTheSequenceIsTheCausalMask) {
  const std::vector<std::int64_t> cu = {0, 50, 64, 128};
  for (Balancer b : {Balancer::contiguous, Balancer::zigzag}) {
    WorkOptions plain, wide;
    plain.q_rows = plain.k_rows = wide.q_rows = wide.k_rows = 16;
    wide.window = 128;
    const BatchWork x = count_batch_work(cu, {1, 4, false}, b, plain), y = count_batch_work(cu, {1, 4, false}, b, wide);
    EXPECT_EQ(x.total_pairs, y.total_pairs);
    for (std::size_t i = 0; i < x.grid.size(); ++i) {
      EXPECT_EQ(x.grid[i].pairs, y.grid[i].pairs);
      EXPECT_EQ(x.grid[i].tiles, y.grid[i].tiles);
    }
  }
}

// One causal sequence of 16 tokens on a contiguous ring of 4 (ranks hold 4 tokens each), window 3:
// each query sees itself and the 2 before it. Step 0 (own block): query offsets 0..3 see 1,2,3,3
// keys = 9 on ranks 1-3, rank 0 the same 9 (positions 0..3 see 1,2,3,3). Step 1 (the block of rank
// r - 1): query offset 0 sees 2 keys of it, offset 1 sees 1: 3 pairs on ranks 1-3, rank 0's step 1
// is rank 3's block (after it): 0. Steps 2 and 3: the block lies wholly before q - 3: 0.
// Total 16 x 3 - 3 = 45 = band_pairs(16, 3) = 3 x 4 / 2 + 13 x 3.
TEST(DocWork, WindowOnAContiguousRingByHand) {
  WorkOptions opt;
  opt.window = 3;
  const std::vector<std::int64_t> cu = {0, 16};
  const BatchWork w = count_batch_work(cu, {1, 4, false}, Balancer::contiguous, opt);
  EXPECT_EQ(w.total_pairs, 45);
  EXPECT_EQ(band_pairs(16, 3), 45);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(w.at(r, 0).pairs, 9);
    EXPECT_EQ(w.at(r, 1).pairs, r == 0 ? 0 : 3);
    EXPECT_EQ(w.at(r, 2).pairs, 0);
    EXPECT_EQ(w.at(r, 3).pairs, 0);
  }
}

// Every method (Ulysses, ring, hybrid U x R, all-gather) x balancer x SP degree 2..16.
TEST(DocWork, EveryMethodAndBalancerMatchesTheBruteForceMask) {
  Rng rng(0x5eed);
  int k = 0;
  const int every = stride();
  for (int sp = 2; sp <= 16; ++sp)
    for (const SpShape& shape : shapes_of(sp)) {
      // A length contiguous and zigzag sharding accept (divisible by U R and 2R), and one they do not.
      const std::int64_t base = layout_base(shape);
      const std::int64_t n = base * rng.between(120 / base + 1, 300 / base + 1);
      const std::int64_t odd = n + rng.between(1, base - 1);  // base >= 2
      for (Balancer b : {Balancer::contiguous, Balancer::zigzag, Balancer::per_document, Balancer::balanced}) {
        if (k++ % every != 0) continue;
        const auto cu = random_cu(rng, n);
        SCOPED_TRACE(describe(shape, b, n));
        check_against_brute(cu, shape, b);
        if (b == Balancer::per_document || b == Balancer::balanced) {
          SCOPED_TRACE("odd length " + std::to_string(odd));
          check_against_brute(random_cu(rng, odd), shape, b);
        }
      }
    }
}

// The per-rank sums of evenly chunked documents (per-document sharding; balanced's split documents
// and whole ones) against the general path's count of every holder pair, field by field and bit for
// bit (the weighted cost too), on fresh random workloads: document lengths below 2R, multiples of
// 2 x U x R and not (padding), long ones; R 1..64; windows and all-gather (where the general path
// must count alone); tile-cost curves and odd tiles. The brute-force test above holds the general
// path (and, through count_batch_work, the per-rank one) to the mask itself.
TEST(DocWork, PerRankSumsOfChunkedDocumentsEqualEveryHolderPair) {
  Rng rng(0xd0cfa57);
  int by_rank = 0, k = 0;
  const int every = stride();
  for (int ring : {1, 2, 3, 4, 5, 8, 16, 64})
    for (int ulysses : {1, 2, 3})
      for (int trial = 0; trial < 10; ++trial) {
        if (k++ % every != 0) continue;
        const std::int64_t unit = 2 * std::int64_t{ulysses} * ring;
        std::vector<std::int64_t> cu = {0};
        const int docs = int(rng.between(1, 12));
        for (int d = 0; d < docs; ++d) {
          std::int64_t len = 0;
          switch (rng.between(0, 3)) {
            case 0: len = rng.between(1, 2 * ring); break;                     // shorter than 2R (or just 2R)
            case 1: len = unit * rng.between(1, 4); break;                    // no padding
            case 2: len = unit * rng.between(0, 4) + rng.between(1, unit - 1 > 0 ? unit - 1 : 1); break;
            default: len = rng.between(1, 40 * unit); break;                   // long, padded or not
          }
          cu.push_back(cu.back() + len);
          if (rng.between(0, 2) == 0 && d + 1 < docs) {  // the same length again: a class of two
            cu.push_back(cu.back() + len);
            ++d;
          }
        }
        const bool all_gather = ulysses == 1 && rng.between(0, 5) == 0;
        const SpShape shape{ulysses, ring, all_gather};
        WorkOptions opt;
        const Tile tiles[] = {{1, 1}, {5, 3}, {7, 13}, {16, 16}, {128, 128}};
        const Tile t = tiles[rng.between(0, 4)];
        opt.q_rows = t.q;
        opt.k_rows = t.k;
        opt.kv_bytes_per_token = rng.between(1, 5);
        opt.skip_masked_steps = rng.between(0, 1) == 1;
        if (rng.between(0, 3) == 0) opt.window = rng.between(1, 3 * unit);
        if (rng.between(0, 1) == 1)  // a curve over the pieces' rows, costs not representable exactly
          for (std::int64_t rows = rng.between(1, 5); rows < cu.back(); rows *= rng.between(2, 4))
            opt.tile_cost.push_back({rows, 0.3 + 2.7 * rng.uniform()});
        for (Balancer b : {Balancer::per_document, Balancer::balanced}) {
          const DocLayout layout = place_documents(cu, ulysses, ring, b);
          WorkOptions general = opt;
          general.count_every_pair = true;
          const BatchWork fast = count_layout_work(layout, shape, opt), want = count_layout_work(layout, shape, general);
          SCOPED_TRACE(describe(shape, b, cu.back()) + " docs " + std::to_string(docs) + " tile " + std::to_string(t.q) +
                       "x" + std::to_string(t.k) + " window " + std::to_string(opt.window) + " curve points " +
                       std::to_string(opt.tile_cost.size()));
          // Where it applies: ring steps without a window (every document is chunked or whole here).
          EXPECT_EQ(fast.by_rank, !all_gather && opt.window == 0);
          EXPECT_FALSE(want.by_rank);
          by_rank += fast.by_rank ? 1 : 0;
          ASSERT_EQ(fast.grid.size(), want.grid.size());
          for (std::size_t i = 0; i < want.grid.size(); ++i) {
            const StepWork &x = fast.grid[i], &y = want.grid[i];
            EXPECT_EQ(x.pairs, y.pairs) << "cell " << i;
            EXPECT_EQ(x.tiles, y.tiles) << "cell " << i;
            EXPECT_EQ(x.cost, y.cost) << "cell " << i;  // the same sum in the same order: bit for bit
            EXPECT_EQ(x.kv_bytes, y.kv_bytes) << "cell " << i;
            EXPECT_EQ(x.launched, y.launched) << "cell " << i;
          }
          ASSERT_EQ(fast.ranks.size(), want.ranks.size());
          for (std::size_t r = 0; r < want.ranks.size(); ++r) {
            const RankWork &x = fast.ranks[r], &y = want.ranks[r];
            EXPECT_EQ(std::tie(x.pairs, x.tiles, x.tokens, x.padding_tokens, x.kv_bytes, x.launches, x.masked_steps),
                      std::tie(y.pairs, y.tiles, y.tokens, y.padding_tokens, y.kv_bytes, y.launches, y.masked_steps))
                << "rank " << r;
          }
          EXPECT_EQ(fast.total_pairs, want.total_pairs);
          EXPECT_EQ(fast.slowest_rank, want.slowest_rank);
          EXPECT_EQ(fast.imbalance_pairs, want.imbalance_pairs);
          EXPECT_EQ(fast.imbalance_tiles, want.imbalance_tiles);
        }
      }
  EXPECT_GT(by_rank, 0) << "the per-rank path never ran: the comparison compared the general path with itself";
}

// Which layouts the per-rank sums take: those whose every document is chunked per document (or on
// one rank), checked against the spans whatever the balancer. One causal sequence under zigzag is
// the chunked layout with c = N / 2R, under contiguous its first R chunks with c = N / R; a document
// cut by position across ranks elsewhere is not, and goes to the general path.
TEST(DocWork, PerRankSumsApplyToChunkedLayoutsAlone) {
  const std::vector<std::int64_t> one = {0, 64}, many = {0, 5, 20, 21, 64}, cut = {0, 10, 64};
  EXPECT_TRUE(count_batch_work(one, {1, 4, false}, Balancer::zigzag).by_rank);
  EXPECT_TRUE(count_batch_work(one, {1, 4, false}, Balancer::contiguous).by_rank);
  EXPECT_TRUE(count_batch_work(many, {1, 4, false}, Balancer::per_document).by_rank);
  // Document 1 of `cut`: zigzag gives rank 0 positions 46..53 of it (not its first chunk); contiguous
  // gives rank 0 six tokens and rank 1 sixteen (not chunks of one size).
  EXPECT_FALSE(count_batch_work(cut, {1, 4, false}, Balancer::zigzag).by_rank);
  EXPECT_FALSE(count_batch_work(cut, {1, 4, false}, Balancer::contiguous).by_rank);
  EXPECT_FALSE(count_batch_work(many, {1, 4, true}, Balancer::per_document).by_rank);  // all-gather: one step
  WorkOptions band;
  band.window = 8;
  EXPECT_FALSE(count_batch_work(many, {1, 4, false}, Balancer::per_document, band).by_rank);
}

// The layouts against their definitions: contiguous and zigzag positions of the packed sequence,
// per-document chunks of every padded document; balanced keeps documents whole unless their pairs
// exceed the mean per rank, and every real token is held exactly once.
TEST(DocWork, LayoutsHoldWhatTheirDefinitionsSay) {
  Rng rng(77);
  for (int trial = 0; trial < 40; ++trial) {
    const int u = int(rng.between(1, 3)), r = int(rng.between(1, 6));
    const std::int64_t n = 2 * std::int64_t(u) * r * rng.between(3, 40);
    const auto cu = random_cu(rng, n);
    auto doc_of = [&](std::int64_t p) { return std::int64_t(std::upper_bound(cu.begin(), cu.end(), p) - cu.begin() - 1); };
    const std::size_t docs = cu.size() - 1;
    for (Balancer b : {Balancer::contiguous, Balancer::zigzag, Balancer::per_document, Balancer::balanced}) {
      const DocLayout l = place_documents(cu, u, r, b);
      ASSERT_EQ(l.ranks.size(), std::size_t(r));
      std::vector<std::int64_t> held(static_cast<std::size_t>(n), 0);
      for (int g = 0; g < r; ++g) {
        const std::vector<Row> rows = rows_of(l, l.ranks[std::size_t(g)]);
        EXPECT_EQ(l.ranks[std::size_t(g)].tokens, std::int64_t(rows.size()));
        std::int64_t pad = 0;
        std::vector<std::int64_t> want;  // packed positions (real rows), per the definition
        if (b == Balancer::contiguous)
          for (std::int64_t p = g * n / r; p < (g + 1) * n / r; ++p) want.push_back(p);
        if (b == Balancer::zigzag)
          for (std::int64_t c : {std::int64_t(g), 2 * std::int64_t(r) - 1 - g})
            for (std::int64_t p = c * n / (2 * r); p < (c + 1) * n / (2 * r); ++p) want.push_back(p);
        if (b == Balancer::per_document)
          for (std::size_t d = 0; d < docs; ++d) {
            const std::int64_t len = cu[d + 1] - cu[d], padded = (len + 2 * u * r - 1) / (2 * u * r) * (2 * u * r),
                               c = padded / (2 * r);
            for (std::int64_t chunk : {std::int64_t(g), 2 * std::int64_t(r) - 1 - g})
              for (std::int64_t p = chunk * c; p < (chunk + 1) * c; ++p)
                if (p < len) want.push_back(cu[d] + p); else ++pad;
          }
        std::vector<std::int64_t> got;
        for (const Row& row : rows)
          if (row.real) got.push_back(cu[std::size_t(row.doc)] + row.pos);
        for (std::int64_t p : got) ++held[std::size_t(p)];
        EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));  // buffer order is position order
        if (b != Balancer::balanced) {
          EXPECT_EQ(got, want) << to_string(b) << " rank " << g;
        }
        if (b == Balancer::per_document) {
          EXPECT_EQ(l.ranks[std::size_t(g)].padding_tokens, pad);
        }
        if (b == Balancer::contiguous || b == Balancer::zigzag) {
          EXPECT_EQ(l.ranks[std::size_t(g)].padding_tokens, 0);
        }
        for (std::size_t i = 0; i + 1 < got.size(); ++i)  // rows of one document are one prefix-ordered run set
          if (doc_of(got[i]) == doc_of(got[i + 1])) {
            EXPECT_LT(got[i], got[i + 1]);
          }
      }
      for (std::int64_t h : held) EXPECT_EQ(h, 1) << to_string(b);
      if (b == Balancer::balanced) {
        std::int64_t total = 0;
        for (std::size_t d = 0; d < docs; ++d) total += causal_pairs(cu[d + 1] - cu[d]);
        for (std::size_t d = 0; d < docs; ++d) {
          int holders = 0;
          for (const RankHold& h : l.ranks)
            holders += std::any_of(h.runs.begin(), h.runs.end(), [&](const DocRun& x) { return x.doc == std::int64_t(d); });
          const bool split = causal_pairs(cu[d + 1] - cu[d]) * r > total;
          if (!split) {
            EXPECT_EQ(holders, 1) << "document " << d << " of " << docs;
          }
        }
      }
    }
  }
}

// Greedy largest-first onto the least-loaded rank, worked by hand: lengths 8 6 5 3 2 1 on two ranks
// (pairs 36 21 15 6 3 1, mean 41 per rank: none split). 8 -> r0 (36); 6 -> r1 (21); 5 -> r1 (36);
// 3 -> r0 on the tie (42); 2 -> r1 (39); 1 -> r1 (40).
TEST(DocWork, BalancedPlacesWholeDocumentsGreedily) {
  const std::vector<std::int64_t> cu = {0, 8, 14, 19, 22, 24, 25};
  const BatchWork w = count_batch_work(cu, {1, 2, false}, Balancer::balanced);
  EXPECT_EQ(w.ranks[0].pairs, 42);
  EXPECT_EQ(w.ranks[1].pairs, 40);
  EXPECT_EQ(w.ranks[0].tokens, 11);
  EXPECT_EQ(w.ranks[1].tokens, 14);
  // Whole documents: nothing crosses ranks, every step after the first is fully masked.
  EXPECT_EQ(w.at(0, 1).pairs, 0);
  EXPECT_EQ(w.ranks[0].masked_steps, 1);
  // A document above the mean is split per-document: 40 of 40 + 4 x 1 tokens on 2 ranks.
  const BatchWork big = count_batch_work(std::vector<std::int64_t>{0, 40, 41, 42, 43, 44}, {1, 2, false}, Balancer::balanced);
  EXPECT_EQ(big.ranks[0].tokens + big.ranks[1].tokens, 44);
  EXPECT_GT(big.at(0, 1).pairs + big.at(1, 1).pairs, 0);  // its chunks attend across ranks
}

// One document filling the sequence: today's single causal sequence. Closed forms per ring rank r
// and step s, L = N/R (contiguous) or c = N/2R (zigzag chunks), exact pairs with the diagonal:
//   contiguous ring: step 0 L(L+1)/2; rank r - s < r: L^2; else 0
//   zigzag ring:     step 0 2c^2 + c; every later step 2c^2 (equal work on every rank)
//   all-gather:      contiguous L(L+1)/2 + r L^2; head/tail c(c+1) + (2R-1) c^2
// The simulator (sim/src/attention_cost.cpp) prices the causal diagonal as half a block, s^2/2
// for s tokens: our exact count less half the rank's own tokens, which these forms show.
TEST(DocWork, OneDocumentIsTodaysCausalSequence) {
  for (int R : {2, 3, 4, 8, 16})
    for (std::int64_t per : {std::int64_t(6), std::int64_t(64)}) {
      const std::int64_t N = 2 * R * per, L = N / R, c = N / (2 * R);
      const std::vector<std::int64_t> cu = {0, N};
      const BatchWork contiguous = count_batch_work(cu, {1, R, false}, Balancer::contiguous);
      const BatchWork zigzag = count_batch_work(cu, {1, R, false}, Balancer::zigzag);
      for (int r = 0; r < R; ++r) {
        for (int s = 0; s < R; ++s) {
          const std::int64_t want = s == 0 ? L * (L + 1) / 2 : s <= r ? L * L : 0;
          EXPECT_EQ(contiguous.at(r, s).pairs, want) << "R " << R << " rank " << r << " step " << s;
          EXPECT_EQ(zigzag.at(r, s).pairs, s == 0 ? 2 * c * c + c : 2 * c * c) << "R " << R << " rank " << r;
        }
        EXPECT_EQ(zigzag.ranks[std::size_t(r)].pairs, zigzag.ranks[0].pairs);  // balanced
      }
      // The simulator's critical contiguous rank (the last): diagonal s^2/2, then R-1 full blocks.
      EXPECT_EQ(double(contiguous.at(R - 1, 0).pairs) - double(L) / 2, 0.5 * double(L * L));
      EXPECT_EQ(double(zigzag.at(0, 0).pairs) - double(2 * c) / 2, 0.5 * double(4 * c * c));  // zigzag's
      EXPECT_EQ(zigzag.at(0, 1).pairs, 4 * c * c / 2);  // half a block (sim: block / 2)
      EXPECT_EQ(contiguous.slowest_rank, R - 1);
      EXPECT_DOUBLE_EQ(zigzag.imbalance_pairs, 1.0);
      // Tiles of B dividing the chunk: diagonal T(T+1)/2 of T = L/B, full blocks T^2.
      for (std::int64_t B : {std::int64_t(2), std::int64_t(3)}) {
        if (c % B != 0) continue;
        WorkOptions opt;
        opt.q_rows = opt.k_rows = int(B);
        const BatchWork t = count_batch_work(cu, {1, R, false}, Balancer::contiguous, opt);
        const std::int64_t T = L / B;
        EXPECT_EQ(t.at(R - 1, 0).tiles, T * (T + 1) / 2);
        EXPECT_EQ(t.at(R - 1, 1).tiles, T * T);
      }
      const BatchWork ag = count_batch_work(cu, {1, R, true}, Balancer::contiguous);
      const BatchWork agz = count_batch_work(cu, {1, R, true}, Balancer::zigzag);
      for (int r = 0; r < R; ++r) {
        EXPECT_EQ(ag.ranks[std::size_t(r)].pairs, L * (L + 1) / 2 + r * L * L);
        EXPECT_EQ(agz.ranks[std::size_t(r)].pairs, c * (c + 1) + (2 * R - 1) * c * c);
        EXPECT_EQ(ag.at(r, 0).kv_bytes, N);  // the whole sequence's K,V gathered (1 byte a token here)
      }
      // Per-document chunks and the balancer (one document above the mean: split) are zigzag here.
      for (Balancer b : {Balancer::per_document, Balancer::balanced}) {
        const BatchWork w = count_batch_work(cu, {1, R, false}, b);
        for (int r = 0; r < R; ++r)
          for (int s = 0; s < R; ++s) {
            EXPECT_EQ(w.at(r, s).pairs, zigzag.at(r, s).pairs) << to_string(b);
            EXPECT_EQ(w.at(r, s).tiles, zigzag.at(r, s).tiles) << to_string(b);
          }
      }
      // Ulysses (R = 1) and the hybrid's ring of groups: the whole sequence's work, per group.
      const BatchWork uly = count_batch_work(cu, {R, 1, false}, Balancer::zigzag);
      EXPECT_EQ(uly.ranks[0].pairs, N * (N + 1) / 2);
      const BatchWork hyb = count_batch_work(cu, {2, R, false}, Balancer::zigzag);
      for (int r = 0; r < R; ++r)
        for (int s = 0; s < R; ++s) EXPECT_EQ(hyb.at(r, s).pairs, zigzag.at(r, s).pairs);
    }
}

// Ulysses: every rank holds every token for its heads; the balancer changes nothing.
TEST(DocWork, UlyssesWorkIsTheWholeSequenceWhateverTheBalancer) {
  Rng rng(5);
  for (int u : {2, 3, 8}) {
    const auto cu = random_cu(rng, 2 * u * 37);
    const BatchWork ref = count_batch_work(cu, {u, 1, false}, Balancer::contiguous, {7, 5, false, 1, {}});
    for (Balancer b : {Balancer::zigzag, Balancer::per_document, Balancer::balanced}) {
      const BatchWork w = count_batch_work(cu, {u, 1, false}, b, {7, 5, false, 1, {}});
      EXPECT_EQ(w.ranks[0].pairs, ref.ranks[0].pairs);
      EXPECT_EQ(w.ranks[0].tiles, ref.ranks[0].tiles);
      EXPECT_EQ(w.total_pairs, ref.ranks[0].pairs);
    }
  }
}

// Skipping: a step with no unmasked pair launches no kernel only when the implementation skips it;
// its K,V block moves either way.
TEST(DocWork, MaskedStepsLaunchUnlessSkipped) {
  const std::vector<std::int64_t> cu = {0, 10, 20, 30, 40};  // four documents, one per contiguous rank
  WorkOptions opt;
  const BatchWork keep = count_batch_work(cu, {1, 4, false}, Balancer::contiguous, opt);
  opt.skip_masked_steps = true;
  const BatchWork skip = count_batch_work(cu, {1, 4, false}, Balancer::contiguous, opt);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(keep.ranks[std::size_t(r)].masked_steps, 3);
    EXPECT_EQ(keep.ranks[std::size_t(r)].launches, 4);
    EXPECT_EQ(skip.ranks[std::size_t(r)].launches, 1);
    EXPECT_EQ(skip.ranks[std::size_t(r)].kv_bytes, 30);  // three blocks of 10 tokens received
  }
}

// The tile-cost curve between and beyond its points, by hand.
TEST(DocWork, TileCostIsLinearInLogRowsAndFlatBeyondThePoints) {
  const std::vector<TileCost> c = {{100, 3.0}, {400, 1.0}, {1600, 2.0}};
  EXPECT_EQ(tile_cost_at(c, 1), 3.0);
  EXPECT_EQ(tile_cost_at(c, 100), 3.0);
  EXPECT_NEAR(tile_cost_at(c, 200), 2.0, 1e-12);  // halfway in log between 100 and 400
  EXPECT_NEAR(tile_cost_at(c, 800), 1.5, 1e-12);
  EXPECT_EQ(tile_cost_at(c, 1600), 2.0);
  EXPECT_EQ(tile_cost_at(c, 1 << 30), 2.0);
  EXPECT_EQ(tile_cost_at({}, 5), 1.0);
  WorkOptions bad;
  bad.tile_cost = {{100, 1.0}, {100, 2.0}};
  const std::vector<std::int64_t> cu = {0, 64};
  EXPECT_NE(error_of([&] { (void)count_batch_work(cu, {}, Balancer::contiguous, bad); }).find("rows must rise"),
            std::string::npos);
  bad.tile_cost = {{100, 0.0}};
  EXPECT_NE(error_of([&] { (void)count_batch_work(cu, {}, Balancer::contiguous, bad); }).find("positive"),
            std::string::npos);
}

TEST(DocWork, ErrorsNameTheRule) {
  const std::vector<std::int64_t> cu = {0, 5, 14};
  auto err = [&](auto f) { return error_of(f); };
  EXPECT_NE(err([&] { count_batch_work(cu, {1, 2, false}, Balancer::zigzag); }).find("2 x ring_degree = 4"),
            std::string::npos);
  EXPECT_NE(err([&] { count_batch_work(cu, {1, 5, false}, Balancer::contiguous); }).find("divisible by sp"),
            std::string::npos);
  EXPECT_NE(err([&] { count_batch_work(cu, {2, 1, true}, Balancer::per_document); }).find("ulysses_degree = 2"),
            std::string::npos);
  EXPECT_NE(err([&] { count_batch_work(cu, {1, 2, false}, Balancer::balanced, {0, 4, false, 1, {}}); }).find("tile q_rows"),
            std::string::npos);
  EXPECT_NE(err([&] { count_batch_work(std::vector<std::int64_t>{0, 5, 5}, {1, 1, false}, Balancer::balanced); })
                .find("cu_seqlens: entry 2"),
            std::string::npos);
  EXPECT_NE(err([&] { count_batch_work(cu, {0, 1, false}, Balancer::balanced); }).find("ulysses_degree: 0"),
            std::string::npos);
  EXPECT_NE(err([] { parse_balancer("round-robin", "load-balancer"); }).find("load-balancer: unknown load balancer"),
            std::string::npos);
  EXPECT_EQ(parse_balancer("per-document"), Balancer::per_document);
}

// Over a workload: the means and maxima are those of the batches counted one by one.
TEST(DocWork, WorkloadAggregatesItsBatches) {
  const SampledWorkload s = sample_workload(make_workload("lognormal:5:1", "fill", 3, 7), 1024);
  const SpShape shape{1, 4, false};
  const WorkloadWork w = count_workload_work(s, shape, Balancer::zigzag);
  double slowest = 0, imb = 0, step1 = 0;
  std::vector<double> imbs;
  for (const PackedBatch& b : s.batches) {
    const BatchWork bw = count_batch_work(b.cu_seqlens, shape, Balancer::zigzag);
    slowest += double(bw.ranks[std::size_t(bw.slowest_rank)].tiles);
    imb += bw.imbalance_tiles;
    imbs.push_back(bw.imbalance_tiles);
    std::int64_t m = 0;
    for (int r = 0; r < 4; ++r) m = std::max(m, bw.at(r, 1).tiles);
    step1 += double(m);
  }
  EXPECT_EQ(w.batches, 7);
  EXPECT_EQ(w.steps, 4);
  EXPECT_DOUBLE_EQ(w.slowest_tiles, slowest / 7);
  EXPECT_DOUBLE_EQ(w.imbalance_tiles_mean, imb / 7);
  EXPECT_DOUBLE_EQ(w.step_max_tiles[1], step1 / 7);
  EXPECT_DOUBLE_EQ(w.imbalance_tiles_p95, [&] {
    std::sort(imbs.begin(), imbs.end());
    const double pos = 0.95 * 6;
    return imbs[6 - 1] + (imbs[6] - imbs[5]) * (pos - 5);
  }());
  EXPECT_EQ(w.full_causal_pairs, 1024 * 1025 / 2);
  EXPECT_GE(w.imbalance_tiles_p95, 1.0);
}

}  // namespace
}  // namespace doc_work_test
}  // namespace seqpar

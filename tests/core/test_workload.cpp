// The workload as data (core/workload.hpp): --documents parsing and its errors, seeded sampling
// that is the same everywhere, packing that keeps every token, and the summary's work ratio against
// a count over the explicit document mask.
#include <gtest/gtest.h>

#include <numeric>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "seqpar/core/error.hpp"
#include "seqpar/core/rng.hpp"
#include "seqpar/core/workload.hpp"
#include "test_helpers.hpp"

namespace seqpar {
namespace workload_test {
namespace {

using core_test::error_of;

#define EXPECT_ERROR_HAS(expr, text) EXPECT_NE(error_of([&] { (void)(expr); }).find(text), std::string::npos) \
    << "message: '" << error_of([&] { (void)(expr); }) << "', expected it to contain '" << (text) << "'"

std::filesystem::path temp_file(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("seqpar_test_workload_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(path) << text;
  return path;
}

TEST(Workload, ParsesEveryParametricForm) {
  LengthDistribution d = parse_documents("fixed:4K");
  EXPECT_EQ(d.form, LengthForm::fixed);
  EXPECT_EQ(d.lo, 4096);
  d = parse_documents(" uniform:100:2000 ");
  EXPECT_EQ(d.form, LengthForm::uniform);
  EXPECT_EQ(d.lo, 100);
  EXPECT_EQ(d.hi, 2000);
  d = parse_documents("lognormal:7.5:1.2");
  EXPECT_EQ(d.form, LengthForm::lognormal);
  EXPECT_DOUBLE_EQ(d.mu, 7.5);
  EXPECT_DOUBLE_EQ(d.sigma, 1.2);
  d = parse_documents("powerlaw:1.5:64:128K");
  EXPECT_EQ(d.form, LengthForm::powerlaw);
  EXPECT_DOUBLE_EQ(d.alpha, 1.5);
  EXPECT_EQ(d.lo, 64);
  EXPECT_EQ(d.hi, 131072);
  EXPECT_EQ(d.spec, "powerlaw:1.5:64:128K");
}

TEST(Workload, ParseErrorsNameTheirField) {
  EXPECT_ERROR_HAS(parse_documents("fixed:0"), "documents: fixed L");
  EXPECT_ERROR_HAS(parse_documents("fixed:abc"), "documents: fixed L");
  EXPECT_ERROR_HAS(parse_documents("fixed:1:2"), "'fixed' takes 1 field");
  EXPECT_ERROR_HAS(parse_documents("uniform:10"), "'uniform' takes 2 fields");
  EXPECT_ERROR_HAS(parse_documents("uniform:x:10"), "documents: uniform A");
  EXPECT_ERROR_HAS(parse_documents("uniform:10:5"), "uniform B = 5 must be at least A = 10");
  EXPECT_ERROR_HAS(parse_documents("lognormal:x:1"), "documents: lognormal MU");
  EXPECT_ERROR_HAS(parse_documents("lognormal:7:-1"), "documents: lognormal SIGMA");
  EXPECT_ERROR_HAS(parse_documents("lognormal:7:nan"), "documents: lognormal SIGMA");
  EXPECT_ERROR_HAS(parse_documents("lognormal:99:1"), "documents: lognormal MU");
  EXPECT_ERROR_HAS(parse_documents("powerlaw:-1:1:10"), "documents: powerlaw ALPHA");
  EXPECT_ERROR_HAS(parse_documents("powerlaw:1:100:10"), "powerlaw MAX = 10 must be at least MIN = 100");
  EXPECT_ERROR_HAS(parse_documents("powerlaw:1:0:10"), "documents: powerlaw MIN");
  EXPECT_ERROR_HAS(parse_documents("zipf:1"), "unknown form 'zipf'");
  EXPECT_ERROR_HAS(parse_documents(""), "documents: empty");
  EXPECT_ERROR_HAS(parse_documents("hist:"), "needs a file path");
  EXPECT_ERROR_HAS(parse_documents("hist:/nonexistent/x.csv"), "cannot open file '/nonexistent/x.csv'");
  EXPECT_ERROR_HAS(parse_packing("first-fit", nullptr), "packing: unknown policy 'first-fit'");
  EXPECT_ERROR_HAS(parse_packing("best-fit:0", nullptr), "packing: best-fit WINDOW");
  EXPECT_ERROR_HAS(make_workload("fixed:10", "fill", 1, 0), "doc-batches: 0 must be at least 1");
}

TEST(Workload, HistogramCsvAndItsErrors) {
  LengthDistribution d = parse_histogram_csv("# bins\ncount,min_tokens,max_tokens\n3,1,100\n0,5,5\n1,101,4K\n", "h.csv");
  ASSERT_EQ(d.bins.size(), 2u);  // the empty bin is dropped
  EXPECT_EQ(d.bins[0].min_tokens, 1);
  EXPECT_EQ(d.bins[0].count, 3);
  EXPECT_EQ(d.bins[1].max_tokens, 4096);
  EXPECT_ERROR_HAS(parse_histogram_csv("min_tokens,max\n1,2\n", "h.csv"), "h.csv line 1: the header must name");
  EXPECT_ERROR_HAS(parse_histogram_csv("min_tokens,max_tokens,count\n1,2,x\n", "h.csv"), "h.csv line 2 count");
  EXPECT_ERROR_HAS(parse_histogram_csv("min_tokens,max_tokens,count\n1,2\n", "h.csv"), "h.csv line 2: 2 cells");
  EXPECT_ERROR_HAS(parse_histogram_csv("min_tokens,max_tokens,count\n\n9,2,1\n", "h.csv"),
                   "h.csv line 3: max_tokens 2 is below min_tokens 9");
  EXPECT_ERROR_HAS(parse_histogram_csv("min_tokens,max_tokens,count\n0,2,1\n", "h.csv"), "h.csv line 2 min_tokens");
  EXPECT_ERROR_HAS(parse_histogram_csv("min_tokens,max_tokens,count\n1,2,0\n", "h.csv"), "no bin has a count");
  EXPECT_ERROR_HAS(parse_histogram_csv("", "h.csv"), "h.csv: no header");
  EXPECT_ERROR_HAS(parse_length_list("12\n\nabc\n", "l.txt"), "l.txt line 3 length");
  EXPECT_ERROR_HAS(parse_length_list("# nothing\n", "l.txt"), "l.txt: no document lengths");
}

TEST(Workload, ReadsFilesByPrefixOrName) {
  const auto hist = temp_file("h.csv", "min_tokens,max_tokens,count\n10,20,5\n");
  const auto list = temp_file("l.txt", "7\n# comment\n9\r\n");
  EXPECT_EQ(parse_documents(hist.string()).form, LengthForm::histogram);
  EXPECT_EQ(parse_documents("hist:" + hist.string()).bins.size(), 1u);
  const LengthDistribution l = parse_documents("lengths:" + list.string());
  EXPECT_EQ(l.lengths, (std::vector<std::int64_t>{7, 9}));
  EXPECT_EQ(parse_documents(list.string()).form, LengthForm::list);
  std::filesystem::remove(hist);
  std::filesystem::remove(list);
}

// The generator's outputs, computed by an independent Python implementation of splitmix64 and
// xoshiro256**: the same stream on every platform.
TEST(Workload, GeneratorMatchesTheReferenceStream) {
  Rng a(1);
  EXPECT_EQ(a.next(), 0xb3f2af6d0fc710c5ULL);
  EXPECT_EQ(a.next(), 0x853b559647364ceaULL);
  EXPECT_EQ(a.next(), 0x92f89756082a4514ULL);
  Rng b(42);
  EXPECT_EQ(b.next(), 0x15780b2e0c2ec716ULL);
  Rng c(7);
  const std::vector<std::int64_t> want = {995, 675, 639, 665, 665, 722, 717, 197};
  for (std::int64_t w : want) EXPECT_EQ(c.between(1, 1000), w);
  // uniform:A:B draws exactly these (one between() per document).
  Workload w = make_workload("uniform:1:1000", "fill", 7, 1);
  const SampledWorkload s = sample_workload(w, 6000);  // the eight documents and more
  ASSERT_GE(s.drawn.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(s.drawn[i], want[i]);
}

// Every sequence is exactly n tokens of pieces; a piece is whole exactly when it is its document;
// cuts only at sequence ends (balanced moves the document crossing a group's end anywhere in its
// group: `cuts_at_ends` false); per document, the pieces never exceed it. Returns the documents
// drawn but not wholly placed (still pending when sampling stopped), in id order.
std::vector<std::int64_t> expect_keeps_every_token(const SampledWorkload& s, std::int64_t n, bool cuts_at_ends = true) {
  std::map<std::int64_t, std::int64_t> placed;
  for (const PackedBatch& b : s.batches) {
    EXPECT_EQ(b.cu_seqlens.size(), b.pieces() + 1);
    EXPECT_EQ(b.whole.size(), b.pieces());
    EXPECT_EQ(b.cu_seqlens.front(), 0);
    EXPECT_EQ(b.cu_seqlens.back(), n);  // no padding, nothing dropped
    for (std::size_t i = 0; i < b.pieces(); ++i) {
      const std::int64_t len = b.cu_seqlens[i + 1] - b.cu_seqlens[i];
      EXPECT_GT(len, 0);
      const std::int64_t drawn = s.drawn.at(static_cast<std::size_t>(b.doc[i]));
      EXPECT_EQ(b.whole[i] != 0, len == drawn);
      placed[b.doc[i]] += len;
      // A document is cut only at a sequence's end: a piece with more of its document to come is
      // the last of its sequence (the rest may go anywhere later).
      if (cuts_at_ends && placed[b.doc[i]] < drawn) {
        EXPECT_EQ(i + 1, b.pieces()) << "piece " << i;
      }
    }
  }
  std::vector<std::int64_t> pending;
  for (std::int64_t d = 0; d < static_cast<std::int64_t>(s.drawn.size()); ++d) {
    const std::int64_t got = placed.count(d) ? placed[d] : 0;
    EXPECT_LE(got, s.drawn[static_cast<std::size_t>(d)]) << "document " << d;
    if (got < s.drawn[static_cast<std::size_t>(d)]) pending.push_back(d);
  }
  return pending;
}

bool same_batches(const SampledWorkload& a, const SampledWorkload& b) {
  if (a.drawn != b.drawn || a.batches.size() != b.batches.size()) return false;
  for (std::size_t i = 0; i < a.batches.size(); ++i)
    if (a.batches[i].cu_seqlens != b.batches[i].cu_seqlens || a.batches[i].doc != b.batches[i].doc) return false;
  return true;
}

// Random workloads at awkward sizes: each form, both packings, sequence lengths that no document
// length divides.
TEST(Workload, SamplingIsDeterministicAndKeepsEveryToken) {
  const std::vector<std::string> specs = {"uniform:1:700", "lognormal:5.5:1.3", "powerlaw:1.2:3:5000", "fixed:333",
                                          "uniform:900:2100"};
  Rng pick(20240613);
  for (const std::string& spec : specs)
    for (const char* packing : {"fill", "best-fit:7", "best-fit"}) {
      const std::uint64_t seed = pick.next();
      const std::int64_t n = pick.between(257, 3001);
      const Workload w = make_workload(spec, packing, seed, 9);
      SCOPED_TRACE(spec + " " + packing + " n=" + std::to_string(n));
      const SampledWorkload s = sample_workload(w, n);
      EXPECT_TRUE(same_batches(s, sample_workload(w, n)));  // same seed, same batches
      Workload other = w;
      other.seed = seed + 1;
      if (spec != "fixed:333") {
        EXPECT_FALSE(same_batches(s, sample_workload(other, n)));
      }
      const std::vector<std::int64_t> pending = expect_keeps_every_token(s, n);
      if (w.packing == Packing::fill) {
        // Arrival order: documents appear in id order, at most the last one unfinished.
        std::int64_t prev = -1;
        for (const PackedBatch& b : s.batches)
          for (std::int64_t d : b.doc) {
            EXPECT_TRUE(d == prev || d == prev + 1);
            prev = d;
          }
        EXPECT_LE(pending.size(), 1u);
        if (!pending.empty()) {
          EXPECT_EQ(pending[0], prev);
        }
      } else {
        EXPECT_LE(pending.size(), static_cast<std::size_t>(w.best_fit_window));
      }
    }
}

// maxlen samples one workload at hundreds of lengths: the sampler cuts fill's one stream of drawn
// documents at each, and must give sample_workload's batches exactly (documents, pieces, the whole
// flags, every document drawn), asked in any order, lengths shorter and longer than those before,
// documents longer than the sequence; best-fit and balanced packing sampled as they are.
TEST(Workload, TheSamplerCutsFillsStreamAsSampleWorkloadPacksIt) {
  Rng pick(20261129);
  int compared = 0;
  for (const char* spec : {"lognormal:6:1.5", "uniform:1:700", "fixed:333", "powerlaw:1.2:3:50000"})
    for (const char* packing : {"fill", "best-fit:7", "balanced:3"}) {
      const Workload w = make_workload(spec, packing, pick.next(), 5);
      WorkloadSampler sampler(w);
      for (int i = 0; i < 12; ++i) {
        const std::int64_t n = i == 5 ? 1 : pick.between(1, i % 2 == 0 ? 400 : 60000);
        SCOPED_TRACE(std::string(spec) + " " + packing + " n=" + std::to_string(n));
        const SampledWorkload a = sampler.sample(n), b = sample_workload(w, n);
        EXPECT_TRUE(same_batches(a, b));
        ASSERT_EQ(a.batches.size(), b.batches.size());
        for (std::size_t j = 0; j < a.batches.size(); ++j) EXPECT_EQ(a.batches[j].whole, b.batches[j].whole);
        EXPECT_EQ(a.seq_len, n);
        ++compared;
      }
    }
  EXPECT_EQ(compared, 4 * 3 * 12);
}

// Best-fit splits a document only where no pending document fits the space left. Checked from the
// output alone: when a sequence ends in a split with g tokens left, every document drawn by then
// (an id at most the largest seen so far) that is placed whole later must be longer than g.
TEST(Workload, BestFitNeverSplitsWhereADocumentFits) {
  Rng pick(99);
  int splits = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const std::int64_t n = pick.between(300, 2000);
    const std::string spec = trial % 2 ? "uniform:1:" + std::to_string(n / 3) : "lognormal:5:1";
    const Workload w = make_workload(spec, "best-fit:" + std::to_string(pick.between(1, 40)), pick.next(), 12);
    const SampledWorkload s = sample_workload(w, n);
    expect_keeps_every_token(s, n);
    // Flatten: (doc, length, whole, ends a sequence).
    struct P { std::int64_t doc, len; bool whole, last; };
    std::vector<P> all;
    for (const PackedBatch& b : s.batches)
      for (std::size_t i = 0; i < b.pieces(); ++i)
        all.push_back({b.doc[i], b.cu_seqlens[i + 1] - b.cu_seqlens[i], b.whole[i] != 0, i + 1 == b.pieces()});
    std::int64_t seen = -1;
    for (std::size_t i = 0; i < all.size(); ++i) {
      seen = std::max(seen, all[i].doc);
      if (all[i].whole || !all[i].last) continue;
      // A split filling a sequence's last g tokens: the piece's document had more than g left.
      ++splits;
      const std::int64_t gap = all[i].len;
      for (std::size_t j = i + 1; j < all.size(); ++j)
        if (all[j].whole && all[j].doc <= seen) {
          EXPECT_GT(all[j].len, gap) << spec << " piece " << j;
        }
    }
  }
  EXPECT_GT(splits, 0);  // the check above ran
  // Lengths that tile the sequence: nothing is split at all.
  const SampledWorkload s = sample_workload(make_workload("fixed:250", "best-fit:3", 5, 6), 1000);
  for (const PackedBatch& b : s.batches)
    for (std::uint8_t whole : b.whole) EXPECT_TRUE(whole);
}

// balanced:W repacks the documents of W fill sequences onto W sequences: the same tokens of the
// same documents as fill's W sequences for the same seed, every sequence full, and the causal work
// spread more evenly than arrival order leaves it.
TEST(Workload, BalancedRepacksEachGroupOfFillSequences) {
  const std::uint64_t seed = ::testing::UnitTest::GetInstance()->random_seed();
  const std::int64_t n = 4096;
  for (const int window : {1, 2, 4, 8}) {
    SCOPED_TRACE("balanced:" + std::to_string(window));
    const Workload fill = make_workload("powerlaw:1.7:16:8192", "fill", seed, 64);
    const Workload bal = make_workload("powerlaw:1.7:16:8192", "balanced:" + std::to_string(window), seed, 64);
    ASSERT_EQ(bal.packing, Packing::balanced);
    ASSERT_EQ(bal.balance_window, window);
    const SampledWorkload f = sample_workload(fill, n), b = sample_workload(bal, n);
    EXPECT_TRUE(same_batches(b, sample_workload(bal, n)));
    expect_keeps_every_token(b, n, false);
    double imb_fill = 0, imb_bal = 0;
    for (int g = 0; g < 64 / window; ++g) {
      std::map<std::int64_t, std::int64_t> want, got;
      std::vector<double> wf, wb;
      for (int i = g * window; i < (g + 1) * window; ++i) {
        const PackedBatch &x = f.batches[std::size_t(i)], &y = b.batches[std::size_t(i)];
        ASSERT_EQ(y.cu_seqlens.back(), n);
        double a = 0, c = 0;
        for (std::size_t k = 0; k < x.pieces(); ++k) {
          want[x.doc[k]] += x.cu_seqlens[k + 1] - x.cu_seqlens[k];
          a += double(causal_pairs(x.cu_seqlens[k + 1] - x.cu_seqlens[k]));
        }
        for (std::size_t k = 0; k < y.pieces(); ++k) {
          got[y.doc[k]] += y.cu_seqlens[k + 1] - y.cu_seqlens[k];
          c += double(causal_pairs(y.cu_seqlens[k + 1] - y.cu_seqlens[k]));
        }
        wf.push_back(a);
        wb.push_back(c);
      }
      EXPECT_EQ(got, want) << "group " << g;
      auto max_over_mean = [](const std::vector<double>& v) {
        return *std::max_element(v.begin(), v.end()) / (std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()));
      };
      imb_fill += max_over_mean(wf);
      imb_bal += max_over_mean(wb);
    }
    if (window == 1) {
      EXPECT_DOUBLE_EQ(imb_bal, imb_fill) << "one sequence: nothing to balance";
    } else {
      EXPECT_LT(imb_bal, imb_fill);
    }
  }
  // Lengths that tile the sequence: nothing is split.
  const SampledWorkload t = sample_workload(make_workload("fixed:250", "balanced:3", seed, 6), 1000);
  for (const PackedBatch& b : t.batches)
    for (std::uint8_t whole : b.whole) EXPECT_TRUE(whole);
  EXPECT_ERROR_HAS(parse_packing("balanced:0", nullptr), "packing: balanced WINDOW");
  EXPECT_ERROR_HAS(parse_packing("balanced", nullptr), "unknown policy 'balanced'");
}

TEST(Workload, DistributionsDrawWhatTheySay) {
  Rng rng(3);
  const LengthDistribution uni = parse_documents("uniform:10:20"), logn = parse_documents("lognormal:6:0.5"),
                           pow = parse_documents("powerlaw:2:10:1000"),
                           hist = parse_histogram_csv("min_tokens,max_tokens,count\n1,1,1\n100,199,3\n", "h");
  const int n = 20000;
  std::vector<double> u, l, p;
  int ones = 0;
  for (int i = 0; i < n; ++i) {
    u.push_back(static_cast<double>(draw_length(uni, rng)));
    l.push_back(static_cast<double>(draw_length(logn, rng)));
    p.push_back(static_cast<double>(draw_length(pow, rng)));
    const std::int64_t h = draw_length(hist, rng);
    EXPECT_TRUE(h == 1 || (h >= 100 && h <= 199)) << h;
    ones += h == 1;
  }
  auto mean = [](const std::vector<double>& v) { double s = 0; for (double x : v) s += x; return s / double(v.size()); };
  EXPECT_NEAR(mean(u), 15.0, 0.1);
  EXPECT_EQ(*std::min_element(u.begin(), u.end()), 10);
  EXPECT_EQ(*std::max_element(u.begin(), u.end()), 20);
  std::sort(l.begin(), l.end());
  EXPECT_NEAR(l[l.size() / 2], std::exp(6.0), 0.03 * std::exp(6.0));  // the median is e^MU
  EXPECT_GE(*std::min_element(p.begin(), p.end()), 10);
  EXPECT_LE(*std::max_element(p.begin(), p.end()), 1000);
  // Density x^-2 on [10, 1001): P(x < 20) = (1/10 - 1/20) / (1/10 - 1/1001).
  const double below20 = double(std::count_if(p.begin(), p.end(), [](double x) { return x < 20; })) / n;
  EXPECT_NEAR(below20, (0.1 - 0.05) / (0.1 - 1.0 / 1001), 0.015);
  EXPECT_NEAR(double(ones) / n, 0.25, 0.015);  // bins drawn by count: 1 of 4
}

// The summary's ratio against the explicit mask: pairs (i, j), j <= i, in one document.
TEST(Workload, SummaryWorkRatioEqualsTheMaskCount) {
  for (const char* spec : {"uniform:1:90", "lognormal:4:1", "fixed:500", "uniform:200:260"}) {
    const std::int64_t n = 311;
    const SampledWorkload s = sample_workload(make_workload(spec, "fill", 11, 5), n);
    const WorkloadSummary sum = summarize(s);
    double ratio = 0;
    for (const PackedBatch& b : s.batches) {
      std::vector<std::int64_t> doc_of(static_cast<std::size_t>(n));
      for (std::size_t d = 0; d < b.pieces(); ++d)
        for (std::int64_t t = b.cu_seqlens[d]; t < b.cu_seqlens[d + 1]; ++t) doc_of[static_cast<std::size_t>(t)] = std::int64_t(d);
      std::int64_t unmasked = 0, causal = 0;
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j <= i; ++j) {
          ++causal;
          unmasked += doc_of[static_cast<std::size_t>(i)] == doc_of[static_cast<std::size_t>(j)];
        }
      ratio += double(unmasked) / double(causal);
    }
    EXPECT_DOUBLE_EQ(sum.work_ratio_mean, ratio / double(s.batches.size())) << spec;
    EXPECT_LE(sum.work_ratio_min, sum.work_ratio_max);
    // Pieces fill the batches: their mean is the tokens over the pieces.
    EXPECT_NEAR(sum.pieces.mean * sum.pieces_per_batch_mean, double(n), 1e-9);
    EXPECT_GE(sum.drawn.max, sum.drawn.p95);
    EXPECT_GE(sum.drawn.p95, sum.drawn.p50);
  }
  // One document filling every sequence: the ratio is exactly 1.
  EXPECT_EQ(summarize(sample_workload(make_workload("fixed:1000", "fill", 1, 3), 1000)).work_ratio_mean, 1.0);
}

}  // namespace
}  // namespace workload_test
}  // namespace seqpar

// Drawing document lengths and packing them into sequences (fill, best-fit), and the workload's
// summary. Every draw goes through core/rng.hpp's generator and our own inverse CDFs, so one seed
// gives the same batches everywhere (up to the last bit of libm's exp/log/pow/cos, which a length
// only feels when its real value lies within that bit of a rounding boundary).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "seqpar/core/checked.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/limits.hpp"
#include "seqpar/core/stats.hpp"
#include "seqpar/core/workload.hpp"

namespace seqpar {

// Named rather than anonymous: WorkloadSampler::Stream (declared in the header) holds one.
namespace sampling {

// A distribution with its histogram's cumulative counts computed once.
class LengthSampler {
 public:
  explicit LengthSampler(const LengthDistribution& d) : d_(d) {
    std::int64_t total = 0;
    for (const HistogramBin& b : d.bins) cumulative_.push_back(total = checked_add(total, b.count, "histogram counts"));
  }

  std::int64_t draw(Rng& rng) const {
    switch (d_.form) {
      case LengthForm::fixed: return d_.lo;
      case LengthForm::uniform: return rng.between(d_.lo, d_.hi);
      case LengthForm::lognormal: return clamp_length(std::exp(d_.mu + d_.sigma * rng.normal()) + 0.5, 1, kCap);
      case LengthForm::powerlaw: return powerlaw(rng.uniform());
      case LengthForm::histogram: {
        if (cumulative_.empty()) throw Error(fmt::format("documents '{}': the histogram has no bins", d_.spec));
        const std::int64_t r = rng.between(0, cumulative_.back() - 1);
        const auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), r);
        const HistogramBin& b = d_.bins[static_cast<std::size_t>(it - cumulative_.begin())];
        return rng.between(b.min_tokens, b.max_tokens);
      }
      case LengthForm::list: {
        if (d_.lengths.empty()) throw Error(fmt::format("documents '{}': the lengths list is empty", d_.spec));
        return d_.lengths[static_cast<std::size_t>(rng.between(0, static_cast<std::int64_t>(d_.lengths.size()) - 1))];
      }
    }
    throw Error("documents: unknown length form");
  }

 private:
  static constexpr std::int64_t kCap = limits::kMaxSeqLen;

  static std::int64_t clamp_length(double x, std::int64_t lo, std::int64_t hi) {
    if (!(x >= static_cast<double>(lo))) return lo;  // also NaN
    if (x >= static_cast<double>(hi)) return hi;
    return static_cast<std::int64_t>(x);  // floor: x is positive
  }

  // Inverse CDF of the density ~ x^-alpha on [lo, hi + 1), floored to an integer in [lo, hi].
  std::int64_t powerlaw(double u) const {
    const double a = static_cast<double>(d_.lo), b = static_cast<double>(d_.hi) + 1.0, e = 1.0 - d_.alpha;
    double x;
    if (std::abs(e) < 1e-12) {
      x = a * std::pow(b / a, u);  // alpha = 1: log-uniform
    } else {
      const double pa = std::pow(a, e), pb = std::pow(b, e);
      x = std::pow(pa + u * (pb - pa), 1.0 / e);
    }
    return clamp_length(x, d_.lo, d_.hi);
  }

  const LengthDistribution& d_;
  std::vector<std::int64_t> cumulative_;
};

}  // namespace sampling

namespace {

using sampling::LengthSampler;

// A document drawn but not yet wholly placed: `rest` of its tokens still to place.
struct Pending {
  std::int64_t id = 0, rest = 0;
};

class Packer {
 public:
  Packer(const Workload& w, std::int64_t seq_len, SampledWorkload& out)
      : w_(w), sampler_(w.documents), rng_(w.seed), n_(seq_len), out_(out) {}

  Pending draw() {
    const std::int64_t len = sampler_.draw(rng_);
    out_.drawn.push_back(len);
    return {static_cast<std::int64_t>(out_.drawn.size()) - 1, len};
  }

  // Appends `take` tokens of document p to the batch.
  void place(PackedBatch& b, Pending& p, std::int64_t take) {
    b.doc.push_back(p.id);
    b.whole.push_back(take == out_.drawn[static_cast<std::size_t>(p.id)] ? 1 : 0);
    b.cu_seqlens.push_back(b.cu_seqlens.back() + take);
    p.rest -= take;
  }

  PackedBatch fill() {
    PackedBatch b;
    b.cu_seqlens.push_back(0);
    for (std::int64_t gap = n_; gap > 0; gap = n_ - b.cu_seqlens.back()) {
      if (carry_.rest == 0) carry_ = draw();
      place(b, carry_, std::min(carry_.rest, gap));
    }
    return b;
  }

  PackedBatch best_fit() {
    PackedBatch b;
    b.cu_seqlens.push_back(0);
    for (std::int64_t gap = n_; gap > 0; gap = n_ - b.cu_seqlens.back()) {
      while (pending_.size() < static_cast<std::size_t>(w_.best_fit_window)) pending_.push_back(draw());
      // The longest pending document that fits the space left; the earliest of equals.
      std::size_t best = pending_.size();
      for (std::size_t i = 0; i < pending_.size(); ++i)
        if (pending_[i].rest <= gap && (best == pending_.size() || pending_[i].rest > pending_[best].rest)) best = i;
      if (best == pending_.size()) {
        place(b, pending_.front(), gap);  // none fits: the earliest is split to fill the sequence
        continue;
      }
      place(b, pending_[best], pending_[best].rest);
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(best));
    }
    return b;
  }

  // balanced:W (workload.hpp): the pieces of W fill sequences repacked onto W sequences.
  std::vector<PackedBatch> balanced(int window) {
    // The group's pieces as fill cut them: the loader's sequence-length cut stays, so the group's
    // causal work is fill's and only where each piece runs changes.
    std::vector<Pending> docs;
    for (int i = 0; i < window; ++i) {
      const PackedBatch b = fill();
      for (std::size_t k = 0; k < b.pieces(); ++k) docs.push_back({b.doc[k], b.cu_seqlens[k + 1] - b.cu_seqlens[k]});
    }
    // Longest first (ties: arrival order), each onto the sequence with the least causal work that
    // has room; one that fits none fills the roomiest and its rest goes back in line.
    std::stable_sort(docs.begin(), docs.end(), [](const Pending& a, const Pending& b) { return a.rest > b.rest; });
    std::vector<PackedBatch> seqs(static_cast<std::size_t>(window));
    std::vector<std::int64_t> work(seqs.size(), 0);
    for (PackedBatch& b : seqs) b.cu_seqlens.push_back(0);
    auto room = [&](std::size_t j) { return n_ - seqs[j].cu_seqlens.back(); };
    for (std::size_t i = 0; i < docs.size(); ++i) {
      Pending d = docs[i];
      std::size_t pick = seqs.size(), roomiest = 0;
      for (std::size_t j = 0; j < seqs.size(); ++j) {
        if (room(j) >= d.rest && (pick == seqs.size() || work[j] < work[pick])) pick = j;
        if (room(j) > room(roomiest)) roomiest = j;
      }
      const std::size_t j = pick < seqs.size() ? pick : roomiest;
      const std::int64_t take = std::min(d.rest, room(j));
      place(seqs[j], d, take);
      work[j] += causal_pairs(take);
      if (d.rest > 0) {  // its rest, back in line by length
        const auto at = std::upper_bound(docs.begin() + static_cast<std::ptrdiff_t>(i) + 1, docs.end(), d,
                                         [](const Pending& a, const Pending& b) { return a.rest > b.rest; });
        docs.insert(at, d);
      }
    }
    return seqs;
  }

 private:
  const Workload& w_;
  LengthSampler sampler_;
  Rng rng_;
  std::int64_t n_;
  SampledWorkload& out_;
  Pending carry_;                 // fill: the document crossing into the next sequence
  std::vector<Pending> pending_;  // best-fit: the window, in arrival order
};

LengthStats length_stats(std::vector<double> v) {
  LengthStats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const Stats st = summarize(v);  // mean, sample std, median and max as the measurements have them
  s.count = static_cast<std::int64_t>(v.size());
  s.mean = st.mean;
  s.stddev = st.stddev;
  s.p50 = st.median;
  s.p95 = quantile_sorted(v, 0.95);
  s.max = st.max;
  return s;
}

}  // namespace

std::int64_t draw_length(const LengthDistribution& d, Rng& rng) { return LengthSampler(d).draw(rng); }

std::int64_t causal_pairs(std::int64_t n) {
  // n (n + 1) / 2 with the halving first, on whichever factor is even.
  return n % 2 == 0 ? checked_mul(n / 2, n + 1, "causal pairs") : checked_mul(n, (n + 1) / 2, "causal pairs");
}

SampledWorkload sample_workload(const Workload& w, std::int64_t seq_len) {
  require_range("seq_len", seq_len, 1, limits::kMaxSeqLen);
  require_range("doc-batches", w.batches, 1, kMaxDocBatches);
  if (w.packing == Packing::best_fit) require_range("packing: best-fit WINDOW", w.best_fit_window, 1, kMaxBestFitWindow);
  SampledWorkload out;
  out.seq_len = seq_len;
  if (w.packing == Packing::balanced) require_range("packing: balanced WINDOW", w.balance_window, 1, kMaxDocBatches);
  Packer packer(w, seq_len, out);
  while (out.batches.size() < static_cast<std::size_t>(w.batches)) {
    if (w.packing != Packing::balanced) {
      out.batches.push_back(w.packing == Packing::fill ? packer.fill() : packer.best_fit());
      continue;
    }
    for (PackedBatch& b : packer.balanced(w.balance_window))
      if (out.batches.size() < static_cast<std::size_t>(w.batches)) out.batches.push_back(std::move(b));
  }
  return out;
}

// The drawn documents in arrival order: their lengths and where each ends in the stream.
struct WorkloadSampler::Stream {
  explicit Stream(const Workload& w) : sampler(w.documents), rng(w.seed) {}
  LengthSampler sampler;
  Rng rng;
  std::vector<std::int64_t> len, end;
};

WorkloadSampler::WorkloadSampler(const Workload& w) : w_(w) {
  if (w_.packing == Packing::fill) stream_ = std::make_unique<Stream>(w_);  // w_'s distribution: it outlives the stream
}
WorkloadSampler::~WorkloadSampler() = default;

SampledWorkload WorkloadSampler::sample(std::int64_t seq_len) {
  if (!stream_) return sample_workload(w_, seq_len);
  require_range("seq_len", seq_len, 1, limits::kMaxSeqLen);
  require_range("doc-batches", w_.batches, 1, kMaxDocBatches);
  Stream& st = *stream_;
  // fill (Packer::fill): a document is drawn when the one before it is wholly placed, so the
  // documents drawn are those starting before batches x seq_len, each batch the stream's next
  // seq_len tokens, split at document ends.
  const std::int64_t total = checked_mul<std::int64_t>(seq_len, w_.batches, "seq_len x doc-batches");
  while (st.end.empty() || st.end.back() < total) {
    const std::int64_t len = st.sampler.draw(st.rng);
    st.len.push_back(len);
    st.end.push_back(checked_add(st.end.empty() ? std::int64_t{0} : st.end.back(), len, "document stream tokens"));
  }
  SampledWorkload out;
  out.seq_len = seq_len;
  const auto drawn = static_cast<std::size_t>(std::lower_bound(st.end.begin(), st.end.end(), total) - st.end.begin()) + 1;
  out.drawn.assign(st.len.begin(), st.len.begin() + static_cast<std::ptrdiff_t>(drawn));
  out.batches.resize(static_cast<std::size_t>(w_.batches));
  for (std::size_t j = 0; j < out.batches.size(); ++j) {
    PackedBatch& b = out.batches[j];
    const std::int64_t first = static_cast<std::int64_t>(j) * seq_len, last = first + seq_len;
    b.cu_seqlens.push_back(0);
    // The document holding token `first`: the first that ends after it.
    auto d = static_cast<std::size_t>(std::upper_bound(st.end.begin(), st.end.end(), first) - st.end.begin());
    for (std::int64_t at = first; at < last; ++d) {
      const std::int64_t stop = std::min(st.end[d], last), take = stop - at;
      b.doc.push_back(static_cast<std::int64_t>(d));
      b.whole.push_back(take == st.len[d] ? 1 : 0);
      b.cu_seqlens.push_back(b.cu_seqlens.back() + take);
      at = stop;
    }
  }
  return out;
}

WorkRatios work_ratios(const SampledWorkload& s) {
  if (s.batches.empty()) throw Error("workload: no sampled batches to summarize");
  WorkRatios out;
  const double full = static_cast<double>(causal_pairs(s.seq_len));
  out.min = 1e300;
  for (const PackedBatch& b : s.batches) {
    std::int64_t pairs = 0;
    for (std::size_t i = 0; i < b.pieces(); ++i)
      pairs += causal_pairs(b.cu_seqlens[i + 1] - b.cu_seqlens[i]);  // at most causal_pairs(seq_len): no overflow
    const double ratio = static_cast<double>(pairs) / full;
    out.mean += ratio;
    out.min = std::min(out.min, ratio);
    out.max = std::max(out.max, ratio);
  }
  out.mean /= static_cast<double>(s.batches.size());
  return out;
}

WorkloadSummary summarize(const SampledWorkload& s) {
  const WorkRatios ratios = work_ratios(s);  // throws for a workload without batches
  WorkloadSummary out;
  out.drawn = length_stats({s.drawn.begin(), s.drawn.end()});
  std::vector<double> pieces;
  for (const PackedBatch& b : s.batches)
    for (std::size_t i = 0; i < b.pieces(); ++i) pieces.push_back(static_cast<double>(b.cu_seqlens[i + 1] - b.cu_seqlens[i]));
  out.work_ratio_mean = ratios.mean;
  out.work_ratio_min = ratios.min;
  out.work_ratio_max = ratios.max;
  out.pieces_per_batch_mean = static_cast<double>(pieces.size()) / static_cast<double>(s.batches.size());
  out.pieces = length_stats(std::move(pieces));
  return out;
}

}  // namespace seqpar

// SpAttention's planted faults (fault.hpp), tests only: which rank carries one, and the edits that
// plant it. Every edit goes through the host: slow, and only ever on a rank that carries a fault.
#include <algorithm>
#include <cmath>
#include <vector>

#include "seqpar/train/sp_attention.hpp"

namespace seqpar::train {

namespace {

// Rewrites `bytes` at p (device or host memory) through a host copy: `edit` gets the bytes.
template <class F>
void edit_on_host(Backend& be, void* p, std::size_t bytes, F&& edit) {
  std::vector<unsigned char> h(bytes);
  be.copy_to_host(h.data(), p, bytes);
  edit(h);
  be.copy_from_host(p, h.data(), bytes);
}

}  // namespace

bool SpAttention::faulty(Fault f, int rank) const {
  if (fault_ != f) return false;
  // The group mapping's fault sits on a Ulysses rank where there is one, else on a ring rank.
  if (f == Fault::gqa_wrong_group && u_ > 1) return ulysses_->rank() == rank;
  // Without a ring the boundary's and the window's faults sit on a Ulysses rank (after the all-to-all each holds
  // every token).
  if ((f == Fault::document_boundary_ignored || f == Fault::window_ignored) && r_ == 1)
    return u_ > 1 && ulysses_->rank() == rank;
  return r_ > 1 && ring_index_ == rank;
}

bool SpAttention::leaks_future_key(const Segment& qs, const Segment& ks) const {
  // Ring rank 0's query chunk followed directly by a key chunk: the boundary the mask gets wrong.
  return faulty(Fault::causal_mask_off_by_one, 0) && ks.pos == qs.pos + qs.len && ks.doc == qs.doc && qs.doc >= 0;
}

void SpAttention::swap_kv_heads(Ref x) {
  const std::size_t e = dtype_size(x.t), head = static_cast<std::size_t>(dims_.head_dim) * e;
  const std::size_t row = head * static_cast<std::size_t>(dims_.kv_heads);
  const std::size_t rows = static_cast<std::size_t>(dims_.batch) * static_cast<std::size_t>(nl_);
  edit_on_host(be_, x.p, rows * row, [&](std::vector<unsigned char>& h) {
    for (std::size_t t = 0; t < rows; ++t)
      std::swap_ranges(h.begin() + static_cast<std::ptrdiff_t>(t * row),
                       h.begin() + static_cast<std::ptrdiff_t>(t * row + head),
                       h.begin() + static_cast<std::ptrdiff_t>(t * row + head));
  });
}

void SpAttention::transpose_peer_chunks(Tensor& x, int heads) {
  const std::size_t e = dtype_size(x.dtype()), d = static_cast<std::size_t>(dims_.head_dim) * e;
  const std::size_t n = static_cast<std::size_t>(nl_), h = static_cast<std::size_t>(heads);
  edit_on_host(be_, x.data(), x.bytes(), [&](std::vector<unsigned char>& buf) {
    std::vector<unsigned char> chunk(n * h * d);
    for (std::size_t c = 0; c < buf.size() / chunk.size(); ++c) {  // every (sequence, peer) chunk
      unsigned char* p = buf.data() + c * chunk.size();
      std::copy(p, p + chunk.size(), chunk.begin());
      for (std::size_t t = 0; t < n; ++t)
        for (std::size_t hh = 0; hh < h; ++hh)  // element (t, hh) read from where [heads][tokens] puts it
          std::copy_n(chunk.begin() + static_cast<std::ptrdiff_t>((hh * n + t) * d), d, p + (t * h + hh) * d);
    }
  });
}

void SpAttention::edit_returned_dkv(Ref dk, Ref dv) {
  const float factor = fault_ == Fault::dkv_return_doubled ? 2.0f : 0.0f;
  const int d = dims_.head_dim, kv = dims_.kv_heads;
  const std::int64_t n = static_cast<std::int64_t>(dims_.batch) * nl_ * kv * d;
  for (Ref x : {dk, dv}) {
    std::vector<float> h = download(be_, x, n);
    for (std::int64_t t = 0; t < n / (static_cast<std::int64_t>(kv) * d); ++t)
      for (int i = 0; i < d; ++i) h[static_cast<std::size_t>(t * kv * d + i)] *= factor;
    const Tensor back = upload(be_, h.data(), n, x.t, MemCategory::working);
    be_.copy(x.p, back.data(), back.bytes());
  }
}

void SpAttention::merge_with_wrong_max(int seq_q, float* o_acc, float* lse, CRef o_part, const float* lse_part) {
  const int d = dims_.head_dim;
  // The merged LSE is m + log(e^(a-m) + e^(c-m)) with m = max(a, c); this one adds back a (the
  // accumulated LSE) where c (the part's) is the larger: the LSE is off by a - c and the output
  // by e^(c-a). Merging into nothing (a = -inf) is still right.
  const std::size_t rows = static_cast<std::size_t>(seq_q) * static_cast<std::size_t>(hl_);
  std::vector<float> a(rows), c(rows), merged(rows), o(rows * static_cast<std::size_t>(d));
  be_.copy_to_host(a.data(), lse, rows * sizeof(float));
  be_.copy_to_host(c.data(), lse_part, rows * sizeof(float));
  be_.lse_merge(1, seq_q, hl_, d, o_acc, lse, o_part, lse_part);
  be_.copy_to_host(merged.data(), lse, rows * sizeof(float));
  be_.copy_to_host(o.data(), o_acc, o.size() * sizeof(float));
  for (std::size_t h = 0; h < static_cast<std::size_t>(hl_); ++h)
    for (std::size_t i = 0; i < static_cast<std::size_t>(seq_q); ++i) {
      const std::size_t li = h * static_cast<std::size_t>(seq_q) + i;  // lse: [heads][seq_q]
      if (!std::isfinite(a[li]) || !std::isfinite(c[li]) || !(c[li] > a[li])) continue;
      merged[li] += a[li] - c[li];
      float* row = o.data() + (i * static_cast<std::size_t>(hl_) + h) * static_cast<std::size_t>(d);
      for (int e = 0; e < d; ++e) row[e] *= std::exp(c[li] - a[li]);
    }
  be_.copy_from_host(lse, merged.data(), rows * sizeof(float));
  be_.copy_from_host(o_acc, o.data(), o.size() * sizeof(float));
}

void SpAttention::swap_first_kv_chunks(Tensor& kv) {
  // [b, U * nl, kvl, d]: peer j's chunk is tokens [j * nl, (j + 1) * nl) of each sequence.
  const std::int64_t chunk = static_cast<std::int64_t>(nl_) * kvl_ * dims_.head_dim;
  const auto bytes = static_cast<std::size_t>(chunk) * dtype_size(kv.dtype());
  Tensor tmp = act(chunk, MemCategory::working);
  for (int bi = 0; bi < dims_.batch; ++bi) {
    Ref a = kv.ref(static_cast<std::int64_t>(bi) * ng_ * kvl_ * dims_.head_dim);
    be_.copy(tmp.data(), a.p, bytes);
    be_.copy(a.p, a.at(chunk).p, bytes);
    be_.copy(a.at(chunk).p, tmp.data(), bytes);
  }
}

}  // namespace seqpar::train

// The host engines (CPU reference and naive 2-D copies on host memory) and the naive mover shared
// with the GPU: every layout change of reshard_layout.hpp run as one 2-D copy per head group.
#include <chrono>
#include <cstring>

#include "movers.hpp"
#include "seqpar/kernels/reshard_layout.hpp"
#include "seqpar/kernels/reshard_ref.hpp"

namespace seqpar::bench::reshard_full {

std::string_view to_string(Variant v) { return v == Variant::fused ? "fused" : "naive"; }

namespace {

using reshard::RowCopy;

class NaiveMover final : public Mover {
 public:
  NaiveMover(std::unique_ptr<Copy2D> copy, std::size_t element_bytes, std::unique_ptr<Mover> reducer)
      : copy_(std::move(copy)), esize_(element_bytes), reducer_(std::move(reducer)) {}

  void pack(const Dims& s, int heads, const void* x, void* send) override {
    run(reshard::pack(s.P, s.b, s.n, heads, s.d), x, send);
  }
  void unpack(const Dims& s, int heads, const void* recv, void* y) override {
    run(reshard::unpack(s.P, s.b, s.n, heads, s.d), recv, y);
  }
  void pack_reverse(const Dims& s, int heads, const void* y, void* send) override {
    run(reshard::pack_reverse(s.P, s.b, s.n, heads, s.d), y, send);
  }
  void unpack_reverse(const Dims& s, int heads, const void* recv, void* x) override {
    run(reshard::unpack_reverse(s.P, s.b, s.n, heads, s.d), recv, x);
  }
  void pack_qkv(const Dims& s, int heads, int kv_heads, const void* q, const void* k, const void* v,
                void* send) override {
    run(reshard::pack_qkv(s.P, s.b, s.n, heads, kv_heads, s.d), {q, k, v}, {send, send, send});
  }
  void unpack_qkv(const Dims& s, int heads, int kv_heads, const void* recv, void* q, void* k,
                  void* v) override {
    run(reshard::unpack_qkv(s.P, s.b, s.n, heads, kv_heads, s.d), {recv, recv, recv}, {q, k, v});
  }
  void pack_qkv_reverse(const Dims& s, int heads, int kv_heads, const void* dq, const void* dk, const void* dv,
                        void* send) override {
    run(reshard::pack_qkv_reverse(s.P, s.b, s.n, heads, kv_heads, s.d), {dq, dk, dv}, {send, send, send});
  }
  void unpack_qkv_reverse(const Dims& s, int heads, int kv_heads, const void* recv, void* dq, void* dk,
                          void* dv) override {
    run(reshard::unpack_qkv_reverse(s.P, s.b, s.n, heads, kv_heads, s.d), {recv, recv, recv}, {dq, dk, dv});
  }
  void replicate(const Dims& s, int rep, int kv_heads, const void* kv, void* out) override {
    run(reshard::replicate(rep, s.b, s.n, kv_heads, s.d), kv, out);
  }
  // A sum, not a layout change: the same reduction as the fused variant.
  void reduce(const Dims& s, int rep, int kv_heads, const void* dout, void* dkv) override {
    reducer_->reduce(s, rep, kv_heads, dout, dkv);
  }

 private:
  // Index j of a RowCopy is the head group (or sequence block, or replica): one 2-D copy each.
  void run(const RowCopy& c, const void* src, void* dst) {
    const auto bytes = [this](std::int64_t elements) { return static_cast<std::size_t>(elements) * esize_; };
    for (std::int64_t j = 0; j < c.n_j; ++j)
      copy_->copy(static_cast<char*>(dst) + bytes(c.dst_off + j * c.dst_j), bytes(c.dst_i),
                  static_cast<const char*>(src) + bytes(c.src_off + j * c.src_j), bytes(c.src_i), bytes(c.row),
                  static_cast<std::size_t>(c.n_i));
  }
  // The fused layouts as three separate sets of copies, one per tensor.
  void run(const reshard::QkvCopies& c, const void* const (&src)[3], void* const (&dst)[3]) {
    run(c.q, src[0], dst[0]);
    run(c.k, src[1], dst[1]);
    run(c.v, src[2], dst[2]);
  }

  std::unique_ptr<Copy2D> copy_;
  std::size_t esize_;
  std::unique_ptr<Mover> reducer_;
};

class HostCopy2D final : public Copy2D {
 public:
  void copy(void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width,
            std::size_t height) override {
    for (std::size_t h = 0; h < height; ++h)
      std::memcpy(static_cast<char*>(dst) + h * dpitch, static_cast<const char*>(src) + h * spitch, width);
  }
};

const float* f(const void* p) { return static_cast<const float*>(p); }
float* f(void* p) { return static_cast<float*>(p); }

// The CPU reference (seqpar::ref), float32.
class RefMover final : public Mover {
 public:
  void pack(const Dims& s, int heads, const void* x, void* send) override {
    ref::ulysses_pack(s.P, s.b, s.n, heads, s.d, f(x), f(send));
  }
  void unpack(const Dims& s, int heads, const void* recv, void* y) override {
    ref::ulysses_unpack(s.P, s.b, s.n, heads, s.d, f(recv), f(y));
  }
  void pack_reverse(const Dims& s, int heads, const void* y, void* send) override {
    ref::ulysses_pack_reverse(s.P, s.b, s.n, heads, s.d, f(y), f(send));
  }
  void unpack_reverse(const Dims& s, int heads, const void* recv, void* x) override {
    ref::ulysses_unpack_reverse(s.P, s.b, s.n, heads, s.d, f(recv), f(x));
  }
  void pack_qkv(const Dims& s, int heads, int kv_heads, const void* q, const void* k, const void* v,
                void* send) override {
    ref::ulysses_pack_qkv(s.P, s.b, s.n, heads, kv_heads, s.d, f(q), f(k), f(v), f(send));
  }
  void unpack_qkv(const Dims& s, int heads, int kv_heads, const void* recv, void* q, void* k,
                  void* v) override {
    ref::ulysses_unpack_qkv(s.P, s.b, s.n, heads, kv_heads, s.d, f(recv), f(q), f(k), f(v));
  }
  void pack_qkv_reverse(const Dims& s, int heads, int kv_heads, const void* dq, const void* dk, const void* dv,
                        void* send) override {
    ref::ulysses_pack_qkv_reverse(s.P, s.b, s.n, heads, kv_heads, s.d, f(dq), f(dk), f(dv), f(send));
  }
  void unpack_qkv_reverse(const Dims& s, int heads, int kv_heads, const void* recv, void* dq, void* dk,
                          void* dv) override {
    ref::ulysses_unpack_qkv_reverse(s.P, s.b, s.n, heads, kv_heads, s.d, f(recv), f(dq), f(dk), f(dv));
  }
  void replicate(const Dims& s, int rep, int kv_heads, const void* kv, void* out) override {
    ref::replicate_kv_heads(rep, s.b, s.n, kv_heads, s.d, f(kv), f(out));
  }
  void reduce(const Dims& s, int rep, int kv_heads, const void* dout, void* dkv) override {
    ref::reduce_kv_heads(rep, s.b, s.n, kv_heads, s.d, f(dout), f(dkv));
  }
};

// Host work is synchronous: a mark is the time it is taken.
class HostClock final : public Clock {
 public:
  void mark() override { marks_.push_back(std::chrono::steady_clock::now()); }
  std::vector<double> read() override {
    std::vector<double> out;
    for (std::size_t i = 1; i < marks_.size(); ++i)
      out.push_back(std::chrono::duration<double>(marks_[i] - marks_[i - 1]).count());
    marks_.clear();
    return out;
  }

 private:
  std::vector<std::chrono::steady_clock::time_point> marks_;
};

}  // namespace

std::unique_ptr<Mover> make_naive_mover(std::unique_ptr<Copy2D> copy, std::size_t element_bytes,
                                        std::unique_ptr<Mover> reducer) {
  return std::make_unique<NaiveMover>(std::move(copy), element_bytes, std::move(reducer));
}

std::unique_ptr<Mover> make_host_mover(Variant v) {
  if (v == Variant::fused) return std::make_unique<RefMover>();
  return make_naive_mover(std::make_unique<HostCopy2D>(), sizeof(float), std::make_unique<RefMover>());
}

std::unique_ptr<Clock> make_host_clock() { return std::make_unique<HostClock>(); }

}  // namespace seqpar::bench::reshard_full

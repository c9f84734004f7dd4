// cuDNN fused attention through the frontend's graph API. One graph per (direction, dtype, shape,
// mask, window, scale), built with heuristics mode A on first use and kept for the engine's lifetime:
// the build costs milliseconds, a launch microseconds, and a training step repeats the same shapes.
//
// Sliding window (AttentionShape::window W: a query sees the W keys ending at itself, core's
// in_band). The frontend's diagonal band keeps score (row, col) iff col + W > row under TOP_LEFT
// alignment and col + W - (s_kv - s_q) > row under BOTTOM_RIGHT (cudnn_frontend
// utils/attn_score_modifiers.h, sliding_window_mask: the left bound is a length, as Transformer
// Engine's set_diagonal_band_left_bound(window_size_left + 1) has it), with the causal right bound 0:
// the same band measured from the block's own diagonal. So a causal-aligned block (top-left or
// bottom-right) takes W as it is. Frontend 1.5 added the window (set_sliding_window_length, top-left),
// 1.9 the bottom-right alignment with it; the backend needs cuDNN 9.2 (frontend 1.5.0 release notes).
// NOT VERIFIED ON A GPU: this path was compiled, never run (README, seqpar-train: Sliding windows).
#include <cudnn.h>
#include <cudnn_frontend.h>
#include <fmt/format.h>

#include <bit>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "seqpar/core/cuda_check.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/kernels/cudnn_attention.hpp"
#include "seqpar/kernels/fill.cuh"

namespace seqpar::kernels {
namespace {

namespace fe = cudnn_frontend;
using ref::AttentionShape;

// Tensor ids of the variant pack: the graph is built once, pointers are bound per call.
enum Uid : std::int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

enum class Direction { forward, backward };

void check_cudnn(cudnnStatus_t st, const char* what) {
  if (st != CUDNN_STATUS_SUCCESS) throw Error(fmt::format("cuDNN: {} failed: {}", what, cudnnGetErrorString(st)));
}

void check_fe(fe::error_t e, const char* what, const AttentionShape& s) {
  if (e.is_bad())
    throw Error(fmt::format("cuDNN attention: {} for batch {} seq_q {} seq_k {} heads {}/{} head_dim {}: {}", what,
                            s.batch, s.seq_q, s.seq_k, s.heads, s.kv_heads, s.head_dim, e.get_message()));
}

fe::DataType_t io_type(DType t) {
  switch (t) {
    case DType::bf16: return fe::DataType_t::BFLOAT16;
    case DType::fp16: return fe::DataType_t::HALF;
    default: break;  // fp32 and core's other element types
  }
  throw Error(fmt::format("cuDNN attention: dtype {} is not supported; expected bf16 or fp16", to_string(t)));
}

struct Key {
  Direction dir;
  DType dtype;
  int batch, seq_q, seq_k, heads, kv_heads, head_dim;
  BlockMask mask;
  std::int64_t window;  // the band's left bound W (0: none)
  std::uint32_t scale_bits;
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  std::size_t operator()(const Key& k) const {
    std::size_t h = 0;
    auto mix = [&h](std::uint64_t v) { h ^= std::hash<std::uint64_t>{}(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    for (std::uint64_t v : {std::uint64_t(k.dir), std::uint64_t(k.dtype), std::uint64_t(k.batch), std::uint64_t(k.seq_q),
                            std::uint64_t(k.seq_k), std::uint64_t(k.heads), std::uint64_t(k.kv_heads),
                            std::uint64_t(k.head_dim), std::uint64_t(k.mask), std::uint64_t(k.window),
                            std::uint64_t(k.scale_bits)})
      mix(v);
    return h;
  }
};

struct Built {
  std::shared_ptr<fe::graph::Graph> graph;
  std::int64_t workspace = 0;
};

// [batch, seq, heads, head_dim] row-major seen as cuDNN's [b, h, s, d] dims.
fe::graph::Tensor_attributes bshd(const char* name, Uid uid, int b, int s, int h, int d) {
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim({b, h, s, d})
      .set_stride({std::int64_t{s} * h * d, d, std::int64_t{h} * d, 1});
}

void set_bshd(const std::shared_ptr<fe::graph::Tensor_attributes>& t, Uid uid, int b, int s, int h, int d) {
  t->set_output(true).set_uid(uid).set_dim({b, h, s, d}).set_stride({std::int64_t{s} * h * d, d, std::int64_t{h} * d, 1});
}

fe::graph::Tensor_attributes stats_tensor(int b, int h, int s) {
  return fe::graph::Tensor_attributes()
      .set_name("stats")
      .set_uid(kStats)
      .set_dim({b, h, s, 1})
      .set_stride({std::int64_t{h} * s, s, 1, 1})
      .set_data_type(fe::DataType_t::FLOAT);
}

// The oldest frontend whose band composes with both alignments (see the header comment).
constexpr bool kFrontendHasWindow = CUDNN_FRONTEND_MAJOR_VERSION > 1 ||
                                    (CUDNN_FRONTEND_MAJOR_VERSION == 1 && CUDNN_FRONTEND_MINOR_VERSION >= 9);
constexpr std::size_t kBackendWindowVersion = 90200;  // cuDNN 9.2.0

template <typename Attributes>
void apply_mask(Attributes& a, BlockMask m, std::int64_t window) {
  if (m == BlockMask::causal_top) a.set_causal_mask(true);
  if (m == BlockMask::causal_bottom) a.set_causal_mask_bottom_right(true);
  if (window > 0) {
    if constexpr (kFrontendHasWindow) {
      a.set_sliding_window_length(static_cast<int>(window));  // the band's left bound (a length)
    } else {
      throw Error("cuDNN attention: this build's cuDNN frontend predates 1.9, which a sliding window needs");
    }
  }
}

Built build(cudnnHandle_t handle, const Key& k, const AttentionShape& s) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(io_type(k.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const float scale = std::bit_cast<float>(k.scale_bits);
  auto Q = g->tensor(bshd("q", kQ, k.batch, k.seq_q, k.heads, k.head_dim));
  auto K = g->tensor(bshd("k", kK, k.batch, k.seq_k, k.kv_heads, k.head_dim));
  auto V = g->tensor(bshd("v", kV, k.batch, k.seq_k, k.kv_heads, k.head_dim));
  if (k.dir == Direction::forward) {
    auto a = fe::graph::SDPA_attributes().set_name("sdpa_forward").set_generate_stats(true).set_attn_scale(scale);
    apply_mask(a, k.mask, k.window);
    auto [O, stats] = g->sdpa(Q, K, V, a);
    set_bshd(O, kO, k.batch, k.seq_q, k.heads, k.head_dim);
    stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT)
        .set_dim({k.batch, k.heads, k.seq_q, 1}).set_stride({std::int64_t{k.heads} * k.seq_q, k.seq_q, 1, 1});
  } else {
    auto O = g->tensor(bshd("o", kO, k.batch, k.seq_q, k.heads, k.head_dim));
    auto dO = g->tensor(bshd("do", kDO, k.batch, k.seq_q, k.heads, k.head_dim));
    auto stats = g->tensor(stats_tensor(k.batch, k.heads, k.seq_q));
    auto a = fe::graph::SDPA_backward_attributes().set_name("sdpa_backward").set_attn_scale(scale);
    apply_mask(a, k.mask, k.window);
    auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, stats, a);
    set_bshd(dQ, kDQ, k.batch, k.seq_q, k.heads, k.head_dim);
    set_bshd(dK, kDK, k.batch, k.seq_k, k.kv_heads, k.head_dim);
    set_bshd(dV, kDV, k.batch, k.seq_k, k.kv_heads, k.head_dim);
  }
  check_fe(g->build(handle, {fe::HeurMode_t::A}), k.dir == Direction::forward ? "building the forward graph"
                                                                               : "building the backward graph", s);
  Built b;
  b.graph = std::move(g);
  check_fe(b.graph->get_workspace_size(b.workspace), "querying the workspace size", s);
  return b;
}

}  // namespace

bool cudnn_attention_available(std::string* why) {
  auto fail = [why](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  const std::size_t runtime = cudnnGetVersion();
  if (runtime < 90000)
    return fail(fmt::format("cuDNN {} is loaded; the fused attention graphs need cuDNN 9 or newer", runtime));
  int device = 0, count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return fail("no CUDA device");
  if (cudaGetDevice(&device) != cudaSuccess) return fail("cudaGetDevice failed");
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return fail("cudaGetDeviceProperties failed");
  if (prop.major < 8)
    return fail(fmt::format("{} is sm_{}{}; cuDNN's fused flash attention needs sm_80 or newer", prop.name, prop.major,
                            prop.minor));
  return true;
}

std::string cudnn_attention_version() {
  const std::size_t v = cudnnGetVersion();
  return fmt::format("cuDNN {}.{}.{} (frontend {}.{}.{})", v / 10000, (v % 10000) / 100, v % 100,
                     CUDNN_FRONTEND_MAJOR_VERSION, CUDNN_FRONTEND_MINOR_VERSION, CUDNN_FRONTEND_PATCH_VERSION);
}

struct CudnnAttention::Impl {
  cudnnHandle_t handle = nullptr;
  mutable std::mutex mu;  // virtual ranks may share one engine across threads
  std::unordered_map<Key, Built, KeyHash> cache;

  const Built& get(Direction dir, const AttentionShape& s, DType dtype, BlockMask mask, std::int64_t window) {
    Key k{dir, dtype, s.batch, s.seq_q, s.seq_k, s.heads, s.kv_heads, s.head_dim, mask, window,
          std::bit_cast<std::uint32_t>(static_cast<float>(ref::effective_scale(s)))};
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(k);
    if (it == cache.end()) it = cache.emplace(k, build(handle, k, s)).first;
    return it->second;
  }

  // The handle's stream is state: setting it and enqueueing must not interleave across threads.
  void execute(const Built& b, std::unordered_map<std::int64_t, void*>& pack, void* workspace, cudaStream_t stream,
               const char* what, const AttentionShape& s) {
    std::lock_guard<std::mutex> lock(mu);
    check_cudnn(cudnnSetStream(handle, stream), "cudnnSetStream");
    check_fe(b.graph->execute(handle, pack, workspace), what, s);
  }
};

namespace {

// The block's mask kind with its band: *window is the left bound the graph takes (0: none). A band
// that no pair of the block reaches beyond is dropped (a window of the block's span or more is the
// causal mask, bit for bit the same graph); a full block (wholly in the causal past) stays full when
// even its farthest pair is inside the band and becomes none when even its nearest is outside; a
// band through a full block is refused, as cuDNN measures the band from a diagonal the block lacks.
BlockMask supported_mask(const AttentionShape& s, DType dtype, std::int64_t* window) {
  io_type(dtype);
  if (s.head_dim % 8 != 0 || s.head_dim > 256)
    throw Error(fmt::format("cuDNN attention: head_dim {} is not supported; expected a multiple of 8 up to 256",
                            s.head_dim));
  const BlockMask m = classify_block_mask(s);
  if (m == BlockMask::general)
    throw Error(fmt::format("cuDNN attention: the causal mask with q_offset {} and k_offset {} (seq_q {}, seq_k {}) "
                            "cuts the block off its diagonal; cuDNN runs full, causal-aligned or fully masked "
                            "blocks only (ring steps are always one of these)",
                            s.q_offset, s.k_offset, s.seq_q, s.seq_k));
  *window = 0;
  if (s.window <= 0 || m == BlockMask::none) return m;
  const std::int64_t d = s.q_offset - s.k_offset;  // row i sees key j iff j - i <= d
  const std::int64_t farthest = d + s.seq_q - 1, nearest = d - (std::int64_t{s.seq_k} - 1);
  if (farthest < s.window) return m;  // every pair the causal mask keeps is inside the band
  if (m == BlockMask::full) {
    if (nearest >= s.window) return BlockMask::none;
    throw Error(fmt::format("cuDNN attention: sliding window {} cuts through a block wholly in the causal past "
                            "(q_offset {}, k_offset {}, seq_q {}, seq_k {}); cuDNN measures the band from the "
                            "block's diagonal, so only causal-aligned blocks take a window (Ulysses' and "
                            "all-gather's calls are)", s.window, s.q_offset, s.k_offset, s.seq_q, s.seq_k));
  }
  if (cudnnGetVersion() < kBackendWindowVersion)
    throw Error(fmt::format("cuDNN attention: sliding window {} needs cuDNN 9.2.0 or newer; {} is loaded", s.window,
                            cudnnGetVersion()));
  *window = s.window;
  return m;
}

std::size_t count(int b, int s, int h, int d) { return std::size_t(b) * std::size_t(s) * std::size_t(h) * std::size_t(d); }

}  // namespace

CudnnAttention::CudnnAttention() : impl_(std::make_unique<Impl>()) {
  std::string why;
  if (!cudnn_attention_available(&why)) throw Error("cuDNN attention engine unavailable: " + why);
  check_cudnn(cudnnCreate(&impl_->handle), "cudnnCreate");
}

CudnnAttention::~CudnnAttention() {
  if (impl_ && impl_->handle) cudnnDestroy(impl_->handle);
}

std::size_t CudnnAttention::forward_workspace_bytes(const AttentionShape& s, DType dtype) {
  std::int64_t w = 0;
  const BlockMask m = supported_mask(s, dtype, &w);
  if (m == BlockMask::none) return 0;
  return static_cast<std::size_t>(impl_->get(Direction::forward, s, dtype, m, w).workspace);
}

std::size_t CudnnAttention::backward_workspace_bytes(const AttentionShape& s, DType dtype) {
  std::int64_t w = 0;
  const BlockMask m = supported_mask(s, dtype, &w);
  if (m == BlockMask::none) return 0;
  return static_cast<std::size_t>(impl_->get(Direction::backward, s, dtype, m, w).workspace);
}

void CudnnAttention::forward(const AttentionShape& s, DType dtype, const void* q, const void* k, const void* v, void* o,
                             float* lse, void* workspace, cudaStream_t stream) {
  std::int64_t w = 0;
  const BlockMask m = supported_mask(s, dtype, &w);
  if (m == BlockMask::none) {
    fill_value(dtype, o, count(s.batch, s.seq_q, s.heads, s.head_dim), 0.f, stream);
    fill_value(DType::fp32, lse, count(s.batch, s.heads, s.seq_q, 1), -INFINITY, stream);
    return;
  }
  const Built& b = impl_->get(Direction::forward, s, dtype, m, w);
  std::unordered_map<std::int64_t, void*> pack = {{kQ, const_cast<void*>(q)}, {kK, const_cast<void*>(k)},
                                                  {kV, const_cast<void*>(v)}, {kO, o}, {kStats, lse}};
  impl_->execute(b, pack, workspace, stream, "forward", s);
}

void CudnnAttention::backward(const AttentionShape& s, DType dtype, const void* q, const void* k, const void* v,
                              const void* o, const float* lse, const void* dout, void* dq, void* dk, void* dv,
                              void* workspace, cudaStream_t stream) {
  std::int64_t w = 0;
  const BlockMask m = supported_mask(s, dtype, &w);
  if (m == BlockMask::none) {
    fill_value(dtype, dq, count(s.batch, s.seq_q, s.heads, s.head_dim), 0.f, stream);
    fill_value(dtype, dk, count(s.batch, s.seq_k, s.kv_heads, s.head_dim), 0.f, stream);
    fill_value(dtype, dv, count(s.batch, s.seq_k, s.kv_heads, s.head_dim), 0.f, stream);
    return;
  }
  const Built& b = impl_->get(Direction::backward, s, dtype, m, w);
  std::unordered_map<std::int64_t, void*> pack = {
      {kQ, const_cast<void*>(q)},  {kK, const_cast<void*>(k)}, {kV, const_cast<void*>(v)},
      {kO, const_cast<void*>(o)},  {kDO, const_cast<void*>(dout)}, {kStats, const_cast<float*>(lse)},
      {kDQ, dq},                   {kDK, dk},                    {kDV, dv}};
  impl_->execute(b, pack, workspace, stream, "backward", s);
}

std::size_t CudnnAttention::cached_graphs() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->cache.size();
}

}  // namespace seqpar::kernels

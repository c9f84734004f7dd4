// CUDA back end: cuBLAS GEMMs (bf16 operands, fp32 accumulation and C), seqpar's flash attention,
// LSE merge and Ulysses reshard kernels, and the layer ops (kernels/layer_ops.cuh), all on one
// compute stream that the communicators join. Mixed precision as autocast does it: the model keeps
// fp32 activations and master weights; each GEMM converts its two operands to bf16 copies and
// accumulates in fp32, and attention converts its inputs to bf16 (the flash kernels take bf16) and
// its outputs back. Validation on the GPU therefore compares the sharded step's error against an
// fp32 CPU reference with the unsharded step's (validation.hpp).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "seqpar/core/cuda_check.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/kernels/block_mask.hpp"
#include "seqpar/kernels/cublas_check.hpp"
#include "seqpar/kernels/cudnn_attention.hpp"
#include "seqpar/kernels/fill.cuh"
#include "seqpar/kernels/flash_attention.cuh"
#include "seqpar/kernels/layer_ops.cuh"
#include "seqpar/kernels/lse_merge.cuh"
#include "seqpar/kernels/reshard.cuh"
#include "seqpar/train/backend.hpp"

namespace seqpar::train {
namespace {

using kernels::DType;
namespace layer_ops = kernels::layer_ops;

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, kernels::AttentionEngine engine) : engine_(engine) {
    if (device >= 0) SEQPAR_CUDA_CHECK(cudaSetDevice(device));
    // On the device just chosen: the handle belongs to it.
    if (engine_ == kernels::AttentionEngine::cudnn) cudnn_ = std::make_unique<kernels::CudnnAttention>();
    SEQPAR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SEQPAR_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    SEQPAR_CUBLAS_CHECK(cublasCreate(&blas_));
    SEQPAR_CUBLAS_CHECK(cublasSetStream(blas_, stream_));
  }
  ~CudaBackend() override {
    for (Slot& s : scratch_) deallocate(s.p, s.bytes, s.category);
    cublasDestroy(blas_);
    cudaStreamDestroy(copy_stream_);
    cudaStreamDestroy(stream_);
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return "cuda"; }
  std::string_view attention_engine() const override { return kernels::to_string(engine_); }
  bool on_gpu() const override { return true; }
  Precision precision() const override { return Precision::bf16; }
  // fp32 stays refused: TF32 GEMMs would be possible, but attention has no fp32 kernel (the flash
  // kernels and cuDNN's run bf16), so an "fp32" GPU step would still not be the exact reference;
  // fp32 is the CPU back end's mode.
  void set_precision(Precision p) override {
    if (p != Precision::bf16)
      throw Error(fmt::format("--precision {}: the CUDA back end's attention kernels take bf16 only "
                              "(fp32 is the CPU back end's reference mode)", to_string(p)));
  }
  void* compute_stream() override { return stream_; }
  void* copy_stream() override { return copy_stream_; }

  // Checkpoint offload on copy_stream_, overlapping the compute stream; pinned host memory
  // (raw_host_allocate) keeps the copies asynchronous.
  CopyEvent copy_async(void* dst, const void* src, std::size_t bytes, CopyDirection dir) override {
    if (dir == CopyDirection::to_host) {  // the source is written by compute work queued so far
      cudaEvent_t written = make_event();
      SEQPAR_CUDA_CHECK(cudaEventRecord(written, stream_));
      SEQPAR_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, written, 0));
      cudaEventDestroy(written);  // released once the wait has run
    }
    if (bytes)
      SEQPAR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes,
                                        dir == CopyDirection::to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice,
                                        copy_stream_));
    cudaEvent_t done = make_event();
    SEQPAR_CUDA_CHECK(cudaEventRecord(done, copy_stream_));
    return CopyEvent(static_cast<void*>(done), [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
  }
  void compute_waits_for(const CopyEvent& e) override {
    if (e) SEQPAR_CUDA_CHECK(cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(e.get()), 0));
  }
  void host_waits_for(const CopyEvent& e) override {
    if (e) SEQPAR_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(e.get())));
  }

  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    if (!bytes) return;
    SEQPAR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    SEQPAR_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void copy_from_host(void* dst, const void* src, std::size_t bytes) override {
    if (!bytes) return;
    SEQPAR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    // The host buffer may be a temporary: wait until it has been read.
    SEQPAR_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) SEQPAR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  void zero(void* p, std::size_t bytes) override {
    if (bytes) SEQPAR_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
  }
  void synchronize() override { SEQPAR_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  // bf16 copies of A and B (grow-only slots, charged to working: they are the step's temporaries,
  // like autocast's casts), fp32 accumulation (CUBLAS_COMPUTE_32F) into the fp32 C.
  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
            float* c) override {
    const std::int64_t na = std::int64_t{m} * k, nb = std::int64_t{k} * n;
    auto* a16 = bf16(kGemmA, na, MemCategory::working);
    auto* b16 = bf16(kGemmB, nb, MemCategory::working);
    layer_ops::to_bf16(a16, a, na, stream_);
    layer_ops::to_bf16(b16, b, nb, stream_);
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
    SEQPAR_CUBLAS_CHECK(cublasGemmEx(blas_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                                     &alpha, b16, CUDA_R_16BF, tb ? k : n, a16, CUDA_R_16BF, ta ? m : k, &beta, c,
                                     CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  void add(float* y, const float* x, std::int64_t n) override { layer_ops::add(y, x, n, stream_); }
  void scale(float* x, float alpha, std::int64_t n) override { layer_ops::scale(x, alpha, n, stream_); }
  void embedding_forward(float* out, const int* tokens, const float* table, int t, int c) override {
    layer_ops::embedding_forward(out, tokens, table, t, c, stream_);
  }
  void embedding_backward(float* dtable, const float* dout, const int* tokens, int t, int c) override {
    layer_ops::embedding_backward(dtable, dout, tokens, t, c, stream_);
  }
  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int t, int c,
                       float eps) override {
    layer_ops::rmsnorm_forward(out, rstd, inp, w, t, c, eps, stream_);
  }
  void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                        const float* rstd, int t, int c) override {
    layer_ops::rmsnorm_backward(dinp, dw, dout, inp, w, rstd, t, c, stream_);
  }
  void rope(float* x, const int* pos, int t, int heads, int d, float theta, bool inverse) override {
    layer_ops::rope(x, pos, t, heads, d, theta, inverse, stream_);
  }
  void swiglu_forward(float* out, const float* gate, const float* up, std::int64_t n) override {
    layer_ops::swiglu_forward(out, gate, up, n, stream_);
  }
  void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                       std::int64_t n) override {
    layer_ops::swiglu_backward(dgate, dup, dout, gate, up, n, stream_);
  }
  void cross_entropy(float* losses, float* logits, const int* labels, int t, int v, float dscale) override {
    layer_ops::cross_entropy(losses, logits, labels, t, v, dscale, stream_);
  }
  void adamw(float* p, const float* g, float* m, float* v, std::int64_t n, float lr, float b1, float b2, float eps,
             float wd, int step) override {
    layer_ops::adamw(p, g, m, v, n, lr, b1, b2, eps, wd, step, stream_);
  }

  // On the cudnn engine each block runs by its kind (kernels::classify_block_mask): full and causal
  // blocks through cuDNN, a `none` block (no query sees a key) is written as its result without any
  // attention (SpAttention skips those before they get here), and a `general` block (a causal cut
  // off the block's diagonal) falls back to seqpar's kernel, which takes raw offsets. The
  // ring/zigzag layouts never produce a `general` block: their segments are equal chunks, so a
  // block is before, on or after the diagonal (tests/train/test_seq_layout.cpp checks every
  // layout's blocks).
  bool on_cudnn(const AttnShape& s, kernels::BlockMask* kind) const {
    if (engine_ != kernels::AttentionEngine::cudnn) return false;
    *kind = kernels::classify_block_mask(s);
    return *kind != kernels::BlockMask::general;
  }

  void attention_forward(const AttnShape& s, const float* q, const float* k, const float* v, float* o,
                         float* lse) override {
    const std::int64_t nq = q_elems(s), nk = k_elems(s);
    kernels::BlockMask kind = kernels::BlockMask::general;
    const bool cudnn = on_cudnn(s, &kind);
    if (cudnn && kind == kernels::BlockMask::none) {
      kernels::fill_value(DType::fp32, o, static_cast<std::size_t>(nq), 0.f, stream_);
      kernels::fill_value(DType::fp32, lse, static_cast<std::size_t>(s.batch) * s.heads * s.seq_q, -INFINITY,
                          stream_);
      return;
    }
    auto* q16 = bf16(0, nq);
    auto* k16 = bf16(1, nk);
    auto* v16 = bf16(2, nk);
    auto* o16 = bf16(3, nq);
    layer_ops::to_bf16(q16, q, nq, stream_);
    layer_ops::to_bf16(k16, k, nk, stream_);
    layer_ops::to_bf16(v16, v, nk, stream_);
    if (cudnn) {
      // The workspace comes from the scratch slots (slot 8 is the backward's), charged to attention_buffers.
      void* ws = slot(9, cudnn_->forward_workspace_bytes(s, DType::bf16));
      cudnn_->forward(s, DType::bf16, q16, k16, v16, o16, lse, ws, stream_);
    } else {
      kernels::flash_attention_forward(s, DType::bf16, q16, k16, v16, o16, lse, stream_);
    }
    layer_ops::from_bf16(o, o16, nq, stream_);
  }
  void attention_backward(const AttnShape& s, const float* q, const float* k, const float* v, const float* o,
                          const float* lse, const float* dout, float* dq, float* dk, float* dv) override {
    const std::int64_t nq = q_elems(s), nk = k_elems(s);
    kernels::BlockMask kind = kernels::BlockMask::general;
    const bool cudnn = on_cudnn(s, &kind);
    if (cudnn && kind == kernels::BlockMask::none) {
      zero(dq, static_cast<std::size_t>(nq) * sizeof(float));
      zero(dk, static_cast<std::size_t>(nk) * sizeof(float));
      zero(dv, static_cast<std::size_t>(nk) * sizeof(float));
      return;
    }
    auto* q16 = bf16(0, nq);
    auto* k16 = bf16(1, nk);
    auto* v16 = bf16(2, nk);
    auto* o16 = bf16(3, nq);
    auto* do16 = bf16(4, nq);
    auto* dq16 = bf16(5, nq);
    auto* dk16 = bf16(6, nk);
    auto* dv16 = bf16(7, nk);
    layer_ops::to_bf16(q16, q, nq, stream_);
    layer_ops::to_bf16(k16, k, nk, stream_);
    layer_ops::to_bf16(v16, v, nk, stream_);
    layer_ops::to_bf16(o16, o, nq, stream_);
    layer_ops::to_bf16(do16, dout, nq, stream_);
    // o and lse are what the caller passes: for a ring block the merged output and LSE of all
    // blocks (SpAttention::backward), which both engines take (P = exp(scale q k^T - lse)).
    if (cudnn) {
      void* ws = slot(8, cudnn_->backward_workspace_bytes(s, DType::bf16));
      cudnn_->backward(s, DType::bf16, q16, k16, v16, o16, lse, do16, dq16, dk16, dv16, ws, stream_);
    } else {
      void* ws = slot(8, kernels::flash_attention_backward_workspace_bytes(s));
      kernels::flash_attention_backward(s, DType::bf16, q16, k16, v16, o16, lse, do16, dq16, dk16, dv16, ws,
                                        stream_);
    }
    layer_ops::from_bf16(dq, dq16, nq, stream_);
    layer_ops::from_bf16(dk, dk16, nk, stream_);
    layer_ops::from_bf16(dv, dv16, nk, stream_);
  }
  void lse_merge(int batch, int seq_q, int heads, int d, float* o, float* lse, const float* o_part,
                 const float* lse_part) override {
    kernels::lse_merge(batch, seq_q, heads, d, DType::fp32, o, lse, DType::fp32, o_part, lse_part, stream_);
  }
  void ulysses_pack(int p, int b, int n, int h, int d, const float* in, float* out) override {
    kernels::ulysses_pack(p, b, n, h, d, DType::fp32, in, out, stream_);
  }
  void ulysses_unpack(int p, int b, int n, int h, int d, const float* in, float* out) override {
    kernels::ulysses_unpack(p, b, n, h, d, DType::fp32, in, out, stream_);
  }
  void ulysses_pack_reverse(int p, int b, int n, int h, int d, const float* in, float* out) override {
    kernels::ulysses_pack_reverse(p, b, n, h, d, DType::fp32, in, out, stream_);
  }
  void ulysses_unpack_reverse(int p, int b, int n, int h, int d, const float* in, float* out) override {
    kernels::ulysses_unpack_reverse(p, b, n, h, d, DType::fp32, in, out, stream_);
  }
  void ulysses_pack_qkv(int p, int b, int n, int h, int kv, int d, const float* q, const float* k, const float* v,
                        float* out) override {
    kernels::ulysses_pack_qkv(p, b, n, h, kv, d, DType::fp32, q, k, v, out, stream_);
  }
  void ulysses_unpack_qkv(int p, int b, int n, int h, int kv, int d, const float* in, float* q, float* k,
                          float* v) override {
    kernels::ulysses_unpack_qkv(p, b, n, h, kv, d, DType::fp32, in, q, k, v, stream_);
  }
  void ulysses_pack_qkv_reverse(int p, int b, int n, int h, int kv, int d, const float* dq, const float* dk,
                                const float* dv, float* out) override {
    kernels::ulysses_pack_qkv_reverse(p, b, n, h, kv, d, DType::fp32, dq, dk, dv, out, stream_);
  }
  void ulysses_unpack_qkv_reverse(int p, int b, int n, int h, int kv, int d, const float* in, float* dq,
                                  float* dk, float* dv) override {
    kernels::ulysses_unpack_qkv_reverse(p, b, n, h, kv, d, DType::fp32, in, dq, dk, dv, stream_);
  }
  void replicate_kv_heads(int rep, int b, int n, int kv, int d, const float* in, float* out) override {
    kernels::replicate_kv_heads(rep, b, n, kv, d, DType::fp32, in, out, stream_);
  }
  void reduce_kv_heads(int rep, int b, int n, int kv, int d, const float* in, float* out) override {
    kernels::reduce_kv_heads(rep, b, n, kv, d, DType::fp32, in, out, stream_);
  }

 private:
  struct Slot {
    void* p = nullptr;
    std::int64_t bytes = 0;
    MemCategory category = MemCategory::attention_buffers;
  };
  // Slots 0-7: attention's bf16 copies; 8, 9: its backward and forward workspaces; then the GEMM's
  // two bf16 operands.
  static constexpr std::size_t kGemmA = 10, kGemmB = 11;

  // Grow-only scratch for the bf16 copies and the attention workspaces, charged to category c
  // (attention_buffers for attention's, working for the GEMM operands').
  void* slot(std::size_t i, std::size_t bytes, MemCategory c = MemCategory::attention_buffers) {
    if (scratch_.size() <= i) scratch_.resize(i + 1);
    Slot& s = scratch_[i];
    const auto need = static_cast<std::int64_t>((bytes + 255) / 256 * 256);
    if (s.bytes < need) {
      synchronize();  // an earlier launch may still read the old buffer
      deallocate(s.p, s.bytes, s.category);
      s.p = allocate(need, c);
      s.bytes = need;
      s.category = c;
    }
    return s.p;
  }
  std::uint16_t* bf16(std::size_t i, std::int64_t elems, MemCategory c = MemCategory::attention_buffers) {
    return static_cast<std::uint16_t*>(slot(i, static_cast<std::size_t>(elems) * 2, c));
  }

  void* raw_allocate(std::size_t bytes) override {
    void* p = nullptr;
    SEQPAR_CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
  }
  void raw_free(void* p) noexcept override {
    // Frees happen while work using other buffers may be queued; cudaFree synchronises the device.
    cudaFree(p);
  }
  void* raw_host_allocate(std::size_t bytes) override {
    void* p = nullptr;
    SEQPAR_CUDA_CHECK(cudaMallocHost(&p, bytes));
    return p;
  }
  void raw_host_free(void* p) noexcept override { cudaFreeHost(p); }
  static cudaEvent_t make_event() {
    cudaEvent_t e = nullptr;
    SEQPAR_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }

  kernels::AttentionEngine engine_;
  std::unique_ptr<kernels::CudnnAttention> cudnn_;  // the cuDNN handle and plan cache (cudnn engine only)
  cudaStream_t stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;  // checkpoint offload copies
  cublasHandle_t blas_ = nullptr;
  std::vector<Slot> scratch_;
};

}  // namespace

bool cuda_backend_built() { return true; }

std::unique_ptr<Backend> make_cuda_backend(int device, std::optional<kernels::AttentionEngine> engine) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0)
    throw Error(fmt::format("--backend cuda: no usable CUDA device ({})",
                            e != cudaSuccess ? cudaGetErrorString(e) : "0 devices"));
  if (device >= count)
    throw Error(fmt::format("--backend cuda: device {} does not exist ({} devices)", device, count));
  if (device >= 0) SEQPAR_CUDA_CHECK(cudaSetDevice(device));  // the availability is the device's
  const kernels::AttentionEngine chosen =
      kernels::choose_attention_engine(engine, kernels::attention_engine_availability(), "--attention");
  return std::make_unique<CudaBackend>(device, chosen);
}

}  // namespace seqpar::train

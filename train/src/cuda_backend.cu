// CUDA back end: cuBLASLt GEMMs (bf16 operands, fp32 accumulation, fp32 or bf16 C), the attention
// engines (seqpar's flash kernels or cuDNN), LSE merge and Ulysses reshard kernels, and the layer
// ops (kernels/layer_ops.cuh), all on one compute stream that the communicators join.
// Mixed precision: the model stores activations and their gradients in bf16 (Ref views carry the
// type); every op loads them, computes in fp32 and rounds to nearest-even when it stores bf16.
// Master weights, their gradients, the AdamW moments, rstd, LSE and losses stay fp32, and AdamW
// writes the bf16 copy of the weights the GEMMs read in the same pass. fp32 views are accepted
// too (tests, fp32 callers): a GEMM or attention input in fp32 is rounded into a bf16 scratch copy
// and an fp32 attention output converted back, since cuBLAS runs bf16 operands here and both
// attention engines take bf16 only. Validation on the GPU therefore compares the sharded step's
// error against an fp32 CPU reference with the unsharded step's (validation.hpp).
// GEMM path: cuBLASLt (kernels::CublasLtGemm, plans cached per shape) by default; the environment
// variable SEQPAR_GEMM=gemmex, read once when the back end is made, selects cublasGemmEx instead (to
// compare the two while tuning; SEQPAR_GEMM=lt or unset is the default). No cuBLASLt epilogue applies
// to this model: the Llama block has no bias, and SwiGLU joins two GEMM outputs (gate and up), which
// no single GEMM's epilogue sees; the wrapper's bias epilogue stays ready for a model with biases.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "seqpar/core/cuda_check.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/kernels/block_mask.hpp"
#include "seqpar/kernels/cublas_check.hpp"
#include "seqpar/kernels/cublas_gemm.hpp"
#include "seqpar/kernels/cublaslt_gemm.hpp"
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
    blas_ = std::make_unique<kernels::CublasHandle>(stream_);
    if (!gemmex_) blas_lt_ = std::make_unique<kernels::CublasLtGemm>(stream_);
    // The step allocates and frees its buffers layer by layer; cudaMalloc/cudaFree would
    // synchronise the device at every free. Stream-ordered allocation from the device's pool, kept
    // cached across synchronisations (no release threshold), reuses freed memory in stream order,
    // as PyTorch's caching allocator does.
    int dev = 0;
    SEQPAR_CUDA_CHECK(cudaGetDevice(&dev));
    SEQPAR_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool_, dev));
    std::uint64_t keep = UINT64_MAX;
    SEQPAR_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep));
  }
  ~CudaBackend() override {
    for (Slot& s : scratch_) deallocate(s.p, s.bytes, s.category);
    cudaStreamSynchronize(stream_);  // the frees above are queued on it
    blas_lt_.reset();  // before its stream (its workspace is freed with it)
    blas_.reset();
    cudaStreamDestroy(copy_stream_);
    cudaStreamDestroy(stream_);
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return "cuda"; }
  std::string_view attention_engine() const override { return kernels::to_string(engine_); }
  std::string_view gemm_library() const override { return gemmex_ ? "cublasGemmEx" : "cublasLt"; }
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
    {
      // To the host: the source is written by compute work queued so far. To the device: the
      // destination was allocated in the compute stream's order (its memory may have been freed by
      // work still queued there). Either way the copy starts after the compute queued so far.
      cudaEvent_t queued = make_event();
      SEQPAR_CUDA_CHECK(cudaEventRecord(queued, stream_));
      SEQPAR_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, queued, 0));
      cudaEventDestroy(queued);  // released once the wait has run
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

  // GEMM operands in bf16: a bf16 view as it is, an fp32 one rounded into a grow-only slot
  // (charged to working: a step temporary, like autocast's casts). C is fp32 or bf16 (rounded once,
  // after alpha and beta); products accumulate in fp32 (CUBLAS_COMPUTE_32F, no reduced-precision
  // split-K reductions: kernels::CublasHandle, kernels::CublasLtGemm). cuBLASLt by default, in place
  // (D = C); cublasGemmEx with SEQPAR_GEMM=gemmex (file header).
  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, CRef a, CRef b, float beta, Ref c) override {
    const void* a16 = as_bf16(a, std::int64_t{m} * k, kGemmA, MemCategory::working, "gemm", "A");
    const void* b16 = as_bf16(b, std::int64_t{k} * n, kGemmB, MemCategory::working, "gemm", "B");
    const cudaDataType_t c_type = act_type("gemm", {c.t}) == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
    if (blas_lt_) {
      kernels::GemmShape s;
      s.op = "cuda gemm";  // short: no allocation per call
      s.m = m, s.n = n, s.k = k, s.trans_a = ta, s.trans_b = tb;
      blas_lt_->matmul(s, alpha, a16, b16, beta, c.p, c.p, c_type);
      return;
    }
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
    SEQPAR_CUBLAS_CHECK(cublasGemmEx(blas_->get(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n,
                                     m, k, &alpha, b16, CUDA_R_16BF, tb ? k : n, a16, CUDA_R_16BF, ta ? m : k, &beta,
                                     c.p, c_type, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  // add and convert take any mix of fp32 and bf16; every other layer op one type for all its views.
  void add(Ref y, CRef x, std::int64_t n) override { layer_ops::add(y.t, y.p, x.t, x.p, n, stream_); }
  void scale(Ref x, float alpha, std::int64_t n) override { layer_ops::scale(x.t, x.p, alpha, n, stream_); }
  void fill(float* x, float value, std::int64_t n) override {
    if (n > 0) kernels::fill_value(DType::fp32, x, static_cast<std::size_t>(n), value, stream_);
  }
  void convert(Ref out, CRef in, std::int64_t n) override { layer_ops::convert(out.t, out.p, in.t, in.p, n, stream_); }
  void embedding_forward(Ref out, const int* tokens, const float* table, int t, int c) override {
    layer_ops::embedding_forward(out.t, out.p, tokens, table, t, c, stream_);
  }
  void embedding_backward(float* dtable, CRef dout, const int* tokens, int t, int c) override {
    layer_ops::embedding_backward(dtable, dout.t, dout.p, tokens, t, c, stream_);
  }
  void rmsnorm_forward(Ref out, float* rstd, CRef inp, const float* w, int t, int c, float eps) override {
    const DType ty = act_type("rmsnorm_forward", {out.t, inp.t});
    layer_ops::rmsnorm_forward(ty, out.p, rstd, inp.p, w, t, c, eps, stream_);
  }
  void rmsnorm_backward(Ref dinp, float* dw, CRef dout, CRef inp, const float* w, const float* rstd, int t,
                        int c) override {
    const DType ty = act_type("rmsnorm_backward", {dinp.t, dout.t, inp.t});
    layer_ops::rmsnorm_backward(ty, dinp.p, dw, dout.p, inp.p, w, rstd, t, c, stream_);
  }
  void rope(Ref x, const int* pos, int t, int heads, int d, float theta, bool inverse) override {
    layer_ops::rope(x.t, x.p, pos, t, heads, d, theta, inverse, stream_);
  }
  void swiglu_forward(Ref out, CRef gate, CRef up, std::int64_t n) override {
    const DType ty = act_type("swiglu_forward", {out.t, gate.t, up.t});
    layer_ops::swiglu_forward(ty, out.p, gate.p, up.p, n, stream_);
  }
  void swiglu_backward(Ref dgate, Ref dup, CRef dout, CRef gate, CRef up, std::int64_t n) override {
    const DType ty = act_type("swiglu_backward", {dgate.t, dup.t, dout.t, gate.t, up.t});
    layer_ops::swiglu_backward(ty, dgate.p, dup.p, dout.p, gate.p, up.p, n, stream_);
  }
  void cross_entropy(float* losses, Ref logits, const int* labels, int t, int v, float dscale) override {
    layer_ops::cross_entropy(losses, logits.t, logits.p, labels, t, v, dscale, stream_);
  }
  void adamw(float* p, const float* g, float* m, float* v, std::int64_t n, float lr, float b1, float b2, float eps,
             float wd, int step, Ref param_bf16) override {
    if (param_bf16.p != nullptr && param_bf16.t != DType::bf16)
      throw Error(fmt::format("cuda back end: adamw: the parameter copy must be a bf16 view, got {}",
                              to_string(param_bf16.t)));
    layer_ops::adamw(p, g, m, v, n, lr, b1, b2, eps, wd, step, static_cast<std::uint16_t*>(param_bf16.p), stream_);
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

  // Both engines take bf16: bf16 views go to them as they are; an fp32 input is rounded into a
  // slot and an fp32 output is written to a slot and converted back (the fp32 callers: tests).
  void attention_forward(const AttnShape& s, CRef q, CRef k, CRef v, Ref o, float* lse) override {
    act_type("attention_forward", {q.t, k.t, v.t, o.t}, /*same=*/false);
    const std::int64_t nq = q_elems(s), nk = k_elems(s);
    kernels::BlockMask kind = kernels::BlockMask::general;
    const bool cudnn = on_cudnn(s, &kind);
    if (cudnn && kind == kernels::BlockMask::none) {
      kernels::fill_value(o.t, o.p, static_cast<std::size_t>(nq), 0.f, stream_);
      kernels::fill_value(DType::fp32, lse, static_cast<std::size_t>(s.batch) * s.heads * s.seq_q, -INFINITY,
                          stream_);
      return;
    }
    const void* q16 = as_bf16(q, nq, 0, MemCategory::attention_buffers, "attention_forward", "q");
    const void* k16 = as_bf16(k, nk, 1, MemCategory::attention_buffers, "attention_forward", "k");
    const void* v16 = as_bf16(v, nk, 2, MemCategory::attention_buffers, "attention_forward", "v");
    void* o16 = out_bf16(o, nq, 3);
    if (cudnn) {
      // The workspace comes from the scratch slots (slot 8 is the backward's), charged to attention_buffers.
      void* ws = slot(9, cudnn_->forward_workspace_bytes(s, DType::bf16));
      cudnn_->forward(s, DType::bf16, q16, k16, v16, o16, lse, ws, stream_);
    } else {
      kernels::flash_attention_forward(s, DType::bf16, q16, k16, v16, o16, lse, stream_);
    }
    if (o16 != o.p) layer_ops::convert(o.t, o.p, DType::bf16, o16, nq, stream_);
  }
  void attention_backward(const AttnShape& s, CRef q, CRef k, CRef v, CRef o, const float* lse, CRef dout, Ref dq,
                          Ref dk, Ref dv) override {
    act_type("attention_backward", {q.t, k.t, v.t, o.t, dout.t, dq.t, dk.t, dv.t}, /*same=*/false);
    const std::int64_t nq = q_elems(s), nk = k_elems(s);
    kernels::BlockMask kind = kernels::BlockMask::general;
    const bool cudnn = on_cudnn(s, &kind);
    if (cudnn && kind == kernels::BlockMask::none) {
      zero(dq.p, static_cast<std::size_t>(nq) * dtype_size(dq.t));
      zero(dk.p, static_cast<std::size_t>(nk) * dtype_size(dk.t));
      zero(dv.p, static_cast<std::size_t>(nk) * dtype_size(dv.t));
      return;
    }
    const MemCategory ab = MemCategory::attention_buffers;
    const void* q16 = as_bf16(q, nq, 0, ab, "attention_backward", "q");
    const void* k16 = as_bf16(k, nk, 1, ab, "attention_backward", "k");
    const void* v16 = as_bf16(v, nk, 2, ab, "attention_backward", "v");
    const void* o16 = as_bf16(o, nq, 3, ab, "attention_backward", "o");
    const void* do16 = as_bf16(dout, nq, 4, ab, "attention_backward", "dout");
    void* dq16 = out_bf16(dq, nq, 5);
    void* dk16 = out_bf16(dk, nk, 6);
    void* dv16 = out_bf16(dv, nk, 7);
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
    if (dq16 != dq.p) layer_ops::convert(dq.t, dq.p, DType::bf16, dq16, nq, stream_);
    if (dk16 != dk.p) layer_ops::convert(dk.t, dk.p, DType::bf16, dk16, nk, stream_);
    if (dv16 != dv.p) layer_ops::convert(dv.t, dv.p, DType::bf16, dv16, nk, stream_);
  }
  // Each side in its own type (the running o is often fp32, a part bf16).
  void lse_merge(int batch, int seq_q, int heads, int d, Ref o, float* lse, CRef o_part,
                 const float* lse_part) override {
    kernels::lse_merge(batch, seq_q, heads, d, o.t, o.p, lse, o_part.t, o_part.p, lse_part, stream_);
  }
  // The reshards permute elements: one type in and out.
  void ulysses_pack(int p, int b, int n, int h, int d, CRef in, Ref out) override {
    kernels::ulysses_pack(p, b, n, h, d, same_type("ulysses_pack", {in.t, out.t}), in.p, out.p, stream_);
  }
  void ulysses_unpack(int p, int b, int n, int h, int d, CRef in, Ref out) override {
    kernels::ulysses_unpack(p, b, n, h, d, same_type("ulysses_unpack", {in.t, out.t}), in.p, out.p, stream_);
  }
  void ulysses_pack_reverse(int p, int b, int n, int h, int d, CRef in, Ref out) override {
    kernels::ulysses_pack_reverse(p, b, n, h, d, same_type("ulysses_pack_reverse", {in.t, out.t}), in.p, out.p,
                                  stream_);
  }
  void ulysses_unpack_reverse(int p, int b, int n, int h, int d, CRef in, Ref out) override {
    kernels::ulysses_unpack_reverse(p, b, n, h, d, same_type("ulysses_unpack_reverse", {in.t, out.t}), in.p, out.p,
                                    stream_);
  }
  void ulysses_pack_qkv(int p, int b, int n, int h, int kv, int d, CRef q, CRef k, CRef v, Ref out) override {
    const DType t = same_type("ulysses_pack_qkv", {q.t, k.t, v.t, out.t});
    kernels::ulysses_pack_qkv(p, b, n, h, kv, d, t, q.p, k.p, v.p, out.p, stream_);
  }
  void ulysses_unpack_qkv(int p, int b, int n, int h, int kv, int d, CRef in, Ref q, Ref k, Ref v) override {
    const DType t = same_type("ulysses_unpack_qkv", {in.t, q.t, k.t, v.t});
    kernels::ulysses_unpack_qkv(p, b, n, h, kv, d, t, in.p, q.p, k.p, v.p, stream_);
  }
  void ulysses_pack_qkv_reverse(int p, int b, int n, int h, int kv, int d, CRef dq, CRef dk, CRef dv,
                                Ref out) override {
    const DType t = same_type("ulysses_pack_qkv_reverse", {dq.t, dk.t, dv.t, out.t});
    kernels::ulysses_pack_qkv_reverse(p, b, n, h, kv, d, t, dq.p, dk.p, dv.p, out.p, stream_);
  }
  void ulysses_unpack_qkv_reverse(int p, int b, int n, int h, int kv, int d, CRef in, Ref dq, Ref dk,
                                  Ref dv) override {
    const DType t = same_type("ulysses_unpack_qkv_reverse", {in.t, dq.t, dk.t, dv.t});
    kernels::ulysses_unpack_qkv_reverse(p, b, n, h, kv, d, t, in.p, dq.p, dk.p, dv.p, stream_);
  }
  void replicate_kv_heads(int rep, int b, int n, int kv, int d, CRef in, Ref out) override {
    kernels::replicate_kv_heads(rep, b, n, kv, d, same_type("replicate_kv_heads", {in.t, out.t}), in.p, out.p,
                                stream_);
  }
  void reduce_kv_heads(int rep, int b, int n, int kv, int d, CRef in, Ref out) override {
    kernels::reduce_kv_heads(rep, b, n, kv, d, same_type("reduce_kv_heads", {in.t, out.t}), in.p, out.p, stream_);
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
  void* bf16_slot(std::size_t i, std::int64_t elems, MemCategory c = MemCategory::attention_buffers) {
    return slot(i, static_cast<std::size_t>(elems) * 2, c);
  }
  // x as bf16: itself when it is bf16, else its rounded copy in slot i.
  const void* as_bf16(CRef x, std::int64_t elems, std::size_t i, MemCategory c, const char* op, const char* what) {
    if (x.t == DType::bf16) return x.p;
    if (x.t != DType::fp32)
      throw Error(fmt::format("cuda back end: {}: {} is {}; views are fp32 or bf16", op, what, to_string(x.t)));
    void* copy = bf16_slot(i, elems, c);
    layer_ops::convert(DType::bf16, copy, DType::fp32, x.p, elems, stream_);
    return copy;
  }
  // Where a bf16 result for out goes: out itself when it is bf16, else slot i (the caller converts).
  void* out_bf16(Ref out, std::int64_t elems, std::size_t i) {
    return out.t == DType::bf16 ? out.p : bf16_slot(i, elems);
  }
  // The activation type of an op's views: each fp32 or bf16 and, when `same`, all one type;
  // otherwise seqpar::Error naming the op and the types.
  static DType act_type(const char* op, std::initializer_list<DType> types, bool same = true) {
    for (DType t : types)
      if (t != DType::fp32 && t != DType::bf16)
        throw Error(fmt::format("cuda back end: {}: activation views are fp32 or bf16, got {}", op, to_string(t)));
    return same ? same_type(op, types) : *types.begin();
  }
  // The one element type of an op's views (seqpar::Error naming the op and the types when they differ).
  static DType same_type(const char* op, std::initializer_list<DType> types) {
    const DType first = *types.begin();
    for (DType t : types)
      if (t != first) {
        std::string names;
        for (DType u : types) names += fmt::format("{}{}", names.empty() ? "" : ", ", to_string(u));
        throw Error(fmt::format("cuda back end: {}: the views must share one element type, got {}", op, names));
      }
    return first;
  }

  // Stream-ordered on the compute stream (see the constructor). Every user of a buffer is ordered
  // after its allocation: compute and NCCL run on stream_, the copy stream waits for it
  // (copy_async), and host-side communicators synchronise stream_ before they touch device memory.
  void* raw_allocate(std::size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaMallocAsync(&p, bytes, stream_);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();        // clear it: running out is reported by Backend::allocate
      throw std::bad_alloc();
    }
    SEQPAR_CUDA_CHECK(e);
    return p;
  }
  void raw_free(void* p) noexcept override {
    // Returned to the pool once the work queued on stream_ so far (the buffer's last users) is done.
    cudaFreeAsync(p, stream_);
  }
  void* raw_host_allocate(std::size_t bytes) override {
    void* p = nullptr;
    SEQPAR_CUDA_CHECK(cudaMallocHost(&p, bytes));
    return p;
  }
  void raw_host_free(void* p) noexcept override { cudaFreeHost(p); }
  // SEQPAR_GEMM: unset, empty or "lt" selects cuBLASLt, "gemmex" cublasGemmEx; anything else is an error.
  static bool gemmex_selected() {
    const char* v = std::getenv("SEQPAR_GEMM");
    const std::string value = v ? v : "";
    if (value.empty() || value == "lt") return false;
    if (value == "gemmex") return true;
    throw Error(fmt::format("SEQPAR_GEMM={}: unknown GEMM path; use lt (cuBLASLt, the default) or gemmex "
                            "(cublasGemmEx)", value));
  }
  static cudaEvent_t make_event() {
    cudaEvent_t e = nullptr;
    SEQPAR_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }

  kernels::AttentionEngine engine_;
  std::unique_ptr<kernels::CudnnAttention> cudnn_;  // the cuDNN handle and plan cache (cudnn engine only)
  cudaStream_t stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;  // checkpoint offload copies
  cudaMemPool_t pool_ = nullptr;         // the device's default pool, which raw_allocate draws from
  std::unique_ptr<kernels::CublasHandle> blas_;  // on stream_, reduced-precision reductions disallowed
  const bool gemmex_ = gemmex_selected();          // SEQPAR_GEMM=gemmex: cublasGemmEx instead of cuBLASLt
  std::unique_ptr<kernels::CublasLtGemm> blas_lt_;  // on stream_; null when gemmex_
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

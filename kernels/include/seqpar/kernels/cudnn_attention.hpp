// The production attention engine: cuDNN's fused flash attention through the cuDNN frontend's
// graph API. Forward with the softmax statistics (the LSE), backward from them; causal or not;
// GQA; bf16/fp16; the same layouts and AttentionShape as seqpar's own kernels (flash_attention.cuh),
// so the two engines are interchangeable. Each graph is built once per shape and cached.
// Host-callable from plain C++; in a build without cuDNN every call throws seqpar::Error saying why.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

#include "seqpar/kernels/attention_ref.hpp"
#include "seqpar/kernels/block_mask.hpp"
#include "seqpar/kernels/dtype.hpp"

namespace seqpar::kernels {

// True when this build has the cuDNN engine and the cuDNN library it loads can run it on the
// current device; otherwise false with the reason in *why.
bool cudnn_attention_available(std::string* why = nullptr);

// "cuDNN 9.19.0 (frontend 1.32.0)" or "absent: <why>".
std::string cudnn_attention_version();

// Masks: the shape's causal mask with global offsets must be one of the BlockMask kinds full,
// causal_top, causal_bottom or none (ring steps always are); `general` throws. A `none` block
// writes o = 0, lse = -inf (forward) and dq = dk = dv = 0 (backward) without calling cuDNN.
class CudnnAttention {
 public:
  CudnnAttention();  // a cuDNN handle on the current device; throws seqpar::Error when absent
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Device workspace the call needs (builds and caches the graph on first use).
  std::size_t forward_workspace_bytes(const ref::AttentionShape& s, DType dtype);
  std::size_t backward_workspace_bytes(const ref::AttentionShape& s, DType dtype);

  // As flash_attention_forward: o [batch, seq_q, heads, head_dim] in dtype, lse [batch, heads,
  // seq_q] fp32 natural log. `workspace` holds forward_workspace_bytes(s, dtype) bytes.
  void forward(const ref::AttentionShape& s, DType dtype, const void* q, const void* k, const void* v,
               void* o, float* lse, void* workspace, cudaStream_t stream = nullptr);

  // As flash_attention_backward: OVERWRITES dq, dk, dv; o and lse may be the merged output and
  // LSE of a ring (P is recomputed as exp(scale q k^T - lse)).
  void backward(const ref::AttentionShape& s, DType dtype, const void* q, const void* k, const void* v,
                const void* o, const float* lse, const void* dout, void* dq, void* dk, void* dv,
                void* workspace, cudaStream_t stream = nullptr);

  // Graphs built so far (one per direction, shape, dtype and mask).
  std::size_t cached_graphs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace seqpar::kernels

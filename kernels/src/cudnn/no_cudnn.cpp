// The cuDNN engine in a build without cuDNN or its frontend headers: every entry point says why.
#include "seqpar/core/error.hpp"
#include "seqpar/kernels/cudnn_attention.hpp"

#ifndef SEQPAR_NO_CUDNN_REASON
#define SEQPAR_NO_CUDNN_REASON "this build has no cuDNN"
#endif

namespace seqpar::kernels {

namespace {
[[noreturn]] void absent() { throw Error("cuDNN attention engine unavailable: " SEQPAR_NO_CUDNN_REASON); }
}  // namespace

bool cudnn_attention_available(std::string* why) {
  if (why) *why = SEQPAR_NO_CUDNN_REASON;
  return false;
}
std::string cudnn_attention_version() { return "absent: " SEQPAR_NO_CUDNN_REASON; }

struct CudnnAttention::Impl {};
CudnnAttention::CudnnAttention() { absent(); }
CudnnAttention::~CudnnAttention() = default;
std::size_t CudnnAttention::forward_workspace_bytes(const ref::AttentionShape&, DType) { absent(); }
std::size_t CudnnAttention::backward_workspace_bytes(const ref::AttentionShape&, DType) { absent(); }
void CudnnAttention::forward(const ref::AttentionShape&, DType, const void*, const void*, const void*, void*, float*,
                             void*, cudaStream_t) {
  absent();
}
void CudnnAttention::backward(const ref::AttentionShape&, DType, const void*, const void*, const void*, const void*,
                              const float*, const void*, void*, void*, void*, void*, cudaStream_t) {
  absent();
}
std::size_t CudnnAttention::cached_graphs() const { return 0; }

}  // namespace seqpar::kernels

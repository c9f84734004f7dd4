#include "device_ops.hpp"

#include <cstring>

#include "seqpar/core/error.hpp"

#ifdef SEQPAR_HAVE_CUDA
#include <cuda_runtime.h>

#include "seqpar/core/cuda_check.hpp"
#endif

namespace seqpar::comm::detail {

#ifdef SEQPAR_HAVE_CUDA

void copy_sync(void* dst, const void* src, std::size_t bytes, bool on_gpu) {
  if (bytes == 0) return;
  if (!on_gpu) {
    std::memcpy(dst, src, bytes);
    return;
  }
  // cudaMemcpy may return before a device-to-device copy is done; callers rely on completion.
  SEQPAR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, nullptr));
  SEQPAR_CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

void copy_async(void* dst, const void* src, std::size_t bytes, void* stream) {
  if (bytes == 0) return;
  SEQPAR_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)));
}

void sync_stream(void* stream) {
  SEQPAR_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

void* create_stream() {
  cudaStream_t s = nullptr;
  SEQPAR_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

void destroy_stream(void* stream) noexcept {
  if (stream) cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}

void* record_event(void* stream) {
  cudaEvent_t ev = nullptr;
  SEQPAR_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  cudaError_t err = cudaEventRecord(ev, static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) {
    cudaEventDestroy(ev);
    SEQPAR_CUDA_CHECK(err);
  }
  return ev;
}

void stream_wait_event(void* stream, void* event) {
  SEQPAR_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream),
                                        static_cast<cudaEvent_t>(event), 0));
}

void destroy_event(void* event) noexcept {
  if (event) cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

#else

namespace {
[[noreturn]] void no_cuda() { throw Error("GPU buffers need a CUDA build of seqpar"); }
}  // namespace

void copy_sync(void* dst, const void* src, std::size_t bytes, bool on_gpu) {
  if (on_gpu) no_cuda();
  if (bytes) std::memcpy(dst, src, bytes);
}
void copy_async(void*, const void*, std::size_t, void*) { no_cuda(); }
void sync_stream(void*) { no_cuda(); }
void* create_stream() { no_cuda(); }
void destroy_stream(void*) noexcept {}
void* record_event(void*) { no_cuda(); }
void stream_wait_event(void*, void*) { no_cuda(); }
void destroy_event(void*) noexcept {}

#endif

}  // namespace seqpar::comm::detail

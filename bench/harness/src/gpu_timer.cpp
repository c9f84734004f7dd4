#include "seqpar/bench/gpu_timer.hpp"

#include "seqpar/core/cuda_check.hpp"

namespace seqpar::bench {

GpuTimer::GpuTimer(cudaStream_t stream) : stream_(stream) {
  SEQPAR_CUDA_CHECK(cudaEventCreate(&begin_));
  SEQPAR_CUDA_CHECK(cudaEventCreate(&end_));
}

GpuTimer::~GpuTimer() {
  cudaEventDestroy(begin_);
  cudaEventDestroy(end_);
}

void GpuTimer::settle() { SEQPAR_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void GpuTimer::start() { SEQPAR_CUDA_CHECK(cudaEventRecord(begin_, stream_)); }

double GpuTimer::stop_seconds() {
  SEQPAR_CUDA_CHECK(cudaEventRecord(end_, stream_));
  SEQPAR_CUDA_CHECK(cudaEventSynchronize(end_));
  float ms = 0;
  SEQPAR_CUDA_CHECK(cudaEventElapsedTime(&ms, begin_, end_));
  return static_cast<double>(ms) * 1e-3;
}

TimerFactory gpu_timers(cudaStream_t stream) {
  return [stream] { return std::make_unique<GpuTimer>(stream); };
}

}  // namespace seqpar::bench

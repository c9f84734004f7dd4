// CUDA-event timing of a region on one stream, for manual timing (Google Benchmark's
// UseManualTime, nccl-tests-style loops). Only for CUDA builds.
#pragma once
#include <cuda_runtime.h>

namespace seqpar::bench {

class GpuTimer {
 public:
  explicit GpuTimer(cudaStream_t stream = nullptr);
  ~GpuTimer();
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;
  void start();
  // Records the stop event, waits for it, and returns the elapsed seconds.
  double stop_seconds();

 private:
  cudaStream_t stream_;
  cudaEvent_t begin_{}, end_{};
};

}  // namespace seqpar::bench

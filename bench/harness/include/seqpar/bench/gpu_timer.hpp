// CUDA-event timing of a region on one stream, for manual timing (Google Benchmark's
// UseManualTime, nccl-tests-style loops). Only for CUDA builds.
#pragma once
#include <cuda_runtime.h>

#include "seqpar/bench/timer.hpp"

namespace seqpar::bench {

class GpuTimer final : public Timer {
 public:
  explicit GpuTimer(cudaStream_t stream = nullptr);
  ~GpuTimer() override;
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;
  // Synchronizes the stream.
  void settle() override;
  void start() override;
  // Records the stop event, waits for it, and returns the elapsed seconds.
  double stop_seconds() override;

 private:
  cudaStream_t stream_;
  cudaEvent_t begin_{}, end_{};
};

// The harness's timers for work launched on `stream` (the Recorder's TimerFactory).
TimerFactory gpu_timers(cudaStream_t stream = nullptr);

}  // namespace seqpar::bench

// How the benchmark harness times one launch. The timing source is kept apart from the Recorder
// (gbench_harness.hpp) so that the recording, statistics and JSON path runs, and is tested, on a
// host without a GPU: the GPU programs time with CUDA events (gpu_timer.hpp: gpu_timers()), the
// host tests with std::chrono::steady_clock (host_timers()) or a timer of their own.
#pragma once
#include <chrono>
#include <functional>
#include <memory>

namespace seqpar::bench {

class Timer {
 public:
  virtual ~Timer() = default;
  // Waits until all work launched so far has finished, so the warm-up launches never run into the
  // first timed one.
  virtual void settle() = 0;
  virtual void start() = 0;
  // The seconds taken by the work launched since start(), waiting for it to finish.
  virtual double stop_seconds() = 0;
};

// Makes the timer of one benchmark run; called once per run (per --benchmark_repetitions), after
// the benchmark's setup.
using TimerFactory = std::function<std::unique_ptr<Timer>()>;

// Wall-clock time on the host: right only for work that has finished when the launch returns
// (never for asynchronous GPU launches, whose time it would not see).
class HostTimer final : public Timer {
 public:
  void settle() override {}
  void start() override;
  double stop_seconds() override;

 private:
  std::chrono::steady_clock::time_point begin_{};
};

TimerFactory host_timers();

}  // namespace seqpar::bench

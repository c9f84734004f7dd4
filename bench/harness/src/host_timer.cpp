#include "seqpar/bench/timer.hpp"

namespace seqpar::bench {

void HostTimer::start() { begin_ = std::chrono::steady_clock::now(); }

double HostTimer::stop_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin_).count();
}

TimerFactory host_timers() {
  return [] { return std::make_unique<HostTimer>(); };
}

}  // namespace seqpar::bench

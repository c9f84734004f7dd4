// Runs fn(i) for i in [0, n) on the CPUs this process may use (its affinity mask), each index once.
// The planner's searches hand it independent structures: simulate() keeps its scratch in
// thread_local buffers, so threads share nothing but the read-only model and system, and a caller
// that stores fn's results by index gets the same answer as a serial loop, in the same order.
// SEQPAR_THREADS=N caps the threads (1: serial, as the benchmarks and their baselines run).
#pragma once
#include <cstddef>
#include <functional>

namespace seqpar::sim {

// The threads parallel_for uses for n items: at most one per usable CPU, one per `grain` items.
int search_threads(std::size_t n, std::size_t grain);
// fn must not throw: an exception on a worker thread would end the process (std::terminate), so
// callers catch inside fn and store what they caught with the result.
void parallel_for(std::size_t n, std::size_t grain, const std::function<void(std::size_t)>& fn);

}  // namespace seqpar::sim

#include "parallel.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

namespace seqpar::sim {

namespace {
int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}
}  // namespace

int search_threads(std::size_t n, std::size_t grain) {
  int cap = usable_cpus();
  if (const char* env = std::getenv("SEQPAR_THREADS"); env && *env) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end && *end == '\0' && v >= 1) cap = static_cast<int>(std::min<long>(v, cap));
  }
  const std::size_t by_work = std::max<std::size_t>(1, n / std::max<std::size_t>(1, grain));
  return static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(cap), by_work));
}

void parallel_for(std::size_t n, std::size_t grain, const std::function<void(std::size_t)>& fn) {
  const int threads = search_threads(n, grain);
  if (threads <= 1) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads - 1));
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

}  // namespace seqpar::sim

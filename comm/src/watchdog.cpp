#include "seqpar/comm/watchdog.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "seqpar/core/error.hpp"

namespace seqpar::comm {
namespace {

void check_seconds(double s, const std::string& source) {
  if (!std::isfinite(s) || s < 0)
    throw Error(fmt::format("{} = {}: the communication timeout must be a finite number of seconds "
                            ">= 0 (0 turns the watchdog off)",
                            source, s));
}

// SEQPAR_COMM_TIMEOUT, or nullopt when unset or empty.
std::optional<double> env_timeout() {
  const char* text = std::getenv(kCommTimeoutEnv);
  if (!text || !*text) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0')
    throw Error(fmt::format("{}='{}': expected a number of seconds (0 turns the watchdog off)",
                            kCommTimeoutEnv, text));
  check_seconds(v, kCommTimeoutEnv);
  return v;
}

// Negative: not configured yet (read the environment on first use).
std::atomic<double> g_timeout_s{-1.0};

}  // namespace

double comm_timeout_s() {
  double v = g_timeout_s.load();
  if (v >= 0) return v;
  // A malformed variable in a program that never called configure_comm_timeout: the default
  // rather than an exception from deep inside a collective; configure_comm_timeout reports it.
  try {
    v = env_timeout().value_or(kDefaultCommTimeoutS);
  } catch (const Error&) {
    v = kDefaultCommTimeoutS;
  }
  g_timeout_s.store(v);
  return v;
}

void set_comm_timeout_s(double seconds, const std::string& source) {
  check_seconds(seconds, source);
  g_timeout_s.store(seconds);
}

double configure_comm_timeout(std::optional<double> flag_value) {
  if (flag_value) {
    set_comm_timeout_s(*flag_value, "--comm-timeout");
    return *flag_value;
  }
  const double v = env_timeout().value_or(kDefaultCommTimeoutS);
  g_timeout_s.store(v);
  return v;
}

Deadline::Deadline()
    : limit_s_(comm_timeout_s()),
      end_(std::chrono::steady_clock::now() +
           std::chrono::duration_cast<std::chrono::steady_clock::duration>(
               std::chrono::duration<double>(limit_s_))) {}

bool Deadline::expired() const {
  return limit_s_ > 0 && std::chrono::steady_clock::now() >= end_;
}

void PollBackoff::pause() {
  if (std::chrono::steady_clock::now() - start_ < std::chrono::seconds(1))
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

std::string timeout_message(const std::string& who, const std::string& what, double limit_s) {
  return fmt::format(
      "communication timeout: {} waited {:g} s for {} without completing; a peer has stopped, "
      "crashed or is far behind. If it is only slow, raise --comm-timeout or {} (0 turns the "
      "watchdog off)",
      who, limit_s, what, kCommTimeoutEnv);
}

namespace detail {

void test_stall_point(int world_rank) {
  // Read once: the hook costs one comparison per call when unset.
  static const int stall_rank = [] {
    const char* t = std::getenv("SEQPAR_TEST_STALL_RANK");
    return t && *t ? std::atoi(t) : -1;
  }();
  if (stall_rank < 0 || stall_rank != world_rank) return;
  static std::atomic<long> calls{0};
  static const long after = [] {
    const char* t = std::getenv("SEQPAR_TEST_STALL_AFTER");
    return t && *t ? std::atol(t) : 0L;
  }();
  if (calls.fetch_add(1) != after) return;
  std::fprintf(stderr, "rank %d: SEQPAR_TEST_STALL_RANK: stalling before a communication call\n",
               world_rank);
  std::fflush(stderr);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(60));
}

}  // namespace detail
}  // namespace seqpar::comm

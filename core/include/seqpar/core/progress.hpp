// One progress line for long work in seqpar's programs (seqpar-train's steps, a benchmark's shape
// list): what is done, what is left and an estimate of the time left from the average time per
// item so far. It writes only when its stream is a terminal, so logs, pipes, mpirun's forwarded
// output and CI stay as they were; a line at most every `interval_s`, and always the last one.
// scripts/progress.py is the same line for the Python scripts.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace seqpar {

// 12 -> "12s", 754 -> "12m 34s", 7384 -> "2h 03m".
std::string format_duration(double seconds);

class Progress {
 public:
  using Clock = std::function<double()>;  // seconds, monotonic

  // Writes to `out` when it is a terminal (isatty).
  Progress(std::string what, std::int64_t total, std::FILE* out = stderr, double interval_s = 2.0);
  // For tests: `terminal` says whether to write, `clock` gives the time.
  Progress(std::string what, std::int64_t total, std::FILE* out, double interval_s, bool terminal, Clock clock);

  // "train: 3/12 done, 9 left, about 4m 30s to go" ("..., took 6m 00s" when all is done). `skipped`
  // items count as done but not towards the time per item.
  std::string line(std::int64_t done, std::int64_t skipped = 0) const;
  // Writes line() when the stream is a terminal and the interval has passed (or all is done).
  void update(std::int64_t done, std::int64_t skipped = 0);
  bool enabled() const { return terminal_; }

 private:
  std::string what_;
  std::int64_t total_;
  std::FILE* out_;
  double interval_s_;
  bool terminal_;
  Clock clock_;
  double start_;
  double last_ = -1;
};

}  // namespace seqpar

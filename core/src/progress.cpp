#include "seqpar/core/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace seqpar {

namespace {
double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
bool is_terminal(std::FILE* f) { return f != nullptr && ::isatty(::fileno(f)) == 1; }
}  // namespace

std::string format_duration(double seconds) {
  const auto s = static_cast<std::int64_t>(std::llround(std::max(0.0, std::isfinite(seconds) ? seconds : 0.0)));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m {:02d}s", s / 60, s % 60);
  return fmt::format("{}h {:02d}m", s / 3600, (s % 3600) / 60);
}

Progress::Progress(std::string what, std::int64_t total, std::FILE* out, double interval_s)
    : Progress(std::move(what), total, out, interval_s, is_terminal(out), steady_seconds) {}

Progress::Progress(std::string what, std::int64_t total, std::FILE* out, double interval_s, bool terminal, Clock clock)
    : what_(std::move(what)), total_(total), out_(out), interval_s_(interval_s), terminal_(terminal),
      clock_(std::move(clock)), start_(clock_()) {}

std::string Progress::line(std::int64_t done, std::int64_t skipped) const {
  const std::int64_t left = std::max<std::int64_t>(0, total_ - done);
  std::string text = fmt::format("{}: {}/{} done, {} left", what_, done, total_, left);
  const double elapsed = clock_() - start_;
  if (left == 0) return text + ", took " + format_duration(elapsed);
  const std::int64_t timed = done - skipped;
  if (timed <= 0) return text + ", no estimate yet";
  return text + ", about " + format_duration(elapsed / static_cast<double>(timed) * static_cast<double>(left)) + " to go";
}

void Progress::update(std::int64_t done, std::int64_t skipped) {
  if (!terminal_) return;
  const double now = clock_();
  if (done < total_ && last_ >= 0 && now - last_ < interval_s_) return;
  last_ = now;
  std::fprintf(out_, "%s\n", line(done, skipped).c_str());
  std::fflush(out_);
}

}  // namespace seqpar

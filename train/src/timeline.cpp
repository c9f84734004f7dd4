#include "seqpar/train/timeline.hpp"

#include <fmt/format.h>

#include <chrono>
#include <optional>

#include "seqpar/core/error.hpp"
#include "seqpar/train/backend.hpp"
#include "timeline_cuda.hpp"

namespace seqpar::train {

namespace {

class HostTimeline final : public Timeline {
 public:
  int begin(trace::Stream stream, std::string name) override {
    const auto now = Clock::now();
    if (!origin_) origin_ = now;
    open_.push_back({stream, std::move(name), now, std::nullopt});
    return static_cast<int>(open_.size()) - 1;
  }
  void end(int id) override {
    if (id < 0 || id >= static_cast<int>(open_.size()) || open_[static_cast<std::size_t>(id)].stop)
      throw Error(fmt::format("timeline: range {} was never opened or is already closed", id));
    open_[static_cast<std::size_t>(id)].stop = Clock::now();
  }
  std::vector<Range> ranges() override {
    std::vector<Range> out;
    for (const Open& o : open_)
      if (o.stop)
        out.push_back({o.stream, o.name, std::chrono::duration<double>(o.start - *origin_).count(),
                       std::chrono::duration<double>(*o.stop - o.start).count()});
    return out;
  }

 private:
  using Clock = std::chrono::steady_clock;
  struct Open {
    trace::Stream stream;
    std::string name;
    Clock::time_point start;
    std::optional<Clock::time_point> stop;
  };
  std::optional<Clock::time_point> origin_;
  std::vector<Open> open_;
};

}  // namespace

std::unique_ptr<Timeline> make_host_timeline() { return std::make_unique<HostTimeline>(); }

std::unique_ptr<Timeline> make_timeline(Backend& be) {
  if (be.on_gpu()) return detail::make_cuda_event_timeline(be.compute_stream(), be.copy_stream());
  return make_host_timeline();
}

TimelineRange::TimelineRange(Timeline* t, trace::Stream s, std::string_view what, int layer) : t_(t) {
  if (t_) id_ = t_->begin(s, layer >= 0 ? fmt::format("L{} {}", layer, what) : std::string(what));
}

TimelineRange::~TimelineRange() {
  if (t_) t_->end(id_);
}

std::string rank_trace_path(const std::string& path, int rank, int world) {
  if (world <= 1) return path;
  const std::string ext = ".json";
  if (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
    return fmt::format("{}.rank{}{}", path.substr(0, path.size() - ext.size()), rank, ext);
  return fmt::format("{}.rank{}", path, rank);
}

void add_to_trace(trace::Trace& out, int pid, std::string_view process_name, const std::vector<Timeline::Range>& ranges) {
  out.add_process(pid, process_name);
  for (const Timeline::Range& r : ranges) {
    out.add_stream(pid, r.stream);
    out.add(pid, r.stream, r.name, "measured", r.start_s, r.dur_s);
  }
}

}  // namespace seqpar::train

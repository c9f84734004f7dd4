// The measured timeline of a training step (`seqpar-train --trace`): named ranges on the streams
// of core/trace.hpp (compute, Ulysses all-to-all, ring send/recv, data-parallel reduction), timed
// with host clocks on the CPU back end and CUDA events on the compute stream on the CUDA back end
// (which also opens an NVTX range per scope, for Nsight Systems). Off by default: with no Timeline
// set on the back end (Backend::timeline() == nullptr) a TimelineRange does nothing, not even
// build its name.
//
// What a range spans: a kernel phase, from its first op to its last; a collective, the call; a
// ring hop, from posting the send/recv to the wait that makes the block usable, so it covers the
// step's kernels it overlaps (what it measures is when the next step can start).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "seqpar/core/trace.hpp"

namespace seqpar::train {

class Backend;

class Timeline {
 public:
  struct Range {
    trace::Stream stream;
    std::string name;
    double start_s = 0, dur_s = 0;  // from the first range's start
  };
  virtual ~Timeline() = default;
  // Opens a range on `stream`'s track; the id closes it. Ranges may nest and interleave.
  virtual int begin(trace::Stream stream, std::string name) = 0;
  virtual void end(int id) = 0;
  // The closed ranges, in the order opened. On the GPU the caller synchronizes first.
  virtual std::vector<Range> ranges() = 0;
};

// Host clocks on the CPU back end, CUDA events on its compute stream on the CUDA back end.
std::unique_ptr<Timeline> make_timeline(Backend& be);
std::unique_ptr<Timeline> make_host_timeline();

// A range for one scope; does nothing when `t` is null. The name is "L<layer> <what>" when layer
// >= 0, else `what`.
class TimelineRange {
 public:
  TimelineRange(Timeline* t, trace::Stream s, std::string_view what, int layer = -1);
  ~TimelineRange();
  TimelineRange(const TimelineRange&) = delete;
  TimelineRange& operator=(const TimelineRange&) = delete;

 private:
  Timeline* t_;
  int id_ = -1;
};

// The file of rank `rank` of `world` for --trace PATH: PATH itself for one rank, else PATH with
// ".rank<r>" before a ".json" ending (or at the end).
std::string rank_trace_path(const std::string& path, int rank, int world);

// Adds `ranges` as process `pid` (the rank) named `process_name`, one track per stream used.
void add_to_trace(trace::Trace& out, int pid, std::string_view process_name, const std::vector<Timeline::Range>& ranges);

}  // namespace seqpar::train

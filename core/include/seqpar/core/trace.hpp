// Step timelines in the Chrome trace event format, the JSON that Perfetto (ui.perfetto.dev) and
// chrome://tracing open: {"traceEvents": [...], "displayTimeUnit": "ms"}, one complete event
// (ph "X", ts and dur in microseconds) per slice, one metadata event (ph "M") naming each process
// and thread. The simulator's predicted step (`seqpar simulate --trace`) and the training step's
// measured one (`seqpar-train --trace`) both write through this one writer, with the same track
// names (the streams below), so the two open side by side.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace seqpar::trace {

// The streams of a step, one track (thread id) each. Predicted and measured timelines use the
// same ids and names so that they line up in the viewer.
enum class Stream {
  compute,        // kernels: GEMMs, attention, elementwise, recomputation, optimizer
  ulysses_a2a,    // the Ulysses all-to-alls (q,k,v in and the output back; their gradients)
  ring,           // ring attention's K,V (and dK,dV) send/recv hops; all-gather KV's K,V gather, dK,dV reduce-scatter
  data_parallel,  // gradient/parameter reduction over the data x sequence parallel group
  offload,        // activation checkpoints to and from host memory
  tensor_parallel,  // TP's all-gathers and reduce-scatters between its sequence-parallel and TP regions
  expert_a2a,       // a mixture-of-experts layer's dispatch and combine all-to-alls (expert parallelism)
};
// The streams every step timeline has. The experts' stream is added only to a plan that has expert
// all-to-alls (kExpertStreams), so a dense plan's timeline is what it was.
inline constexpr Stream kAllStreams[] = {Stream::compute, Stream::ulysses_a2a, Stream::ring,
                                         Stream::data_parallel, Stream::offload, Stream::tensor_parallel};
inline constexpr Stream kExpertStreams[] = {Stream::expert_a2a};
int stream_tid(Stream s);                 // 1 .. 7, in the order above
std::string_view stream_name(Stream s);   // "compute", "ulysses all-to-all", "ring send/recv", ...

struct Slice {
  int pid = 0, tid = 0;
  std::string name, category;
  double start_us = 0, dur_us = 0;
  nlohmann::json args = nlohmann::json::object();
};

// A timeline under construction. Every call checks what it is given (a slice on a track that was
// never named, a negative or non-finite time, an empty name) and throws seqpar::Error naming the
// field, so a written file always validates.
class Trace {
 public:
  // Names process `pid` (a rank, or the simulator's one modelled rank).
  void add_process(int pid, std::string_view name);
  // Names track `tid` of process `pid`; the process must be named first. Naming a track twice
  // with the same name is harmless; with another name it is an error.
  void add_track(int pid, int tid, std::string_view name);
  // The stream's track (stream_tid, stream_name) of process `pid`.
  void add_stream(int pid, Stream s);
  void add_slice(Slice s);
  // A slice on a stream's track, in seconds (the writer converts to microseconds).
  void add(int pid, Stream s, std::string_view name, std::string_view category, double start_s, double dur_s,
           nlohmann::json args = nlohmann::json::object());

  const std::vector<Slice>& slices() const { return slices_; }
  bool has_track(int pid, int tid) const;
  // The document: metadata events first, then the slices in the order added.
  nlohmann::json to_json() const;

 private:
  struct Named {
    int pid, tid;
    std::string name;
  };
  std::vector<Named> processes_, tracks_;
  std::vector<Slice> slices_;
};

// The trace event format's rules this writer relies on, checked on any document (ours or one read
// back): a top-level object with a "traceEvents" array; each event an object with a string "ph";
// "X" events with a string name, integer pid/tid, finite ts >= 0 and dur >= 0; "M" events named
// process_name or thread_name with args.name a string; every X event's (pid, tid) named by a
// thread_name event; displayTimeUnit, when present, "ms" or "ns". One message per violation,
// naming the event index and field; empty when the document is valid.
std::vector<std::string> validate(const nlohmann::json& doc);

// Validates and writes `t` to `path` (dump_json); seqpar::Error naming the path and the first
// violation, or the path when it cannot be written.
void write_file(const Trace& t, const std::string& path);

}  // namespace seqpar::trace

#include "seqpar/core/trace.hpp"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <set>
#include <utility>

#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"

namespace seqpar::trace {

int stream_tid(Stream s) {
  // Thread ids start at 1: some viewers treat tid 0 as the process's main thread.
  return static_cast<int>(s) + 1;
}

std::string_view stream_name(Stream s) {
  switch (s) {
    case Stream::compute: return "compute";
    case Stream::ulysses_a2a: return "ulysses all-to-all";
    case Stream::ring: return "ring send/recv";
    case Stream::data_parallel: return "data-parallel reduction";
    case Stream::offload: return "offload copies";
    case Stream::tensor_parallel: return "tensor-parallel all-gather/reduce-scatter";
    case Stream::expert_a2a: return "expert all-to-all (dispatch, combine)";
  }
  throw Error(fmt::format("trace stream {}: not a stream of seqpar::trace::Stream", static_cast<int>(s)));
}

void Trace::add_process(int pid, std::string_view name) {
  if (pid < 0) throw Error(fmt::format("trace process {}: pid must not be negative", pid));
  if (name.empty()) throw Error(fmt::format("trace process {}: the name must not be empty", pid));
  for (const Named& p : processes_)
    if (p.pid == pid) {
      if (p.name != name)
        throw Error(fmt::format("trace process {}: already named '{}', not '{}'", pid, p.name, name));
      return;
    }
  processes_.push_back({pid, 0, std::string(name)});
}

void Trace::add_track(int pid, int tid, std::string_view name) {
  bool known = false;
  for (const Named& p : processes_) known = known || p.pid == pid;
  if (!known) throw Error(fmt::format("trace track {}/{}: process {} has no name (add_process first)", pid, tid, pid));
  if (tid < 0) throw Error(fmt::format("trace track {}/{}: tid must not be negative", pid, tid));
  if (name.empty()) throw Error(fmt::format("trace track {}/{}: the name must not be empty", pid, tid));
  for (const Named& t : tracks_)
    if (t.pid == pid && t.tid == tid) {
      if (t.name != name)
        throw Error(fmt::format("trace track {}/{}: already named '{}', not '{}'", pid, tid, t.name, name));
      return;
    }
  tracks_.push_back({pid, tid, std::string(name)});
}

void Trace::add_stream(int pid, Stream s) { add_track(pid, stream_tid(s), stream_name(s)); }

bool Trace::has_track(int pid, int tid) const {
  for (const Named& t : tracks_)
    if (t.pid == pid && t.tid == tid) return true;
  return false;
}

void Trace::add_slice(Slice s) {
  if (!has_track(s.pid, s.tid))
    throw Error(fmt::format("trace slice '{}': track {}/{} has no name (add_track first)", s.name, s.pid, s.tid));
  if (s.name.empty()) throw Error(fmt::format("trace slice on track {}/{}: the name must not be empty", s.pid, s.tid));
  if (!std::isfinite(s.start_us) || s.start_us < 0)
    throw Error(fmt::format("trace slice '{}': start {} us must be finite and non-negative", s.name, s.start_us));
  if (!std::isfinite(s.dur_us) || s.dur_us < 0)
    throw Error(fmt::format("trace slice '{}': duration {} us must be finite and non-negative", s.name, s.dur_us));
  if (!s.args.is_object()) throw Error(fmt::format("trace slice '{}': args must be a JSON object", s.name));
  slices_.push_back(std::move(s));
}

void Trace::add(int pid, Stream s, std::string_view name, std::string_view category, double start_s, double dur_s,
                nlohmann::json args) {
  add_slice({pid, stream_tid(s), std::string(name), std::string(category), start_s * 1e6, dur_s * 1e6,
             std::move(args)});
}

nlohmann::json Trace::to_json() const {
  nlohmann::json events = nlohmann::json::array();
  for (const Named& p : processes_)
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", p.pid}, {"tid", 0}, {"args", {{"name", p.name}}}});
  for (const Named& t : tracks_) {
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", t.pid}, {"tid", t.tid}, {"args", {{"name", t.name}}}});
    // Tracks sort by tid, so compute comes first and the streams below it in a fixed order.
    events.push_back(
        {{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", t.pid}, {"tid", t.tid}, {"args", {{"sort_index", t.tid}}}});
  }
  for (const Slice& s : slices_) {
    nlohmann::json e = {{"ph", "X"}, {"name", s.name}, {"pid", s.pid}, {"tid", s.tid},
                        {"ts", s.start_us}, {"dur", s.dur_us}, {"args", s.args}};
    if (!s.category.empty()) e["cat"] = s.category;
    events.push_back(std::move(e));
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

namespace {

bool is_int(const nlohmann::json& j) { return j.is_number_integer() || j.is_number_unsigned(); }

void check_event(const nlohmann::json& e, std::size_t i, std::set<std::pair<long long, long long>>& named,
                 std::vector<std::pair<std::size_t, std::pair<long long, long long>>>& used,
                 std::vector<std::string>& errors) {
  auto err = [&](const std::string& what) { errors.push_back(fmt::format("traceEvents[{}]: {}", i, what)); };
  if (!e.is_object()) return err("an event must be a JSON object");
  if (!e.contains("ph") || !e["ph"].is_string()) return err("ph: required, a string (the event type)");
  const std::string ph = e["ph"].get<std::string>();
  for (const char* k : {"pid", "tid"})
    if (!e.contains(k) || !is_int(e[k])) err(fmt::format("{}: required, an integer", k));
  if (ph == "X") {
    if (!e.contains("name") || !e["name"].is_string()) err("name: a complete event (ph X) needs a string name");
    for (const char* k : {"ts", "dur"}) {
      if (!e.contains(k) || !e[k].is_number()) {
        err(fmt::format("{}: a complete event (ph X) needs a number of microseconds", k));
      } else if (const double v = e[k].get<double>(); !std::isfinite(v) || v < 0) {
        err(fmt::format("{}: {} must be finite and non-negative", k, v));
      }
    }
    if (e.contains("args") && !e["args"].is_object()) err("args: must be a JSON object");
    if (e.contains("cat") && !e["cat"].is_string()) err("cat: must be a string");
    if (is_int(e.value("pid", nlohmann::json())) && is_int(e.value("tid", nlohmann::json())))
      used.push_back({i, {e["pid"].get<long long>(), e["tid"].get<long long>()}});
  } else if (ph == "M") {
    if (!e.contains("name") || !e["name"].is_string()) return err("name: a metadata event (ph M) needs a string name");
    const std::string name = e["name"].get<std::string>();
    if (name == "process_name" || name == "thread_name") {
      if (!e.contains("args") || !e["args"].is_object() || !e["args"].contains("name") || !e["args"]["name"].is_string())
        err(fmt::format("args.name: a {} event needs a string name", name));
      else if (name == "thread_name" && is_int(e.value("pid", nlohmann::json())) && is_int(e.value("tid", nlohmann::json())))
        named.insert({e["pid"].get<long long>(), e["tid"].get<long long>()});
    } else if (name != "thread_sort_index" && name != "process_sort_index") {
      err(fmt::format("name: '{}' is not a metadata event seqpar writes (process_name, thread_name, *_sort_index)", name));
    }
  } else {
    err(fmt::format("ph: '{}' is not an event type seqpar writes (X complete, M metadata)", ph));
  }
}

}  // namespace

std::vector<std::string> validate(const nlohmann::json& doc) {
  std::vector<std::string> errors;
  if (!doc.is_object()) return {"the document must be a JSON object with a traceEvents array"};
  if (!doc.contains("traceEvents") || !doc["traceEvents"].is_array())
    return {"traceEvents: required, an array of events"};
  if (doc.contains("displayTimeUnit") &&
      !(doc["displayTimeUnit"].is_string() && (doc["displayTimeUnit"] == "ms" || doc["displayTimeUnit"] == "ns")))
    errors.push_back("displayTimeUnit: must be \"ms\" or \"ns\"");
  std::set<std::pair<long long, long long>> named;
  std::vector<std::pair<std::size_t, std::pair<long long, long long>>> used;
  const nlohmann::json& events = doc["traceEvents"];
  for (std::size_t i = 0; i < events.size(); ++i) check_event(events[i], i, named, used, errors);
  for (const auto& [i, track] : used)
    if (!named.count(track))
      errors.push_back(fmt::format("traceEvents[{}]: pid {} tid {}: no thread_name event names this track", i,
                                   track.first, track.second));
  return errors;
}

void write_file(const Trace& t, const std::string& path) {
  const nlohmann::json doc = t.to_json();
  const std::vector<std::string> errors = validate(doc);
  if (!errors.empty())
    throw Error(fmt::format("--trace {}: the timeline is not a valid trace ({} problem(s)), first: {}", path,
                            errors.size(), errors.front()));
  std::ofstream out(path);
  if (!out) throw Error(fmt::format("--trace {}: cannot open the file for writing", path));
  out << dump_json(doc, -1) << '\n';
  if (!out) throw Error(fmt::format("--trace {}: writing failed", path));
}

}  // namespace seqpar::trace

// The trace writer (core/trace.hpp): what it builds validates against the trace event format, and
// the validator rejects documents that break the format, naming the event and field.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include "seqpar/core/error.hpp"
#include "seqpar/core/json_io.hpp"
#include "seqpar/core/trace.hpp"

namespace {

using seqpar::trace::Stream;

bool mentions(const std::vector<std::string>& errors, const std::string& what) {
  for (const std::string& e : errors)
    if (e.find(what) != std::string::npos) return true;
  return false;
}

seqpar::trace::Trace two_slices() {
  seqpar::trace::Trace t;
  t.add_process(0, "rank 0");
  for (Stream s : seqpar::trace::kAllStreams) t.add_stream(0, s);
  t.add(0, Stream::compute, "layer 0 forward gemm", "gemm", 0.0, 2e-3, {{"layer", 0}});
  t.add(0, Stream::ulysses_a2a, "layer 0 forward all-to-all qkv", "comm", 2e-3, 5e-4);
  return t;
}

TEST(Trace, StreamsHaveDistinctTidsAndNames) {
  std::set<int> tids;
  std::set<std::string> names;
  for (Stream s : seqpar::trace::kAllStreams) {
    tids.insert(seqpar::trace::stream_tid(s));
    names.insert(std::string(seqpar::trace::stream_name(s)));
  }
  EXPECT_EQ(tids.size(), std::size(seqpar::trace::kAllStreams));
  EXPECT_EQ(names.size(), std::size(seqpar::trace::kAllStreams));
  EXPECT_EQ(seqpar::trace::stream_name(Stream::compute), "compute");
}

TEST(Trace, DocumentFollowsTheTraceEventFormat) {
  const nlohmann::json doc = two_slices().to_json();
  EXPECT_TRUE(seqpar::trace::validate(doc).empty()) << seqpar::trace::validate(doc).front();
  EXPECT_EQ(doc["displayTimeUnit"], "ms");
  int x = 0, thread_names = 0, process_names = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X") {
      ++x;
      if (e["name"] == "layer 0 forward gemm") {
        EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 0.0);
        EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 2000.0);  // seconds in, microseconds out
        EXPECT_EQ(e["tid"], seqpar::trace::stream_tid(Stream::compute));
        EXPECT_EQ(e["cat"], "gemm");
        EXPECT_EQ(e["args"]["layer"], 0);
      }
    }
    if (e["ph"] == "M" && e["name"] == "thread_name") ++thread_names;
    if (e["ph"] == "M" && e["name"] == "process_name") ++process_names;
  }
  EXPECT_EQ(x, 2);
  EXPECT_EQ(thread_names, int(std::size(seqpar::trace::kAllStreams)));
  EXPECT_EQ(process_names, 1);
}

TEST(Trace, BuilderRefusesWhatWouldNotValidate) {
  seqpar::trace::Trace t;
  EXPECT_THROW(t.add_track(0, 1, "compute"), seqpar::Error);  // process not named
  t.add_process(0, "rank 0");
  EXPECT_THROW(t.add(0, Stream::compute, "x", "c", 0, 1), seqpar::Error);  // track not named
  t.add_stream(0, Stream::compute);
  EXPECT_THROW(t.add_track(0, 1, "another name"), seqpar::Error);
  EXPECT_THROW(t.add(0, Stream::compute, "x", "c", -1, 1), seqpar::Error);
  EXPECT_THROW(t.add(0, Stream::compute, "x", "c", 0, std::nan("")), seqpar::Error);
  EXPECT_THROW(t.add(0, Stream::compute, "", "c", 0, 1), seqpar::Error);
  try {
    t.add(0, Stream::compute, "late", "c", 0, -2);
    FAIL() << "a negative duration was accepted";
  } catch (const seqpar::Error& e) {
    EXPECT_NE(std::string(e.what()).find("duration"), std::string::npos) << e.what();
  }
}

TEST(Trace, ValidatorNamesTheBrokenEventAndField) {
  nlohmann::json doc = two_slices().to_json();
  const std::size_t n = doc["traceEvents"].size();
  nlohmann::json bad = doc;
  bad["traceEvents"][n - 1]["dur"] = -1;
  EXPECT_TRUE(mentions(seqpar::trace::validate(bad), fmt::format("traceEvents[{}]: dur", n - 1)));
  bad = doc;
  bad["traceEvents"][n - 1].erase("ts");
  EXPECT_TRUE(mentions(seqpar::trace::validate(bad), "ts: a complete event"));
  bad = doc;
  bad["traceEvents"][n - 1]["tid"] = 42;  // a track nobody named
  EXPECT_TRUE(mentions(seqpar::trace::validate(bad), "no thread_name event names this track"));
  bad = doc;
  bad["traceEvents"][n - 1]["ph"] = "B";
  EXPECT_TRUE(mentions(seqpar::trace::validate(bad), "ph: 'B'"));
  bad = doc;
  bad["traceEvents"][n - 1]["pid"] = "zero";
  EXPECT_TRUE(mentions(seqpar::trace::validate(bad), "pid: required, an integer"));
  bad = doc;
  bad["displayTimeUnit"] = "s";
  EXPECT_TRUE(mentions(seqpar::trace::validate(bad), "displayTimeUnit"));
  EXPECT_TRUE(mentions(seqpar::trace::validate(nlohmann::json::array()), "JSON object"));
  EXPECT_TRUE(mentions(seqpar::trace::validate(nlohmann::json{{"events", 1}}), "traceEvents: required"));
}

TEST(Trace, WriteFileWritesAValidDocumentAndNamesAnUnwritablePath) {
  const std::string path = (std::filesystem::temp_directory_path() / "seqpar-test-trace.json").string();
  seqpar::trace::write_file(two_slices(), path);
  const nlohmann::json back = seqpar::read_json_file(path);
  EXPECT_TRUE(seqpar::trace::validate(back).empty());
  EXPECT_EQ(back, two_slices().to_json());
  std::remove(path.c_str());
  try {
    seqpar::trace::write_file(two_slices(), "/nonexistent-dir/trace.json");
    FAIL() << "an unwritable path was accepted";
  } catch (const seqpar::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--trace /nonexistent-dir/trace.json"), std::string::npos) << e.what();
  }
}

}  // namespace

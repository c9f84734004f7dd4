// The measured timeline (train/timeline.hpp): host-clock ranges, scoped ranges that cost nothing
// without a timeline, per-rank file names, and a CPU step that records every layer's phases.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "seqpar/core/error.hpp"
#include "seqpar/core/trace.hpp"
#include "seqpar/train/backend.hpp"
#include "seqpar/train/timeline.hpp"
#include "seqpar/train/trainer.hpp"

namespace seqpar::train {
namespace {

using trace::Stream;

// A step small enough to run in milliseconds, with `layers` decoder layers.
TrainSetup small_step(int layers) {
  TrainSetup s;
  s.model.layers = layers;
  s.model.hidden = 32;
  s.model.heads = 2;
  s.model.kv_heads = 2;
  s.model.head_dim = 16;
  s.model.ffn = 64;
  s.model.vocab = 64;
  s.seq_len = 16;
  return s;
}

TEST(Timeline, HostRangesNestAndConvertToAValidTrace) {
  auto t = make_host_timeline();
  {
    const TimelineRange outer(t.get(), Stream::compute, "fwd", 3);
    const TimelineRange inner(t.get(), Stream::ulysses_a2a, "all-to-all");
  }
  const std::vector<Timeline::Range> r = t->ranges();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].name, "L3 fwd");
  EXPECT_EQ(r[1].stream, Stream::ulysses_a2a);
  EXPECT_GE(r[1].start_s, r[0].start_s);
  EXPECT_LE(r[1].start_s + r[1].dur_s, r[0].start_s + r[0].dur_s);
  trace::Trace doc;
  add_to_trace(doc, 5, "rank 5", r);
  EXPECT_TRUE(trace::validate(doc.to_json()).empty());
  EXPECT_TRUE(doc.has_track(5, trace::stream_tid(Stream::ulysses_a2a)));
  EXPECT_FALSE(doc.has_track(5, trace::stream_tid(Stream::ring)));  // only the streams used
  EXPECT_THROW(t->end(1), Error);                                   // closed twice
}

TEST(Timeline, ARangeWithoutATimelineDoesNothing) {
  const TimelineRange r(nullptr, Stream::compute, "fwd", 0);
  SUCCEED();
}

TEST(Timeline, OneFilePerRank) {
  EXPECT_EQ(rank_trace_path("step.json", 0, 1), "step.json");
  EXPECT_EQ(rank_trace_path("out/step.json", 3, 8), "out/step.rank3.json");
  EXPECT_EQ(rank_trace_path("step", 1, 2), "step.rank1");
}

TEST(Timeline, CpuStepRecordsEveryLayersPhases) {
  auto be = make_cpu_backend();
  TrainSetup s = small_step(2);
  Trainer trainer(*be, nullptr, s);
  trainer.step();  // no timeline: nothing recorded anywhere
  auto t = make_timeline(*be);
  be->set_timeline(t.get());
  trainer.step();
  be->set_timeline(nullptr);
  std::set<std::string> names;
  for (const Timeline::Range& r : t->ranges()) names.insert(r.name);
  for (const char* n : {"L0 fwd", "L1 fwd", "L0 bwd", "L1 bwd", "L0 fwd attention", "L1 bwd attention", "optimizer"})
    EXPECT_TRUE(names.count(n)) << n;
}

// Checkpoint offload: every layer's input goes to the host in the forward and comes back in the
// backward, each copy a range on the offload track (the simulator's trace has the same track).
TEST(Timeline, OffloadCopiesAreRangesOnTheOffloadTrack) {
  auto be = make_cpu_backend();
  TrainSetup s = small_step(3);
  s.mem.checkpoint = seqpar::Checkpoint::full;
  s.mem.offload_checkpoints = true;
  Trainer trainer(*be, nullptr, s);
  auto t = make_timeline(*be);
  be->set_timeline(t.get());
  trainer.step();
  be->set_timeline(nullptr);
  std::set<std::string> offload, other;
  for (const Timeline::Range& r : t->ranges()) (r.stream == Stream::offload ? offload : other).insert(r.name);
  EXPECT_EQ(offload, (std::set<std::string>{"L0 offload to host", "L1 offload to host", "L2 offload to host",
                                            "L0 fetch to device", "L1 fetch to device", "L2 fetch to device"}));
  EXPECT_TRUE(other.count("L2 recompute"));
  // Without offload the track stays empty.
  s.mem.offload_checkpoints = false;
  Trainer plain(*be, nullptr, s);
  auto t2 = make_timeline(*be);
  be->set_timeline(t2.get());
  plain.step();
  be->set_timeline(nullptr);
  for (const Timeline::Range& r : t2->ranges()) EXPECT_NE(r.stream, Stream::offload) << r.name;
}

}  // namespace
}  // namespace seqpar::train

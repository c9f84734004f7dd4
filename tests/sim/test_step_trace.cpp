// The predicted step's timeline (sim/step_trace.hpp): a valid trace event document whose slices
// add up to the simulator's step time, over methods, data parallelism and memory options.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "fixtures.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/trace.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/simulate.hpp"
#include "seqpar/sim/step_trace.hpp"

namespace seqpar::sim {
namespace {

using testing::plan;
using trace::Stream;

struct Sums {
  double compute = 0, exposed = 0, end = 0;
  std::map<int, int> slices_per_tid;
};

Sums sums(const trace::Trace& t) {
  Sums s;
  for (const trace::Slice& sl : t.slices()) {
    ++s.slices_per_tid[sl.tid];
    s.end = std::max(s.end, (sl.start_us + sl.dur_us) * 1e-6);
    if (sl.tid == trace::stream_tid(Stream::compute)) s.compute += sl.dur_us * 1e-6;
    else s.exposed += sl.args.at("exposed_s").get<double>();
  }
  return s;
}

std::vector<MemoryOptions> option_sets() {
  std::vector<MemoryOptions> out(6);
  out[1].checkpoint = Checkpoint::full;
  out[1].offload_checkpoints = true;
  out[2].zero = 3;
  out[3].zero = 1;
  out[3].checkpoint = Checkpoint::selective;
  out[3].tiled_mlp = true;
  out[3].tiled_loss = true;
  out[4].zero = 2;
  out[4].offload_optimizer = true;
  out[4].checkpoint = Checkpoint::full;
  out[4].tiled_loss = true;
  out[5].checkpoint = Checkpoint::full;
  out[5].offload_checkpoints = true;
  out[5].zero = 3;
  return out;
}

TEST(StepTrace, SlicesAddUpToTheStepTimeAndValidate) {
  const Model m = load_model("llama3-8b");
  int checked = 0;
  for (const char* sys : {"dgx-h100", "dgx-a100-80g"}) {
    const System s = load_system(sys);
    const Plan plans[] = {
        plan(Method::ulysses, 8, 1 << 17, 8, 8, 1),      plan(Method::ring, 8, 1 << 17, 8, 1, 8),
        plan(Method::ring_zigzag, 16, 1 << 18, 8, 1, 8), plan(Method::hybrid, 16, 1 << 16, 16, 4, 4),
        plan(Method::ring_zigzag, 4, 1 << 12, 2, 1, 2),  // short sequence: ring hops exposed
        plan(Method::allgather, 16, 1 << 18, 16, 1, 16), plan(Method::allgather_contiguous, 8, 1 << 16, 8, 1, 8),
    };
    for (Plan p : plans)
      for (const MemoryOptions& mem : option_sets()) {
        p.mem = mem;
        const Result r = simulate(m, s, p);
        if (!r.valid) continue;
        const trace::Trace t = step_trace(r, 0, "predicted");
        const Sums sm = sums(t);
        const std::string what = std::string(sys) + " " + describe(p);
        EXPECT_NEAR(sm.end, r.step_time_s, 1e-9 * r.step_time_s) << what;
        EXPECT_NEAR(sm.compute + sm.exposed, r.step_time_s, 1e-9 * r.step_time_s) << what;
        EXPECT_NEAR(sm.compute, r.time.compute + r.time.optimizer + r.figures.unattributed_s, 1e-9 * r.step_time_s)
            << what;
        const std::vector<std::string> errors = trace::validate(t.to_json());
        EXPECT_TRUE(errors.empty()) << what << ": " << errors.front();
        // A slice per layer phase on the tracks the plan uses.
        EXPECT_GE(sm.slices_per_tid.at(trace::stream_tid(Stream::compute)), 5 * m.layers) << what;
        EXPECT_EQ(sm.slices_per_tid.count(trace::stream_tid(Stream::ulysses_a2a)) > 0, p.ulysses_degree > 1) << what;
        EXPECT_EQ(sm.slices_per_tid.count(trace::stream_tid(Stream::ring)) > 0, p.ring_degree > 1) << what;
        EXPECT_EQ(sm.slices_per_tid.count(trace::stream_tid(Stream::data_parallel)) > 0, p.gpus > 1) << what;
        EXPECT_EQ(sm.slices_per_tid.count(trace::stream_tid(Stream::offload)) > 0, mem.offload_checkpoints) << what;
        ++checked;
      }
  }
  EXPECT_GT(checked, 30);
}

TEST(StepTrace, ExposedCommunicationMatchesTheBreakdown) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  Plan p = plan(Method::hybrid, 16, 1 << 15, 16, 4, 4);  // short: the ring hops show
  p.mem.zero = 3;
  const Result r = simulate(m, s, p);
  ASSERT_TRUE(r.valid);
  double attention = 0, dp = 0;
  const trace::Trace t = step_trace(r, 3, "predicted");
  for (const trace::Slice& sl : t.slices()) {
    EXPECT_EQ(sl.pid, 3);
    if (sl.tid == trace::stream_tid(Stream::ulysses_a2a) || sl.tid == trace::stream_tid(Stream::ring))
      attention += sl.args.at("exposed_s").get<double>();
    if (sl.tid == trace::stream_tid(Stream::data_parallel)) dp += sl.args.at("exposed_s").get<double>();
  }
  EXPECT_NEAR(attention, r.time.exposed_attention_comm, 1e-9 * r.step_time_s);
  EXPECT_NEAR(dp, r.time.exposed_dp_comm, 1e-9 * r.step_time_s);
  EXPECT_GT(attention, 0);
}

TEST(StepTrace, RingHopRunsBesideItsStepKernel) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  const Result r = simulate(m, s, plan(Method::ring_zigzag, 4, 1 << 16, 4, 1, 4));
  ASSERT_TRUE(r.valid);
  const trace::Trace t = step_trace(r, 0, "predicted");
  double kernel_start = -1, hop_start = -2;
  for (const trace::Slice& sl : t.slices()) {
    if (sl.name == "L0 fwd attention ring step 1") kernel_start = sl.start_us;
    if (sl.name == "L0 fwd K,V hop 1") hop_start = sl.start_us;
  }
  EXPECT_DOUBLE_EQ(kernel_start, hop_start);
}

TEST(StepTrace, AnInvalidPlanHasNoTimeline) {
  Result r;
  r.valid = false;
  EXPECT_THROW(step_trace(r, 0, "predicted"), Error);
}

}  // namespace
}  // namespace seqpar::sim

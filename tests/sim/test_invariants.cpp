// Properties the model must keep on the real presets, whatever the numbers in them.
#include <gtest/gtest.h>

#include <utility>

#include "fixtures.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/attention_cost.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/result_json.hpp"
#include "seqpar/sim/simulate.hpp"
#include "seqpar/sim/validity.hpp"
#include "seqpar/sim/attention_kernels.hpp"

namespace seqpar::sim {
namespace {

using testing::plan;
using testing::sample_stride;

std::vector<std::string> names(const char* kind) {
  std::vector<std::string> out;
  for (const auto& p : builtin_presets())
    if (p.kind == kind) out.push_back(p.name);
  return out;
}

TEST(Invariants, PerGpuAllToAllBytesFallAsPGrows) {
  const Model m = load_model("llama2-7b");  // 32 heads, 32 KV heads: every P up to 32 is valid
  const std::int64_t N = 1 << 20;
  double last = 1e300;
  for (int P : {2, 4, 8, 16, 32}) {
    const AttentionShapes a = attention_shapes(m, plan(Method::ulysses, P, N, P, P, 1));
    const double moved = (a.qkv_a2a_bytes + a.o_a2a_bytes) * (P - 1) / P;
    EXPECT_LT(moved, last) << "P=" << P;
    last = moved;
  }
}

TEST(Invariants, RingCommunicationIsHiddenOnNvlinkAtLongSequencesAndExposedAtShortOnes) {
  // Multi-head attention (32 KV heads) moves the largest K,V blocks for its compute.
  const Model m = load_model("llama2-7b");
  const System s = load_system("dgx-h100");
  for (Method method : {Method::ring, Method::ring_zigzag}) {
    double last = 2;
    for (std::int64_t N : {std::int64_t{1} << 11, std::int64_t{1} << 13, std::int64_t{1} << 16, std::int64_t{1} << 20}) {
      const AttentionCost c = attention_layer_cost(m, s, plan(method, 8, N, 8, 1, 8));
      const double exposed = (c.fwd_s - c.fwd_kernel_s) / c.fwd_comm_s;
      EXPECT_LE(exposed, last) << to_string(method) << " N=" << N << ": a longer sequence hides more";
      last = exposed;
      if (N == std::int64_t{1} << 11) {
        EXPECT_GT(exposed, 0.05) << to_string(method) << ": 256-token blocks cannot hide their K,V hops";
      }
      if (N == std::int64_t{1} << 20) {
        EXPECT_NEAR(exposed, 0.0, 1e-9) << to_string(method) << ": at 1M the hops hide";
      }
    }
  }
}

// The balanced layout (zigzag ring, head/tail all-gather) is never slower than its contiguous
// twin; and all-gather KV exposes all its communication (Transformer Engine overlaps none of it).
TEST(Invariants, ZigzagAndHeadTailAreNeverSlowerThanContiguous) {
  const Model m = load_model("llama3-8b");
  const std::pair<Method, Method> twins[] = {{Method::ring, Method::ring_zigzag},
                                             {Method::allgather_contiguous, Method::allgather}};
  for (const std::string& sys : names("system")) {
    const System s = load_system(sys);
    for (int P : {2, 4, 8, 16, 64})
      for (std::int64_t N : {std::int64_t{1} << 13, std::int64_t{1} << 17, std::int64_t{1} << 21})
        for (const auto& [unbalanced, balanced] : twins) {
          const Result contiguous = simulate(m, s, plan(unbalanced, P, N, P, 1, P));
          const Result zigzag = simulate(m, s, plan(balanced, P, N, P, 1, P));
          ASSERT_TRUE(contiguous.valid && zigzag.valid);
          const std::string what = sys + " " + describe_structure(zigzag.plan) + " N=" + std::to_string(N);
          EXPECT_LE(zigzag.step_time_s, contiguous.step_time_s * (1 + 1e-12)) << what;
          EXPECT_LE(zigzag.time.attention, contiguous.time.attention * (1 + 1e-12)) << what;
          if (kv_allgather(balanced)) {
            EXPECT_GT(zigzag.time.attention_comm, 0) << what;
            EXPECT_NEAR(zigzag.time.exposed_attention_comm, zigzag.time.attention_comm,
                        1e-12 * zigzag.time.attention_comm) << what;
          }
        }
  }
}

TEST(Invariants, ContiguousCausalRingCostsAboutTwiceZigzagInAttentionCompute) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  const AttentionCost c = attention_layer_cost(m, s, plan(Method::ring, 16, 1 << 22, 16, 1, 16));
  const AttentionCost z = attention_layer_cost(m, s, plan(Method::ring_zigzag, 16, 1 << 22, 16, 1, 16));
  const double ratio = c.fwd_kernel_s / z.fwd_kernel_s;
  EXPECT_GT(ratio, 1.8);  // (P - 1/2) / (P / 2) = 1.94 at P = 16, less the efficiency gain of longer blocks
  EXPECT_LT(ratio, 2.0);
}

// A spread of plans over every model and system, with varied options.
std::vector<std::tuple<Model, System, Plan>> plan_sample() {
  std::vector<std::tuple<Model, System, Plan>> out;
  for (const std::string& mn : names("model"))
    for (const std::string& sn : {std::string("dgx-h100"), std::string("l20-pcie"), std::string("dgx-a100-40g")}) {
      const Model m = load_model(mn);
      const System s = load_system(sn);
      // TP 1 and 2: every structure with and without tensor parallelism, at twice (not four
      // times) the cost of the sample without it.
      SearchSpace space;
      space.tp = {1, 2};
      for (const Plan& st : structures(m, s, 16, 1 << 17, space)) out.emplace_back(m, s, st);
    }
  const std::size_t k = static_cast<std::size_t>(sample_stride());
  if (k > 1) {
    std::vector<std::tuple<Model, System, Plan>> every_kth;
    for (std::size_t i = 0; i < out.size(); i += k) every_kth.push_back(out[i]);
    return every_kth;
  }
  return out;
}

TEST(Invariants, MemoryPartsAddUpToThePeak) {
  int checked = 0;
  for (auto [m, s, st] : plan_sample()) {
    for (const MemoryOptions& mem : {MemoryOptions{}, memory_option_sets()[37], memory_option_sets().back()}) {
      st.mem = mem;
      const Result r = simulate(m, s, st);
      if (!r.valid) continue;
      const nlohmann::json j = to_json(m, s, r);
      double sum = 0;
      for (const auto& [k, v] : j["memory"].items()) sum += v.get<double>();
      EXPECT_NEAR(sum, j["peak_memory_bytes"].get<double>(), 1e-6 * sum) << describe(st);
      const double phase_max = std::max(r.memory.layer_phase_bytes, r.memory.loss_phase_bytes);
      EXPECT_NEAR(r.peak_memory_bytes(), phase_max, 1e-6 * phase_max);
      ++checked;
    }
  }
  EXPECT_GT(checked, 100 / sample_stride());
}

// One more of a memory option, each by name: the time-only ones (checkpointing, its offload, the
// tilings, the parameters' offload) and, for the peak, ZeRO's next stage and the optimizer's offload.
using Flip = void (*)(MemoryOptions&);
using NamedFlip = std::pair<const char*, Flip>;
const NamedFlip kTimeOnlyFlips[] = {
    {"selective", [](MemoryOptions& o) { if (o.checkpoint == Checkpoint::none) o.checkpoint = Checkpoint::selective; }},
    {"full", [](MemoryOptions& o) { o.checkpoint = Checkpoint::full; }},
    {"offload-ckpt", [](MemoryOptions& o) { if (o.checkpoint == Checkpoint::full) o.offload_checkpoints = true; }},
    {"tiled-mlp", [](MemoryOptions& o) { o.tiled_mlp = true; }},
    {"tiled-loss", [](MemoryOptions& o) { o.tiled_loss = true; }},
    {"offload-params", [](MemoryOptions& o) { if (o.zero == 3) o.offload_params = true; }},
};

TEST(Invariants, MoreMemoryOptionsNeverRaiseThePeak) {
  std::vector<NamedFlip> flips = {{"zero+1", [](MemoryOptions& o) { o.zero = std::min(3, o.zero + 1); }},
                                  {"offload-opt", [](MemoryOptions& o) { o.offload_optimizer = true; }}};
  flips.insert(flips.end(), std::begin(kTimeOnlyFlips), std::end(kTimeOnlyFlips));
  int checked = 0;
  for (auto [m, s, st] : plan_sample())
    for (const MemoryOptions& base : memory_option_sets()) {
      Plan p = st;
      p.mem = base;
      const Result before = simulate(m, s, p);
      if (!before.valid) continue;
      for (const auto& [name, flip] : flips) {
        Plan q = p;
        flip(q.mem);
        const Result after = simulate(m, s, q);
        ASSERT_TRUE(after.valid);
        EXPECT_LE(after.peak_memory_bytes(), before.peak_memory_bytes() * (1 + 1e-12))
            << m.name << " on " << s.name << ": " << describe(p) << " then " << name;
        ++checked;
      }
    }
  EXPECT_GT(checked, 10000 / sample_stride());
}

// The options that trade time for memory only add time: checkpointing (none, selective, full), its
// offload, tiled MLP and loss, and the parameters' offload make a step faster by no more than the
// data-parallel and host transfers it leaves exposed (the added compute can hide some of them),
// and never when it exposes none, under every framework profile.
TEST(Invariants, TheTimeOnlyOptionsNeverMakeAStepFaster) {
  const auto& flips = kTimeOnlyFlips;
  std::vector<std::tuple<Model, System, Plan>> sample;
  for (const std::string& fw : names("framework"))
    for (const char* mn : {"llama3-8b", "gpt-1.3b", "llama3-70b"}) {
      const Model m = load_model(mn);
      const System s = load_system("dgx-h100", "", load_framework(fw));
      if (!profile_mismatch(m, s).empty()) continue;  // a profile that does not describe the block
      for (const std::int64_t n : {std::int64_t{1} << 13, std::int64_t{1} << 17, std::int64_t{1} << 20})
        for (const Plan& st : structures(m, s, 16, n, SearchSpace{})) sample.emplace_back(m, s, st);
    }
  int checked = 0;
  const std::size_t k = static_cast<std::size_t>(sample_stride());
  for (std::size_t i = 0; i < sample.size(); i += k) {
    const auto& [m, s, st] = sample[i];
    for (const MemoryOptions& base : memory_option_sets()) {
      Plan p = st;
      p.mem = base;
      const Result before = simulate(m, s, p);
      if (!before.valid) continue;
      for (const auto& [name, flip] : flips) {
        Plan q = p;
        flip(q.mem);
        const Result after = simulate(m, s, q);
        if (!after.valid) continue;  // a framework that does not run the option
        const double exposed = before.time.exposed_dp_comm + before.time.exposed_offload;
        EXPECT_GE(after.step_time_s, (before.step_time_s - exposed) * (1 - 1e-12))
            << m.name << " on " << s.name << " (" << s.profile.name << "): " << describe(p) << " then " << name;
        if (exposed == 0) {
          EXPECT_GE(after.step_time_s, before.step_time_s * (1 - 1e-12))
              << m.name << " on " << s.name << " (" << s.profile.name << "): " << describe(p) << " then " << name;
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 10000 / sample_stride());
}

// The advisor's two halves (simulate_time on the structure's costs derived once, then add_memory)
// give simulate()'s result, field for field: the JSON (every time, memory part and phase, the fits)
// and the step's figures. The costs come from the structure under other memory options and
// accumulation: they depend on neither.
TEST(Invariants, TheTwoHalvesAreSimulate) {
  int checked = 0;
  for (auto [m, s, st] : plan_sample()) {
    Plan other = st;
    other.mem = memory_option_sets().back();
    other.grad_accum_steps = 3;
    const StructureCosts costs = structure_costs(m, s, other);
    for (std::size_t k = 0; k < memory_option_sets().size(); k += 7) {
      st.mem = memory_option_sets()[k];
      st.grad_accum_steps = 1 + int(k % 3);
      const Result whole = simulate(m, s, st);
      Result halves = simulate_time(m, s, st, costs);
      EXPECT_EQ(halves.valid, whole.valid) << describe(st);
      EXPECT_FALSE(halves.fits) << "the time half knows no memory: " << describe(st);
      add_memory(m, s, halves);
      EXPECT_EQ(to_json(m, s, halves), to_json(m, s, whole)) << describe(st);
      EXPECT_EQ(halves.figures.unattributed_s, whole.figures.unattributed_s) << describe(st);
      EXPECT_EQ(halves.figures.dp_bwd_exposed_s, whole.figures.dp_bwd_exposed_s) << describe(st);
      checked += whole.valid;
    }
  }
  EXPECT_GT(checked, 1000 / sample_stride());
  // Costs of another structure are refused, not used.
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  const Plan p = plan(Method::ulysses, 8, 1 << 16, 8, 8, 1);
  EXPECT_THROW(simulate_time(m, s, plan(Method::ulysses, 8, 1 << 17, 8, 8, 1), structure_costs(m, s, p)),
               std::logic_error);
}

TEST(Invariants, RecomputationCostsTimeButNeverCountsInMfu) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  Plan p = plan(Method::ring_zigzag, 8, 1 << 18, 8, 1, 8);
  const Result none = simulate(m, s, p);
  p.mem.checkpoint = Checkpoint::full;
  const Result full = simulate(m, s, p);
  EXPECT_DOUBLE_EQ(full.model_flops_per_gpu, none.model_flops_per_gpu);
  EXPECT_GT(full.time.recompute, 0);
  EXPECT_GT(full.step_time_s, none.step_time_s);
  EXPECT_LT(full.mfu, none.mfu);
}

TEST(Invariants, StepTimeIsComputePlusWhatIsExposed) {
  for (auto [m, s, st] : plan_sample()) {
    st.mem = memory_option_sets()[77];
    const Result r = simulate(m, s, st);
    if (!r.valid) continue;
    const TimeBreakdown& t = r.time;
    EXPECT_NEAR(r.step_time_s, t.compute + t.exposed_comm + t.optimizer + t.exposed_offload, 1e-9 * r.step_time_s);
    EXPECT_NEAR(t.compute, t.forward + t.backward, 1e-9 * t.compute);
    EXPECT_LE(t.exposed_comm, t.comm * (1 + 1e-12));
    EXPECT_LE(t.exposed_attention_comm, t.attention_comm * (1 + 1e-12));
    EXPECT_GT(r.mfu, 0);
    EXPECT_LT(r.mfu, 1);
  }
}

}  // namespace
}  // namespace seqpar::sim

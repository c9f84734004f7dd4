// The sharded training step on virtual ranks (P threads, one process) equals the unsharded one:
// loss and every parameter gradient, for Ulysses (with KV-head replication), Ring (contiguous
// and zigzag), hybrid U x R, all-gather KV (head/tail and contiguous), and with data parallelism
// on top. Also: the loss falls, and the
// counting allocator sees every part.
#include <gtest/gtest.h>


#include "seqpar/comm/communicator.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/train/trainer.hpp"
#include "seqpar/train/validation.hpp"
#include "virtual_ranks.hpp"

namespace seqpar::train {
namespace {

TrainSetup tiny(int u, int r, bool zigzag, KvExchange kv = KvExchange::ring_hops) {
  TrainSetup s;
  s.model.layers = 2;
  s.model.hidden = 32;
  s.model.heads = 4;
  s.model.kv_heads = 2;
  s.model.head_dim = 8;
  s.model.ffn = 64;
  s.model.vocab = 64;
  s.seq_len = 32;
  s.micro_batch = 2;
  s.ulysses = u;
  s.ring = r;
  s.zigzag = zigzag;
  s.kv = kv;
  return s;
}

StepValues reference(const TrainSetup& s, int dp) {
  auto be = make_cpu_backend();
  Trainer t(*be, nullptr, reference_setup(s, dp));
  const StepResult r = t.compute_gradients();
  return {r.loss, t.grads_host()};
}

// Runs one gradient computation on `world` virtual ranks in fp32 and checks each rank against the
// fp32 reference: the same sums in another order, so every tensor agrees to fp32 rounding.
void expect_matches_reference(const TrainSetup& s, int world) {
  const int dp = world / (s.ulysses * s.ring);
  const StepValues ref = reference(s, dp);
  const testing::VirtualRun run = testing::run_on_virtual_ranks(s, world);
  const std::vector<StepValues>& steps = run.steps;
  const std::vector<ParamTensor>& tensors = run.tensors;
  const std::vector<std::string>& errors = run.errors;
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
    const StepValues& got = steps[static_cast<std::size_t>(r)];
    EXPECT_NEAR(got.loss, ref.loss, 1e-5 * ref.loss) << "rank " << r;
    const std::vector<double> e = tensor_errors(tensors, got, ref);
    for (std::size_t i = 1; i < e.size(); ++i)
      EXPECT_LT(e[i], 1e-5) << "rank " << r << ": grad " << tensors[i - 1].name;
  }
}

TEST(SpVirtual, UlyssesSplitsKvHeads) { expect_matches_reference(tiny(2, 1, false), 2); }
TEST(SpVirtual, UlyssesReplicatesKvHeads) { expect_matches_reference(tiny(4, 1, false), 4); }
TEST(SpVirtual, RingContiguous) { expect_matches_reference(tiny(1, 4, false), 4); }
TEST(SpVirtual, RingZigzag) { expect_matches_reference(tiny(1, 4, true), 4); }
TEST(SpVirtual, HybridTwoByTwo) { expect_matches_reference(tiny(2, 2, true), 4); }
TEST(SpVirtual, RingWithDataParallel) { expect_matches_reference(tiny(1, 2, true), 4); }
// All-gather KV: 2 ranks (head/tail chunks 0,3 and 1,2: the second rank's are adjacent), 4 ranks,
// 8 ranks (chunks of 2 tokens), the contiguous layout, and with data parallelism on top.
TEST(SpVirtual, AllGatherHeadTail) {
  for (int r : {2, 4, 8}) expect_matches_reference(tiny(1, r, true, KvExchange::all_gather), r);
}
TEST(SpVirtual, AllGatherContiguous) { expect_matches_reference(tiny(1, 4, false, KvExchange::all_gather), 4); }
TEST(SpVirtual, AllGatherWithDataParallel) { expect_matches_reference(tiny(1, 2, true, KvExchange::all_gather), 4); }
TEST(SpVirtual, AllGatherRefusesAUlyssesPart) {
  EXPECT_THROW(SeqLayout(32, 2, 2, true, KvExchange::all_gather), Error);
}

TEST(SpVirtual, RejectsHeadsThatDoNotSplit) {
  TrainSetup s = tiny(4, 1, false);
  s.model.kv_heads = 4;
  s.model.heads = 6;
  auto be = make_cpu_backend();
  EXPECT_THROW(Trainer(*be, nullptr, reference_setup(s, 1)), Error);  // heads % kv_heads
  auto comms = comm::make_virtual_world(1, false);
  s = tiny(3, 1, false);  // kv_heads 2 vs U 3: neither divides
  s.model.heads = 6;
  s.seq_len = 30;
  EXPECT_THROW(check_ulysses_heads(s.model.heads, s.model.kv_heads, 3), Error);
}

TEST(Training, LossFallsOverTwentySteps) {
  TrainSetup s = tiny(1, 1, false);
  s.opt.lr = 1e-2f;
  auto be = make_cpu_backend();
  Trainer t(*be, nullptr, s);
  double first = 0, last = 0;
  for (int i = 0; i < 20; ++i) {
    const StepResult r = t.step();
    if (i == 0) first = r.loss;
    last = r.loss;
    ASSERT_TRUE(std::isfinite(r.loss));
  }
  EXPECT_NEAR(first, std::log(64.0), 0.2);  // uniform guess at the start
  EXPECT_LT(last, 0.5 * first);
}

// The whole model's wiring (residuals, norms, RoPE, attention, MLP, LM head, loss averaging):
// for every tensor, its largest gradient entry against a central difference of the step's loss.
TEST(Training, GradientsMatchFiniteDifferencesOfTheLoss) {
  for (const bool tied : {false, true}) {
    TrainSetup s = tiny(1, 1, false);
    s.model.tied_embeddings = tied;
    auto be = make_cpu_backend();
    Trainer t(*be, nullptr, s);
    t.compute_gradients();
    const std::vector<float> grads = t.grads_host(), params = t.params_host();
    for (const ParamTensor& pt : t.model().tensors()) {
      std::int64_t at = pt.offset;
      for (std::int64_t i = pt.offset; i < pt.offset + pt.count; ++i)
        if (std::abs(grads[static_cast<std::size_t>(i)]) > std::abs(grads[static_cast<std::size_t>(at)])) at = i;
      const float eps = 2e-2f, keep = params[static_cast<std::size_t>(at)];
      auto loss_at = [&](float value) {
        be->copy_from_host(t.model().params() + at, &value, sizeof(float));
        return t.compute_gradients().loss;
      };
      const double fd = (loss_at(keep + eps) - loss_at(keep - eps)) / (2.0 * eps);
      loss_at(keep);
      const double g = grads[static_cast<std::size_t>(at)];
      EXPECT_NEAR(fd, g, 0.05 * std::abs(g) + 2e-5) << pt.name << (tied ? " (tied)" : "");
    }
  }
}

TEST(Training, CountingAllocatorSeesEveryPart) {
  auto be = make_cpu_backend();
  TrainSetup s = tiny(1, 1, false);
  {
    Trainer t(*be, nullptr, s);
    const std::int64_t params = t.model().param_count() * 4;
    EXPECT_EQ(be->memory().current_bytes(MemCategory::parameters), params);
    EXPECT_EQ(be->memory().current_bytes(MemCategory::gradients), params);
    EXPECT_EQ(be->memory().current_bytes(MemCategory::optimizer_states), 2 * params);
    be->memory().reset_peak();
    t.step();
    const MemoryTracker& m = be->memory();
    EXPECT_GT(m.at_peak_bytes(MemCategory::activations), 0);
    EXPECT_EQ(m.current_bytes(MemCategory::activations), 0);  // all freed after the step
    std::int64_t sum = 0;
    for (int c = 0; c < kMemCategories; ++c) sum += m.at_peak_bytes(static_cast<MemCategory>(c));
    EXPECT_EQ(sum, m.peak_bytes());
  }
  EXPECT_EQ(be->memory().current_bytes(), 0);
}

}  // namespace
}  // namespace seqpar::train

// Packed documents in the training step (doc_shards.hpp): the placement holds every token once
// with equal group buffers; the sharded step under the document mask equals the unsharded one (fp32,
// every method x balancer); and the attention each rank records equals core's count_batch_work for
// the same sequences (every method x balancer x SP 2..8, fresh random workloads).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "seqpar/core/doc_work.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/workload.hpp"
#include "seqpar/train/doc_shards.hpp"
#include "seqpar/train/trainer.hpp"
#include "seqpar/train/validation.hpp"
#include "validation_cases.hpp"
#include "virtual_ranks.hpp"

namespace seqpar::train {
namespace {

constexpr Balancer kBalancers[] = {Balancer::contiguous, Balancer::zigzag, Balancer::per_document,
                                   Balancer::balanced};

// A fresh seed per run, printed where a test fails.
std::uint64_t fresh_seed() { return std::random_device{}(); }

// A random workload spec of short and long documents for sequences of n tokens.
std::string random_documents(std::mt19937_64& rng, std::int64_t n) {
  const std::int64_t hi = std::uniform_int_distribution<std::int64_t>(2, n)(rng);
  const std::int64_t lo = std::uniform_int_distribution<std::int64_t>(1, hi)(rng);
  return "uniform:" + std::to_string(lo) + ":" + std::to_string(hi);
}

TEST(DocShards, EveryTokenOnceInEqualGroupsWithPaddingThatAttendsNothing) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 40; ++trial)
    for (const Balancer b : kBalancers)
      for (const auto& [u, r] : std::vector<std::pair<int, int>>{{1, 2}, {2, 1}, {1, 4}, {2, 2}, {1, 3}}) {
        const std::int64_t n = 12LL * u * r;
        const Workload w = make_workload(random_documents(rng, n), "fill", rng(), 2);
        for (const PackedBatch& pb : sample_workload(w, n).batches) {
          const DocLayout placed = place_documents(pb.cu_seqlens, u, r, b);
          const std::int64_t g = doc_group_len(placed, u);
          const DocShards sh = shard_documents(placed, pb.cu_seqlens, u, g + u);  // room to spare: trailing padding
          ASSERT_EQ(sh.groups.size(), static_cast<std::size_t>(r));
          std::set<std::int64_t> seen_src, seen_pos;
          std::int64_t padding = 0;
          for (const auto& grp : sh.groups) {
            int offset = 0;
            for (const Segment& sg : grp) {
              EXPECT_EQ(sg.offset, offset);
              offset += sg.len;
              for (int i = 0; i < sg.len; ++i) {
                EXPECT_TRUE(seen_pos.insert(sg.pos + i).second) << "packed position twice";
                if (sg.doc < 0) {
                  ++padding;
                  continue;
                }
                EXPECT_LT(sg.doc_pos + i, sh.doc_len(sg.doc));
                EXPECT_TRUE(seen_src.insert(sh.source(sg) + i).second) << "token twice";
              }
            }
            EXPECT_EQ(offset, g + u);
          }
          EXPECT_EQ(static_cast<std::int64_t>(seen_src.size()), n);
          EXPECT_EQ(*seen_pos.rbegin(), static_cast<std::int64_t>(r) * (g + u) - 1);
          std::int64_t placed_padding = 0;
          for (const RankHold& h : placed.ranks) placed_padding += h.padding_tokens;
          EXPECT_EQ(padding, placed_padding + static_cast<std::int64_t>(r) * (g + u) - [&] {
            std::int64_t t = 0;
            for (const RankHold& h : placed.ranks) t += h.tokens;
            return t;
          }());
          EXPECT_THROW(shard_documents(placed, pb.cu_seqlens, u, g - 1), Error);
        }
      }
}

TrainSetup doc_setup(const seqpar::Plan& p, const std::string& docs, Balancer b, std::uint64_t doc_seed) {
  ModelConfig m{.layers = 1, .hidden = 32, .heads = 8, .kv_heads = 2, .head_dim = 4, .ffn = 32,
      .vocab = 64, .layer_kinds = {}};
  TrainSetup s = testing::setup_of(p, m);
  s.documents = make_workload(docs, "fill", doc_seed, 4);
  s.balancer = b;
  return s;
}

// Every method of the table at SP 2..8 (sequences of 8 x SP tokens: divisible as every balancer
// needs), every balancer: each rank's recorded pairs = count_batch_work's for its ring rank, per
// head, x its H/U heads x layers, summed over the micro-batch's sequences; and the sharded loss
// and gradients equal the unsharded step's (fp32) where SP <= 4.
TEST(DocumentStep, RecordedAttentionEqualsCoreCountAndTheStepEqualsTheUnshardedOne) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const ModelConfig model = doc_setup({}, "fixed:1", Balancer::contiguous, 1).model;
  int checked = 0;
  for (int sp = 2; sp <= 8; ++sp)
    for (const testing::PlanCase& c : testing::table_plans({sp}, model, 8LL * sp)) {
      for (const Balancer b : kBalancers) {
        const std::string docs = random_documents(rng, c.plan.seq_len);
        const std::uint64_t doc_seed = rng();
        SCOPED_TRACE(c.label + ", " + to_string(b) + ", " + docs + ", doc seed " + std::to_string(doc_seed));
        const TrainSetup s = doc_setup(c.plan, docs, b, doc_seed);
        const int u = s.ulysses, r = s.ring;
        const SpShape shape{u, r, s.kv == KvExchange::all_gather && r > 1};
        std::vector<std::int64_t> recorded(static_cast<std::size_t>(sp)), counted(static_cast<std::size_t>(sp));
        std::vector<StepValues> values(static_cast<std::size_t>(sp));
        const auto errors = testing::on_virtual_ranks(s, sp, Precision::fp32, [&](int rank, Backend&, Trainer& t) {
          const StepResult st = t.compute_gradients();
          values[static_cast<std::size_t>(rank)] = {st.loss, t.grads_host()};
          recorded[static_cast<std::size_t>(rank)] = t.attention_work().pairs;
          std::int64_t pairs = 0;
          for (const auto& cu : t.step_documents())
            pairs += count_batch_work(cu, shape, b).ranks[static_cast<std::size_t>(rank / u)].pairs;
          counted[static_cast<std::size_t>(rank)] = pairs * (s.model.heads / u) * s.model.layers;
        });
        for (int k = 0; k < sp; ++k) {
          ASSERT_EQ(errors[static_cast<std::size_t>(k)], "") << "rank " << k;
          EXPECT_EQ(recorded[static_cast<std::size_t>(k)], counted[static_cast<std::size_t>(k)]) << "rank " << k;
        }
        // (A rank may hold padding alone: per-document pads short documents to 2 x SP tokens.)
        std::int64_t all = 0;
        for (const std::int64_t x : recorded) all += x;
        EXPECT_GT(all, 0);
        ++checked;
        if (sp > 4) continue;  // the equality below is the costlier half
        auto be = make_cpu_backend();
        Trainer ref(*be, nullptr, reference_setup(s, 1));
        const StepResult want = ref.compute_gradients();
        const StepValues want_v{want.loss, ref.grads_host()};
        std::vector<ParamTensor> tensors = ref.model().tensors();
        for (int k = 0; k < sp; ++k) {
          EXPECT_NEAR(values[static_cast<std::size_t>(k)].loss, want.loss, 1e-5 * want.loss) << "rank " << k;
          const std::vector<double> e = tensor_errors(tensors, values[static_cast<std::size_t>(k)], want_v);
          for (std::size_t i = 1; i < e.size(); ++i) EXPECT_LT(e[i], 1e-5) << "rank " << k << ": grad " << tensors[i - 1].name;
        }
      }
    }
  EXPECT_GT(checked, 5 * 4 * 4);
}

// The mask changes the step: with documents the loss and gradients differ from one causal sequence
// of the same tokens (so the equality above is not that of two unmasked steps), and a document's
// last token carries no label.
TEST(DocumentStep, TheMaskAndTheLabelsFollowTheDocuments) {
  seqpar::Plan p;
  p.method = seqpar::Method::ring;
  p.sp = p.gpus = p.ring_degree = 2;
  p.seq_len = 32;
  p.micro_batch = 1;
  p.mem = train_memory_default();
  TrainSetup with = doc_setup(p, "fixed:5", Balancer::contiguous, 1);
  with.ring = with.ulysses = 1;
  TrainSetup without = with;
  without.documents.reset();
  without.balancer.reset();
  auto be = make_cpu_backend();
  Trainer a(*be, nullptr, with), b(*be, nullptr, without);
  const StepResult ra = a.compute_gradients(), rb = b.compute_gradients();
  EXPECT_EQ(ra.real_tokens, 32 - 7);  // 7 documents (6 of 5 tokens, one of 2): 7 last tokens unlabelled
  EXPECT_EQ(rb.real_tokens, 31);
  EXPECT_NE(ra.loss, rb.loss);
  for (std::size_t k = 0; k < a.labels().size(); ++k) {
    EXPECT_EQ(a.labels()[k] < 0, k % 5 == 4 || k == 31) << "token " << k;
    EXPECT_EQ(a.positions()[k], static_cast<int>(k % 5)) << "token " << k;
  }
  EXPECT_EQ(a.attention_work().pairs, (6 * 15 + 3) * with.model.heads * with.model.layers);
}

TEST(DocumentStep, RefusesWhatTheLayoutsRefuse) {
  seqpar::Plan p;
  p.method = seqpar::Method::ring_zigzag;
  p.sp = p.gpus = p.ring_degree = 4;
  p.seq_len = 36;  // not a multiple of 2 x 4
  p.micro_batch = 1;
  p.mem = train_memory_default();
  const TrainSetup s = doc_setup(p, "fixed:5", Balancer::zigzag, 1);
  const auto errors = testing::on_virtual_ranks(s, 4, Precision::fp32, [](int, Backend&, Trainer&) {});
  for (const std::string& e : errors) EXPECT_NE(e.find("divisible"), std::string::npos) << e;
}

// One-token documents leave no label: a step of them alone has no loss and is refused up front;
// with one longer document in the step it runs.
TEST(DocumentStep, RefusesAStepWithoutALabel) {
  seqpar::Plan p;
  p.method = seqpar::Method::ring;
  p.sp = p.gpus = p.ring_degree = 1;
  p.seq_len = 8;
  p.micro_batch = 1;
  p.mem = train_memory_default();
  auto be = make_cpu_backend();
  try {
    Trainer t(*be, nullptr, doc_setup(p, "fixed:1", Balancer::contiguous, 1));
    ADD_FAILURE() << "one-token documents were not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("none of its tokens has a label"), std::string::npos) << e.what();
  }
  Trainer ok(*be, nullptr, doc_setup(p, "fixed:2", Balancer::contiguous, 1));
  EXPECT_EQ(ok.compute_gradients().real_tokens, 4);
}

}  // namespace
}  // namespace seqpar::train

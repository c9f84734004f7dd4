// A packed-document workload in the simulator (document_cost.hpp): with every document as long as
// the sequence the step is today's, bit for bit, for every method and SP degree; under a mix of
// lengths the load balancers part where the issue says they do (Ulysses balanced by heads, zigzag
// not, per-document sharding near even); and the CLI's workload section and table.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/attention_kernels.hpp"
#include "seqpar/sim/document_cost.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/result_json.hpp"
#include "seqpar/sim/simulate.hpp"

namespace seqpar::sim {
namespace {

using nlohmann::json;

SampledWorkload sampled_docs(const std::string& spec, std::int64_t seq_len, int batches = 8) {
  return sample_workload(make_workload(spec, "fill", 7, batches), seq_len);
}

TEST(Documents, OneDocumentFillingTheSequenceIsTodaysStep) {
  const Model m = load_model("llama3-8b");
  int compared = 0;
  for (const char* sys : {"dgx-h100", "l20-pcie"}) {
    const System s = load_system(sys);
    for (const Method method : kAllMethods)
      for (const int sp : {2, 4, 8, 16})
        for (const std::int64_t n : {std::int64_t{96} << 10, std::int64_t{1} << 20}) {
          Plan p = normalized(Plan{}, s.gpus_per_node);
          p.method = method;
          p.gpus = 16;
          p.sp = sp;
          p.seq_len = n;
          p.ulysses_degree = p.ring_degree = 0;
          p = normalized(p, s.gpus_per_node);
          const Result plain = simulate(m, s, p);
          if (!plain.valid) continue;
          const SampledWorkload one = sampled_docs("fixed:" + std::to_string(n), n, 2);
          std::vector<Balancer> balancers = {native_balancer(p)};
          if (native_balancer(p) == Balancer::zigzag) balancers.insert(balancers.end(), {Balancer::per_document, Balancer::balanced});
          for (const Balancer b : balancers) {
            const DocumentCosts c = document_costs(one, p, b, s.gpu);
            for (double f : c.step_factor) EXPECT_EQ(f, 1.0) << describe(p) << " " << to_string(b);
            EXPECT_EQ(c.work_ratio, 1.0);
            EXPECT_EQ(c.token_factor, 1.0);
            const Result docs = simulate(m, s, p, c);
            ASSERT_EQ(docs.balancer, b);
            json with = to_json(m, s, docs);
            EXPECT_EQ(with["balancer"], to_string(b));
            with.erase("balancer");  // the one key a workload adds
            EXPECT_EQ(with, to_json(m, s, plain)) << describe(p) << " on " << sys << " " << to_string(b);
            ++compared;
          }
        }
  }
  EXPECT_GT(compared, 60);
}

TEST(Documents, TheBalancersPartUnderAMixOfLengths) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  const std::int64_t n = std::int64_t{128} << 10;
  const SampledWorkload w = sampled_docs("lognormal:8.5:1.3", n, 16);
  Plan p = normalized(Plan{}, s.gpus_per_node);
  p.gpus = p.sp = 8;
  p.seq_len = n;
  p.method = Method::ring_zigzag;
  p.ulysses_degree = 0;
  p.ring_degree = 0;
  p = normalized(p, s.gpus_per_node);
  const DocumentCosts zig = document_costs(w, p, Balancer::zigzag, s.gpu), per = document_costs(w, p, Balancer::per_document, s.gpu);
  EXPECT_GT(zig.work.imbalance_tiles_mean, 1.3);
  EXPECT_LT(per.work.imbalance_tiles_mean, 1.05);
  EXPECT_LT(zig.work_ratio, 0.5) << "documents of a few thousand tokens leave a fraction of the causal work";
  EXPECT_LT(simulate(m, s, p, per).step_time_s, simulate(m, s, p, zig).step_time_s);
  // The ring's slowest step waits for its most loaded rank: a step's time never falls below its share.
  EXPECT_LT(simulate(m, s, p, zig).step_time_s, simulate(m, s, p).step_time_s);
  Plan u = p;
  u.method = Method::ulysses;
  u.ulysses_degree = 8;
  u.ring_degree = 1;
  const DocumentCosts uc = document_costs(w, u, native_balancer(u), s.gpu);
  EXPECT_EQ(uc.work.imbalance_tiles_mean, 1.0);
  // Ulysses' work is the documents' own: its attention time falls by the tiles it leaves.
  EXPECT_LT(simulate(m, s, u, uc).time.attention_compute, 0.6 * simulate(m, s, u).time.attention_compute);
  EXPECT_THROW(document_costs(sampled_docs("fixed:1K", n / 2, 1), p, Balancer::zigzag, s.gpu), Error);
}

TEST(DocumentsCli, SimulateShowsTheWorkloadAndEveryMethodAndBalancer) {
  const auto r = seqpar::testing::seqpar(
      "simulate --model llama3-8b --gpus 8 --seq-len 128K --method ring-zigzag --sp 8 --documents lognormal:8.5:1.3");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("workload: --documents lognormal:8.5:1.3, packing fill"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("attention work under the document mask: "), std::string::npos);
  EXPECT_NE(r.out.find("per-document"), std::string::npos);
  // Short documents: the kernel's varlen figure, or that it has none, with the source either way.
  EXPECT_NE(r.out.find("short documents: whole 128x128 tiles charged"), std::string::npos) << r.out;
  const auto none = seqpar::testing::seqpar(
      "simulate --model llama3-8b --system l20-pcie --gpus 8 --seq-len 64K --method ring-zigzag --sp 8 --documents "
      "lognormal:8.5:1.3");
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_NE(none.out.find("no measurement of FlashAttention-2 over short documents on L20; assumed"), std::string::npos)
      << none.out;
  const auto fa3 = seqpar::testing::seqpar(
      "simulate --model llama3-8b --gpus 8 --seq-len 128K --method ring-zigzag --sp 8 --attention-kernel "
      "flash-attention-3 --balancer per-document --documents lognormal:8.5:1.3 --json");
  ASSERT_EQ(fa3.code, 0) << fa3.err;
  const json sd = json::parse(fa3.out)["workload"]["short_documents"];
  EXPECT_TRUE(sd["measured"].get<bool>());
  EXPECT_NE(sd["source"].get<std::string>().find("pytorch/benchmark PR 2391"), std::string::npos);
  EXPECT_EQ(sd["tile_cost"].size(), 6u);
  EXPECT_GT(sd["factor"].get<double>(), 1.0) << "per-document pieces of short documents cost more per tile";
  const auto j = seqpar::testing::seqpar(
      "simulate --model llama3-8b --gpus 8 --seq-len 128K --method ring-zigzag --sp 8 --documents lognormal:8.5:1.3 "
      "--balancer per-document --json");
  ASSERT_EQ(j.code, 0) << j.err;
  const json doc = json::parse(j.out);
  EXPECT_EQ(doc["workload"]["balancer"], "per-document");
  EXPECT_GT(doc["workload"]["drawn"]["mean"].get<double>(), 1000);
  EXPECT_LT(doc["workload"]["imbalance"]["mean"].get<double>(), 1.05);
  EXPECT_GE(doc["document_table"].size(), 5u);
  // One document a sequence: the step without documents.
  const auto plain = seqpar::testing::seqpar("simulate --model llama3-8b --gpus 8 --seq-len 128K --method ring-zigzag --sp 8 --json");
  const auto one = seqpar::testing::seqpar(
      "simulate --model llama3-8b --gpus 8 --seq-len 128K --method ring-zigzag --sp 8 --documents fixed:128K --json");
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_EQ(json::parse(one.out)["step_time_s"], json::parse(plain.out)["step_time_s"]);
  // advise names the balancer of its plan and of every ranked row; --balancer is its to choose.
  const auto a = seqpar::testing::seqpar(
      "advise --model llama3-8b --gpus 16 --seq-len 128K --tp 1 --documents lognormal:8.5:1.3 --doc-batches 4 --top 40");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_NE(a.out.find("workload: --documents lognormal:8.5:1.3"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("best: "), std::string::npos);
  const std::string best = a.out.substr(a.out.find("best: "), a.out.find('\n', a.out.find("best: ")) - a.out.find("best: "));
  EXPECT_NE(best.find(" balancer="), std::string::npos) << best;
  EXPECT_NE(a.out.find("balancer=per-document"), std::string::npos);
  const auto aj = seqpar::testing::seqpar(
      "advise --model llama3-8b --gpus 16 --seq-len 128K --tp 1 --documents lognormal:8.5:1.3 --doc-batches 4 --json");
  ASSERT_EQ(aj.code, 0) << aj.err;
  const json adv = json::parse(aj.out);
  EXPECT_TRUE(adv["best"].contains("balancer"));
  EXPECT_TRUE(adv["ranked"][0].contains("balancer"));
  EXPECT_GT(adv["workload"]["drawn"]["count"].get<int>(), 10);
  EXPECT_EQ(seqpar::testing::seqpar("advise --gpus 16 --seq-len 128K --documents fixed:1K --balancer zigzag").code, 2);
  // The workload's options without a workload are refused, naming --documents.
  const auto refused = seqpar::testing::seqpar("simulate --gpus 8 --seq-len 128K --balancer zigzag");
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("give it with --documents"), std::string::npos) << refused.err;
}

// The short-document figure (hardware.hpp: VarlenAttention): a measured curve becomes a cost per
// tile relative to the longest length's; it raises the cost of a workload of short pieces, leaves a
// workload of long documents alone, and is what the preset says it is for every GPU and kernel.
TEST(Documents, ShortDocumentTilesCostWhatTheVarlenFigureSays) {
  VarlenAttention v;
  v.lengths = {512, 2048, 16384};
  v.flops_per_s = {300e12, 450e12, 600e12};
  v.causal = false;
  const std::vector<TileCost> unmasked = varlen_tile_cost(v);
  ASSERT_EQ(unmasked.size(), 3u);
  EXPECT_DOUBLE_EQ(unmasked[0].cost, 2.0);  // whole tiles at every length: the rates' ratio
  EXPECT_DOUBLE_EQ(unmasked[1].cost, 600.0 / 450.0);
  EXPECT_EQ(unmasked[2].cost, 1.0);
  // Measured under a causal mask the rate counts half the FLOPs, and a short document wastes more
  // of its diagonal tiles: at equal rates a tile of it runs faster (it does less useful work).
  v.causal = true;
  v.flops_per_s = {600e12, 600e12, 600e12};
  const std::vector<TileCost> causal = varlen_tile_cost(v);
  // 512 tokens: 512 x 513 / 2 pairs over 10 tiles; 16K: 16384 x 16385 / 2 over 128 x 129 / 2 tiles.
  EXPECT_NEAR(causal[0].cost, (512.0 * 513 / 2 / 10) / (16384.0 * 16385 / 2 / (128.0 * 129 / 2)), 1e-12);
  EXPECT_LT(causal[0].cost, causal[1].cost);
  // Between points the curve is linear in log(rows); beyond them the nearest end's.
  EXPECT_NEAR(tile_cost_at(unmasked, 1024), (2.0 + 600.0 / 450.0) / 2, 1e-12);
  EXPECT_EQ(tile_cost_at(unmasked, 64), 2.0);
  EXPECT_EQ(tile_cost_at(unmasked, std::int64_t{1} << 20), 1.0);
  EXPECT_TRUE(varlen_tile_cost(VarlenAttention{}).empty());

  // In the step: the same workload on the same GPU with and without the figure.
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100", "flash-attention-3");
  ASSERT_TRUE(s.gpu.varlen.measured()) << s.gpu.varlen.source;
  System bare = s;
  bare.gpu.varlen = VarlenAttention{};
  const std::int64_t n = std::int64_t{128} << 10;
  Plan p = normalized(Plan{}, s.gpus_per_node);
  p.gpus = p.sp = 4;
  p.seq_len = n;
  p.method = Method::ring_zigzag;
  p.ulysses_degree = p.ring_degree = 0;
  p = normalized(p, s.gpus_per_node);
  const std::uint64_t seed = ::testing::UnitTest::GetInstance()->random_seed();
  const SampledWorkload shorts = sample_workload(make_workload("uniform:256:2048", "fill", seed, 4), n);
  const DocumentCosts with = document_costs(shorts, p, Balancer::per_document, s.gpu),
                      without = document_costs(shorts, p, Balancer::per_document, bare.gpu);
  EXPECT_GT(with.short_document_factor, 1.2) << "pieces of 64-512 rows per rank";
  EXPECT_EQ(without.short_document_factor, 1.0);
  EXPECT_FALSE(without.varlen_measured);
  EXPECT_EQ(with.work.rank_tiles, without.work.rank_tiles) << "the figure weights tiles, it does not move them";
  for (std::size_t k = 0; k < with.step_factor.size(); ++k) EXPECT_GT(with.step_factor[k], without.step_factor[k]);
  EXPECT_GT(simulate(m, s, p, with).time.attention_compute, simulate(m, bare, p, without).time.attention_compute);
  // Two 64K documents a sequence: every rank holds 16K rows of each (the longest measured), cost 1.
  const SampledWorkload longs = sample_workload(make_workload("fixed:64K", "fill", seed, 4), n);
  const DocumentCosts lw = document_costs(longs, p, Balancer::per_document, s.gpu);
  const DocumentCosts lo = document_costs(longs, p, Balancer::per_document, bare.gpu);
  EXPECT_EQ(lw.step_factor, lo.step_factor);

  // Every GPU preset's default kernel and each of its other kernels say what they assume.
  for (const PresetEntry& e : builtin_presets()) {
    if (e.kind != "gpu") continue;
    for (const std::string& k : attention_kernel_names(e.document)) {
      const Gpu g = gpu_from_json(gpu_document_with_attention_kernel(e.document, k, e.name), e.name);
      const json& entry = k == attention_kernel_names(e.document).front() ? e.document : e.document["attention_kernels"][k];
      EXPECT_TRUE(entry.contains("varlen_attention")) << e.name << " " << k;
      if (!g.varlen.measured()) {
        EXPECT_EQ(g.varlen.source.rfind("no measurement", 0), 0u) << e.name << " " << k << ": " << g.varlen.source;
      }
    }
  }
}

// advise under a workload ranks every structure with every balancer worth comparing and names the
// balancer of its plan; with one document a sequence its answer is the plain advise's.
TEST(Documents, AdviseRanksTheLoadBalancersAndNamesTheOneItChose) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  const std::int64_t n = std::int64_t{128} << 10;
  SearchSpace space;
  space.tp = {1};
  space.documents = std::make_shared<const SampledWorkload>(sampled_docs("lognormal:8.5:1.3", n, 8));
  const Advice a = advise(m, s, 16, n, space);
  ASSERT_NE(a.best(), nullptr);
  ASSERT_TRUE(a.best()->balancer.has_value());
  int per_document = 0, zigzag = 0;
  for (const Result& r : a.ranked) {
    ASSERT_TRUE(r.balancer.has_value()) << describe(r.plan);
    per_document += *r.balancer == Balancer::per_document;
    zigzag += *r.balancer == Balancer::zigzag;
  }
  EXPECT_GT(per_document, 3);
  EXPECT_GT(zigzag, 3);
  // The best plan's numbers are simulate's under its own balancer.
  const DocumentCosts c = document_costs(*space.documents, a.best()->plan, *a.best()->balancer, s.gpu);
  EXPECT_EQ(simulate(m, s, a.best()->plan, c).step_time_s, a.best()->step_time_s);
  ASSERT_GE(a.reasons.size(), 2u);
  EXPECT_NE(a.reasons[1].find("load balancer " + to_string(*a.best()->balancer) + ": the slowest ring rank does"),
            std::string::npos)
      << a.reasons[1];
  // No balancer beats the chosen plan: it is the fastest of every structure x balancer that fits.
  for (const Result& r : a.ranked) EXPECT_LE(r.tokens_per_s_per_gpu, a.best()->tokens_per_s_per_gpu);
  // One document a sequence: the plain advise's best plan and throughput.
  SearchSpace one = space;
  one.documents = std::make_shared<const SampledWorkload>(sampled_docs("fixed:128K", n, 2));
  SearchSpace plain = space;
  plain.documents.reset();
  const Advice o = advise(m, s, 16, n, one), p = advise(m, s, 16, n, plain);
  ASSERT_NE(o.best(), nullptr);
  EXPECT_EQ(o.best()->plan, p.best()->plan);
  EXPECT_EQ(o.best()->tokens_per_s_per_gpu, p.best()->tokens_per_s_per_gpu);
}

}  // namespace
}  // namespace seqpar::sim

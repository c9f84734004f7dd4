// maxlen and sweep under a packed-document workload (issue 34): maxlen's answer fits under the
// workload in simulate and one granule more does not; with every document filling the sequence
// both are today's, and under a skewed mix what the workload decides (the throughput, the
// imbalance, the work ratio) changes; and the CLI's options, columns and refusals.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <random>
#include <set>

#include "cli_runner.hpp"
#include "seqpar/core/plan_validity.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/document_cost.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/result_json.hpp"
#include "seqpar/sim/simulate.hpp"
#include "seqpar/sim/sweep.hpp"

namespace seqpar::sim {
namespace {

using nlohmann::json;

// A fresh seed per run, printed with every failure, so a failure can be replayed.
std::uint64_t fresh_seed() {
  static const std::uint64_t seed = std::random_device{}();
  return seed;
}

// The result's document without the key a workload adds.
json without_balancer(json j) {
  j.erase("balancer");
  return j;
}

SearchSpace methods(std::vector<Method> ms) {
  SearchSpace space;
  space.methods = std::move(ms);
  space.tp = {1};
  return space;
}

TEST(MaxLenDocuments, TheAnswerFitsUnderTheWorkloadInSimulateAndOneGranuleMoreDoesNot) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  const std::uint64_t seed = fresh_seed();
  int checked = 0, padded = 0;
  for (const char* spec : {"lognormal:8:1.5", "powerlaw:1.3:32:300000"}) {
    const Workload w = make_workload(spec, "fill", seed, 4);
    const MaxLenAdvice a =
        advise_max_seq_len(m, s, 8, methods({Method::ring_zigzag, Method::hybrid, Method::ulysses}), &w);
    ASSERT_GT(a.max_seq_len, 0);
    ASSERT_EQ(a.per_structure.size(), a.per_structure_balancer.size());
    ASSERT_TRUE(a.result && a.result->balancer);
    for (std::size_t i = 0; i < a.per_structure.size(); ++i) {
      const auto& [p, n] = a.per_structure[i];
      const Balancer b = a.per_structure_balancer[i];
      if (n == 0) continue;
      Plan q = p;
      q.seq_len = n;
      const DocumentCosts at = document_costs(sample_workload(w, n), q, b, s.gpu);
      padded += at.token_factor > 1;
      const Result fits = simulate(m, s, q, at);
      EXPECT_TRUE(fits.valid && fits.fits) << describe(q) << " " << to_string(b) << " " << spec << " seed " << seed;
      q.seq_len = n + seq_granularity(q);
      std::vector<std::string> errors;
      if (check_plan(m, s, q, errors)) {
        const Result over = simulate(m, s, q, document_costs(sample_workload(w, q.seq_len), q, b, s.gpu));
        EXPECT_FALSE(over.valid && over.fits) << describe(q) << " " << to_string(b) << " " << spec << " seed " << seed;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
  // Per-document padding and whole documents moved give a rank more tokens: the case a memory
  // estimate that read the workload would move, held here to simulate's.
  EXPECT_GT(padded, 0);
}

TEST(MaxLenDocuments, EveryDocumentFillingTheAnswerIsTodaysMaxlen) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  for (const int gpus : {8, 16}) {
    const MaxLenAdvice plain = advise_max_seq_len(m, s, gpus, SearchSpace{});
    ASSERT_GT(plain.max_seq_len, 0);
    const Workload w = make_workload("fixed:" + std::to_string(plain.max_seq_len), "fill", fresh_seed(), 2);
    const MaxLenAdvice docs = advise_max_seq_len(m, s, gpus, SearchSpace{}, &w);
    EXPECT_EQ(docs.max_seq_len, plain.max_seq_len);
    EXPECT_EQ(docs.limit_why, plain.limit_why);
    ASSERT_TRUE(docs.result && plain.result);
    EXPECT_EQ(without_balancer(to_json(m, s, *docs.result)), to_json(m, s, *plain.result));
    // Each structure in its method's own layout is searched as today; the other balancers beside it.
    std::vector<std::pair<Plan, std::int64_t>> native;
    for (std::size_t i = 0; i < docs.per_structure.size(); ++i)
      if (docs.per_structure_balancer[i] == native_balancer(docs.per_structure[i].first))
        native.push_back(docs.per_structure[i]);
    ASSERT_EQ(native.size(), plain.per_structure.size());
    for (std::size_t i = 0; i < native.size(); ++i) {
      EXPECT_EQ(describe(native[i].first), describe(plain.per_structure[i].first));
      EXPECT_EQ(native[i].second, plain.per_structure[i].second) << describe(native[i].first);
    }
  }
}

TEST(MaxLenDocuments, ASkewedWorkloadChangesThePlanAtTheAnswer) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  const SearchSpace space = methods({Method::ring_zigzag, Method::ring});
  const MaxLenAdvice plain = advise_max_seq_len(m, s, 8, space);
  const Workload w = make_workload("lognormal:8:1.5", "fill", fresh_seed(), 4);
  const MaxLenAdvice docs = advise_max_seq_len(m, s, 8, space, &w);
  ASSERT_TRUE(docs.result && plain.result);
  // The native layouts hold N / R tokens a rank, so their memory and length are today's; the
  // re-sharding balancers pay their padding in memory and so never reach further. The step under
  // the mask is faster.
  EXPECT_EQ(docs.max_seq_len, plain.max_seq_len);
  EXPECT_GT(docs.result->tokens_per_s_per_gpu, plain.result->tokens_per_s_per_gpu) << "seed " << fresh_seed();
}

// Transformer Engine pads every document to a multiple of 2 x CP under per-document sharding: with
// short documents a rank holds more tokens than N / R, and the memory estimate charges them, so
// the same structure reaches a shorter length than under its own (zigzag) layout.
TEST(MaxLenDocuments, PerDocumentPaddingOfShortDocumentsShortensTheLength) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  std::mt19937_64 rng(fresh_seed());
  // Lengths 2CP + 1 .. 3CP - 1 with CP 8: each pads to 32 tokens, 33% to 100% more than it holds.
  const int len = 17 + int(rng() % 7);
  const Workload w = make_workload("fixed:" + std::to_string(len), "fill", fresh_seed(), 2);
  const MaxLenAdvice a = advise_max_seq_len(m, s, 8, methods({Method::ring_zigzag}), &w);
  std::int64_t zigzag = 0, per_document = 0;
  Plan q;
  for (std::size_t i = 0; i < a.per_structure.size(); ++i) {
    if (a.per_structure[i].first.ring_degree != 8) continue;
    if (a.per_structure_balancer[i] == Balancer::zigzag) zigzag = a.per_structure[i].second;
    if (a.per_structure_balancer[i] == Balancer::per_document) {
      per_document = a.per_structure[i].second;
      q = a.per_structure[i].first;
    }
  }
  ASSERT_GT(zigzag, 0);
  ASSERT_GT(per_document, 0);
  EXPECT_LT(per_document, zigzag) << "fixed:" << len << " seed " << fresh_seed();
  // The answer's memory is charged at the padded length, in simulate and in its JSON.
  q.seq_len = per_document;
  const DocumentCosts c = document_costs(sample_workload(w, per_document), q, Balancer::per_document, s.gpu);
  EXPECT_GT(c.memory_seq_len, q.seq_len);
  EXPECT_EQ(c.memory_seq_len, document_memory_seq_len(sample_workload(w, per_document), q, Balancer::per_document));
  EXPECT_GT(simulate(m, s, q, c).peak_memory_bytes(), simulate(m, s, q).peak_memory_bytes());
}

// maxlen under a balancer that re-shards the documents (per-document, balanced) needs a sample of
// the workload at every length it tries; it searches from the plain answer (memory at N) over the
// workload's token factor instead of bisecting from one granule. Held here to the full search
// (max_seq_len_search with the workload's memory length at every length, as maxlen searched
// before), on several structures, both balancers, and a mix whose fullest rank is padded (fixed:19
// under per-document sharding pads each document to a multiple of 2 x SP: 19 -> 32 at SP 8, 20 at
// SP 2 and 4: a rank holds up to 1.68x N / R). Per-document sharding's memory length grows with N
// (the fill stream is cut at multiples of N and every piece padded): the same answer. Balanced
// placement's fullest rank jumps between neighbouring lengths (whole documents land where the
// work is least), so the fit is not monotone and two searches may stop at different boundaries:
// there the answer fits under the workload, one granule more does not, and no length above the
// plain answer fits (M(N) >= N).
TEST(MaxLenDocuments, TheSearchFromThePlainAnswerIsTheFullSearchsAnswer) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  int per_document = 0, balanced = 0, padded = 0;
  // The full search (every length sampled) is the slow part: every k-th per-document structure under
  // the sanitizers (testing::sample_stride), all of them in the Release pass.
  const int stride = testing::sample_stride();
  for (const char* spec : {"lognormal:8:1", "fixed:19", "powerlaw:1.3:32:300000"}) {
    const Workload w = make_workload(spec, "fill", 7, 2);  // a fixed seed: the equalities below are exact
    const MaxLenAdvice a =
        advise_max_seq_len(m, s, 8, methods({Method::ring_zigzag, Method::hybrid, Method::allgather}), &w);
    ASSERT_EQ(a.per_structure.size(), a.per_structure_balancer.size());
    for (std::size_t i = 0; i < a.per_structure.size(); ++i) {
      const auto& [p, n] = a.per_structure[i];
      const Balancer b = a.per_structure_balancer[i];
      if (holds_even_share(b)) continue;
      const SimulateAt under = [&](const Plan& q) {
        Result r = simulate(m, s, q);
        try {
          const std::int64_t mem = document_memory_seq_len(sample_workload(w, q.seq_len), q, b);
          if (r.valid && mem > q.seq_len) {
            r.memory_seq_len = mem;
            add_memory(m, s, r);
          }
        } catch (const Error& e) {
          r.valid = false;
          r.errors = {e.what()};
        }
        return r;
      };
      Plan q = p;
      const std::int64_t plain = max_seq_len_search(m, s, q).max_seq_len;
      EXPECT_LE(n, plain) << describe(p) << " " << to_string(b) << " " << spec;
      if (b == Balancer::per_document) {
        // The full search, as maxlen ran it before: every length tried sampled.
        if (per_document % stride == 0) {
          EXPECT_EQ(n, max_seq_len_search(m, s, q, under).max_seq_len) << describe(p) << " " << spec;
        }
        ++per_document;
      } else {
        ++balanced;
      }
      if (n == 0) continue;
      q.seq_len = n;
      const Result at = under(q);
      padded += at.memory_seq_len > n;
      EXPECT_TRUE(at.valid && at.fits) << describe(q) << " " << to_string(b) << " " << spec;
      q.seq_len = n + seq_granularity(q);
      std::vector<std::string> errors;
      if (check_plan(m, s, q, errors)) {
        const Result over = under(q);
        EXPECT_FALSE(over.valid && over.fits) << describe(q) << " " << to_string(b) << " " << spec;
      }
    }
  }
  // ring-zigzag and allgather at SP 2, 4, 8 and hybrid U2xR2, U2xR4, U4xR2: 9 structures a mix.
  EXPECT_EQ(per_document, 27);
  EXPECT_EQ(balanced, 27);
  EXPECT_GT(padded, 9);
}

TEST(MaxLenDocuments, AGlobalBatchOfTokensIsRefusedUnderDocuments) {
  const Model m = load_model("llama3-8b");
  const System s = load_system("dgx-h100");
  SearchSpace space;
  space.global_batch = GlobalBatch{std::int64_t{1} << 22, 0};
  const Workload w = make_workload("fixed:4K");
  try {
    (void)advise_max_seq_len(m, s, 8, space, &w);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("global_batch_tokens"), std::string::npos) << e.what();
  }
  space.global_batch = GlobalBatch{0, 4};  // sequences: each length searched with the workload
  EXPECT_GT(advise_max_seq_len(m, s, 8, space, &w).max_seq_len, 0);
}

TEST(SweepDocuments, EveryDocumentFillingTheSequenceIsTodaysSweep) {
  const Model m = load_model("llama3-8b");
  const std::vector<System> systems = {load_system("dgx-h100")};
  for (const std::int64_t n : {std::int64_t{64} << 10, std::int64_t{512} << 10}) {
    const Sweep plain = run_sweep(m, systems, {8, 16}, {n}, SearchSpace{});
    const SweepDocuments d{make_workload("fixed:" + std::to_string(n), "fill", fresh_seed(), 2), {}};
    const Sweep docs = run_sweep(m, systems, {8, 16}, {n}, SearchSpace{}, &d);
    ASSERT_EQ(docs.workloads.size(), 1u);
    int compared = 0;
    for (const SweepPoint& pt : docs.points) {
      ASSERT_TRUE(pt.result.balancer);
      if (*pt.result.balancer != native_balancer(pt.result.plan)) continue;
      const auto same = std::find_if(plain.points.begin(), plain.points.end(), [&](const SweepPoint& q) {
        return q.gpus == pt.gpus && q.result.plan.tp == pt.result.plan.tp && q.result.plan.method == pt.result.plan.method &&
               q.result.plan.sp == pt.result.plan.sp;
      });
      ASSERT_NE(same, plain.points.end()) << describe(pt.result.plan);
      EXPECT_EQ(without_balancer(to_json(m, systems[0], pt.result)), to_json(m, systems[0], same->result));
      if (pt.documents) {
        EXPECT_EQ(pt.documents->work_ratio, 1.0);
        // One causal sequence's own imbalance (the contiguous ring's last rank), not the workload's.
        EXPECT_EQ(pt.documents->work.imbalance_tiles_mean, pt.documents->reference.imbalance_tiles_mean)
            << describe(pt.result.plan);
      }
      ++compared;
    }
    EXPECT_EQ(compared, int(plain.points.size()));
    ASSERT_EQ(docs.cells.size(), plain.cells.size());
    for (std::size_t c = 0; c < docs.cells.size(); ++c) {
      ASSERT_TRUE(docs.cells[c].best && plain.cells[c].best);
      EXPECT_EQ(without_balancer(to_json(m, systems[0], docs.cells[c].best->result)),
                to_json(m, systems[0], plain.cells[c].best->result));
    }
  }
}

TEST(SweepDocuments, ASkewedWorkloadShowsEachBalancersImbalanceAndTheWorkRatio) {
  const Model m = load_model("llama3-8b");
  const std::vector<System> systems = {load_system("dgx-h100")};
  const std::int64_t n = std::int64_t{256} << 10;
  const SweepDocuments d{make_workload("lognormal:8.5:1.3", "fill", fresh_seed(), 8), {}};
  SearchSpace space = methods({Method::ring_zigzag, Method::ulysses});
  const Sweep docs = run_sweep(m, systems, {8}, {n}, space, &d);
  std::map<Balancer, double> imbalance;  // ring-zigzag sp=8's
  for (const SweepPoint& pt : docs.points) {
    if (!pt.result.valid) continue;
    ASSERT_TRUE(pt.documents) << describe(pt.result.plan);
    // A document mask leaves less work than one causal sequence; how much less depends on the draw
    // (a 256K sequence of lognormal:8.5:1.3 documents left 0.56 of it with seed 3419962370), so
    // the bound is the one every draw keeps.
    EXPECT_LT(pt.documents->work_ratio, 1.0) << "seed " << fresh_seed();
    ASSERT_TRUE(pt.one_sequence);
    EXPECT_EQ(to_json(m, systems[0], *pt.one_sequence), to_json(m, systems[0], simulate(m, systems[0], pt.result.plan)));
    EXPECT_GT(pt.result.tokens_per_s_per_gpu, pt.one_sequence->tokens_per_s_per_gpu) << describe(pt.result.plan);
    if (pt.result.plan.method == Method::ring_zigzag && pt.result.plan.sp == 8)
      imbalance[*pt.result.balancer] = pt.documents->work.imbalance_tiles_mean;
    if (pt.result.plan.method == Method::ulysses) {
      EXPECT_EQ(pt.documents->work.imbalance_tiles_mean, 1.0);
    }
  }
  ASSERT_EQ(imbalance.size(), 3u);
  EXPECT_GT(imbalance[Balancer::zigzag], 1.2) << "seed " << fresh_seed();
  EXPECT_LT(imbalance[Balancer::per_document], imbalance[Balancer::zigzag]);
  // --balancer: only the balancers listed, where a structure has them.
  const SweepDocuments only{d.workload, {Balancer::per_document}};
  const Sweep one = run_sweep(m, systems, {8}, {n}, space, &only);
  int ulysses = 0;
  for (const SweepPoint& pt : one.points) {
    if (pt.result.plan.method == Method::ring_zigzag) {
      EXPECT_EQ(*pt.result.balancer, Balancer::per_document);
    }
    ulysses += pt.result.plan.method == Method::ulysses;  // no balancer to choose: in its own layout
  }
  EXPECT_GT(ulysses, 0);
}

// The plan a maxlen document names, as simulate's flags.
std::string plan_flags(const json& p) {
  std::string out = fmt::format("--model llama3-8b --gpus {} --method {} --sp {} --tp {} --zero {} --checkpoint {}",
                                p["gpus"].get<int>(), p["method"].get<std::string>(), p["sp"].get<int>(),
                                p["tp"].get<int>(), p["zero"].get<int>(), p["checkpoint"].get<std::string>());
  if (p["method"] == "hybrid") out += fmt::format(" --ulysses-degree {}", p["ulysses_degree"].get<int>());
  for (const char* flag : {"offload_checkpoints", "offload_optimizer", "offload_params", "tiled_mlp", "tiled_loss"})
    if (p[flag].get<bool>()) {
      std::string f = flag;
      std::replace(f.begin(), f.end(), '_', '-');
      out += " --" + f;
    }
  return out;
}

TEST(DocumentsCli, MaxlenAnswersUnderTheWorkloadAndSimulateAgrees) {
  const std::string docs = "--documents lognormal:8:1.5 --doc-batches 4";
  const auto r = seqpar::testing::seqpar("maxlen --gpus 8 --method ring-zigzag --sp 8 --tp 1 " + docs + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_TRUE(j["plan"].contains("balancer")) << j["plan"];
  EXPECT_LT(j["workload"]["work_ratio"]["mean"].get<double>(), 0.1);
  std::set<std::string> balancers;
  for (const json& p : j["per_plan"]) balancers.insert(p["plan"]["balancer"].get<std::string>());
  EXPECT_EQ(balancers, (std::set<std::string>{"zigzag", "per-document", "balanced"}));
  const std::int64_t n = j["max_seq_len"].get<std::int64_t>();
  const std::string plan = plan_flags(j["plan"]) + " --balancer " + j["plan"]["balancer"].get<std::string>() + " " + docs;
  const auto at = seqpar::testing::seqpar(fmt::format("simulate {} --seq-len {} --json", plan, n));
  ASSERT_EQ(at.code, 0) << at.err;
  EXPECT_TRUE(json::parse(at.out)["fits"].get<bool>());
  EXPECT_EQ(json::parse(at.out)["tokens_per_s_per_gpu"], j["result"]["tokens_per_s_per_gpu"]);
  const std::int64_t gran = seq_granularity(plan_from_json(j["plan"]));
  const auto over = seqpar::testing::seqpar(fmt::format("simulate {} --seq-len {} --json", plan, n + gran));
  EXPECT_FALSE(json::parse(over.out)["fits"].get<bool>()) << over.out.substr(0, 300);
  const auto human = seqpar::testing::seqpar("maxlen --gpus 8 --method ring-zigzag --sp 8 --tp 1 " + docs);
  ASSERT_EQ(human.code, 0) << human.err;
  EXPECT_NE(human.out.find("workload: --documents lognormal:8:1.5"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("balancer=per-document"), std::string::npos) << human.out;
  // With one document filling the answer, the plain maxlen's numbers.
  const auto plain = seqpar::testing::seqpar("maxlen --gpus 8 --method ring-zigzag --sp 8 --tp 1 --json");
  const auto fixed = seqpar::testing::seqpar(
      fmt::format("maxlen --gpus 8 --method ring-zigzag --sp 8 --tp 1 --documents fixed:{} --json", n));
  ASSERT_EQ(fixed.code, 0) << fixed.err;
  json a = json::parse(plain.out)["result"], b = json::parse(fixed.out)["result"];
  EXPECT_EQ(a, without_balancer(b));
}

TEST(DocumentsCli, SweepWritesTheWorkloadAndTheBalancerColumns) {
  const std::string dir = ::testing::TempDir() + "seqpar-sweep-documents";
  const auto r = seqpar::testing::seqpar("sweep --gpus 8 --seq-len 64K,256K --method ulysses,ring-zigzag --tp 1 "
                                         "--documents lognormal:8:1.5 --doc-batches 4 --out " + dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("workload: --documents lognormal:8:1.5, packing fill, seed 1, 4 sequences of 64K tokens"),
            std::string::npos) << r.out;
  const std::string csv = seqpar::testing::slurp(dir + "/sweep.csv");
  EXPECT_NE(csv.find(",exposed_comm_s,balancer,imbalance_mean,imbalance_p95,work_ratio,token_factor,errors\n"),
            std::string::npos);
  EXPECT_NE(csv.find(",per-document,"), std::string::npos);
  EXPECT_NE(csv.find(",heads,1,1,"), std::string::npos) << "Ulysses: balanced by heads";
  const json j = json::parse(seqpar::testing::slurp(dir + "/sweep.json"));
  ASSERT_EQ(j["workloads"].size(), 2u);
  EXPECT_EQ(j["workloads"][1]["seq_len"], 256 << 10);
  for (const json& p : j["results"]) {
    ASSERT_TRUE(p.contains("documents"));
    EXPECT_EQ(p["documents"]["rank_work"].size(), p["plan"]["ring_degree"].get<std::size_t>());
  }
  // Without documents the columns are there and empty.
  const auto plain = seqpar::testing::seqpar("sweep --gpus 8 --seq-len 64K --method ulysses --out " + dir + "-plain");
  ASSERT_EQ(plain.code, 0) << plain.err;
  const std::string plain_csv = seqpar::testing::slurp(dir + "-plain/sweep.csv");
  EXPECT_NE(plain_csv.find(",,,,,\""), std::string::npos) << plain_csv;
  EXPECT_FALSE(json::parse(seqpar::testing::slurp(dir + "-plain/sweep.json")).contains("workloads"));
}

TEST(DocumentsCli, TheWorkloadOptionsAreRefusedWhereTheyCannotApply) {
  auto refused = [](const std::string& args, const std::string& needle) {
    const auto r = seqpar::testing::seqpar(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << "\n" << r.err;
  };
  refused("maxlen --gpus 8 --documents fixed:1K --balancer zigzag", "balancer: maxlen searches every load balancer");
  refused("maxlen --gpus 8 --balancer zigzag", "give --documents alone");
  refused("maxlen --gpus 8 --doc-seed 3", "give it with --documents");
  refused("maxlen --gpus 8 --documents fixed:1K --global-batch-tokens 4M", "give --global-batch (sequences)");
  refused("sweep --seq-len 64K --out /tmp/x --balancer zigzag", "give it with --documents");
  refused("sweep --seq-len 64K --out /tmp/x --documents fixed:1K --balancer zigzag,zigzag", "listed twice");
  refused("sweep --seq-len 64K --out /tmp/x --documents fixed:1K --balancer sideways", "unknown load balancer");
  refused("sweep --seq-len 64K --out /tmp/x --documents nonsense:1", "documents");
}

}  // namespace
}  // namespace seqpar::sim

namespace seqpar::sim {
namespace {

// `seqpar report` on sweep and simulate outputs made with documents: the section states the
// workload and sets its ranking beside one causal sequence's; with one document a sequence the
// fastest plan is the same both ways, under a skewed mix the ranks move.
TEST(DocumentsCli, ReportSetsTheWorkloadsRankingBesideOneSequences) {
  const std::string dir = ::testing::TempDir() + "seqpar-report-documents";
  auto sweep_and_report = [&](const std::string& docs, const std::string& name) {
    const std::string out = dir + "/" + name;
    const auto s = seqpar::testing::seqpar("sweep --gpus 8 --seq-len 128K --tp 1 " + docs + " --out " + out);
    EXPECT_EQ(s.code, 0) << s.err;
    const auto sim = seqpar::testing::seqpar("simulate --gpus 8 --seq-len 128K --method ring-zigzag --sp 8 " + docs +
                                             " --checkpoint full --json");
    EXPECT_EQ(sim.code, 0) << sim.err;
    std::ofstream(out + "/simulate.json") << sim.out;
    const auto r = seqpar::testing::seqpar("report " + out + "/sweep.json " + out + "/simulate.json --no-plots --out " + out);
    EXPECT_EQ(r.code, 0) << r.err;
    return std::make_pair(seqpar::testing::slurp(out + "/report.md"),
                          json::parse(seqpar::testing::slurp(out + "/report-data.json"))["documents"]);
  };
  const auto [md, entries] = sweep_and_report("--documents lognormal:8.5:1.3 --doc-batches 8", "skewed");
  EXPECT_NE(md.find("## Packed documents: the ranking under the workload against one causal sequence"), std::string::npos);
  EXPECT_NE(md.find("Workload --documents lognormal:8.5:1.3 (packing fill): "), std::string::npos) << md;
  ASSERT_EQ(entries.size(), 2u);  // the sweep's cell and simulate's
  int moved = 0;
  for (const json& e : entries)
    for (const json& r : e["rows"]) moved += r["rank"] != r["one_sequence_rank"];
  EXPECT_GT(moved, 0) << "a skewed mix moves some plan's rank";
  const auto [fixed_md, fixed] = sweep_and_report("--documents fixed:128K", "fixed");
  ASSERT_EQ(fixed.size(), 2u);
  for (const json& e : fixed) {
    EXPECT_NE(e["answer"].get<std::string>().find("fastest both under the workload and on one causal sequence"),
              std::string::npos) << e["answer"];
    for (const json& r : e["rows"]) {
      if (r["balancer"] != "contiguous" || r["structure"].get<std::string>().find("hybrid") == std::string::npos) {
        EXPECT_EQ(r["tokens_per_s_per_gpu"], r["one_sequence_tokens_per_s_per_gpu"]) << r;
      }
    }
  }
}

}  // namespace
}  // namespace seqpar::sim

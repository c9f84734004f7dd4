// How advise chooses a structure's memory options (advisor.hpp: the tie rule, kMemoryOptionTie):
// the lightest set within 1% of the fastest that fits, found by a search that times only the sets
// that can matter. These tests hold the search to the rule applied to every set, and the reasons to
// what the options buy.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/attention_kernels.hpp"
#include "seqpar/sim/presets.hpp"
#include "seqpar/sim/validity.hpp"

namespace seqpar::sim {
namespace {

// The rule applied to every memory-option set of a structure, each one timed.
std::optional<Result> chosen_by_every_set(const Model& m, const System& s, const Plan& structure) {
  std::vector<Result> fitting;
  for (const MemoryOptions& mem : memory_option_sets()) {
    Plan p = structure;
    p.mem = mem;
    Result r = simulate(m, s, p);
    if (r.valid && r.fits) fitting.push_back(std::move(r));
  }
  if (fitting.empty()) return std::nullopt;
  double fastest = 0;
  for (const Result& r : fitting) fastest = std::max(fastest, r.tokens_per_s_per_gpu);
  const Result* chosen = nullptr;
  for (const Result& r : fitting) {
    if (r.tokens_per_s_per_gpu < fastest * (1 - kMemoryOptionTie)) continue;
    const int w = memory_options_weight(r.plan.mem, s.profile);
    if (!chosen || w < memory_options_weight(chosen->plan.mem, s.profile) ||
        (w == memory_options_weight(chosen->plan.mem, s.profile) && ranks_before(r, *chosen)))
      chosen = &r;
  }
  return *chosen;
}

// The search's shortcuts (memory first, the offloads' host memory and heaviest set, the sets with
// more time-only options skipped while they cannot win) choose what timing every set chooses, on
// every built-in framework, model shapes with and without GQA, short and long sequences, NVSwitch
// and PCIe nodes, one node and many, and a host small enough to refuse the offloads.
TEST(MemoryOptionChoice, TheSearchChoosesWhatTimingEverySetChooses) {
  int compared = 0, fitting = 0;
  std::vector<System> systems;
  for (const char* fw : {"deepspeed-alst", "hf-transformers", "megatron-core", "seqpar-train"})
    systems.push_back(load_system("dgx-h100", "", load_framework(fw)));
  systems.push_back(load_system("l20-pcie", "", load_framework("deepspeed-alst")));
  nlohmann::json small = preset_document("system", "dgx-h100");
  small["host_memory_gib"] = 96;
  systems.push_back(system_from_json(small, "a 96 GiB host", "", load_framework("deepspeed-alst")));
  const std::size_t k = static_cast<std::size_t>(testing::sample_stride());
  std::size_t n = 0;
  for (const System& s : systems)
    for (const char* mn : {"llama3-8b", "llama3-70b", "llama2-7b"})
      for (const int gpus : {8, 64})
        for (const std::int64_t len : {std::int64_t{1} << 15, std::int64_t{1} << 18, std::int64_t{1} << 21}) {
          const Model m = load_model(mn);
          if (!profile_mismatch(m, s).empty()) continue;
          for (const Plan& st : structures(m, s, gpus, len, SearchSpace{})) {
            if (n++ % (3 * k) != 0) continue;  // every third structure (every 3k-th under the sanitizers)
            const StructureOutcome o = best_memory_options(m, s, st, std::nullopt);
            const std::optional<Result> every = chosen_by_every_set(m, s, st);
            ASSERT_EQ(o.best.has_value(), every.has_value()) << describe(st) << " on " << s.name << " " << mn;
            if (every) {
              EXPECT_EQ(o.best->plan.mem, every->plan.mem) << describe(st) << " on " << s.name << " (" << s.profile.name
                                                           << ") " << mn << " at " << len << ": chose "
                                                           << describe(o.best->plan) << ", every set: "
                                                           << describe(every->plan);
              EXPECT_EQ(o.best->tokens_per_s_per_gpu, every->tokens_per_s_per_gpu);
              ++fitting;
            }
            ++compared;
          }
        }
  EXPECT_GT(compared, 300 / int(k));
  EXPECT_GT(fitting, 100 / int(k));
}

// The rule at work: over llama3-8b and llama2-7b plans on NVSwitch and PCIe nodes, every option of
// the chosen set is needed to fit or buys more than the tie (the set without it, alone, does not
// fit or is that much slower than the fastest), and on some structures the fastest set is not the
// one chosen: it carries an option that buys less than 1%.
TEST(MemoryOptionChoice, EveryOptionOfTheChosenSetBuysMoreThanTheTie) {
  int chosen = 0, overruled = 0;
  for (const char* sys : {"dgx-h100", "a800-nvlink", "l20-pcie"})
    for (const char* mn : {"llama3-8b", "llama2-7b"})
      for (const std::int64_t len : {std::int64_t{1} << 15, std::int64_t{1} << 17, std::int64_t{1} << 19}) {
        const Model m = load_model(mn);
        const System s = load_system(sys, "");
        for (const Plan& st : structures(m, s, 16, len, SearchSpace{})) {
          const StructureOutcome o = best_memory_options(m, s, st, std::nullopt);
          if (!o.best) continue;
          ++chosen;
          double fastest = 0;
          const Result* fastest_set = nullptr;
          std::vector<Result> every;
          for (const MemoryOptions& mem : memory_option_sets()) {
            Plan p = st;
            p.mem = mem;
            every.push_back(simulate(m, s, p));
          }
          for (const Result& r : every)
            if (r.valid && r.fits && r.tokens_per_s_per_gpu > fastest) fastest = r.tokens_per_s_per_gpu, fastest_set = &r;
          overruled += fastest_set->plan.mem != o.best->plan.mem;
          const int weight = memory_options_weight(o.best->plan.mem, s.profile);
          for (const Result& r : every) {
            if (!(r.valid && r.fits) || memory_options_weight(r.plan.mem, s.profile) >= weight) continue;
            EXPECT_LT(r.tokens_per_s_per_gpu, fastest * (1 - kMemoryOptionTie))
                << mn << " on " << sys << ": " << describe(o.best->plan) << " was chosen over the lighter "
                << describe(r.plan) << ", within the tie of the fastest";
          }
        }
      }
  EXPECT_GT(chosen, 100);
  EXPECT_GT(overruled, 0);
}

// An option is in the answer only when the plan needs it to fit or it buys more than the tie: the
// issue's cases, where the fastest set carried ZeRO-3's parameter offload at 27.6 and 54 of 80 GiB
// for the 1% or less it bought, are answered without it, and each option says why it is there.
TEST(MemoryOptionChoice, AnOptionIsTakenToFitOrForMoreThanTheTie) {
  struct Case {
    const char *model, *system;
    int gpus;
    std::int64_t len;
  };
  for (const Case& c : {Case{"llama2-7b", "a800-nvlink", 16, 64 << 10}, Case{"llama3-8b", "dgx-h100", 64, 128 << 10}}) {
    const Model m = load_model(c.model);
    const System s = load_system(c.system, "");
    const Advice a = advise(m, s, c.gpus, c.len, SearchSpace{});
    ASSERT_NE(a.best(), nullptr) << c.model;
    EXPECT_FALSE(a.best()->plan.mem.offload_params) << c.model << ": " << describe(a.best()->plan);
    // A ranked plan carries parameter offload only where its structure does not fit without it.
    for (const Result& r : a.ranked) {
      if (!r.plan.mem.offload_params) continue;
      Plan without = r.plan;
      without.mem.offload_params = false;
      const Result w = simulate(m, s, without);
      EXPECT_FALSE(w.valid && w.fits && w.tokens_per_s_per_gpu >= r.tokens_per_s_per_gpu * (1 - kMemoryOptionTie))
          << c.model << ": " << describe(r.plan) << " keeps parameter offload it does not need";
    }
    // Each option of the best set has its line: needed to fit (with the peak without it) or faster.
    const MemoryOptions& o = a.best()->plan.mem;
    int options = (o.zero != default_memory_options(s.profile).zero) + (o.checkpoint != Checkpoint::none) +
                  o.offload_checkpoints + o.tiled_mlp + o.tiled_loss + o.offload_optimizer + o.offload_params;
    int explained = 0;
    for (const std::string& why : a.reasons)
      if (why.find(": needed to fit: without it") != std::string::npos || why.find("faster than without it") != std::string::npos)
        ++explained;
    EXPECT_EQ(explained, options) << c.model;
    EXPECT_GT(options, 0) << c.model;
  }
  // Where parameter offload is what makes the plan fit (70B's ZeRO-3 shards on 4 GPUs), it stays, and says so.
  {
    const Model m = load_model("llama3-70b");
    const System s = load_system("dgx-h100", "");
    SearchSpace one;
    one.tp = {1};
    const Advice a = advise(m, s, 4, 64 << 10, one);
    ASSERT_NE(a.best(), nullptr);
    EXPECT_TRUE(a.best()->plan.mem.offload_params) << describe(a.best()->plan);
    bool said = false;
    for (const std::string& why : a.reasons)
      said |= why.rfind("+offload-params: needed to fit: without it the peak is", 0) == 0;
    EXPECT_TRUE(said);
  }
}

}  // namespace
}  // namespace seqpar::sim

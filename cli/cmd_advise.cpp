// seqpar advise: model + system + GPU count + sequence length -> the best plan, the ranked
// alternatives, and why each rejected plan was rejected.
#include <fmt/format.h>

#include <algorithm>

#include <limits>

#include "commands.hpp"
#include "documents.hpp"
#include "options.hpp"
#include "seqpar/core/checked.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/comm_cost.hpp"
#include "seqpar/sim/result_json.hpp"
#include "rejected_list.hpp"
#include "table.hpp"

namespace seqpar::cli {

void add_advise_command(CLI::App& app) {
  struct Opts {
    CommonOptions common;
    SearchOptions search;
    MemoryFlags mem;
    DocumentOptions docs;
    std::string seq_len;
    int top = 15;
    int rejected = 15;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("advise", "Best plan for a model, system, GPU count and sequence length, with the ranked alternatives");
  add_common(cmd, o->common);
  cmd->add_option("--seq-len", o->seq_len, "Sequence length (e.g. 131072, 128K, 1M)")->required();
  add_search(cmd, o->search);
  cmd->add_option("--top", o->top, "Rows of the ranked table to print")->capture_default_str();
  add_memory(cmd, o->mem);
  add_documents(cmd, o->docs);
  add_rejected_limit(cmd, o->rejected);
  cmd->footer("Memory options given on the command line are fixed; otherwise every combination is searched, and of "
              "each structure's sets the plan takes " + sim::memory_choice_rule() + ".");
  cmd->callback([o] {
    guarded(o->common.json, "seqpar advise", [&] {
      require_range("top", o->top, 0, std::numeric_limits<int>::max());
      require_range("rejected", o->rejected, 0, std::numeric_limits<int>::max());
      const sim::Model m = load_model(o->common);
      const sim::System s = load_system(o->common, m, o->search.pp.value_or(1));
      const std::int64_t n = parse_seq_len(o->seq_len);
      const int gpus = o->search.gpus;
      sim::SearchSpace space = search_space(o->search, o->mem, s);
      if (!o->docs.balancer.empty())
        throw Error("balancer: advise compares every load balancer worth comparing for each structure; give --documents "
                    "alone");
      if (std::optional<SampledWorkload> w = sample_documents(o->docs, n))
        space.documents = std::make_shared<const SampledWorkload>(std::move(*w));
      const sim::Advice a = sim::advise(m, s, gpus, n, space);
      // A plan's words, with its load balancer under a packed-document workload.
      auto label = [](const sim::Result& r) {
        const bool ring = r.plan.ring_degree > 1;  // without a ring group every layout is the same work by heads
        return seqpar::describe(r.plan) + (r.balancer && ring ? " balancer=" + to_string(*r.balancer) : std::string());
      };

      if (o->common.json) {
        nlohmann::json j = document("seqpar advise");
        j["model"] = sim::to_json(m);
        j["system"] = sim::to_json(s, gpus);
        j["gpus"] = gpus;
        j["seq_len"] = n;
        j["global_batch"] = batch_json(space.global_batch, n);
        j["valid"] = a.best() != nullptr;
        j["errors"] = a.best() ? nlohmann::json::array() : nlohmann::json::array({"no plan is valid and fits; see rejected"});
        j["best"] = a.best() ? sim::to_json(a.best()->plan) : nlohmann::json(nullptr);
        if (a.best() && a.best()->balancer) j["best"]["balancer"] = to_string(*a.best()->balancer);
        if (space.documents) {
          j["workload"] = workload_summary_json(o->docs, *space.documents);
          j["workload"]["short_documents"] = short_documents_json(s.gpu);
        }
        j["reasons"] = a.reasons;
        j["ranked"] = nlohmann::json::array();
        for (const auto& r : a.ranked) j["ranked"].push_back(sim::to_json(m, s, r));
        j["rejected"] = nlohmann::json::array();
        for (const auto& r : a.rejected) j["rejected"].push_back({{"plan", sim::to_json(r.plan)}, {"reasons", r.reasons}});
        print_json(j);
      } else {
        fmt::print("{} on {}, {} GPUs, sequence {} tokens{}\n{}\n", m.name, s.name, gpus, format_count(n),
                   batch_text(space.global_batch, n), inferred_text(s));
        if (const std::string p = precision_text(space, s, o->search.precision); !p.empty()) fmt::print("{}\n", p);
        if (space.documents) {
          print_workload_summary(o->docs, *space.documents);
          print_short_documents(s.gpu);
        }
        if (const sim::Result* b = a.best()) {
          fmt::print("best: {}\n      {} tokens/s per GPU, MFU {:.1f}%, optimizer step {}, peak {} of {} GiB\n"
                     "      placement: {}\n\n",
                     label(*b), format_rate(b->tokens_per_s_per_gpu), 100 * b->mfu, seconds(b->step_time_s),
                     gib(b->peak_memory_bytes()), gib(b->capacity_bytes), sim::describe_placement(s, b->plan));
          fmt::print("why:\n");
          for (const std::string& why : a.reasons) fmt::print("  - {}\n", why);
          fmt::print("\n");
          const bool batch = space.global_batch.has_value();
          std::vector<std::string> header{"# plan", "tokens/s/GPU", "MFU", "optimizer step", "exposed comm", "peak GiB"};
          if (batch) header.insert(header.begin() + 1, "dp x mb x ga");
          Table t(header);
          for (std::size_t i = 0; i < a.ranked.size() && int(i) < o->top; ++i) {
            const sim::Result& r = a.ranked[i];
            std::vector<std::string> row{std::to_string(i + 1) + " " + label(r),
                                         format_rate(r.tokens_per_s_per_gpu), fmt::format("{:.1f}%", 100 * r.mfu),
                                         seconds(r.step_time_s), seconds(r.time.exposed_comm), gib(r.peak_memory_bytes())};
            if (batch)
              row.insert(row.begin() + 1, fmt::format("{}x{}x{}", r.plan.dp(), r.plan.micro_batch, r.plan.grad_accum_steps));
            t.add(row);
          }
          fmt::print("{}", t.str());
          if (int(a.ranked.size()) > o->top) fmt::print("({} more; --top N or --json for all)\n", a.ranked.size() - std::size_t(o->top));
        } else {
          fmt::print("no plan is valid and fits\n");
        }
        fmt::print("{}", rejected_text(a.rejected, std::size_t(o->rejected), "--rejected"));
      }
      if (!a.best())
        no_answer(std::any_of(a.rejected.begin(), a.rejected.end(), [](const sim::Rejection& r) { return r.valid; }));
    });
  });
}

}  // namespace seqpar::cli

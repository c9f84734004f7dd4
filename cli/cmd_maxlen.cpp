// seqpar maxlen: the longest trainable sequence for a model, system and GPU count, over all
// plans or for a fixed method / SP degree / memory options.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "commands.hpp"
#include "documents.hpp"
#include "options.hpp"
#include "seqpar/core/error.hpp"
#include "seqpar/core/parse.hpp"
#include "seqpar/sim/advisor.hpp"
#include "seqpar/sim/result_json.hpp"
#include "rejected_list.hpp"
#include "table.hpp"

namespace seqpar::cli {

namespace {
// Why there is no answer: every plan the constraints allow breaks a rule, or none fits.
std::string none_reason(const sim::MaxLenAdvice& a) {
  return a.per_structure.empty() ? "no plan is valid under the given constraints; see rejected"
                                 : "no plan fits even the shortest sequence; see rejected";
}
}  // namespace

void add_maxlen_command(CLI::App& app) {
  struct Opts {
    CommonOptions common;
    SearchOptions search;
    MemoryFlags mem;
    DocumentOptions docs;
    int rejected = 15;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("maxlen", "Longest sequence that fits, over all plans or for a fixed method/SP/memory options");
  add_common(cmd, o->common);
  add_search(cmd, o->search);
  add_memory(cmd, o->mem);
  add_documents(cmd, o->docs);
  add_rejected_limit(cmd, o->rejected);
  cmd->footer("Without memory flags every plan uses the options that save the most memory; the plan reported then "
              "takes, of the options that still fit at that length, " + sim::memory_choice_rule() +
              ". With --documents every structure is searched with each load balancer worth comparing; a plan fits "
              "under the workload where its balancer can lay the length out and it fits with the memory charged "
              "at the tokens of the balancer's fullest rank (per-document padding to a multiple of 2 x CP, "
              "documents moved whole), and the workload is sampled at every length tried.");
  cmd->callback([o] {
    guarded(o->common.json, "seqpar maxlen", [&] {
      require_range("rejected", o->rejected, 0, std::numeric_limits<int>::max());
      const sim::Model m = load_model(o->common);
      const sim::System s = load_system(o->common, m, o->search.pp.value_or(1));
      const int gpus = o->search.gpus;
      const sim::SearchSpace space = search_space(o->search, o->mem, s);
      if (!o->docs.balancer.empty())
        throw Error("balancer: maxlen searches every load balancer worth comparing for each structure; give "
                    "--documents alone");
      const std::optional<Workload> workload = o->docs.workload();
      const sim::MaxLenAdvice a = sim::advise_max_seq_len(m, s, gpus, space, workload ? &*workload : nullptr);
      // The workload as it runs at the answer: the same sample the search counted at that length.
      const std::optional<SampledWorkload> at_max =
          workload && a.max_seq_len > 0 ? std::optional<SampledWorkload>(sample_workload(*workload, a.max_seq_len))
                                        : std::nullopt;
      auto balancer_of = [&](std::size_t i) {
        return i < a.per_structure_balancer.size() ? std::optional<Balancer>(a.per_structure_balancer[i]) : std::nullopt;
      };
      auto label = [](const seqpar::Plan& p, std::optional<Balancer> b) {
        return seqpar::describe(p) + (b && p.ring_degree > 1 ? " balancer=" + to_string(*b) : std::string());
      };

      if (o->common.json) {
        nlohmann::json j = document("seqpar maxlen");
        j["model"] = sim::to_json(m);
        j["system"] = sim::to_json(s, gpus);
        j["gpus"] = gpus;
        j["valid"] = a.max_seq_len > 0;
        j["errors"] = a.max_seq_len > 0 ? nlohmann::json::array() : nlohmann::json::array({none_reason(a)});
        j["max_seq_len"] = a.max_seq_len;
        // Shorter lengths that do not fit (tiled MLP / loss: the peak can fall as the length grows).
        j["gaps"] = nlohmann::json::array();
        for (const sim::LengthGap& g : a.gaps) j["gaps"].push_back({{"first", g.first}, {"last", g.last}});
        j["gap_count"] = a.gap_count;
        // What ends the answer: the next length's GPU or host memory, or a rule it breaks.
        j["limit"] = a.max_seq_len > 0 ? nlohmann::json{{"kind", std::string(sim::to_string(a.limit))}, {"why", a.limit_why}}
                                       : nlohmann::json(nullptr);
        j["global_batch"] = batch_json(space.global_batch, a.max_seq_len);
        j["plan"] = a.result ? sim::to_json(a.result->plan) : nlohmann::json(nullptr);
        // The load balancer where it shapes the work: a ring group (Ulysses splits by heads).
        if (a.result && a.result->balancer && a.result->plan.ring_degree > 1)
          j["plan"]["balancer"] = to_string(*a.result->balancer);
        if (at_max) j["workload"] = workload_summary_json(o->docs, *at_max);
        j["result"] = a.result ? sim::to_json(m, s, *a.result) : nlohmann::json(nullptr);
        j["per_plan"] = nlohmann::json::array();
        for (std::size_t i = 0; i < a.per_structure.size(); ++i) {
          const auto& [p, n] = a.per_structure[i];
          // The plan at its own longest length (null where no length fits), not the search's start.
          nlohmann::json plan = sim::to_json(p);
          plan["seq_len"] = n > 0 ? nlohmann::json(n) : nlohmann::json(nullptr);
          if (const std::optional<Balancer> b = balancer_of(i); b && p.ring_degree > 1) plan["balancer"] = to_string(*b);
          j["per_plan"].push_back({{"plan", plan}, {"max_seq_len", n}});
        }
        j["rejected"] = nlohmann::json::array();
        for (const auto& r : a.rejected) j["rejected"].push_back({{"plan", sim::to_json(r.plan)}, {"reasons", r.reasons}});
        print_json(j);
      } else {
        fmt::print("{} on {}, {} GPUs{}\n{}\n", m.name, s.name, gpus, batch_text(space.global_batch, a.max_seq_len),
                   inferred_text(s));
        if (const std::string p = precision_text(space, s, o->search.precision); !p.empty()) fmt::print("{}\n", p);
        if (at_max) print_workload_summary(o->docs, *at_max);
        if (a.result) {
          fmt::print("longest sequence: {} tokens ({:.2f}M)\nplan: {}\n      {} tokens/s per GPU, optimizer step {}, "
                     "peak {} of {} GiB\n\n",
                     a.max_seq_len, double(a.max_seq_len) / (1 << 20), label(a.result->plan, a.result->balancer),
                     format_rate(a.result->tokens_per_s_per_gpu), seconds(a.result->step_time_s),
                     gib(a.result->peak_memory_bytes()), gib(a.result->capacity_bytes));
          if (!a.limit_why.empty()) fmt::print("ended by {}\n\n", a.limit_why);
          if (a.gap_count > 0) {
            fmt::print("shorter lengths that do not fit ({} range{}; the peak falls where the tile count steps up):\n",
                       a.gap_count, a.gap_count == 1 ? "" : "s");
            for (const sim::LengthGap& g : a.gaps) fmt::print("  {} .. {}\n", g.first, g.last);
            if (a.gap_count > std::int64_t(a.gaps.size())) fmt::print("  ... and {} more\n", a.gap_count - std::int64_t(a.gaps.size()));
            fmt::print("\n");
          }
        } else {
          fmt::print("{}\n", none_reason(a));
        }
        Table t({"plan (memory options as searched)", "max tokens"});
        for (std::size_t i = 0; i < a.per_structure.size(); ++i) {
          const auto& [p, n] = a.per_structure[i];
          t.add({label(p, balancer_of(i)), n ? format_count(n) + " (" + std::to_string(n) + ")" : "none"});
        }
        fmt::print("{}", t.str());
        fmt::print("{}", rejected_text(a.rejected, std::size_t(o->rejected), "--rejected"));
      }
      if (a.max_seq_len == 0)
        no_answer(std::any_of(a.rejected.begin(), a.rejected.end(), [](const sim::Rejection& r) { return r.valid; }));
    });
  });
}

}  // namespace seqpar::cli

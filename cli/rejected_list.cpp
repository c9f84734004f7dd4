#include "rejected_list.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "seqpar/core/plan.hpp"

namespace seqpar::cli {

std::string rejected_text(const std::vector<sim::Rejection>& rejected, std::size_t limit,
                          const std::string& more_flag) {
  if (rejected.empty()) return {};
  // One group per distinct reason, in the order of first appearance (the search's order: small
  // structures first), holding the first plan's words and how many plans share the reason.
  struct ReasonGroup {
    const std::string* reason;
    std::string first_plan;
    std::size_t plans = 0;
  };
  std::vector<ReasonGroup> groups;
  std::unordered_map<std::string_view, std::size_t> index;
  for (const sim::Rejection& r : rejected)
    for (const std::string& why : r.reasons) {
      auto [it, fresh] = index.try_emplace(why, groups.size());
      if (fresh) groups.push_back({&why, seqpar::describe(r.plan), 0});
      ++groups[it->second].plans;
    }
  std::string out = "\nrejected:\n";
  const std::size_t shown = std::min(limit, groups.size());
  for (std::size_t i = 0; i < shown; ++i) {
    const ReasonGroup& g = groups[i];
    if (g.plans == 1)
      out += fmt::format("  {}: {}\n", g.first_plan, *g.reason);
    else
      out += fmt::format("  {} and {} other plan{}: {}\n", g.first_plan, g.plans - 1, g.plans == 2 ? "" : "s", *g.reason);
  }
  if (shown < groups.size()) {
    // The plans with a reason not printed (a plan may have several reasons).
    std::size_t rest = 0;
    for (const sim::Rejection& r : rejected)
      for (const std::string& why : r.reasons)
        if (index.at(why) >= shown) {
          ++rest;
          break;
        }
    out += fmt::format("({} more reason{}, of {} plan{}; {} N or --json for all)\n", groups.size() - shown,
                       groups.size() - shown == 1 ? "" : "s", rest, rest == 1 ? "" : "s", more_flag);
  }
  return out;
}

void add_rejected_limit(CLI::App* cmd, int& limit) {
  cmd->add_option("--rejected", limit,
                  "Reasons of the rejected list to print (plans sharing a reason on one line); --json has every "
                  "rejected plan")
      ->capture_default_str();
}

}  // namespace seqpar::cli

#include "seqpar/reports/method_comparison.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "seqpar/core/parse.hpp"
#include "seqpar/core/plan.hpp"
#include "seqpar/reports/json_input.hpp"
#include "seqpar/reports/report_data.hpp"

namespace seqpar::reports {

using nlohmann::json;

namespace {

std::int64_t whole(const json& j, const char* key) { return static_cast<std::int64_t>(number_or(j, key)); }

// Plans with sp = 1 are data parallel only, whatever method they were asked for.
std::string method_of(const json& plan) { return whole(plan, "sp") == 1 ? "no SP" : string_or(plan, "method"); }
// The answers list the methods in core's order (kAllMethods), data parallelism alone last.
int method_rank(const std::string& m) {
  for (std::size_t i = 0; i < kAllMethods.size(); ++i)
    if (to_string(kAllMethods[i]) == m) return static_cast<int>(i);
  return static_cast<int>(kAllMethods.size());
}

bool fits(const json& p) {
  return p["valid"].get<bool>() && p["fits"].get<bool>() && p["tokens_per_s_per_gpu"].is_number();
}

// The checkpointing and the memory options that are not the defaults, in words.
std::string memory_words(const json& plan) {
  const std::string ckpt = string_or(plan, "checkpoint");
  std::string out = ckpt.empty() || ckpt == "none" ? "no checkpointing" : ckpt + " checkpointing";
  if (plan.contains("zero") && plan["zero"].is_number() && number_or(plan, "zero") != 1)
    out += fmt::format(", ZeRO-{}", whole(plan, "zero"));
  const std::pair<const char*, const char*> flags[] = {{"offload_checkpoints", "checkpoints offloaded"},
                                                       {"offload_optimizer", "optimizer offloaded"},
                                                       {"tiled_mlp", "tiled MLP"},
                                                       {"tiled_loss", "tiled loss"}};
  for (const auto& [key, words] : flags)
    if (plan.contains(key) && plan[key].is_boolean() && plan[key].get<bool>()) out += std::string(", ") + words;
  if (plan.contains("micro_batch") && number_or(plan, "micro_batch") > 1) out += fmt::format(", micro-batch {}", whole(plan, "micro_batch"));
  return out;
}

std::string gib(double bytes) { return fmt::format("{:.1f}", bytes / (1024.0 * 1024 * 1024)); }

std::string answer(const json& cell) {
  std::string out = fmt::format("{} on {} GPUs: ", format_count(cell["seq_len"].get<std::int64_t>()), cell["gpus"].get<std::int64_t>());
  const json& methods = cell["methods"];
  if (cell["best"].is_null()) {
    // Nothing fits: the leanest plan says how far off it is.
    const json* leanest = nullptr;
    for (const auto& m : methods)
      if (m["peak_memory_bytes"].is_number() && (!leanest || number_or(m, "peak_memory_bytes") < number_or(*leanest, "peak_memory_bytes")))
        leanest = &m;
    if (!leanest) return out + "no plan is valid";
    return out + fmt::format("no plan fits (the leanest, {}, needs {} of {} GiB per GPU)", describe_in_words((*leanest)["plan"]),
                             gib(number_or(*leanest, "peak_memory_bytes")), gib(number_or(*leanest, "memory_capacity_bytes")));
  }
  const json& best = cell["best"];
  const json& plan = best["plan"];
  // Documents from before tensor parallelism have no "tp": 1.
  const std::int64_t tp = std::max<std::int64_t>(1, whole(plan, "tp"));
  const std::int64_t dp = whole(plan, "gpus") / std::max<std::int64_t>(1, whole(plan, "sp") * tp);
  if (best["method"] == "no SP")
    out += tp > 1 ? fmt::format("TP {} x DP {} (no SP)", tp, dp) : fmt::format("DP {} only (no SP)", dp);
  else out += describe_in_words(plan) + (dp > 1 ? fmt::format(" x DP {}", dp) : "");
  out += ", " + memory_words(plan) + ", 1.00";
  for (const auto& m : methods) {
    if (m["method"] == best["method"]) continue;
    out += "; " + (m["fits"].get<bool>() ? fmt::format("{}: {:.2f}", describe_in_words(m["plan"]), number_or(m, "relative"))
                                          : fmt::format("{}: does not fit", string_or(m, "method")));
  }
  return out;
}

}  // namespace

json method_comparison(const json& points) {
  using Key = std::tuple<std::string, std::string, std::int64_t, std::int64_t>;  // system, model, gpus, length
  std::vector<Key> order;
  std::map<Key, std::map<std::string, std::vector<const json*>>> cells;  // method -> its valid points
  for (const auto& p : points) {
    if (p["origin"] != "prediction" || !p["valid"].get<bool>()) continue;
    const Key k{p["system"].get<std::string>(), p["model"].get<std::string>(), static_cast<std::int64_t>(number_or(p["plan"], "gpus")),
                static_cast<std::int64_t>(number_or(p["plan"], "seq_len"))};
    if (!cells.count(k)) order.push_back(k);
    cells[k][method_of(p["plan"])].push_back(&p);
  }
  json out = json::array();
  for (const Key& k : order) {
    // Each method's fastest fitting plan, else its leanest.
    std::vector<std::pair<std::string, const json*>> chosen;
    for (const auto& [method, pts] : cells[k]) {
      const json* pick = nullptr;
      for (const json* p : pts) {
        if (!pick) { pick = p; continue; }
        if (fits(*p) != fits(*pick)) { if (fits(*p)) pick = p; continue; }
        if (fits(*p) ? number_or(*p, "tokens_per_s_per_gpu") > number_or(*pick, "tokens_per_s_per_gpu")
                     : number_or(*p, "peak_memory_bytes") < number_or(*pick, "peak_memory_bytes"))
          pick = p;
      }
      chosen.push_back({method, pick});
    }
    std::stable_sort(chosen.begin(), chosen.end(), [](const auto& a, const auto& b) { return method_rank(a.first) < method_rank(b.first); });
    const json* best = nullptr;
    for (const auto& [method, p] : chosen)
      if (fits(*p) && (!best || number_or(*p, "tokens_per_s_per_gpu") > number_or(*best, "tokens_per_s_per_gpu"))) best = p;
    json cell = {{"system", std::get<0>(k)}, {"model", std::get<1>(k)}, {"gpus", std::get<2>(k)}, {"seq_len", std::get<3>(k)}};
    cell["best"] = best ? json{{"method", method_of((*best)["plan"])}, {"plan", (*best)["plan"]}, {"plan_label", (*best)["plan_label"]},
                               {"tokens_per_s_per_gpu", (*best)["tokens_per_s_per_gpu"]}, {"source", (*best)["source"]}}
                        : json(nullptr);
    cell["methods"] = json::array();
    for (const auto& [method, p] : chosen) {
      const bool ok = fits(*p);
      cell["methods"].push_back(
          {{"method", method}, {"fits", ok}, {"plan", (*p)["plan"]}, {"plan_label", (*p)["plan_label"]},
           {"tokens_per_s_per_gpu", ok ? (*p)["tokens_per_s_per_gpu"] : json(nullptr)},
           {"relative", ok ? json(number_or(*p, "tokens_per_s_per_gpu") / number_or(*best, "tokens_per_s_per_gpu")) : json(nullptr)},
           {"peak_memory_bytes", (*p)["peak_memory_bytes"]}, {"memory_capacity_bytes", (*p)["memory_capacity_bytes"]},
           {"source", (*p)["source"]}});
    }
    cell["answer"] = answer(cell);
    out.push_back(cell);
  }
  return out;
}

}  // namespace seqpar::reports
